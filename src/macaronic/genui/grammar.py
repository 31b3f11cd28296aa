"""Constrained decoding for the GenUI output contract with xgrammar.

`contract_schema(budget)` builds, from our pydantic models, a JSON schema for
`{"text_response": str, "a2ui": [A2UI v0.8 messages]}` tighter than the official one where a
grammar can be: each bound value is exactly one of literal/path, a component wrapper holds
exactly one known type, every data entry exactly one value. `GrammarConstraint` masks logits so a
decoder can only emit text that schema admits.

What the grammar does NOT guarantee (the validator's integrity layer checks these): unique ids,
an existing root and a beginRendering, resolvable child references, no cycles, bounded depth,
data paths that resolve, minimal-catalog restrictions, a non-empty action name. Under a budget
with bounded strings, lists and integer-only numbers the language is finite, so decoding always
terminates; the default budget leaves strings and numbers unbounded, like real cards need.
Knows nothing about models or engines: callers hand it logits and token ids.
"""

from __future__ import annotations

import json
import types
import typing
from dataclasses import dataclass, replace
from typing import Any, Callable, Literal

from macaronic.genui import models as m

SEPARATORS = (",", ":")  # compact, as the genui specialist is trained to write (train.builders.genui_reply)


@dataclass(frozen=True)
class GrammarBudget:
    max_messages: int = 8
    max_components: int = 64
    max_items: int = 16  # children, options, context, contents, tab items
    max_string: int | None = None  # None: unbounded
    max_text_response: int | None = None
    integer_numbers: bool = False  # numbers as bounded integers (finite language)
    max_abs_number: int = 999

    @classmethod
    def from_name(cls, name: str) -> "GrammarBudget":
        return replace(cls(), **BUDGETS[name])


# Presets are plain data. `tiny` keeps every output short: used by tests with random models.
BUDGETS: dict[str, dict[str, Any]] = {
    "default": {},
    "tiny": {"max_messages": 3, "max_components": 3, "max_items": 2, "max_string": 6,
             "max_text_response": 12, "integer_numbers": True},
}


def contract_schema(budget: GrammarBudget = GrammarBudget()) -> dict[str, Any]:
    """JSON schema of the GenUI output contract, for a grammar compiler."""
    message = {"anyOf": [single_key(kind, model_schema(model, budget))
                         for kind, model in m.MESSAGE_MODELS.items()]}
    return {
        "type": "object",
        "properties": {
            "text_response": string_schema(budget.max_text_response),
            "a2ui": array_schema(message, budget.max_messages, min_items=1),
        },
        "required": ["text_response", "a2ui"],
        "additionalProperties": False,
    }


