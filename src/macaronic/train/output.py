"""The trained adapter on disk: PEFT directory + `macaronic.json` provenance.

Metadata: role, mode, base fingerprint, one-line description, data manifest hash and size,
training config, loss history summary, library versions, git commit. Knows nothing about
training itself.
"""

from __future__ import annotations

import json
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


INIT_CONFIG = ("autocast", "batch", "lr", "max_turn", "rank", "seed", "steps")


def init_record(adapter_dir: str | Path) -> dict:
    """What a warm start began from: the starting adapter's own record (its data manifest, the parts of
    its config that say how it was trained (`INIT_CONFIG`), and, nested under `init`, what it began
    from), so the chain of data rebuilds. A missing or unreadable record is said, not fatal: this runs
    when the trained adapter is saved."""
    path = Path(adapter_dir)
    record: dict = {"path": str(adapter_dir)}
    meta_file = path / "macaronic.json"
    try:
        meta = json.loads(meta_file.read_text())
    except (OSError, ValueError) as e:
        return {**record, "unreadable": f"{type(e).__name__}: {e}"}
    training = meta.get("training") or {}
    config = training.get("config") or {}
    record.update({"config": {k: config[k] for k in INIT_CONFIG if k in config},
                   **{k: meta[k] for k in ("created", "data", "git_commit") if k in meta},
                   "steps_done": training.get("steps_done")})
    if training.get("init"):
        record["init"] = training["init"]
    return record


def write_adapter(out: Path, pm, cfg, base_dir: Path, marker: list[int], data: dict, history: list[dict],
                  extra: dict | None = None, method: str = "sft") -> Path:
    """Save the LoRA (cfg.save_dtype) with PEFT-loadable config and provenance metadata (`method`: how
    it was trained, "sft" or "dpo")."""
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
        "training": {"method": method, "config": {**asdict(cfg), "targets": list(cfg.targets)},
                     "steps_done": len(history) and history[-1]["step"],
                     "final_loss": sum(h["loss"] for h in last) / max(1, len(last)),
                     "first_loss": history[0]["loss"] if history else None,
                     "seconds": round(sum(h["seconds"] for h in history), 1),
                     **({"init": init_record(cfg.init_adapter)} if getattr(cfg, "init_adapter", None) else {})},
        "versions": versions(),
        "git_commit": git_commit(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        **(extra or {}),
    }
    dtype = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}[cfg.save_dtype]
    return save_adapter(out, pairs, rank=cfg.rank, alpha=cfg.alpha, meta=meta, dtype=dtype,
                        invocation_tokens=list(marker) if cfg.mode == "turn" else None)
