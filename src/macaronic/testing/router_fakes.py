"""Test doubles for the router: a fake backbone that hashes words to vectors.

`FakeBackbone` implements macaronic.router.types.Backbone with no model at all: a word-level
tokenizer maps each lower-cased word to a stable id (crc32), each id to a fixed random vector,
and `pooled_hidden` is the mean of those vectors (a bag of words). `next_logprobs` scores the
vocabulary against the mean of the last few context vectors, so it is deterministic and depends
on the context. Fake adapters put a chosen keyword direction in the top singular vector of
their ΔW, so Arrow-style scoring has something real to find. Nothing here is a language model.
"""

from __future__ import annotations

import re
import zlib

import torch

_WORD = re.compile(r"\w+|[^\w\s]")
N_SPECIAL = 8  # ids 0..7: pad, bos, eos, role markers


class FakeTokenizer:
    """Word-level, hash-based; enough of the HF surface for the router (encode/decode)."""

    def __init__(self, vocab_size: int = 4096):
        self.vocab_size = vocab_size
        self._words: dict[int, str] = {}

    def word_id(self, word: str) -> int:
        i = N_SPECIAL + zlib.crc32(word.lower().encode()) % (self.vocab_size - N_SPECIAL)
        self._words.setdefault(i, word.lower())
        return i

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        ids = [self.word_id(w) for w in _WORD.findall(text)]
        return ([1] if add_special_tokens else []) + ids

    def decode(self, ids: list[int]) -> str:
        return " ".join(self._words.get(i, f"<{i}>") for i in ids)

    def __len__(self) -> int:
        return self.vocab_size


class FakeAdapter:
    def __init__(self, name: str, pairs: dict):
        self.name, self.id, self.mode = name, f"fake-{name}", "full"
        self._pairs = pairs
        self.rank = next(iter(pairs.values()))[0].shape[0]
        self.targets = sorted({t for _, t in pairs})

    def lora_pairs(self) -> dict[tuple[int, str], tuple[torch.Tensor, torch.Tensor]]:
        return dict(self._pairs)


class FakeAdapters:
    def __init__(self, adapters: dict[str, FakeAdapter]):
        self._adapters = adapters

    def names(self) -> list[str]:
        return list(self._adapters)

    def get(self, name: str) -> FakeAdapter:
        return self._adapters[name]


# Keywords whose direction each fake role adapter is built around.
ROLE_KEYWORDS: dict[str, tuple[str, ...]] = {
    "chat": ("who", "what", "why", "explain", "tell", "history", "difference"),
    "agent": ("calendar", "remind", "reminder", "contacts", "note", "notes", "order", "schedule"),
    "coding": ("code", "function", "python", "write", "script", "query", "regex", "html"),
    "genui": ("card", "widget", "interactive", "chart", "form", "render", "show", "picker"),
}


class FakeBackbone:
    """Deterministic stand-in for macaronic.engine.llm.LLM (see module docstring)."""

    def __init__(self, dim: int = 64, vocab_size: int = 4096, seed: int = 0, rank: int = 4,
                 n_layers: int = 2, keywords: dict[str, tuple[str, ...]] | None = ROLE_KEYWORDS):
        self.dim, self.n_layers = dim, n_layers
        self.tokenizer = FakeTokenizer(vocab_size)
        g = torch.Generator().manual_seed(seed)
        self.embed = torch.randn(vocab_size, dim, generator=g)  # [V, D]
        self.calls = {"pooled_hidden": 0, "next_logprobs": 0}
        adapters = {}
        for name, words in (keywords or {}).items():
            direction = self.embed[[self.tokenizer.word_id(w) for w in words]].mean(0)
            direction = direction / direction.norm()
            pairs = {}
            for layer in range(n_layers):
                for target in ("q_proj", "v_proj"):
                    a = 0.05 * torch.randn(rank, dim, generator=g)
                    a[0] = 3.0 * direction  # the top right-singular vector is ~ this direction
                    b = torch.randn(dim, rank, generator=g) / rank**0.5
                    pairs[(layer, target)] = (a, b)
            adapters[name] = FakeAdapter(name, pairs)
        self.adapters = FakeAdapters(adapters)

    def encode_chat(self, messages: list[dict], add_generation_prompt: bool = True) -> list[int]:
        role_id = {"system": 2, "user": 3, "assistant": 4, "tool": 5}
        ids = [1]
        for m in messages:
            content = m.get("content") or ""
            ids += [role_id.get(m["role"], 6)] + self.tokenizer.encode(str(content)) + [7]
        if add_generation_prompt:
            ids.append(role_id["assistant"])
        return ids

    def pooled_hidden(self, batch: list[list[int]]) -> torch.Tensor:
        self.calls["pooled_hidden"] += 1
        return torch.stack([self.embed[torch.tensor(ids or [0])].mean(0) for ids in batch])  # [N, D]

    def next_logprobs(self, ids: list[int], adapter: str | None = None) -> torch.Tensor:
        self.calls["next_logprobs"] += 1
        ctx = self.embed[torch.tensor(ids[-8:] or [0])].mean(0)  # [D]
        logits = self.embed @ ctx / self.dim**0.5  # [V]
        return torch.log_softmax(logits, dim=-1)
