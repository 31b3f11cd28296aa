"""The BFCL probe's rows (`macaronic probe bfcl`, commands/probe.py): BFCL v4's single-turn categories
through the served harness.

Each problem of `bfcl-eval`'s data (simple python, multiple, parallel, parallel_multiple,
irrelevance; `macaronic.suites.bfcl`) is one turn with the problem's functions as `tools`
(tool_choice auto), greedy, answered concurrently, once per model row:

- `base`: the bare base, no adapter (the row every specialist must beat);
- `agent`: forced to the agent specialist;
- `macaronic`: routed, as a client that names no specialist gets it.

Graded by the package's own AST checker (irrelevance: no call). Prints a table with each row's
score per category and its paired difference from `base` (95% bootstrap interval), and writes
every per-problem row to --json so the intervals can be recomputed. `--no-constraints` answers
without the tool grammar. Report only, outside any contract: these problems are public.
"""

from __future__ import annotations

import asyncio
import json

MODELS = ("base", "agent", "macaronic")


def valid_call(result, tools: list[dict]) -> bool:
    import jsonschema

    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in tools}
    if not result.tool_calls:
        return False
    for c in result.tool_calls:
        name = c["function"]["name"]
        if name not in schemas:
            return False
        try:
            jsonschema.validate(json.loads(c["function"]["arguments"]), schemas[name])
        except (ValueError, jsonschema.ValidationError, jsonschema.SchemaError):
            return False
    return True


async def run(mol, category: str, probs: list[dict], model: str | None, max_tokens: int) -> list[dict]:
    from macaronic.suites.bfcl import first_turn, grade
    from macaronic.suites.external import bfcl_tools

    async def one(p):
        tools = bfcl_tools(p)
        r = await mol.aturn(first_turn(p), tools=tools, model=model,
                            sampling={"max_tokens": max_tokens, "temperature": 0.0})
        calls = [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in r.tool_calls]
        g = grade(category, p, calls)
        return {"id": p["id"], "passed": g["passed"], "error": g["error"], "valid_call": valid_call(r, tools),
                "calls": calls, "text": r.text[:200], "adapter": r.route.adapter, "policy": r.route.policy,
                "tool_error": r.tool_error, "finish_reason": r.finish_reason}

    return await asyncio.gather(*[one(p) for p in probs])
