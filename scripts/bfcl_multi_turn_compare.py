"""BFCL multi_turn_base, first 20 problems, through the served harness (docs/LOG.md, 2026-12-05
seventh session, issues 36 and 37): two harness changes, each against the rows before it.

1. The compact tool listing without a shared preamble. BFCL's multi-turn backends open every tool's
   description with the same preamble ("This tool belongs to the Gorilla file system. It is a simple
   file system ..."), so the compact listing, one sentence per tool, said the same of all eighteen
   tools. It now shows each tool's first sentence that no other listed tool shares
   (`prompts._own_sentence`). Part 1 renders every BFCL problem's tools both ways and counts the
   problems whose listing changed: only multi_turn_base (the single-turn categories' prompts are byte
   for byte the same, so their scores cannot move); it also renders 300 examples of each tool engine
   (none changes, so the shipped adapters see what they were trained on).
2. The tool-session rule (`router.config.tool_session`): a user turn that follows an assistant turn
   which called a tool goes to the agent, which decides greedily as it would answer. The script
   checks that no dev task in run-r1's rows (contract v7) has such a turn.

Served int4 on one 2-core AVX2 box beside an evolve run, greedy, 256 tokens:

    export MACARONIC_QUANT=int4 MACARONIC_DTYPE=bfloat16 OMP_NUM_THREADS=1
    P="macaronic probe bfcl --categories multi_turn_base --limit 20 --max-tokens 256"
    # at 945ad46 (before the listing change):
    $P --models agent,macaronic --json docs/bench/external/bfcl-qwen-mt-preamble-before-20.json
    # at 679a9d1 (the listing change):
    $P --models agent,macaronic --json docs/bench/external/bfcl-qwen-mt-preamble-after-20.json
    # at b582e0b (the tool-session rule):
    $P --models macaronic --json docs/bench/external/bfcl-qwen-mt-session-20.json

    .venv/bin/python scripts/bfcl_multi_turn_compare.py

The package's checker passes a problem only when every turn's calls leave the backends as the
ground truth does; every row here passes none of the 20. So beside it the table counts, over the 70
user turns with ground-truth calls, the turns whose calls name at least one function the ground
truth calls in that turn ("right tool"), the turns whose called names are the ground truth's exactly,
and the turns with no call; the interval is a paired bootstrap over turns (turns of one problem are
not independent: read it as a rough one).
"""

from __future__ import annotations

import json

EXT = "docs/bench/external/"
CATS = ("simple", "simple_java", "simple_javascript", "multiple", "parallel", "parallel_multiple",
        "irrelevance", "multi_turn_base")
ROWS = {  # label -> (file, model row)
    "agent forced, listing before": ("bfcl-qwen-mt-preamble-before-20.json", "agent"),
    "agent forced, listing after": ("bfcl-qwen-mt-preamble-after-20.json", "agent"),
    "routed, listing before": ("bfcl-qwen-mt-preamble-before-20.json", "macaronic"),
    "routed, listing after": ("bfcl-qwen-mt-preamble-after-20.json", "macaronic"),
    "routed, listing after + tool session": ("bfcl-qwen-mt-session-20.json", "macaronic"),
}
PAIRS = (("agent forced, listing after", "agent forced, listing before"),
         ("routed, listing after", "routed, listing before"),
         ("routed, listing after + tool session", "routed, listing after"),
         ("routed, listing after + tool session", "agent forced, listing after"))


def changed() -> None:
    from macaronic.prompts import _own_sentence, _shared_sentences
    from macaronic.suites import bfcl
    from macaronic.suites.external import bfcl_tools

    print("| category | problems | listing changed |\n|---|---:|---:|")
    for cat in CATS:
        probs = bfcl.problems(cat)
        n = 0
        for p in probs:
            tools = bfcl_tools(p)
            shared = _shared_sentences(tools)
            descs = [t["function"].get("description") or "" for t in tools]
            n += any(_own_sentence(d, shared) != d.split(".")[0] for d in descs)
        print(f"| {cat} | {len(probs)} | {n} |")


def engines_unchanged(n: int = 300) -> None:
    """The listing change leaves the training data alone: no toolset in `n` examples of each tool
    engine has a first sentence another of its tools shares, so every prompt renders as before."""
    import macaronic.prompts as prompts
    from macaronic.train.builders import build

    moved = []
    own = prompts._own_sentence

    def spy(desc, shared):
        r = own(desc, shared)
        if r != desc.split(".")[0]:
            moved.append(desc)
        return r

    prompts._own_sentence = spy
    try:
        print("\n| generator | examples | tool lines changed |\n|---|---:|---:|")
        for name in ("agent", "agent_grounded", "agent_engine", "agent_functions", "genui_engine_wide"):
            moved.clear()
            print(f"| {name} | {len(build(name, n, 0, base='qwen2.5-coder-0.5b'))} | {len(moved)} |")
    finally:
        prompts._own_sentence = own


def contract_untouched(path: str = "docs/evolve/run-r1/work/dev.jsonl") -> None:
    """The tool-session rule leaves the contract's suites alone: no v7 dev task of run-r1's rows has
    a user turn after an assistant turn that called a tool."""
    import ast

    from macaronic.router.config import tool_session

    n = hit = 0
    for line in open(path):
        m = json.loads(line)["messages"]
        m = ast.literal_eval(m) if isinstance(m, str) else m
        users = [i for i, x in enumerate(m) if x.get("role") == "user"]
        n += 1
        hit += bool(users) and tool_session(m[: users[-1] + 1])
    print(f"\nrun-r1 dev rows: {n}; with a user turn in a tool session: {hit}")


def turns(label: str, gold: dict) -> dict:
    """(problem id, turn) -> the per-turn measures of one row (`bfcl.turn_measures`)."""
    from macaronic.suites.bfcl import turn_measures

    file, model = ROWS[label]
    return turn_measures(json.load(open(EXT + file))["categories"]["multi_turn_base"]["rows"][model], gold)


def compare() -> None:
    from macaronic.contract.stats import paired_bootstrap
    from macaronic.suites import bfcl

    gold = {p["id"]: p["ground_truth"] for p in bfcl.problems("multi_turn_base", limit=20)}
    rows = {label: turns(label, gold) for label in ROWS}
    print("\n| row | problems passed | turns with the right tool | exact tool set | no call |\n|---|---:|---:|---:|---:|")
    for label, t in rows.items():
        probs = {pid: v["passed"] for (pid, _), v in t.items()}
        print(f"| {label} | {int(sum(probs.values()))} / {len(probs)} | " + " | ".join(
            f"{int(sum(v[k] for v in t.values()))} / {len(t)}" for k in ("right", "exact", "none")) + " |")
    print("\n| comparison | right tool, difference [95%] |\n|---|---|")
    for new, old in PAIRS:
        keys = sorted(rows[new])
        assert keys == sorted(rows[old])
        d, ci = paired_bootstrap([rows[new][k]["right"] for k in keys], [rows[old][k]["right"] for k in keys])
        print(f"| {new} − {old} | {d:+.3f} [{ci[0]:+.3f}, {ci[1]:+.3f}] |")


if __name__ == "__main__":
    changed()
    engines_unchanged()
    contract_untouched()
    compare()
