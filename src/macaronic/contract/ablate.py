"""The MoL ablation: one pair's sealed test units answered under several configurations, and the
table that compares them with base.

Configurations (rows):

  base      no adapter at all: the same harness, role prompts and router; the bare base answers
  <role>    that role's adapter forced on every turn (its role prompt and decoding too)
  routed    the routed MoL as served: the pair's router picks one adapter per turn
  oracle    each turn goes to its gold role (the suite's role; a mixed turn's labelled role)

plus report-only rows: the external suites (HumanEval, BFCL simple) on base and on the adapter of
their kind's role, and `genui+grammar` (the genui adapter under constrained decoding,
`macaronic.genui.grammar`) on the genui suite.

Every configuration answers through the served per-turn harness (`MoL.turn`) over one engine, so
the only thing that changes between rows is who answers a turn. Units run concurrently (the engine
batches them) and generations are memoised by (view, adapter, sampling, constraint): a routed turn
that lands on adapter X reuses forced X's generation of the same view, as the engine would
reproduce it. `summarize` is pure: rows in, the comparison out (paired bootstrap from
contract.stats, the contract's gate settings). Printing and files are the caller's
(`macaronic eval ablate`, commands/eval_ablate.py).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
from dataclasses import asdict, dataclass

from macaronic.contract.report import _block, task_scores
from macaronic.contract.stats import paired_bootstrap
from macaronic.contract.suites import KINDS, Reply
from macaronic.specialist import BUILTIN_NAMES, output_of

ROLES = BUILTIN_NAMES  # the rows: the shipped specialists, in registry order


@dataclass(frozen=True)
class Config:
    name: str
    policy: str  # base | forced | routed | oracle
    adapter: str | None = None  # forced: the role whose adapter answers every turn
    grammar: bool = False  # constrained GenUI decoding


def configs(roles=ROLES, external: bool = True) -> list[Config]:
    out = [Config("base", "base"), *[Config(r, "forced", r) for r in roles],
           Config("routed", "routed"), Config("oracle", "oracle")]
    if external:  # a card specialist also answers under the card grammar
        out += [Config(f"{r}+grammar", "forced", r, grammar=True) for r in roles if output_of(r) == "card"]
    return out


def suites_for(contract, cfg: Config) -> list[str]:
    """Primary suites for the main rows; a report-only suite for base and its kind's role; the
    grammar row on the genui suites only."""
    if cfg.grammar:
        return [s.name for s in contract.suites if s.kind == "genui"]
    out = [s for s in contract.primary]
    for s in contract.suites:
        if s.report_only and (cfg.policy == "base" or cfg.adapter == getattr(KINDS[s.kind], "role", None)):
            out.append(s.name)
    return out


def plan(contract, loader, cfgs: list[Config], split: str = "test") -> list[tuple[Config, object, int]]:
    """[(config, task, sample)] of a split (the sealed test one unless told), configuration-major:
    forced rows run before the routed and oracle rows that can reuse their generations."""
    tasks = {s.name: loader.tasks(s.name, split) for s in contract.suites
             if any(s.name in suites_for(contract, c) for c in cfgs)}
    order = sorted(cfgs, key=lambda c: c.policy in ("routed", "oracle"))
    return [(c, t, i) for c in order for name in suites_for(contract, c) for t in tasks[name]
            for i in range(contract.suite(name).k)]


# ---- the engine side ---------------------------------------------------------------------

class Memo:
    """Finished generations by request key, shared by every thread; a key being generated is
    claimed so a second asker waits for it instead of generating it again."""

    def __init__(self):
        self.done: dict[str, object] = {}
        self.inflight: dict[str, threading.Event] = {}
        self.lock = threading.Lock()
        self.hits = 0

    @staticmethod
    def key(messages, adapter, sampling, tag: str = "") -> str:
        sp = {k: v for k, v in asdict(sampling).items() if k != "extra"}
        blob = json.dumps([messages, adapter, sp, tag], sort_keys=True, default=str, ensure_ascii=False)
        return hashlib.sha256(blob.encode()).hexdigest()

    async def claim(self, key: str):
        """The finished Generation, or None when the caller now owns the key (must `release`)."""
        while True:
            with self.lock:
                if key in self.done:
                    self.hits += 1
                    return self.done[key]
                ev = self.inflight.get(key)
                if ev is None:
                    self.inflight[key] = threading.Event()
                    return None
            await asyncio.to_thread(ev.wait)

    def release(self, key: str, gen) -> None:
        with self.lock:
            if gen is not None:
                self.done[key] = gen
            self.inflight.pop(key).set()


class AblationBackend:
    """The embedded engine (serve.backends.LocalBackend) behind a memo; `hide_adapters` makes it
    the bare base (the harness then answers every role with the base + role prompt)."""

    label = "ablation"

    def __init__(self, llm, memo: Memo, hide_adapters: bool = False, logits_hook=None, tag: str = ""):
        from macaronic.serve.backends import LocalBackend

        self.inner, self.memo, self.hide, self.tag = LocalBackend(llm, logits_hook), memo, hide_adapters, tag

    def adapters(self):
        return {} if self.hide else self.inner.adapters()

    def base(self) -> dict:
        return self.inner.base()

    async def stream(self, messages, adapter, sampling, *, structure=None, logprobs=None):
        from macaronic.serve.backends import Generation

        tag = self.tag + (f"/{structure.key}" if structure is not None else "")
        key = self.memo.key(messages, None if self.hide else adapter, sampling, tag)
        hit = await self.memo.claim(key)
        if hit is not None:
            yield hit.text
            yield hit
            return
        gen = None
        try:
            async for item in self.inner.stream(messages, None if self.hide else adapter, sampling,
                                                structure=structure, logprobs=logprobs):
                if isinstance(item, Generation):
                    gen = item
                yield item
        finally:
            self.memo.release(key, gen if gen is not None and gen.finish_reason in ("stop", "length") else None)

    def close(self) -> None:
        pass


class LockedRouter:
    """One route at a time: the router's forwards and state are shared by every worker thread."""

    def __init__(self, router):
        self.router, self.lock = router, threading.Lock()

    def route(self, messages):
        with self.lock:
            return self.router.route(messages)

    @property
    def state(self):
        return self.router.state

    def reads_prefill(self, bundle=None) -> bool:
        return self.router.reads_prefill(bundle)

    def route_prefilled(self, messages, read):
        with self.lock:
            return self.router.route_prefilled(messages, read)


