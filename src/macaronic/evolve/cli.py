"""`macaronic evolve`: run generations of the recursive loop in a work directory.

The caller side: argument parsing, progress bars, report.json and report.png. The loop is
loop.py; rerunning the same command after a crash resumes where it stopped.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="macaronic evolve",
        description="Each generation: collect graded experience on the contract's train split with the "
                    "champion, build a successor (rejection-sampling fine-tuning of specialists on their "
                    "successes, router refit from logged outcomes with the policy chosen on dev, proposed "
                    "harness edits), evaluate parent and child on the sealed test split with `macaronic "
                    "eval` in its own process, promote or reject by the contract's gate, record lineage, "
                    "and redraw WORKDIR/report.png. Kill it at any point and rerun: it resumes.")
    p.add_argument("--contract", required=True, type=Path, help="published contract YAML")
    p.add_argument("--generations", type=int, required=True, help="generations to run (in total, for this workdir)")
    p.add_argument("--workdir", type=Path, required=True, help="where lineage, experience, candidates and reports live")
    p.add_argument("--budget", default=None,
                   help="comma-separated key=value: samples (k per train task), per_family (train tasks per "
                        "family), dev_per_family, train_steps, min_successes, rft_max_roles, max_tokens")
    p.add_argument("--plan", type=Path, default=None,
                   help='JSON {"generations": [[step, ...], ...]}; a step is "rft", "router_refit", '
                        '{"router_refit": {"shipped_data": true}} (also refit on the shipped routing data) or '
                        '{"harness_edit": {"file", "merge"|"replace"|"text", "note"}}; the last list repeats '
                        "(default: rft then router_refit every generation)")
    p.add_argument("--pair", default=None,
                   help="initial champion: a pair manifest .json (default: the default base, the shipped "
                        "specialists and the shipped harness)")
    p.add_argument("--answerer", choices=("harness", "local"), default="harness",
                   help="how replies are produced for collection and evaluation (see macaronic eval --help)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    from macaronic.contract.spec import ContractError
    from macaronic.evolve.config import Budget, Plan
    from macaronic.evolve.loop import Hooks, evolve
    from macaronic.evolve.plot import plot

    try:
        budget, plan = Budget.parse(args.budget), Plan.load(args.plan)
    except (ValueError, KeyError, OSError) as e:
        print(f"macaronic evolve: {e}", file=sys.stderr)
        return 2
    from macaronic.contract.opening import progress

    with progress(args.quiet) as bar:
        jobs: dict[str, int] = {}

        def on_progress(label, done, total):
            if label not in jobs:
                jobs[label] = bar.add_task(label, total=total)
            if done is None:
                bar.advance(jobs[label])
            else:
                bar.update(jobs[label], completed=done, total=total)

        def log(msg):
            if not args.quiet:
                bar.console.print(msg) if hasattr(bar, "console") else print(msg, file=sys.stderr)

        try:
            summary = evolve(args.contract, args.workdir, args.generations, budget, plan, args.pair,
                             Hooks(log=log, progress=on_progress), args.answerer)
        except ContractError as e:
            print(f"macaronic evolve: {e}", file=sys.stderr)
            return e.code
        except (ValueError, RuntimeError) as e:
            print(f"macaronic evolve: {e}", file=sys.stderr)
            return 1
    (args.workdir / "report.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    plot(summary, args.workdir / "report.png")
    from macaronic.evolve.render import markdown

    (args.workdir / "report.md").write_text(markdown(summary))
    for g in summary["generations"]:
        print(f"gen {g['generation']}: {g['pair_id'][:12]} {g['decision']}"
              + (f" failed={g['failed_rules']}" if g["failed_rules"] else "")
              + "  " + " ".join(f"{k}={v['score']:.3f}" for k, v in g["suites"].items() if v["score"] is not None))
    print(f"champion {summary['champion']}\nreport {args.workdir / 'report.json'}, report.md, report.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
