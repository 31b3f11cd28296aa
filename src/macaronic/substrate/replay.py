"""Deterministic replay: rebuild an episode's state from its initial spec and its action log,
and run a list of gold actions to get the state hash a task expects.

Calls that returned an error are skipped: the episode guarantees they wrote nothing (their
logged pre and post hashes are equal), and their arguments may be logged only as a stub.

Knows nothing about tasks, replies or tool-call text.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from macaronic.substrate.episode import Episode, EpisodeConfig, LogEntry
from macaronic.substrate.state import StateSpec, canonical_json


class ReplayMismatch(Exception):
    """Replaying a log gave a different result or state hash than the one recorded."""


def replay(spec: StateSpec, log: Iterable[LogEntry | dict], *, actor: str | None = None,
           config: EpisodeConfig | None = None, verify: bool = True) -> Episode:
    """A fresh episode on `spec` with every logged operation applied again, in order."""
    ep = Episode(spec, actor=actor, config=config)
    entries = [e if isinstance(e, LogEntry) else LogEntry.from_dict(e) for e in log]
    if verify and entries and entries[0].pre_hash != ep.initial_hash:
        raise ReplayMismatch(f"initial state differs: log starts at {entries[0].pre_hash[:12]}, "
                             f"spec gives {ep.initial_hash[:12]}")
    for e in entries:
        if "error" in e.result:
            if verify and e.pre_hash != e.post_hash:
                raise ReplayMismatch(f"entry {e.seq}: an error entry changed the state")
            continue
        result = _apply(ep, e)
        if verify:
            _check(e, result, ep.state_hash())
    return ep


def _apply(ep: Episode, e: LogEntry) -> dict:
    if e.op == "call":
        return ep.call(e.tool, e.arguments)
    if e.op == "confirm":
        return ep.confirm(e.arguments["id"])
    if e.op == "reject":
        return ep.reject(e.arguments["id"])
    if e.op == "snapshot":
        return ep.snapshot()
    if e.op == "undo":
        return ep.undo()
    raise ReplayMismatch(f"entry {e.seq}: unknown op {e.op!r}")


def _check(e: LogEntry, result: dict, post_hash: str) -> None:
    if canonical_json(result) != canonical_json(e.result):
        raise ReplayMismatch(f"entry {e.seq} ({e.op} {e.tool}): result differs on replay")
    if post_hash != e.post_hash:
        raise ReplayMismatch(f"entry {e.seq} ({e.op} {e.tool}): state hash differs on replay")


def run_actions(spec: StateSpec, actions: Sequence[tuple[str, dict]], *, actor: str | None = None,
                strict: bool = True) -> Episode:
    """Apply (tool, arguments) pairs with no confirmation step; strict: an error is a bug."""
    ep = Episode(spec, actor=actor)
    for tool, args in actions:
        result = ep.call(tool, args)
        if strict and "error" in result:
            raise ValueError(f"gold action {tool}({args}) failed: {result['error']['message']}")
    return ep


def expected_hash(spec: StateSpec, actions: Sequence[tuple[str, dict]], *, actor: str | None = None) -> str:
    ep = run_actions(spec, actions, actor=actor)
    try:
        return ep.state_hash()
    finally:
        ep.close()
