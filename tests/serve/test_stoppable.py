"""serve/stoppable.py: work in a worker process that is killed at its deadline or when cancelled
(a thread could only be abandoned), and a worker that is reused while it behaves."""

from __future__ import annotations

import functools
import threading
import time

import pytest

from macaronic.serve.stoppable import Stoppable, Stopped


@pytest.fixture(scope="module")
def pool():
    p = Stoppable(size=1)
    yield p
    p.close()


def test_results_errors_and_reuse(pool):
    assert pool.call(functools.partial(sum, [1, 2, 3]), 30) == 6
    first = pool._idle[0].proc.pid
    with pytest.raises(ValueError):
        pool.call(functools.partial(int, "x"), 30)
    assert pool.call(functools.partial(max, 4, 5), 30) == 5 and pool._idle[0].proc.pid == first


def test_a_deadline_kills_the_worker(pool):
    pool.call(functools.partial(abs, -1), 30)  # started and warm: the deadline counts work only
    pid = pool._idle[0].proc.pid
    t0 = time.monotonic()
    with pytest.raises(Stopped) as e:
        pool.call(functools.partial(time.sleep, 30), 0.3)
    assert e.value.timed_out and time.monotonic() - t0 < 2
    assert not pool._idle  # the killed worker is gone; the next call starts a fresh one
    assert pool.call(functools.partial(abs, -2), 30) == 2 and pool._idle[0].proc.pid != pid


def test_cancel_kills_the_worker(pool):
    cancel = threading.Event()
    threading.Timer(0.3, cancel.set).start()
    t0 = time.monotonic()
    with pytest.raises(Stopped) as e:
        pool.call(functools.partial(time.sleep, 30), None, cancel)
    assert not e.value.timed_out and time.monotonic() - t0 < 2
