"""The evaluator's moving parts: plan the units of a sealed test run, run them one by one with
an Answerer, and keep their results in an append-only JSONL that survives `kill -9`.

A unit is (pair, suite, task, sample). Each finished unit is one JSON line, flushed and fsynced
before the next starts; on restart the log is read back, a torn last line (a kill mid-write) is
cut off, and finished units are skipped. The report itself is contract.report.build_report
(pure). This module prints nothing.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

from macaronic.contract.suites import KINDS, sample_seed


def plan(contract, loader) -> list[tuple]:
    """[(Task, sample index)] for the sealed test split of every suite, in a fixed order."""
    out = []
    for s in contract.suites:
        for t in loader.tasks(s.name, "test"):
            out += [(t, i) for i in range(s.k)]
    return out


def unit_key(pair_id: str, suite: str, task: str, sample: int) -> str:
    return f"{pair_id}|{suite}|{task}|{sample}"


def row_key(r: dict) -> str:
    return unit_key(r["pair"], r["suite"], r["task"], r["sample"])


def run_units(contract, pair_id: str, units: list[tuple], answerer, done: set[str],
              split: str = "test", workers: int = 1) -> Iterator[dict]:
    """Yield one result row per unit not in `done`, as each finishes. `workers` > 1: that many
    units at once, in threads over the answerer's one engine, which batches their decode steps
    (a row is the same unit either way; batching adds float noise, not another prompt or seed)."""
    todo = [(t, s) for t, s in units if unit_key(pair_id, t.suite, t.id, s) not in done]
    if workers <= 1 or len(todo) <= 1:
        for task, sample in todo:
            yield run_unit(contract, pair_id, task, sample, answerer, split)
        return
    from concurrent.futures import ThreadPoolExecutor, as_completed

    with ThreadPoolExecutor(min(workers, len(todo))) as ex:
        futures = [ex.submit(run_unit, contract, pair_id, t, s, answerer, split) for t, s in todo]
        try:
            for f in as_completed(futures):
                yield f.result()
        finally:
            for f in futures:
                f.cancel()  # a consumer that stops early (or an error) starts nothing new


def run_unit(contract, pair_id: str, task, sample: int, answerer, split: str = "test") -> dict:
    """Run and grade one unit; the result row."""
    spec = contract.suite(task.suite)
    t0 = time.perf_counter()
    out = KINDS[spec.kind].run(spec, task, answerer, sample_seed(spec.seed, task.key, sample))
    return {"contract_sha256": contract.sha256, "pair": pair_id, "suite": task.suite, "task": task.id,
            "family": task.family, "split": split, "sample": sample, "score": out["score"],
            "passed": out["passed"], "tokens": out["tokens"],
            "seconds": round(time.perf_counter() - t0, 4), "detail": out["detail"],
            "messages": out["messages"]}


class ResultLog:
    """Append-only JSONL of result rows, keyed by unit; safe to reopen after a hard kill."""

    def __init__(self, path: str | Path, contract_sha256: str | None = None):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.contract_sha256 = contract_sha256
        self.rows: dict[str, dict] = {}
        if self.path.exists():
            data = self.path.read_bytes()
            cut = data.rfind(b"\n") + 1
            if cut != len(data):  # a kill mid-write left a partial last row: drop only that
                with open(self.path, "r+b") as f:
                    f.truncate(cut)
            for line in data[:cut].decode().splitlines():
                if line.strip():
                    r = json.loads(line)
                    if contract_sha256 is None or r.get("contract_sha256") == contract_sha256:
                        self.rows.setdefault(row_key(r), r)
        self._f = open(self.path, "a")

    def add(self, row: dict) -> bool:
        """Append a row unless its unit is already there; returns whether it was written."""
        k = row_key(row)
        if k in self.rows:
            return False
        self._f.write(json.dumps(row, sort_keys=True, ensure_ascii=False) + "\n")
        self._f.flush()
        os.fsync(self._f.fileno())
        self.rows[k] = row
        return True

    def for_pair(self, pair_id: str) -> list[dict]:
        return [r for r in self.rows.values() if r["pair"] == pair_id]

    def keys(self) -> set[str]:
        return set(self.rows)

    def close(self) -> None:
        self._f.close()


def read_rows(path: str | Path, contract_sha256: str | None = None) -> list[dict]:
    p = Path(path)
    if not p.exists():
        return []
    out = []
    for line in p.read_text().splitlines():
        try:
            r = json.loads(line)
        except ValueError:
            continue  # a torn last line
        if contract_sha256 is None or r.get("contract_sha256") == contract_sha256:
            out.append(r)
    return out


def write_json_atomic(path: str | Path, obj) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(obj, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)
