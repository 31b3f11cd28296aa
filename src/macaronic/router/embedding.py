"""Embedding policy: nearest centroid over mean-pooled base hidden states.

Features are centred on the training mean and L2-normalised (pooled hidden states share a large
common direction that would otherwise swamp cosine similarity); each route's centroid is the
normalised mean of its training rows. Logits are cosines; a temperature fitted on dev turns them
into probabilities. Each route gets its own abstain threshold, calibrated on dev: the `quantile`
of the top cosine among dev rows correctly routed there. A request whose best cosine is below
its winner's threshold abstains (the router then takes the default route).

`from_descriptions` builds zero-shot centroids from the routes' description texts; the prompted
policy uses it to shortlist candidates when no fitted centroids cover the routes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from macaronic.router.features import fit_temperature, softmax
from macaronic.router.policybase import Saved


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.clip(np.linalg.norm(x, axis=-1, keepdims=True), 1e-8, None)


@dataclass(frozen=True, eq=False)
class EmbeddingPolicy(Saved):
    routes: tuple[str, ...]
    mean: np.ndarray  # [D]
    centroids: np.ndarray  # [K, D], unit rows
    thresholds: np.ndarray  # [K] cosine below which a win abstains
    temperature: float = 1.0
    name: ClassVar[str] = "embedding"

    @classmethod
    def fit(cls, X: np.ndarray, labels: list[str], X_dev: np.ndarray | None = None,
            dev_labels: list[str] | None = None, quantile: float = 0.05) -> "EmbeddingPolicy":
        routes = tuple(sorted(set(labels)))
        y = np.array([routes.index(l) for l in labels])
        mean = X.mean(0)
        Z = _unit(X - mean)  # [N, D]
        centroids = _unit(np.stack([Z[y == k].mean(0) for k in range(len(routes))]))
        policy = cls(routes, mean.astype(np.float32), centroids.astype(np.float32),
                     np.full(len(routes), -np.inf, np.float32))
        if X_dev is None or not len(X_dev):
            return policy
        keep = [i for i, l in enumerate(dev_labels) if l in routes]
        yd = np.array([routes.index(dev_labels[i]) for i in keep])
        cos = policy.logits(X_dev[keep])
        thresholds = np.full(len(routes), -np.inf, np.float32)
        top, best = cos.argmax(1), cos.max(1)
        for k in range(len(routes)):
            ok = best[(top == k) & (yd == k)]
            if len(ok):
                thresholds[k] = np.quantile(ok, quantile)
        return cls(routes, policy.mean, policy.centroids, thresholds, fit_temperature(cos, yd))

    @classmethod
    def from_descriptions(cls, route_names: list[str], X_desc: np.ndarray) -> "EmbeddingPolicy":
        """Zero-shot: one centroid per route from the embedding of its description text."""
        mean = X_desc.mean(0) if len(X_desc) > 1 else np.zeros(X_desc.shape[1], np.float32)
        return cls(tuple(route_names), mean, _unit(X_desc - mean),
                   np.full(len(route_names), -np.inf, np.float32), 0.05)

    def logits(self, X: np.ndarray) -> np.ndarray:
        return _unit(X - self.mean) @ self.centroids.T  # [N, K] cosines

    def predict(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(probs [N, K], abstain [N] bool)."""
        cos = self.logits(X)
        abstain = cos.max(1) < self.thresholds[cos.argmax(1)]
        return softmax(cos, self.temperature), abstain

