"""`macaronic export vllm --out DIR`: the base and the adapters in the layout vLLM (and SGLang)
load, plus the exact launch commands and a manifest.

    DIR/base/               Hugging Face directory (config.json with `architectures` filled in,
                            model.safetensors, tokenizer, chat template); files hard-linked when
                            possible, else copied
    DIR/adapters/<name>/    PEFT LoRA directories, unchanged (adapter_config.json,
                            adapter_model.safetensors, macaronic.json)
    DIR/launch-vllm.sh      vllm serve ... --enable-lora --lora-modules name=path ...
    DIR/launch-sglang.sh    python -m sglang.launch_server ... --lora-paths name=path ...
    DIR/manifest.json       base fingerprint, adapter ids, roles, modes, ranks

The front: `macaronic serve --engine openai://127.0.0.1:PORT`. `turn`-mode adapters keep
`alora_invocation_tokens` in adapter_config.json; an engine without Activated-LoRA support
applies them to every token (full-mode semantics), which is correct LoRA but loses the exact
history reuse across switches. Knows files only; loads no weights.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import sys
from pathlib import Path

ARCHITECTURES = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM"}


def place(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    if dst.exists():
        dst.unlink()
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def export_base(src: Path, out: Path) -> dict:
    for f in sorted(p for p in src.iterdir() if p.is_file()):
        if f.name == "config.json":
            continue
        place(f, out / f.name)
    cfg = json.loads((src / "config.json").read_text())
    if not cfg.get("architectures"):
        arch = ARCHITECTURES.get(cfg.get("model_type", ""))
        if arch is None:
            raise ValueError(f"{src}: unknown model_type {cfg.get('model_type')!r}; cannot name its architecture")
        cfg["architectures"] = [arch]
    (out / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    return cfg


def export_adapter(src: Path, out: Path) -> dict:
    from macaronic.engine.adapters import dir_sha256

    problems = [f"missing {n}" for n in ("adapter_config.json", "adapter_model.safetensors") if not (src / n).is_file()]
    if problems:
        raise ValueError(f"{src}: " + ", ".join(problems))
    for f in sorted(p for p in src.iterdir() if p.is_file()):
        place(f, out / f.name)
    cfg = json.loads((src / "adapter_config.json").read_text())
    meta = json.loads((src / "macaronic.json").read_text()) if (src / "macaronic.json").is_file() else {}
    return {"name": out.name, "id": dir_sha256(src), "role": meta.get("role"), "mode": meta.get("mode", "full"),
            "rank": cfg.get("r"), "targets": cfg.get("target_modules"),
            "alora": bool(cfg.get("alora_invocation_tokens")), "base_fingerprint": meta.get("base_fingerprint")}


def launch_scripts(out: Path, served_name: str, adapters: list[dict], port: int, max_len: int) -> tuple[str, str]:
    q = shlex.quote
    rank = max([a["rank"] or 8 for a in adapters] or [8])
    vllm_rank = next(r for r in (8, 16, 32, 64, 128, 256, 320, 512) if r >= rank)
    mods = " ".join(f"{a['name']}={q(str(out / 'adapters' / a['name']))}" for a in adapters)
    vllm = (f"vllm serve {q(str(out / 'base'))} --served-model-name {q(served_name)} --port {port} "
            f"--max-model-len {max_len}" + (f" --enable-lora --max-lora-rank {vllm_rank} --max-loras {len(adapters)} "
                                            f"--lora-modules {mods}" if adapters else ""))
    sglang = (f"python -m sglang.launch_server --model-path {q(str(out / 'base'))} --served-model-name "
              f"{q(served_name)} --port {port}" + (f" --lora-paths {mods} --max-loras-per-batch {len(adapters)}"
                                                  if adapters else ""))
    front = f"macaronic serve --engine openai://127.0.0.1:{port}"
    head = "#!/usr/bin/env bash\n# Written by `macaronic export`. Then, in another shell:\n#   " + front + "\nset -euo pipefail\n"
    return head + "exec " + vllm + "\n", head + "exec " + sglang + "\n"


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="macaronic export", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("target", choices=("vllm",), help="the engine layout to write (SGLang loads the same one)")
    p.add_argument("--out", required=True, help="output directory (created; existing files are replaced)")
    p.add_argument("--base", help="base model directory (default: the embedded SmolLM2-135M-Instruct)")
    p.add_argument("--adapter-dir", action="append", default=[], metavar="DIR",
                   help="adapter directory (repeatable; default: the shipped specialists)")
    p.add_argument("--port", type=int, default=8000, help="port in the launch commands (default 8000)")
    a = p.parse_args(argv)
    from macaronic.engine.base import resolve_base
    from macaronic.engine.llm import shipped_adapters_dir

    out = Path(a.out)
    try:
        base = resolve_base(a.base)
        dirs = [Path(d) for d in a.adapter_dir] or sorted(
            d for d in shipped_adapters_dir().glob("*") if (d / "adapter_config.json").is_file())
        cfg = export_base(base, out / "base")
        adapters = [export_adapter(d, out / "adapters" / d.name) for d in dirs]
    except (OSError, ValueError) as e:
        print(f"macaronic export: {e}", file=sys.stderr)
        return 2
    served = cfg.get("_name_or_path") or base.name
    served = Path(str(served)).name or "base"
    max_len = int(cfg.get("max_position_embeddings") or 2048)
    vllm, sglang = launch_scripts(out.resolve(), served, adapters, a.port, max_len)
    for name, text in (("launch-vllm.sh", vllm), ("launch-sglang.sh", sglang)):
        (out / name).write_text(text)
        (out / name).chmod(0o755)
    # the adapters record the fingerprint of the base they were trained on (no weights loaded here)
    fps = sorted({x["base_fingerprint"] for x in adapters if x.get("base_fingerprint")})
    manifest = {"base": {"path": str(base), "served_name": served, "architectures": cfg["architectures"],
                         "fingerprint": fps[0] if len(fps) == 1 else None},
                "adapters": adapters, "front": f"macaronic serve --engine openai://127.0.0.1:{a.port}"}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    turn = [x["name"] for x in adapters if x["mode"] == "turn"]
    print(f"wrote {out}: base + {len(adapters)} adapters")
    print(vllm.splitlines()[-1].removeprefix("exec "))
    if turn:
        print(f"note: turn-mode adapters {turn} carry alora_invocation_tokens; without Activated-LoRA support an "
              "engine applies them to every token", file=sys.stderr)
    return 0
