"""Units answered at once (`run_units(..., workers=N)`): the same rows as one by one, every unit
once, and a stop that starts nothing new. The answerer is a test double (no model): what it says
depends only on the prompt and the seed, as the engine's replies do."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from macaronic.contract import spec as cspec
from macaronic.contract.evaluate import run_units
from macaronic.contract.sealed import SplitLoader
from macaronic.contract.suites import Reply

V5 = Path(__file__).resolve().parents[2] / "contracts" / "macaronic-core-v5.yaml"


class Echo:
    """Coding replies: a right answer for even seeds, a wrong one for odd; counts threads in flight."""

    def __init__(self, pause: float = 0.02):
        self.lock, self.now, self.most, self.calls = threading.Lock(), 0, 0, 0
        self.pause = pause

    def reply(self, messages, role, *, seed, max_tokens, tools=None):
        with self.lock:
            self.calls += 1
            self.now += 1
            self.most = max(self.most, self.now)
        time.sleep(self.pause)
        with self.lock:
            self.now -= 1
        return Reply(text="```python\ndef f(x):\n    return x\n```" if seed % 2 else "no code", role=role or "coding")


def test_workers_give_the_same_rows_as_one_by_one(tmp_path):
    contract = cspec.parse(V5)
    tasks = SplitLoader(contract, "trainer", tmp_path / "audit.jsonl").tasks("coding", "dev", per_family=3)
    units = [(t, i) for t in tasks for i in range(2)]
    seq = list(run_units(contract, "p", units, Echo(), set(), split="dev"))
    par_answerer = Echo()
    par = list(run_units(contract, "p", units, par_answerer, set(), split="dev", workers=4))

    def key(rows):
        return sorted((r["task"], r["sample"], r["score"], r["messages"][-1]["content"]) for r in rows)

    assert key(par) == key(seq) and len(par) == len(units)
    assert par_answerer.most > 1  # they did run at once
    done = {f"p|coding|{tasks[0].id}|0"}
    assert len(list(run_units(contract, "p", units, Echo(), done, split="dev", workers=4))) == len(units) - 1


def test_a_consumer_that_stops_early_starts_nothing_new(tmp_path):
    contract = cspec.parse(V5)
    tasks = SplitLoader(contract, "trainer", tmp_path / "audit.jsonl").tasks("coding", "dev", per_family=6)
    units = [(t, 0) for t in tasks]
    # Each reply takes 0.25 s. How many units start before close() depends on how long the consumer
    # takes to get there (on an idle box 3; a loaded one started a fourth at 0.02 s a reply); what
    # cannot depend on timing is that nothing starts after it, and that the queue did not run out.
    calls = Echo(pause=0.25)
    gen = run_units(contract, "p", units, calls, set(), split="dev", workers=2)
    next(gen)
    gen.close()  # the consumer stops: queued units are cancelled, running ones finish
    n = calls.calls
    assert len(units) == 18 and 1 <= n < len(units)
    time.sleep(0.3)
    assert calls.calls == n  # nothing starts after close
