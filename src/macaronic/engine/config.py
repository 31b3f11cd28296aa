"""Model shape and family, read from a Hugging Face `config.json`.

Knows the three decoder families the engine runs (Llama, Qwen2, Qwen3) and how their configs
spell things, and where the cache root is (`home`). Knows nothing about weights, adapters or tokenizers.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, fields
from pathlib import Path


def home() -> Path:
    """Macaronic's cache root: imported bases, native kernels, serving state (`MACARONIC_HOME`)."""
    return Path(os.environ.get("MACARONIC_HOME") or Path.home() / ".cache" / "macaronic")

FAMILIES = {"llama": "llama", "qwen2": "qwen2", "qwen3": "qwen3"}

# LoRA targets by their Hugging Face module names, in the order the engine applies them.
TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
# The model's fused projections and the LoRA targets inside each, in output-column order: one LoRA
# call per fused projection (targets sharing an input share one matmul).
FUSED = {"qkv": ("q_proj", "k_proj", "v_proj"), "o": ("o_proj",), "gate_up": ("gate_proj", "up_proj"),
         "down": ("down_proj",)}
FUSED_OF = {t: f for f, ts in FUSED.items() for t in ts}


@dataclass(frozen=True)
class ModelArgs:
    family: str = "llama"
    vocab_size: int = 49152
    dim: int = 576
    n_layers: int = 30
    n_heads: int = 9
    n_kv_heads: int = 3
    head_dim: int = 64
    intermediate_size: int = 1536
    norm_eps: float = 1e-5
    rope_theta: float = 100000.0
    max_seq_len: int = 8192
    tie_embeddings: bool = True
    qkv_bias: bool = False  # Qwen2
    qk_norm: bool = False  # Qwen3
    bos_token_id: int | None = None
    eos_token_ids: tuple[int, ...] = ()

    @classmethod
    def from_hf_config(cls, cfg: dict) -> "ModelArgs":
        family = FAMILIES.get(cfg.get("model_type", ""))
        if family is None:
            raise ValueError(
                f"unsupported model_type {cfg.get('model_type')!r}; supported: {sorted(FAMILIES)}"
            )
        rope = cfg.get("rope_parameters") or cfg.get("rope_scaling") or {}
        rope_type = rope.get("rope_type", rope.get("type", "default"))
        if rope_type not in ("default", None):
            raise ValueError(f"unsupported rope_type {rope_type!r} (only default RoPE is implemented)")
        theta = rope.get("rope_theta", cfg.get("rope_theta", 10000.0))
        n_heads = cfg["num_attention_heads"]
        eos = cfg.get("eos_token_id")
        eos_ids = tuple(eos) if isinstance(eos, list) else ((eos,) if eos is not None else ())
        return cls(
            family=family,
            vocab_size=cfg["vocab_size"],
            dim=cfg["hidden_size"],
            n_layers=cfg["num_hidden_layers"],
            n_heads=n_heads,
            n_kv_heads=cfg.get("num_key_value_heads") or n_heads,
            head_dim=cfg.get("head_dim") or cfg["hidden_size"] // n_heads,
            intermediate_size=cfg["intermediate_size"],
            norm_eps=cfg.get("rms_norm_eps", 1e-6),
            rope_theta=float(theta),
            max_seq_len=cfg.get("max_position_embeddings", 4096),
            tie_embeddings=bool(cfg.get("tie_word_embeddings", False)),
            qkv_bias=family == "qwen2" or bool(cfg.get("attention_bias", False)),
            qk_norm=family == "qwen3",
            bos_token_id=cfg.get("bos_token_id"),
            eos_token_ids=eos_ids,
        )

    @classmethod
    def from_dir(cls, path: str | Path) -> "ModelArgs":
        return cls.from_hf_config(json.loads((Path(path) / "config.json").read_text()))

    def target_shape(self, target: str) -> tuple[int, int]:
        """(d_in, d_out) of a LoRA target projection."""
        q, kv = self.n_heads * self.head_dim, self.n_kv_heads * self.head_dim
        return {
            "q_proj": (self.dim, q),
            "k_proj": (self.dim, kv),
            "v_proj": (self.dim, kv),
            "o_proj": (q, self.dim),
            "gate_proj": (self.dim, self.intermediate_size),
            "up_proj": (self.dim, self.intermediate_size),
            "down_proj": (self.intermediate_size, self.dim),
        }[target]

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}
