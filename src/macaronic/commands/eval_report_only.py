"""`macaronic eval report-only`: a contract's report-only suites (HumanEval, BFCL simple) beyond the
first N that the contract fixes, under the ablation's configurations (contract/report_only.py)."""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

from macaronic.contract.report_only import __doc__ as REPORT_ONLY_DOC


def main(argv: list[str]) -> int:
    from macaronic.contract import ablate
    from macaronic.specialist import BUILTIN_NAMES
    from macaronic.commands.eval_ablate import default_pair, run
    from macaronic.contract.evaluate import ResultLog, read_rows, unit_key, write_json_atomic
    from macaronic.contract.opening import Refused, prepare, progress
    from macaronic.contract.report_only import parse_limits, summarize, widen
    from macaronic.engine.bases import BASES, precision_env

    p = argparse.ArgumentParser(prog="macaronic eval report-only", description=REPORT_ONLY_DOC,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--contract", required=True, type=Path)
    p.add_argument("--json", required=True, type=Path, help="the summary")
    p.add_argument("--tasks", required=True, type=Path, help="per-task JSONL (resumable)")
    p.add_argument("--base", default=None, choices=tuple(BASES), help="a registered base with its shipped pair")
    p.add_argument("--pair", default=None, help="pair id, alias or manifest .json (default: --base's shipped pair)")
    p.add_argument("--lineage", type=Path, default=None, help="lineage SQLite for --pair ids")
    p.add_argument("--router-policy", default=None, help="override the bundle's routing policy")
    p.add_argument("--audit", type=Path, default=None, help="split-read audit log")
    p.add_argument("--configs", default="base,routed", help="comma list: base, a role name, routed (default base,routed)")
    p.add_argument("--limit", default="humaneval=all", help="SUITE=N|all, comma-separated (default humaneval=all)")
    p.add_argument("--max-tokens", default="", metavar="SUITE=N,...",
                   help="raise or lower a suite's token cap per reply (default: the contract's; HumanEval's 192 cuts "
                   "some solutions, 512 does not); use its own --tasks file, rows are keyed by the contract")
    p.add_argument("--suites", default=None, help="comma list of report-only suites (default: those named in --limit)")
    p.add_argument("--workers", type=int, default=16)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--max-seconds", type=float, default=0.0, help="start no unit after this many seconds")
    p.add_argument("--quiet", action="store_true")
    a = p.parse_args(argv)
    import torch

    torch.set_num_threads(max(1, a.threads))
    try:
        limits = parse_limits(a.limit)
        contract, loader, (manifest,) = prepare(a.contract, a.audit, [a.pair], a.lineage,
                                                lambda: default_pair(a.base))
        caps = {k: int(v) for k, v in (x.split("=", 1) for x in a.max_tokens.split(",") if x.strip())}
        contract = widen(contract, limits, caps)
    except (Refused, ValueError) as e:
        print(f"report_only: {e}", file=sys.stderr)
        return getattr(e, "code", 2)
    want = [s.strip() for s in (a.suites or ",".join(limits)).split(",") if s.strip()]
    contract = replace(contract, suites=tuple(s for s in contract.suites if s.name in want))
    if not contract.suites:
        print(f"report_only: no report-only suite among {want}", file=sys.stderr)
        return 2
    known = {"base": ablate.Config("base", "base"), "routed": ablate.Config("routed", "routed"),
             **{r: ablate.Config(r, "forced", r) for r in BUILTIN_NAMES if r in manifest.adapters}}
    names = [c.strip() for c in a.configs.split(",") if c.strip()]
    if set(names) - set(known):
        print(f"report_only: unknown configurations {sorted(set(names) - set(known))}; known: {sorted(known)}",
              file=sys.stderr)
        return 2
    cfgs = [known[n] for n in names]
    # the tasks come from the suite kinds directly: a widened limit is not the contract's sealed split
    from macaronic.contract.suites import KINDS

    tasks = {s.name: KINDS[s.kind].tasks(s, "test") for s in contract.suites}
    # task-major, and per task base, then routed, then forced adapters (a forced row reuses the routed
    # generation of its role): a run cut by --max-seconds has every configuration on the same first tasks
    order = sorted(cfgs, key=lambda c: {"base": 0, "routed": 1}.get(c.policy, 2))
    units = [(c, t, i) for s in contract.suites for t in tasks[s.name] for i in range(s.k) for c in order]

    from macaronic.engine.llm import EngineConfig, load_llm
    from macaronic.harness import load_bundle
    from macaronic.router.shipped import router_for

    t0 = time.perf_counter()
    llm = load_llm(manifest.base, [], EngineConfig.from_env(max_batch=max(1, a.workers)))
    try:
        for role, ad in sorted(manifest.adapters.items()):
            llm.add_adapter(ad["path"], name=role)
        bundle = load_bundle(manifest.harness["path"])
        router = router_for(llm, bundle, a.router_policy) if "routed" in names else None
        h = ablate.Harnesses(llm, bundle, ablate.LockedRouter(router) if router else None, cfgs)
        log = ResultLog(a.tasks, contract.sha256)
        key = lambda u: unit_key(f"{u[0].name}/{h.pair_ids[u[0].name]}", u[1].suite, u[1].id, u[2])  # noqa: E731
        todo = [u for u in units if key(u) not in log.rows]
        try:
            run(contract, h, todo, log, len(units), a.workers, a.quiet, progress, a.max_seconds)
        finally:
            log.close()
        missing = sum(1 for u in units if key(u) not in log.rows)
    finally:
        llm.close()
    rows = [r for r in read_rows(a.tasks, contract.sha256)
            if r.get("config") in h.pair_ids and r["pair"] == f"{r['config']}/{h.pair_ids[r['config']]}"]
    env = precision_env()
    prefix = "".join(f"{k}={v} " for k, v in env.items())  # the precision is part of the command
    doc = {"command": prefix + "macaronic eval report-only " + " ".join(argv),
           "contract": {"id": contract.id, "sha256": contract.sha256}, "outside_contract": True,
           "limits": {s.name: s.limit for s in contract.suites},
           "max_tokens": {s.name: s.max_tokens for s in contract.suites}, "pair": manifest.to_dict(), "pair_ids": h.pair_ids,
           "tasks": str(a.tasks),
           "env": env,
           "units": len(units), "units_missing": missing, "wall_s": round(time.perf_counter() - t0, 1),
           "threads": a.threads, "workers": a.workers, "configs": summarize(contract, rows, names)}
    write_json_atomic(a.json, doc)
    for n, by in doc["configs"].items():
        for s, b in by.items():
            d = f" ({b['delta']:+.3f} [{b['ci95'][0]:+.3f}, {b['ci95'][1]:+.3f}] vs base, n={b['n_paired']})" \
                if b.get("delta") is not None else ""
            print(f"{n:8s} {s:12s} n={b['n']:4d} score={b['score']:.3f}{d}")
    return 0
