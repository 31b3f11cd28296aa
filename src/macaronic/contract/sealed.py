"""The split loader: the only way to get a contract's tasks, with the test split sealed.

Every call is audited (one JSON line: time, pid, purpose, read key, contract sha256, suite, split,
allowed, n) before anything is returned; a loader's first scoring read of the test split also goes
to the cross-run ledger (contract/ledger.py). The test split is refused to the `trainer` and the `collector`
(the experience gatherer), and the refusal is audited too. The contamination check compares
training texts with the sealed test prompts: exact containment of a normalized test prompt and
any shared 13-word window. Knows nothing about models.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from pathlib import Path

PURPOSES = ("gate", "reference", "evaluator", "trainer", "collector", "check", "strata")
SEALED_FROM = ("trainer", "collector")


class SealedSplitError(PermissionError):
    pass


def default_audit_path() -> Path:
    from macaronic.engine.base import home

    return Path(os.environ.get("MACARONIC_AUDIT", home() / "audit" / "splits.jsonl"))


class SplitLoader:
    def __init__(self, contract, purpose: str, audit_path: str | Path | None = None, key: str | None = None,
                 ledger: str | Path | None = None):
        """`key` names the measurement (the report it writes): a resumed evaluation is the same read."""
        import uuid

        if purpose not in PURPOSES:
            raise ValueError(f"purpose must be one of {PURPOSES}, got {purpose!r}")
        self.contract, self.purpose = contract, purpose
        self.audit_path = Path(audit_path) if audit_path else default_audit_path()
        self.key = key or f"pid:{os.getpid()}:{uuid.uuid4().hex[:12]}"
        self.ledger, self._logged = ledger, False

    def _audit(self, suite: str, split: str, allowed: bool, n: int | None) -> None:
        self.audit_path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps({"time": time.time(), "pid": os.getpid(), "purpose": self.purpose,
                           "contract": self.contract.id, "contract_sha256": self.contract.sha256, "key": self.key,
                           "suite": suite, "split": split, "allowed": allowed, "n": n}, sort_keys=True)
        with open(self.audit_path, "a") as f:  # O_APPEND: concurrent processes do not interleave lines
            f.write(line + "\n")

    def tasks(self, suite: str, split: str, per_family: int | None = None) -> list:
        """A split's tasks; `per_family` overrides the contract's count (train/dev sampling)."""
        from dataclasses import replace

        from macaronic.contract.suites import KINDS

        if split == "test" and self.purpose in SEALED_FROM:
            self._audit(suite, split, False, None)
            raise SealedSplitError(f"the test split of {self.contract.id} is sealed: "
                                   f"the {self.purpose} may not read suite {suite!r}")
        spec = self.contract.suite(suite)
        if per_family is not None:
            if split == "test":
                raise ValueError("the test split is always read at the contract's own size")
            spec = replace(spec, per_family=per_family)
        out = held_out_split(spec, split) if spec.dev_families and split in ("train", "dev") \
            else KINDS[spec.kind].tasks(spec, split)
        self._audit(suite, split, True, len(out))
        if split == "test" and not self._logged:
            from macaronic.contract import ledger

            if self.purpose in ledger.MEASURING:
                ledger.append(self.contract, self.purpose, self.key, self.audit_path, self.ledger)
            self._logged = True
        return out


def held_out_split(spec, split: str) -> list:
    """Train and dev of a suite whose dev split is whole held-out families (`dev_families`): dev is
    every non-test instance of those families, train the generator's train split without them."""
    from macaronic.contract.suites import KINDS

    kind = KINDS[spec.kind]
    if split == "train":
        return [t for t in kind.tasks(spec, "train") if t.family not in spec.dev_families]
    every = kind.tasks(spec, None)
    test = {t.family for t in every if t.split == "test"}
    bad = sorted(set(spec.dev_families) & test)
    missing = sorted(set(spec.dev_families) - {t.family for t in every})
    if bad or missing:
        raise ValueError(f"suite {spec.name}: dev_families {bad or missing} "
                         + ("are test families" if bad else "are not families of this suite"))
    return [t for t in every if t.family in spec.dev_families and t.split != "test"]


def manifest(tasks: list) -> dict:
    """{n, sha256} over the sorted (task id, content sha256) pairs of a split."""
    h = hashlib.sha256()
    for tid, content in sorted((t.id, t.content) for t in tasks):
        h.update(f"{tid}\0{hashlib.sha256(content.encode()).hexdigest()}\n".encode())
    return {"n": len(tasks), "sha256": h.hexdigest()}


def read_audit(path: str | Path) -> list[dict]:
    p = Path(path)
    return [json.loads(l) for l in p.read_text().splitlines() if l.strip()] if p.is_file() else []


# ---- contamination -----------------------------------------------------------------------

def words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def ngrams(text: str, n: int = 13) -> set[tuple[str, ...]]:
    w = words(text)
    return {tuple(w[i:i + n]) for i in range(len(w) - n + 1)}


def contamination(train_texts: list[str], test: list[tuple[str, str]], n: int = 13) -> dict:
    """Test items (key, prompt) found in training texts: exactly (normalized prompt contained in a
    training text) or by a shared n-word window. Returns {"exact": [keys], "ngram": [keys], "clean"}."""
    norm_train = [" ".join(words(t)) for t in train_texts]
    train_grams: set = set()
    for t in train_texts:
        train_grams |= ngrams(t, n)
    exact, overlap = [], []
    for key, text in test:
        norm = " ".join(words(text))
        if norm and any(norm in t for t in norm_train):
            exact.append(key)
        elif ngrams(text, n) & train_grams:
            overlap.append(key)
    return {"exact": exact, "ngram": overlap, "clean": not exact and not overlap, "n": n,
            "train_texts": len(train_texts), "test_items": len(test)}


class HeldOut:
    """Held-out texts (key, text) indexed for the other direction of `contamination`: does a short
    candidate text (a served request) overlap one? It does when a held text is contained in it, when
    it (at least `min_words` words) is contained in a held text, or when they share an n-word window."""

    def __init__(self, items: list[tuple[str, str]], n: int = 8, min_words: int = 5):
        self.n, self.min_words = n, min_words
        self.norm = [(k, " ".join(words(t))) for k, t in items]
        self.norm = [(k, t) for k, t in self.norm if t]
        self.grams: dict[tuple[str, ...], str] = {}
        for k, t in items:
            for g in ngrams(t, n):
                self.grams.setdefault(g, k)

    def overlap(self, *texts: str) -> list[str]:
        """Keys of the held texts any of `texts` overlaps (empty: disjoint)."""
        hits = []
        for text in texts:
            w = words(text)
            norm = " ".join(w)
            if not norm:
                continue
            padded = f" {norm} "
            for k, h in self.norm:
                if f" {h} " in padded or (len(w) >= self.min_words and padded in f" {h} "):
                    hits.append(k)
            hits += [self.grams[g] for g in ngrams(text, self.n) if g in self.grams]
        return sorted(set(hits))


def texts_of_data_file(path: str | Path) -> list[str]:
    """Every string in a JSONL training file (messages, prompts, completions)."""
    out: list[str] = []

    def walk(v):
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    for line in Path(path).read_text().splitlines():
        if line.strip():
            walk(json.loads(line))
    return out
