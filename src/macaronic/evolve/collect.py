"""Experience collection: the champion answers k samples of each train task, every reply graded;
then one hinted retry of each task it never solved (STaR's rationalisation).

Tasks come from the split loader as the `collector` (the test split is refused and the attempt
audited). Rows go to an append-only, resumable JSONL (contract.evaluate.ResultLog), one per
(task, sample), so a crash loses at most the reply in flight and a rerun adds nothing twice.
A hinted retry is sample k of its task, marked `hinted`: the answerer saw the task's reference
answer after the request; the row keeps the unhinted messages, so RFT learns the reply from the
prompt the model will be served.
"""

from __future__ import annotations

from dataclasses import replace

from macaronic.contract.evaluate import ResultLog, run_unit, run_units, unit_key


def _view(contract, budget, k: int):
    specs = []
    for s in contract.suites:
        spec = replace(s, k=k)
        if budget.max_tokens is not None:
            spec = replace(spec, max_tokens=min(spec.max_tokens, budget.max_tokens))
        specs.append(spec)
    return replace(contract, suites=tuple(specs))


def _suites(contract, suites):
    return [s for s in contract.suites if not s.report_only and (not suites or s.name in suites)]


def collect(contract, loader, runner, pair_id: str, budget, log: ResultLog, on_unit=None, suites=()) -> list[dict]:
    """Fill `log` with the champion's graded train experience; returns this pair's rows."""
    units = []
    for s in _suites(contract, suites):
        for t in loader.tasks(s.name, "train", per_family=budget.per_family):
            units += [(t, i) for i in range(budget.samples)]
    view = _view(contract, budget, budget.samples)
    todo = [u for u in units if unit_key(pair_id, u[0].suite, u[0].id, u[1]) not in log.rows]
    if on_unit is not None:
        on_unit(len(units) - len(todo), len(units))
    for row in run_units(view, pair_id, todo, runner, log.keys(), split="train", workers=budget.workers):
        log.add(row)
        if on_unit is not None:
            on_unit(None, len(units))
    return log.for_pair(pair_id)


def hint_of(suite: str, task) -> str | None:
    """The reference answer shown on a hinted retry: the suite entry's `hint` (None: the suite
    has no short one, or is no specialist's, like mixed)."""
    from macaronic.suites.registry import suite as suite_of

    try:
        hint = suite_of(suite).hint
    except ValueError:
        return None
    return hint(task.obj) if hint is not None else None


class Hinted:
    """An answerer that sees `hint` after the first user message; the caller's messages are untouched."""

    def __init__(self, runner, hint: str):
        self.runner, self.hint = runner, hint

    def reply(self, messages, role, **kw):
        msgs = [dict(m) for m in messages]
        first = next(i for i, m in enumerate(msgs) if m["role"] == "user")
        msgs[first]["content"] += f"\n\n(Hint, a reference answer: {self.hint})"
        return self.runner.reply(msgs, role, **kw)


def collect_hinted(contract, loader, runner, pair_id: str, budget, log: ResultLog, suites=()) -> int:
    """One hinted retry (sample index k) of every train task none of whose k samples passed."""
    view = _view(contract, budget, budget.samples)
    n = 0
    for s in _suites(contract, suites):
        for t in loader.tasks(s.name, "train", per_family=budget.per_family):
            rows = [log.rows.get(unit_key(pair_id, t.suite, t.id, i)) for i in range(budget.samples)]
            key = unit_key(pair_id, t.suite, t.id, budget.samples)
            if key in log.rows or any(r is None or r["passed"] for r in rows):
                continue
            hint = hint_of(s.kind, t)
            if hint is None:
                continue
            row = run_unit(view, pair_id, t, budget.samples, Hinted(runner, hint), split="train")
            log.add({**row, "hinted": True})
            n += 1
    return n
