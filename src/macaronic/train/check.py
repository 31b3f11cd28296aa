"""Sanity check of trained specialists on held-out (dev-family) prompts, through the engine.

For each role: greedy replies of the bare base and of the adapter to the same dev prompts, graded
with the role's grader (chat/coding suites, genui grader, agent first tool call vs gold). Agent
is checked on its first step only (a parseable call naming the gold tool with the gold
arguments), not on whole episodes. Prints and returns a dict; never reads test families.

    python -m macaronic.train.check --roles coding,agent --n 6 [--adapters DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

MAX_NEW = {"chat": 96, "coding": 200, "agent": 160, "genui": 800}


def score(role: str, task, reply: str) -> dict:
    if role == "coding":
        from macaronic.suites.coding import grade

        g = grade(task, reply)
        return {"pass": g["passed"], "tests": g["tests_passed"] / g["tests_total"]}
    if role == "chat":
        from macaronic.suites.chat import grade

        g = grade(task, reply)
        return {"pass": g["passed"], "score": g["score"]}
    if role == "genui":
        from macaronic.genui.grade import grade

        g = grade(task, reply)
        return {"pass": bool(g["l1_valid"]), "l2": g["l2_content"]}
    if role == "agent":
        from macaronic.substrate.toolcalls import parse_tool_calls

        p = parse_tool_calls(reply)
        calls = [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in p.tool_calls] if p.ok else []
        name, args = task.gold_actions[0]
        return {"pass": bool(calls) and calls[0] == (name, args), "parsed": bool(calls),
                "tool": bool(calls) and calls[0][0] == name}
    raise ValueError(role)


def check(llm, roles: list[str], n: int, seed: int = 0, with_base: bool = True) -> dict:
    from macaronic.engine.sampling import SamplingParams
    from macaronic.train.builders import dev_tasks

    out = {}
    for role in roles:
        rows = []
        for msgs, task in dev_tasks(role, n, seed):
            ids = llm.encode_chat(msgs)
            row = {"task": getattr(task, "id", "")}
            for label, adapter in (("base", None), ("adapter", role)) if with_base else (("adapter", role),):
                h = llm.submit(ids, adapter, SamplingParams(max_tokens=MAX_NEW[role], temperature=0))
                text, _ = h.result()
                row[label] = score(role, task, text)
                row[label + "_text"] = text[:300]
            rows.append(row)
        summary = {}
        for label in ("base", "adapter"):
            if rows and label in rows[0]:
                keys = rows[0][label].keys()
                summary[label] = {k: sum(float(r[label][k]) for r in rows) / len(rows) for k in keys}
        out[role] = {"n": len(rows), "summary": summary, "rows": rows}
        print(f"{role}: {json.dumps(summary)}", file=sys.stderr)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--roles", default="chat,agent,coding,genui")
    p.add_argument("--n", type=int, default=6)
    p.add_argument("--adapters", type=Path, default=None, help="directory of <role>/ adapters (default: shipped)")
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--base", default=None, help="a registered base (default: the default base)")
    a = p.parse_args(argv)
    from macaronic.engine.llm import load_default_llm, load_llm

    roles = a.roles.split(",")
    llm = load_llm(a.base, [a.adapters / r for r in roles]) if a.adapters else load_default_llm(base=a.base)
    try:
        res = check(llm, roles, a.n)
    finally:
        llm.close()
    if a.json:
        a.json.write_text(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
