"""`macaronic export vllm|sglang --out DIR` (commands/export.py): the base and the adapters in the
layout a multi-LoRA engine loads, its launch scripts, and a manifest saying which semantics each
adapter runs with.

    DIR/base/               Hugging Face directory (config.json with `architectures` filled in,
                            model.safetensors, tokenizer, chat template); files hard-linked when
                            possible, else copied
    DIR/adapters/<name>/    PEFT LoRA directories in the form the target engine accepts
    DIR/launch-vllm.sh      python -m vllm.entrypoints.openai.api_server ... --lora-modules name=path ...
    DIR/launch-sglang.sh    python -m sglang.launch_server ... --lora-paths name=path ... (written, not run here)
    DIR/manifest.json       base fingerprint, adapter ids, roles, trained and served modes, ranks

vLLM (0.32, CPU build included) refuses adapters that carry `alora_invocation_tokens` ("vLLM does
not support Activated LoRA"), so for an engine without Activated-LoRA support a `turn`-mode
adapter is written as plain LoRA: the engine applies it to every token (`full` semantics, KV per
adapter), and the front (`macaronic serve --engine openai://...`) gives it its own view and a
summary hop like any full-mode adapter. `--alora keep` keeps the key for an engine that
implements Activated LoRA. The launch scripts take extra engine arguments (`--port`,
`--tensor-parallel-size`, ...) and `MACARONIC_VLLM_PYTHON` / `MACARONIC_SGLANG_PYTHON` as the interpreter.
Knows files only; loads no weights.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path


ARCHITECTURES = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM"}


@dataclass(frozen=True)
class Target:
    """What an engine accepts. `alora`: it loads `alora_invocation_tokens` and honours them."""

    name: str
    alora: bool


# vLLM 0.32 refuses aLoRA adapters outright; SGLang documents no aLoRA support, so it gets plain LoRA too.
TARGETS = {"vllm": Target("vllm", alora=False), "sglang": Target("sglang", alora=False)}
VLLM_RANKS = (8, 16, 32, 64, 128, 256, 320, 512)  # --max-lora-rank must be one of these


def place(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    if dst.exists() or dst.is_symlink():
        dst.unlink()
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def write_fresh(dst: Path, text: str) -> None:
    """Replace a file without writing through a hard link into the source."""
    if dst.exists() or dst.is_symlink():
        dst.unlink()
    dst.write_text(text)


# Files Macaronic itself writes beside an imported base, which no engine should load: the GGUF
# k-quant blocks read once for `--quant gguf` (engine/ggml.py's BLOCKS_FILE; a safetensors file with
# GGUF tensor names, so vLLM would try to load it as weights) and GGUF files themselves.
NOT_EXPORTED = ("gguf-blocks.safetensors",)


def export_base(src: Path, out: Path) -> dict:
    for f in sorted(p for p in src.iterdir() if p.is_file()):
        if f.name == "config.json" or f.name in NOT_EXPORTED or f.suffix == ".gguf":
            continue
        place(f, out / f.name)
    cfg = json.loads((src / "config.json").read_text())
    if not cfg.get("architectures"):
        arch = ARCHITECTURES.get(cfg.get("model_type", ""))
        if arch is None:
            raise ValueError(f"{src}: unknown model_type {cfg.get('model_type')!r}; cannot name its architecture")
        cfg["architectures"] = [arch]
    write_fresh(out / "config.json", json.dumps(cfg, indent=2) + "\n")
    return cfg


def served_mode(trained_mode: str, keeps_alora: bool) -> str:
    """The semantics an adapter runs with on the engine: turn needs Activated-LoRA support."""
    return "turn" if trained_mode == "turn" and keeps_alora else "full"


def export_adapter(src: Path, out: Path, keep_alora: bool) -> dict:
    from macaronic.engine.adapters import dir_sha256

    problems = [f"missing {n}" for n in ("adapter_config.json", "adapter_model.safetensors") if not (src / n).is_file()]
    if problems:
        raise ValueError(f"{src}: " + ", ".join(problems))
    try:
        cfg = json.loads((src / "adapter_config.json").read_text())
        meta = json.loads((src / "macaronic.json").read_text()) if (src / "macaronic.json").is_file() else {}
    except json.JSONDecodeError as e:
        raise ValueError(f"{src}: {e}") from None
    for f in sorted(p for p in src.iterdir() if p.is_file()):
        if f.name not in ("adapter_config.json", "macaronic.json"):
            place(f, out / f.name)
    trained = meta.get("mode", "full")
    mode = served_mode(trained, keep_alora)
    if not keep_alora:
        cfg.pop("alora_invocation_tokens", None)
    write_fresh(out / "adapter_config.json", json.dumps(cfg, indent=2) + "\n")
    if meta:  # what the exported copy is: run with `mode`, trained under `trained_mode`
        write_fresh(out / "macaronic.json", json.dumps({**meta, "mode": mode, "trained_mode": trained}, indent=2) + "\n")
    return {"name": out.name, "id": dir_sha256(src), "role": meta.get("role"), "trained_mode": trained,
            "mode": mode, "rank": cfg.get("r"), "targets": cfg.get("target_modules"),
            "alora": bool(cfg.get("alora_invocation_tokens")), "base_fingerprint": meta.get("base_fingerprint")}


def launch_scripts(served_name: str, adapters: list[dict], port: int, max_len: int) -> tuple[str, str]:
    """(launch-vllm.sh, launch-sglang.sh); paths are relative to the script's directory, so the export
    can be copied to other machines (every node of a cluster needs the same directory)."""
    q = shlex.quote
    rank = max([a["rank"] or 8 for a in adapters] or [8])
    vllm_rank = next((r for r in VLLM_RANKS if r >= rank), rank)
    mods = " ".join(f'{a["name"]}="$here/adapters/{a["name"]}"' for a in adapters)
    vllm = (f'exec "${{MACARONIC_VLLM_PYTHON:-python3}}" -m vllm.entrypoints.openai.api_server --model "$here/base" '
            f"--served-model-name {q(served_name)} --host 127.0.0.1 --port {port} --max-model-len {max_len} "
            "--enable-prompt-tokens-details"
            + (f" --enable-lora --max-lora-rank {vllm_rank} --max-loras {len(adapters)} --lora-modules {mods}"
               if adapters else "") + ' "$@"')
    sglang = (f'exec "${{MACARONIC_SGLANG_PYTHON:-python3}}" -m sglang.launch_server --model-path "$here/base" '
              f"--served-model-name {q(served_name)} --host 127.0.0.1 --port {port} --context-length {max_len}"
              + (f" --enable-lora --max-lora-rank {rank} --max-loras-per-batch {len(adapters)} --lora-paths {mods}"
                 if adapters else "") + ' "$@"')
    head = ("#!/usr/bin/env bash\n# Written by `macaronic export`. Extra arguments go to the engine (the last one wins:\n"
            "# --port N, --host 0.0.0.0, --tensor-parallel-size N, ...). Then, in another shell:\n"
            f"#   macaronic serve --engine openai://127.0.0.1:{port}\nset -euo pipefail\n"
            'here=$(cd "$(dirname "$0")" && pwd)\n')
    cpu = ("# CPU builds: KV cache size in GiB (the default, 4, is much more than a 135M model needs)\n"
           "export VLLM_CPU_KVCACHE_SPACE=${VLLM_CPU_KVCACHE_SPACE:-2}\n")
    return head + cpu + vllm + "\n", head + sglang + "\n"
