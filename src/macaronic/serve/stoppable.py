"""Work that can be stopped: a few child processes that run grammar builds and compiles.

A thread cannot be stopped, and xgrammar cannot cancel a compile, so a grammar that takes minutes
would hold a core for minutes after its client was told no. `Stoppable(size)` keeps `size` spawned
workers; `call(fn, deadline, cancel)` runs the picklable `fn()` in a free one and, once the
deadline passes or `cancel` is set, kills that worker (a fresh one is started in its place) and
raises `Stopped`. A worker is started on first use, imports the `warm` modules and counts nothing
against a deadline until then. Workers run at a lower priority (nice 10), so a storm of
compiles yields the cores to the server's own work. Knows processes and pipes; nothing about grammars, HTTP or budgets.
"""

from __future__ import annotations

import multiprocessing
import threading
import time
from typing import Any, Callable


class Stopped(Exception):
    """The work passed its deadline (`timed_out`) or its caller cancelled it; its worker was killed."""

    def __init__(self, timed_out: bool):
        super().__init__("timed out" if timed_out else "cancelled")
        self.timed_out = timed_out


def _child(conn, warm: tuple[str, ...]) -> None:
    import importlib
    import os

    try:  # a compile yields the CPU to the server's own work (the engine, the router, the loop)
        os.nice(10)
    except OSError:
        pass

    for name in warm:  # imports are start-up, not work: done before the worker says it is ready
        importlib.import_module(name)
    conn.send(("ready", None))
    while True:
        try:
            fn = conn.recv()
        except EOFError:
            return
        try:
            out = ("ok", fn())
        except BaseException as e:  # noqa: BLE001 - every failure goes back to the caller
            out = ("err", e)
        try:
            conn.send(out)
        except Exception:  # an unpicklable result or exception: its text instead
            conn.send(("err", RuntimeError(f"{type(out[1]).__name__}: {out[1]}")))


class _Worker:
    def __init__(self, warm: tuple[str, ...] = ()):
        ctx = multiprocessing.get_context("spawn")  # never fork a process that holds torch threads
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_child, args=(child, warm), daemon=True, name="macaronic-grammar")
        self.proc.start()
        child.close()
        self.ready = False

    def wait_ready(self, cancel: threading.Event | None) -> None:
        while not self.ready:
            if cancel is not None and cancel.is_set():
                raise Stopped(False)
            if self.conn.poll(0.05):
                self.conn.recv()
                self.ready = True
            elif not self.proc.is_alive():
                raise RuntimeError("a grammar worker died while starting")

    def kill(self) -> None:
        self.proc.kill()
        self.proc.join(5)
        self.conn.close()


class Stoppable:
    def __init__(self, size: int = 2, warm: tuple[str, ...] = ()):
        self.size, self.warm = size, warm
        self._idle: list[_Worker] = []
        self._busy = 0
        self._cond = threading.Condition()

    def _take(self, deadline: float | None, cancel: threading.Event | None) -> _Worker | None:
        with self._cond:
            while not self._idle and self._busy >= self.size:
                if cancel is not None and cancel.is_set():
                    raise Stopped(False)
                if deadline is not None and time.monotonic() > deadline:
                    raise Stopped(True)
                self._cond.wait(0.05)
            self._busy += 1
            return self._idle.pop() if self._idle else None

    def _give(self, worker: _Worker | None) -> None:
        with self._cond:
            self._busy -= 1
            if worker is not None:
                self._idle.append(worker)
            self._cond.notify()

    def call(self, fn: Callable[[], Any], budget_s: float | None, cancel: threading.Event | None = None) -> Any:
        """`fn()` in a worker; Stopped after `budget_s` seconds of work (or once `cancel` is set)."""
        t0 = time.monotonic()
        worker = self._take(None if budget_s is None else t0 + budget_s, cancel)
        keep = None
        try:
            if worker is None or not worker.proc.is_alive():
                worker = _Worker(self.warm)
            t1 = time.monotonic()
            worker.wait_ready(cancel)  # a worker's start-up is not the request's work
            deadline = None if budget_s is None else t0 + budget_s + (time.monotonic() - t1)
            worker.conn.send(fn)
            while not worker.conn.poll(0.05):
                late = deadline is not None and time.monotonic() > deadline
                if late or (cancel is not None and cancel.is_set()) or not worker.proc.is_alive():
                    worker.kill()
                    worker = None
                    raise Stopped(late)
            status, value = worker.conn.recv()
            keep = worker
        finally:
            if worker is not None and keep is None:
                worker.kill()
            self._give(keep)
        if status == "err":
            raise value
        return value

    def close(self) -> None:
        with self._cond:
            for w in self._idle:
                w.kill()
            self._idle.clear()

