"""`python -m macaronic.suites.instructions_probe`: the hand-written instruction suite
(`macaronic.suites.instructions`, 104 prompts) through the served harness, once per row:

- `base`: the bare base, no adapter (the row every specialist must beat);
- `chat`: forced to the chat specialist;
- `macaronic`: routed, as a client that names no specialist gets it.

Greedy, 512 tokens, answered concurrently. Prints each row's strict prompt-level accuracy (every
instruction of a prompt followed) with its paired difference from `base` (95% bootstrap
interval), and writes every per-prompt row (reply included) to --json. Report only.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

MODELS = ("base", "chat", "macaronic")


async def run(mol, prompts: list[dict], model: str | None, max_tokens: int) -> list[dict]:
    from macaronic.suites.instructions import grade

    async def one(p):
        r = await mol.aturn([{"role": "user", "content": p["prompt"]}], model=model,
                            sampling={"max_tokens": max_tokens, "temperature": 0.0})
        g = grade(p, r.text)
        return {"id": p["id"], "passed": g["passed"], "checks": g["checks"], "reply": r.text,
                "adapter": r.route.adapter, "specialist": r.route.specialist, "finish_reason": r.finish_reason}

    return await asyncio.gather(*[one(p) for p in prompts])


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m macaronic.suites.instructions_probe", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", type=Path, required=True, help="where the per-prompt rows and scores go")
    ap.add_argument("--models", default=",".join(MODELS), help="comma-separated rows: base, chat, macaronic")
    ap.add_argument("--limit", type=int, default=None, help="first N prompts (default: all)")
    ap.add_argument("--max-tokens", type=int, default=512)
    ap.add_argument("--base", default=None, help="a registered base (default: the default base), with its specialists")
    ap.add_argument("--adapter-dir", action="append", default=[], metavar="DIR",
                    help="serve these adapter directories instead of the shipped specialists (repeatable)")
    a = ap.parse_args(argv)
    models = a.models.split(",")
    if bad := [m for m in models if m not in MODELS]:
        ap.error(f"unknown model rows {bad}; choose from {MODELS}")
    from macaronic.suites.instructions import load
    from macaronic.suites.probe import scores, served, write

    prompts = load()[: a.limit]
    t0 = time.perf_counter()
    llm, mol = served(a.base, a.adapter_dir)
    try:
        names = {"base": mol.backend.base()["id"], "chat": "chat", "macaronic": None}
        rows = {}
        for m in models:
            rows[m] = asyncio.run(run(mol, prompts, names[m], a.max_tokens))
            print(m, round(sum(r["passed"] for r in rows[m]) / len(prompts), 3), f"{time.perf_counter() - t0:.0f}s",
                  file=sys.stderr, flush=True)
        adapters = sorted(llm.adapters.names())
    finally:
        llm.close()
    out = {"command": "python -m macaronic.suites.instructions_probe " + " ".join(argv), "models": models,
           "adapters": adapters, "seconds": round(time.perf_counter() - t0, 1),
           "categories": {"instructions": {"n": len(prompts), "rows": rows, "score": scores(rows, len(prompts))}}}
    write(out, a.json)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
