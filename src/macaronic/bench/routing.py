"""What routing costs the server: the decoding streams it stalls and the time it adds to TTFT.

In process, on the real engine and the shipped router state, with the hand-written held-out turns:

- `stall`: `streams` streams decode (the shipped specialists in turn) while a routing thread routes
  turns back to back; the inter-token gaps of the streams, with the router's forwards as engine
  score requests ("engine"), as the direct forwards under the engine lock they replaced
  ("direct", `LLM.hidden_views_direct`), as score requests with the engine's step in two forwards
  (prompt chunks, then decode) and with no routing at all ("none"), interleaved in one run.
- `ttft`: one turn at a time on an idle engine, prefix cache cleared before each request: the time
  to first token of the turn forced to the role the router picks vs routed (route + the same
  request); the difference is what routing adds to TTFT, paired per turn.
- `tools_ttft`: the same turns through the MoL with a toolset attached (`tool_choice` auto), the
  bundle's `tools_decide` off and on, paired per turn (one token, cache cleared): what the agent's
  read of a turn the head sends to a text specialist adds, and how often it takes the turn.

Knows the engine's LLM and the Router; nothing of HTTP.
"""

from __future__ import annotations

import statistics
import threading
import time
from dataclasses import replace

from macaronic.engine.sampling import SamplingParams
from macaronic.specialist import BUILTIN_NAMES


def pct(xs: list[float], q: float) -> float | None:
    if not xs:
        return None
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(q * len(xs)))], 1)


class DirectViews:
    """The LLM as the router saw it before score requests: direct forwards under the engine lock."""

    def __init__(self, llm):
        self._llm = llm

    def __getattr__(self, name):
        return getattr(self._llm, name)

    def hidden_views(self, batch, max_tokens: int = 4096, layer: int | None = None, prefix=None):
        return self._llm.hidden_views_direct(batch, max_tokens, layer)  # whole sequences, as before

    def pooled_hidden(self, batch, max_tokens: int = 4096):
        return self._llm.hidden_views_direct(batch, max_tokens)[0]

    def next_logprobs(self, ids, adapter=None):
        return self._llm.next_logprobs_direct(ids, adapter)


