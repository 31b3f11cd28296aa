"""Evolve configuration: the budget (how much experience and training per generation) and the
plan (which successor-building steps each generation tries). Plain frozen data."""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from pathlib import Path


@dataclass(frozen=True)
class Budget:
    samples: int = 2  # k samples per train task when collecting experience
    per_family: int = 2  # train tasks per family per suite
    dev_per_family: int = 2  # dev tasks per family (router choice on dev)
    train_steps: int | None = None  # SFT steps per retrained specialist (None: as the champion's was)
    min_successes: int = 4  # fewer graded successes for a role: no retraining
    rft_max_roles: int = 1  # retrain at most this many roles per generation (most successes first)
    max_tokens: int | None = None  # cap on collection replies (default: the contract's per suite)

    @classmethod
    def parse(cls, text: str | None) -> "Budget":
        """'samples=2,per_family=1,train_steps=30' -> Budget."""
        if not text:
            return cls()
        kw = {}
        names = {f.name: f for f in fields(cls)}
        for item in text.split(","):
            k, sep, v = item.strip().partition("=")
            if not sep or k not in names:
                raise ValueError(f"bad budget item {item!r}; known: {sorted(names)}")
            kw[k] = None if v.lower() == "none" else int(v)
        return cls(**kw)


DEFAULT_STEPS = ("rft", "router_refit")


@dataclass(frozen=True)
class Plan:
    """generations[i] = the steps of generation i+1; the last entry repeats for later ones.

    A step is a name ("rft", "router_refit") or {"harness_edit": {...}} (see successor.py)."""

    generations: tuple[tuple, ...] = (DEFAULT_STEPS,)

    def steps(self, generation: int) -> tuple:
        g = self.generations
        return tuple(g[min(generation - 1, len(g) - 1)])

    @classmethod
    def load(cls, path: str | Path | None) -> "Plan":
        if path is None:
            return cls()
        doc = json.loads(Path(path).read_text())
        gens = doc["generations"] if isinstance(doc, dict) else doc
        return cls(tuple(tuple(_freeze(s) for s in g) for g in gens))


def _freeze(step):
    return json.dumps(step, sort_keys=True) if isinstance(step, dict) else step


def step_spec(step) -> tuple[str, dict]:
    """(name, options) of a plan step."""
    if isinstance(step, str) and step.startswith("{"):
        d = json.loads(step)
        (name, opts), = d.items()
        return name, opts
    return step, {}