def grammar_hook(llm):
    from macaronic.genui.grammar import GrammarConstraint

    constraint = GrammarConstraint(llm.tokenizer, llm.args.vocab_size)
    return lambda messages, adapter: constraint.processor()


class Harnesses:
    """One MoL per (configuration, thread) over the shared engine, router and memo."""

    def __init__(self, llm, bundle, router, cfgs: list[Config], constrain: bool = True):
        self.llm, self.bundle, self.router, self.memo = llm, bundle, router, Memo()
        self.constrain = constrain  # the harness's constrained decoding (tool calls, GenUI cards)
        self._local = threading.local()
        self._hooks = {c.name: grammar_hook(llm) for c in cfgs if c.grammar}
        self.pair_ids = {c.name: self.mol(c).pair_id for c in cfgs}

    def mol(self, cfg: Config):
        from macaronic.serve.mol import HarnessConfig, MoL

        mols = self._local.__dict__.setdefault("mols", {})
        if cfg.name not in mols:
            backend = AblationBackend(self.llm, self.memo, hide_adapters=cfg.policy == "base",
                                      logits_hook=self._hooks.get(cfg.name), tag="grammar" if cfg.grammar else "")
            mols[cfg.name] = MoL(backend, self.bundle, self.router, config=HarnessConfig(constrain=self.constrain))
        return mols[cfg.name]

    def run_unit(self, contract, cfg: Config, task, sample: int, split: str = "test") -> dict:
        from macaronic.contract.evaluate import run_unit

        gold = [t.role for t in task.obj.turns] if contract.suite(task.suite).kind == "mixed" else None
        row = run_unit(contract, f"{cfg.name}/{self.pair_ids[cfg.name]}", task, sample,
                       ConfigAnswerer(cfg, self.mol(cfg), self.bundle, gold), split)
        return {**row, "config": cfg.name}


