"""Answerers: what produces replies for the evaluator and the experience collector.

`HarnessRunner` (the default) goes through the served per-turn harness, `MoL.turn`. `LocalRunner`
is the small direct path behind the same Answerer protocol, one forced adapter per turn (or a
routed one when the suite asks for routing). Both render the prompt with the one renderer
(`macaronic.prompts`), so a turn's prompt token ids are the same on either path, in serving and in
training: agent and routed turns get the substrate's tools as a client would send them; decoding
comes from the bundle's decoding.json capped by the contract's max_tokens; routed turns use the
bundle's router (a fitted state in `<bundle>/router_state/` when present, else the prompted
policy, which needs no fitting). It keeps no history of its own: callers pass the conversation.
"""

from __future__ import annotations

from pathlib import Path

from macaronic.contract.suites import Reply

ROUTER_STATE_DIR = "router_state"


class LocalRunner:
    def __init__(self, manifest, engine_config=None):
        from macaronic.engine.llm import EngineConfig, load_llm
        from macaronic.harness import load_bundle

        self.manifest = manifest
        self.bundle = load_bundle(manifest.harness["path"])
        self.llm = load_llm(manifest.base, [], engine_config or EngineConfig.from_env())
        for role, a in sorted(manifest.adapters.items()):
            self.llm.add_adapter(a["path"], name=role)
        self._router = None

    def close(self) -> None:
        self.llm.close()

    @property
    def router(self):
        if self._router is None:
            from macaronic.router.router import Router
            from macaronic.router.config import RouterConfig

            state_dir = Path(self.bundle.path) / ROUTER_STATE_DIR
            cfg = RouterConfig.from_dict(self.bundle.router)
            from macaronic.router.shipped import backbone_base, router_for, routing_base

            name = backbone_base(self.llm)
            if (state_dir / "state.json").is_file():
                self._router = Router.load(state_dir, self.llm, self.bundle, cfg)
            elif name is not None and routing_base(name) not in (None, name):
                # a base that routes with another base's backbone and shipped state (Qwen with
                # SmolLM2's): what `macaronic serve` routes with
                self._router = router_for(self.llm, self.bundle)
            else:  # nothing fitted yet: the route prompt alone
                from dataclasses import replace

                self._router = Router(self.llm, self.bundle, None, replace(cfg, policy="prompted"))
        return self._router

    def route(self, messages: list[dict], kept: dict | None = None) -> tuple[str, dict]:
        """The router's role for the turn, as the MoL routes it: on the answer's own prefill when the
        state has a prefill head (the prefill is left in `kept["kept"]` for the answer)."""
        router = self.router
        bundle = served_bundle(self.bundle, self.llm)
        if router.reads_prefill(bundle):
            from macaronic.router.features import prefill_layout, prefill_row

            def read():  # as LocalBackend.route_prefill
                got = self.llm.route_prefill_chat(prefill_layout(bundle, [for_renderer(m, bundle) for m in messages]),
                                                  router.state.prefill.layer)
                if kept is not None:
                    kept["kept"] = got["kept"]
                return prefill_row(got)

            d = router.route_prefilled(messages, read)
        else:
            d = router.route(messages)
        return d.role, {"adapter": d.role, "confidence": round(float(d.confidence), 4),
                           "policy": d.policy, "reason": d.reason}

    def reply(self, messages: list[dict], role: str | None, *, seed: int, max_tokens: int,
              tools: list[dict] | None = None) -> Reply:
        from macaronic.engine.sampling import SamplingParams

        tools = default_tools(role, tools)
        route, kept = None, {}
        if role is None:
            role, route = self.route(messages, kept)
        dec = self.bundle.decoding_for(role)
        sampling = SamplingParams(max_tokens=min(int(dec.get("max_tokens", max_tokens)), max_tokens),
                                  temperature=float(dec.get("temperature", 0.0)),
                                  top_p=float(dec.get("top_p", 1.0)), seed=seed)
        adapter = role if role in self.llm.adapters.names() else None  # a pair may lack a specialist
        ids = self.llm.encode_chat(self.prompt(messages, role, tools))
        resume = kept.get("kept")
        extra = {"resume": resume} if resume is not None and self.llm.can_resume(ids, adapter, resume) else {}
        text, last = self.llm.submit(ids, adapter, sampling, **extra).result()
        if last.finish_reason == "error":
            raise RuntimeError(last.error)
        usage = last.usage or {}
        return Reply(text=text, role=role, tokens=int(usage.get("prompt_tokens", 0)) + int(usage.get("completion_tokens", 0)),
                     route=route)

    def prompt(self, messages: list[dict], role: str, tools: list[dict] | None) -> list[dict]:
        """The layout messages `role` answers from (the one renderer)."""
        from macaronic.prompts import conversation

        bundle = served_bundle(self.bundle, self.llm)
        return conversation(bundle, role, [for_renderer(m, bundle) for m in messages], tools)


