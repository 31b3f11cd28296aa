"""Statistics for the gate: bootstrap intervals, the paired bootstrap, exact McNemar.

Pure numpy, seeded: the same inputs always give the same interval.
"""

from __future__ import annotations

from math import comb

import numpy as np


def bootstrap_ci(x, resamples: int = 2000, confidence: float = 0.95, seed: int = 0) -> list[float] | None:
    """Percentile interval of the mean of x over tasks."""
    x = np.asarray(x, dtype=float)
    if len(x) == 0:
        return None
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, len(x), size=(resamples, len(x)))].mean(1)
    a = (1 - confidence) / 2
    return [float(np.quantile(means, a)), float(np.quantile(means, 1 - a))]


def paired_bootstrap(child, parent, resamples: int = 2000, confidence: float = 0.95,
                     seed: int = 0) -> tuple[float, list[float]] | tuple[None, None]:
    """(mean improvement, interval) resampling tasks with their pair of scores kept together."""
    c, p = np.asarray(child, dtype=float), np.asarray(parent, dtype=float)
    if len(c) != len(p):
        raise ValueError("paired samples differ in length")
    if len(c) == 0:
        return None, None
    return float((c - p).mean()), bootstrap_ci(c - p, resamples, confidence, seed)


def mcnemar(child_pass, parent_pass) -> dict:
    """Exact McNemar on paired binary outcomes: b = child-only passes, c = parent-only passes.
    p_worse is the one-sided p-value for 'the child is worse'."""
    b = sum(1 for x, y in zip(child_pass, parent_pass) if x and not y)
    c = sum(1 for x, y in zip(child_pass, parent_pass) if y and not x)
    n = b + c
    if n == 0:
        return {"b": 0, "c": 0, "p_two_sided": 1.0, "p_worse": 1.0}
    cdf = lambda k: sum(comb(n, i) for i in range(k + 1)) / 2 ** n  # noqa: E731
    return {"b": b, "c": c, "p_two_sided": min(1.0, 2 * cdf(min(b, c))), "p_worse": cdf(b)}
