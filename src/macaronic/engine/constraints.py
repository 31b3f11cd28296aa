"""Grammar-constrained decoding: compiled grammars cached by content, one matcher per request.

A `GrammarSpec` is plain data: a kind (`json_schema`, `structural_tag`, `ebnf`) and its source
text. `Grammars(tokenizer, vocab_size, stop_ids)` compiles specs with xgrammar (a compiled
grammar is cached by the sha256 of its spec, least recently used dropped first) and
`Grammars.processor(spec)` returns a fresh `Constrained` for one request: the engine's
`logits_processor(generated_ids, logits)` hook, which feeds the matcher the tokens generated so
far, fills the packed bitmask and sets every disallowed logit to -inf. A grammar that has
accepted its end allows only the stop tokens, so the engine ends the request there.

Compilation is the slow part (0.01-1 s, minutes for a hostile grammar) and happens on the caller's
thread before submission, or in another process (`serialized_compile` there, `Grammars.remember`
here: a compile that can be stopped by killing that process); the engine thread only fills masks. Knows token ids and grammar text; nothing about chat
templates, tools, schemas' meaning or HTTP (callers build the grammar text).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass

import torch

KINDS = ("json_schema", "structural_tag", "ebnf")


@dataclass(frozen=True)
class GrammarSpec:
    kind: str  # one of KINDS
    source: str  # JSON schema text, structural-tag JSON text, or EBNF
    separators: tuple[str, str] = (", ", ": ")  # json_schema only: item and key separators

    @property
    def key(self) -> str:
        return hashlib.sha256(f"{self.kind}\0{self.separators}\0{self.source}".encode()).hexdigest()


class GrammarError(ValueError):
    """A grammar xgrammar cannot compile (an unsupported schema feature, bad EBNF)."""


class Grammars:
    """Compiles grammar specs for one tokenizer; thread-safe; bounded cache."""

    def __init__(self, tokenizer, vocab_size: int, stop_token_ids, max_cached: int = 64):
        import xgrammar as xgr

        self.vocab_size = vocab_size
        self.stop_token_ids = sorted(set(int(t) for t in stop_token_ids))
        self.info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab_size,
                                                       stop_token_ids=self.stop_token_ids)
        self.compiler = xgr.GrammarCompiler(self.info, cache_enabled=False)
        self._cache: OrderedDict[str, object] = OrderedDict()
        self._lock = threading.Lock()
        self.max_cached = max_cached
        self.stats = {"compiled": 0, "hits": 0}
        self._info_json: str | None = None

    def compile(self, spec: GrammarSpec):
        """The compiled grammar for `spec` (from the cache when seen before). GrammarError if invalid."""
        compiled = self.cached(spec)
        return compiled if compiled is not None else self._add(spec, _compile(self.compiler, spec))

    def cached(self, spec: GrammarSpec):
        with self._lock:
            if spec.key in self._cache:
                self._cache.move_to_end(spec.key)
                self.stats["hits"] += 1
                return self._cache[spec.key]
        return None

    @property
    def info_json(self) -> str:
        """The tokenizer info, serialized: what `serialized_compile` in another process needs."""
        if self._info_json is None:
            self._info_json = self.info.serialize_json()
        return self._info_json

    def remember(self, spec: GrammarSpec, serialized: str):
        """A grammar `serialized_compile` compiled elsewhere, loaded and cached as if compiled here."""
        import xgrammar as xgr

        return self._add(spec, xgr.CompiledGrammar.deserialize_json(serialized, self.info))

    def _add(self, spec: GrammarSpec, compiled):
        with self._lock:
            self._cache[spec.key] = compiled
            self.stats["compiled"] += 1
            while len(self._cache) > self.max_cached:
                self._cache.popitem(last=False)
        return compiled

    def processor(self, spec: GrammarSpec) -> "Constrained":
        # xgrammar's JSON string rule already excludes raw control bytes; no extra static mask
        return Constrained(self.compile(spec), self.vocab_size)


def _compile(compiler, spec: GrammarSpec):
    try:
        if spec.kind == "json_schema":
            return compiler.compile_json_schema(spec.source, any_whitespace=False, separators=spec.separators,
                                                strict_mode=True)
        if spec.kind == "structural_tag":
            return compiler.compile_structural_tag(spec.source)
        if spec.kind == "ebnf":
            return compiler.compile_grammar(spec.source)
    except Exception as e:  # xgrammar raises RuntimeError/ValueError subclasses with its reason
        raise GrammarError(str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__) from None
    raise GrammarError(f"unknown grammar kind {spec.kind!r}; expected one of {KINDS}")


_compilers: dict[str, object] = {}  # in a worker process: one compiler per tokenizer


def serialized_compile(info_json: str, spec: GrammarSpec) -> str:
    """Compile `spec` for the serialized tokenizer info and return the compiled grammar serialized
    (what a worker process runs; `Grammars.remember` loads the result)."""
    import xgrammar as xgr

    key = hashlib.sha256(info_json.encode()).hexdigest()
    if key not in _compilers:
        _compilers[key] = xgr.GrammarCompiler(xgr.TokenizerInfo.deserialize_json(info_json), cache_enabled=False)
    return _compile(_compilers[key], spec).serialize_json()


class Constrained:
    """One request's grammar state, as the engine's logits processor."""

    def __init__(self, compiled, vocab_size: int):
        import xgrammar as xgr

        self.matcher = xgr.GrammarMatcher(compiled)
        self.vocab_size = vocab_size
        self.bitmask = xgr.allocate_token_bitmask(1, vocab_size)  # bitmask: [1, W]
        self.seen = 0
        self.mask_s = 0.0  # time spent in mask work, for the benchmark

    def accept(self, generated: list[int]) -> None:
        for tok in generated[self.seen:]:
            if not self.matcher.accept_token(int(tok)):
                raise RuntimeError(f"grammar rejected token {tok} it had allowed")
        self.seen = len(generated)

    def allowed(self) -> torch.Tensor:
        """The packed mask [W] of tokens allowed next."""
        self.matcher.fill_next_token_bitmask(self.bitmask, 0)
        return self.bitmask[0]

    @property
    def terminated(self) -> bool:
        return self.matcher.is_terminated()

    def __call__(self, generated: list[int], logits: torch.Tensor) -> torch.Tensor:
        import time

        import xgrammar as xgr

        t0 = time.perf_counter()
        self.accept(generated)
        out = logits.float().clone().view(1, -1)  # out: [1, V]
        self.allowed()
        xgr.apply_token_bitmask_inplace(out, self.bitmask, vocab_size=self.vocab_size)
        self.mask_s += time.perf_counter() - t0
        return out.view(-1)
