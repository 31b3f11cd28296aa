"""What every contract command does before it evaluates: open the contract (sources and sealed
hashes checked), resolve and verify the pairs, check training data against the sealed split, and
show progress. Shared by `macaronic eval` (commands/eval.py), `macaronic eval ablate`
(commands/eval_ablate.py), `macaronic eval report-only` and `macaronic evolve`. Knows nothing
about how tasks are answered.
"""

from __future__ import annotations

from pathlib import Path

from macaronic.contract.spec import ENVIRONMENT, ContractError


class Refused(Exception):
    """A command cannot start: the message to print and the exit code."""

    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.code = code


def resolve_pair(ref: str, lineage: str | Path | None):
    """A pair manifest from a manifest JSON path, or from the lineage by id, prefix or alias."""
    from macaronic.pairs.ids import PairManifest
    from macaronic.pairs.lineage import Lineage

    if ref.endswith(".json") and Path(ref).is_file():
        return PairManifest.load(ref)
    from macaronic.pairs.lineage import default_lineage

    with Lineage(lineage or default_lineage()) as lin:
        return lin.pair(ref)


def open_for_evaluation(path: str | Path, audit, purpose: str = "evaluator", key: str | None = None):
    """(contract, split loader for `purpose`) once its sources and sealed hashes check out; raises
    ContractError. The hash check reads as `check`, so a refused contract is no sealed read;
    `key` names the measurement in the sealed-read ledger (contract/ledger.py)."""
    from macaronic.contract import spec as cspec
    from macaronic.contract.sealed import SplitLoader

    contract = cspec.parse(path)
    cspec.check_sources(contract)
    cspec.check_hashes(contract, SplitLoader(contract, "check", audit))
    return contract, SplitLoader(contract, purpose, audit, key)


def prepare(contract_path: str | Path, audit, refs: list, lineage=None, default=None, purpose: str = "evaluator",
            key: str | None = None):
    """(contract, evaluator split loader, [manifest per ref]): the contract opened, each pair
    resolved (a ref of None takes `default()`, or stays None when there is no default) and its
    files verified against their ids. Raises Refused with the reason and exit code."""
    from macaronic.pairs.lineage import LineageError

    try:
        contract, loader = open_for_evaluation(contract_path, audit, purpose, key)
    except ContractError as e:
        raise Refused(str(e), e.code) from None
    try:
        pairs = [resolve_pair(r, lineage) if r else (default() if default else None) for r in refs]
    except (LineageError, ValueError, OSError, LookupError) as e:
        raise Refused(str(e), ENVIRONMENT) from None
    problems = [p for m in pairs if m is not None for p in m.verify()]
    if problems:
        raise Refused("pair files do not match their ids:\n  " + "\n  ".join(problems), ENVIRONMENT)
    return contract, loader, pairs


def contamination_of(pair, extra_files, units) -> dict:
    """The pair's training data (its data files, each adapter's own data file where it can be had,
    `engine.adapters.recorded_data`, and any named) against every sealed test prompt of the (task,
    sample) units."""
    from macaronic.contract.sealed import contamination, texts_of_data_file
    from macaronic.engine.adapters import recorded_data

    train_files = list(pair.data) + [str(p) for p in extra_files]
    train_files += [str(f) for a in pair.adapters.values() if (f := recorded_data(a["path"])) is not None]
    train_texts = [t for f in train_files for t in texts_of_data_file(f)]
    seen = {}
    for task, _ in units:
        seen.setdefault(task.key, task.text)
    return contamination(train_texts, list(seen.items()))


class _NoBar:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False

    def add_task(self, *a, **k):
        return 0

    def advance(self, *a, **k):
        pass

    def update(self, *a, **k):
        pass


def progress(quiet: bool = False):
    if quiet:
        return _NoBar()
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=Console(stderr=True))
