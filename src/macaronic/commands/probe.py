"""`macaronic probe bfcl|instructions`: the external-suite probes through the served MoL, report only.

Each probe answers its suite once per model row (the bare base, one specialist forced, routed) on
the MoL `macaronic serve` would build (a registered base or given adapter directories, with the
shipped router), writes every row to --json and prints a table with each row's score and its
paired difference from `base`. The rows are built in suites/ (bfcl_probe.py,
instructions_probe.py); `macaronic genui probe` is the genui specialist's probe.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

BFCL_DOC = """BFCL v4 through the served harness.

Each problem of `bfcl-eval`'s single-turn data (simple python, multiple, parallel,
parallel_multiple, irrelevance; `macaronic.suites.bfcl`) is one turn with the problem's functions
as `tools` (tool_choice auto); a multi_turn_base problem is a conversation of pre-scripted user
turns whose calls run on the package's own backends, their results returned as tool messages (at
most 20 model steps per turn, as the leaderboard's runner). Greedy, problems answered
concurrently, once per model row:

- `base`: the bare base, no adapter (the row every specialist must beat);
- `agent`: forced to the agent specialist;
- `macaronic`: routed, as a client that names no specialist gets it.

Graded by the package's own checkers (AST; irrelevance: no call; multi-turn: the backends' state
and the calls' results after every turn). Prints a table with each row's
score per category and its paired difference from `base` (95% bootstrap interval), and writes
every per-problem row to --json so the intervals can be recomputed. `--no-constraints` answers
without the tool grammar. Report only, outside any contract: these problems are public.
"""

INSTRUCTIONS_DOC = """The hand-written instruction suite (`macaronic.suites.instructions`, 104 prompts; `--set 2`:
100 more, written blind) through the served harness, once per row:

- `base`: the bare base, no adapter (the row every specialist must beat);
- `chat`: forced to the chat specialist;
- `macaronic`: routed, as a client that names no specialist gets it.

Greedy, 512 tokens, answered concurrently. Prints each row's strict prompt-level accuracy (every
instruction of a prompt followed) with its paired difference from `base` (95% bootstrap
interval), and writes every per-prompt row (reply included) to --json. Report only.
"""

PROBES = {"bfcl": "BFCL v4: the single-turn categories and multi_turn_base (bfcl-eval's data and checkers)",
          "instructions": "the hand-written instruction suite (104 prompts, strict prompt-level accuracy)"}


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="macaronic probe",
                                description="The external-suite probes through the served MoL, report only.")
    sub = p.add_subparsers(dest="probe", required=True, metavar="PROBE")
    for name, help_ in PROBES.items():
        sub.add_parser(name, help=help_, add_help=False)
    if argv[:1] and argv[0] in PROBES:
        return {"bfcl": bfcl, "instructions": instructions}[argv[0]](argv[1:])
    p.parse_args(argv)
    return 2


def served(base: str | None, adapter_dirs: list, bundle: Path | None = None, **harness):
    """(llm, MoL) as `macaronic serve` would build them for this base (and harness bundle, default
    the shipped one); the caller closes the llm."""
    from macaronic.engine.llm import EngineConfig, load_base_llm
    from macaronic.harness import load_bundle
    from macaronic.router.shipped import router_for
    from macaronic.serve.mol import HarnessConfig, MoL

    b = load_bundle(bundle)
    llm = load_base_llm(base, adapter_dirs, EngineConfig.from_env(max_batch=16))
    # the router serve builds: without one, "macaronic" would take the default route
    return llm, MoL.from_llm(llm, b, router=router_for(llm, b), config=HarnessConfig(summaries=False, **harness))


def table(out: dict) -> str:
    """Markdown: per category, each row's score and its paired difference from base."""
    from macaronic.contract.stats import paired_bootstrap

    from macaronic.suites.bfcl import SIMPLE_LANGUAGES

    cats = list(out["categories"])
    mean_of = SIMPLE_LANGUAGES if set(SIMPLE_LANGUAGES) <= set(cats) else ()  # the leaderboard's "simple" column
    lines = ["| model | " + " | ".join(f"{c} (n={out['categories'][c]['n']})" for c in cats)
             + (" | simple, 3 languages (unweighted) |" if mean_of else " |"),
             "|---|" + "---|" * (len(cats) + bool(mean_of))]
    for m in out["models"]:
        cells = []
        for c in cats:
            rows = out["categories"][c]["rows"]
            s = [r["passed"] for r in rows[m]]
            cell = f"{sum(s) / len(s):.3f}"
            if m != "base" and "base" in rows:
                d, ci = paired_bootstrap(s, [r["passed"] for r in rows["base"]])
                cell += f" ({d:+.3f} [{ci[0]:+.3f}, {ci[1]:+.3f}])"
            cells.append(cell)
        if mean_of:
            cells.append(f"{sum(out['categories'][c]['score'][m] for c in mean_of) / len(mean_of):.3f}")
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def scores(rows: dict, n: int) -> dict:
    return {m: round(sum(r["passed"] for r in rs) / n, 3) for m, rs in rows.items()}


