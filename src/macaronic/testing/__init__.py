"""Test doubles shipped with the package: a tiny tokenizer, tiny random models, random adapters.

Everything here is built offline from code, deterministic for a seed, and small enough to run in
unit tests on a 2-core CPU. Nothing here is used by the serving path.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import torch

CHATML = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + "
    "'<|im_end|>' + '\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def tiny_tokenizer():
    """A byte-level tokenizer (3 specials + 256 bytes + a few merges) with a ChatML template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    byte_chars = pre_tokenizers.ByteLevel.alphabet()
    vocab = {t: i for i, t in enumerate(SPECIALS)}
    for ch in sorted(byte_chars):
        vocab[ch] = len(vocab)
    merges = [("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("i", "n"), ("e", "r"), ("a", "n"), ("o", "n")]
    for a, b in merges:
        vocab.setdefault(a + b, len(vocab))
    tk = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=tk, bos_token="<|im_start|>", eos_token="<|im_end|>", pad_token="<|endoftext|>",
        unk_token="<|endoftext|>", additional_special_tokens=SPECIALS,
    )
    tok.chat_template = CHATML
    return tok


def tiny_hf_config(family: str = "llama", vocab_size: int = 320, **over):
    from transformers import LlamaConfig, Qwen2Config, Qwen3Config

    common = dict(
        vocab_size=vocab_size, hidden_size=64, intermediate_size=128, num_hidden_layers=3,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
        rms_norm_eps=1e-5, tie_word_embeddings=family != "qwen2", bos_token_id=1, eos_token_id=2,
        pad_token_id=0,
    )
    common.update(over)
    if family == "llama":
        return LlamaConfig(rope_theta=10000.0, **common)
    if family == "qwen2":
        return Qwen2Config(rope_theta=10000.0, use_sliding_window=False, **common)
    if family == "qwen3":
        return Qwen3Config(rope_theta=10000.0, head_dim=16, use_sliding_window=False, **common)
    raise ValueError(family)


def make_tiny_model_dir(path: str | Path | None = None, family: str = "llama", seed: int = 0, **over) -> Path:
    """Save a tiny random Hugging Face model + tokenizer directory and return its path."""
    from transformers import AutoModelForCausalLM

    path = Path(path or tempfile.mkdtemp(prefix=f"macaronic-tiny-{family}-"))
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(tiny_hf_config(family, **over), dtype=torch.float32)
    with torch.no_grad():  # random norms so a wrong norm shows up in parity tests
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
            if name.endswith("bias"):
                p.copy_(0.1 * torch.randn_like(p))
    model.save_pretrained(path, safe_serialization=True)
    tiny_tokenizer().save_pretrained(path)
    return path


def make_random_adapter(
    path: str | Path, args, rank: int = 4, seed: int = 0, targets=None, mode: str = "full",
    layers=None, scale: float = 0.2, role: str | None = None, invocation_tokens=None, top_k: int | None = None,
) -> Path:
    """A random (non-zero A and B) PEFT LoRA directory for a base with `args` (ModelArgs).
    mode "upper" needs `top_k`; its layers default to the top `top_k`."""
    from macaronic.engine.adapters import save_adapter
    from macaronic.engine.config import TARGETS

    g = torch.Generator().manual_seed(seed)
    pairs = {}
    if layers is None:
        layers = range(args.n_layers - top_k, args.n_layers) if mode == "upper" and top_k else range(args.n_layers)
    for layer in layers:
        for t in targets or TARGETS:
            d_in, d_out = args.target_shape(t)
            pairs[(layer, t)] = (scale * torch.randn(rank, d_in, generator=g), scale * torch.randn(d_out, rank, generator=g))
    meta = {"mode": mode, "role": role, "description": f"random test adapter (seed {seed})"}
    if top_k is not None:
        meta["top_k"] = top_k
    return save_adapter(path, pairs, rank=rank, alpha=2 * rank, meta=meta, invocation_tokens=invocation_tokens)


ROLES_MODES = {"chat": "turn", "agent": "full", "coding": "turn", "genui": "full"}


def make_role_models(root: Path) -> tuple[Path, list[Path]]:
    """A tiny random base and four role adapters (chat/coding turn-mode, agent/genui full-mode)."""
    from macaronic.engine.config import ModelArgs

    base = make_tiny_model_dir(root / "base", seed=3)
    args = ModelArgs.from_dir(base)
    adapters = [make_random_adapter(root / "adapters" / name, args, seed=i + 11, mode=mode, role=name)
                for i, (name, mode) in enumerate(ROLES_MODES.items())]
    return base, adapters


def tiny_llm(family: str = "llama", n_adapters: int = 4, mode: str = "turn", seed: int = 0, config=None,
             workdir: str | Path | None = None):
    """A real LLM on a tiny random model with `n_adapters` random adapters named after the roles."""
    from macaronic.engine.config import ModelArgs
    from macaronic.engine.llm import EngineConfig, load_llm

    work = Path(workdir or tempfile.mkdtemp(prefix="macaronic-tinyllm-"))
    base = make_tiny_model_dir(work / "base", family=family, seed=seed)
    args = ModelArgs.from_dir(base)
    names = ["chat", "agent", "coding", "genui"] + [f"extra{i}" for i in range(max(0, n_adapters - 4))]
    paths = [make_random_adapter(work / "adapters" / n, args, seed=seed + i + 1, mode=mode, role=n)
             for i, n in enumerate(names[:n_adapters])]
    return load_llm(base, paths, config or EngineConfig(max_context=2048))


def write_json(path: Path, obj) -> Path:
    path.write_text(json.dumps(obj))
    return path


def assert_decode_agrees(got, ref, got_kv, ref_kv, max_frac: float = 0.05) -> None:
    """A decode path's logits per step (`got`) against its reference twin's (`ref`), and the K/V both
    wrote: the largest error at most `max_frac` of each step's logit span, the mean at most 0.5% of it,
    argmax agreement at least 0.75; K and V within 5% of the reference's largest value."""
    for a, r in zip(got, ref, strict=True):
        span = float(r.max() - r.min())
        err = (a - r).abs()
        assert float(err.max()) <= max_frac * span and float(err.mean()) <= 0.005 * span, (float(err.max()), span)
        assert float((a.argmax(-1) == r.argmax(-1)).float().mean()) >= 0.75
    for (ka, va), (kr, vr) in zip(got_kv, ref_kv, strict=True):
        assert ka.shape == kr.shape and float((ka - kr).abs().max()) <= 0.05 * float(kr.abs().max())
        assert float((va - vr).abs().max()) <= 0.05 * float(vr.abs().max())
