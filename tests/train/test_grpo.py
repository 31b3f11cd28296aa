"""GRPO raises the reward of a toy verifiable task on a tiny model."""

from __future__ import annotations

import torch

from macaronic.train.grpo import GRPOConfig, Prompt, advantages, grpo, sample
from macaronic.train.sft import TrainConfig, load_model


def test_advantages_are_group_normalized():
    a = advantages([1.0, 0.0, 0.0, 1.0])
    assert abs(sum(a)) < 1e-9 and a[0] > 0 > a[1]
    assert advantages([0.5, 0.5]) == [0.0, 0.0]  # no signal, no update


def test_reward_goes_up_on_toy_task(tmp_path, tiny_tok):
    from macaronic.testing import make_tiny_model_dir

    # A larger init: the default tiny model's logits are nearly flat whatever the hidden state.
    tiny_base = make_tiny_model_dir(tmp_path / "base", seed=11, initializer_range=0.3)
    torch.set_num_threads(1)
    lower = set("abcdefghijklmnopqrstuvwxyz")

    def reward(text: str) -> float:  # verifiable: the share of lowercase letters
        return sum(c in lower for c in text) / max(1, len(text))

    msgs = [{"role": "user", "content": "write letters"}]
    ids = tiny_tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True)
    ids = list(ids["input_ids"] if hasattr(ids, "keys") else ids)
    from macaronic.datagen.examples import user_marker

    m = user_marker(tiny_tok)
    start = max(i for i in range(len(ids) - len(m) + 1) if ids[i:i + len(m)] == m)
    prompt = Prompt(tuple(ids), start, reward, "toy")
    pm = load_model(TrainConfig(role="toy", rank=4, alpha=8), tiny_base)
    cfg = GRPOConfig(steps=14, prompts_per_step=1, group=8, max_new=6, lr=5e-2, seed=0)

    def mean_reward(seed: int) -> float:
        gen = torch.Generator().manual_seed(seed)
        outs = [sample(pm.eval(), prompt, cfg, gen, {tiny_tok.eos_token_id})[0] for _ in range(48)]
        return sum(reward(tiny_tok.decode(o, skip_special_tokens=True)) for o in outs) / len(outs)

    before = mean_reward(123)
    hist = grpo(pm, [prompt], cfg, tiny_tok, progress=False)
    after = mean_reward(123)
    assert len(hist) == 14 and all(h["rollouts"] >= 0 for h in hist)
    assert after > before + 0.15, (before, after)


def test_batched_group_matches_the_one_sequence_twins(tiny_base, tiny_tok):
    """sample_group's log-probs == group_logprobs == completion_logprobs, turn and full mode."""
    from macaronic.datagen.examples import user_marker
    from macaronic.train.grpo import completion_logprobs, group_logprobs, sample_group

    msgs = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello"}, {"role": "user", "content": "count"}]
    ids = tiny_tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True)
    ids = list(ids["input_ids"] if hasattr(ids, "keys") else ids)
    m = user_marker(tiny_tok)
    start = max(i for i in range(len(ids) - len(m) + 1) if ids[i:i + len(m)] == m)
    assert start > 0
    prompt = Prompt(tuple(ids), start, lambda t: 0.0, "p")
    pm = load_model(TrainConfig(role="toy", rank=4, alpha=8), tiny_base)
    with torch.no_grad():  # a non-zero adapter, so the modes differ
        for n, p in pm.named_parameters():
            if p.requires_grad:
                p.normal_(0, 0.05)
    for mode in ("turn", "full"):
        cfg = GRPOConfig(max_new=7, mode=mode, temperature=1.0)
        group = sample_group(pm.eval(), prompt, cfg, torch.Generator().manual_seed(3), {-1}, 3)
        comps = [c for c, _ in group]
        assert all(len(c) == 7 for c in comps) and len({tuple(c) for c in comps}) > 1
        batched = group_logprobs(pm, prompt, comps, mode)
        for (c, lps), b in zip(group, batched):
            one = completion_logprobs(pm, prompt, c, mode)
            assert torch.allclose(b, one, atol=1e-4) and torch.allclose(torch.tensor(lps), one.detach(), atol=1e-4)
        ragged = group_logprobs(pm, prompt, [comps[0][:3], comps[1]], mode)  # right padding changes nothing
        assert torch.allclose(ragged[0], batched[0][:3], atol=1e-5) and ragged[0].shape == (3,)
