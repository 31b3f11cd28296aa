"""The BFCL probe's rows (`macaronic probe bfcl`, commands/probe.py): BFCL v4's categories
through the served harness.

Each single-turn problem of `bfcl-eval`'s data (simple python, multiple, parallel,
parallel_multiple, irrelevance; `macaronic.suites.bfcl`) is one turn with the problem's functions
as `tools` (tool_choice auto); a multi_turn_base problem is a conversation (`run_multi_turn`).
Greedy, answered concurrently, once per model row:

- `base`: the bare base, no adapter (the row every specialist must beat);
- `agent`: forced to the agent specialist;
- `macaronic`: routed, as a client that names no specialist gets it.

Graded by the package's own checkers (AST; irrelevance: no call; multi-turn: state and results). Prints a table with each row's
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
                "calls": calls, "text": r.text[:200], "adapter": r.route.adapter, "policy": r.route.policy, "reason": r.route.reason,
                "tool_error": r.tool_error, "finish_reason": r.finish_reason}

    return await asyncio.gather(*[one(p) for p in probs])


async def run_multi_turn(mol, probs: list[dict], model: str | None, max_tokens: int, row: str) -> list[dict]:
    """BFCL's multi-turn conversations through the served harness, as the leaderboard's runner drives
    a function-calling model: each pre-scripted user turn is appended to the conversation, then the
    model is asked again while it answers with calls (at most `MAX_STEPS` times per turn); every call
    runs on the problem's backends (one instance per problem and `row`) and its result goes back as a
    tool message. The calls of every step are graded by the package's multi-turn checker."""
    import uuid

    from macaronic.suites.bfcl import MAX_STEPS, call_strings, execute, grade_multi_turn
    from macaronic.suites.external import bfcl_tools

    run_id = f"{row}_{uuid.uuid4().hex[:8]}"

    async def one(p):
        tools = bfcl_tools(p)
        messages: list[dict] = []
        turns: list[list[list[str]]] = []
        adapters, errors = [], []
        for user_turn in p["question"]:
            messages += [{"role": m["role"], "content": m["content"]} for m in user_turn]
            steps: list[list[str]] = []
            for _ in range(MAX_STEPS):
                r = await mol.aturn(messages, tools=tools, model=model,
                                    sampling={"max_tokens": max_tokens, "temperature": 0.0})
                adapters.append(r.route.adapter)
                if r.tool_error:
                    errors.append(r.tool_error)
                if not r.tool_calls:
                    messages.append({"role": "assistant", "content": r.content or r.text})
                    break
                calls = call_strings([(c["function"]["name"], json.loads(c["function"]["arguments"]))
                                      for c in r.tool_calls])
                steps.append(calls)
                messages.append({"role": "assistant", "content": r.content or None, "tool_calls": r.tool_calls})
                for c, result in zip(r.tool_calls, execute(p, calls, run_id)):
                    messages.append({"role": "tool", "tool_call_id": c["id"], "content": result})
            turns.append(steps)
        g = grade_multi_turn(p, turns, row)
        return {"id": p["id"], "passed": g["passed"], "error": g["error"], "turns": turns,
                "adapters": sorted(set(a or "base" for a in adapters)), "steps": sum(map(len, turns)),
                "tool_errors": errors[:5]}

    return await asyncio.gather(*[one(p) for p in probs])
