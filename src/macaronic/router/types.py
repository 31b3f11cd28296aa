"""Router value types and the backbone protocol the router codes against.

The router never imports the engine: anything with this shape (the engine's LLM, the test
double in macaronic.testing.router_fakes, a tiny random model) can back it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import torch


class AdapterLike(Protocol):
    name: str

    def lora_pairs(self) -> dict[tuple[int, str], tuple[torch.Tensor, torch.Tensor]]: ...


class AdapterRegistry(Protocol):
    """`names()` and `get(name)`; LoRA weights come from `lora_pairs(name)` on the registry (the
    engine's form) or from `get(name).lora_pairs()` (the brief's form). See `adapter_pairs`."""

    def names(self) -> list[str]: ...

    def get(self, name: str) -> Any: ...


def adapter_pairs(backbone: "Backbone", name: str) -> dict[tuple[int, str], tuple[torch.Tensor, torch.Tensor]]:
    """{(layer, target): (A [r, d_in], B [d_out, r] with scaling folded in)} for one adapter."""
    reg = backbone.adapters
    if hasattr(reg, "lora_pairs"):
        return reg.lora_pairs(name)
    return reg.get(name).lora_pairs()


@runtime_checkable
class Backbone(Protocol):
    tokenizer: Any  # a Hugging Face tokenizer; the router only calls .encode(text, add_special_tokens=False)
    adapters: AdapterRegistry

    def encode_chat(self, messages: list[dict], add_generation_prompt: bool = True) -> list[int]: ...

    def pooled_hidden(self, batch: list[list[int]]) -> torch.Tensor:
        """[N, D] float32: mean over tokens of the final-norm hidden state of the bare base."""
        ...

    def next_logprobs(self, ids: list[int], adapter: str | None = None) -> torch.Tensor:
        """[V] log-softmax at the last position."""
        ...


@dataclass(frozen=True)
class AdapterInfo:
    """What the router knows about a route: a name, a description and boundary rules."""

    name: str
    description: str = ""
    boundary: tuple[str, ...] = ()

    @classmethod
    def from_bundle(cls, bundle) -> list["AdapterInfo"]:
        return [cls(r.name, r.description, r.boundary) for r in bundle.roles]


@dataclass(frozen=True)
class RouteDecision:
    role: str  # the specialist role chosen (the serving layer maps it to an adapter)
    probs: dict[str, float]
    confidence: float
    policy: str  # the policy that produced probs: "probe", "prompted", ..., or "sticky"
    ms: float
    reason: str  # "scored", "sticky-tool", "low-confidence-default", "hysteresis", "cascade-fallback"

    def to_json(self) -> dict:
        return {"role": self.role, "confidence": round(self.confidence, 6),
                "probs": {k: round(v, 6) for k, v in self.probs.items()}, "policy": self.policy,
                "ms": round(self.ms, 3), "reason": self.reason}
