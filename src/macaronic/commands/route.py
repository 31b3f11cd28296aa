"""`macaronic route`: classify turns from stdin, or benchmark the routing policies.

  macaronic route classify [--policy P] [--state DIR] [--bundle DIR] [--tiny]
      reads JSON lines {"messages": [...]} on stdin, writes one JSON line per input:
      {"role", "confidence", "probs", "policy", "ms", "reason"}
  macaronic route bench --json FILE [--markdown FILE] [--quick] [--tiny]
  macaronic route fit [--out DIR] [--check] [--adapters-only | --prefill-only] [--tiny]
      fit on the shipped routing data (template + hand-written train/dev) and save the state;
      default --out is the shipped state of --base (specialists/router, specialists/<base>/router); --check refits into a temporary
      directory and compares it byte for byte with the state at --out

Without --state, classify loads the shipped state (it never fits; a state fitted for another
base or other adapters is refused with the reason). Heavy imports stay inside the functions.
"""

from __future__ import annotations

import argparse
import json
import sys


def _backbone(tiny: bool, base: str | None = None):
    if tiny:
        from macaronic.testing import tiny_llm

        return tiny_llm()
    from macaronic.engine.llm import load_default_llm

    return load_default_llm(base=base)


def _router(llm, bundle, state: str | None, policy: str | None = None):
    from macaronic.router import Router
    from macaronic.router.config import RouterConfig
    from macaronic.router.shipped import load_shipped

    if policy == "prompted":
        return Router(llm, bundle)
    return load_shipped(llm, bundle, RouterConfig.from_dict(bundle.router), state)


def _bundle(path: str | None):
    from macaronic.harness import load_bundle

    return load_bundle(path)


def classify(args) -> int:
    bundle = _bundle(args.bundle)
    llm = _backbone(args.tiny, args.base)
    try:
        router = _router(llm, bundle, args.state, args.policy)
    except (ValueError, OSError) as e:
        print(f"macaronic route classify: {e}", file=sys.stderr)
        return 2
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
    llm = _backbone(args.tiny, args.base)
    desc = llm.describe() if hasattr(llm, "describe") else {}
    log = lambda msg: print(f"[route bench] {msg}", file=sys.stderr, flush=True)  # noqa: E731
    from macaronic.router.bench import POLICIES

    policies = tuple(args.policies.split(",")) if args.policies else POLICIES
    scaling = tuple(int(n) for n in args.scaling.split(",")) if args.scaling else ()
    config = BenchConfig(quick=args.quick, log=log, policies=policies, scaling=scaling,
                         prompted_samples=args.prompted_samples, refit=not args.shipped, cache=args.cache,
                         latency_samples=args.latency_samples,
                         scaling_data=tuple(d for d in args.scaling_data.split(",") if d),
                         scaling_policies=tuple(p for p in args.scaling_policies.split(",") if p))
    if args.precompute:
        from macaronic.router.bench import precompute

        print(precompute(llm, config, bundle))
        return 0
    report = run_bench(llm, bundle, config, description=desc)
    report["meta"]["tiny"] = args.tiny
    report["meta"]["bundle_id"] = bundle.id
    Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    table = markdown_table(report)
    if args.markdown:
        Path(args.markdown).write_text(table)
    print(table)
    return 0


