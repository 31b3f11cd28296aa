"""Tool calls in evaluated episodes (`macaronic eval toolnames ROWS.jsonl ...`: commands/eval_toolnames.py).

Reads per-task rows written by `macaronic eval` / `macaronic eval ablate` (each row keeps its
conversation) and reports, per file and suite: episodes, the share of episodes with a call to a
tool that is not in the substrate's tool list (an invented tool), the share with a call whose
arguments break that tool's schema, calls per episode, and the mean score. Suites whose tools
are not the substrate's (BFCL brings its own) get calls and score only. The rows are the
evidence; this only counts. Knows the tool-call text format and the substrate's tools.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict

SUBSTRATE_SUITES = {"agent", "mixed"}
CALL = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.S)


def calls_in(messages: list[dict]) -> list[tuple[str | None, object]]:
    out = []
    for m in messages:
        if m.get("role") != "assistant":
            continue
        for body in CALL.findall(m.get("content") or ""):
            try:
                obj = json.loads(body)
            except ValueError:
                out.append((None, None))
                continue
            out.append((obj.get("name"), obj.get("arguments")) if isinstance(obj, dict) else (None, None))
    return out


def summarize(rows: list[dict]) -> dict:
    from macaronic.substrate.tools import TOOLS, schema_errors

    known = {t.name: t for t in TOOLS}
    by_suite: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        by_suite[r.get("suite", "?")].append(r)
    out = {}
    for suite, rs in sorted(by_suite.items()):
        invented = bad_args = n_calls = 0
        for r in rs:
            calls = calls_in(r.get("messages") or [])
            n_calls += len(calls)
            invented += any(name not in known for name, _ in calls)
            bad_args += any(name in known and (not isinstance(args, dict) or schema_errors(known[name].openai()["function"]
                                                                                          ["parameters"], args))
                            for name, args in calls)
        n = len(rs)
        out[suite] = {"episodes": n, "calls_per_episode": round(n_calls / n, 2),
                      "score": round(sum(float(r.get("score") or 0) for r in rs) / n, 3)}
        if suite in SUBSTRATE_SUITES:
            out[suite] |= {"invented_tool": round(invented / n, 3), "bad_arguments": round(bad_args / n, 3)}
    return out
