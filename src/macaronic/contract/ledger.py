"""The sealed-read ledger: how often a contract version's test split was read, across every run.

A workdir's audit counts only its own reads, so a test read nineteen times in five workdirs looked
small in each. Here every read that scores a pair on the test split appends one line to one
append-only file per machine ($MACARONIC_LEDGER, default $MACARONIC_HOME/audit/sealed-reads.jsonl),
keyed by contract id (which names the version) and sha256. A read is one measurement: the split
loader of one evaluation, identified by a key (the report it writes) so that resuming a killed
evaluation is not a second read. Committed workdirs carry their own audit.jsonl (or, older ones,
the report.json summary of it) and `recount` counts them too, deduplicated against the ledger.

Purposes: `gate` (an evaluation with a parent, which decides accept/reject), `reference` (a
run's generation-0 reference, the gate's baseline) and `strata` (the k-sample reference that
freezes the strata) are the gate's; anything else (`evaluator`: a report without a decision,
an ablation, report-only suites) is `other`, a violation. Hash checks (`check`) read tasks to
hash them and score nothing: not counted. Knows nothing about models.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

GATE_PURPOSES = ("gate", "reference", "strata")
MEASURING = GATE_PURPOSES + ("evaluator",)  # purposes whose test reads score a pair


def default_path() -> Path:
    from macaronic.engine.base import home

    return Path(os.environ.get("MACARONIC_LEDGER", home() / "audit" / "sealed-reads.jsonl"))


def kind(purpose: str) -> str:
    """The ledger's bucket for a loader purpose: gate, reference, strata, or other."""
    return purpose if purpose in GATE_PURPOSES else "other"


def append(contract, purpose: str, key: str, audit: Path | None, path: Path | None = None) -> dict:
    row = {"time": time.time(), "host": socket.gethostname(), "pid": os.getpid(), "contract": contract.id,
           "contract_sha256": contract.sha256, "purpose": purpose, "key": key,
           "audit": str(audit) if audit else None}
    p = Path(path) if path else default_path()
    p.parent.mkdir(parents=True, exist_ok=True)
    with open(p, "a") as f:  # O_APPEND: one line per write, never rewritten
        f.write(json.dumps(row, sort_keys=True) + "\n")
    return row


def read(path: Path | None = None) -> list[dict]:
    p = Path(path) if path else default_path()
    if not p.is_file():
        return []
    out = []
    for line in p.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue  # a torn last line
    return out


def _audit_reads(audit: Path, sha: str) -> list[dict]:
    """Reads in one audit.jsonl: allowed test reads of measuring purposes, one per key (rows from
    before keys existed: one per process and purpose, as the per-workdir count always was)."""
    from macaronic.contract.sealed import read_audit

    seen: dict[tuple, dict] = {}
    for r in read_audit(audit):
        if r.get("split") != "test" or not r.get("allowed") or r.get("purpose") not in MEASURING \
                or r.get("contract_sha256") != sha:
            continue
        key = r.get("key") or f"pid:{r['pid']}:{r['purpose']}"
        seen.setdefault((r["purpose"], key), {"purpose": r["purpose"], "key": key, "source": str(audit)})
    return list(seen.values())


def _legacy_reads(report: Path, sha: str) -> list[dict]:
    """A committed loop workdir without its audit: report.json's sealed_reads (per process and
    purpose), its `evaluator` reads split into the generation-0 reference and the gate decisions
    its generations record, any excess counted as other."""
    doc = json.loads(report.read_text())
    if doc.get("contract", {}).get("sha256") != sha:
        return []
    by = doc.get("sealed_reads", {}).get("by_purpose", {})
    gens = doc.get("generations", [])
    n_ref = sum(g["decision"] == "reference" for g in gens)
    n_gate = sum(g["decision"] in ("accept", "reject") for g in gens)
    ev = by.get("evaluator", 0)
    ref = min(ev, n_ref)
    gate = min(ev - ref, n_gate)
    out = [{"purpose": "reference"}] * ref + [{"purpose": "gate"}] * gate + [{"purpose": "evaluator"}] * (ev - ref - gate)
    out += [{"purpose": "strata"}] * by.get("strata", 0)
    return [{**r, "key": f"{report}#{i}", "source": f"{report} (inferred)"} for i, r in enumerate(out)]


def _eval_reads(ev: Path, sha: str) -> list[dict]:
    """A committed eval.json with neither audit nor report beside it: one read, `gate` when it had a parent."""
    doc = json.loads(ev.read_text())
    if doc.get("contract", {}).get("sha256") != sha:
        return []
    purpose = "gate" if (doc.get("parent") or {}).get("id") else "evaluator"
    return [{"purpose": purpose, "key": f"eval:{ev.resolve()}", "source": f"{ev} (inferred)"}]


def committed_reads(roots: list[Path], sha: str) -> list[dict]:
    """Reads of contract `sha` recorded under `roots` (committed workdirs): each directory's
    audit.jsonl when it has one, else its report.json, else its eval.json."""
    out: list[dict] = []
    dirs = sorted({p.parent for root in roots if Path(root).is_dir()
                   for name in ("audit.jsonl", "report.json", "eval.json") for p in Path(root).rglob(name)})
    covered: set[Path] = set()
    for d in dirs:
        if (d / "audit.jsonl").is_file():
            out += _audit_reads(d / "audit.jsonl", sha)
            covered |= {d}
        elif (d / "report.json").is_file() and "sealed_reads" in json.loads((d / "report.json").read_text()):
            out += _legacy_reads(d / "report.json", sha)
            covered |= {d}
    for d in dirs:
        # a loop's gen-NNN/eval.json was counted by its workdir's audit or report: not another read
        if (d / "eval.json").is_file() and d not in covered and not (d.parent in covered and d.name.startswith("gen-")):
            out += _eval_reads(d / "eval.json", sha)
    return out


def recount(contract, roots: list[Path] = (), path: Path | None = None) -> dict:
    """Every read of this contract version: the ledger's, plus the committed workdirs' under `roots`
    (a read in both, by key, counts once). {"total", "by_purpose", "violations": [other reads]}."""
    reads = {(r["purpose"], r["key"]): {**r, "source": "ledger"} for r in read(path)
             if r.get("contract_sha256") == contract.sha256}
    for r in committed_reads(list(roots), contract.sha256):
        reads.setdefault((r["purpose"], r["key"]), r)
    by = {k: 0 for k in GATE_PURPOSES + ("other",)}
    for r in reads.values():
        by[kind(r["purpose"])] += 1
    return {"contract": contract.id, "sha256": contract.sha256, "total": len(reads), "by_purpose": by,
            "violations": [r for r in reads.values() if kind(r["purpose"]) == "other"]}


def line(counts: dict) -> str:
    by = counts["by_purpose"]
    return (f"sealed test read {counts['total']} times (by purpose: gate {by['gate']}, reference {by['reference']}, "
            f"strata {by['strata']}, other {by['other']})")
