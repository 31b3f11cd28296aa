"""The instruction probe's rows (`macaronic probe instructions`, commands/probe.py): the hand-written
instruction suite (`macaronic.suites.instructions`, 104 prompts) through the served harness, once per row:

- `base`: the bare base, no adapter (the row every specialist must beat);
- `chat`: forced to the chat specialist;
- `macaronic`: routed, as a client that names no specialist gets it.

Greedy, 512 tokens, answered concurrently. Prints each row's strict prompt-level accuracy (every
instruction of a prompt followed) with its paired difference from `base` (95% bootstrap
interval), and writes every per-prompt row (reply included) to --json. Report only.
"""

from __future__ import annotations

import asyncio

MODELS = ("base", "chat", "macaronic")


async def run(mol, prompts: list[dict], model: str | None, max_tokens: int, tools: list[dict] | None = None) -> list[dict]:
    """One row; `tools`: attached to every prompt (tool_choice auto). A reply that calls a tool
    instead of answering fails its prompt."""
    from macaronic.suites.instructions import grade

    async def one(p):
        r = await mol.aturn([{"role": "user", "content": p["prompt"]}], tools=tools, model=model,
                            sampling={"max_tokens": max_tokens, "temperature": 0.0})
        g = grade(p, r.text) if not r.tool_calls else {"passed": False, "checks": []}
        return {"id": p["id"], "passed": g["passed"], "checks": g["checks"], "reply": r.text,
                "calls": [c["function"]["name"] for c in r.tool_calls], "adapter": r.route.adapter,
                "specialist": r.route.specialist, "policy": r.route.policy, "reason": r.route.reason,
                "finish_reason": r.finish_reason}

    return await asyncio.gather(*[one(p) for p in prompts])