class ConfigAnswerer:
    """The Answerer protocol for one configuration and one unit: the turn's `model` follows the
    configuration; tools, caps and seeds are the suite's, as `contract.runner.HarnessRunner` sets
    them, so every row answers the same requests. Assistant messages it produced are sent back
    with their adapter, as the web chat does (a tool result then stays on its caller)."""

    def __init__(self, cfg: Config, mol, bundle, gold: list[str] | None = None):
        self.cfg, self.mol, self.bundle, self.gold = cfg, mol, bundle, gold
        self.made: dict[str, str] = {}  # reply text -> adapter that wrote it

    def model(self, messages: list[dict], role: str | None) -> str | None:
        p = self.cfg.policy
        if p == "forced":
            return self.cfg.adapter
        if p == "routed":
            return None
        if p == "oracle" and role is None and self.gold:
            return self.gold[min(sum(m["role"] == "user" for m in messages), len(self.gold)) - 1]
        return role  # base: the role's prompt on the bare base (None: the router picks the prompt)

    def reply(self, messages: list[dict], role: str | None, *, seed: int, max_tokens: int,
              tools: list[dict] | None = None) -> Reply:
        from macaronic.substrate.tools import openai_tools

        if tools is None and role in (None, "agent"):
            tools = openai_tools()
        cap = max_tokens if role is None else min(int(self.bundle.decoding_for(role).get("max_tokens", max_tokens)),
                                                  max_tokens)
        msgs = []
        for m in messages:
            out = {"role": m["role"], "content": m["content"]}
            if m["role"] == "assistant" and self.made.get(m["content"]):
                out["adapter"] = self.made[m["content"]]
            msgs.append(out)
        r = self.mol.turn(msgs, tools=tools, model=self.model(messages, role), sampling={"seed": seed, "max_tokens": cap})
        if r.route.adapter:
            self.made[r.served_text] = r.route.adapter
        route = {"adapter": r.route.adapter, "specialist": r.route.specialist, "policy": r.route.policy,
                 "confidence": round(r.route.confidence, 4), "reason": r.route.reason}
        return Reply(text=r.served_text, role=r.route.specialist or role or "", route=route,
                     tokens=int(r.usage.get("prompt_tokens") or 0) + int(r.usage.get("completion_tokens") or 0))


# ---- the comparison (pure) ---------------------------------------------------------------

def _rate(rows: list[dict], key: str) -> float | None:
    vals = [float(r["detail"][key]) for r in rows if key in r.get("detail", {})]
    return sum(vals) / len(vals) if vals else None


