"""`python -m macaronic.suites.bfcl_probe`: BFCL v4's single-turn categories through the served harness.

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

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

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


def main(argv: list[str]) -> int:
    from macaronic.suites.bfcl import CATEGORIES

    ap = argparse.ArgumentParser(prog="python -m macaronic.suites.bfcl_probe", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", type=Path, required=True, help="where the per-problem rows and scores go")
    ap.add_argument("--categories", default=",".join(CATEGORIES), help=f"comma-separated, of {', '.join(CATEGORIES)}")
    ap.add_argument("--models", default=",".join(MODELS), help="comma-separated rows: base, agent, macaronic")
    ap.add_argument("--limit", type=int, default=None, help="first N problems of each category (default: all)")
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--no-constraints", action="store_true")
    ap.add_argument("--base", default=None, help="a registered base (default: the default base), with its specialists")
    ap.add_argument("--adapter-dir", action="append", default=[], metavar="DIR",
                    help="serve these adapter directories instead of the shipped specialists (repeatable)")
    a = ap.parse_args(argv)
    models = a.models.split(",")
    if bad := [m for m in models if m not in MODELS]:
        ap.error(f"unknown model rows {bad}; choose from {MODELS}")
    from macaronic.suites.bfcl import problems
    from macaronic.suites.probe import scores, served, write

    t0 = time.perf_counter()
    llm, mol = served(a.base, a.adapter_dir, constrain=not a.no_constraints)
    out: dict = {"command": "python -m macaronic.suites.bfcl_probe " + " ".join(argv),
                 "constrained": not a.no_constraints, "models": models, "adapters": sorted(llm.adapters.names()),
                 "categories": {}}
    try:
        names = {"base": mol.backend.base()["id"], "agent": "agent", "macaronic": None}
        for cat in a.categories.split(","):
            probs = problems(cat, a.limit)
            rows = {m: asyncio.run(run(mol, cat, probs, names[m], a.max_tokens)) for m in models}
            out["categories"][cat] = {"n": len(probs), "rows": rows, "score": scores(rows, len(probs))}
            print(cat, out["categories"][cat]["score"], f"{time.perf_counter() - t0:.0f}s", file=sys.stderr, flush=True)
    finally:
        llm.close()
    out["seconds"] = round(time.perf_counter() - t0, 1)
    write(out, a.json)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
