"""What the fitted router policies share: how a policy is saved, and the standardised linear
softmax of the probe and the route head.

`Saved`: a frozen dataclass policy whose ndarray fields go to its npz and whose other fields
(routes, views, temperature, ...) go to state.json (router/state.py writes both). `LinearSoftmax`:
logits = standardised features @ coef.T + intercept, probabilities at the fitted temperature.
Knows nothing about features, backbones or routing rules.
"""

from __future__ import annotations

from dataclasses import fields

import numpy as np

from macaronic.router.features import softmax


class Saved:
    def arrays(self) -> dict[str, np.ndarray]:
        return {f.name: v for f in fields(self) if isinstance(v := getattr(self, f.name), np.ndarray)}

    def meta(self) -> dict:
        return {f.name: list(v) if isinstance(v, tuple) else v for f in fields(self)
                if not isinstance(v := getattr(self, f.name), np.ndarray)}

    @classmethod
    def from_saved(cls, meta: dict, arrays: dict[str, np.ndarray]):
        kw = {}
        for f in fields(cls):
            if f.name in arrays:
                kw[f.name] = arrays[f.name]
            elif f.name in meta:
                v = meta[f.name]
                kw[f.name] = tuple(v) if isinstance(v, list) else v
        return cls(**kw)


class LinearSoftmax:
    """Needs fields mean [F], scale [F], coef [K, F], intercept [K] and temperature."""

    def logits(self, X: np.ndarray) -> np.ndarray:
        return ((X - self.mean) / self.scale) @ self.coef.T + self.intercept  # [N, K]

    def predict(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(probs [N, K], abstain [N] bool: never; the router's min_confidence decides)."""
        return softmax(self.logits(X), self.temperature), np.zeros(len(X), bool)