def fit(args) -> int:
    import filecmp
    import tempfile
    from pathlib import Path

    from macaronic.router.shipped import fit_config, fit_state, routing_base, shipped_dir, write_shipped

    if not args.base and not args.tiny:  # the state that routes for the default base: SmolLM2-135M's
        args.base = routing_base(None)
    llm = _backbone(args.tiny, args.base)
    out = Path(args.out) if args.out else shipped_dir(args.base)
    log = lambda msg: print(f"[route fit] {msg}", file=sys.stderr, flush=True)  # noqa: E731
    from macaronic.router.bench import FeatureCache

    bundle = _bundle(args.bundle)
    cache = FeatureCache(args.cache, bundle, fit_config(llm, bundle))
    command = "macaronic route fit"
    if args.adapters_only:
        from macaronic.router.shipped import refit_adapter_parts

        try:
            router = refit_adapter_parts(llm, out, bundle, threads=args.threads, log=log, features=cache.pooled,
                                         head_cache=cache.head)
        except (ValueError, FileNotFoundError) as e:
            print(f"macaronic route fit: {e}", file=sys.stderr)
            return 2
        command += " --adapters-only"
    elif args.prefill_only:
        from macaronic.router.shipped import refit_prefill_part

        try:
            router = refit_prefill_part(llm, out, bundle, threads=args.threads, log=log)
        except (ValueError, FileNotFoundError) as e:
            print(f"macaronic route fit: {e}", file=sys.stderr)
            return 2
        command += " --prefill-only"
    else:
        router = fit_state(llm, bundle, threads=args.threads, log=log, features=cache.pooled,
                           head_cache=cache.head)
    cache.save()
    if not args.check:
        print(write_shipped(router, out, args.threads, command))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        state_id = write_shipped(router, tmp, args.threads, command)
        # the state's own files (provenance.json records which command wrote it: a full fit and
        # --adapters-only / --prefill-only give the same state under different commands)
        names = sorted(p.name for p in Path(tmp).iterdir() if p.name != "provenance.json")
        _, mismatch, errors = filecmp.cmpfiles(tmp, out, names, shallow=False)
    print(state_id)
    if mismatch or errors:
        print(f"macaronic route fit: the refit differs from {out}: {sorted(mismatch + errors)}", file=sys.stderr)
        return 1
    print(f"macaronic route fit: {out} reproduced byte for byte", file=sys.stderr)
    return 0


def main(argv: list[str]) -> int:
    from macaronic.engine.bases import BASES, DEFAULT_BASE
    from macaronic.router.config import POLICIES

    p = argparse.ArgumentParser(prog="macaronic route", description="classify turns, benchmark the routers")
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("classify", help="route JSON lines {\"messages\": [...]} from stdin")
    c.add_argument("--policy", choices=POLICIES, default=None, help="default: the bundle's router.json")
    c.add_argument("--state", help="a saved router state directory (default: the shipped one)")
    b = sub.add_parser("bench", help="benchmark every policy and the cascade")
    b.add_argument("--json", default="route-bench.json", help="write the report here")
    b.add_argument("--markdown", help="also write the markdown table here")
    b.add_argument("--quick", action="store_true", help="a fifth of the test split, fewer timings")
    b.add_argument("--policies", help="comma-separated policies (default: all)")
    b.add_argument("--prompted-samples", type=int, help="score the prompted policy on this many turns per set")
    b.add_argument("--scaling", default="4,40,400", help="route counts for the scaling rows ('' to skip)")
    b.add_argument("--scaling-data", default="template,hand",
                   help="data for the scaling rows: template families, hand-written turns (40: hand-labelled "
                        "sub-intents, 400: those x 10 context modifiers), or both")
    b.add_argument("--scaling-policies", default="embedding,probe,head,prompted",
                   help="policies in the scaling rows (prompted is scored on a fixed sample)")
    b.add_argument("--latency-samples", type=int, default=30, help="single-turn timed routes per policy and set")
    b.add_argument("--shipped", action="store_true", help="evaluate the shipped state instead of refitting it")
    b.add_argument("--cache", help="npz of request features kept between runs (timed routes never use it)")
    b.add_argument("--precompute", action="store_true", help="only fill --cache, then exit")
    f = sub.add_parser("fit", help="fit on the shipped routing data and save the router state")
    f.add_argument("--out", help="state directory (default: the shipped specialists/router)")
    f.add_argument("--check", action="store_true", help="refit and compare byte for byte with --out")
    f.add_argument("--threads", type=int, default=1, help="torch threads while fitting (default 1)")
    f.add_argument("--cache", help="request features from an earlier run (route bench --cache format)")
    f.add_argument("--adapters-only", action="store_true",
                   help="after a specialist changed: refit only what its weights give (the Arrow prototypes, their "
                        "temperature, the band table) into the state at --out; the head, probe, embedding and fast "
                        "stage keep their bytes")
    f.add_argument("--prefill-only", action="store_true",
                   help="fit only the head on the answer's own prefill (the base's `head_prefill` router option) into "
                        "the state at --out; every other part keeps its bytes")
    for s in (c, b, f):
        s.add_argument("--bundle", help="harness bundle directory (default: the shipped one)")
        s.add_argument("--tiny", action="store_true", help="use a tiny random model (smoke tests)")
        s.add_argument("--base", choices=tuple(BASES), default=None,
                       help=f"a registered base, with its shipped specialists and state (default {DEFAULT_BASE}; "
                            "for fit: the base whose state routes for it, smollm2-135m-instruct)")
    args = p.parse_args(argv)
    return {"classify": classify, "bench": bench, "fit": fit}[args.cmd](args)
