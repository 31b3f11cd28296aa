"""`macaronic eval`: the caller side of the evaluator (`eval ablate`, `eval report-only`, `eval table`
and `eval toolnames` are commands/eval_*.py).

Everything with side effects lives here: progress bars, the per-task JSONL, the report file,
exit codes (0 ok, 1 bad contract, 2 environment: missing source, unknown pair, changed files,
3 contaminated training data). The evaluation itself is contract/evaluate.py + contract/report.py.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import sys
from pathlib import Path

from macaronic.contract.opening import Refused, contamination_of, prepare, progress
from macaronic.contract.spec import ENVIRONMENT

CONTAMINATED = 3


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="macaronic eval",
        description="Evaluate a model-harness pair on a contract's sealed test split, in this process. "
                    "Per-task results are appended to a JSONL as they finish (rerun the same command "
                    "after a crash: finished tasks are skipped), then the report is written to --json. "
                    "With --parent the parent is evaluated too (or read from --prior logs) and the "
                    "contract's gate decides accept/reject. Exit codes: 0 ok, 1 bad contract, "
                    "2 environment, 3 training data contaminated with test prompts. "
                    "Other stages, each with its own --help: `macaronic eval ablate` (the MoL ablation: base, "
                    "each adapter forced, routed, oracle, on one pair), `macaronic eval report-only` (a contract's "
                    "report-only suites beyond the contract's slice), `macaronic eval table bases|precision` (tables "
                    "from ablation summaries), `macaronic eval toolnames` (tool calls in evaluated episodes).")
    p.add_argument("--pair", required=True, help="pair id, id prefix, alias, or a pair manifest .json")
    p.add_argument("--contract", required=True, type=Path, help="contract YAML file")
    p.add_argument("--json", required=True, type=Path, help="where to write the final report")
    p.add_argument("--parent", default=None, help="the pair to compare against (enables the gate)")
    p.add_argument("--reference", action="store_true",
                   help="without --parent: this is a run's generation-0 reference, the gate's baseline (the "
                        "sealed-read ledger counts it as `reference`; any other read without a parent is `other`, "
                        "a violation shown by `macaronic contract check`)")
    p.add_argument("--lineage", type=Path, default=None, help="lineage SQLite (default: $MACARONIC_HOME/lineage.sqlite)")
    p.add_argument("--tasks", type=Path, default=None, help="per-task JSONL (default: <json>.tasks.jsonl)")
    p.add_argument("--prior", type=Path, action="append", default=[],
                   help="earlier per-task JSONL files to reuse rows from (same contract sha256)")
    p.add_argument("--strata", type=Path, default=None,
                   help="frozen strata JSON (default: the contract's strata file, if any)")
    p.add_argument("--train-data", type=Path, action="append", default=[],
                   help="extra training files for the contamination check (the pair's own are always used)")
    p.add_argument("--audit", type=Path, default=None, help="split-read audit log (default: $MACARONIC_HOME/audit/splits.jsonl)")
    p.add_argument("--answerer", choices=("harness", "harness-free", "local"), default="harness",
                   help="harness: replies through the served per-turn harness (MoL.turn); harness-free: the same "
                        "with constrained decoding off; local: the "
                        "forced-adapter runner (system prompt + adapter, no own views or summaries)")
    p.add_argument("--reuse-unreached", action="store_true",
                   help="with --parent: on suites no difference between the two pairs can reach, and on routed-suite "
                        "tasks whose every turn went to a role the change leaves alone under a router that reads "
                        "no adapter (same prompts, "
                        "adapters and seeds: macaronic.pairs.reach), the child's rows are the parent's, marked "
                        "reused_from; the gate file lists those suites")
    p.add_argument("--workers", type=int, default=1,
                   help="units answered at once, in threads over one engine that batches them (default 1)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


def load_strata(path: Path | None, contract) -> tuple[dict | None, str | None]:
    path = path or contract.strata_path()
    if path is None:
        return None, None
    data = Path(path).read_bytes()
    doc = json.loads(data)
    return doc.get("tasks", doc), hashlib.sha256(data).hexdigest()


STAGES = {"ablate": "eval_ablate", "report-only": "eval_report_only", "table": "eval_table",
          "toolnames": "eval_toolnames"}  # commands/<module>.py


def main(argv: list[str]) -> int:
    if argv and argv[0] in STAGES:
        return importlib.import_module(f"macaronic.commands.{STAGES[argv[0]]}").main(argv[1:])
    args = parser().parse_args(argv)
    from macaronic.contract.evaluate import ResultLog, plan, read_rows, write_json_atomic
    from macaronic.contract.report import build_report
    try:
        purpose = "gate" if args.parent else "reference" if args.reference else "evaluator"
        contract, loader, (child, parent) = prepare(args.contract, args.audit, [args.pair, args.parent],
                                                    args.lineage, purpose=purpose, key=f"eval:{args.json.resolve()}")
    except Refused as e:
        print(f"macaronic eval: {e}", file=sys.stderr)
        return e.code
    units = plan(contract, loader)
    cont = contamination_of(child, args.train_data, units)
    if not cont["clean"]:
        print(f"macaronic eval: training data overlaps the sealed test split: exact={cont['exact'][:5]} "
              f"13-gram={cont['ngram'][:5]} ({len(cont['exact'])}+{len(cont['ngram'])} tasks)", file=sys.stderr)
        return CONTAMINATED
    try:
        strata, strata_sha = load_strata(args.strata, contract)
    except (OSError, ValueError) as e:
        print(f"macaronic eval: cannot read strata: {e}", file=sys.stderr)
        return ENVIRONMENT
    tasks_path = args.tasks or args.json.with_name(args.json.name + ".tasks.jsonl")
    log = ResultLog(tasks_path, contract.sha256)
    for prior in args.prior:
        for r in read_rows(prior, contract.sha256):
            log.add(r)
    reused: list[str] = []
    if args.reuse_unreached and parent is not None:
        from macaronic.pairs.reach import components_between, reached_suites

        reach = reached_suites(contract, components_between(child, parent), report_only=True)
        reused = sorted(s.name for s in contract.suites if s.name not in reach)
    try:
        if parent is not None:
            run_pair(contract, parent, units, log, quiet=args.quiet, answerer=args.answerer, workers=args.workers)
        for r in [r for r in log.for_pair(parent.id) if r["suite"] in reused] if parent is not None else []:
            log.add({**r, "pair": child.id, "reused_from": parent.id, "seconds": 0.0})
        same: set[str] = set()
        if parent is not None and args.reuse_unreached:  # inside routed suites: tasks the change cannot reach
            from macaronic.pairs.reach import components_between, reusable_tasks

            prows = log.for_pair(parent.id)
            same = reusable_tasks(contract, components_between(child, parent), prows, Path(parent.harness["path"]))
            for r in prows:
                if f"{r['suite']}/{r['task']}" in same and r["suite"] not in reused:
                    log.add({**r, "pair": child.id, "reused_from": parent.id, "seconds": 0.0})
        run_pair(contract, child, [u for u in units if u[0].suite not in reused and f"{u[0].suite}/{u[0].id}" not in same],
                 log, quiet=args.quiet, answerer=args.answerer, workers=args.workers)
    finally:
        log.close()
    report, checks = build_report(contract, child.id, log.for_pair(child.id), parent.id if parent else None,
                                  log.for_pair(parent.id) if parent else None, strata)
    from macaronic.contract.decision_rows import rows_path, write_rows

    used = log.for_pair(child.id) + (log.for_pair(parent.id) if parent is not None else [])
    write_rows(rows_path(args.json), used)  # the rows behind every interval, small enough to commit
    write_json_atomic(args.json, report)
    write_json_atomic(args.json.with_name(args.json.name + ".gate.json"),
                      {"checks": checks, "contamination": cont, "tasks": str(tasks_path), "answerer": args.answerer,
                       "reused_suites": reused, "reused_tasks": sorted(same) if parent is not None else [],
                       "rows": rows_path(args.json).name, "strata_sha256": strata_sha})
    if not args.quiet:
        print(summary(report), file=sys.stderr)
    return 0


def run_pair(contract, manifest, units, log, quiet: bool = False, answerer: str = "harness", workers: int = 1) -> None:
    from macaronic.contract.evaluate import run_units, unit_key

    todo = [u for u in units if unit_key(manifest.id, u[0].suite, u[0].id, u[1]) not in log.rows]
    if not todo:
        return
    from macaronic.contract.runner import make_answerer

    runner = make_answerer(answerer, manifest)
    try:
        with progress(quiet) as bar:
            job = bar.add_task(f"eval {manifest.id[:10]}", total=len(units), completed=len(units) - len(todo))
            for row in run_units(contract, manifest.id, todo, runner, log.keys(), workers=workers):
                log.add(row)
                bar.advance(job)
    finally:
        runner.close()


def fmt(x, nd=3):
    return "-" if x is None else f"{x:+.{nd}f}" if isinstance(x, float) and x < 0 else f"{x:.{nd}f}"


def summary(report: dict) -> str:
    lines = [f"{report['contract']['id']} pair {report['pair']['id'][:12]} parent "
             f"{(report['parent']['id'] or '-')[:12]}: {report['decision']}"
             + (f" (failed: {', '.join(report['failed_rules'])})" if report["failed_rules"] else "")]
    for name, s in list(report["suites"].items()) + [(f"[{k}]", v) for k, v in report["strata"].items()]:
        ci = s.get("ci95")
        lines.append(f"  {name:<14} n={s['n']:<4} score={fmt(s['score'])}"
                     + (f" [{fmt(ci[0])}, {fmt(ci[1])}]" if ci else "")
                     + (f"  delta={fmt(s['delta'])} [{fmt(s['delta_ci95'][0])}, {fmt(s['delta_ci95'][1])}]"
                        if s.get("delta_ci95") else ""))
    return "\n".join(lines)
