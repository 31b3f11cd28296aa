"""Freeze a contract's difficulty strata from a reference pair
evaluated with k samples per task at the contract's strata temperature (v5: k = 4, T = 0.7).

A task's stratum is its pass rate over the k samples (the mean task score for non-binary
suites): easy >= strata.easy_min, hard <= strata.hard_max, mid between. One greedy sample per
task would make "hard" mean "failed once", so a successor's hard delta is >= 0 and its easy delta
<= 0 by construction; k samples give a rate that a successor can move either way. The samples
are a sealed read (purpose `strata`, audited). Resumable: per-unit rows go to a JSONL.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path


def freeze(contract_path: Path, pair, out: Path, audit: Path | None = None, tasks: Path | None = None,
           on_unit=None, workers: int = 1) -> dict:
    """Run the k-sample reference and write the strata JSON to `out`; returns its content."""
    from macaronic.contract import spec as cspec
    from macaronic.contract.evaluate import ResultLog, run_units, unit_key, write_json_atomic
    from macaronic.contract.report import freeze_strata, task_scores
    from macaronic.contract.runner import make_answerer
    from macaronic.contract.sealed import SplitLoader

    contract = cspec.parse(contract_path)
    cspec.check_sources(contract)
    cspec.check_hashes(contract, SplitLoader(contract, "check", audit))
    # every test read of this run is audited as `strata`; a resumed freeze is the same read
    loader = SplitLoader(contract, "strata", audit, key=f"strata:{Path(out).resolve()}")
    k, temp = contract.strata.k, contract.strata.temperature
    view = replace(contract, suites=tuple(replace(s, k=k) for s in contract.suites))
    units = [(t, i) for s in contract.suites if not s.report_only for t in loader.tasks(s.name, "test")
             for i in range(k)]
    log = ResultLog(tasks or out.with_name(out.name + ".tasks.jsonl"), contract.sha256)
    try:
        todo = [u for u in units if unit_key(pair.id, u[0].suite, u[0].id, u[1]) not in log.rows]
        if todo:
            runner = make_answerer("harness", pair, temperature=temp if temp > 0 else None)
            try:
                for row in run_units(view, pair.id, todo, runner, log.keys(), workers=workers):
                    log.add(row)
                    if on_unit:
                        on_unit()
            finally:
                runner.close()
        rows = log.for_pair(pair.id)
    finally:
        log.close()
    rates = {key: round(t["rate"], 4) for key, t in sorted(task_scores(view, rows).items())}
    doc = {"reference": pair.id, "contract_sha256": contract.sha256, "k": k, "temperature": temp,
           "easy_min": contract.strata.easy_min, "hard_max": contract.strata.hard_max,
           "tasks": freeze_strata(view, rows), "rates": rates}
    write_json_atomic(out, doc)
    return doc
