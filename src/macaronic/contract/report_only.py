"""`python -m macaronic.contract.report_only`: a contract's report-only suites (HumanEval, BFCL
simple) beyond the first N that the contract fixes, under the ablation's configurations.

The contract reports HumanEval on its first 20 problems and BFCL simple on its first 30; these
problems are public, so a larger slice changes no sealed split and no gate. This runs every
report-only suite of the contract with `--limit SUITE=N` (all 164 HumanEval problems by default)
on one pair, under the same configurations as `macaronic eval ablate` (`base`: the role prompt on
the bare base; a role's name: that adapter forced; `routed`: the pair's router picks), with the
suite's own grader, caps and seeds (HumanEval runs in the coding suite's sandbox). Rows are the
ablation's rows (resumable JSONL, keyed by configuration and pair); the summary gives each
configuration's score and its paired difference vs `base`; two bases' summaries pair up in
`contract.bases_table --key NAME`. Outside the contract: the rows carry the contract's sha256 for
their graders and caps, and the JSON names the limits used.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import replace
from pathlib import Path


def widen(contract, limits: dict[str, int | None], caps: dict[str, int] | None = None):
    """The contract with only its report-only suites, each at `limits[name]` tasks (None: all) and
    `caps[name]` tokens per reply (default: the contract's cap)."""
    caps = caps or {}
    bad = (set(limits) | set(caps)) - {s.name for s in contract.suites if s.report_only}
    if bad:
        raise ValueError(f"not report-only suites of {contract.id}: {sorted(bad)}")
    suites = tuple(replace(s, limit=limits.get(s.name, s.limit), max_tokens=caps.get(s.name, s.max_tokens))
                   for s in contract.suites if s.report_only)
    return replace(contract, suites=suites, primary=())


def summarize(contract, rows: list[dict], names: list[str]) -> dict:
    """{config: {suite: {"n", "score", "delta", "ci95"}}}: delta is vs base, paired over shared tasks."""
    from macaronic.contract.report import task_scores
    from macaronic.contract.stats import paired_bootstrap

    g = contract.gate
    ts = {n: task_scores(contract, [r for r in rows if r["config"] == n]) for n in names}
    out: dict = {}
    for n in names:
        out[n] = {}
        for s in contract.suites:
            keys = sorted(k for k, v in ts[n].items() if v["suite"] == s.name)
            if not keys:
                continue
            block = {"n": len(keys), "score": sum(ts[n][k]["score"] for k in keys) / len(keys)}
            shared = [k for k in keys if k in ts.get("base", {})]
            if n != "base" and shared:
                d, ci = paired_bootstrap([ts[n][k]["score"] for k in shared], [ts["base"][k]["score"] for k in shared],
                                         g.resamples, g.confidence, g.seed)
                block.update({"delta": d, "ci95": ci, "n_paired": len(shared)})
            out[n][s.name] = block
    return out


def parse_limits(text: str) -> dict[str, int | None]:
    out = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, n = part.partition("=")
        if not n or not (n == "all" or n.isdigit()):
            raise ValueError(f"--limit wants SUITE=N or SUITE=all, got {part!r}")
        out[name.strip()] = None if n == "all" else int(n)
    return out


def main(argv: list[str] | None = None) -> int:
    from macaronic.contract import ablate
    from macaronic.contract.ablate_cli import default_pair, run
    from macaronic.contract.evaluate import ResultLog, read_rows, unit_key, write_json_atomic
    from macaronic.contract.opening import Refused, prepare, progress
    from macaronic.engine.bases import BASES

    p = argparse.ArgumentParser(prog="python -m macaronic.contract.report_only", description=__doc__,
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
             **{r: ablate.Config(r, "forced", r) for r in ablate.ROLES if r in manifest.adapters}}
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
    env = {k: os.environ[k] for k in ("MACARONIC_DTYPE", "MACARONIC_QUANT") if os.environ.get(k)}
    prefix = "".join(f"{k}={v} " for k, v in env.items())  # the precision is part of the command
    doc = {"command": prefix + "python -m macaronic.contract.report_only " + " ".join(argv if argv is not None else sys.argv[1:]),
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


if __name__ == "__main__":
    raise SystemExit(main())
