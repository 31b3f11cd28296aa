"""`macaronic train --init-adapter DIR` (SFT continues from an adapter) and `--max-seconds` (a time budget)."""

from __future__ import annotations

import json

import torch

from macaronic.commands.train import main


def _train(tiny_base, tiny_data, out, steps=3, extra=()):
    return main(["chat", "--data", str(tiny_data), "--out", str(out), "--base", str(tiny_base), "--steps", str(steps),
                 "--batch", "2", "--lr", "1e-2", "--dtype", "float32", "--no-progress", *extra])


def _history(out):
    return [json.loads(line) for line in (out / "history.jsonl").read_text().splitlines()]


def test_warm_start_copies_the_adapter_and_continues(tiny_base, tiny_data, tmp_path):
    from safetensors.torch import load_file

    from macaronic.train.sft import TrainConfig, init_from, load_model, lora_params

    first = tmp_path / "first"
    assert _train(tiny_base, tiny_data, first, steps=8) == 0
    pm = load_model(TrainConfig(role="chat", rank=8, alpha=16.0), tiny_base)
    init_from(pm, first)
    saved = load_file(str(first / "adapter_model.safetensors"))
    params = dict(lora_params(pm))
    assert len(saved) == len(params) > 0
    for k, v in saved.items():
        assert torch.equal(params[k.replace(".weight", ".default.weight")], v.float())

    warm = tmp_path / "warm"
    assert _train(tiny_base, tiny_data, warm, steps=1, extra=("--init-adapter", str(first))) == 0
    # Same seed, same first batch: the warm start begins where the first run ended (its loss went
    # 5.62 -> 4.97 over 8 steps), well below the fresh LoRA's first step.
    assert _history(warm)[0]["loss"] < _history(first)[0]["loss"] - 0.3
    meta = json.loads((warm / "macaronic.json").read_text())
    assert meta["training"]["config"]["init_adapter"] == str(first)
    # the starting adapter's own record comes along, so the chain of data manifests rebuilds
    first_meta = json.loads((first / "macaronic.json").read_text())
    init = meta["training"]["init"]
    assert init["data"] == first_meta["data"] and init["steps_done"] == 8 and init["config"]["steps"] == 8
    assert init["git_commit"] == first_meta["git_commit"] and "init" not in init

    again = tmp_path / "again"  # a warm start from a warm start nests both records
    assert _train(tiny_base, tiny_data, again, steps=1, extra=("--init-adapter", str(warm))) == 0
    chain = json.loads((again / "macaronic.json").read_text())["training"]["init"]
    assert chain["path"] == str(warm) and chain["steps_done"] == 1 and chain["init"] == init

    from macaronic.train.output import init_record

    (first / "macaronic.json").write_text("{not json")  # a broken record is said, and the save goes on
    assert init_record(first)["unreadable"].startswith("JSONDecodeError") and init_record(tmp_path / "none")["path"]


def test_warm_start_rejects_another_rank(tiny_base, tiny_data, tmp_path, capsys):
    first = tmp_path / "r8"
    assert _train(tiny_base, tiny_data, first, steps=1) == 0
    rc = _train(tiny_base, tiny_data, tmp_path / "r4", steps=1, extra=("--rank", "4", "--init-adapter", str(first)))
    assert rc == 2
    assert "cannot warm-start" in capsys.readouterr().err


def test_max_seconds_stops_the_run_early(tiny_base, tiny_data, tmp_path):
    out = tmp_path / "capped"
    assert _train(tiny_base, tiny_data, out, steps=5, extra=("--max-seconds", "1e-9")) == 0
    assert [h["step"] for h in _history(out)] == [1]  # the first step runs, then the budget is spent
    meta = json.loads((out / "macaronic.json").read_text())
    assert meta["training"]["steps_done"] == 1 and meta["training"]["config"]["steps"] == 5


def test_stop_after_replays_a_capped_run_step_for_step(tiny_base, tiny_data, tmp_path):
    full, cut = tmp_path / "full", tmp_path / "cut"
    assert _train(tiny_base, tiny_data, full, steps=5) == 0
    assert _train(tiny_base, tiny_data, cut, steps=5, extra=("--stop-after", "2")) == 0
    # the schedule spans --steps either way, so the first two steps are the same steps
    assert [(h["step"], h["loss"], h["lr"]) for h in _history(cut)] == \
        [(h["step"], h["loss"], h["lr"]) for h in _history(full)][:2]
    meta = json.loads((cut / "macaronic.json").read_text())
    assert meta["training"]["steps_done"] == 2 and meta["training"]["config"]["steps"] == 5
    assert _train(tiny_base, tiny_data, tmp_path / "bad", steps=2, extra=("--stop-after", "3")) == 2