def _turns(n: int) -> list[list[dict]]:
    from macaronic.router.handwritten import load_handwritten

    rows = [e for e in load_handwritten("test") if e["kind"] == "hand"]
    step = max(1, len(rows) // n)
    return [e["messages"] for e in rows[::step][:n]]


def _decode_streams(llm, roles: list[str], n: int, tokens: int, tag: str):
    """n streams (roles in turn), each recording the time of every streamed text event."""
    stamps: list[list[float]] = [[] for _ in range(n)]
    handles = []
    for i in range(n):
        ids = llm.encode_chat([{"role": "user", "content": f"{tag} {i}: write a long story about a lighthouse."}])
        handles.append(llm.submit(ids, roles[i % len(roles)], SamplingParams(max_tokens=tokens, stop_token_ids=())))

    def read(i):
        for ev in handles[i]:
            if ev.text:
                stamps[i].append(time.perf_counter())

    readers = [threading.Thread(target=read, args=(i,), daemon=True) for i in range(n)]
    for t in readers:
        t.start()
    return handles, stamps, readers


VARIANTS = ("none", "direct", "engine, two forwards", "engine")


def stall(llm, router, streams: int = 8, tokens: int = 64, reps: int = 2, turns: int = 24) -> dict:
    roles = [r for r in BUILTIN_NAMES if r in llm.adapters.names()]
    convos = _turns(turns)
    engine_backbone = router.backbone
    out: dict = {"streams": streams, "tokens": tokens, "reps": reps, "variants": {}}
    acc = {v: {"gaps": [], "route_ms": []} for v in VARIANTS}
    fused = llm.engine.config
    for rep in range(reps):
        for variant in VARIANTS:
            router.backbone = DirectViews(llm) if variant == "direct" else engine_backbone
            llm.engine.config = replace(fused, fuse_steps=variant != "engine, two forwards")
            handles, stamps, readers = _decode_streams(llm, roles, streams, tokens, f"{variant}{rep}")
            while not all(stamps):  # every stream is decoding before the routes start
                time.sleep(0.005)
            k = 0
            while variant != "none" and (k == 0 or not all(h.done.is_set() for h in handles)):
                t0 = time.perf_counter()
                router.route(convos[k % len(convos)])
                acc[variant]["route_ms"].append((time.perf_counter() - t0) * 1000)
                k += 1
            for t in readers:
                t.join()
            acc[variant]["gaps"] += [(b - a) * 1000 for s in stamps for a, b in zip(s, s[1:])]
    router.backbone, llm.engine.config = engine_backbone, fused
    for v, a in acc.items():
        out["variants"][v] = {"gap_p50_ms": pct(a["gaps"], 0.5), "gap_p99_ms": pct(a["gaps"], 0.99),
                              "gap_max_ms": pct(a["gaps"], 1.0), "gaps": len(a["gaps"]), "routes": len(a["route_ms"]),
                              "route_p50_ms": pct(a["route_ms"], 0.5), "route_p95_ms": pct(a["route_ms"], 0.95)}
    return out


def _ttft(llm, ids: list[int], role: str | None) -> float:
    adapter = role if role in llm.adapters.names() else None  # a role with no adapter answers from the base
    t0 = time.perf_counter()
    h = llm.submit(ids, adapter, SamplingParams(max_tokens=1, stop_token_ids=()))
    h.result()
    return (h.usage or {}).get("ttft_ms") or (time.perf_counter() - t0) * 1000


def ttft(llm, router, turns: int = 40) -> dict:
    """Paired per turn: forced TTFT vs route + the same request; cache cleared before each."""
    convos = _turns(turns)
    router.route(convos[0])  # first-use costs out of the figures: the router's, and each adapter's
    for role in [None, *llm.adapters.names()]:  # (its first prefill would land in one side of one pair)
        _ttft(llm, llm.encode_chat(convos[0]), role)
    forced, routed, route_ms, added = [], [], [], []
    for i, convo in enumerate(convos):
        ids = llm.encode_chat(convo)
        order = ("forced", "routed") if i % 2 == 0 else ("routed", "forced")
        got = {}
        role = router.route(convo).role
        for which in order:
            llm.engine.cache.clear()
            if which == "forced":
                t0 = time.perf_counter()
                got["forced"] = _ttft(llm, ids, role)
                got["forced_wall"] = (time.perf_counter() - t0) * 1000
            else:
                t0 = time.perf_counter()
                d = router.route(convo)
                r_ms = (time.perf_counter() - t0) * 1000
                _ttft(llm, ids, d.role)
                got["routed_wall"] = (time.perf_counter() - t0) * 1000
                got["route_ms"] = r_ms
        forced.append(got["forced_wall"])
        routed.append(got["routed_wall"])
        route_ms.append(got["route_ms"])
        added.append(got["routed_wall"] - got["forced_wall"])
    return {"turns": len(convos), "forced_ttft_p50_ms": pct(forced, 0.5), "routed_ttft_p50_ms": pct(routed, 0.5),
            "added_p50_ms": pct(added, 0.5), "added_p95_ms": pct(added, 0.95), "added_min_ms": pct(added, 0.0),
            "route_p50_ms": pct(route_ms, 0.5), "route_p95_ms": pct(route_ms, 0.95),
            "prompt_tokens_p50": statistics.median(len(llm.encode_chat(c)) for c in convos)}


def mol_ttft(llm, router, turns: int = 40) -> dict:
    """Paired per turn, through the MoL (the served layout, the shipped bundle): the turn forced to
    the role the router picks (`model=` that role) vs routed, one token, greedy; before each, the
    prefix cache cleared and the served header prefilled (what the server's warm-up leaves). With a
    prefill head the route reads the answer's own prefill: a route the bare base (or an assistant-header
    adapter) answers continues it (its user turn from the kept prefill); one whose adapter starts at the user header
    prefills its own turn after the route. Split by that."""
    import asyncio

    from macaronic.harness import load_bundle
    from macaronic.prompts import header
    from macaronic.serve.mol import HarnessConfig, MoL

    mol = MoL.from_llm(llm, load_bundle(), router=router, config=HarnessConfig(summaries=False))
    opening = llm.encode_chat([header(mol.bundle, [], None)], add_generation_prompt=False)

    def one(convo, model):
        llm.engine.cache.clear()
        llm.submit(opening, None, SamplingParams(max_tokens=1, temperature=0.0)).result()
        t0 = time.perf_counter()
        r = asyncio.run(mol.aturn(convo, model=model, sampling={"max_tokens": 1, "temperature": 0.0}))
        return (time.perf_counter() - t0) * 1000, r

    def continued(r) -> bool:  # the answer took its user turn from the route's prefill, not just history
        u = r.usage
        return (u.get("reused_tokens") or 0) + (u.get("upper_tokens") or 0) > llm.turn_start(llm.encode_chat(r.view))

    convos = _turns(turns)
    for role in [None, *mol.bundle.role_names]:  # first-use costs out of the figures
        one(convos[0], role)
    rows = []
    for i, convo in enumerate(convos):
        role = one(convo, None)[1].route.specialist  # the route, read once unmeasured
        got = {}
        for which in (("forced", "routed") if i % 2 == 0 else ("routed", "forced")):
            got[which] = one(convo, role if which == "forced" else None)
        ms_r, r = got["routed"]
        rows.append({"added_ms": ms_r - got["forced"][0], "forced_ms": got["forced"][0], "routed_ms": ms_r,
                     "route_ms": r.route.ms, "policy": r.route.policy, "specialist": r.route.specialist,
                     "adapter": r.route.adapter,
                     "resumed": continued(r)})
    out = {"turns": len(rows), "prefill_head": router.reads_prefill(mol.bundle),
           "forced_ttft_p50_ms": pct([x["forced_ms"] for x in rows], 0.5),
           "routed_ttft_p50_ms": pct([x["routed_ms"] for x in rows], 0.5),
           "added_p50_ms": pct([x["added_ms"] for x in rows], 0.5),
           "added_p95_ms": pct([x["added_ms"] for x in rows], 0.95),
           "route_p50_ms": pct([x["route_ms"] for x in rows], 0.5), "rows": rows}
    for name, part in (("resumed", [x for x in rows if x["resumed"]]), ("not_resumed", [x for x in rows if not x["resumed"]])):
        out[name] = {"turns": len(part), "added_p50_ms": pct([x["added_ms"] for x in part], 0.5),
                     "added_p95_ms": pct([x["added_ms"] for x in part], 0.95)}
    return out


def tools_ttft(llm, router, turns: int = 40) -> dict:
    """Paired per turn: a routed turn with the router bench's `assistant` toolset attached, under the
    shipped bundle with `tools_decide` off and on (one token, prefix cache cleared before each)."""
    import asyncio

    from macaronic.harness import load_bundle
    from macaronic.router.bench import TOOLSETS
    from macaronic.serve.mol import HarnessConfig, MoL

    shipped = load_bundle()
    bundles = {on: replace(shipped, router={**shipped.router, "tools_decide": on}) for on in (False, True)}
    mol = MoL.from_llm(llm, shipped, router=router, config=HarnessConfig(summaries=False))
    tools = TOOLSETS["assistant"]

    def one(convo, on: bool):
        mol.bundle = bundles[on]
        llm.engine.cache.clear()
        t0 = time.perf_counter()
        r = asyncio.run(mol.aturn(convo, tools=tools, sampling={"max_tokens": 1}))
        return (time.perf_counter() - t0) * 1000, r.route

    convos = _turns(turns)
    one(convos[0], True)  # first-use costs (the tool grammar, each adapter) out of the figures
    one(convos[0], False)
    added, asked, took = [], [], 0
    for i, convo in enumerate(convos):
        got = {}
        for on in ((False, True) if i % 2 == 0 else (True, False)):
            got[on] = one(convo, on)
        d = got[True][0] - got[False][0]
        added.append(d)
        reason = got[True][1].reason
        if "tools-decided" in reason:
            asked.append(d)
            took += reason == "tools-decided-call"
    return {"turns": len(convos), "tools": [t["function"]["name"] for t in tools], "decided": len(asked),
            "took": took, "added_p50_ms": pct(added, 0.5), "added_decided_p50_ms": pct(asked, 0.5),
            "added_decided_p95_ms": pct(asked, 0.95)}


def routing_cost(threads: int | None = None, quick: bool = False, progress=None) -> dict:
    import torch

    from macaronic.engine.llm import load_default_llm
    from macaronic.router.shipped import load_shipped

    if threads:
        torch.set_num_threads(threads)
    llm = load_default_llm()
    try:
        router = load_shipped(llm)
        out = {"threads": torch.get_num_threads(), "state": router.state.id[:16], "policy": router.config.policy,
               "base": llm.base.name, "router_backbone": router.backbone.base.name,
               "second_model": router.backbone is not llm, "head_layer": router.state.head.layer,
               "fast_layer": router.state.fast.layer if router.state.fast is not None else None,
               "head_prefix": router.state.head.prefix}
        out["ttft"] = ttft(llm, router, turns=16 if quick else 40)
        seen = sum(router.stages.values())
        out["ttft"]["fast_stage_share"] = round(router.stages["fast"] / seen, 3) if seen else None
        if progress:
            progress()
        router.stages.clear()
        out["mol_ttft"] = mol_ttft(llm, router, turns=16 if quick else 40)
        seen = sum(router.stages.values())
        out["mol_ttft"]["fast_stage_share"] = round(router.stages["fast"] / seen, 3) if seen else None
        if progress:
            progress()
        out["stall"] = stall(llm, router, reps=1 if quick else 2, tokens=48 if quick else 64)
        if progress:
            progress()
        out["tools_ttft"] = tools_ttft(llm, router, turns=16 if quick else 40)
        if progress:
            progress()
        return out
    finally:
        llm.close()


def markdown(r: dict) -> list[str]:
    def f(x):
        return "n/a" if x is None else (f"{x:,.1f}" if isinstance(x, float) else str(x))

    t, s = r["ttft"], r["stall"]
    backbone = ""
    if "router_backbone" in r:
        who = ("its own bare base, no second model in memory" if not r["second_model"]
               else f"a second model beside it, {r['router_backbone']}")
        backbone = f" {r['base']} routes with {who}; the head reads layer {r['head_layer']}"
        if r.get("fast_layer") is not None and t.get("fast_stage_share") is not None:
            backbone += (f", after a first stage on layer {r['fast_layer']} (0: the token embeddings, no forward) "
                         f"whose answer stood for {t['fast_stage_share']:.0%} of the routes")
        backbone += "."
        if r.get("head_prefix"):
            backbone += (" The head's views keep the chat template's opening computed once: the request's own tokens "
                         "run as an engine score request carrying the kept opening (`Request.score_kept`).")
    out = ["### What routing costs: TTFT and the streams it stalls", "",
           f"In process, the shipped router state {r['state']} (policy {r['policy']}), {r['threads']} torch "
           f"thread(s), hand-written held-out turns.{backbone} TTFT: one turn at a time on an idle engine, prefix "
           f"cache cleared before each request, {t['turns']} turns (prompt p50 {f(t['prompt_tokens_p50'])} tokens); "
           "routed = route + the same request, paired with the request forced to the routed role.", "",
           "| forced TTFT p50 (ms) | routed TTFT p50 | added by routing p50 | added p95 | route p50 | route p95 |",
           "|---:|---:|---:|---:|---:|---:|",
           f"| {f(t['forced_ttft_p50_ms'])} | {f(t['routed_ttft_p50_ms'])} | {f(t['added_p50_ms'])} | "
           f"{f(t['added_p95_ms'])} | {f(t['route_p50_ms'])} | {f(t['route_p95_ms'])} |", "",
           f"Stall: {s['streams']} streams decode {s['tokens']} tokens (the specialists in turn) while turns are "
           f"routed back to back; {s['reps']} interleaved repetition(s) of each variant. direct: the router's "
           "forwards as before (from scratch, under the engine lock); engine: score requests scheduled by "
           "the engine (at most one prefill chunk between two tokens of a stream), the chunk fused into the "
           "decode forward or in a forward of its own.", "",
           "| router forwards | routes | gap p50 (ms) | gap p99 | gap max | route p50 (ms) | route p95 |",
           "|---|---:|---:|---:|---:|---:|---:|"]
    for v in VARIANTS:
        x = s["variants"][v]
        out.append(f"| {v} | {x['routes']} | {f(x['gap_p50_ms'])} | {f(x['gap_p99_ms'])} | {f(x['gap_max_ms'])} | "
                   f"{f(x['route_p50_ms'])} | {f(x['route_p95_ms'])} |")
    if (m := r.get("mol_ttft")) is not None:
        how = ("the head reads the answer's own prefill (the bare base's residual entering its layer at the end of the "
               "user turn, as served; `Router.route_prefilled`), and a route the bare base or an assistant-header "
               "adapter answers continues it (`Request.resume`): only the layers above run on the user turn"
               if m["prefill_head"] else "the head reads the request alone")
        share = "" if m.get("fast_stage_share") is None else f"; the first stage answered {m['fast_stage_share']:.0%}"
        out += ["", f"Through the MoL (the served layout): {m['turns']} turns, one token, greedy, the prefix cache "
                f"cleared and the served header prefilled before each; routed vs `model=` the routed role, paired per "
                f"turn; {how}{share}.", "",
                "| turns | forced TTFT p50 (ms) | routed TTFT p50 | added p50 | added p95 | route p50 |",
                "|---|---:|---:|---:|---:|---:|",
                f"| all {m['turns']} | {f(m['forced_ttft_p50_ms'])} | {f(m['routed_ttft_p50_ms'])} | "
                f"{f(m['added_p50_ms'])} | {f(m['added_p95_ms'])} | {f(m['route_p50_ms'])} |"]
        for name, label in (("resumed", "answer continued the route's prefill"),
                            ("not_resumed", "answer prefilled its own turn")):
            x = m[name]
            out.append(f"| {label}: {x['turns']} | | | {f(x['added_p50_ms'])} | {f(x['added_p95_ms'])} | |")
    if (tt := r.get("tools_ttft")) is not None:
        out += ["", f"Tools attached ({', '.join(tt['tools'])}; `tool_choice` auto): the same {tt['turns']} turns "
                "through the MoL, one token, cache cleared, the bundle's `tools_decide` off and on, paired per turn. "
                f"The agent read {tt['decided']} of them (those the head sent to a text specialist) and took "
                f"{tt['took']}; on those its read added {f(tt['added_decided_p50_ms'])} ms p50 "
                f"({f(tt['added_decided_p95_ms'])} p95), {f(tt['added_p50_ms'])} ms p50 over all turns."]
    out += ["", "`macaronic.bench.routing`.", ""]
    return out
