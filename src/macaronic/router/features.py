"""Request features from the frozen base: token ids, mean-pooled hidden states, head views.

The embedding and probe policies embed the raw request text (no chat template): the template's
fixed tokens would dominate a mean over a short request. Long requests keep their head and tail.

The route head reads named views (HEAD_VIEWS) of two bare-base forwards: the raw request
("mean", "last": mean and last-position final hidden state) and the request as a user message
in the base's chat template ("chatmean", "chatlast"; the last position is the assistant header,
where the base has read the whole request). A backbone without per-position access (the unit
test double) gets its pooled state in place of "last" views and of early-layer views.
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


def embed_texts(backbone: Backbone, texts: list[str], batch_size: int = 1) -> np.ndarray:
    """[N, D] float32 mean-pooled final hidden states of the bare base, one row per text.

    One forward per text by default: a text's row then does not depend on which texts share its
    batch (BLAS blocking changes with the batch's shape), so a fitted state reproduces bit for bit."""
    rows = []
    for i in range(0, len(texts), batch_size):
        batch = [request_ids(backbone, t) for t in texts[i:i + batch_size]]
        rows.append(backbone.pooled_hidden(batch).detach().float().cpu().numpy())
    if not rows:
        return np.zeros((0, 0), np.float32)
    return np.concatenate(rows).astype(np.float32)


HEAD_VIEWS = ("mean", "last", "chatmean", "chatlast")


def chat_ids(backbone: Backbone, text: str, max_tokens: int = MAX_TOKENS) -> list[int]:
    """The request (cut like `request_ids`) as the only user message in the chat template."""
    ids = request_ids(backbone, text, max_tokens)
    if len(ids) < len(backbone.tokenizer.encode(text or " ", add_special_tokens=False)):
        text = backbone.tokenizer.decode(ids)
    return list(backbone.encode_chat([{"role": "user", "content": text or " "}], add_generation_prompt=True))


def template_prefix(backbone: Backbone) -> list[int]:
    """The chat template's fixed opening before a lone user message's text (the base's default
    system prompt and the user header): the same tokens for every request, computed once per
    backbone (`hidden_views(prefix=...)` keeps their K/V). Empty when the template has none."""
    got = getattr(backbone, "_route_template_prefix", None)
    if got is None:
        a, b = (list(backbone.encode_chat([{"role": "user", "content": t}], add_generation_prompt=True))
                for t in ("Hello there.", "What time is it?"))
        n = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        got = a[:n]
        try:
            backbone._route_template_prefix = got
        except AttributeError:  # a backbone that takes no attributes recomputes it
            pass
    return got


def _views(backbone: Backbone, batch: list[list[int]], layer: int | None = None,
           prefix: list[int] | None = None) -> tuple[np.ndarray, np.ndarray]:
    if hasattr(backbone, "hidden_views"):  # `layer`: an early exit, the residual entering it
        kw = {"layer": layer} if layer is not None else {}
        if prefix:  # the template's opening computed once
            kw["prefix"] = prefix
        mean, last = backbone.hidden_views(batch, **kw)
    else:  # no per-position or per-layer access: the pooled state stands in for every view
        mean = last = backbone.pooled_hidden(batch)
    return mean.detach().float().cpu().numpy(), last.detach().float().cpu().numpy()


def head_features(backbone: Backbone, texts: list[str], views: tuple[str, ...] = HEAD_VIEWS,
                  batch_size: int = 1, together: bool = False, layer: int | None = None,
                  prefix: bool = False) -> np.ndarray:
    """[N, len(views) * D] float32: the named views side by side, one row per text (one forward
    per text and view group by default, as in `embed_texts`). `together`: both view groups of a
    chunk in one backbone call (one engine step for a routed turn instead of two; the features
    then move by float noise, so fitted states are built without it). `layer`: the views of the
    residual stream entering that layer instead of the final-norm state (an early exit, the fast
    head's features). `prefix`: the chat group's template opening computed once (`template_prefix`)."""
    unknown = [v for v in views if v not in HEAD_VIEWS]
    if unknown:
        raise ValueError(f"unknown head views {unknown}; expected some of {HEAD_VIEWS}")
    rows = []
    for i in range(0, len(texts), batch_size):
        chunk = texts[i:i + batch_size]
        groups = []  # (mean view, last view, token ids per text)
        if {"mean", "last"} & set(views):
            groups.append(("mean", "last", [request_ids(backbone, t) for t in chunk]))
        if {"chatmean", "chatlast"} & set(views):
            groups.append(("chatmean", "chatlast", [chat_ids(backbone, t) for t in chunk]))
        got = {}
        opening = template_prefix(backbone) if prefix and hasattr(backbone, "hidden_views") else None
        if together and len(groups) > 1:
            mean, last = _views(backbone, [ids for g in groups for ids in g[2]], layer, opening)
            for j, (m, l, _) in enumerate(groups):
                got[m], got[l] = mean[j * len(chunk):(j + 1) * len(chunk)], last[j * len(chunk):(j + 1) * len(chunk)]
        else:
            for m, l, ids in groups:
                got[m], got[l] = _views(backbone, ids, layer, opening if m == "chatmean" else None)
        rows.append(np.concatenate([got[v] for v in views], axis=1))
    if not rows:
        return np.zeros((0, 0), np.float32)
    return np.concatenate(rows).astype(np.float32)


# The head on the answer's own prefill reads: the mean over the user turn and its last position of the
# bare base's residual entering the head's layer, in the layout the answer is computed in (one engine score
# request the answer continues), beside the request alone in the chat template at the token embeddings (the
# fast stage's views: a lookup, no forward).
PREFILL_VIEWS = ("usermean", "userlast", "embmean", "emblast")


def prefill_layout(bundle, messages: list[dict]) -> list[dict]:
    """The conversation as the bare base answers its last user turn (`prompts.conversation` with no
    role answering it): the layout a route head reads the answer's own prefill in."""
    from macaronic.prompts import conversation

    return conversation(bundle, None, messages)


def prefill_ids(backbone: Backbone, bundle, messages: list[dict]) -> tuple[list[int], int]:
    """(ids, start): `prefill_layout` up to the end of the last user turn (no assistant header), and
    the position where that turn's header starts."""
    ids = list(backbone.encode_chat(prefill_layout(bundle, messages), add_generation_prompt=False))
    return ids, backbone.turn_start(ids)


def embedding_views(backbone: Backbone, texts: list[str]) -> np.ndarray:
    """[N, 2D]: the request alone in the chat template at the token embeddings (mean, last): the
    prefill head's "embmean", "emblast", the same rows as a layer-0 fast stage's views."""
    return head_features(backbone, texts, ("chatmean", "chatlast"), together=True, layer=0)


def prefill_row(got: dict) -> np.ndarray:
    """A route prefill's result ({"mean", "last"} over the user turn) as the head's first two views."""
    return np.concatenate([got["mean"].detach().float().cpu().numpy(),
                           got["last"].detach().float().cpu().numpy()]).astype(np.float32)


def prefill_features(backbone: Backbone, bundle, conversations: list[list[dict]], layer: int | None) -> np.ndarray:
    """[N, 4D] float32: PREFILL_VIEWS of each conversation (`LLM.route_prefill`, one engine score
    request each, nothing cached between them: a fitted state reproduces bit for bit)."""
    from macaronic.router.conversation import request_text

    rows = []
    for msgs in conversations:
        ids, start = prefill_ids(backbone, bundle, msgs)
        rows.append(prefill_row(backbone.route_prefill(ids, start, layer)))
    if not rows:
        return np.zeros((0, 0), np.float32)
    return np.concatenate([np.stack(rows), embedding_views(backbone, [request_text(m) for m in conversations])], 1)


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
