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

from macaronic.suites.registry import SUITES, suite

MAX_NEW = {role: s.max_new for role, s in SUITES.items()}


def score(role: str, task, reply: str) -> dict:
    """The role's suite grade of one reply (`suites.registry`)."""
    return suite(role).grade(task, reply)


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
