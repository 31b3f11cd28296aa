"""The served pair, and following the lineage's champion while serving (`macaronic serve --follow`).

`Served` holds the MoL that answers new requests. A request reads it once, when it starts, so a
turn in flight finishes on the pair it began with while the next turn starts on the new one: the
swap is one attribute assignment, between turns, with no restart and no request refused.

`Follower` polls the lineage's `champion` alias on its own thread; when the alias names a pair
other than the served one, `build(manifest)` (the caller's: the pair's adapters registered in the
running engine beside the old ones, its harness bundle, its router) makes the new MoL on that
thread, and it is swapped in. A pair that cannot be built (another base, a missing file, an id that
does not match its parts) is logged once and the served pair stays. `macaronic pair rollback` moves
the alias back, and the follower follows it like any move.

`ScopedBackend` shows one pair's adapters under their public names (the role) over an engine that
holds several pairs' adapters under names of their own. Knows the lineage's alias and the MoL;
nothing about HTTP.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import replace
from pathlib import Path
from typing import Callable

log = logging.getLogger("macaronic.serve")


class Served:
    """The MoL that answers the next request."""

    def __init__(self, mol):
        self.mol = mol
        self.history: list[str] = [mol.pair_id]  # pair ids served, in order

    def swap(self, mol) -> None:
        self.mol = mol  # atomic: a request holds the MoL it read; the next one reads this
        self.history.append(mol.pair_id)


class ScopedBackend:
    """A backend that lists and runs only one pair's adapters: `names` maps the public name a MoL
    uses to the engine's name for that adapter. Everything else is the shared backend's."""

    def __init__(self, inner, names: dict[str, str]):
        self.inner, self.names = inner, dict(names)

    def __getattr__(self, attr):
        return getattr(self.inner, attr)

    def adapters(self):
        have = self.inner.adapters()
        return {pub: replace(have[eng], name=pub) for pub, eng in self.names.items() if eng in have}

    def _engine_name(self, adapter: str | None) -> str | None:
        return None if adapter is None else self.names.get(adapter, adapter)

    def stream(self, messages, adapter, sampling, **kw):
        return self.inner.stream(messages, self._engine_name(adapter), sampling, **kw)

    async def sample_n(self, messages, adapter, samplings, **kw):
        return await self.inner.sample_n(messages, self._engine_name(adapter), samplings, **kw)


class Follower:
    """Polls `lineage`'s champion every `interval_s` and swaps `served` to it (see the module doc)."""

    def __init__(self, served: Served, lineage: str | Path, build: Callable, interval_s: float = 2.0,
                 alias: str = "champion"):
        self.served, self.lineage, self.build = served, Path(lineage), build
        self.interval_s, self.alias = interval_s, alias
        self._stop = threading.Event()
        self._failed: set[str] = set()  # pairs that could not be built: logged once, not retried
        self._built: dict[str, object] = {}  # pair id -> MoL: a rollback reuses the one built before
        self._thread = threading.Thread(target=self._run, name="macaronic-follow", daemon=True)

    def start(self) -> "Follower":
        self._built[self.served.mol.pair_id] = self.served.mol
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def check(self) -> str | None:
        """One poll: the pair id swapped in, or None."""
        from macaronic.pairs.lineage import Lineage, LineageError

        if not self.lineage.exists():
            return None
        with Lineage(self.lineage) as lin:
            pid = lin.alias(self.alias)
            if pid is None or pid == self.served.mol.pair_id or pid in self._failed:
                return None
            try:
                manifest = lin.pair(pid)
            except LineageError as e:
                self._fail(pid, e)
                return None
        mol = self._built.get(pid)
        if mol is None:
            try:
                mol = self.build(manifest)
            except Exception as e:  # a pair that cannot be served must not take the server down
                self._fail(pid, e)
                return None
            self._built[pid] = mol
        old = self.served.mol.pair_id
        self.served.swap(mol)
        log.warning("follow: now serving pair %s (%s was %s)", pid[:16], self.alias, old[:16])
        print(f"macaronic serve: now serving pair {pid[:16]} (the lineage's {self.alias}; was {old[:16]})",
              flush=True)
        return pid

    def _fail(self, pid: str, e: Exception) -> None:
        self._failed.add(pid)
        log.error("follow: cannot serve pair %s: %s; still serving %s", pid[:16], e, self.served.mol.pair_id[:16])

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.check()
            except Exception:  # a locked or damaged lineage: try again next time
                log.exception("follow: reading %s failed", self.lineage)
