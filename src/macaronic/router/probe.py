"""Probe policy: multinomial logistic regression on mean-pooled base hidden states.

Trained with scikit-learn on standardised features, then stored as plain arrays (mean, scale,
coef, intercept) so loading needs no pickle and prediction is one matmul. A temperature fitted
on dev calibrates the probabilities.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from macaronic.router.features import fit_temperature
from macaronic.router.policybase import LinearSoftmax, Saved


@dataclass(frozen=True, eq=False)
class ProbePolicy(Saved, LinearSoftmax):
    routes: tuple[str, ...]
    mean: np.ndarray  # [D]
    scale: np.ndarray  # [D]
    coef: np.ndarray  # [K, D]
    intercept: np.ndarray  # [K]
    temperature: float = 1.0
    name: ClassVar[str] = "probe"

    @classmethod
    def fit(cls, X: np.ndarray, labels: list[str], X_dev: np.ndarray | None = None,
            dev_labels: list[str] | None = None, C: float = 1.0, seed: int = 0) -> "ProbePolicy":
        from sklearn.linear_model import LogisticRegression

        routes = tuple(sorted(set(labels)))
        y = np.array([routes.index(l) for l in labels])
        mean, scale = X.mean(0), X.std(0) + 1e-6
        clf = LogisticRegression(C=C, max_iter=2000, random_state=seed)
        clf.fit((X - mean) / scale, y)
        coef, intercept = clf.coef_, clf.intercept_
        if len(routes) == 2:  # sklearn returns one row for two classes; make it two logits
            coef = np.concatenate([-coef / 2, coef / 2])
            intercept = np.concatenate([-intercept / 2, intercept / 2])
        policy = cls(routes, mean.astype(np.float32), scale.astype(np.float32),
                     coef.astype(np.float32), intercept.astype(np.float32))
        if X_dev is None or not len(X_dev):
            return policy
        keep = [i for i, l in enumerate(dev_labels) if l in routes]
        yd = np.array([routes.index(dev_labels[i]) for i in keep])
        t = fit_temperature(policy.logits(X_dev[keep]), yd)
        return cls(routes, policy.mean, policy.scale, policy.coef, policy.intercept, t)

