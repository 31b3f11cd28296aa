"""`macaronic export vllm|sglang --out DIR`: the base and the adapters in the layout a multi-LoRA
engine loads, its launch scripts and a manifest (the writing is macaronic/export.py)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from macaronic.engine.bases import BASE_HELP
from macaronic.export import TARGETS, export_adapter, export_base, launch_scripts, write_fresh

DESCRIPTION = ("The base and the adapters in the layout a multi-LoRA engine loads, its launch scripts, and a "
               "manifest saying which semantics each adapter runs with (the layout: macaronic/export.py).")


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="macaronic export", description=DESCRIPTION,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("target", choices=tuple(TARGETS), help="the engine the adapters are written for (both launch "
                                                          "scripts are written either way)")
    p.add_argument("--out", required=True, help="output directory (created; existing files are replaced)")
    p.add_argument("--base", help=BASE_HELP)
    p.add_argument("--adapter-dir", action="append", default=[], metavar="DIR",
                   help="adapter directory (repeatable; default: the shipped specialists)")
    p.add_argument("--port", type=int, default=8000, help="port in the launch commands (default 8000)")
    p.add_argument("--alora", choices=("auto", "keep", "drop"), default="auto",
                   help="alora_invocation_tokens of turn-mode adapters: keep (an engine with Activated-LoRA "
                        "support: turn semantics), drop (plain LoRA: full semantics), auto = what the target "
                        "accepts (vllm, sglang: drop)")
    a = p.parse_args(argv)
    from macaronic.engine.base import resolve_base
    from macaronic.engine.llm import shipped_adapters_dir

    keep = TARGETS[a.target].alora if a.alora == "auto" else a.alora == "keep"
    out = Path(a.out)
    try:
        base = resolve_base(a.base)
        from macaronic.engine.bases import registered

        shipped = shipped_adapters_dir(registered(a.base)) if registered(a.base) else None  # a directory base: none
        dirs = [Path(d) for d in a.adapter_dir] or sorted(
            d for d in (shipped.glob("*") if shipped else ()) if (d / "adapter_config.json").is_file())
        cfg = export_base(base, out / "base")
        adapters = [export_adapter(d, out / "adapters" / d.name, keep) for d in dirs]
    except (OSError, ValueError) as e:
        print(f"macaronic export: {e}", file=sys.stderr)
        return 2
    served = cfg.get("_name_or_path") or base.name
    served = Path(str(served)).name or "base"
    max_len = int(cfg.get("max_position_embeddings") or 2048)
    vllm, sglang = launch_scripts(served, adapters, a.port, max_len)
    for name, text in (("launch-vllm.sh", vllm), ("launch-sglang.sh", sglang)):
        write_fresh(out / name, text)
        (out / name).chmod(0o755)
    # the adapters record the fingerprint of the base they were trained on (no weights loaded here)
    fps = sorted({x["base_fingerprint"] for x in adapters if x.get("base_fingerprint")})
    manifest = {"target": a.target, "alora": keep,
                "base": {"path": str(base), "served_name": served, "architectures": cfg["architectures"],
                         "fingerprint": fps[0] if len(fps) == 1 else None, "max_model_len": max_len},
                "adapters": adapters, "front": f"macaronic serve --engine openai://127.0.0.1:{a.port}"}
    write_fresh(out / "manifest.json", json.dumps(manifest, indent=2) + "\n")
    print(f"wrote {out}: base + {len(adapters)} adapters for {a.target}")
    print(f"start the engine: {out / ('launch-' + a.target + '.sh')}   then: {manifest['front']}")
    changed = [x["name"] for x in adapters if x["trained_mode"] != x["mode"]]
    if changed:
        print(f"note: turn-mode adapters {changed} are written as plain LoRA ({a.target} has no Activated-LoRA "
              "support): they run with full semantics (KV per adapter, own views and summaries)", file=sys.stderr)
    return 0
