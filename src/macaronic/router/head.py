"""Route head: a trained linear head over the base's features of the request, C chosen on dev.

The head is multinomial logistic regression like the probe, but it reads a richer feature
vector (`features.head_features`: named views of one or two bare-base forwards, e.g. the mean
hidden state of the raw request and the last hidden state of the request in the chat
template; with `layer` set, of the residual stream entering that layer, so the forward stops
there), is trained on the template data *and* the hand-written train split, and picks its
regularisation C on dev (macro-F1, ties to the stronger regularisation) before a dev-fitted
temperature calibrates it. Stored as plain arrays; prediction is one matmul.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from macaronic.router.features import fit_temperature
from macaronic.router.policybase import LinearSoftmax, Saved

C_GRID = (0.003, 0.01, 0.03, 0.1, 0.3, 1.0)


def _macro_f1(y: np.ndarray, p: np.ndarray, k: int) -> float:
    f1 = []
    for c in range(k):
        tp, fp, fn = int(((p == c) & (y == c)).sum()), int(((p == c) & (y != c)).sum()), int(((p != c) & (y == c)).sum())
        f1.append(2 * tp / (2 * tp + fp + fn) if tp else 0.0)
    return float(np.mean(f1))


@dataclass(frozen=True, eq=False)
class HeadPolicy(Saved, LinearSoftmax):
    routes: tuple[str, ...]
    views: tuple[str, ...]  # which feature views, in order (see features.HEAD_VIEWS)
    mean: np.ndarray  # [F]
    scale: np.ndarray  # [F]
    coef: np.ndarray  # [K, F]
    intercept: np.ndarray  # [K]
    temperature: float = 1.0
    c: float = 1.0
    layer: int | None = None  # read the residual entering this layer (an early exit; 0: the token embeddings); None: the final norm
    exit_above: float | None = None  # the fast head of a two-stage head: its answer stands at this confidence or more
    prefix: bool = False  # its chat views were read with the template's opening computed once (`RouterConfig.head_prefix`)
    fast_above: float | None = None  # a prefill head: the fast stage's answer stands in front of it at this confidence
    name: ClassVar[str] = "head"

    def meta(self) -> dict:
        m = super().meta()
        for key in ("layer", "exit_above", "prefix", "fast_above"):  # unset: the meta (and the state id) as before the field existed
            if m.get(key) is None or m.get(key) is False:
                m.pop(key, None)
        return m

    @classmethod
    def fit(cls, X: np.ndarray, labels: list[str], X_dev: np.ndarray, dev_labels: list[str],
            views: tuple[str, ...], grid=C_GRID, seed: int = 0, layer: int | None = None) -> "HeadPolicy":
        from sklearn.linear_model import LogisticRegression

        routes = tuple(sorted(set(labels)))
        y = np.array([routes.index(l) for l in labels])
        keep = [i for i, l in enumerate(dev_labels) if l in routes]
        yd = np.array([routes.index(dev_labels[i]) for i in keep], dtype=np.int64)
        Xd = X_dev[keep] if len(keep) else np.zeros((0, X.shape[1]), X.dtype)
        mean, scale = X.mean(0), X.std(0) + 1e-6
        Z, Zd = (X - mean) / scale, (Xd - mean) / scale
        best = None
        for c in (grid if len(yd) else (1.0,)):  # no dev turns: nothing to choose C on
            clf = LogisticRegression(C=c, max_iter=3000, random_state=seed).fit(Z, y)
            score = _macro_f1(yd, clf.predict(Zd), len(routes)) if len(yd) else 0.0
            if best is None or score > best[0] + 1e-9:
                best = (score, c, clf)
        _, c, clf = best
        coef, intercept = clf.coef_, clf.intercept_
        if len(routes) == 2:
            coef = np.concatenate([-coef / 2, coef / 2])
            intercept = np.concatenate([-intercept / 2, intercept / 2])
        head = cls(routes, tuple(views), mean.astype(np.float32), scale.astype(np.float32),
                   coef.astype(np.float32), intercept.astype(np.float32), 1.0, float(c), layer)
        t = fit_temperature(head.logits(Xd), yd) if len(yd) else 1.0
        return cls(routes, head.views, head.mean, head.scale, head.coef, head.intercept, t, float(c), layer)


EXIT_GRID = (0.8, 0.85, 0.9, 0.95, 0.97, 0.98, 0.99, 0.995, 0.999)


def exit_threshold(fast_probs: np.ndarray, deep_probs: np.ndarray, fast_routes, deep_routes,
                   labels: list[str], grid=EXIT_GRID) -> float | None:
    """The fast head's exit confidence, chosen on dev: the lowest threshold at which the dev turns
    the fast head would answer alone (its confidence at least that) get at least as many right from
    it as from the deep head. None: no threshold answers a dev turn without losing one."""
    fast = np.array([fast_routes[i] == l for i, l in zip(fast_probs.argmax(1), labels)])
    deep = np.array([deep_routes[i] == l for i, l in zip(deep_probs.argmax(1), labels)])
    conf = fast_probs.max(1) if len(labels) else np.zeros(0)
    for t in grid:
        kept = conf >= t
        if kept.any() and fast[kept].sum() >= deep[kept].sum():
            return float(t)
    return None


