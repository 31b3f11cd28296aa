"""The per-turn router: exactly one adapter per user turn.

Order of rules for a conversation:
  1. tool stickiness: the latest message is a tool result -> the adapter that issued the call,
     no scoring;
  2. score the latest user request with the configured policy (a cascade scores with its
     primary, then, per confidence band, keeps that choice, takes the default route, or asks
     the policy that dev data showed more accurate in that band: see bands.py);
  3. low confidence (or the policy abstains) -> the default route (coding);
  4. hysteresis: stay on the current adapter unless the winner leads it by the margin.

`score_texts` is the batched core (the benchmark uses it); `route` wraps it for one turn.
The router knows the backbone only through the Backbone protocol.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import replace

import numpy as np

from macaronic.router.arrow import ArrowPolicy
from macaronic.router.bands import BandTable
from macaronic.router.config import RouterConfig
from macaronic.router.conversation import current_specialist, request_text, tool_caller
from macaronic.router.embedding import EmbeddingPolicy
from macaronic.router.features import PREFILL_VIEWS, embed_texts, embedding_views, head_features, prefill_features
from macaronic.router.head import HeadPolicy, exit_threshold
from macaronic.router.probe import ProbePolicy
from macaronic.router.prompted import PromptedPolicy
from macaronic.router.state import RouterState, identity_hash
from macaronic.router.types import AdapterInfo, Backbone, RouteDecision


def training_pairs(examples: list[dict]) -> tuple[list[str], list[str]]:
    """(request texts, labels) for fitting; tool-result turns are left out (stickiness owns them)."""
    keep = [e for e in examples if e.get("kind") != "tool_result"]
    return [request_text(e["messages"]) for e in keep], [e["label"] for e in keep]


def decide(probs: dict[str, float], abstained: bool, current: str | None,
           config: RouterConfig) -> tuple[str, str]:
    """(adapter, reason) from a distribution: default route when unsure, then hysteresis."""
    top = max(probs, key=probs.get)
    if abstained or probs[top] < config.min_confidence:
        return (config.default_route if config.default_route in probs else top), "low-confidence-default"
    if (current in probs and top != current
            and probs[top] - probs[current] < config.hysteresis_margin):
        return current, "hysteresis"
    return top, "scored"


def backbone_layers(backbone) -> int:
    """The backbone's layer count; 0 for one without per-layer access (a unit-test double)."""
    return int(getattr(getattr(backbone, "args", None), "n_layers", 0) or 0) if hasattr(backbone, "hidden_views") else 0


