"""Request features from the frozen base: token ids and mean-pooled hidden states.

The router embeds the raw request text (no chat template): the template's fixed tokens would
dominate a mean over a short request. Long requests keep their head and tail.
"""

from __future__ import annotations

import numpy as np

from macaronic.router.types import Backbone

MAX_TOKENS = 256


def request_ids(backbone: Backbone, text: str, max_tokens: int = MAX_TOKENS) -> list[int]:
    ids = list(backbone.tokenizer.encode(text or " ", add_special_tokens=False)) or \
        list(backbone.tokenizer.encode(" ", add_special_tokens=False)) or [0]
    if len(ids) > max_tokens:
        # The ask is usually at the start or the end of a long paste; keep both.
        ids = ids[: max_tokens * 3 // 4] + ids[-(max_tokens // 4):]
    return ids


def embed_texts(backbone: Backbone, texts: list[str], batch_size: int = 16) -> np.ndarray:
    """[N, D] float32 mean-pooled final hidden states of the bare base, one row per text."""
    rows = []
    for i in range(0, len(texts), batch_size):
        batch = [request_ids(backbone, t) for t in texts[i:i + batch_size]]
        rows.append(backbone.pooled_hidden(batch).detach().float().cpu().numpy())
    if not rows:
        return np.zeros((0, 0), np.float32)
    return np.concatenate(rows).astype(np.float32)


def softmax(logits: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    z = logits / temperature
    m = np.max(z, axis=-1, keepdims=True)
    # -inf logits (routes a policy cannot score) become exactly 0; a row with nothing scorable
    # becomes uniform rather than NaN.
    e = np.where(np.isfinite(m), np.exp(z - np.where(np.isfinite(m), m, 0.0)), 1.0)
    return e / e.sum(axis=-1, keepdims=True)


def fit_temperature(logits: np.ndarray, y: np.ndarray) -> float:
    """The temperature minimising dev NLL, by a log-spaced grid (robust, no optimiser state)."""
    if len(y) == 0:
        return 1.0
    best_t, best = 1.0, np.inf
    for t in np.logspace(-3, 2, 101):
        p = softmax(logits, t)[np.arange(len(y)), y]
        nll = -np.mean(np.log(np.clip(p, 1e-12, None)))
        if nll < best:
            best_t, best = float(t), nll
    return best_t
