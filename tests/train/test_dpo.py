"""`macaronic train dpo`: the DPO loss, pair files, and a run on a tiny model that learns to prefer."""

from __future__ import annotations

import json
import math

import pytest
import torch

from macaronic.commands.train_dpo import main
from macaronic.train.dpo import dpo_loss, pair_from_dict

SYSTEM = {"role": "system", "content": "You are a tiny test assistant."}


def _pairs(path, n=4):
    rows = [{"messages": [SYSTEM, {"role": "user", "content": f"say yes {i}"}],
             "chosen": "yes yes yes", "rejected": "no thanks"} for i in range(n)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _history(out):
    return [json.loads(x) for x in (out / "history.jsonl").read_text().splitlines()]


def test_the_loss_is_the_papers_sigmoid_loss():
    pc, pr = torch.tensor(-3.0, requires_grad=True), torch.tensor(-5.0, requires_grad=True)
    loss = dpo_loss(pc, pr, -4.0, -4.0, 0.5)
    # -log σ(β((pc − rc) − (pr − rr))) = -log σ(0.5 · (1 − (−1))) = log(1 + e^−1)
    assert loss.item() == pytest.approx(math.log1p(math.exp(-1.0)), rel=1e-6)
    loss.backward()
    assert pc.grad < 0 < pr.grad  # lower loss: the chosen reply up, the rejected one down
    assert dpo_loss(torch.tensor(-2.0), torch.tensor(-2.0), -2.0, -2.0, 0.1).item() == pytest.approx(math.log(2))


@pytest.mark.parametrize("row,msg", [
    ({"messages": [{"role": "user", "content": "hi"}], "chosen": "a"}, "missing 'rejected'"),
    ({"messages": [{"role": "user", "content": "hi"}], "chosen": "a", "rejected": "a"}, "the same reply"),
    ({"messages": [{"role": "user", "content": "hi"}], "chosen": ["a"], "rejected": "b"}, "must be strings"),
    ({"messages": [{"role": "assistant", "content": "hi"}], "chosen": "a", "rejected": "b"}, "end with the user turn"),
])
def test_a_bad_pair_is_refused_clearly(row, msg):
    with pytest.raises(ValueError, match=msg):
        pair_from_dict(row)


def test_a_bad_line_names_its_line_and_writes_nothing(tiny_base, tmp_path, capsys):
    data = _pairs(tmp_path / "pairs.jsonl")
    data.write_text(data.read_text() + '{"messages": [], "chosen": "x"}\n')
    out = tmp_path / "out"
    assert main(["chat", "--data", str(data), "--out", str(out), "--base", str(tiny_base), "--no-progress"]) == 2
    assert "pairs.jsonl:5" in capsys.readouterr().err and not out.exists()


@pytest.mark.parametrize("activation", ["user", "assistant"])
def test_dpo_prefers_the_chosen_reply_and_resumes(tiny_base, tmp_path, activation):
    data = _pairs(tmp_path / "pairs.jsonl")
    out = tmp_path / activation
    args = ["chat", "--data", str(data), "--out", str(out), "--base", str(tiny_base), "--steps", "12", "--batch", "2",
            "--lr", "2e-2", "--beta", "0.5", "--dtype", "float32", "--activation", activation, "--save-every", "6",
            "--no-progress"]
    assert main([*args, "--stop-after", "6"]) == 0
    assert main([*args, "--resume", "--beta", "0.3"]) == 2  # another objective does not resume this one
    assert main([*args, "--resume"]) == 0  # continues from the step-6 checkpoint
    h = _history(out)
    assert [r["step"] for r in h] == list(range(1, 13))
    assert h[0]["loss"] == pytest.approx(math.log(2), abs=1e-4)  # a fresh LoRA is the reference
    assert h[6]["margin"] > h[0]["margin"] and h[-1]["loss"] < 0.3 and h[-1]["margin"] > 1.0 and h[-1]["accuracy"] == 1.0
    meta = json.loads((out / "macaronic.json").read_text())
    assert meta["training"]["method"] == "dpo" and meta["activation"] == activation
    assert meta["data"]["objective"] == {"dpo": {"beta": 0.5, "sft_weight": 0.0}} and meta["data"]["pairs"] == 4
    assert len((out / "pairs.jsonl").read_text().splitlines()) == 4

    # the saved adapter, loaded as the engine loads it, scores the chosen reply above the rejected one
    from macaronic.datagen.examples import encode_all
    from macaronic.engine.llm import load_tokenizer
    from macaronic.train.dpo import Pair
    from macaronic.train.sft import TrainConfig, adapter_start, init_from, load_model, turn_logits

    tok = load_tokenizer(tiny_base)
    pm = load_model(TrainConfig(role="chat", rank=8, alpha=16.0), tiny_base)
    init_from(pm, out)
    p = pair_from_dict(json.loads(data.read_text().splitlines()[0]))
    if activation == "assistant":
        from macaronic.train.builders import at_answer

        p = Pair(*at_answer([p.chosen, p.rejected], "chat"))
    (c, r), _ = encode_all(tok, [p.chosen, p.rejected], 2048)

    def logp(ex):
        lg = torch.log_softmax(turn_logits(pm, list(ex.ids), adapter_start(ex, "turn", activation)).float(), -1)
        return sum(lg[j - 1, ex.ids[j]].item() for j in range(1, len(ex.ids)) if ex.labels[j])

    with torch.no_grad():
        trained = logp(c) - logp(r)
        with pm.disable_adapter():
            bare = logp(c) - logp(r)
    assert trained > bare + 2.0


def test_at_the_assistant_header_the_pairs_lose_the_role_instruction_as_served(tiny_base, tmp_path):
    from macaronic.prompts import role_instruction
    from macaronic.train.builders import _bundle, role_prompt_head

    ins = role_instruction(_bundle(), "chat")
    assert ins is not None
    rows = [{"messages": [*role_prompt_head("chat"), {"role": "user", "content": f"say yes {i}"}],
             "chosen": "yes", "rejected": "no"} for i in range(2)]
    data = tmp_path / "pairs.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    for activation, kept in (("user", True), ("assistant", False)):
        out = tmp_path / activation
        assert main(["chat", "--data", str(data), "--out", str(out), "--base", str(tiny_base), "--steps", "1",
                     "--batch", "2", "--activation", activation, "--dtype", "float32", "--no-progress"]) == 0
        saved = [json.loads(x) for x in (out / "pairs.jsonl").read_text().splitlines()]
        assert all((ins in r["messages"]) == kept and r["messages"][-1]["content"].startswith("say yes") for r in saved)


def test_a_bad_beta_or_nothing_that_fits_writes_nothing(tiny_base, tmp_path, capsys):
    data = _pairs(tmp_path / "pairs.jsonl")
    for extra, msg in ((["--beta", "0"], "--beta must be positive"), (["--max-turn", "2"], "none of the 4 pairs fits")):
        out = tmp_path / "out"
        assert main(["chat", "--data", str(data), "--out", str(out), "--base", str(tiny_base), "--no-progress", *extra]) == 2
        assert msg in capsys.readouterr().err and not out.exists()


def test_the_shipped_default_base_chat_adapter_rebuilds_from_its_recorded_pairs():
    """The served chat adapter of the default base names its pairs by generator; the committed chat
    engine rows rebuild exactly the pairs it trained on (its manifest hash), at its activation."""
    import argparse
    import json

    from macaronic.commands.train_dpo import load_pairs
    from macaronic.datagen.examples import manifest_hash
    from macaronic.engine.llm import shipped_adapters_dir

    meta = json.loads((shipped_adapters_dir("qwen2.5-coder-0.5b") / "chat" / "macaronic.json").read_text())
    cfg = meta["training"]
    assert meta["data"]["source"].startswith("pairs:") and meta["activation"] == "assistant"
    args = argparse.Namespace(data=None, pairs=meta["data"]["source"].removeprefix("pairs:"), role="chat",
                              seed=cfg["config"]["seed"], activation=meta["activation"])
    pairs, source = load_pairs(args)
    examples = [x for p in pairs for x in (p.chosen, p.rejected)]
    assert source == meta["data"]["source"] and len(pairs) == meta["data"]["pairs"]
    assert manifest_hash(examples) == meta["data"]["manifest_sha256"]


def test_generators_combine_and_an_on_policy_round_pairs_the_adapters_own_replies(tmp_path, capsys):
    """`--pairs a,b` concatenates generators (an unknown name is refused before anything is written);
    `chat_onpolicy` pairs the committed round of the first DPO chat adapter: its own failed greedy
    reply against its own kept one, every row of that file sampled from that adapter."""
    import argparse
    from pathlib import Path

    from macaronic.commands.train_dpo import load_pairs
    from macaronic.engine.adapters import dir_sha256
    from macaronic.train.builders import ONPOLICY_ROUNDS, chat_engine_pairs, chat_onpolicy_pairs
    from macaronic.train.chat_rs import onpolicy_path, read

    # the round was sampled from the first DPO adapter (shipped, then replaced by the one trained on it)
    chat_id = dir_sha256(Path(__file__).resolve().parents[2] / "pairs" / "chat-dpo2-qwen" / "adapters" / "chat")
    assert chat_id[:8] in ONPOLICY_ROUNDS
    rows = read(onpolicy_path(chat_id))
    assert rows and all(r["adapter"] == chat_id for r in rows)
    greedy = {r["prompt"]: r.get("greedy") for r in rows}
    mine = chat_onpolicy_pairs()
    assert mine and all(p.rejected.messages[-1]["content"] == greedy[p.chosen.messages[-2]["content"]] for p in mine)

    def args(pairs):
        return argparse.Namespace(data=None, pairs=pairs, role="chat", seed=0, activation="user")

    both, source = load_pairs(args("chat_engine, chat_onpolicy"))
    assert source == "pairs:chat_engine,chat_onpolicy" and len(both) == len(chat_engine_pairs()) + len(mine)
    with pytest.raises(ValueError, match="unknown pair generator nope"):
        load_pairs(args("chat_engine,nope"))
    out = tmp_path / "out"
    assert main(["chat", "--pairs", "nope", "--out", str(out), "--no-progress"]) == 2
    assert "unknown pair generator" in capsys.readouterr().err and not out.exists()
