"""The cascade's deferral table: per confidence band of the primary policy, who decides.

Fitted on dev turns. For each band of the primary's confidence, every option is scored on the
dev turns that fall in it: "keep" (the primary's own choice), "default" (the default route) and
each candidate policy. An option replaces the primary in a band only when dev shows it is more
accurate there, by an exact one-sided sign test on the turns where the two disagree in
correctness (wins vs losses, p <= `alpha`); otherwise the band keeps the primary. So a fallback
that is worse than the primary on dev (the prompted policy on this base) is never used.

Stored as plain arrays (edges, per-band choice index, per-option dev accuracy) in the router
state. This module knows nothing about models or texts: it sees confidences and correctness.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import comb
from typing import ClassVar

import numpy as np

EDGES = (0.0, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0)


def band_of(confidence: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Band index per row: band b holds (edges[b], edges[b+1]]; confidence 0 goes to band 0."""
    return np.clip(np.searchsorted(edges, confidence, side="left") - 1, 0, len(edges) - 2)


def sign_test_p(wins: int, losses: int) -> float:
    """One-sided exact binomial p-value of >= wins successes in wins + losses fair coin flips."""
    n = wins + losses
    if n == 0:
        return 1.0
    return sum(comb(n, k) for k in range(wins, n + 1)) / 2 ** n


@dataclass(frozen=True, eq=False)
class BandTable:
    primary: str
    options: tuple[str, ...]  # ("keep", "default", candidate policies...)
    edges: np.ndarray  # [B + 1]
    choice: np.ndarray  # [B] index into options
    dev_n: np.ndarray  # [B] dev turns per band
    dev_acc: np.ndarray  # [len(options), B] dev accuracy of each option per band (nan: empty band)
    name: ClassVar[str] = "bands"

    @classmethod
    def fit(cls, primary: str, confidence: np.ndarray, correct: dict[str, np.ndarray],
            edges=EDGES, alpha: float = 0.05) -> "BandTable":
        """`correct` maps "keep", "default" and each candidate to [N] bool correctness on dev."""
        options = ("keep", "default", *sorted(k for k in correct if k not in ("keep", "default")))
        edges = np.asarray(edges, np.float64)
        band = band_of(np.asarray(confidence, np.float64), edges)
        B = len(edges) - 1
        acc = np.full((len(options), B), np.nan)
        n = np.zeros(B, np.int64)
        choice = np.zeros(B, np.int64)
        keep = np.asarray(correct["keep"], bool)
        for b in range(B):
            m = band == b
            n[b] = int(m.sum())
            if not n[b]:
                continue
            better = []
            for k, opt in enumerate(options):
                ok = np.asarray(correct[opt], bool)[m]
                acc[k, b] = ok.mean()
                wins, losses = int((ok & ~keep[m]).sum()), int((~ok & keep[m]).sum())
                if opt != "keep" and wins > losses and sign_test_p(wins, losses) <= alpha:
                    better.append(k)
            if better:  # the most accurate of the options dev shows to beat the primary here
                choice[b] = max(better, key=lambda k: (acc[k, b], -k))
        return cls(primary, options, edges, choice, n, acc)

    def decide(self, confidence: np.ndarray) -> list[str]:
        """The option per row ("keep", "default" or a policy name)."""
        return [self.options[int(self.choice[b])] for b in band_of(np.asarray(confidence, np.float64), self.edges)]

    def rows(self) -> list[dict]:
        """Per band: edges, dev turns, each option's dev accuracy, the choice (for reports)."""
        out = []
        for b in range(len(self.edges) - 1):
            out.append({"band": [float(self.edges[b]), float(self.edges[b + 1])], "dev_n": int(self.dev_n[b]),
                        "dev_accuracy": {o: (None if np.isnan(self.dev_acc[k, b]) else round(float(self.dev_acc[k, b]), 4))
                                         for k, o in enumerate(self.options)},
                        "choice": self.options[int(self.choice[b])]})
        return out

    def arrays(self) -> dict[str, np.ndarray]:
        return {"edges": self.edges, "choice": self.choice, "dev_n": self.dev_n, "dev_acc": self.dev_acc}

    def meta(self) -> dict:
        return {"primary": self.primary, "options": list(self.options)}

    @classmethod
    def from_saved(cls, meta: dict, arrays: dict[str, np.ndarray]) -> "BandTable":
        return cls(meta["primary"], tuple(meta["options"]), arrays["edges"], arrays["choice"],
                   arrays["dev_n"], arrays["dev_acc"])
