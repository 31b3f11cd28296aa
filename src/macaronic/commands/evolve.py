"""`macaronic evolve`: run generations of the recursive loop in a work directory.

The caller side: argument parsing, progress bars, report.json and report.png. The loop is
evolve/loop.py; rerunning the same command after a crash resumes where it stopped.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="macaronic evolve",
        epilog="`macaronic evolve probe --help`: the lineage's pairs side by side on hand-written agent requests. "
               "`macaronic evolve served --help`: what the loop reads of a served-experience file. "
               "`macaronic evolve intervals WORKDIR`: recompute every quoted interval from the committed rows.",
        description="Each generation is a search: from the archive's parents (the champion and the best "
                    "other archived pair), operators of different kinds propose 3-6 candidates (prompt "
                    "variants and decoding changes from clustered failure traces, router refit, RFT with "
                    "k samples at T >= 0.7 and STaR hints warm-started from the adapter, failure-driven "
                    "data, GRPO); each is screened against the champion on the dev split with the paired "
                    "bootstrap and kept in the archive whatever its verdict; dev-positive changes on "
                    "disjoint components are stacked into one candidate, and only that one is evaluated "
                    "on the sealed test split by `macaronic eval` in its own process and promoted or "
                    "rejected by the contract's gate. A generation without a dev-positive candidate keeps "
                    "the champion and reads no sealed test. Writes WORKDIR/report.json, report.md and "
                    "report.png (the transfer and compounding report). Kill it at any point and rerun: it resumes.")
    p.add_argument("--contract", required=True, type=Path, help="published contract YAML")
    p.add_argument("--generations", type=int, required=True, help="generations to run (in total, for this workdir)")
    p.add_argument("--workdir", type=Path, required=True, help="where lineage, experience, candidates and reports live")
    p.add_argument("--budget", default=None,
                   help="comma-separated key=value (integers): samples, temperature_pct, per_family, "
                        "dev_per_family, dev_samples, screen_confidence (percent), candidates, parents, "
                        "train_steps, rft_steps, grpo_steps, escalate (a dev-neutral RFT / failure-data / GRPO "
                        "candidate is proposed again with twice its training, up to this many times; default 2), "
                        "min_successes, rft_max_roles, max_tokens, workers; "
                        "dev_per_family.<suite>=N sizes one suite's dev split")
    p.add_argument("--operators", default=None,
                   help="comma-separated operator kinds: prompt, decoding, router_refit, rft, failure_data, grpo, data_engine "
                        "(default: prompt,decoding,router_refit,rft)")
    p.add_argument("--collect", default=None,
                   help="comma-separated suites to collect train experience on for rft (default: every gated suite)")
    p.add_argument("--plan", type=Path, default=None,
                   help='JSON {"operators"?: [...], "generations": [[candidate, ...], ...]}: explicit candidates '
                        'per generation (the last list repeats), each {"operator", "steps": [step, ...], '
                        '"components"?, "note"?}; a step is "rft", "router_refit" or {"harness_edit": {"file", '
                        '"merge"|"append"|"replace"|"text", "note"}}, {"rft": {...}}, {"failure_data": {...}}, '
                        '{"grpo": {...}}. Operator proposals fill the rest of the generation.')
    p.add_argument("--pair", default=None,
                   help="initial champion: a pair manifest .json (default: the default base, the shipped "
                        "specialists, the shipped harness and router state)")
    p.add_argument("--answerer", choices=("harness", "local"), default="harness",
                   help="how replies are produced for collection, screening and evaluation (see macaronic eval --help)")
    p.add_argument("--reference", action="store_true",
                   help="first evaluate the generation-0 champion on the sealed test split and freeze the strata "
                        "(k samples per test task); without it this happens at the first gate. With "
                        "--generations 0 it does only that")
    p.add_argument("--experience", type=Path, default=None,
                   help="a served-experience file (`macaronic serve --experience FILE`): each generation clusters "
                        "its failures beside the contract's, refits the router on its corrections and records "
                        "data-engine seeds in gen-NNN/served.json (docs/EXPERIENCE.md)")
    p.add_argument("--hours", type=float, default=None,
                   help="wall-clock budget for this command: no generation starts after it is spent (the one "
                        "running finishes); rerun the same command to resume")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    return p


def main(argv: list[str]) -> int:
    if argv[:1] == ["probe"]:
        return probe(argv[1:])
    if argv[:1] == ["intervals"]:
        return intervals(argv[1:])
    if argv[:1] == ["served"]:
        return served(argv[1:])
    args = parser().parse_args(argv)
    if args.experience is not None and not args.experience.is_file():
        print(f"macaronic evolve: no experience file {args.experience}", file=sys.stderr)
        return 2
    if args.hours is not None and not args.hours >= 0:
        print(f"macaronic evolve: --hours must be a number of hours, 0 or more (got {args.hours})", file=sys.stderr)
        return 2
    from macaronic.contract.spec import ContractError
    from macaronic.evolve.config import Budget, Plan
    from macaronic.evolve.loop import Hooks, evolve

    try:
        budget, plan = Budget.parse(args.budget), Plan.load(args.plan, args.operators, args.collect)
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
                             Hooks(log=log, progress=on_progress), args.answerer, reference=args.reference,
                             experience=args.experience, hours=args.hours)
        except ContractError as e:
            print(f"macaronic evolve: {e}", file=sys.stderr)
            return e.code
        except (ValueError, RuntimeError) as e:
            print(f"macaronic evolve: {e}", file=sys.stderr)
            return 1
    write_reports(args.contract, args.workdir, summary)
    for g in summary["generations"]:
        screens = " ".join(f"{s['name']}:{s['operator']}={s['verdict']}" for s in g.get("screens", []))
        print(f"gen {g['generation']}: {g['pair_id'][:12]} {g['decision']}"
              + (f" failed={g['failed_rules']}" if g["failed_rules"] else "")
              + (f"  [{screens}]" if screens else ""))
    sr = summary["sealed_reads"]
    print(f"champion {summary['champion']}\nsealed test read {sr['evaluations']} times "
          f"({sr['by_purpose']})\nreport {args.workdir / 'report.json'}, report.md, report.png")
    return 0


def write_reports(contract_path: Path, workdir: Path, summary: dict) -> None:
    from macaronic.contract import spec as cspec
    from macaronic.evolve.transfer import markdown, plot, transfer

    contract = cspec.parse(contract_path)
    tr = transfer(contract, workdir, summary)
    (workdir / "report.json").write_text(json.dumps({**summary, "transfer": tr}, indent=2, sort_keys=True) + "\n")
    (workdir / "report.md").write_text(markdown(summary, tr))
    plot(summary, tr, workdir / "report.png")


def intervals(argv: list[str]) -> int:
    """`macaronic evolve intervals`: exit 0 when every interval recomputes equal, 1 otherwise."""
    from macaronic.evolve import intervals as module

    p = argparse.ArgumentParser(prog="macaronic evolve intervals", description=module.__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("workdir", type=Path)
    p.add_argument("--contract", type=Path, action="append", default=[],
                   help="contract files or folders to find each decision's contract in (default: contracts/)")
    p.add_argument("--json", action="store_true", help="print the whole result as JSON")
    a = p.parse_args(argv)
    res = module.check_workdir(a.workdir, a.contract)
    if a.json:
        print(json.dumps(res, indent=2))
        return 0 if res["ok"] else 1
    for e in res["evals"]:
        print(f"{e['status']:<9} {e['eval']:<32} {e['decision'] or '-':<9} {e['intervals']:>3} intervals "
              f"from {e.get('rows', '-')} (strata {e.get('strata', '-')})")
        for m in e["mismatches"][:10]:
            print(f"    {m}")
    for m in res["summary"][:20]:
        print(f"MISMATCH  {m}")
    n = sum(e["intervals"] for e in res["evals"]) + res["transfer_intervals"]
    print(("ok: " if res["ok"] else "NOT ok: ") + f"{n} intervals recomputed ({res['transfer_intervals']} of them "
          f"the transfer table's against generation 0)" + ("" if res["evals"] else "; no decisions found"))
    return 0 if res["ok"] else 1


def served(argv: list[str]) -> int:
    """`macaronic evolve served`: the reading step alone, as JSON."""
    from macaronic.evolve import served as module

    p = argparse.ArgumentParser(prog="macaronic evolve served", description=module.__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("experience", type=Path, help="a served-experience file (`macaronic serve --experience FILE`)")
    p.add_argument("--contract", type=Path, required=True, help="the contract whose dev and test tasks seeds must avoid")
    p.add_argument("--audit", type=Path, default=None, help="where the split reads are audited (default: "
                                                            "$MACARONIC_AUDIT or ~/.macaronic/audit/splits.jsonl)")
    p.add_argument("--budget", default=None, help="as for `macaronic evolve` (dev_per_family sizes the dev split checked)")
    p.add_argument("--json", type=Path, required=True, help="where to write clusters, routing rows, seeds, dropped")
    a = p.parse_args(argv)
    from macaronic.contract import spec as cspec
    from macaronic.contract.sealed import SplitLoader
    from macaronic.contract.spec import ContractError
    from macaronic.evolve.config import Budget
    from macaronic.serve.experience import ExperienceError

    try:
        contract = cspec.parse(a.contract)
        doc = module.read(a.experience, contract, SplitLoader(contract, "trainer", a.audit),
                          SplitLoader(contract, "check", a.audit), Budget.parse(a.budget))
    except (ValueError, KeyError, OSError, ContractError, ExperienceError) as e:
        print(f"macaronic evolve served: {e}", file=sys.stderr)
        return 2
    a.json.parent.mkdir(parents=True, exist_ok=True)
    a.json.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    print(f"{doc['turns']} turns; clusters " + (", ".join(f"{k}={n}" for k, n in doc["clusters"].items()) or "none")
          + f"; {len(doc['routing'])} routing rows; {len(doc['seeds'])} seeds; {len(doc['dropped'])} dropped")
    return 0


def probe(argv: list[str]) -> int:
    """`macaronic evolve probe`."""
    from macaronic.evolve import probe as module
    from macaronic.evolve.probe import compare, load_requests, resolve, summarise

    p = argparse.ArgumentParser(prog="macaronic evolve probe", description=module.__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workdir", type=Path, required=True, help="an evolve work directory (its lineage.sqlite)")
    p.add_argument("--contract", type=Path, required=True, help="the contract whose agent suite sets steps, caps, grader")
    p.add_argument("--pairs", default="gen-0,champion",
                   help="comma-separated: gen-N (the pair generation N ended with), an alias, an id or id prefix; "
                        "the first is the baseline of the paired comparison (default: gen-0,champion)")
    p.add_argument("--requests", type=Path, default=None, help="JSON {seed, requests: [{id, skill, request, gold, facts}]}")
    p.add_argument("--json", type=Path, required=True, help="where to write the rows and the summary")
    p.add_argument("--workers", type=int, default=8, help="requests answered at once (batched on one engine)")
    a = p.parse_args(argv)
    from macaronic.contract import spec as cspec
    from macaronic.contract.evaluate import run_units
    from macaronic.contract.runner import make_answerer
    from macaronic.contract.spec import ContractError
    from macaronic.pairs.lineage import Lineage, LineageError

    lineage = a.workdir / "lineage.sqlite"
    if not lineage.is_file():
        print(f"macaronic evolve probe: no lineage at {lineage}", file=sys.stderr)
        return 2
    try:
        contract = cspec.parse(a.contract)
        units = load_requests(a.requests)
        with Lineage(lineage) as lin:
            refs = [r.strip() for r in a.pairs.split(",") if r.strip()]
            pairs = [(ref, lin.pair(resolve(lin, ref))) for ref in refs]
    except (ValueError, KeyError, OSError, LineageError, ContractError) as e:
        print(f"macaronic evolve probe: {e}", file=sys.stderr)
        return 2
    out = {"command": "macaronic evolve probe " + " ".join(argv), "contract": f"{contract.name}@{contract.version}",
           "n": len(units), "pairs": []}
    base = None
    for ref, m in pairs:
        ans = make_answerer("harness", m)
        try:
            rows = sorted(run_units(contract, m.id, units, ans, set(), split="probe", workers=a.workers),
                          key=lambda r: r["task"])
        finally:
            ans.close()
        entry = {"ref": ref, "pair": m.id, **summarise(rows)}
        if base is not None:
            entry["vs_first"] = compare(rows, base)
        base = rows if base is None else base
        out["pairs"].append({**entry, "rows": rows})
        s = entry
        print(f"{ref:>10} {m.id[:12]}  pass {s['pass']:.3f} [{s['ci95'][0]:.3f}, {s['ci95'][1]:.3f}]  "
              + " ".join(f"{k}={v}" for k, v in s["by_skill"].items())
              + (f"  vs {refs[0]}: {s['vs_first']['delta']:+.3f} {s['vs_first']['ci95']} "
                 f"(+{s['vs_first']['gained']} -{s['vs_first']['lost']})" if "vs_first" in s else ""), flush=True)
        print(f"{'':>10} failures {s['failures']}", flush=True)
    a.json.parent.mkdir(parents=True, exist_ok=True)
    a.json.write_text(json.dumps(out, indent=1) + "\n")
    return 0
