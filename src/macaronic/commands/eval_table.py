"""`macaronic eval table bases|precision`: the markdown tables built from `eval ablate` (or `eval
report-only`) summaries, written between a section's markers (contract/bases_table.py,
contract/precision_table.py; bench/docs.py writes the section)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

TABLES = {"bases": "two bases: what the base gives, what the adapter scheme gives, per suite",
          "precision": "the served precision by the contract: the routed MoL at each precision against fp32"}


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="macaronic eval table", description="Tables from `eval ablate` summaries.")
    sub = p.add_subparsers(dest="table", required=True, metavar="TABLE")
    for name, help_ in TABLES.items():
        sub.add_parser(name, help=help_, add_help=False)
    if argv[:1] and argv[0] in TABLES:
        return {"bases": bases, "precision": precision}[argv[0]](argv[1:])
    p.parse_args(argv)
    return 2


def run_rows(path: str | Path, contract_sha256: str) -> list[dict]:
    """A run's per-task rows: the `--tasks` file it wrote, or that file gzipped beside it (docs/bench
    keeps the rows of its figures as `X.tasks.jsonl.gz`)."""
    import gzip

    from macaronic.contract.evaluate import read_rows

    path, gz = Path(path), Path(f"{path}.gz")
    if path.exists() or not gz.exists():
        return read_rows(path, contract_sha256)
    rows = (json.loads(line) for line in gzip.decompress(gz.read_bytes()).decode("utf-8").splitlines() if line.strip())
    return [r for r in rows if r.get("contract_sha256") == contract_sha256]


def bases(argv: list[str]) -> int:
    """`macaronic eval table bases`."""
    from macaronic.contract import bases_table as module
    from macaronic.contract.bases_table import config_scores, markdown, table

    from macaronic.bench.docs import write_section
    from macaronic.contract.spec import load
    from macaronic.engine.bases import SMALL_BASE

    p = argparse.ArgumentParser(prog="macaronic eval table bases", description=module.__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--contract", required=True, type=Path)
    p.add_argument("--ablation", action="append", required=True, type=Path, metavar="JSON",
                   help="an `eval ablate` summary; give two, the reference base first")
    p.add_argument("--json", type=Path, default=None, help="also write the table as JSON")
    p.add_argument("--md", type=Path, default=None)
    p.add_argument("--key", default="bases-ablation",
                   help="the <!-- KEY:start/end --> markers of the section written (default bases-ablation)")
    p.add_argument("--title", default="Two bases: what the base gives, what the adapter scheme gives")
    a = p.parse_args(argv)
    if len(a.ablation) != 2:
        p.error("give exactly two --ablation summaries")
    contract = load(a.contract, hashes=False)
    docs = [json.loads(x.read_text()) for x in a.ablation]
    for x, d in zip(a.ablation, docs):
        if d["contract"]["sha256"] != contract.sha256:
            p.error(f"{x} was measured under another contract ({d['contract']['id']})")
    names = tuple(Path(d["pair"]["base"] or SMALL_BASE).name for d in docs)
    scores = tuple(config_scores(contract, d, run_rows(d["tasks"], contract.sha256)) for d in docs)
    t = table(contract, names, scores)
    text = markdown(contract, names, t, [d["command"] for d in docs])
    if a.json:
        a.json.write_text(json.dumps({"bases": names, "suites": t}, indent=2) + "\n")
    if a.md:
        write_section(a.md, f"<!-- {a.key}:start -->", f"<!-- {a.key}:end -->", a.title, text)
    print(text)
    return 0


def precision(argv: list[str]) -> int:
    """`macaronic eval table precision`."""
    from macaronic.contract import precision_table as module
    from macaronic.contract.precision_table import markdown, speed_of, table

    from macaronic.bench.docs import write_section
    from macaronic.contract.bases_table import config_scores
    from macaronic.contract.spec import load as load_contract

    p = argparse.ArgumentParser(prog="macaronic eval table precision", description=module.__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--contract", required=True, type=Path)
    p.add_argument("--ablation", action="append", required=True, type=Path,
                   help="an `eval ablate --configs routed` summary per precision; the first is the reference")
    p.add_argument("--speed", type=Path, default=None, help="a `macaronic bench --only precision` JSON")
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--md", type=Path, default=None)
    p.add_argument("--key", default="precision",
                   help="the <!-- KEY:start/end --> markers of the section written (default precision)")
    p.add_argument("--title", default="The served precision by the contract", help="the section's heading")
    a = p.parse_args(argv)
    contract = load_contract(a.contract, hashes=False)
    docs = [json.loads(f.read_text()) for f in a.ablation]
    for f, d in zip(a.ablation, docs):
        if d["contract"]["sha256"] != contract.sha256:
            p.error(f"{f} was measured under another contract ({d['contract']['id']})")
        if d["pair_ids"].get("routed") != docs[0]["pair_ids"].get("routed"):
            p.error(f"{f} answered with another pair than {a.ablation[0]}: compare precisions of one pair")
    scores = [config_scores(contract, d, run_rows(d["tasks"], contract.sha256)) for d in docs]
    speed, speed_cmd = None, None
    if a.speed:
        sd = json.loads(a.speed.read_text())
        speed_cmd = sd.get("command")
        speed = {n: v["tok_s"] for n, v in speed_of(sd).items()}
    t = table(contract, docs, scores, speed)
    if a.json:
        a.json.write_text(json.dumps(t, indent=2) + "\n")
    text = markdown(t, contract, [d["command"] for d in docs], speed_cmd)
    if a.md:
        write_section(a.md, f"<!-- {a.key}:start -->", f"<!-- {a.key}:end -->", a.title, text)
    print(text)
    return 0
