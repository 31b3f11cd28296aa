"""`macaronic export vllm`: the layout vLLM/SGLang load, launch commands, manifest."""

from __future__ import annotations

import json
import shlex

from macaronic.cli import main


def test_export_vllm_layout(tiny_models, tmp_path, capsys):
    base, adapters = tiny_models
    out = tmp_path / "export"
    args = ["export", "vllm", "--out", str(out), "--base", str(base), "--port", "8123"]
    for a in adapters:
        args += ["--adapter-dir", str(a)]
    assert main(args) == 0
    cfg = json.loads((out / "base" / "config.json").read_text())
    assert cfg["architectures"] == ["LlamaForCausalLM"]
    assert (out / "base" / "model.safetensors").stat().st_size == (base / "model.safetensors").stat().st_size
    for a in adapters:
        for f in ("adapter_config.json", "adapter_model.safetensors", "macaronic.json"):
            assert (out / "adapters" / a.name / f).read_bytes() == (a / f).read_bytes()
    cmd = shlex.split((out / "launch-vllm.sh").read_text().splitlines()[-1])
    assert cmd[:3] == ["exec", "vllm", "serve"] and "--enable-lora" in cmd and cmd[cmd.index("--port") + 1] == "8123"
    mods = cmd[cmd.index("--lora-modules") + 1: cmd.index("--lora-modules") + 5]
    assert sorted(m.split("=")[0] for m in mods) == ["agent", "chat", "coding", "genui"]
    assert int(cmd[cmd.index("--max-lora-rank") + 1]) >= 4
    assert "--lora-paths" in (out / "launch-sglang.sh").read_text()
    manifest = json.loads((out / "manifest.json").read_text())
    assert {x["name"]: x["mode"] for x in manifest["adapters"]} == {"chat": "turn", "agent": "full", "coding": "turn",
                                                                     "genui": "full"}
    assert manifest["front"] == "macaronic serve --engine openai://127.0.0.1:8123"
    assert "turn-mode adapters" in capsys.readouterr().err


def test_export_refuses_a_broken_adapter(tiny_models, tmp_path, capsys):
    (tmp_path / "bad").mkdir()
    rc = main(["export", "vllm", "--out", str(tmp_path / "o"), "--base", str(tiny_models[0]),
               "--adapter-dir", str(tmp_path / "bad")])
    assert rc == 2 and "missing adapter_config.json" in capsys.readouterr().err
