"""Conversation prefix cache keyed by (token, adapter label) per position.

A token's K/V depends on the tokens before it and on the adapter active at each of those
positions. So the cache stores, per entry, the token ids and one label per token (the id of the
adapter that computed it, "" for the bare base) and reuses the longest prefix whose tokens *and*
labels match. A `full`-mode adapter labels every token, which gives the per-adapter rule (vLLM);
a `turn`-mode adapter labels only its own turn, so history computed under any adapter is reused.
Positions marked ADOPT accept whatever label the cache holds (the history of a turn request).
Memory is bounded in bytes with LRU eviction. Knows nothing about models or scheduling.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from macaronic.engine.kvpool import KVBuffer

ADOPT = -1  # label wildcard for history positions
BASE = 0


@dataclass
class Entry:
    tokens: np.ndarray  # [T] int64
    labels: np.ndarray  # [T] int64 label codes
    kv: KVBuffer  # kv.length == T

    @property
    def nbytes(self) -> int:
        return self.kv.nbytes()


@dataclass
class Match:
    entry: Entry | None
    length: int  # positions whose K/V can be copied
    labels: np.ndarray  # resolved labels for the whole request (ADOPT replaced)


class PrefixCache:
    def __init__(self, max_bytes: int = 1 << 30, enabled: bool = True):
        self.max_bytes, self.enabled = max_bytes, enabled
        self._entries: OrderedDict[int, Entry] = OrderedDict()
        self._codes: dict[str, int] = {"": BASE}
        self._next_key = 0
        self._bytes = 0
        self._lock = threading.Lock()

    def code(self, label: str | None) -> int:
        label = label or ""
        with self._lock:
            if label not in self._codes:
                self._codes[label] = len(self._codes)
            return self._codes[label]

    @property
    def nbytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0

    def lookup(self, tokens: np.ndarray, labels: np.ndarray) -> Match:
        """Longest reusable prefix; ADOPT positions take the matched entry's labels, else BASE."""
        best, best_len = None, 0
        if self.enabled:
            with self._lock:
                for key, e in self._entries.items():
                    n = min(len(e.tokens), len(tokens))
                    if n <= best_len:
                        continue
                    ok = (e.tokens[:n] == tokens[:n]) & ((labels[:n] == ADOPT) | (labels[:n] == e.labels[:n]))
                    m = n if ok.all() else int(np.argmin(ok))
                    if m > best_len:
                        best, best_len, best_key = e, m, key
                if best is not None:
                    self._entries.move_to_end(best_key)
        resolved = labels.copy()
        if best is not None:
            head = resolved[:best_len]
            resolved[:best_len] = np.where(head == ADOPT, best.labels[:best_len], head)
        resolved[resolved == ADOPT] = BASE
        return Match(entry=best, length=best_len, labels=resolved)

    def insert(self, tokens: np.ndarray, labels: np.ndarray, kv: KVBuffer) -> None:
        if not self.enabled or len(tokens) == 0 or kv.nbytes() > self.max_bytes:
            return
        assert kv.length == len(tokens) == len(labels)
        entry = Entry(tokens=tokens.copy(), labels=labels.copy(), kv=kv)
        with self._lock:
            # An entry that is a prefix of the new one (same tokens and labels) is superseded.
            for key, e in list(self._entries.items()):
                n = len(e.tokens)
                if n <= len(tokens) and (e.tokens == tokens[:n]).all() and (e.labels == labels[:n]).all():
                    self._bytes -= e.nbytes
                    del self._entries[key]
            self._entries[self._next_key] = entry
            self._next_key += 1
            self._bytes += entry.nbytes
            while self._bytes > self.max_bytes and self._entries:
                _, old = self._entries.popitem(last=False)
                self._bytes -= old.nbytes
