"""Sanity check of trained specialists on held-out (dev-family) prompts, through the engine.

For each role: greedy replies of the bare base and of the adapter to the same dev prompts, graded
with the role's grader (chat/coding suites, genui grader, agent first tool call vs gold). Agent
is checked on its first step only (a parseable call naming the gold tool with the gold
arguments), not on whole episodes. Prints and returns a dict; never reads test families.

    macaronic train check --roles coding,agent --n 6 [--adapters DIR]   (commands/train_check.py)
"""

from __future__ import annotations

import json
import sys

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
