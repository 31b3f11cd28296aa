"""Dev-family scores of several adapters side by side, through the engine, greedy.

    rows = score(llm, role, {"base": None, "shipped": "agent"}, tasks)   # {label: [row per task]}
    summarize(rows, reference="shipped")   # means, 95% bootstrap intervals, paired deltas

Two task sets (`tasks_for`): "dev" = the role's dev families (`builders.dev_tasks`), families never
trained on; "heldout" = train families at seeds the trainers never use (HELDOUT_SEED), i.e. unseen
instances of trained families. Test families are never read. Prompts are the training prompts
(the role's system prompt). agent: whole episodes on the substrate (tool calls executed,
up to `max_steps` replies), graded by the contract's state-hash grader (final state + required
facts in the final reply), plus the first reply's call against the gold first call. coding: one
reply, the suite's unit tests in the sandbox (pass = all tests; tests = fraction passed).
Every (adapter, task) request is in flight at once so the engine batches them; an adapter of
None scores the bare base. Which specialist is scored how is its registry entry's (`devscore`: a
`Scorer`, `AGENT` or `CODING` here). Knows nothing about training or about where adapters come from.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Callable

from macaronic.engine.sampling import SamplingParams
from macaronic.specialist import all_specialists, lookup

HELDOUT_SEED = 5000  # builders use seeds 0.., `train compare grpo` 1000..; nothing trains from 5000 on


def _agent_pool(n: int, seed: int, exclude: frozenset[str]):
    from macaronic.substrate.tasks import FAMILIES, generate_tasks

    fams = [f.name for f in FAMILIES if f.split == "train"]
    pool = {f: [t for t in generate_tasks("train", n_per_family=n, base_seed=HELDOUT_SEED + seed, families=[f])
                if t.request not in exclude] for f in fams}
    return fams, pool, lambda t: t.request


def _coding_pool(n: int, seed: int, exclude: frozenset[str]):
    from macaronic.suites.coding import FAMILIES, make_task

    fams = [f for f, (sp, _) in FAMILIES.items() if sp == "train"]
    pool = {f: [t for t in (make_task(f, i, HELDOUT_SEED + seed) for i in range(4 * n)) if t.prompt not in exclude]
            for f in fams}
    return fams, pool, lambda t: t.prompt


def tasks_for(role: str, split: str, n: int, seed: int = 0, exclude: frozenset[str] = frozenset()) -> list:
    """(messages, task) pairs: split "dev" (dev families) or "heldout" (unseen train-family
    instances: seeds from HELDOUT_SEED, minus any whose user message is in `exclude`, since the
    small train templates repeat texts across seeds), spread over families."""
    from macaronic.train.builders import _conv, dev_tasks

    if split == "dev":
        return dev_tasks(role, n, seed)
    if split != "heldout":
        raise ValueError(f"split must be dev or heldout, got {split!r}")
    fams, pool, text = scorer(role).heldout(n, seed, exclude)
    seen, ts = set(), []
    for k in range(4 * n):  # round-robin over families, each text once
        for f in fams:
            if k < len(pool[f]) and text(pool[f][k]) not in seen and len(ts) < n:
                seen.add(text(pool[f][k]))
                ts.append(pool[f][k])
    return [(list(_conv(role, text(t))), t) for t in ts]


def user_texts(examples) -> frozenset[str]:
    """The current-turn user messages of training examples: what `tasks_for(..., exclude=)` skips."""
    from macaronic.datagen.examples import current_turn

    return frozenset(ex.messages[current_turn(ex.messages)]["content"] for ex in examples)


def _agent(llm, variants, tasks, max_tokens: int, max_steps: int) -> dict:
    from macaronic.contract.graders import agent_state_hash_v1
    from macaronic.substrate.toolcalls import format_tool_result, parse_tool_calls
    from macaronic.train.check import score as first_call_score

    eps = [{"label": lb, "adapter": a, "msgs": list(m), "task": t, "ep": t.start(), "final": None, "first": None,
            "steps": 0} for lb, a in variants.items() for m, t in tasks]
    try:
        for _ in range(max_steps):
            live = [e for e in eps if e["final"] is None]
            if not live:
                break
            sp = SamplingParams(max_tokens=max_tokens, temperature=0.0)
            handles = [(e, llm.submit(llm.encode_chat(e["msgs"]), e["adapter"], sp)) for e in live]
            for e, h in handles:
                text, last = h.result()
                if last.finish_reason == "error":
                    raise RuntimeError(last.error)
                e["steps"] += 1
                if e["first"] is None:
                    e["first"] = first_call_score("agent", e["task"], text)
                e["msgs"].append({"role": "assistant", "content": text})
                p = parse_tool_calls(text)
                if p.tool_calls or p.error:
                    results = [e["ep"].call_openai(c) for c in p.tool_calls] or [{"error": p.error}]
                    e["msgs"].append({"role": "tool", "content": "\n".join(map(format_tool_result, results))})
                else:
                    e["final"] = p.content
        out = {lb: [] for lb in variants}
        for e in eps:
            g = agent_state_hash_v1(e["task"], e["ep"], e["final"] or "")
            out[e["label"]].append({"task": e["task"].id, "family": e["task"].family, "pass": float(g["passed"]),
                                   "state": float(g["state_match"]), "first_call": float(bool(e["first"]["pass"])),
                                   "first_tool": float(bool(e["first"]["tool"])),
                                   "steps": e["steps"], "transcript": [m["content"][:200] for m in e["msgs"][2:]]})
        return out
    finally:
        for e in eps:
            e["ep"].close()


def _coding(llm, variants, tasks, max_tokens: int, max_steps: int = 1) -> dict:  # one reply: max_steps unused
    from macaronic.suites.coding import grade

    sp = SamplingParams(max_tokens=max_tokens, temperature=0.0)
    handles = [(lb, t, llm.submit(llm.encode_chat(m), a, sp)) for lb, a in variants.items() for m, t in tasks]
    out = {lb: [] for lb in variants}
    for lb, t, h in handles:
        text, last = h.result()
        if last.finish_reason == "error":
            raise RuntimeError(last.error)
        g = grade(t, text)
        out[lb].append({"task": t.id, "family": t.family, "pass": float(g["passed"]),
                       "tests": g["tests_passed"] / g["tests_total"], "reply": text[:300]})
    return out


@dataclass(frozen=True)
class Scorer:
    """How one specialist is dev-scored: its metrics (the first is `pass`), the scoring of
    {label: adapter} on (messages, task) pairs, its held-out pool ((families, {family: tasks},
    user text) from (n, seed, exclude)), and the comparisons' defaults: the reply cap and the
    dev-family tasks `macaronic train compare` scores."""
    metrics: tuple[str, ...]
    score: Callable  # (llm, variants, tasks, max_tokens, max_steps) -> {label: rows}
    heldout: Callable
    max_tokens: int
    dev_n: int


AGENT = Scorer(("pass", "state", "first_call", "first_tool"), _agent, _agent_pool, 96, 20)  # episodes on the substrate
CODING = Scorer(("pass", "tests"), _coding, _coding_pool, 160, 24)  # one reply, run against the tests


def scored() -> list[str]:
    """The specialists with a dev scorer, in the registry's order."""
    return [s.name for s in all_specialists() if s.devscore]


