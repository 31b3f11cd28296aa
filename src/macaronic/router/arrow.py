"""Arrow policy: training-free routing from the adapters' own weights (PEFT's Arrow idea).

For each adapter and each LoRA pair (layer, target) the prototype is the top right-singular
vector v of ΔW = B·A: the input direction the adapter amplifies most. A hidden state h scores
an adapter by |<h, v>| (sign-free, since singular vectors have no sign), averaged over that
adapter's prototypes; a softmax over adapters gives probabilities, and one adapter is taken per
turn.

Approximation, on purpose: the Backbone protocol exposes only the mean-pooled *final-norm*
hidden state, not each layer's input to the LoRA-targeted projection. So we score that pooled
state against the prototypes of each adapter's *top* layer whose projection reads the residual
width D (q/k/v/gate/up; not o/down), and |<mean h, v>| stands in for the mean of |<h_t, v>| over
tokens. Optionally the pooled state is centred on a mean of unlabelled requests (no labels are
used); the fitted temperature is the only tuned scalar. Routes without adapter weights cannot
be scored and get probability 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch

from macaronic.router.features import fit_temperature, softmax
from macaronic.router.policybase import Saved
from macaronic.router.types import Backbone, adapter_pairs


def top_right_singular(A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
    """Top right-singular vector of B @ A without forming it: ΔW = B A, A: [r, d_in], B: [d_out, r].

    With A^T = Q R (Q: [d_in, r]), ΔW = (B R^T) Q^T, so ΔW's right-singular vectors are Q times
    those of the small [d_out, r] matrix B R^T.
    """
    Q, R = torch.linalg.qr(A.double().T)  # Q: [d_in, r], R: [r, r]
    _, _, Vh = torch.linalg.svd(B.double() @ R.T, full_matrices=False)  # Vh: [r, r]
    v = Q @ Vh[0]  # [d_in]
    return (v / v.norm()).float()


@dataclass(frozen=True, eq=False)
class ArrowPolicy(Saved):
    routes: tuple[str, ...]
    prototypes: np.ndarray  # [K, P, D], zero rows pad routes with fewer prototypes
    counts: np.ndarray  # [K] real prototypes per route (0: no adapter weights)
    center: np.ndarray  # [D] subtracted before scoring (zeros: none)
    temperature: float = 1.0
    name: ClassVar[str] = "arrow"

    @classmethod
    def from_backbone(cls, backbone: Backbone, routes: list[str], dim: int,
                      center: np.ndarray | None = None) -> "ArrowPolicy":
        have = set(backbone.adapters.names())
        protos: list[list[np.ndarray]] = []
        for name in routes:
            vs = []
            if name in have:
                pairs = {k: ab for k, ab in adapter_pairs(backbone, name).items()
                         if ab[0].shape[1] == dim}
                if pairs:
                    top = max(layer for layer, _ in pairs)
                    vs = [top_right_singular(A, B).numpy() for (layer, _), (A, B) in sorted(pairs.items())
                          if layer == top]
            protos.append(vs)
        P = max([len(v) for v in protos] + [1])
        arr = np.zeros((len(routes), P, dim), np.float32)
        for k, vs in enumerate(protos):
            for p, v in enumerate(vs):
                arr[k, p] = v
        c = np.zeros(dim, np.float32) if center is None else center.astype(np.float32)
        return cls(tuple(routes), arr, np.array([len(v) for v in protos]), c)

    def calibrate(self, X_dev: np.ndarray, dev_labels: list[str]) -> "ArrowPolicy":
        keep = [i for i, l in enumerate(dev_labels) if l in self.routes]
        yd = np.array([self.routes.index(dev_labels[i]) for i in keep])
        t = fit_temperature(self.logits(X_dev[keep]), yd)
        return ArrowPolicy(self.routes, self.prototypes, self.counts, self.center, t)

    def logits(self, X: np.ndarray) -> np.ndarray:
        H = X - self.center
        H = H / np.clip(np.linalg.norm(H, axis=-1, keepdims=True), 1e-8, None)  # [N, D]
        s = np.abs(np.einsum("nd,kpd->nkp", H, self.prototypes)).sum(-1)  # [N, K]
        s = s / np.maximum(self.counts, 1)
        return np.where(self.counts > 0, s, -np.inf)

    def predict(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return softmax(self.logits(X), self.temperature), np.zeros(len(X), bool)

