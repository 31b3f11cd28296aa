"""A few SFT steps on a tiny model: the adapter loads in the engine and its logits match."""

from __future__ import annotations

import json

import pytest
import torch

from macaronic.commands.train import main
from tests.train.conftest import conv


def _train(tiny_base, tiny_data, out, mode="turn", steps=3, extra=()):
    rc = main(["chat", "--data", str(tiny_data), "--out", str(out), "--base", str(tiny_base), "--steps", str(steps),
               "--batch", "2", "--lr", "5e-2", "--mode", mode, "--dtype", "float32", "--no-progress", *extra])
    assert rc == 0
    return out


@pytest.mark.parametrize("mode", ["turn", "full"])
def test_adapter_loads_and_engine_matches_trainer(tiny_base, tiny_data, tmp_path, mode):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from macaronic.engine.llm import load_llm

    out = _train(tiny_base, tiny_data, tmp_path / f"ad-{mode}", mode=mode)
    meta = json.loads((out / "macaronic.json").read_text())
    for key in ("role", "mode", "base_fingerprint", "description", "data", "training", "versions", "git_commit"):
        assert key in meta
    assert meta["mode"] == mode and len(meta["data"]["manifest_sha256"]) == 64
    hist = [json.loads(l) for l in (out / "history.jsonl").read_text().splitlines()]
    assert [h["step"] for h in hist] == [1, 2, 3]

    llm = load_llm(tiny_base, [out])
    try:
        info = llm.adapters.get(out.name)
        assert info.mode == mode and info.base_fingerprint == llm.base.fingerprint
        ids = llm.encode_chat(conv(4)[:-1])
        start = llm.turn_start(ids)
        per_pos = [None] * start + [out.name] * (len(ids) - start) if mode == "turn" else out.name
        ours = llm.score(ids, per_pos)
        peft = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tiny_base, dtype=torch.float32),
                                         str(out)).eval()
        with torch.no_grad():
            ref = peft(input_ids=torch.tensor([ids])).logits[0]
        assert (ours - ref).abs().max().item() <= 1e-4  # PEFT (aLoRA for turn) == engine
        base = llm.score(ids, None)
        assert (ours - base).abs().max().item() > 1e-3  # training moved something
        if mode == "turn":
            assert torch.equal(ours[:start], base[:start])
    finally:
        llm.close()


def test_trainer_forward_matches_engine_turn_mode(tiny_base, tiny_data, tmp_path):
    """The trainer's turn rule (history by the bare base, adapter from the user header) is the engine's."""
    from macaronic.engine.llm import load_llm
    from macaronic.datagen.examples import encode_all
    from macaronic.datagen.examples import read_jsonl
    from macaronic.train.sft import TrainConfig, train, turn_logits

    llm = load_llm(tiny_base, [])
    try:
        enc, _ = encode_all(llm.tokenizer, read_jsonl(tiny_data), 4096)
        cfg = TrainConfig(role="chat", steps=2, batch=2, lr=5e-2, save_every=0)
        pm, _ = train(cfg, enc, tmp_path / "mem", base_dir=tiny_base, progress=False)
        from macaronic.train.output import write_adapter
        from macaronic.datagen.examples import user_marker
        from dataclasses import replace

        write_adapter(tmp_path / "mem", pm, replace(cfg, save_dtype="float32"), tiny_base, user_marker(llm.tokenizer),
                      {}, [{"step": 1, "loss": 0.0, "seconds": 0.0}])
        llm.add_adapter(tmp_path / "mem")
        ids = list(enc[0].ids)
        start = enc[0].turn_start
        mine = turn_logits(pm.eval(), ids, start)
        ours = llm.score(ids, [None] * start + ["mem"] * (len(ids) - start))
        assert (mine - ours).abs().max().item() <= 1e-4
    finally:
        llm.close()


