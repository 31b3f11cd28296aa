"""The trained adapter on disk: PEFT directory + `macaronic.json` provenance.

Metadata: role, mode, base fingerprint, one-line description, data manifest hash and size,
training config, loss history summary, library versions, git commit. Knows nothing about
training itself.
"""

from __future__ import annotations

import platform
import subprocess
import time
from dataclasses import asdict
from pathlib import Path

import torch

def _description(role: str) -> str:
    """The adapter's one line: its registry entry's, else "<role> specialist"."""
    from macaronic.specialist import get

    try:
        return get(role).description or f"{role} specialist"
    except (KeyError, ValueError):
        return f"{role} specialist"


def git_commit() -> str | None:
    try:
        root = Path(__file__).resolve().parents[3]
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def versions() -> dict:
    import importlib.metadata as md

    out = {"python": platform.python_version()}
    for pkg in ("torch", "transformers", "peft", "macaronic"):
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            out[pkg] = None
    return out


def write_adapter(out: Path, pm, cfg, base_dir: Path, marker: list[int], data: dict, history: list[dict],
                  extra: dict | None = None) -> Path:
    """Save the LoRA (cfg.save_dtype) with PEFT-loadable config and provenance metadata."""
    from macaronic.engine.adapters import save_adapter
    from macaronic.engine.base import load_base
    from macaronic.train.sft import lora_pairs

    base = load_base(base_dir)
    pairs = lora_pairs(pm, base.args.n_layers)
    last = history[-10:]
    meta = {
        "role": cfg.role,
        "mode": cfg.mode,
        **({"top_k": cfg.top_k} if cfg.mode == "upper" else {}),
        **({"activation": cfg.activation} if cfg.mode == "turn" else {}),
        "base_fingerprint": base.fingerprint,
        "base": base.name,
        "description": cfg.description or _description(cfg.role),
        "data": data,
        "training": {"method": "sft", "config": {**asdict(cfg), "targets": list(cfg.targets)},
                     "steps_done": len(history) and history[-1]["step"],
                     "final_loss": sum(h["loss"] for h in last) / max(1, len(last)),
                     "first_loss": history[0]["loss"] if history else None,
                     "seconds": round(sum(h["seconds"] for h in history), 1)},
        "versions": versions(),
        "git_commit": git_commit(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        **(extra or {}),
    }
    dtype = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}[cfg.save_dtype]
    return save_adapter(out, pairs, rank=cfg.rank, alpha=cfg.alpha, meta=meta, dtype=dtype,
                        invocation_tokens=list(marker) if cfg.mode == "turn" else None)