def single_key(key: str, value: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": {key: value}, "required": [key], "additionalProperties": False}


def string_schema(max_len: int | None) -> dict[str, Any]:
    return {"type": "string", **({"maxLength": max_len} if max_len is not None else {})}


def array_schema(items: dict[str, Any], max_items: int, min_items: int = 0) -> dict[str, Any]:
    out = {"type": "array", "items": items, "maxItems": max_items}
    return out | ({"minItems": min_items} if min_items else {})


def model_schema(model: type, budget: GrammarBudget) -> dict[str, Any]:
    if model is m.ComponentEntry:
        return component_entry_schema(budget)
    if model is m.Children:  # exactly one of explicitList / template
        return {"anyOf": [single_key(name, field_type_schema(f.annotation, budget, name))
                          for name, f in model.model_fields.items()]}
    if issubclass(model, (m._Bound, m._OneValue)):
        return one_of_fields(model, budget)
    props, required = {}, []
    for name, f in model.model_fields.items():
        props[name] = field_type_schema(f.annotation, budget, name)
        min_len = next((x.min_length for x in f.metadata if hasattr(x, "min_length")), None)
        if min_len:  # e.g. a Button action's non-empty name
            props[name]["minLength"] = min_len
        if f.is_required():
            required.append(name)
    return {"type": "object", "properties": props, "required": required, "additionalProperties": False}


def one_of_fields(model: type, budget: GrammarBudget) -> dict[str, Any]:
    """`key` (if any) plus exactly one of the other fields: the literal-or-path and
    one-value-per-entry shapes, which the official schema leaves loose."""
    fields = dict(model.model_fields)
    key = fields.pop("key", None)
    variants = []
    for name, f in fields.items():
        props = {"key": string_schema(budget.max_string)} if key else {}
        props[name] = field_type_schema(f.annotation, budget, name)
        variants.append({"type": "object", "properties": props, "required": list(props),
                         "additionalProperties": False})
    return {"anyOf": variants}


def component_entry_schema(budget: GrammarBudget) -> dict[str, Any]:
    component = {"anyOf": [single_key(name, model_schema(model, budget))
                           for name, model in m.STANDARD_COMPONENTS.items()]}
    return {
        "type": "object",
        "properties": {"id": string_schema(budget.max_string), "component": component,
                       "weight": number_schema(budget)},
        "required": ["id", "component"],
        "additionalProperties": False,
    }


def number_schema(budget: GrammarBudget) -> dict[str, Any]:
    if budget.integer_numbers:
        return {"type": "integer", "minimum": -budget.max_abs_number, "maximum": budget.max_abs_number}
    return {"type": "number"}


def field_type_schema(annotation: Any, budget: GrammarBudget, name: str) -> dict[str, Any]:
    args = typing.get_args(annotation)
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):  # `X | None`: optional, never null
        (inner,) = [a for a in args if a is not type(None)]
        return field_type_schema(inner, budget, name)
    if origin is Literal:
        return {"type": "string", "enum": list(args)}
    if origin is list:
        limit = budget.max_components if name == "components" else budget.max_items
        return array_schema(field_type_schema(args[0], budget, name), limit,
                            min_items=1 if name == "components" else 0)
    if annotation is str:
        if name == "catalogId":
            return {"type": "string", "enum": sorted(m.CATALOGS)}
        if name == "primaryColor":
            return {"type": "string", "pattern": "^#[0-9a-fA-F]{6}$"}
        return string_schema(budget.max_string)
    if annotation is bool:
        return {"type": "boolean"}
    if annotation is int:
        return {"type": "integer", "minimum": 0, "maximum": budget.max_abs_number}
    if annotation is float:
        return number_schema(budget)
    if isinstance(annotation, type) and issubclass(annotation, m.Strict):
        return model_schema(annotation, budget)
    raise TypeError(f"no grammar for field {name!r} of type {annotation!r}")


