"""The compact tool listing without a shared preamble (docs/LOG.md, 2026-12-05 seventh session,
issue 36): which BFCL problems it changes, and multi_turn_base before and after.

BFCL's multi-turn backends open every tool's description with the same preamble ("This tool belongs
to the Gorilla file system. It is a simple file system ..."), so the compact listing, one sentence
per tool, said the same thing of all eighteen tools. It now shows each tool's first sentence that no
other listed tool shares (`prompts._own_sentence`). Part 1 renders every BFCL problem's tools both
ways and counts the problems whose listing changed (only multi_turn_base: the single-turn
categories' prompts are byte for byte the same, so their scores cannot move). Part 2 pairs the
before/after rows of the first 20 multi_turn_base problems, served int4 on one 2-core AVX2 box, the
two runs side by side beside an evolve run:

    export MACARONIC_QUANT=int4 MACARONIC_DTYPE=bfloat16 OMP_NUM_THREADS=1
    git checkout 945ad46   # the commit before the change (or a copy of its src/ on PYTHONPATH)
    macaronic probe bfcl --categories multi_turn_base --limit 20 --models agent,macaronic \\
        --max-tokens 256 --json docs/bench/external/bfcl-qwen-mt-preamble-before-20.json
    git checkout 679a9d1   # the change
    ... --json docs/bench/external/bfcl-qwen-mt-preamble-after-20.json

    .venv/bin/python scripts/tool_preamble_compare.py
"""

from __future__ import annotations

import json

EXT = "docs/bench/external/bfcl-qwen-mt-preamble-"
CATS = ("simple", "simple_java", "simple_javascript", "multiple", "parallel", "parallel_multiple",
        "irrelevance", "multi_turn_base")


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


def rows(which: str, model: str) -> dict:
    return {r["id"]: r for r in json.load(open(f"{EXT}{which}-20.json"))["categories"]["multi_turn_base"]["rows"][model]}


def compare() -> None:
    from macaronic.contract.stats import paired_bootstrap

    print("\n| model | before | after | after − before [95%] | steps before / after | problems at the 20-step cap, before / after |")
    print("|---|---:|---:|---|---|---|")
    for model in ("agent", "macaronic"):
        b, a = rows("before", model), rows("after", model)
        ids = sorted(b)
        assert sorted(a) == ids
        old, new = [float(b[i]["passed"]) for i in ids], [float(a[i]["passed"]) for i in ids]
        d, ci = paired_bootstrap(new, old)

        def capped(by_id: dict) -> int:  # problems with a user turn that used all 20 steps: the agent looped
            return sum(any(len(turn) >= 20 for turn in r["turns"]) for r in by_id.values())

        print(f"| {model} | {sum(old) / len(ids):.3f} | {sum(new) / len(ids):.3f} | {d:+.3f} [{ci[0]:+.3f}, {ci[1]:+.3f}] "
              f"| {sum(b[i]['steps'] for i in ids)} / {sum(a[i]['steps'] for i in ids)} | {capped(b)} / {capped(a)} |")


if __name__ == "__main__":
    changed()
    compare()