def summarize(contract, rows: list[dict], cfgs: list[Config]) -> dict:
    """{"configs": {name: {suite: block}}, "quality_bar": ..., "external": ...}. A block is
    report._block's: n, score, ci95, delta vs base, delta_ci95 (paired over the same tasks)."""
    g = contract.gate
    by = {c.name: [r for r in rows if r.get("config") == c.name] for c in cfgs}
    ts = {name: task_scores(contract, rs) for name, rs in by.items()}
    base = ts.get("base")
    out: dict = {}
    for c in cfgs:
        out[c.name] = {}
        for i, sname in enumerate(suites_for(contract, c)):
            keys = sorted(k for k in ts[c.name] if ts[c.name][k]["suite"] == sname)
            if not keys:
                continue
            block = _block(contract, ts[c.name], base if c.name != "base" else None, keys, i)
            srows = [r for r in by[c.name] if r["suite"] == sname]
            for extra in ("route_acc", "answer_acc", "l1_valid"):
                v = _rate(srows, extra)
                if v is not None:
                    block[extra] = v
            out[c.name][sname] = block

    def versus(a: str, b: str, sname: str) -> dict | None:
        if a not in ts or b not in ts:
            return None
        keys = sorted(k for k in ts[a] if ts[a][k]["suite"] == sname and k in ts[b])
        if not keys:
            return None
        d, ci = paired_bootstrap([ts[a][k]["score"] for k in keys], [ts[b][k]["score"] for k in keys],
                                 g.resamples, g.confidence, g.seed)
        return {"n": len(keys), "delta": d, "ci95": ci, "above_zero": ci is not None and ci[0] > 0}

    names = {c.name for c in cfgs}
    bar = {}
    for s in contract.suites:
        if s.name in contract.primary and s.role in names:
            vs = {o: versus(s.role, o, s.name) for o in ["base", *ROLES] if o != s.role and o in names}
            bar[s.role] = {"suite": s.name, "vs": vs, "met": all(v and v["above_zero"] for v in vs.values())}
    mixed = next((s.name for s in contract.suites if s.kind == "mixed" and s.name in contract.primary), None)
    mixed_bar = None
    if mixed and "routed" in names:
        vs = {o: versus("routed", o, mixed) for o in ["base", *ROLES] if o in names}
        oracle = versus("oracle", "routed", mixed) if "oracle" in names else None
        mixed_bar = {"suite": mixed, "vs": vs, "oracle_minus_routed": oracle,
                     "met": all(v and v["above_zero"] for v in vs.values())
                     and oracle is not None and oracle["delta"] >= 0}
    external = {}
    for s in contract.suites:
        if s.report_only:
            role = getattr(KINDS[s.kind], "role", None)
            if role in names:
                external[s.name] = {"role": role, "vs_base": versus(role, "base", s.name)}
    grammar = next((c for c in cfgs if c.grammar), None)
    if grammar:
        for sname in suites_for(contract, grammar):
            external[f"{sname}+grammar"] = {"role": grammar.adapter,
                                             "vs_unconstrained": versus(grammar.name, grammar.adapter, sname)}
    return {"configs": out, "quality_bar": bar, "mixed_bar": mixed_bar, "external": external}


# ---- the table ---------------------------------------------------------------------------

def _f(x, signed: bool = False) -> str:
    return "-" if x is None else (f"{x:+.3f}" if signed else f"{x:.3f}")


def cell(block: dict | None) -> str:
    if not block:
        return ""
    s = _f(block["score"])
    if block.get("delta_ci95"):
        lo, hi = block["delta_ci95"]
        s += f" ({_f(block['delta'], True)} [{_f(lo, True)}, {_f(hi, True)}])"
    return s


def _ordered(vs: dict) -> list:
    rank = ["base", *ROLES, "routed", "oracle"]
    return sorted(((o, v) for o, v in vs.items() if v), key=lambda kv: rank.index(kv[0]) if kv[0] in rank else 99)


