"""Experience collection: the champion answers k samples of each train task, every reply graded.

Tasks come from the split loader as the `collector` (the test split is refused and the attempt
audited). Rows go to an append-only, resumable JSONL (contract.evaluate.ResultLog), one per
(task, sample), so a crash loses at most the reply in flight and a rerun adds nothing twice.
"""

from __future__ import annotations

from dataclasses import replace

from macaronic.contract.evaluate import ResultLog, run_units, unit_key


def collect(contract, loader, runner, pair_id: str, budget, log: ResultLog, on_unit=None) -> list[dict]:
    """Fill `log` with the champion's graded train experience; returns this pair's rows."""
    units, specs = [], {}
    for s in contract.suites:
        if s.report_only:
            continue  # external suites have no train split
        for t in loader.tasks(s.name, "train", per_family=budget.per_family):
            units += [(t, i) for i in range(budget.samples)]
        spec = replace(s, k=budget.samples)
        if budget.max_tokens is not None:
            spec = replace(spec, max_tokens=min(spec.max_tokens, budget.max_tokens))
        specs[s.name] = spec
    view = replace(contract, suites=tuple(specs.get(s.name, s) for s in contract.suites))
    todo = [u for u in units if unit_key(pair_id, u[0].suite, u[0].id, u[1]) not in log.rows]
    if on_unit is not None:
        on_unit(len(units) - len(todo), len(units))
    for row in run_units(view, pair_id, todo, runner, log.keys(), split="train"):
        log.add(row)
        if on_unit is not None:
            on_unit(None, len(units))
    return log.for_pair(pair_id)