def write(out: dict, path: Path) -> None:
    """The rows as JSON at `path`, the table on stdout."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out) + "\n")
    print(table(out))



def _parse_served(ap: argparse.ArgumentParser, argv: list[str], known: tuple) -> tuple[argparse.Namespace, list[str]]:
    """A probe's served-pair options (--base, --adapter-dir), parsed; its --models rows, checked."""
    ap.add_argument("--base", default=None, help="a registered base (default: the default base), with its specialists")
    ap.add_argument("--adapter-dir", action="append", default=[], metavar="DIR",
                    help="serve these adapter directories instead of the shipped specialists (repeatable)")
    ap.add_argument("--bundle", type=Path, default=None, metavar="DIR",
                    help="serve under this harness bundle directory (default: the shipped one), as `serve --bundle`")
    a = ap.parse_args(argv)
    models = a.models.split(",")
    if bad := [m for m in models if m not in known]:
        ap.error(f"unknown model rows {bad}; choose from {known}")
    return a, models

def bfcl(argv: list[str]) -> int:
    from macaronic.suites.bfcl import CATEGORIES, MULTI_TURN
    from macaronic.suites.bfcl_probe import MODELS, run, run_multi_turn

    ap = argparse.ArgumentParser(prog="macaronic probe bfcl", description=BFCL_DOC,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", type=Path, required=True, help="where the per-problem rows and scores go")
    ap.add_argument("--categories", default=",".join(CATEGORIES), help=f"comma-separated, of {', '.join(CATEGORIES)}")
    ap.add_argument("--models", default=",".join(MODELS), help="comma-separated rows: base, agent, macaronic")
    ap.add_argument("--limit", type=int, default=None, help="first N problems of each category (default: all)")
    ap.add_argument("--offset", type=int, default=0,
                    help="skip the first N problems of each category (with --limit: the next batch of a run)")
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--no-constraints", action="store_true")
    a, models = _parse_served(ap, argv, MODELS)
    if a.offset < 0:
        ap.error("--offset must be 0 or more")
    from macaronic.suites.bfcl import problems

    t0 = time.perf_counter()
    llm, mol = served(a.base, a.adapter_dir, a.bundle, constrain=not a.no_constraints)
    out: dict = {"command": "macaronic probe bfcl " + " ".join(argv),
                 "constrained": not a.no_constraints, "models": models, "adapters": sorted(llm.adapters.names()),
                 "harness": {"id": mol.bundle.id, "version": mol.bundle.version, "tool_listing": mol.bundle.tool_listing},
                 "categories": {}}
    try:
        names = {"base": mol.backend.base()["id"], "agent": "agent", "macaronic": None}
        for cat in a.categories.split(","):
            probs = problems(cat, a.limit, a.offset)
            if cat in MULTI_TURN:
                rows = {m: asyncio.run(run_multi_turn(mol, probs, names[m], a.max_tokens, m)) for m in models}
            else:
                rows = {m: asyncio.run(run(mol, cat, probs, names[m], a.max_tokens)) for m in models}
            out["categories"][cat] = {"n": len(probs), "rows": rows, "score": scores(rows, len(probs))}
            print(cat, out["categories"][cat]["score"], f"{time.perf_counter() - t0:.0f}s", file=sys.stderr, flush=True)
    finally:
        llm.close()
    out["seconds"] = round(time.perf_counter() - t0, 1)
    write(out, a.json)
    return 0


def instructions(argv: list[str]) -> int:
    from macaronic.router.bench import TOOLSETS
    from macaronic.suites.instructions_probe import MODELS, run

    ap = argparse.ArgumentParser(prog="macaronic probe instructions", description=INSTRUCTIONS_DOC,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", type=Path, required=True, help="where the per-prompt rows and scores go")
    ap.add_argument("--models", default=",".join(MODELS), help="comma-separated rows: base, chat, macaronic")
    ap.add_argument("--limit", type=int, default=None, help="first N prompts (default: all)")
    ap.add_argument("--set", type=int, choices=(1, 2), default=1, dest="which",
                    help="1: the 104 prompts written here; 2: 100 more, written blind by a writer shown only the checks")
    ap.add_argument("--max-tokens", type=int, default=512)
    ap.add_argument("--tools", choices=sorted(TOOLSETS), default=None,
                    help="attach this toolset to every prompt (tool_choice auto), as an agent framework would: "
                         "none of its tools is what a prompt asks for, so every reply should stay text")
    a, models = _parse_served(ap, argv, MODELS)
    from macaronic.suites.instructions import load

    prompts = load(which=a.which)[: a.limit]
    t0 = time.perf_counter()
    llm, mol = served(a.base, a.adapter_dir, a.bundle)
    try:
        names = {"base": mol.backend.base()["id"], "chat": "chat", "macaronic": None}
        rows = {}
        for m in models:
            rows[m] = asyncio.run(run(mol, prompts, names[m], a.max_tokens, TOOLSETS.get(a.tools)))
            print(m, round(sum(r["passed"] for r in rows[m]) / len(prompts), 3), f"{time.perf_counter() - t0:.0f}s",
                  file=sys.stderr, flush=True)
        adapters = sorted(llm.adapters.names())
    finally:
        llm.close()
    out = {"command": "macaronic probe instructions " + " ".join(argv), "models": models,
           "adapters": adapters, "tools": a.tools, "harness": {"id": mol.bundle.id, "version": mol.bundle.version}, "seconds": round(time.perf_counter() - t0, 1),
           "categories": {"instructions": {"n": len(prompts), "rows": rows, "score": scores(rows, len(prompts))}}}
    write(out, a.json)
    return 0