def control_free_mask(info: Any, vocab_size: int):
    """Packed bitmask [ceil(V/32)] allowing every token except those whose bytes hold a control
    character. xgrammar's JSON string rule admits raw bytes 0x00-0x1f (only CR/LF are excluded),
    which JSON forbids; with compact separators valid output never needs them."""
    import torch

    allowed = torch.ones(vocab_size, dtype=torch.bool)  # allowed: [V]
    stops = set(info.stop_token_ids) | set(info.special_token_ids)
    for i, token in enumerate(info.decoded_vocab[:vocab_size]):
        if i not in stops and any(b < 0x20 for b in token):
            allowed[i] = False
    padded = torch.zeros(-(-vocab_size // 32) * 32, dtype=torch.int64)
    padded[:vocab_size] = allowed.long()
    bits = padded.view(-1, 32) << torch.arange(32, dtype=torch.int64)  # bits: [W, 32]
    words = bits.sum(dim=1)
    return torch.where(words >= 2**31, words - 2**32, words).to(torch.int32)  # words: [W]


class GrammarConstraint:
    """One sequence's grammar state. `tokenizer` is an HF tokenizer or an `xgrammar.TokenizerInfo`;
    `vocab_size` is the model's logits width (may exceed the tokenizer's)."""

    def __init__(self, tokenizer: Any, vocab_size: int | None = None, *,
                 budget: GrammarBudget = GrammarBudget(), schema: dict[str, Any] | None = None,
                 stop_token_ids: list[int] | None = None):
        import xgrammar as xgr

        if isinstance(tokenizer, xgr.TokenizerInfo):
            info = tokenizer
        else:
            info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab_size,
                                                      stop_token_ids=stop_token_ids)
        self.vocab_size = vocab_size or info.vocab_size
        self.schema = schema or contract_schema(budget)
        compiler = xgr.GrammarCompiler(info)
        self.compiled = compiler.compile_json_schema(json.dumps(self.schema), any_whitespace=False,
                                                     separators=SEPARATORS)
        self.matcher = xgr.GrammarMatcher(self.compiled)
        self.bitmask = xgr.allocate_token_bitmask(1, self.vocab_size)
        self.static_mask = control_free_mask(info, self.vocab_size)

    def reset(self) -> None:
        self.matcher.reset()

    def fork(self) -> "GrammarConstraint":
        """A fresh sequence state sharing the compiled grammar (compiling takes ~0.1-1 s)."""
        import copy

        import xgrammar as xgr

        other = copy.copy(self)
        other.matcher = xgr.GrammarMatcher(self.compiled)
        other.bitmask = xgr.allocate_token_bitmask(1, self.vocab_size)
        return other

    def fill_mask(self, bitmask=None, index: int = 0):
        """Fill (and return) a packed int32 bitmask of the tokens allowed next."""
        bitmask = self.bitmask if bitmask is None else bitmask
        self.matcher.fill_next_token_bitmask(bitmask, index)
        bitmask[index] &= self.static_mask
        return bitmask

    def accept_token(self, token_id: int) -> bool:
        return self.matcher.accept_token(int(token_id))

    def is_terminated(self) -> bool:
        return self.matcher.is_terminated()

    def processor(self) -> "EngineProcessor":
        """A fresh engine logits processor for one request (shares the compiled grammar)."""
        return EngineProcessor(self.fork())

    def mask_logits(self, logits):
        """A copy of `logits` ([V] or [1, V]) with disallowed tokens at -inf."""
        import xgrammar as xgr

        out = logits.clone().float()
        view = out.view(1, -1)  # view: [1, V]
        xgr.apply_token_bitmask_inplace(view, self.fill_mask().to(out.device), vocab_size=self.vocab_size)
        return out


class EngineProcessor:
    """Adapts a GrammarConstraint to the engine's `logits_processor(generated_ids, logits)` hook.

    The engine passes every generated token so far; tokens not yet seen are accepted into the
    matcher before the next mask is applied. One processor serves one request.
    """

    def __init__(self, constraint: GrammarConstraint):
        self.constraint = constraint
        self.seen = 0

    def __call__(self, generated: list[int], logits):
        for tok in generated[self.seen :]:
            if not self.constraint.accept_token(tok):
                raise RuntimeError(f"grammar rejected token {tok} it had allowed")
        self.seen = len(generated)
        return self.constraint.mask_logits(logits)


def generate_constrained(next_logits: Callable[[int | None], Any], constraint: GrammarConstraint,
                         max_new_tokens: int, *, temperature: float = 1.0, generator=None) -> list[int]:
    """Sample under the grammar until it terminates (stop token accepted) or the budget ends.
    `next_logits(last_token_or_None)` returns the next-token logits [V] of the caller's model."""
    import torch

    out: list[int] = []
    last = None
    for _ in range(max_new_tokens):
        if constraint.is_terminated():
            break
        logits = constraint.mask_logits(next_logits(last).reshape(-1))
        probs = torch.softmax(logits / max(temperature, 1e-5), dim=-1)
        last = int(torch.multinomial(probs, 1, generator=generator))
        if not constraint.accept_token(last):
            raise RuntimeError(f"grammar rejected token {last} it had allowed")
        out.append(last)
    return out
