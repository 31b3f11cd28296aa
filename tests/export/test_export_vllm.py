"""`macaronic export vllm`: the layout vLLM/SGLang load, launch commands, manifest."""

from __future__ import annotations

import json
import shlex
import shutil

import pytest

from macaronic.cli import main


@pytest.fixture()
def tiny_models(tiny_models, tmp_path):
    """The tiny models, the turn-mode ones carrying `alora_invocation_tokens` as trained adapters do."""
    base, adapters = tiny_models
    out = []
    for a in adapters:
        shutil.copytree(a, tmp_path / "src" / a.name)
        meta = json.loads((a / "macaronic.json").read_text())
        if meta["mode"] == "turn":
            cfg = json.loads((a / "adapter_config.json").read_text())
            cfg["alora_invocation_tokens"] = [1, 2, 3]
            (tmp_path / "src" / a.name / "adapter_config.json").write_text(json.dumps(cfg, indent=2) + "\n")
        out.append(tmp_path / "src" / a.name)
    return base, out


def export(tiny_models, out, *extra):
    base, adapters = tiny_models
    args = ["export", "vllm", "--out", str(out), "--base", str(base), "--port", "8123", *extra]
    for a in adapters:
        args += ["--adapter-dir", str(a)]
    return main(args)


def test_export_vllm_layout(tiny_models, tmp_path, capsys):
    base, adapters = tiny_models
    out = tmp_path / "export"
    assert export(tiny_models, out) == 0
    cfg = json.loads((out / "base" / "config.json").read_text())
    assert cfg["architectures"] == ["LlamaForCausalLM"]
    assert (out / "base" / "model.safetensors").stat().st_size == (base / "model.safetensors").stat().st_size
    for a in adapters:
        assert (out / "adapters" / a.name / "adapter_model.safetensors").read_bytes() == \
            (a / "adapter_model.safetensors").read_bytes()
        got = json.loads((out / "adapters" / a.name / "adapter_config.json").read_text())
        src = json.loads((a / "adapter_config.json").read_text())
        # vLLM refuses Activated-LoRA adapters: the key goes, everything else stays
        assert "alora_invocation_tokens" not in got
        assert got == {k: v for k, v in src.items() if k != "alora_invocation_tokens"}
    assert "alora_invocation_tokens" in json.loads((adapters[0] / "adapter_config.json").read_text())  # source intact
    cmd = shlex.split((out / "launch-vllm.sh").read_text().splitlines()[-1])
    assert cmd[:4] == ["exec", "${MACARONIC_VLLM_PYTHON:-python3}", "-m", "vllm.entrypoints.openai.api_server"]
    assert "--enable-lora" in cmd and "--enable-prompt-tokens-details" in cmd and cmd[-1] == "$@"
    assert cmd[cmd.index("--port") + 1] == "8123"
    mods = cmd[cmd.index("--lora-modules") + 1: cmd.index("--lora-modules") + 5]
    assert {m.split("=")[0]: m.split("=")[1] for m in mods} == {n: f"$here/adapters/{n}"
                                                               for n in ("agent", "chat", "coding", "genui")}
    assert int(cmd[cmd.index("--max-lora-rank") + 1]) in (8, 16, 32, 64)
    sglang = shlex.split((out / "launch-sglang.sh").read_text().splitlines()[-1])
    assert sglang[2:4] == ["-m", "sglang.launch_server"] and "--lora-paths" in sglang and "--enable-lora" in sglang
    manifest = json.loads((out / "manifest.json").read_text())
    assert {x["name"]: x["trained_mode"] for x in manifest["adapters"]} == {
        "chat": "turn", "agent": "full", "coding": "turn", "genui": "full"}
    assert {x["mode"] for x in manifest["adapters"]} == {"full"} and not any(x["alora"] for x in manifest["adapters"])
    meta = json.loads((out / "adapters" / "chat" / "macaronic.json").read_text())
    assert meta["mode"] == "full" and meta["trained_mode"] == "turn"
    assert manifest["front"] == "macaronic serve --engine openai://127.0.0.1:8123"
    assert "run with full semantics" in capsys.readouterr().err


def test_export_keeps_alora_for_an_engine_that_supports_it(tiny_models, tmp_path, capsys):
    out = tmp_path / "keep"
    assert export(tiny_models, out, "--alora", "keep") == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert {x["name"]: x["mode"] for x in manifest["adapters"]} == {"chat": "turn", "agent": "full", "coding": "turn",
                                                                     "genui": "full"}
    for a in tiny_models[1]:
        assert (out / "adapters" / a.name / "adapter_config.json").read_bytes() == (a / "adapter_config.json").read_bytes()
    assert "full semantics" not in capsys.readouterr().err


def test_export_loads_in_the_embedded_engine_as_full_mode(tiny_models, tmp_path):
    from macaronic.engine.llm import load_llm

    out = tmp_path / "e"
    assert export(tiny_models, out) == 0
    llm = load_llm(out / "base", sorted((out / "adapters").iterdir()))
    try:
        assert {i.name: i.mode for i in llm.adapters.infos()} == dict.fromkeys(["agent", "chat", "coding", "genui"],
                                                                                "full")
    finally:
        llm.close()


def test_export_refuses_a_broken_adapter(tiny_models, tmp_path, capsys):
    (tmp_path / "bad").mkdir()
    rc = main(["export", "vllm", "--out", str(tmp_path / "o"), "--base", str(tiny_models[0]),
               "--adapter-dir", str(tmp_path / "bad")])
    assert rc == 2 and "missing adapter_config.json" in capsys.readouterr().err


def test_export_leaves_out_the_gguf_block_cache(tiny_models, tmp_path):
    """`--quant gguf` caches k-quant blocks beside the imported base, under GGUF tensor names; vLLM
    loads every *.safetensors in --model and failed on them ("no module or parameter named 'blk'")."""
    from macaronic.engine.ggml import BLOCKS_FILE
    from macaronic.export import NOT_EXPORTED

    base, adapters = tiny_models
    assert BLOCKS_FILE in NOT_EXPORTED
    copy = tmp_path / "base"
    shutil.copytree(base, copy)
    (copy / BLOCKS_FILE).write_bytes(b"not weights")
    (copy / "model-q4_k_m.gguf").write_bytes(b"GGUF")
    out = tmp_path / "export"
    assert export((copy, adapters), out) == 0
    assert sorted(p.name for p in (out / "base").iterdir()) == sorted(
        p.name for p in base.iterdir() if p.is_file())