def markdown(contract, summary: dict, cfgs: list[Config]) -> str:
    prim = list(contract.primary)
    main = [c for c in cfgs if not c.grammar]
    lines = ["| configuration | " + " | ".join(prim) + " |", "|---|" + "---:|" * len(prim)]
    for c in main:
        lines.append(f"| {c.name} | " + " | ".join(cell(summary["configs"][c.name].get(s)) for s in prim) + " |")
    lines.append("")
    ns = ", ".join(f"{s} {summary['configs'].get('base', {}).get(s, {}).get('n', 0)}" for s in prim)
    lines.append("Cells: mean task score (difference vs base, 95% paired-bootstrap interval over the suite's "
                 f"tasks). Tasks per suite: {ns}.")
    mixed = summary.get("mixed_bar")
    if mixed:
        m = mixed["suite"]
        parts = [f"{c.name} {_f(summary['configs'][c.name][m].get('route_acc'))}/"
                 f"{_f(summary['configs'][c.name][m].get('answer_acc'))}" for c in main if m in summary["configs"][c.name]]
        lines += ["", f"Mixed suite, route accuracy / answer accuracy per turn: {'; '.join(parts)}."]
    lines += ["", "Quality bar (each specialist beats base and every other adapter on its own suite, "
                  "95% paired-bootstrap interval of the difference above zero):", ""]
    for role, b in summary["quality_bar"].items():
        vs = ", ".join(f"vs {o} {_f(v['delta'], True)} [{_f(v['ci95'][0], True)}, {_f(v['ci95'][1], True)}]"
                       for o, v in _ordered(b["vs"]))
        lines.append(f"- **{role}** on `{b['suite']}`: {'met' if b['met'] else 'not met'} ({vs})")
    if mixed:
        vs = ", ".join(f"vs {o} {_f(v['delta'], True)} [{_f(v['ci95'][0], True)}, {_f(v['ci95'][1], True)}]"
                       for o, v in _ordered(mixed["vs"]))
        o = mixed["oracle_minus_routed"]
        orc = f"oracle − routed {_f(o['delta'], True)} [{_f(o['ci95'][0], True)}, {_f(o['ci95'][1], True)}]" if o else "no oracle row"
        lines.append(f"- **routed MoL** on `{mixed['suite']}`: {'met' if mixed['met'] else 'not met'} ({vs}; {orc})")
    ext = summary.get("external") or {}
    if ext:
        lines += ["", "| external check (report-only), n | without | with | difference [95% CI] |", "|---|---:|---:|---|"]
        for name, e in sorted(ext.items(), key=lambda kv: kv[0].endswith("+grammar")):
            if name.endswith("+grammar"):
                s = name[: -len("+grammar")]
                r = e["role"]
                a, b = summary["configs"].get(r, {}).get(s), summary["configs"].get(f"{r}+grammar", {}).get(s)
                v = e["vs_unconstrained"]
                if a and b and v:
                    lines.append(f"| {s}: A2UI validity (L1) of {r}-adapter replies, without / with constrained "
                                 f"decoding, n={b['n']} | {_f(a.get('l1_valid'))} | {_f(b.get('l1_valid'))} | suite score "
                                 f"{_f(a['score'])} → {_f(b['score'])}: {_f(v['delta'], True)} "
                                 f"[{_f(v['ci95'][0], True)}, {_f(v['ci95'][1], True)}] |")
                continue
            b, a, v = summary["configs"]["base"].get(name), summary["configs"].get(e["role"], {}).get(name), e["vs_base"]
            if a and b and v:
                what = "pass@1" if name == "humaneval" else "AST accuracy" if name.startswith("bfcl") else "score"
                lines.append(f"| {name}: {what}, base without / with the {e['role']} adapter, n={a['n']} | "
                             f"{_f(b['score'])} | {_f(a['score'])} | {_f(v['delta'], True)} "
                             f"[{_f(v['ci95'][0], True)}, {_f(v['ci95'][1], True)}] |")
    return "\n".join(lines)


START, END = "<!-- specialists:start -->", "<!-- specialists:end -->"


def write_section(text: str, body: str, title: str = "## Specialists") -> str:
    """`text` with the part between the markers replaced by `body` (a new section appended when
    the markers are absent)."""
    block = f"{START}\n{body.rstrip()}\n{END}"
    if START in text and END in text:
        head, rest = text.split(START, 1)
        return head + block + rest.split(END, 1)[1]
    return text.rstrip() + f"\n\n{title}\n\n{block}\n"