def served_bundle(bundle, llm):
    """The bundle as the served pair renders it (MoL): roles the adapters answer from the assistant
    header, and roles without an adapter marked so, add no instruction."""
    infos = llm.adapters.infos()
    return bundle.served([i.name for i in infos], [i.name for i in infos if i.activation == "assistant"])


def default_tools(role: str | None, tools: list[dict] | None) -> list[dict] | None:
    """The tools a turn is shown when the suite names none: the substrate's, for agent and routed
    turns (as the harness's clients send them); none otherwise."""
    if tools is None and role in (None, "agent"):
        from macaronic.substrate.tools import openai_tools

        return openai_tools()
    return tools


def for_renderer(m: dict, bundle) -> dict:
    """A suite's message as the renderer reads it: an assistant reply names the role that gave it
    (`specialist`: given, or from an adapter named by role, as the harness annotates it)."""
    out = {"role": m["role"], "content": m["content"]}
    if m["role"] == "assistant":
        out.update({k: m[k] for k in ("adapter", "specialist") if m.get(k)})
        if "specialist" not in out and out.get("adapter") in bundle.role_names:
            out["specialist"] = out["adapter"]
    return out


class HarnessRunner(LocalRunner):
    """Replies through the per-turn harness (`macaronic.serve.mol.MoL.turn`): the served
    behaviour itself (own views, summaries, tool-call parsing, GenUI repair), with this pair's
    bundle and router. Agent and routed turns get the substrate's tools, as a client would send."""

    def __init__(self, manifest, engine_config=None):
        import threading

        super().__init__(manifest, engine_config)
        self._local = threading.local()
        self._routes = threading.Lock()

    temperature: float | None = None  # None: each role's own decoding (decoding.json)

    def harness_config(self):
        from macaronic.serve.mol import HarnessConfig

        return HarnessConfig()

    @property
    def mol(self):
        """This thread's harness over the shared engine (a MoL keeps a SQLite store, which stays in
        its thread); routes go one at a time through the shared router, as in `eval ablate`."""
        m = getattr(self._local, "mol", None)
        if m is None:
            from macaronic.contract.ablate import LockedRouter
            from macaronic.serve.mol import MoL

            with self._routes:  # the router is built once, by the first thread that needs it
                router = LockedRouter(self.router)
            router.lock = self._routes
            m = self._local.mol = MoL.from_llm(self.llm, self.bundle, router, config=self.harness_config())
        return m

    def reply(self, messages: list[dict], role: str | None, *, seed: int, max_tokens: int,
              tools: list[dict] | None = None) -> Reply:
        tools = default_tools(role, tools)
        cap = max_tokens
        if role is not None:
            cap = min(int(self.bundle.decoding_for(role).get("max_tokens", max_tokens)), max_tokens)
        msgs = [_for_harness(m) for m in messages]
        sampling = {"seed": seed, "max_tokens": cap}
        if self.temperature is not None:  # exploration (k-sample strata, RFT collection): every role samples
            sampling |= {"temperature": self.temperature, "top_p": 0.95}
        r = self.mol.turn(msgs, tools=tools, model=role, sampling=sampling)
        route = None if role is not None else {"adapter": r.route.adapter, "confidence": round(r.route.confidence, 4),
                                                "policy": r.route.policy, "reason": r.route.reason}
        return Reply(text=r.served_text, role=r.route.specialist or role or "", route=route,
                     tokens=int(r.usage.get("prompt_tokens") or 0) + int(r.usage.get("completion_tokens") or 0))


def _for_harness(m: dict) -> dict:
    out = {"role": m["role"], "content": m["content"]}
    if m["role"] == "assistant":
        out.update({k: m[k] for k in ("adapter", "specialist") if m.get(k)})
    return out


class FreeHarnessRunner(HarnessRunner):
    """The served harness with constrained decoding off: the 'without constraints' row."""

    def harness_config(self):
        from macaronic.serve.mol import HarnessConfig

        return HarnessConfig(constrain=False)


ANSWERERS = {"harness": HarnessRunner, "harness-free": FreeHarnessRunner, "local": LocalRunner}


def make_answerer(kind: str, manifest, temperature: float | None = None):
    """'harness' (the served per-turn harness), 'harness-free' (the same with constrained decoding
    off) or 'local' (forced adapter + system prompt). `temperature` (harness kinds): every role
    samples at it (top_p 0.95) instead of its own decoding: k samples per task that differ."""
    r = ANSWERERS[kind](manifest)
    if temperature is not None:
        if not isinstance(r, HarnessRunner):
            raise ValueError(f"a sampling temperature needs a harness answerer, not {kind!r}")
        r.temperature = float(temperature)
    return r
