"""Router configuration: a frozen dataclass read from the bundle's router.json."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

POLICIES = ("prompted", "embedding", "probe", "head", "arrow", "cascade")


@dataclass(frozen=True)
class RouterConfig:
    policy: str = "cascade"  # one of POLICIES
    cheap_policy: str = "probe"  # cascade: the primary, tried first
    fallback_policy: str = "prompted"  # cascade without a fitted band table (old states) only
    cascade_candidates: tuple[str, ...] = ("probe", "embedding", "arrow")  # band table options
    band_alpha: float = 0.05  # a candidate takes a band only if dev beats the primary at this p
    default_route: str = "coding"  # low confidence and ambiguity go here (the original's rule)
    tools_route: str | None = "agent"  # a request that carries tools goes here (`tools_route`); None: the head decides
    tools_decide: bool = False  # a request with tools (auto) that the tools rule's words or the head route: the
    #                             tools route's adapter reads it first and takes it if it opens a call, else the
    #                             head's specialist answers, a text one without the tools (`MoL.tools_decision`)
    tools_call_confidence: float = 0.95  # tools_decide: the agent takes a turn the head sent elsewhere only if it
    #                                      opens the call with at least this probability (chosen on the hand-written
    #                                      train turns); a turn the rule sent by its words, if it opens one greedily
    min_confidence: float = 0.4  # below: abstain -> default_route
    cascade_threshold: float = 0.8  # cheap confidence below this -> fallback policy
    hysteresis_margin: float = 0.15  # leave the current adapter only if the winner leads by this
    tool_stickiness: bool = True  # a tool result goes back to the adapter that called the tool
    shortlist_above: int = 30  # prompted: beyond this many candidates, shortlist by embedding
    shortlist_k: int = 8
    embedding_threshold_quantile: float = 0.05
    probe_c: float = 1.0
    head_views: tuple[str, ...] = ("mean", "last", "chatmean", "chatlast")
    head_depth: float | None = None  # the head reads the residual entering layer round(depth x layers) (None: final norm)
    head_prefix: bool = False  # the head's chat views keep the template's fixed opening (system prompt, user
    #                             header) computed once: only the request's own tokens run per route
    head_prefill: bool = False  # also fit a head on the answer's own prefill (the bare base's state at the end of the
    #                              user turn as served, at the head's layer): the MoL keeps that prefill for the answer
    fast_layer: int | None = None  # a fast first stage of the head on the residual entering this layer (0: the token
    #                                embeddings); its answer stands where dev showed it loses nothing (None: one stage)
    route_adapter: str | None = "chat"  # the adapter that reads the route prompt
    prompt_max_tokens: int = 1536  # prompted: beyond this, list descriptions without rules

    @classmethod
    def from_dict(cls, d: dict) -> "RouterConfig":
        known = {f.name for f in fields(cls)}
        errors = [f"unknown router option {k!r}" for k in d if k not in known]
        cfg = cls(**{k: (tuple(v) if isinstance(v, list) else v) for k, v in d.items() if k in known})
        for key in ("policy", "cheap_policy", "fallback_policy"):
            if getattr(cfg, key) not in POLICIES:
                errors.append(f"{key}={getattr(cfg, key)!r} is not one of {POLICIES}")
        if "cascade" in (cfg.cheap_policy, cfg.fallback_policy, *cfg.cascade_candidates):
            errors.append("a cascade cannot contain a cascade")
        errors += [f"cascade_candidates: {c!r} is not one of {POLICIES}" for c in cfg.cascade_candidates
                   if c not in POLICIES]
        if cfg.head_depth is not None and (isinstance(cfg.head_depth, bool) or not isinstance(cfg.head_depth, (int, float))
                                           or not 0 < cfg.head_depth <= 1):
            errors.append(f"head_depth={cfg.head_depth!r} must be a fraction of the layers in (0, 1] or null")
        if cfg.fast_layer is not None and (isinstance(cfg.fast_layer, bool) or not isinstance(cfg.fast_layer, int)
                                           or cfg.fast_layer < 0):
            errors.append(f"fast_layer={cfg.fast_layer!r} must be a layer index >= 0 (0: the token embeddings) or null")
        if (isinstance(cfg.tools_call_confidence, bool) or not isinstance(cfg.tools_call_confidence, (int, float))
                or not 0 <= cfg.tools_call_confidence <= 1):
            errors.append(f"tools_call_confidence={cfg.tools_call_confidence!r} must be a probability in [0, 1]")
        if errors:
            raise ValueError("invalid router config: " + "; ".join(errors))
        return cfg

    def head_layer(self, n_layers: int) -> int | None:
        """The layer whose entering residual the head reads on a base of `n_layers` (None: the
        final-norm state; a base without layer access (0) reads that too)."""
        if self.head_depth is None or n_layers <= 0:
            return None
        layer = max(1, round(self.head_depth * n_layers))
        return None if layer >= n_layers else layer

    def to_dict(self) -> dict:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(self).items()}


def default_route(bundle) -> str:
    """The one default route: the bundle's router.json `default_route` (else RouterConfig's), when
    it names one of the bundle's roles; else the bundle's first role."""
    route = RouterConfig.from_dict(bundle.router).default_route
    return route if route in bundle.role_names else bundle.role_names[0]


# Words of tool names that say nothing about a tool's domain (a request saying "find" or "list" is no
# sign that it wants *these* tools).
GENERIC_TOOL_WORDS = frozenset(
    "get set create add list find search lookup query update edit modify delete remove drop make new fetch read "
    "write send check calculate compute run do the and for with from info data details detail tool api value "
    "values id name type by all to of on in is my complete today current".split())


def _words(text: str) -> set[str]:
    import re

    text = re.sub(r"([a-z])([A-Z])", r"\1 \2", text)  # camelCase -> camel Case
    out = set()
    for w in re.findall(r"[A-Za-z]+", text.lower()):
        if len(w) >= 3:
            out.add(w[:-1] if w.endswith("s") and len(w) > 4 else w)
    return out


def mentions_tools(text: str, tools: list) -> bool:
    """Does the request name what one of the tools is about? A word of a tool's name (split on `_`,
    `.`, `-` and camelCase; generic verbs left out) that the request says too, or that one of its
    words starts (`remind` / `reminder`, five letters at least)."""
    vocab = set()
    for t in tools:
        fn = t.get("function", t) if isinstance(t, dict) else {}
        name = fn.get("name") if isinstance(fn, dict) else None
        if isinstance(name, str):
            vocab |= _words(name) - GENERIC_TOOL_WORDS
    said = _words(text) - GENERIC_TOOL_WORDS
    return any(w == v or (min(len(w), len(v)) >= 5 and (w.startswith(v) or v.startswith(w)))
               for w in said for v in vocab)


def choice_names_a_call(tool_choice) -> bool:
    """`tool_choice` "required" or a named function: the client wants a call, whatever the text."""
    return tool_choice == "required" or isinstance(tool_choice, dict)


def tools_route(bundle, tools, tool_choice, text: str = "", in_session: bool = False) -> str | None:
    """The one rule for requests that carry tools, answered by the bundle's `tools_route` role (the
    agent): every request whose `tool_choice` is "required" or names a function, and, with
    `tool_choice` auto (or absent), every request that names what one of its tools is about
    (`mentions_tools`: "what's the weather in Paris?" with `get_weather`) or that continues a tool
    session (`in_session`: an earlier assistant turn of the conversation called a tool, so a follow-up
    such as "finally, show the last 20 lines of it" is the agent's to decide). A request that carries
    tools but is about something else ("write me a poem", a greeting) is routed by the head as usual,
    and the tools stay available to whichever specialist answers. None when the rule does not apply
    or the bundle has no such role."""
    rule = tools_rule(bundle, tools, tool_choice, text, in_session)
    return rule[0] if rule else None


def tools_rule(bundle, tools, tool_choice, text: str = "", in_session: bool = False) -> tuple[str, str] | None:
    """`tools_route`'s (role, reason): "tool-choice", "request-names-its-tools" or "tool-session"
    (the first that holds), or None."""
    role = RouterConfig.from_dict(bundle.router).tools_route
    if not tools or tool_choice == "none" or role is None or role not in bundle.role_names:
        return None
    if choice_names_a_call(tool_choice):
        return role, "tool-choice"
    if mentions_tools(text, tools):
        return role, "request-names-its-tools"
    return (role, "tool-session") if in_session else None


def tool_session(messages: list[dict]) -> bool:
    """Did an assistant turn before the latest message call a tool? (A conversation an agent
    framework drives: its follow-up turns carry the same tools.)"""
    return any(m.get("role") == "assistant" and m.get("tool_calls") for m in messages[:-1] if isinstance(m, dict))
