"""`macaronic train --mode upper --top-k K`: LoRA in the top K layers only, recorded in the
metadata, loaded by the engine as `upper`, and computed like `full` (adapter on every token)."""

from __future__ import annotations

import json

import torch

from macaronic.commands.train import main


def _train(tiny_base, tiny_data, out, extra=()):
    return main(["chat", "--data", str(tiny_data), "--out", str(out), "--base", str(tiny_base), "--steps", "2",
                 "--batch", "2", "--lr", "1e-2", "--dtype", "float32", "--no-progress", *extra])


def test_upper_adapter_has_top_layers_only_and_loads_as_upper(tiny_base, tiny_data, tmp_path):
    from macaronic.engine.adapters import read_adapter
    from macaronic.engine.config import ModelArgs
    from macaronic.datagen.examples import encode_all, read_jsonl
    from macaronic.train.sft import TrainConfig, example_loss, init_from, load_model
    from macaronic.testing import tiny_tokenizer

    out = tmp_path / "upper"
    assert _train(tiny_base, tiny_data, out, ("--mode", "upper", "--top-k", "2")) == 0
    args = ModelArgs.from_dir(tiny_base)
    info, _ = read_adapter(out, args)
    assert (info.mode, info.top_k, info.layers) == ("upper", 2, (1, 2))
    assert json.loads((out / "adapter_config.json").read_text())["layers_to_transform"] == [1, 2]
    assert "alora_invocation_tokens" not in json.loads((out / "adapter_config.json").read_text())

    # the loss is full's: the whole conversation runs through the adapter (no base-only history)
    cfg = TrainConfig(role="chat", mode="upper", top_k=2, rank=8, alpha=16.0)
    pm = load_model(cfg, tiny_base)
    init_from(pm, out)
    ex = encode_all(tiny_tokenizer(), read_jsonl(tiny_data), 2048)[0][0]
    loss, n, computed = example_loss(pm, ex, "upper", None)
    assert computed == len(ex.ids) and n == ex.n_targets
    with torch.no_grad():
        full_loss, _, _ = example_loss(pm, ex, "full", None)
    assert torch.allclose(loss, full_loss)

    # warm start from an every-layer adapter keeps its top layers only
    every = tmp_path / "every"
    assert _train(tiny_base, tiny_data, every, ("--mode", "full")) == 0
    pm = load_model(cfg, tiny_base)
    assert init_from(pm, every, below=1) == 7 * 2  # layer 0's A and B of the 7 targets


def test_top_k_goes_with_upper_only(tiny_base, tiny_data, tmp_path, capsys):
    assert _train(tiny_base, tiny_data, tmp_path / "a", ("--mode", "upper")) == 2
    assert "--top-k K (K > 0) goes with --mode upper" in capsys.readouterr().err
    assert _train(tiny_base, tiny_data, tmp_path / "b", ("--mode", "full", "--top-k", "2")) == 2
    assert _train(tiny_base, tiny_data, tmp_path / "c", ("--mode", "upper", "--top-k", "9")) == 2
    assert "exceeds the base's 3 layers" in capsys.readouterr().err
