"""`python -m macaronic.suites.bfcl_probe`: BFCL simple and multiple through the served harness.

Each problem of `bfcl-eval`'s `BFCL_v4_simple_python` / `BFCL_v4_multiple` (the package's own
data; multiple gives 2-4 functions, one right) is one turn forced to the agent adapter with the
problem's functions as `tools` (tool_choice auto), greedy, answered concurrently. Per problem:
whether the reply is a valid call (a given function, arguments valid under its schema) and
whether it matches BFCL's possible answers (the contract's `bfcl.ast_simple@1` check).
`--no-constraints` answers without the tool grammar: the comparison row. Report only, outside
any contract: these problems are public. Writes JSON; prints a summary.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

FILES = {"simple": ("data/BFCL_v4_simple_python.json", "data/possible_answer/BFCL_v4_simple_python.json"),
         "multiple": ("data/BFCL_v4_multiple.json", "data/possible_answer/BFCL_v4_multiple.json")}


def problems(category: str, limit: int | None) -> list[dict]:
    from macaronic.suites.external import BFCL_PACKAGE, package_dir

    d = package_dir("bfcl_eval", BFCL_PACKAGE)
    q, a = (d / p for p in FILES[category])
    answers = {x["id"]: x["ground_truth"] for x in map(json.loads, a.read_text().splitlines()) if x}
    out = [json.loads(line) for line in q.read_text().splitlines() if line.strip()][:limit]
    return [{**p, "ground_truth": answers[p["id"]]} for p in out]


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


async def run(mol, probs: list[dict], max_tokens: int) -> list[dict]:
    from macaronic.contract.graders import bfcl_ast_simple_v1
    from macaronic.substrate.toolcalls import format_tool_calls
    from macaronic.suites.external import bfcl_tools

    async def one(p):
        tools = bfcl_tools(p)
        question = p["question"][0] if isinstance(p["question"][0], list) else p["question"]
        r = await mol.aturn([{"role": m["role"], "content": m["content"]} for m in question], tools=tools,
                            model="agent", sampling={"max_tokens": max_tokens, "temperature": 0.0})
        calls = format_tool_calls((c["function"]["name"], json.loads(c["function"]["arguments"]))
                                  for c in r.tool_calls)
        graded = bfcl_ast_simple_v1(p, calls or r.text)
        return {"id": p["id"], "valid_call": valid_call(r, tools), "exact": graded["passed"],
                "reason": graded.get("reason"), "tool_error": r.tool_error, "finish_reason": r.finish_reason}

    return await asyncio.gather(*[one(p) for p in probs])


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m macaronic.suites.bfcl_probe", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", type=Path, required=True)
    ap.add_argument("--categories", default="simple,multiple")
    ap.add_argument("--limit", type=int, default=50, help="first N problems of each category")
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--no-constraints", action="store_true")
    ap.add_argument("--base", default=None, help="a registered base (default: the default base), with its specialists")
    a = ap.parse_args(argv)
    from macaronic.engine.llm import EngineConfig, load_default_llm
    from macaronic.serve.mol import HarnessConfig, MoL

    t0 = time.perf_counter()
    llm = load_default_llm(EngineConfig.from_env(max_batch=16), base=a.base)
    out: dict = {"command": "python -m macaronic.suites.bfcl_probe " + " ".join(argv),
                 "constrained": not a.no_constraints, "categories": {}}
    try:
        mol = MoL.from_llm(llm, config=HarnessConfig(constrain=not a.no_constraints, summaries=False))
        for cat in a.categories.split(","):
            rows = asyncio.run(run(mol, problems(cat, a.limit), a.max_tokens))
            n = len(rows)
            out["categories"][cat] = {"n": n, "valid_call": round(sum(r["valid_call"] for r in rows) / n, 3),
                                      "exact": round(sum(r["exact"] for r in rows) / n, 3), "rows": rows}
    finally:
        llm.close()
    out["seconds"] = round(time.perf_counter() - t0, 1)
    a.json.parent.mkdir(parents=True, exist_ok=True)
    a.json.write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps({c: {k: v for k, v in s.items() if k != "rows"} for c, s in out["categories"].items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