class Router:
    def __init__(self, backbone: Backbone, bundle=None, state: RouterState | None = None,
                 config: RouterConfig | None = None, adapters: list[AdapterInfo] | None = None):
        if bundle is None:
            from macaronic.harness import load_bundle

            bundle = load_bundle()
        self.backbone, self.bundle = backbone, bundle
        self.config = config or RouterConfig.from_dict(bundle.router)
        self.adapters = adapters or AdapterInfo.from_bundle(bundle)
        self.state = state or RouterState()
        self.prompted = PromptedPolicy.from_bundle(bundle, self.config.default_route,
                                                   self.config.route_adapter,
                                                   self.config.prompt_max_tokens)
        self._desc_shortlister: dict[tuple[str, ...], EmbeddingPolicy] = {}
        self.stages: Counter = Counter()  # texts the head answered at its fast stage / at its own layer

    # ------------------------------------------------------------------ fit / save / load
    @classmethod
    def fit(cls, backbone: Backbone, train: list[dict], dev: list[dict], bundle=None,
            config: RouterConfig | None = None, adapters: list[AdapterInfo] | None = None,
            features: dict[str, np.ndarray] | None = None,
            head_cache: dict[str, np.ndarray] | None = None, data_hash: str | None = None,
            head: bool = True) -> "Router":
        """A new router whose embedding, probe, head and Arrow state is fitted on train,
        calibrated on dev, with the cascade's band table fitted on dev and the state bound to
        the backbone. `features` (text -> pooled row) and `head_cache` (text -> head row) may
        carry precomputed features."""
        router = cls(backbone, bundle, None, config, adapters)
        cfg = router.config
        features = {} if features is None else features
        texts, labels = training_pairs(train)
        dev_texts, dev_labels = training_pairs(dev)
        X, Xd = router.embed(texts, features), router.embed(dev_texts, features)
        emb = EmbeddingPolicy.fit(X, labels, Xd, dev_labels, cfg.embedding_threshold_quantile)
        probe = ProbePolicy.fit(X, labels, Xd, dev_labels, C=cfg.probe_c)
        head_cache = {} if head_cache is None else head_cache
        head = replace(HeadPolicy.fit(router.head_embed(texts, head_cache), labels,
                                      router.head_embed(dev_texts, head_cache), dev_labels, cfg.head_views,
                                      layer=cfg.head_layer(backbone_layers(backbone))), prefix=cfg.head_prefix) \
            if head else None
        arrow = ArrowPolicy.from_backbone(backbone, [a.name for a in router.adapters], X.shape[1],
                                          center=X.mean(0)).calibrate(Xd, dev_labels)
        fast = router._fit_fast(head, texts, labels, dev_texts, dev_labels, head_cache) \
            if head is not None and cfg.fast_layer is not None else None
        router.state = RouterState(embedding=emb, probe=probe, head=head, arrow=arrow, fast=fast)
        if head is not None and cfg.head_prefill:  # after the fast stage: its exit in front of this head
            router.state = replace(router.state, prefill=router.fit_prefill(train, dev, head.layer))
        if cfg.policy == "cascade" and dev_texts and getattr(router.state, cfg.cheap_policy, None) is not None:
            router.state = replace(router.state, bands=router.fit_bands(dev_texts, dev_labels, features, head_cache))
        router.state = router.state.bind(backbone, data_hash, identity_hash(router.bundle))
        return router

    def fit_prefill(self, train: list[dict], dev: list[dict], layer: int | None) -> HeadPolicy:
        """The head on the answer's own prefill (`features.prefill_features`: the bare base's state at
        the end of the user turn, in the layout it answers from, at `layer`), fitted like the head."""
        if not hasattr(self.backbone, "route_prefill"):
            raise ValueError("head_prefill needs a backbone with engine score requests (LLM.route_prefill)")
        keep = [e for e in train if e.get("kind") != "tool_result"]
        keep_dev = [e for e in dev if e.get("kind") != "tool_result"]
        X = prefill_features(self.backbone, self.bundle, [e["messages"] for e in keep], layer)
        Xd = prefill_features(self.backbone, self.bundle, [e["messages"] for e in keep_dev], layer)
        dev_labels = [e["label"] for e in keep_dev]
        head = HeadPolicy.fit(X, [e["label"] for e in keep], Xd, dev_labels, PREFILL_VIEWS, layer=layer)
        fast = self.state.fast
        if fast is None or not self._fast_reads_embeddings():
            return head
        # where the fast stage's answer stands in front of this head: chosen on dev against it, as for the head
        d = X.shape[1] // 2
        t = exit_threshold(fast.predict(Xd[:, d:])[0], head.predict(Xd)[0], fast.routes, head.routes, dev_labels)
        return replace(head, fast_above=t)

    def _fast_reads_embeddings(self) -> bool:
        """Whether the fast stage reads the prefill head's embedding views (token embeddings, chat views)."""
        fast = self.state.fast
        return fast is not None and fast.layer == 0 and tuple(fast.views) == ("chatmean", "chatlast")

    def _fit_fast(self, head: HeadPolicy, texts, labels, dev_texts, dev_labels, head_cache) -> HeadPolicy | None:
        """The head's fast first stage: the same views at `fast_layer` (0: the token embeddings, no
        forward at all), fitted like the head, with its exit confidence chosen on dev against the
        head (`head.exit_threshold`); None when no threshold loses nothing on dev."""
        layer = self.config.fast_layer
        if layer >= backbone_layers(self.backbone) > 0 or (head.layer is not None and layer >= head.layer):
            raise ValueError(f"fast_layer {layer} must lie below the head's layer "
                             f"({head.layer if head.layer is not None else backbone_layers(self.backbone)})")
        Xf = head_features(self.backbone, texts, head.views, layer=layer)
        Xfd = head_features(self.backbone, dev_texts, head.views, layer=layer)
        fast = HeadPolicy.fit(Xf, labels, Xfd, dev_labels, head.views, layer=layer)
        t = exit_threshold(fast.predict(Xfd)[0], head.predict(self.head_embed(dev_texts, head_cache))[0],
                           fast.routes, head.routes, dev_labels)
        return None if t is None else replace(fast, exit_above=t)

    def fit_bands(self, texts: list[str], labels: list[str], features=None, head_cache=None) -> BandTable:
        """The cascade's band table from dev turns: each option's final decision (after the
        low-confidence default) against the label, per band of the primary's confidence."""
        cfg = self.config
        names = [a.name for a in self.adapters]

        def correct(policy: str) -> tuple[np.ndarray, np.ndarray]:
            probs, abstain, _ = self.score_texts(texts, policy, features=features, head_cache=head_cache)
            picks = [decide(dict(zip(names, p)), bool(a), None, cfg)[0] for p, a in zip(probs, abstain)]
            return probs.max(1), np.array([p == l for p, l in zip(picks, labels)])

        conf, keep = correct(cfg.cheap_policy)
        options = {"keep": keep, "default": np.array([l == cfg.default_route for l in labels])}
        for c in cfg.cascade_candidates:
            if c != cfg.cheap_policy and (c == "prompted" or getattr(self.state, c, None) is not None):
                options[c] = correct(c)[1]
        return BandTable.fit(cfg.cheap_policy, conf, options, alpha=cfg.band_alpha)

    def save(self, path) -> str:
        return self.state.save(path)

    @classmethod
    def load(cls, path, backbone: Backbone, bundle=None, config: RouterConfig | None = None,
             adapters: list[AdapterInfo] | None = None) -> "Router":
        """A router on a saved state; refuses (StateMismatch) a state bound to another base, or to
        other adapters when the config can route through the adapter-derived (Arrow) part.
        Head, probe and embedding read the bare base, so they hold for any adapter set."""
        state = RouterState.load(path)
        router = cls(backbone, bundle, state, config, adapters)
        state.check(backbone, f"router state {path}", adapters=router.reads_adapter_state())
        return router

    def reads_adapter_state(self) -> bool:
        """Whether the configured policy can route through the Arrow prototypes."""
        cfg, bands = self.config, self.state.bands
        if cfg.policy == "arrow":
            return True
        if cfg.policy != "cascade":
            return False
        if cfg.cheap_policy == "arrow":
            return True
        if bands is not None and bands.primary == cfg.cheap_policy:
            return any(bands.options[int(c)] == "arrow" for c in bands.choice)
        return cfg.fallback_policy == "arrow"

    def with_config(self, **changes) -> "Router":
        """The same fitted router under a changed config (e.g. hysteresis_margin=0)."""
        r = Router(self.backbone, self.bundle, self.state, replace(self.config, **changes), self.adapters)
        r._desc_shortlister, r.stages = self._desc_shortlister, self.stages
        return r

    # ------------------------------------------------------------------ scoring
    def embed(self, texts: list[str], features: dict[str, np.ndarray] | None = None) -> np.ndarray:
        if features is None:
            return embed_texts(self.backbone, texts)
        missing = sorted({t for t in texts if t not in features})
        if missing:
            features.update(zip(missing, embed_texts(self.backbone, missing)))
        return np.stack([features[t] for t in texts]) if texts else np.zeros((0, 0), np.float32)

    def head_embed(self, texts: list[str], cache: dict[str, np.ndarray] | None = None) -> np.ndarray:
        head = self.state.head
        views, layer, prefix = (head.views, head.layer, head.prefix) if head is not None else \
            (self.config.head_views, self.config.head_layer(backbone_layers(self.backbone)), self.config.head_prefix)
        if cache is None:  # features for one decision, not kept: both view groups in one engine step
            return head_features(self.backbone, texts, views, together=True, layer=layer, prefix=prefix)
        missing = sorted({t for t in texts if t not in cache})
        if missing:
            cache.update(zip(missing, head_features(self.backbone, missing, views, layer=layer, prefix=prefix)))
        return np.stack([cache[t] for t in texts]) if texts else np.zeros((0, 0), np.float32)

    def _fitted(self, name: str):
        policy = getattr(self.state, name)
        if policy is None:
            raise RuntimeError(f"policy {name!r} is not fitted; use Router.fit or Router.load")
        return policy

    def _shortlist(self, X: np.ndarray, adapters: list[AdapterInfo]) -> np.ndarray:
        """[N, k] indices into adapters: the embedding policy's top k candidates per row."""
        names = [a.name for a in adapters]
        emb = self.state.embedding
        if emb is None or not set(names) <= set(emb.routes):
            key = tuple(names)
            if key not in self._desc_shortlister:
                desc = [f"{a.name}: {a.description} " + " ".join(a.boundary) for a in adapters]
                self._desc_shortlister[key] = EmbeddingPolicy.from_descriptions(
                    names, embed_texts(self.backbone, desc))
            emb = self._desc_shortlister[key]
        cos = _align(emb.logits(X), emb.routes, names, fill=-np.inf)
        return np.argsort(-cos, axis=1)[:, : self.config.shortlist_k]

    def _score_head(self, texts: list[str], adapters: list[AdapterInfo], head_cache=None) -> tuple[np.ndarray, np.ndarray]:
        """The head, in two stages when the state has a fast one: the fast head scores every text
        (at its layer: the token embeddings cost no forward), and only the texts it is less sure of
        than its exit confidence go on to the head's own layer. `stages` counts both."""
        fast, names = self.state.fast, [a.name for a in adapters]
        head = self._fitted("head")
        if fast is None or not texts:
            X = self.head_embed(texts, head_cache)
            self.stages["head"] += len(texts)
            return self._aligned(head, X, names)
        pf = fast.predict(head_features(self.backbone, texts, fast.views, together=True, layer=fast.layer))[0]
        probs, abstain = self._aligned(fast, None, names, pf)
        rest = np.flatnonzero(pf.max(1) < fast.exit_above)
        self.stages["fast"] += len(texts) - len(rest)
        self.stages["head"] += len(rest)
        if len(rest):
            probs[rest], abstain[rest] = self._aligned(head, self.head_embed([texts[i] for i in rest], head_cache), names)
        return probs, abstain

    def _aligned(self, policy, X, names: list[str], p: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """A fitted policy's probabilities over `names` (renormalised; abstain when it knows none)."""
        abstain = np.zeros(len(X) if p is None else len(p), bool)
        if p is None:
            p, abstain = policy.predict(X)
        probs = _align(p, policy.routes, names, fill=0.0)
        total = probs.sum(1, keepdims=True)
        # Routes the policy never saw get 0; if it knows none of the candidates, it abstains.
        abstain = abstain | (total[:, 0] <= 0)
        probs = np.where(total > 0, probs / np.where(total > 0, total, 1), 1.0 / len(names))
        return probs, abstain

    def _score_one_policy(self, name: str, texts: list[str], adapters: list[AdapterInfo],
                          X: np.ndarray | None, head_cache=None) -> tuple[np.ndarray, np.ndarray]:
        names = [a.name for a in adapters]
        if name == "head":
            return self._score_head(texts, adapters, head_cache)
        if name == "prompted":
            if len(adapters) <= self.config.shortlist_above:
                return self.prompted.predict(self.backbone, texts, adapters)
            idx = self._shortlist(X, adapters)
            probs = np.zeros((len(texts), len(adapters)))
            for i, t in enumerate(texts):
                probs[i, idx[i]] = self.prompted.predict_one(self.backbone, t, [adapters[j] for j in idx[i]])
            return probs, np.zeros(len(texts), bool)
        return self._aligned(self._fitted(name), X, names)

    def score_texts(self, texts: list[str], policy: str | None = None,
                    adapters: list[AdapterInfo] | None = None,
                    features: dict[str, np.ndarray] | None = None, head_cache=None):
        """Batched scoring: (probs [N, K] over `adapters`, abstain [N], policy used per row)."""
        adapters = adapters or self.adapters
        policy = policy or self.config.policy
        cfg = self.config
        uses = [cfg.cheap_policy] if policy == "cascade" else [policy]

        def pooled(rows: list[str], names: list[str]) -> np.ndarray | None:
            need = any(n not in ("prompted", "head") or
                       (n == "prompted" and len(adapters) > cfg.shortlist_above) for n in names)
            return self.embed(rows, features) if need and rows else None

        X = pooled(texts, uses)
        if policy != "cascade":
            probs, abstain = self._score_one_policy(policy, texts, adapters, X, head_cache)
            return probs, abstain, [policy] * len(texts)
        probs, abstain = self._score_one_policy(cfg.cheap_policy, texts, adapters, X, head_cache)
        used = [cfg.cheap_policy] * len(texts)
        bands = self.state.bands
        if bands is not None and bands.primary == cfg.cheap_policy:
            choice = bands.decide(probs.max(1)) if len(texts) else []
            for opt in sorted(set(choice) - {"keep"}):
                rows = [i for i, c in enumerate(choice) if c == opt]
                if opt == "default":  # dev showed the default route beats the primary here
                    abstain[rows] = True
                    continue
                sub = [texts[i] for i in rows]
                p2, a2 = self._score_one_policy(opt, sub, adapters, pooled(sub, [opt]), head_cache)
                probs[rows], abstain[rows] = p2, a2
                for i in rows:
                    used[i] = opt
            return probs, abstain, used
        # An old state without a band table: the fixed threshold and fallback policy.
        unsure = np.flatnonzero(abstain | (probs.max(1) < cfg.cascade_threshold))
        if len(unsure):
            sub = [texts[i] for i in unsure]
            p2, a2 = self._score_one_policy(cfg.fallback_policy, sub, adapters,
                                            None if X is None else X[unsure], head_cache)
            probs[unsure], abstain[unsure] = p2, a2
            for i in unsure:
                used[i] = cfg.fallback_policy
        return probs, abstain, used

    # ------------------------------------------------------------------ route
    def route(self, conversation: list[dict], adapters: list[AdapterInfo] | None = None,
              policy: str | None = None, features: dict[str, np.ndarray] | None = None) -> RouteDecision:
        """One adapter for the conversation's latest turn."""
        return self.route_many([conversation], adapters, policy, features)[0]

    def route_many(self, conversations: list[list[dict]], adapters: list[AdapterInfo] | None = None,
                   policy: str | None = None, features: dict[str, np.ndarray] | None = None,
                   cache: dict | None = None, head_cache: dict | None = None) -> list[RouteDecision]:
        """`route` for many conversations with one batched scoring pass; `ms` is the batch time
        divided evenly. `cache` ((policy, names, text) -> scores) lets callers rescore the same
        texts under another config (e.g. without hysteresis) for free."""
        t0 = time.perf_counter()
        adapters = adapters or self.adapters
        names = [a.name for a in adapters]
        policy = policy or self.config.policy
        sticky = [(tool_caller(c) or {}).get("specialist") if self.config.tool_stickiness else None
                  for c in conversations]
        texts = [request_text(c) for c, s in zip(conversations, sticky) if s is None]
        cache = {} if cache is None else cache
        key = (policy, tuple(names))
        todo = sorted({t for t in texts if (key, t) not in cache})
        if todo:
            probs, abstain, used = self.score_texts(todo, policy, adapters, features, head_cache)
            for i, t in enumerate(todo):
                cache[(key, t)] = (probs[i], bool(abstain[i]), used[i])
        ms = (time.perf_counter() - t0) * 1e3 / max(len(conversations), 1)
        out = []
        for convo, caller in zip(conversations, sticky):
            if caller is not None:
                out.append(RouteDecision(caller, {caller: 1.0}, 1.0, "sticky", ms, "sticky-tool"))
                continue
            p, abstained, used = cache[(key, request_text(convo))]
            dist = {n: float(x) for n, x in zip(names, p)}
            adapter, reason = decide(dist, abstained, current_specialist(convo), self.config)
            if reason == "scored" and policy == "cascade" and used != self.config.cheap_policy:
                reason = "cascade-fallback"
            elif reason == "low-confidence-default" and policy == "cascade" and used == self.config.cheap_policy \
                    and self.state.bands is not None and p.max() >= self.config.min_confidence:
                reason = "band-default"
            out.append(RouteDecision(adapter, dist, dist[adapter], used, ms, reason))
        return out

    # ------------------------------------------------------------------ the route from the answer's prefill
    def reads_prefill(self, bundle=None) -> bool:
        """Whether routes can read the answer's own prefill: the state has a prefill head (fitted with
        the `head_prefill` option), the backbone runs engine score requests, the policy is the default
        cascade (the cheapest route that holds), and `bundle` (default: the router's) opens the layout
        with the identity it was fitted on (another identity moves the states: the request-alone head
        routes instead)."""
        if self.state.prefill is None or not hasattr(self.backbone, "route_prefill") or self.config.policy != "cascade":
            return False  # (a policy asked for by name routes as it always did)
        want = self.state.binding.get("identity")
        return want is None or want == identity_hash(bundle or self.bundle)

    def route_prefilled(self, conversation: list[dict], read, adapters: list[AdapterInfo] | None = None) -> RouteDecision:
        """One adapter for the latest turn, the head reading the answer's own prefill: stickiness as
        `route`; the fast first stage where it stands in front of the prefill head (`fast_above`);
        otherwise `read()` runs the prefill (the caller keeps it for the answer) and returns its views
        (`features.prefill_row`), and the prefill head decides on them beside the request's embedding
        views. `policy` is "prefill" ("head" where the first stage answered, as `route` names it)."""
        t0 = time.perf_counter()
        adapters = adapters or self.adapters
        names = [a.name for a in adapters]
        caller = (tool_caller(conversation) or {}).get("specialist") if self.config.tool_stickiness else None
        if caller is not None:
            return RouteDecision(caller, {caller: 1.0}, 1.0, "sticky", (time.perf_counter() - t0) * 1e3, "sticky-tool")
        head, fast, used, p = self.state.prefill, self.state.fast, "prefill", None
        emb = embedding_views(self.backbone, [request_text(conversation)])
        if head.fast_above is not None and self._fast_reads_embeddings():
            pf = fast.predict(emb)[0]
            if pf.max() >= head.fast_above:
                p, abstain = self._aligned(fast, None, names, pf)
                used = "head"  # its first stage, as `route` names it
        if p is None:
            X = np.concatenate([np.asarray(read(), np.float32)[None], emb], 1)
            p, abstain = self._aligned(head, X, names)
        self.stages["fast" if used == "head" else "prefill"] += 1
        dist = {n: float(x) for n, x in zip(names, p[0])}
        adapter, reason = decide(dist, bool(abstain[0]), current_specialist(conversation), self.config)
        return RouteDecision(adapter, dist, dist[adapter], used, (time.perf_counter() - t0) * 1e3, reason)


def _align(values: np.ndarray, routes: tuple[str, ...], names: list[str], fill: float) -> np.ndarray:
    """Columns of `values` (ordered by routes) reordered to `names`; unknown names get `fill`."""
    out = np.full((values.shape[0], len(names)), fill, dtype=np.float64)
    for j, n in enumerate(names):
        if n in routes:
            out[:, j] = values[:, routes.index(n)]
    return out
