"""Evolve configuration: the budget (how much experience, screening and training per generation)
and the plan (which operators a generation's search may use, and explicit candidates). Plain
frozen data."""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from pathlib import Path


@dataclass(frozen=True)
class Budget:
    samples: int = 4  # k samples per train task when collecting experience (RFT exploration)
    temperature_pct: int = 70  # their sampling temperature x 100 (every role; 0: each role's decoding)
    per_family: int = 1  # train tasks per family per suite
    dev_per_family: int = 2  # dev tasks per family (screening, router choice on dev)
    dev_samples: int = 1  # samples per dev task when screening (the harness's own decoding)
    screen_confidence: int = 90  # the screening's paired-bootstrap interval, percent
    candidates: int = 4  # candidates per generation (3-6), before the stack
    parents: int = 2  # the champion + this many - 1 other archive members
    train_steps: int | None = None  # SFT steps per retrained specialist (None: as the champion's was)
    rft_steps: int = 12  # warm-started RFT / failure-data steps per candidate
    grpo_steps: int = 0  # GRPO steps per candidate (0: no GRPO operator)
    engine_examples: int = 64  # fresh examples of a specialist's data engine per data_engine candidate
    escalate: int = 2  # a dev-neutral training candidate is proposed again with twice its size, up to this many times
    min_successes: int = 4  # fewer graded successes for a role: no retraining
    rft_max_roles: int = 1  # retrain at most this many roles per candidate (most successes first)
    max_tokens: int | None = None  # cap on collection and dev replies (default: the contract's per suite)
    workers: int = 1  # units answered at once (threads over one engine that batches them), every phase
    dev_per_suite: tuple[tuple[str, int], ...] = ()  # (suite, dev tasks per family): overrides dev_per_family

    def dev_for(self, suite: str) -> int:
        """Dev tasks per family for `suite`: sized per suite from its unit cost, else dev_per_family."""
        return dict(self.dev_per_suite).get(suite, self.dev_per_family)

    def text(self) -> str:
        """The `--budget` text that parses back to this budget."""
        out = [f"{f.name}={'none' if getattr(self, f.name) is None else getattr(self, f.name)}"
               for f in fields(self) if f.name != "dev_per_suite"]
        return ",".join(out + [f"dev_per_family.{s}={n}" for s, n in self.dev_per_suite])

    @classmethod
    def parse(cls, text: str | None) -> "Budget":
        """'samples=2,per_family=1,train_steps=30,dev_per_family.mixed=1' -> Budget."""
        if not text:
            return cls()
        kw, per_suite = {}, {}
        names = {f.name for f in fields(cls)} - {"dev_per_suite"}
        for item in text.split(","):
            k, sep, v = item.strip().partition("=")
            suite = k.partition("dev_per_family.")[2]
            try:
                if sep and suite:
                    per_suite[suite] = int(v)
                    continue
                if not sep or k not in names:
                    raise ValueError
                kw[k] = None if v.lower() == "none" else int(v)
            except ValueError:
                raise ValueError(f"bad budget item {item!r}; known: {sorted(names)} and "
                                 f"dev_per_family.<suite>") from None
        return cls(**kw, dev_per_suite=tuple(sorted(per_suite.items())))


OPERATORS = ("prompt", "decoding", "router_refit", "rft", "failure_data", "grpo", "data_engine")
DEFAULT_OPERATORS = ("prompt", "decoding", "router_refit", "rft")


@dataclass(frozen=True)
class Plan:
    """What a generation's search may try.

    operators: the operator kinds `evolve.operators.propose` draws candidates from (failure
    clusters, experience). generations[i]: explicit candidates of generation i+1 (the last entry
    repeats), each {"operator", "steps": [step, ...], "components"?: [...], "note"?}; they come
    first, then proposed ones up to budget.candidates. A step is a name ("rft", "router_refit")
    or {"name": {options}} (see successor.py)."""

    operators: tuple[str, ...] = DEFAULT_OPERATORS
    generations: tuple[tuple, ...] = ()
    collect: tuple[str, ...] = ()  # suites to collect train experience on (empty: every gated suite)

    def candidates(self, generation: int) -> tuple[dict, ...]:
        g = self.generations
        if not g:
            return ()
        return tuple(json.loads(c) for c in g[min(generation - 1, len(g) - 1)])

    @classmethod
    def load(cls, path: str | Path | None, operators: str | None = None, collect: str | None = None) -> "Plan":
        ops = DEFAULT_OPERATORS if operators is None else tuple(o for o in operators.split(",") if o)
        col = tuple(x for x in (collect or "").split(",") if x)
        bad = [o for o in ops if o not in OPERATORS]
        if bad:
            raise ValueError(f"unknown operators {bad}; known: {list(OPERATORS)}")
        if path is None:
            return cls(ops, (), col)
        doc = json.loads(Path(path).read_text())
        gens = doc["generations"] if isinstance(doc, dict) else doc
        if isinstance(doc, dict) and "operators" in doc and operators is None:
            ops = tuple(doc["operators"])
        out = []
        for g in gens:
            cands = []
            for c in g:
                if not isinstance(c, dict) or not isinstance(c.get("steps"), list):
                    raise ValueError(f"a plan candidate is {{\"operator\", \"steps\": [...]}}, got {c!r}")
                cands.append(json.dumps({**c, "steps": [_freeze(x) for x in c["steps"]]}, sort_keys=True))
            out.append(tuple(cands))
        return cls(ops, tuple(out), col)


def _freeze(step):
    return json.dumps(step, sort_keys=True) if isinstance(step, dict) else step


def step_spec(step) -> tuple[str, dict]:
    """(name, options) of a plan step."""
    if isinstance(step, str) and step.startswith("{"):
        d = json.loads(step)
        (name, opts), = d.items()
        return name, opts
    return step, {}
