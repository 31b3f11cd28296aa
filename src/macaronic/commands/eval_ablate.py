"""`macaronic eval ablate`: the caller side of contract/ablate.py (engine, router, files, progress)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

DESCRIPTION = """\
The MoL ablation on a contract's sealed test split: every primary suite answered by
  base      the bare base (same harness, role prompts and router; no adapter),
  <role>    each adapter forced on every turn (chat, agent, coding, genui),
  routed    the routed MoL as served (the bundle's router; a cascade/probe state is fitted once on
            the shipped routing data and cached, exactly as `macaronic serve` does),
  oracle    each turn sent to its gold role,
and, report-only, HumanEval / BFCL simple on base vs the coding / agent adapter and the genui
suite under constrained decoding (genui+grammar). Writes per-task rows (resumable: rerun the same
command after a crash), a JSON summary and, with --md, a table between the
<!-- specialists:start/end --> markers of a "Specialists" section: score per suite, and for every
row but base the difference vs base with its 95% paired-bootstrap interval; then per specialist
whether it beats base and every other adapter on its own suite with the interval above zero.

Reproduce the SmolLM2 table of 2026-11-30 (docs/bench/history.md, "Specialists"; --md FILE writes it):
  OMP_NUM_THREADS=1 nice -n 10 macaronic eval ablate --contract contracts/macaronic-core-v4.yaml \\
      --json docs/bench/specialists.json --md FILE
