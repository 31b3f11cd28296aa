"""Recompute every interval a workdir quotes, from the per-task rows committed beside its decisions.

Each eval.json under the workdir (the loop's gen-NNN/ and any confirmation beside them) is
rebuilt from its eval.json.rows.jsonl.gz (contract/decision_rows.py; a live workdir's
eval.json.tasks.jsonl serves when the compressed file is absent) under the contract whose sha256
it names and the strata it was judged with; its gate file's checks too. Then report.json: each
generation's suites and strata must be its eval.json's, and the transfer table's intervals
against generation 0 are recomputed from generation 0's and the generation's rows. The lineage's
report_sha256 must be the eval.json's. Pure reads; the CLI (`macaronic evolve intervals`) prints.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path


def find_contract(sha256: str, candidates: list[Path]):
    """The contract file among `candidates` (files or folders of YAML) whose sha256 is `sha256`."""
    from macaronic.contract import spec as cspec

    for c in candidates:
        for p in ([c] if Path(c).is_file() else sorted(Path(c).glob("*.yaml"))):
            try:
                if cspec.sha256_file(p) == sha256 or cspec.parse(p).sha256 == sha256:
                    return cspec.parse(p)
            except Exception:  # a file that is not a contract
                continue
    return None


def default_contract_dirs() -> list[Path]:
    here = Path(__file__).resolve().parents[3] / "contracts"  # the repository's, in a checkout
    return [p for p in (Path("contracts"), here) if p.is_dir()]


def decision_rows(ev: Path, sha: str) -> tuple[list[dict] | None, str]:
    from macaronic.contract.decision_rows import read_rows, rows_path
    from macaronic.contract.evaluate import read_rows as read_log

    if rows_path(ev).is_file():
        return read_rows(rows_path(ev), sha), rows_path(ev).name
    log = ev.with_name(ev.name + ".tasks.jsonl")
    if log.is_file():
        return read_log(log, sha), log.name
    return None, "no rows"


def _strata_options(ev: Path, workdir: Path, contract) -> list[Path]:
    out = [d / "strata.json" for d in [ev.parent, *ev.parent.parents] if (d / "strata.json").is_file()
           and (d == workdir or workdir in d.parents)]
    if contract.strata_path() is not None and contract.strata_path().is_file():
        out.append(contract.strata_path())
    return out


def check_eval(ev: Path, workdir: Path, contracts: list[Path]) -> dict:
    from macaronic.contract.decision_rows import recheck

    report = json.loads(ev.read_text())
    sha = report["contract"]["sha256"]
    out = {"eval": str(ev.relative_to(workdir)), "decision": report.get("decision"), "intervals": 0, "mismatches": []}
    contract = find_contract(sha, contracts)
    if contract is None:
        return {**out, "status": "no contract", "mismatches": [f"no contract file with sha256 {sha[:12]}"]}
    rows, source = decision_rows(ev, sha)
    if rows is None:
        return {**out, "status": "no rows"}
    gate_file = next((f for f in (ev.with_name(ev.name + ".gate.json"), ev.with_name("gate.json")) if f.is_file()), None)
    gate = json.loads(gate_file.read_text()) if gate_file else {}  # committed runs name it gate.json
    checks = gate.get("checks") if report.get("decision") in ("accept", "reject") else None
    options: list[tuple[str, dict | None]] = []
    for p in _strata_options(ev, workdir, contract):
        data = p.read_bytes()
        if gate.get("strata_sha256") in (None, hashlib.sha256(data).hexdigest()):
            doc = json.loads(data)
            options.append((str(p), doc.get("tasks", doc)))
    if gate.get("strata_sha256") is None:
        options.append(("none", None))
    best = None
    for name, strata in options:  # the recorded strata, or (older files) the one the numbers fit
        res = recheck(contract, report, rows, strata, checks)
        if best is None or len(res["mismatches"]) < len(best[1]["mismatches"]):
            best = (name, res)
    if best is None:
        return {**out, "status": "no strata", "mismatches": [f"strata {gate['strata_sha256'][:12]} not found"]}
    return {**out, **best[1], "rows": source, "strata": best[0],
            "status": "ok" if not best[1]["mismatches"] else "MISMATCH"}


def check_summary(workdir: Path, contracts: list[Path]) -> tuple[list[str], int]:
    """(mismatches, transfer intervals recomputed): report.json against the eval files, its transfer
    table recomputed when every decision it reads has its rows; lineage report hashes."""
    from macaronic.contract.decision_rows import _diff
    from macaronic.evolve import transfer as tmod

    bad: list[str] = []
    rep = workdir / "report.json"
    if not rep.is_file():
        return bad, 0
    summary = json.loads(rep.read_text())
    contract = find_contract(summary["contract"]["sha256"], contracts)
    for g in summary["generations"]:
        ev = workdir / f"gen-{g['generation']:03d}" / "eval.json"
        if g["decision"] in ("accept", "reject", "reference") and ev.is_file():
            doc = json.loads(ev.read_text())
            for field in ("suites", "strata"):
                _diff(doc[field], g[field], f"report.json gen {g['generation']} {field}", bad)
    gated = [0] + [r["generation"] for r in summary.get("transfer", {}).get("rows", [])]
    have = all(decision_rows(workdir / f"gen-{g:03d}" / "eval.json", summary["contract"]["sha256"])[0] is not None
               for g in gated)
    if contract is not None and summary.get("transfer", {}).get("rows") and have:  # no rows: check_eval says so
        again = json.loads(json.dumps(tmod.transfer(contract, workdir, summary)))
        _diff(summary["transfer"]["rows"], again["rows"], "report.json transfer", bad)
        n = transfer_intervals(summary)
    else:
        n = 0
    lin = workdir / "lineage.sqlite"
    if lin.is_file():
        from macaronic.pairs.lineage import Lineage

        with Lineage(lin) as ln:
            for r in ln.records():
                ev = workdir / f"gen-{r['generation']:03d}" / "eval.json"
                if r.get("report_sha256") and ev.is_file() \
                        and hashlib.sha256(ev.read_bytes()).hexdigest() != r["report_sha256"]:
                    bad.append(f"lineage gen {r['generation']}: report_sha256 is not eval.json's")
    return bad, n


def transfer_intervals(summary: dict) -> int:
    return sum(1 for r in summary.get("transfer", {}).get("rows", []) for k in ("vs_gen0", "vs_gen0_strata")
               for b in r[k].values() if b.get("ci95"))


def check_workdir(workdir: Path, contracts: list[Path] | None = None) -> dict:
    """{"evals": [per eval.json], "summary": [mismatches], "ok": every interval recomputed and equal}."""
    workdir = Path(workdir)
    contracts = list(contracts or []) + default_contract_dirs()
    evals = [check_eval(ev, workdir, contracts) for ev in sorted(workdir.rglob("eval.json"))]
    summ, n_transfer = check_summary(workdir, contracts)
    return {"evals": evals, "summary": summ, "transfer_intervals": n_transfer,
            "ok": bool(evals) and all(e["status"] == "ok" for e in evals) and not summ}
