"""`macaronic contract check|seal|strata`: check, seal or stratify a contract file (contract/spec.py,
contract/strata.py). Exit codes: 0 ok, 1 bad contract, 2 environment (a source is missing here)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from macaronic.contract.spec import ContractError


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="macaronic contract",
        description="Check or seal a contract file. `check` runs the layers parse, schema, sources, "
                    "hashes and exits 0 (ok), 1 (bad contract) or 2 (environment: a source is missing "
                    "here). `seal` fills in the sealed test manifests of a draft; publish the result "
                    "and never edit it again (a change is a new version). `macaronic contract strata --help`: "
                    "freeze the strata from a k-sample reference evaluation.")
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check", help="run every check layer")
    c.add_argument("file", type=Path)
    c.add_argument("--audit", type=Path, default=None, help="split-read audit log")
    c.add_argument("--runs", type=Path, action="append", default=None,
                   help="committed workdirs to recount sealed reads from (repeatable; default: docs/evolve "
                        "beside the contract's folder, when it exists)")
    c.add_argument("--ledger", type=Path, default=None,
                   help="the sealed-read ledger (default: $MACARONIC_LEDGER or $MACARONIC_HOME/audit/sealed-reads.jsonl)")
    s = sub.add_parser("seal", help="write a copy of a draft with its sealed manifests filled in")
    s.add_argument("file", type=Path)
    s.add_argument("--out", type=Path, required=True)
    s.add_argument("--audit", type=Path, default=None)
    sub.add_parser("strata", help="freeze the strata from a k-sample reference evaluation", add_help=False)
    return p


def main(argv: list[str]) -> int:
    if argv and argv[0] == "strata":
        return strata(argv[1:])
    args = parser().parse_args(argv)
    from macaronic.contract import spec as cspec
    from macaronic.contract.sealed import SplitLoader

    try:
        if args.cmd == "seal":
            out = cspec.seal(args.file, args.out)
            c = cspec.parse(out)
            print(f"sealed {c.id} -> {out}  sha256 {c.sha256}")
            return 0
        c = cspec.parse(args.file)
        cspec.check_sources(c)
        cspec.check_hashes(c, SplitLoader(c, "check", args.audit))
    except ContractError as e:
        print(f"macaronic contract: {e}", file=sys.stderr)
        return e.code
    print(f"ok {c.id} sha256 {c.sha256}")
    for s in c.suites:
        tag = "report-only" if s.report_only else ("primary" if s.name in c.primary else "")
        print(f"  {s.name:<12} kind={s.kind:<11} grader={s.grader:<20} test n={s.sealed.get('n')} {tag}")
    reads(c, args)
    return 0


def reads(c, args) -> None:
    """The sealed-read count of this contract version across every run (contract/ledger.py); reads
    that were not the gate's are printed one by one as violations."""
    from macaronic.contract import ledger

    roots = args.runs if args.runs is not None else [d for d in [args.file.resolve().parent.parent / "docs" / "evolve"]
                                                      if d.is_dir()]
    counts = ledger.recount(c, roots, args.ledger)
    print(ledger.line(counts))
    for v in counts["violations"]:
        print(f"  VIOLATION: a non-gate read ({v['purpose']}): {v['key']} [{v['source']}]")


def strata(argv: list[str]) -> int:
    """`macaronic contract strata`."""
    from macaronic.contract import strata as module

    p = argparse.ArgumentParser(prog="macaronic contract strata", description=module.__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--contract", required=True, type=Path)
    p.add_argument("--pair", required=True, help="the reference pair: manifest .json, id or alias")
    p.add_argument("--out", required=True, type=Path, help="strata JSON to write")
    p.add_argument("--lineage", type=Path, default=None)
    p.add_argument("--audit", type=Path, default=None)
    p.add_argument("--workers", type=int, default=1, help="units answered at once (one engine batches them)")
    a = p.parse_args(argv)
    from macaronic.contract.opening import resolve_pair

    try:
        doc = module.freeze(a.contract, resolve_pair(a.pair, a.lineage), a.out, a.audit, workers=a.workers)
    except ContractError as e:
        print(f"macaronic contract strata: {e}", file=sys.stderr)
        return e.code
    counts = {s: sum(v == s for v in doc["tasks"].values()) for s in ("easy", "mid", "hard")}
    print(f"strata of {len(doc['tasks'])} tasks from {doc['k']} samples at T={doc['temperature']}: {counts} -> {a.out}")
    return 0
