"""The per-task rows behind a gate decision, beside it, compressed so that they can be committed,
and the recheck that recomputes the decision's every interval from them.

`macaronic eval --json X` writes X.rows.jsonl.gz: one line per (pair, suite, task, sample) row it
scored (child and parent), with only the fields the report reads (no transcripts: a committed
file carries no test replies). Deterministic bytes (gzip mtime 0, sorted rows). The recheck is
pure: rows and strata in, the report rebuilt with contract/report.py and compared field by field
with what the decision recorded. Knows nothing about workdirs or models.
"""

from __future__ import annotations

import gzip
import io
import json
import os
from pathlib import Path

FIELDS = ("contract_sha256", "pair", "suite", "task", "sample", "score", "passed", "tokens", "seconds", "reused_from")


def rows_path(report_json: Path) -> Path:
    return Path(report_json).with_name(Path(report_json).name + ".rows.jsonl.gz")


def write_rows(path: Path, rows: list[dict]) -> None:
    lines = sorted(json.dumps({k: r[k] for k in FIELDS if k in r}, sort_keys=True) for r in rows)
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0, filename="") as f:
        f.write(("\n".join(lines) + "\n").encode() if lines else b"")
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(buf.getvalue())
    os.replace(tmp, path)


def read_rows(path: Path, contract_sha256: str | None = None) -> list[dict]:
    out = [json.loads(line) for line in gzip.decompress(Path(path).read_bytes()).decode().splitlines() if line]
    return [r for r in out if contract_sha256 is None or r.get("contract_sha256") == contract_sha256]


def _diff(recorded, recomputed, where: str, out: list[str]) -> None:
    """Every leaf that differs (floats compared exactly: the same rows and seeds give the same bits)."""
    if isinstance(recorded, dict) and isinstance(recomputed, dict):
        for k in sorted(set(recorded) | set(recomputed)):
            _diff(recorded.get(k), recomputed.get(k), f"{where}.{k}", out)
    elif isinstance(recorded, (list, tuple)) and isinstance(recomputed, (list, tuple)) and len(recorded) == len(recomputed):
        for i, (a, b) in enumerate(zip(recorded, recomputed)):
            _diff(a, b, f"{where}[{i}]", out)
    elif recorded != recomputed:
        out.append(f"{where}: recorded {recorded!r}, recomputed {recomputed!r}")


def recheck(contract, report: dict, rows: list[dict], strata: dict | None, checks: list[dict] | None = None) -> dict:
    """Rebuild `report` (an eval.json) from its rows; {"intervals": how many quoted intervals were
    recomputed, "mismatches": [...]}. With `checks` (the gate file's) the gate's numbers too."""
    from macaronic.contract.report import build_report

    child, parent = report["pair"]["id"], (report.get("parent") or {}).get("id")
    again, again_checks = build_report(contract, child, [r for r in rows if r["pair"] == child], parent,
                                       [r for r in rows if r["pair"] == parent] if parent else None, strata)
    again = json.loads(json.dumps(again))  # through JSON, as the recorded file went
    bad: list[str] = []
    for field in ("suites", "strata", "decision", "failed_rules"):
        _diff(report.get(field), again[field], field, bad)
    if checks is not None:
        _diff(checks, json.loads(json.dumps(again_checks)), "checks", bad)
    n = sum(1 for b in list(again["suites"].values()) + list(again["strata"].values())
            for k in ("ci95", "delta_ci95") if b.get(k))
    n += sum(1 for c in again_checks if c.get("ci"))
    return {"intervals": n, "mismatches": bad}
