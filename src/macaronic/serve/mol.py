"""The Mixture-of-LoRA runtime, `MoL`: route -> answer -> (summary) for one turn, HTTP-free. It reads
the harness bundle (`macaronic.harness`: prompts, router options, decoding) and a backend.

`MoL.turn(messages, tools=None, model=None, sampling=None) -> TurnResult` runs one turn; the
evaluator calls it directly, the server calls the streaming twin `MoL.astream` and schedules
`MoL.summarize` after the reply went out.

1. **Which adapter produced each earlier assistant message.** An explicit `adapter` key on the
   message wins (the web chat sends it back; the Responses store keeps it); otherwise the
   segment memory is asked by content key = sha256(preceding user text, stripped content, tool
   call names and arguments). A miss means a foreign message: no adapter, no summary, verbatim.
   A card served in A2UI v0.9 is read back as the v0.8 the genui specialist writes (its `raw`
   text: what it decoded, else `genui/convert.to_v08` of the card), so its view is the v0.8 it
   was trained on whichever version the client renders.
2. **Route.** `model` = the public name -> routed; `model` = an adapter name -> forced (a role
   name or alias forces that role's adapter). A tool result continues on the adapter that issued
   the call and an A2UI `userAction` on the adapter that drew the card, both without a route hop.
   Otherwise the router (the bundle's policy) picks a role; the role's adapter answers (the
   adapter whose metadata names the role, else the adapter named like the role, else the bare
   base with the role's system prompt).
3. **Answer** from the adapter's view (views.py: `turn` mode shares the whole history exactly,
   `full` mode gets its own view with other adapters' segments folded into their summaries).
   GenUI answers are parsed, repaired and validated (text + A2UI messages); with `tools`, tool
   calls are parsed into OpenAI `tool_calls` against the client's tool schemas. With constraints on
   (the default) the reply decodes under the grammar `serve/structured.py` picks: tool calls name
   a given tool with schema-valid arguments, a `response_format` is met, and a GenUI card is
   closed into a valid one (`genui/close.py`).
4. **Summary** (only `full`-mode adapters): a 1-2 sentence hidden summary, kept in the memory.

Knows the bundle, the router and a backend; knows nothing about HTTP.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import time
from dataclasses import dataclass, field, fields, replace
from typing import Any, AsyncIterator

from macaronic.engine.sampling import SamplingParams
from macaronic.genui.convert import streamed_head, v08_text
from macaronic.pairs.ids import pair_id
from macaronic.router.config import RouterConfig, default_route, tool_session, tools_rule
from macaronic.router.conversation import request_text, tool_caller
from macaronic.router.features import prefill_layout, prefill_row
from macaronic.serve import pools, structured, views
from macaronic.serve.budgets import BudgetError, Budgets, check_request, off_loop
from macaronic.serve.callstream import CallStreamer
from macaronic.serve.backends import Backend, BackendError, Generation
from macaronic.serve.store import Store
from macaronic.specialist import BUILTIN, output_of
from macaronic.substrate.toolcalls import OPEN as CALL_OPEN

log = logging.getLogger("macaronic.serve")
SAMPLING_KEYS = {f.name for f in fields(SamplingParams)} - {"extra", "stop_token_ids"}
HOLD_CHARS = "<{`"  # with tools, streaming pauses where a tool call could start


def under(sp: SamplingParams, structure) -> SamplingParams:
    """The sampling a reply decodes with: under a grammar (tools, response_format, a card) `ignore_eos`
    yields, since the grammar's end is the reply's end."""
    return replace(sp, ignore_eos=False) if structure is not None and sp.ignore_eos else sp


def opens_call(token: str) -> bool:
    """Does this first token (leading space aside) begin a tool call: CALL_OPEN in one token, or
    its first piece on a vocabulary that spells it in several?"""
    t = token.lstrip()
    return bool(t) and (CALL_OPEN.startswith(t) or t.startswith(CALL_OPEN))


def opening_probability(logprobs: list[dict] | None, text: str = "") -> float:
    """The probability that a reply's first token begins a tool call: the mass of its top
    alternatives that `opens_call`; without logprobs, 1 or 0 by the token `text` itself."""
    import math

    if not logprobs or not logprobs[0].get("top_logprobs"):
        return float(opens_call(text))
    return min(1.0, sum(math.exp(t["logprob"]) for t in logprobs[0]["top_logprobs"] if opens_call(t["token"])))


class TurnError(Exception):
    """A request the harness refuses; `status` is the HTTP status it maps to."""

    def __init__(self, message: str, status: int = 400, code: str | None = None, param: str | None = None):
        super().__init__(message)
        self.status, self.code, self.param = status, code, param


@dataclass(frozen=True)
class HarnessConfig:
    public_name: str = "macaronic"
    summaries: bool = True  # the summary hop for full-mode adapters
    max_tokens_limit: int = 4096
    constrain: bool = True  # decode tool calls, response_format and GenUI cards under their grammar
    adopt_strays: bool = True  # a card's components its root does not reach go under it (genui/close.py)
    loop_cut: tuple[int, int] | None = (32, 64)  # (max period, min span) in tokens; None: never cut loops
    budgets: Budgets = Budgets()  # what one request's schemas and grammar may cost


@dataclass(frozen=True)
class Route:
    adapter: str | None  # None = the bare base
    specialist: str | None  # the bundle role it serves
    mode: str  # "full" | "turn" | "upper" (upper is served like turn: one shared view, no summary)
    policy: str  # router policy, or forced / sticky / sticky-action / default
    confidence: float
    ms: float
    reason: str
    probs: dict = field(default_factory=dict)
    # the answer's own prefill the route read (engine `Kept`): the generation continues it when its
    # layout does (the bare base or an assistant-header adapter answers); never shown or stored
    kept: Any = field(default=None, repr=False, compare=False)


@dataclass
class TurnResult:
    text: str  # everything the adapter generated
    content: str | None  # the assistant message content (prose only when there are tool calls)
    tool_calls: list[dict]
    finish_reason: str  # stop | length | tool_calls | cancelled
    route: Route
    usage: dict
    pair_id: str
    view: list[dict]  # the {role, content} messages the adapter answered from
    key: str  # segment memory key of the reply
    messages: list[dict]  # the annotated conversation including the reply
    genui: dict | None = None  # {valid, errors, repaired, text_response, a2ui}
    tool_error: str | None = None
    summary: str | None = None
    logprobs: list | None = None  # OpenAI logprob objects, one per generated token, when asked
    loop_period: int | None = None  # the reply was cut as a repetition loop of this many tokens
    constrained: str | None = None  # the grammar it decoded under: tools | json | genui

    @property
    def served_text(self) -> str:
        """The reply as graders and evaluators should read it: the generated text, except a GenUI
        card the harness closed (genui/close.py), which is served in its closed form."""
        return self.content if self.genui is not None and self.genui.get("closed") is not None else self.text

    @property
    def needs_summary(self) -> bool:
        return self.route.mode == "full" and self.finish_reason != "cancelled" and self.route.policy != "engine"

    def macaronic(self) -> dict:
        r = self.route
        out = {"adapter": r.adapter, "specialist": r.specialist, "output": output_of(r.specialist),
               "mode": r.mode, "policy": r.policy,
               "reason": r.reason, "confidence": round(r.confidence, 6), "route_ms": round(r.ms, 3),
               "prefill_tokens": self.usage.get("prefill_tokens", 0), "reused_tokens": self.usage.get("reused_tokens", 0),
               "pair_id": self.pair_id}
        if self.usage.get("upper_tokens"):  # positions whose lower layers the route's prefill (or a switch) gave
            out["upper_tokens"] = self.usage["upper_tokens"]
        if self.usage.get("ttft_ms") is not None and self.usage.get("total_ms") is not None:
            # the answer hop's own clock: time to its first token and decode time (a client's tok/s)
            out["ttft_ms"] = self.usage["ttft_ms"]
            out["decode_ms"] = round(self.usage["total_ms"] - self.usage["ttft_ms"], 3)
        if self.genui is not None:
            out["genui"] = self.genui
        if self.tool_error:
            out["tool_error"] = self.tool_error
        if self.constrained:
            out["constrained"] = self.constrained
        if self.loop_period is not None:
            out["loop_cut"] = {"period_tokens": self.loop_period}
        return out

    def message(self) -> dict:
        """The assistant message in OpenAI form plus the harness annotations."""
        m: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            m["tool_calls"] = self.tool_calls
        m["adapter"] = self.route.adapter
        if self.route.specialist:
            m["specialist"] = self.route.specialist
        return m


def user_action_of(message: dict) -> dict | None:
    """The {"userAction": ...} object when a user message is an A2UI client event."""
    text = message.get("content", "")
    if message.get("role") != "user" or not text.lstrip().startswith("{") or "userAction" not in text:
        return None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError:
        return None
    return obj if isinstance(obj, dict) and isinstance(obj.get("userAction"), dict) else None


def read_calls(text: str, finish: str, used: int | None, tools: list[dict], structure=None, parallel: bool = True,
               regex_s: float = 0.1) -> tuple[str | None, list[dict], str | None, str]:
    """(content, tool_calls, tool_error, finish_reason) of a reply with tools. The grammar admits
    only given tools with valid arguments; a call the token cap cut off is reported, never
    completed by guesswork, and the calls before it that completed are kept (finish "length" with
    the tool_calls, as OpenAI answers). `parallel=False`: the first call only."""
    from macaronic.substrate.toolcalls import CLOSE, OPEN, parse_tool_calls

    content, calls, tool_error = text, [], None
    cut = text.count(OPEN) > text.count(CLOSE)
    if structure is not None and structure.kind == "tools" and finish == "length" and (
            cut or structure.calls_required):
        done = text[:text.rfind(OPEN)] if cut else text
        parsed = parse_tool_calls(done, tools, regex_s) if OPEN in done else None
        if parsed is not None and not parsed.error:
            calls = [dict(c) for c in parsed.tool_calls]
        content = text.split(OPEN)[0].strip() or None
        if cut or not calls:
            tool_error = f"the tool call did not complete within max_tokens ({used})"
    else:
        parsed = parse_tool_calls(text, tools, regex_s)
        if parsed.error:
            tool_error = parsed.error
        elif parsed.tool_calls:
            calls, content, finish = [dict(c) for c in parsed.tool_calls], parsed.content or None, "tool_calls"
    return content, calls[:1] if not parallel else calls, tool_error, finish


class MoL:
    """One model-harness pair serving turns: a backend, a harness bundle, a router."""

    def __init__(self, backend: Backend, bundle=None, router=None, store: Store | None = None,
                 config: HarnessConfig = HarnessConfig()):
        if bundle is None:
            from macaronic.harness import load_bundle

            bundle = load_bundle()
        self.backend, self.bundle, self.router, self.config = backend, bundle, router, config
        self.store = store or Store(":memory:")
        self._pending: dict[str, asyncio.Future] = {}
        self._genui_schema: dict | None = None
        by_role, at_answer = {}, set()
        for role in bundle.role_names:
            a = self.adapter_for_role(role)
            meta = self.backend.adapters().get(a) if a else None
            if meta is not None:
                by_role[role] = meta.id or meta.name
                if meta.activation == "assistant":
                    at_answer.add(role)
        self.pair_id = pair_id(backend.base()["fingerprint"], by_role, bundle.id)  # macaronic.pairs rule
        # roles without their adapter and marked so answer as the bare base; roles whose adapter switches
        # on at the assistant header add no instruction before the user turn
        self.bundle = bundle.served(by_role, at_answer)

    @classmethod
    def from_llm(cls, llm, bundle=None, router=None, **kw) -> "MoL":
        from macaronic.serve.backends import LocalBackend

        return cls(LocalBackend(llm), bundle, router, **kw)

    def scratch(self) -> "MoL":
        """This pair on a throwaway memory: turns on it leave nothing in the store (the start-up
        warm-up, serve/warmup.py). Backend, router and bundle are shared, so is the GenUI schema."""
        import copy

        if any(output_of(r) == "card" for r in self.bundle.role_names):
            self.genui_schema()  # built on this MoL first: the copy shares it
        out = copy.copy(self)
        out.store, out._pending = Store(":memory:"), {}
        return out

    # ---- names ----

    def card_role(self) -> str:
        """The specialist that draws cards: the bundle's first role whose registry entry outputs one
        (the built-in card specialist's name when the bundle has none)."""
        cards = [n for n in self.bundle.role_names if output_of(n) == "card"]
        return cards[0] if cards else next(s.name for s in BUILTIN if s.output == "card")

    def adapter_for_role(self, role: str) -> str | None:
        adapters = self.backend.adapters()
        for name, meta in adapters.items():
            if meta.role == role:
                return name
        return role if role in adapters else None

    def models(self) -> list[str]:
        return [self.config.public_name, *self.backend.adapters()]

    def resolve(self, model: str | None) -> tuple[str | None, str | None] | None:
        """None when `model` routes; (adapter, specialist) when it forces one. TurnError if unknown."""
        if model in (None, "", self.config.public_name):
            return None
        if model == self.backend.base()["id"]:
            return None, None
        adapters = self.backend.adapters()
        if model in adapters:
            role = adapters[model].role
            return model, role if role in self.bundle.role_names else None
        try:
            role = self.bundle.role(model).name
        except KeyError:
            raise TurnError(f"unknown model {model!r}; use {self.config.public_name!r} (routed) or one of "
                            f"{sorted(adapters) or sorted(self.bundle.role_names)}", 404, "model_not_found",
                            "model") from None
        return self.adapter_for_role(role), role

    def mode_of(self, adapter: str | None) -> str:
        meta = self.backend.adapters().get(adapter) if adapter else None
        return meta.mode if meta else "turn"  # the bare base shares the history exactly

    # ---- memory ----

    def annotate(self, messages: list[dict]) -> list[dict]:
        """Fill in adapter / specialist / summary / raw of each assistant message (see 1. above)."""
        out = []
        for i, m in enumerate(messages):
            if m["role"] == "assistant":
                key = views.content_key(views.previous_user_text(messages, i), m["content"], m.get("tool_calls"))
                m = {**(self.store.recall(key) or {}), **m, "key": key}
                if not m.get("raw") and not m.get("tool_calls") and (v08 := v08_text(m["content"])) is not None:
                    m["raw"] = v08  # a v0.9 card read as the v0.8 the genui specialist writes (genui/convert.py)
                if m.get("adapter") and not m.get("specialist"):
                    meta = self.backend.adapters().get(m["adapter"])
                    role = meta.role if meta else (m["adapter"] if m["adapter"] in self.bundle.role_names else None)
                    if role:
                        m["specialist"] = role
            out.append(m)
        return out

    async def _await_summaries(self, messages: list[dict]) -> list[dict]:
        """A summary still being written for a message in this history: wait for it (same loop)."""
        loop = asyncio.get_running_loop()
        waiting = [self._pending[m["key"]] for m in messages if m.get("key") in self._pending]
        waiting = [f for f in waiting if f.get_loop() is loop]
        if not waiting:
            return messages
        await asyncio.gather(*waiting, return_exceptions=True)
        return [{**m, **({"summary": s} if (s := (self.store.recall(m["key"]) or {}).get("summary")) else {})}
                if m.get("key") else m for m in messages]

    # ---- route ----

    async def route(self, messages: list[dict], model: str | None = None, tools: list[dict] | None = None,
                    tool_choice=None) -> Route:
        forced = self.resolve(model)
        if forced is not None:
            adapter, role = forced
            return Route(adapter, role, self.mode_of(adapter), "forced", 1.0, 0.0, "forced")
        last = messages[-1]
        if last["role"] == "tool":
            caller = tool_caller(messages)
            if caller is not None and caller.get("adapter") in self.backend.adapters():
                a = caller["adapter"]
                return Route(a, caller.get("specialist"), self.mode_of(a), "sticky", 1.0, 0.0, "sticky-tool")
        if user_action_of(last) is not None:
            card = self.card_role()  # a user action on a card goes back to the specialist that draws cards
            drew = next((m for m in reversed(messages) if m["role"] == "assistant" and m.get("specialist") == card),
                        None)
            a = drew["adapter"] if drew is not None and drew.get("adapter") else self.adapter_for_role(card)
            if a is not None or card in self.bundle.role_names:
                return Route(a, card, self.mode_of(a), "sticky-action", 1.0, 0.0, "sticky-user-action")
        rule = tools_rule(self.bundle, tools, tool_choice, request_text(messages), tool_session(messages))
        if rule is not None:
            by_tools, why = rule
            a = self.adapter_for_role(by_tools)
            return Route(a, by_tools, self.mode_of(a), "tools", 1.0, 0.0, why)
        return await self.head_route(messages)

    async def head_route(self, messages: list[dict]) -> Route:
        """The router's choice for the latest request (the default route without a router)."""
        default = default_route(self.bundle)
        if self.router is None:
            a = self.adapter_for_role(default)
            return Route(a, default, self.mode_of(a), "default", 1.0, 0.0, "no-router")
        t0, kept = time.perf_counter(), {}
        try:
            reads = getattr(self.router, "reads_prefill", None)  # a router wrapper may not route on prefills
            if reads is not None and reads(self.bundle) and hasattr(self.backend, "route_prefill"):
                def read():  # the answer's own prefill, up to the head's layer; kept for the answer
                    got = self.backend.route_prefill(prefill_layout(self.bundle, messages), self.router.state.prefill.layer)
                    kept["kept"] = got["kept"]
                    return prefill_row(got)

                d = await pools.run(pools.TURN, self.router.route_prefilled, messages, read)
            else:
                d = await pools.run(pools.TURN, self.router.route, messages)  # never behind a compile storm
            role, policy, conf, probs, reason = d.role, d.policy, d.confidence, d.probs, d.reason
        except Exception as e:  # a broken router must not take the server down: default route
            log.warning("router failed (%s); default route %s", e, default)
            role, policy, conf, probs, reason = default, "default", 0.0, {}, f"router-error: {e}"
        ms = (time.perf_counter() - t0) * 1000
        a = self.adapter_for_role(role)
        return Route(a, role, self.mode_of(a), policy, float(conf), ms, reason, dict(probs), kept.get("kept"))

    # Routes the tools decision never revisits: forced, sticky, and the tools rule's (a `tool_choice` that
    # asks for a call; its words alone are revisited, see `tools_decision`).
    NOT_DECIDED = frozenset({"forced", "sticky", "sticky-action", "tools"})
    # Reasons of the tools rule that its decision revisits greedily, as the agent would answer.
    BY_RULE = frozenset({"request-names-its-tools", "tool-session"})

    async def tools_decision(self, msgs: list[dict], route: Route, tools: list[dict], structure) -> tuple[Route, bool]:
        """The bundle's `tools_decide` rule, for a request that carries tools (`tool_choice` auto)
        and was routed by the tools rule's words or session (`request-names-its-tools`, `tool-session`) or by the head to a text
        specialist: the specialist that decides calls (the tools route's adapter, the agent) reads
        the request as it would answer it, one greedy token under the tool grammar with its
        alternatives, and decides.
        - It opens a call (a turn the rule sent by its words: greedily, as it would answer; a turn
          the head sent elsewhere, with no word for the tools: with at least the bundle's
          `tools_call_confidence` probability): the turn is the agent's (its prefill is the
          answer's: the prefix cache keeps it).
        - Otherwise the head's specialist answers (the head is asked if the rule had routed);
          a text specialist answers without the tools, since the agent said no call is needed; the
          agent, if the head names it, answers with them.
        Returns (route, keep_tools): the route unchanged and the tools kept when the rule is off,
        does not apply (forced, sticky, a card, no agent adapter) or the read fails."""
        cfg = RouterConfig.from_dict(self.bundle.router)
        role = cfg.tools_route
        by_words = route.policy == "tools" and route.reason in self.BY_RULE
        if not cfg.tools_decide or role is None or not (by_words or route.policy not in self.NOT_DECIDED):
            return route, True
        if not by_words and (route.specialist == role or output_of(route.specialist) == "card"):
            return route, True
        a = self.adapter_for_role(role)
        if a is None:  # no trained adapter decides calls: the route stands, with the tools
            return route, True
        t0 = time.perf_counter()
        try:
            first = await self.call_opening(msgs, a, role, tools, structure)
        except BackendError as e:  # an optimisation of the route, never a reason to fail the turn
            log.warning("the tools decision failed (%s); the route stands, with the tools", e)
            first = None
        ms = (time.perf_counter() - t0) * 1000
        if first is None:
            return route, True
        token, p_open = first
        if opens_call(token) if by_words else p_open >= cfg.tools_call_confidence:
            why = route.reason if by_words else "tools-decided-call"
            return Route(a, role, self.mode_of(a), "tools", route.confidence, route.ms + ms, why, route.probs), True
        head = await self.head_route(msgs) if by_words else route
        why = f"{head.reason}; tools-decided-no-call"
        answered = Route(head.adapter, head.specialist, head.mode, head.policy, head.confidence, ms + head.ms, why,
                         head.probs)
        return answered, head.specialist == role or output_of(head.specialist) == "card"

    async def call_opening(self, msgs: list[dict], adapter: str, role: str, tools: list[dict],
                           structure) -> tuple[str, float] | None:
        """`adapter` (serving `role`) reads the request as it would answer it: one greedy token under
        the tool grammar, with its top-5 alternatives. (that token, the probability that it opens a
        call: `opening_probability`); None if the generation failed. BackendError propagates."""
        view = views.build_view(msgs, self.bundle, adapter=adapter, mode=self.mode_of(adapter), specialist=role,
                                tools=tools)
        stream = self.backend.stream(view, adapter, SamplingParams(max_tokens=1, temperature=0.0),
                                     structure=structure.spec if structure is not None else None, logprobs=5)
        try:
            async for item in stream:
                if isinstance(item, Generation):
                    if item.finish_reason == "error":
                        return None
                    return item.text, opening_probability(item.logprobs, item.text)
        finally:
            await stream.aclose()
        return None

    # ---- sampling ----

    def sampling_for(self, role: str | None, overrides: dict | SamplingParams | None) -> SamplingParams:
        if isinstance(overrides, SamplingParams):
            sp = overrides
        else:
            base = {}
            if role is not None and role in self.bundle.role_names:
                base = {k: v for k, v in self.bundle.decoding_for(role).items() if k in SAMPLING_KEYS}
            given = {k: v for k, v in (overrides or {}).items() if v is not None}
            unknown = set(given) - SAMPLING_KEYS
            if unknown:
                raise TurnError(f"unknown sampling options {sorted(unknown)}")
            params = {"loop_cut": self.config.loop_cut, **base, **given}
            if isinstance(params.get("stop"), (list, tuple)):
                params["stop"] = tuple(params["stop"])
            elif isinstance(params.get("stop"), str):
                params["stop"] = (params["stop"],)
            try:
                sp = SamplingParams(**params)
            except TypeError as e:
                raise TurnError(str(e)) from None
        if sp.seed is not None and not (isinstance(sp.seed, int) and 0 <= sp.seed < 2**63):
            raise TurnError(f"seed must be an integer in [0, 2**63), got {sp.seed!r}", param="seed")
        try:
            return sp.validate(self.config.max_tokens_limit)
        except ValueError as e:
            raise TurnError(str(e), param="max_tokens" if "max_tokens" in str(e) else None) from None

    # ---- the turn ----

    def structure(self, tools, tool_choice, response_format, role: str | None = None, parallel: bool = True):
        """The grammar a reply decodes under (serve/structured.py decides); TurnError if unenforceable."""
        if not self.config.constrain:
            if response_format is not None:
                structured.response_schema(response_format)  # still refuse a malformed one
            return None
        try:
            return structured.structure_for(tools=tools, tool_choice=tool_choice, response_format=response_format,
                                            role=role, genui_schema=self.genui_schema() if output_of(role) == "card" else None,
                                            parallel_tool_calls=parallel)
        except structured.StructureError as e:
            raise TurnError(str(e), 400, "invalid_structure", e.param) from None

    async def astructure(self, tools, tool_choice, response_format, role: str | None = None, parallel: bool = True):
        """`structure` off the event loop, within the compile budget (it builds each tool's grammar;
        with `budgets.stoppable`, in a worker process that is killed at the budget)."""
        b = self.config.budgets
        if not tools and response_format is None and output_of(role) != "card":  # no schema: nothing to build or compile
            return self.structure(tools, tool_choice, response_format, role, parallel)
        try:
            check_request(tools, response_format, b)
            if not self.config.constrain:
                return await off_loop(self.structure, tools, tool_choice, response_format, role, parallel,
                                      budget_s=b.compile_s, what="checking the schema")
            genui = self.genui_schema() if output_of(role) == "card" else None
            build = functools.partial(structured.structure_for, tools=tools, tool_choice=tool_choice,
                                      response_format=response_format, role=role, genui_schema=genui,
                                      parallel_tool_calls=parallel)
            return await off_loop(build, budget_s=b.compile_s, what="building the grammar", stoppable=b.stoppable)
        except BudgetError as e:
            raise TurnError(str(e), 400, e.code, e.param or "tools") from None
        except structured.StructureError as e:
            raise TurnError(str(e), 400, "invalid_structure", e.param) from None

    def genui_schema(self) -> dict:
        if self._genui_schema is None:  # built on first use: most servers never draw a card
            from macaronic.genui.grammar import contract_schema

            self._genui_schema = contract_schema()
        return self._genui_schema

    async def prepare(self, messages, tools, model, sampling, tool_choice, response_format, parallel: bool = True):
        """Everything before generation: checks, memory, route, sampling, view, structure."""
        try:
            msgs = views.normalize_messages(messages)
        except ValueError as e:
            raise TurnError(str(e), param="messages") from None
        if tools is not None and (not isinstance(tools, list) or any(
                not isinstance(t, dict) or not isinstance(t.get("function"), dict)
                or not isinstance(t["function"].get("name"), str) for t in tools)):
            raise TurnError("tools must be a list of {\"type\": \"function\", \"function\": {\"name\", ...}}",
                            param="tools")
        use_tools = bool(tools) and tool_choice != "none"
        self.sampling_for(None, sampling)  # refuse bad sampling before any routing work
        early = await self.astructure(tools, tool_choice, response_format, parallel=parallel)  # before routing too
        msgs = await self._await_summaries(self.annotate(msgs))
        route = await self.route(msgs, model, tools, tool_choice)
        if use_tools and response_format is None and not (early is not None and early.calls_required):
            route, keep_tools = await self.tools_decision(msgs, route, tools, early)
            if not keep_tools:
                use_tools, early = False, None
        sp = self.sampling_for(route.specialist, sampling)
        view = views.build_view(msgs, self.bundle, adapter=route.adapter, mode=route.mode,
                                specialist=route.specialist, tools=tools if use_tools else None)
        required = early is not None and early.calls_required
        structure = early
        card = output_of(route.specialist) == "card"
        if card and not required and response_format is None:
            structure = await self.astructure(None, None, None, role=route.specialist)  # a card, never calls
        parse_calls = use_tools and (not card or required)
        return msgs, route, sp, view, structure, parse_calls, tools if parse_calls else None

    async def astream(self, messages: list[dict], tools: list[dict] | None = None, model: str | None = None,
                      sampling: dict | SamplingParams | None = None, tool_choice: Any = None,
                      raw: bool = False, *, response_format: Any = None, logprobs: int | None = None,
                      parallel_tool_calls: bool = True, a2ui_version: str = "0.8") -> AsyncIterator[str | TurnResult]:
        """Text deltas (str) of the answer, with tools `CallDelta`s as calls decode, then one TurnResult.
        Closing early cancels the generation. `parallel_tool_calls=False`: at most one call.
        `a2ui_version`: the A2UI version the client renders; a card in another version than the
        specialist writes (v0.8) is converted when whole. A card (converted, or closed under
        constraints) streams only its text_response while it decodes, already in the served form
        (`convert.streamed_head`), then the rest of the served card.
        `raw`: no harness at all (engine-only serving): the messages as given, `model` must name
        an adapter or the base, no routing, parsing or memory (a `response_format` still applies)."""
        if raw:
            try:
                msgs = views.normalize_messages(messages)
            except ValueError as e:
                raise TurnError(str(e), param="messages") from None
            structure = await self.astructure(None, None, response_format)
            async for item in self._raw(msgs, model, sampling, structure, logprobs):
                yield item
            return
        msgs, route, sp, view, structure, parse_calls, call_tools = await self.prepare(
            messages, tools, model, sampling, tool_choice, response_format, parallel_tool_calls)
        gen: Generation | None = None
        # a card streams its text_response as it decodes and the rest once served: converted to another
        # version, or closed (the closer may change a card that decoded whole, genui/close.py)
        converted = output_of(route.specialist) == "card" and (a2ui_version != "0.8" or self.config.constrain)
        buf, sent, hold, shown = "", 0, converted, ""  # shown: what went out of a converted card
        # under the tool grammar a call's layout is fixed: stream its name and arguments as they decode
        calls = CallStreamer() if parse_calls and structure is not None and structure.kind == "tools" else None
        stream = self.backend.stream(view, route.adapter, under(sp, structure),
                                     structure=structure.spec if structure else None, logprobs=logprobs,
                                     **({"resume": route.kept} if route.kept is not None else {}))
        try:
            async for item in stream:
                if isinstance(item, Generation):
                    gen = item
                    break
                buf += item
                if calls is not None:
                    for piece in calls.feed(item):
                        yield piece
                    continue
                if hold:
                    head = streamed_head(buf) if converted else ""  # v0.8: only what the card wrote (its own escapes)
                    if head.startswith(shown) and len(head) > len(shown) and (a2ui_version != "0.8" or buf.startswith(head)):
                        yield head[len(shown):]
                        shown = head
                    continue
                out = buf[sent:]
                if parse_calls:
                    cut = min((i for i in (out.find(c) for c in HOLD_CHARS) if i >= 0), default=-1)
                    if cut >= 0:
                        out, hold = out[:cut], True
                sent += len(out)
                if out:
                    yield out
        except BackendError as e:
            raise TurnError(str(e), e.status, e.code, e.param) from None
        finally:
            await stream.aclose()
        if gen is None:
            raise TurnError("the engine ended without a result", 502)
        if gen.finish_reason == "error":
            raise TurnError(f"generation failed: {gen.error}", 500, "engine_error")
        result = await self._afinish(msgs, route, view, gen, call_tools, structure, parallel_tool_calls, a2ui_version)
        rest = ""
        if calls is not None:
            if len(calls.ids) >= len(result.tool_calls):  # the ids the client already saw (a cut last call: more)
                for c, cid in zip(result.tool_calls, calls.ids):
                    c["id"] = cid
            rest = calls.buf if not calls.in_call and not result.tool_calls and calls.buf.strip() else ""
        elif result.tool_calls or result.tool_error:
            prose, shown = result.content or "", buf[:sent].strip()
            rest = prose[len(shown):] if prose.startswith(shown) else ""
        elif converted:  # the served card after its streamed head (a head the closer changed: whole, again)
            served = (result.content or "") if result.genui is not None else buf
            rest = served[len(shown):] if served.startswith(shown) else served
        else:
            rest = buf[sent:]
        if rest:
            yield rest
        yield result

    async def asample(self, messages: list[dict], n: int, tools: list[dict] | None = None, model: str | None = None,
                      sampling: dict | SamplingParams | None = None, tool_choice: Any = None, *,
                      response_format: Any = None, logprobs: int | None = None,
                      parallel_tool_calls: bool = True, a2ui_version: str = "0.8") -> list[TurnResult]:
        """n answers to one turn (one route, one view, one shared prefill): the `n` of Chat Completions.
        Sample i uses seed + i when a seed is given, so the answers differ and still reproduce."""
        msgs, route, sp, view, structure, parse_calls, call_tools = await self.prepare(
            messages, tools, model, sampling, tool_choice, response_format, parallel_tool_calls)
        from dataclasses import replace

        sps = [sp if sp.seed is None else replace(sp, seed=(sp.seed + i) % 2**63) for i in range(n)]
        if not hasattr(self.backend, "sample_n"):
            raise TurnError(f"n > 1 is not supported by the {self.backend.label} engine", 400, "unsupported", "n")
        try:
            gens = await self.backend.sample_n(view, route.adapter, sps, structure=structure.spec if structure else None,
                                               logprobs=logprobs,
                                               **({"resume": route.kept} if route.kept is not None else {}))
        except BackendError as e:
            raise TurnError(str(e), e.status, e.code, e.param) from None
        if any(g.finish_reason == "error" for g in gens):
            raise TurnError(f"generation failed: {next(g.error for g in gens if g.finish_reason == 'error')}", 500,
                            "engine_error")
        return [await self._afinish(msgs, route, view, g, call_tools, structure, parallel_tool_calls, a2ui_version)
                for g in gens]

    async def _raw(self, msgs: list[dict], model: str | None, sampling, structure=None,
                   logprobs: int | None = None) -> AsyncIterator[str | TurnResult]:
        adapters = self.backend.adapters()
        if model != self.backend.base()["id"] and model not in adapters:
            raise TurnError(f"unknown model {model!r}; this engine serves {[self.backend.base()['id'], *adapters]}",
                            404, "model_not_found", "model")
        adapter = None if model == self.backend.base()["id"] else model
        route = Route(adapter, None, self.mode_of(adapter), "engine", 1.0, 0.0, "engine-only")
        sp = self.sampling_for(None, sampling)
        view = [{"role": m["role"], "content": views.render_assistant(m) if m["role"] == "assistant" else m["content"]}
                for m in msgs]
        gen = None
        stream = self.backend.stream(view, adapter, under(sp, structure),
                                     structure=structure.spec if structure else None, logprobs=logprobs)
        try:
            async for item in stream:
                if isinstance(item, Generation):
                    gen = item
                else:
                    yield item
        except BackendError as e:
            raise TurnError(str(e), e.status, e.code, e.param) from None
        finally:
            await stream.aclose()
        if gen is None or gen.finish_reason == "error":
            raise TurnError(f"generation failed: {gen.error if gen else 'no result'}", 500, "engine_error")
        usage = {k: gen.usage.get(k) for k in ("prompt_tokens", "completion_tokens", "prefill_tokens",
                                               "reused_tokens", "upper_tokens", "ttft_ms", "total_ms")}
        yield TurnResult(gen.text, gen.text, [], gen.finish_reason, route, usage, self.pair_id, view, "",
                         msgs + [{"role": "assistant", "content": gen.text}], logprobs=gen.logprobs,
                         loop_period=gen.loop_period, constrained=structure.kind if structure else None)

    async def _afinish(self, msgs: list[dict], route: Route, view: list[dict], gen: Generation,
                       tools: list[dict] | None, structure=None, parallel: bool = True,
                       a2ui_version: str = "0.8") -> TurnResult:
        """`_finish`, with the tool calls read off the event loop (a call is checked against the
        client's schema: its patterns run, each within the regex budget)."""
        read = None
        if tools:
            read = await pools.run(pools.CHECKS, read_calls, gen.text, gen.finish_reason,
                                   gen.usage.get("completion_tokens"), tools, structure, parallel,
                                   self.config.budgets.regex_s)
        return self._finish(msgs, route, view, gen, tools, structure, read, a2ui_version)

    def _finish(self, msgs: list[dict], route: Route, view: list[dict], gen: Generation,
                tools: list[dict] | None, structure=None, read: tuple | None = None,
                a2ui_version: str = "0.8") -> TurnResult:
        text, content, calls, tool_error, genui, v08 = gen.text, gen.text, [], None, None, None
        finish = gen.finish_reason
        if tools:
            content, calls, tool_error, finish = read or read_calls(
                text, finish, gen.usage.get("completion_tokens"), tools, structure, True, self.config.budgets.regex_s)
        if output_of(route.specialist) == "card" and not (structure is not None and structure.kind != "genui"):
            from macaronic.genui.output import parse_genui_output

            out = parse_genui_output(text)
            genui = out.to_dict()
            from macaronic.genui.close import card_text, close_card, stray_components

            strays = self.config.adopt_strays and out.valid and isinstance(out.obj, dict) and stray_components(out.obj)
            if self.config.constrain and (not out.valid or strays):  # integrity, the token cap, dropped parts: close it

                closed, fixes = close_card(out.obj, text, self.config.adopt_strays)
                content = card_text(closed)
                genui = {**genui, "valid": True, "errors": [], "closed": fixes, "raw_errors": out.validation.errors,
                         "text_response": closed["text_response"], "a2ui": closed["a2ui"]}
            if a2ui_version != "0.8":  # the client renders another version: the valid card, converted
                from macaronic.genui.convert import served_card

                genui, served = served_card(genui, a2ui_version)
                if served is not None:  # the v0.8 stays the reply's raw text: what the specialist reads back
                    v08, content = content, served
        prev_user = next((m["content"] for m in reversed(msgs) if m["role"] == "user"), "")
        key = views.content_key(prev_user, content or "", calls)
        raw = text if calls else v08
        self.store.remember(key, route.adapter, route.specialist, None, raw)
        reply = {"role": "assistant", "content": content or "", "tool_calls": calls, "adapter": route.adapter,
                 "key": key, **({"specialist": route.specialist} if route.specialist else {}),
                 **({"raw": raw} if raw else {})}
        usage = {k: gen.usage.get(k) for k in ("prompt_tokens", "completion_tokens", "prefill_tokens",
                                               "reused_tokens", "upper_tokens", "ttft_ms", "total_ms")}
        route = replace(route, kept=None) if route.kept is not None else route  # its K/V is spent: hold none
        return TurnResult(text, content, calls, finish, route, usage, self.pair_id, view, key,
                          msgs + [reply], genui, tool_error, logprobs=gen.logprobs, loop_period=gen.loop_period,
                          constrained=structure.kind if structure else None)

    async def summarize(self, result: TurnResult) -> str | None:
        """The hidden summary hop for a full-mode adapter's reply; stored in the memory."""
        if not (self.config.summaries and result.needs_summary):
            return None
        loop = asyncio.get_running_loop()
        fut = self._pending[result.key] = loop.create_future()
        try:
            sp = SamplingParams(**{k: v for k, v in self.bundle.decoding.get("summary", {}).items()
                                   if k in SAMPLING_KEYS})
            text = ""
            async for item in self.backend.stream(views.summary_view(result.view, result.text, self.bundle),
                                                  result.route.adapter, sp):
                if isinstance(item, Generation):
                    text = item.text.strip()
            if text:
                self.store.set_summary(result.key, text)
                result.summary = text
                result.messages[-1]["summary"] = text
            return text or None
        except Exception as e:  # a summary is an optimisation; its failure must not fail the turn
            log.warning("summary hop failed: %s", e)
            return None
        finally:
            fut.set_result(None)
            self._pending.pop(result.key, None)

    async def aturn(self, messages: list[dict], tools: list[dict] | None = None, model: str | None = None,
                    sampling: dict | SamplingParams | None = None, tool_choice: Any = None, **kw) -> TurnResult:
        result = None
        async for item in self.astream(messages, tools, model, sampling, tool_choice, **kw):
            if isinstance(item, TurnResult):
                result = item
        await self.summarize(result)
        return result

    def turn(self, messages: list[dict], tools: list[dict] | None = None, model: str | None = None,
             sampling: dict | SamplingParams | None = None, tool_choice: Any = None, **kw) -> TurnResult:
        """One turn, synchronously (route, answer, summary). Inside an event loop use `aturn`."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.aturn(messages, tools, model, sampling, tool_choice, **kw))
        raise RuntimeError("MoL.turn was called inside a running event loop; await MoL.aturn instead")