def scorer(role: str) -> Scorer:
    sc = lookup(role, "devscore")
    if sc is None:
        raise ValueError(f"no dev scorer for role {role!r}; have {sorted(scored())}")
    return sc


def metrics(role: str) -> tuple[str, ...]:
    return scorer(role).metrics


def score(llm, role: str, variants: dict, tasks: list, max_tokens: int = 128, max_steps: int = 4) -> dict:
    """{label: [row per task, in task order]} for each {label: adapter name (None = bare base)}."""
    return scorer(role).score(llm, variants, tasks, max_tokens, max_steps)


def summarize(rows: dict, role: str, reference: str | None = None) -> dict:
    """Per name: n, mean and 95% bootstrap interval of each metric, and the paired difference
    (mean, 95% paired-bootstrap interval) against `reference` on the same tasks."""
    from macaronic.contract.stats import bootstrap_ci, paired_bootstrap

    out = {}
    for name, rs in rows.items():
        s = {"n": len(rs)}
        for m in metrics(role):
            xs = [r[m] for r in rs]
            s[m] = {"mean": sum(xs) / max(1, len(xs)), "ci95": bootstrap_ci(xs)}
            if reference is not None and name != reference and reference in rows:
                ref = {r["task"]: r[m] for r in rows[reference]}
                d, ci = paired_bootstrap(xs, [ref[r["task"]] for r in rs])
                s[m]["delta_vs_" + reference] = {"mean": d, "ci95": ci}
        out[name] = s
    return out


def format_summary(summary: dict, role: str) -> str:
    return "\n".join(f"{role} {name}: " + json.dumps({m: round(s[m]["mean"], 3) for m in metrics(role)})
                     for name, s in summary.items())
