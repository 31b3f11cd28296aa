"""The prompts a GRPO run samples from: a role's RL tasks as served first-turn prompts, each with its
reward (the role's grader through the suite registry). `macaronic train grpo` is commands/train_grpo.py."""

from __future__ import annotations


def rollout_prompt(tok, role: str, user: str) -> list[int]:
    """The token ids a rollout for `role` starts from: the served prompt of a first turn (the one
    renderer, with the substrate's tools for agent, as the SFT data has them)."""
    from macaronic.prompts import encode
    from macaronic.train import builders

    return encode(tok, builders._conv(role, user), add_generation_prompt=True)


def prompts_for(role: str, llm_tok, n: int, seed: int):
    from macaronic.suites.registry import suite
    from macaronic.datagen.examples import TurnRule

    rule = TurnRule(llm_tok)
    s = suite(role)
    tasks = s.rl_tasks(n, seed)
    user = [s.user(t) for t in tasks]
    rew = [lambda text, t=t: s.reward(s.grade(t, text)) for t in tasks]
    from macaronic.train.grpo import Prompt

    out = []
    for u, r, t in zip(user, rew, tasks):
        ids = rollout_prompt(llm_tok, role, u)
        start = rule.start(ids)
        out.append(Prompt(tuple(ids), start, r, getattr(t, "id", "")))
    return out