"""


def parser() -> argparse.ArgumentParser:
    from macaronic.engine.bases import BASES, DEFAULT_BASE
    from macaronic.router.config import POLICIES

    p = argparse.ArgumentParser(prog="macaronic eval ablate", description=DESCRIPTION,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--contract", required=True, type=Path, help="contract YAML file")
    p.add_argument("--json", required=True, type=Path, help="where to write the summary JSON")
    p.add_argument("--md", type=Path, default=None, help="markdown file whose Specialists section gets the table")
    p.add_argument("--pair", default=None,
                   help="pair id, alias or manifest .json (default: --base + its shipped specialists + "
                        "shipped harness bundle)")
    p.add_argument("--base", default=None, choices=tuple(BASES),
                   help=f"the registered base of the default pair (default {DEFAULT_BASE})")
    p.add_argument("--lineage", type=Path, default=None, help="lineage SQLite for --pair ids")
    p.add_argument("--tasks", type=Path, default=None,
                   help="per-task JSONL (default: $MACARONIC_HOME/ablate/<json name>.tasks.jsonl)")
    p.add_argument("--configs", default=None,
                   help="comma-separated subset of rows (default: all: base,chat,agent,coding,genui,routed,oracle,"
                        "genui+grammar)")
    p.add_argument("--no-external", action="store_true", help="skip the report-only suites and the grammar row")
    p.add_argument("--router-policy", choices=POLICIES, default=None, help="override the bundle's routing policy")
    p.add_argument("--router-state", default=None, help="a saved router state directory (macaronic route fit)")
    p.add_argument("--workers", type=int, default=16, help="units answered concurrently (the engine batches them)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    p.add_argument("--audit", type=Path, default=None, help="split-read audit log")
    p.add_argument("--suites", default=None, help="comma-separated suite names to run (default: all)")
    p.add_argument("--no-constraints", action="store_true",
                   help="decode without the harness's grammars (tool calls, response formats, GenUI cards): "
                        "the 'without constraints' rows")
    p.add_argument("--split", choices=("test", "dev"), default="test",
                   help="the contract split answered (default test, the sealed one; dev: a diagnostic, e.g. where "
                        "every row scores 0 on test; its tasks may overlap training data, which is reported, not refused)")
    p.add_argument("--history", choices=("cached", "base"), default="cached",
                   help="the engine's history rule for turn-mode adapters (EngineConfig.history)")
    p.add_argument("--dtype", choices=("float32", "bfloat16"), default=None,
                   help="precision of the base weights and activations (default $MACARONIC_DTYPE or float32)")
    p.add_argument("--quant", choices=("none", "int8", "int4", "gguf"), default=None,
                   help="weight-only quantized base matmuls with bf16 activations (default $MACARONIC_QUANT "
                        "or none): the precision rows of the served-default rule (README)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--max-seconds", type=float, default=0.0,
                   help="start no unit after this many seconds; the units already running finish and the summary "
                        "covers the units done (its n per suite says how many; rerun to continue)")
    return p


def default_pair(base: str | None = None):
    """A registered base (None: the default), its shipped specialists and the shipped bundle."""
    from macaronic.engine.llm import shipped_adapters_dir
    from macaronic.harness import DEFAULT_BUNDLE
    from macaronic.pairs import PairManifest

    d = shipped_adapters_dir(base)
    ads = {p.name: p for p in sorted(d.iterdir()) if (p / "adapter_config.json").is_file()} if d.is_dir() else {}
    return PairManifest.build(base, ads, DEFAULT_BUNDLE)


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    import torch

    torch.set_num_threads(max(1, args.threads))
    from macaronic.contract import ablate
    from macaronic.engine.bases import precision_env
    from macaronic.specialist import BUILTIN_NAMES
    from macaronic.contract.evaluate import ResultLog, read_rows, write_json_atomic
    from macaronic.contract.opening import Refused, contamination_of, prepare, progress

    try:
        contract, loader, (manifest,) = prepare(args.contract, args.audit, [args.pair], args.lineage,
                                                lambda: default_pair(args.base))
    except Refused as e:
        print(f"macaronic eval ablate: {e}", file=sys.stderr)
        return e.code
    roles = tuple(r for r in BUILTIN_NAMES if r in manifest.adapters)
    cfgs = ablate.configs(roles, external=not args.no_external)
    if args.configs:
        want = [c.strip() for c in args.configs.split(",") if c.strip()]
        unknown = set(want) - {c.name for c in cfgs}
        if unknown:
            print(f"macaronic eval ablate: unknown configurations {sorted(unknown)}", file=sys.stderr)
            return 2
        cfgs = [c for c in cfgs if c.name in want]
    if args.no_external:
        contract = _primary_only(contract)
    if args.suites:
        from dataclasses import replace

        want = {s.strip() for s in args.suites.split(",") if s.strip()}
        unknown = want - {s.name for s in contract.suites}
        if unknown:
            print(f"macaronic eval ablate: unknown suites {sorted(unknown)}", file=sys.stderr)
            return 2
        contract = replace(contract, suites=tuple(s for s in contract.suites if s.name in want),
                           primary=tuple(p for p in contract.primary if p in want))
    units = ablate.plan(contract, loader, cfgs, args.split)
    cont = contamination_of(manifest, [], units=[(t, s) for _, t, s in units])
    if not cont["clean"] and args.split == "dev":
        print(f"macaronic eval ablate: note: training data overlaps the dev split ({len(cont['exact'])} exact, "
              f"{len(cont['ngram'])} 13-word windows); recorded in the JSON", file=sys.stderr)
    elif not cont["clean"]:
        print(f"macaronic eval ablate: training data overlaps the sealed test split: {cont['exact'][:5]} "
              f"{cont['ngram'][:5]}", file=sys.stderr)
        return 3

    from macaronic.engine.llm import EngineConfig, load_llm
    from macaronic.harness import load_bundle
    from macaronic.router.shipped import router_for

    t0 = time.perf_counter()
    precision = {k: v for k, v in (("dtype", args.dtype), ("quant", args.quant)) if v}
    cfg = EngineConfig.from_env(max_batch=max(1, args.workers), history=args.history, **precision)
    llm = load_llm(manifest.base, [], cfg)
    try:
        for role, a in sorted(manifest.adapters.items()):
            llm.add_adapter(a["path"], name=role)
        bundle = load_bundle(manifest.harness["path"])
        router = router_for(llm, bundle, args.router_policy, args.router_state)
        router_desc = {"policy": router.config.policy if router else None,
                       "state_id": router.state.id if router and router.state.policies() else None}
        h = ablate.Harnesses(llm, bundle, ablate.LockedRouter(router) if router else None, cfgs,
                             constrain=not args.no_constraints)
        tasks_path = args.tasks or _home() / "ablate" / f"{args.json.name}{'.dev' if args.split == 'dev' else ''}.tasks.jsonl"
        log = ResultLog(tasks_path, contract.sha256)
        other = sum(1 for r in log.rows.values() if r.get("split", "test") != args.split)
        if other:  # a unit's key does not name its split: one file holds one split
            print(f"macaronic eval ablate: {tasks_path} holds {other} rows of another split; give this split "
                  f"its own --tasks file", file=sys.stderr)
            log.close()
            return 2
        todo = [u for u in units if _key(h, u) not in log.rows]
        try:
            run(contract, h, todo, log, len(units), args.workers, args.quiet, progress, args.max_seconds, args.split)
        finally:
            log.close()
        ran = sum(1 for u in todo if _key(h, u) in log.rows)
        missing = sum(1 for u in units if _key(h, u) not in log.rows)
    finally:
        llm.close()
    wall = time.perf_counter() - t0
    rows = [r for r in read_rows(tasks_path, contract.sha256)
            if r.get("config") in {c.name for c in cfgs} and r["pair"] == f"{r['config']}/{h.pair_ids[r['config']]}"
            and r["suite"] in {s.name for s in contract.suites}]  # a --suites run may share a file with a wider one
    summary = ablate.summarize(contract, rows, cfgs)
    command = "".join(f"{k}={v} " for k, v in precision_env().items()) + "macaronic eval ablate " + " ".join(argv)
    doc = {"contract": {"id": contract.id, "sha256": contract.sha256, "path": str(args.contract)},
           "pair": manifest.to_dict(), "pair_ids": h.pair_ids, "router": router_desc,
           "configurations": [c.__dict__ for c in cfgs], "command": command, "tasks": str(tasks_path),
           "wall_s": round(wall, 1), "units": len(units), "units_run": ran, "units_missing": missing, "memo_hits": h.memo.hits,
           "threads": args.threads, "workers": args.workers, "history": args.history, "split": args.split,
           "dtype": cfg.dtype, "quant": cfg.quant, "contamination": cont, **summary}
    write_json_atomic(args.json, doc)
    text = section(doc, contract, cfgs, args.json)
    if args.md:
        args.md.write_text(ablate.write_section(args.md.read_text() if args.md.exists() else "# Benchmarks\n", text))
    if not args.quiet:
        print(text, file=sys.stderr)
    return 0


def section(doc: dict, contract, cfgs, json_path) -> str:
    """The markdown written between the markers: the command and its conditions, then the tables."""
    from macaronic.contract import ablate

    left = f", {doc['units_missing']} not run (--max-seconds)" if doc.get("units_missing") else ""
    head = (f"Command: `{doc['command']}` ({doc['wall_s']:.0f} s wall for {doc['units_run']} of {doc['units']} units{left}, "
            f"{doc['threads']} torch thread{'s' if doc['threads'] != 1 else ''}, {doc['workers']} concurrent units, "
            f"{doc.get('dtype', 'float32')}{'' if doc.get('quant', 'none') == 'none' else ' + ' + doc['quant']}). "
            f"{'Dev split (diagnostic). ' if doc.get('split') == 'dev' else ''}Contract `{contract.id}` "
            f"(sha256 {contract.sha256[:12]}), pair `{doc['pair']['id'][:12]}`, router `{doc['router']['policy']}`. "
            f"Raw: `{json_path}`.\n\n")
    return head + ablate.markdown(contract, doc, cfgs)


def _key(h, unit) -> str:
    from macaronic.contract.evaluate import unit_key

    cfg, task, sample = unit
    return unit_key(f"{cfg.name}/{h.pair_ids[cfg.name]}", task.suite, task.id, sample)


def run(contract, h, todo, log, total: int, workers: int, quiet: bool, progress, max_seconds: float = 0.0,
        split: str = "test") -> None:
    from concurrent.futures import CancelledError, ThreadPoolExecutor, as_completed

    deadline = time.monotonic() + max_seconds if max_seconds > 0 else None
    with progress(quiet) as bar, ThreadPoolExecutor(max(1, workers)) as ex:
        job = bar.add_task("ablate", total=total, completed=total - len(todo))
        futures = [ex.submit(h.run_unit, contract, cfg, task, sample, split) for cfg, task, sample in todo]
        try:
            for f in as_completed(futures):
                try:
                    log.add(f.result())
                except CancelledError:
                    continue
                bar.advance(job)
                if deadline is not None and time.monotonic() > deadline:
                    for g in futures:
                        g.cancel()  # units not started yet; the running ones still finish
        except BaseException:
            for f in futures:
                f.cancel()
            raise


def _primary_only(contract):
    from dataclasses import replace

    return replace(contract, suites=tuple(s for s in contract.suites if not s.report_only))


def _home():
    from macaronic.engine.base import home

    return home()
