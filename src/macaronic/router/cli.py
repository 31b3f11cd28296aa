"""`macaronic route`: classify turns from stdin, or benchmark the routing policies.

  macaronic route classify [--policy P] [--state DIR] [--bundle DIR] [--tiny]
      reads JSON lines {"messages": [...]} on stdin, writes one JSON line per input:
      {"adapter", "confidence", "probs", "policy", "ms", "reason"}
  macaronic route bench --json FILE [--markdown FILE] [--quick] [--tiny]
  macaronic route fit --out DIR [--tiny]          fit on train/dev and save the router state

Without --state, classify fits the router on the shipped routing data first (a few seconds on
the default base). Heavy imports stay inside the functions.
"""

from __future__ import annotations

import argparse
import json
import sys


def _backbone(tiny: bool):
    if tiny:
        from macaronic.testing import tiny_llm

        return tiny_llm()
    from macaronic.engine.llm import load_default_llm

    return load_default_llm()


def _router(llm, bundle, state: str | None):
    from macaronic.router import Router
    from macaronic.router.data import load_routing_data

    if state:
        return Router.load(state, llm, bundle)
    return Router.fit(llm, load_routing_data("train"), load_routing_data("dev"), bundle)


def _bundle(path: str | None):
    from macaronic.harness import load_bundle

    return load_bundle(path)


def classify(args) -> int:
    bundle = _bundle(args.bundle)
    llm = _backbone(args.tiny)
    router = _router(llm, bundle, args.state)
    status = 0
    for n, line in enumerate(sys.stdin, 1):
        if not line.strip():
            continue
        try:
            messages = json.loads(line)["messages"]
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            print(json.dumps({"error": f"line {n}: expected {{\"messages\": [...]}} ({e})"}), flush=True)
            status = 1
            continue
        d = router.route(messages, policy=args.policy)
        print(json.dumps(d.to_json()), flush=True)
    return status


def bench(args) -> int:
    from pathlib import Path

    from macaronic.router.bench import BenchConfig, markdown_table, run_bench

    bundle = _bundle(args.bundle)
    llm = _backbone(args.tiny)
    desc = llm.describe() if hasattr(llm, "describe") else {}
    log = lambda msg: print(f"[route bench] {msg}", file=sys.stderr, flush=True)  # noqa: E731
    report = run_bench(llm, bundle, BenchConfig(quick=args.quick, log=log), description=desc)
    report["meta"]["tiny"] = args.tiny
    report["meta"]["bundle_id"] = bundle.id
    Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    table = markdown_table(report)
    if args.markdown:
        Path(args.markdown).write_text(table)
    print(table)
    return 0


def fit(args) -> int:
    llm = _backbone(args.tiny)
    router = _router(llm, _bundle(args.bundle), None)
    print(router.save(args.out))
    return 0


def main(argv: list[str]) -> int:
    from macaronic.router.config import POLICIES

    p = argparse.ArgumentParser(prog="macaronic route", description="classify turns, benchmark the routers")
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("classify", help="route JSON lines {\"messages\": [...]} from stdin")
    c.add_argument("--policy", choices=POLICIES, default=None, help="default: the bundle's router.json")
    c.add_argument("--state", help="a saved router state directory (default: fit now)")
    b = sub.add_parser("bench", help="benchmark every policy and the cascade")
    b.add_argument("--json", required=True, help="write the report here")
    b.add_argument("--markdown", help="also write the markdown table here")
    b.add_argument("--quick", action="store_true", help="a fifth of the test split, fewer timings")
    f = sub.add_parser("fit", help="fit on train/dev and save the router state")
    f.add_argument("--out", required=True)
    for s in (c, b, f):
        s.add_argument("--bundle", help="harness bundle directory (default: the shipped one)")
        s.add_argument("--tiny", action="store_true", help="use a tiny random model (smoke tests)")
    args = p.parse_args(argv)
    return {"classify": classify, "bench": bench, "fit": fit}[args.cmd](args)