def test_resume_continues_from_checkpoint(tiny_base, tiny_data, tmp_path):
    from macaronic.engine.adapters import read_adapter
    from macaronic.engine.config import ModelArgs

    straight = _train(tiny_base, tiny_data, tmp_path / "straight", steps=4, extra=["--save-every", "2"])
    # A run that stops after its step-2 checkpoint, then resumes.
    from macaronic.train import sft

    broken = tmp_path / "broken"

    class Stop(Exception):
        pass

    orig = sft.save_checkpoint

    def save_then_stop(*a, **k):
        orig(*a, **k)
        raise Stop

    sft.save_checkpoint = save_then_stop
    try:
        with pytest.raises(Stop):
            _train(tiny_base, tiny_data, broken, steps=4, extra=["--save-every", "2"])
    finally:
        sft.save_checkpoint = orig
    assert (broken / "checkpoint" / "state.json").exists()
    assert json.loads((broken / "checkpoint" / "state.json").read_text())["step"] == 2
    _train(tiny_base, tiny_data, broken, steps=4, extra=["--save-every", "2", "--resume"])
    args = ModelArgs.from_dir(tiny_base)
    _, a = read_adapter(straight, args)
    _, b = read_adapter(broken, args)
    assert a.keys() == b.keys()
    diff = max((a[k][i] - b[k][i]).abs().max().item() for k in a for i in range(2))
    assert diff <= 1e-6
    hist = [json.loads(l)["step"] for l in (broken / "history.jsonl").read_text().splitlines()]
    assert hist == [1, 2, 3, 4]
    # the resumed adapter's provenance covers all four steps, not only the resumed ones
    meta = json.loads((broken / "macaronic.json").read_text())["training"]
    assert meta["steps_done"] == 4 and meta["first_loss"] == json.loads((straight / "macaronic.json").read_text())["training"]["first_loss"]


def test_history_cache_reuses_the_longest_common_prefix_exactly(tiny_base):
    """Turn mode's history K/V: a history that starts like an earlier one computes only its own rest
    on top of the earlier K/V cut to the common part, and gets the K/V a fresh forward gives; a
    repeated history is a hit; the byte budget evicts the oldest."""
    from macaronic.train.sft import PrefixCache, TrainConfig, load_model

    pm = load_model(TrainConfig(role="chat", mode="turn"), tiny_base)
    g = torch.Generator().manual_seed(0)
    common = torch.randint(5, 200, (40,), generator=g).tolist()
    a = tuple(common + torch.randint(5, 200, (12,), generator=g).tolist())
    b = tuple(common + torch.randint(5, 200, (9,), generator=g).tolist())
    cache = PrefixCache(pm)
    cache.get(a)
    assert (cache.computed, cache.reused) == (len(a), 0)
    got = cache.get(b)
    assert (cache.computed, cache.reused) == (len(a) + len(b) - 40, 40)  # only b's own 9 tokens computed
    fresh = PrefixCache(pm).get(b)
    for x, y in zip(got.layers, fresh.layers):
        assert x.keys.shape == y.keys.shape and torch.allclose(x.keys, y.keys, atol=1e-5)
        assert torch.allclose(x.values, y.values, atol=1e-5)
    cache.get(b)
    assert cache.reused == 40 + len(b)  # a hit
    short = tuple(common[:20])  # a prefix of what is stored: cut, one position recomputed
    cache.get(short)
    assert cache.reused == 40 + len(b) + 19
    one = sum(k.nbytes + v.nbytes for k, v in cache.store[a][1])
    small = PrefixCache(pm, max_bytes=one + 1)
    small.get(a), small.get(b)
    assert list(small.store) == [b] and small.nbytes <= one + 1


def test_bf16_autocast_without_native_bf16_trains_fp32_and_says_so(tiny_base, tiny_data, tmp_path, monkeypatch, capsys):
    """On a CPU with no AVX512-BF16 or AMX, bf16 autocast is emulated (a step 30x slower): the command
    warns, trains fp32, and the adapter's record says fp32."""
    import macaronic.commands.train as cmd

    monkeypatch.setattr(cmd, "native_bf16", lambda: False)
    out = _train(tiny_base, tiny_data, tmp_path / "ad", steps=1, extra=("--autocast", "bfloat16"))
    assert "no native bf16" in capsys.readouterr().err
    assert json.loads((out / "macaronic.json").read_text())["training"]["config"]["autocast"] == "none"
    monkeypatch.setattr(cmd, "native_bf16", lambda: True)
    out = _train(tiny_base, tiny_data, tmp_path / "ad2", steps=1, extra=("--autocast", "bfloat16"))
    assert "no native bf16" not in capsys.readouterr().err
    assert json.loads((out / "macaronic.json").read_text())["training"]["config"]["autocast"] == "bfloat16"
