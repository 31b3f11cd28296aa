"""The agent decides calls for the turns the head sends elsewhere (router.json `tools_decide`,
`MoL.tools_decision`; docs/LOG.md 2026-12-05 fifth session, issue 37). One 2-core AVX2 EPYC, fp32,
greedy, the shipped specialists; paired bootstrap over items (`contract.stats.paired_bootstrap`).

Rows (docs/bench/external/), each from `macaronic probe ...` with the environment
`MACARONIC_QUANT=none MACARONIC_DTYPE=float32 OMP_NUM_THREADS=2` and `--base qwen2.5-coder-0.5b`:

    bfcl-qwen-engine-40.json                         bare base, call categories (AMX int4, 2026-12-03)
    bfcl-qwen-agent-functions-ship-irr-routed-base.json  bare base, irrelevance (third session, this box)
    bfcl-qwen-agent-functions-cand-{4x20,irr}.json   forced agent (third session; --models agent)
    bfcl-qwen-agent-functions-cand-irr-routed.json   routed, the tools rule alone (third session)
    bfcl-qwen-routed-rule-4x20.json                  routed, the tools rule alone
        bfcl --categories simple,multiple,parallel,parallel_multiple --limit 20 --models macaronic
    bfcl-qwen-routed-decide-{4x20,irr}.json          routed, tools_decide on (--bundle B)
        the same, and --categories irrelevance --limit 40
    instructions-qwen-tools-{rule,decide}.json       the 104 instructions, the assistant toolset attached
        instructions --max-tokens 384 --tools assistant --models macaronic [--bundle B]
    instructions-qwen-tools-decide-greedy.json       the same, the agent taking every turn it opened a
        call on greedily (before `tools_call_confidence`: the code of commit 50770f2)

B: the shipped bundle with `"tools_decide": true` in router.json (what it now ships).

    .venv/bin/python scripts/tools_decide_compare.py
"""

from __future__ import annotations

import json

from macaronic.contract.stats import paired_bootstrap

EXT = "docs/bench/external/"
CATS = ("simple", "multiple", "parallel", "parallel_multiple", "irrelevance")
BFCL = {  # row -> (file for the call categories, file for irrelevance, model)
    # the bare base: its call rows are the committed AMX int4 ones (first 40; their first 20 here),
    # its irrelevance rows this box's (fp32, the third session); not rerun this session
    "bare base": ("bfcl-qwen-engine-40.json", "bfcl-qwen-agent-functions-ship-irr-routed-base.json", "base"),
    "forced agent": ("bfcl-qwen-agent-functions-cand-4x20.json", "bfcl-qwen-agent-functions-cand-irr.json", "agent"),
    "routed, the tools rule": ("bfcl-qwen-routed-rule-4x20.json", "bfcl-qwen-agent-functions-cand-irr-routed.json",
                               "macaronic"),
    "routed, tools_decide": ("bfcl-qwen-routed-decide-4x20.json", "bfcl-qwen-routed-decide-irr.json", "macaronic"),
}
INSTRUCTIONS = {"routed, the tools rule": "instructions-qwen-tools-rule.json",
                "routed, tools_decide": "instructions-qwen-tools-decide.json",
                "routed, tools_decide, greedy (no confidence)": "instructions-qwen-tools-decide-greedy.json"}


def bfcl(row: str, cat: str) -> dict[str, float]:
    calls, irr, model = BFCL[row]
    doc = json.load(open(EXT + (irr if cat == "irrelevance" else calls)))
    rows = doc["categories"][cat]["rows"][model][: 40 if cat == "irrelevance" else 20]
    return {r["id"]: float(r["passed"]) for r in rows}


def instructions(row: str) -> dict[str, float]:
    doc = json.load(open(EXT + INSTRUCTIONS[row]))
    return {r["id"]: float(r["passed"]) for r in doc["categories"]["instructions"]["rows"]["macaronic"]}


def cell(new: dict, old: dict | None = None) -> str:
    ids = sorted(new)
    n = [new[i] for i in ids]
    if old is None:
        return f"{sum(n) / len(n):.3f}"
    assert sorted(old) == ids
    d, ci = paired_bootstrap(n, [old[i] for i in ids])
    return f"{sum(n) / len(n):.3f} ({d:+.3f} [{ci[0]:+.3f}, {ci[1]:+.3f}])"


def main() -> None:
    print("BFCL v4 (call categories first 20, irrelevance first 40); in brackets: minus the row named\n")
    print("| row | " + " | ".join(CATS) + " | all 120 |\n|---|" + "---|" * (len(CATS) + 1))
    for row, against in (("bare base", None), ("forced agent", None), ("routed, the tools rule", "forced agent"),
                         ("routed, tools_decide", "forced agent"), ("routed, tools_decide", "routed, the tools rule"),
                         ("routed, tools_decide", "bare base")):
        cells, every, every_old = [], {}, {}
        for cat in CATS:
            new = bfcl(row, cat)
            old = bfcl(against, cat) if against else None
            cells.append(cell(new, old))
            every.update({f"{cat}/{k}": v for k, v in new.items()})
            every_old.update({f"{cat}/{k}": v for k, v in (old or {}).items()})
        cells.append(cell(every, every_old or None))
        print(f"| {row}{f' (− {against})' if against else ''} | " + " | ".join(cells) + " |")
    print("\nThe 104 hand-written instructions, the assistant toolset attached (a reply that calls fails)\n")
    print("| row | strict accuracy | replies that call a tool |\n|---|---|---|")
    rule = instructions("routed, the tools rule")
    for row in INSTRUCTIONS:
        doc = json.load(open(EXT + INSTRUCTIONS[row]))["categories"]["instructions"]["rows"]["macaronic"]
        calls = sum(bool(r["calls"]) for r in doc)
        print(f"| {row} | {cell(instructions(row), None if row == 'routed, the tools rule' else rule)} | {calls} |")


if __name__ == "__main__":
    main()
