"""One renderer: serving, the SFT trainer, RFT, GRPO and the contract runner give byte-identical
prompt token ids for the same turn (a first turn, and an agent step after a tool result), and the
shipped specialists' training data still renders as it was recorded."""

from __future__ import annotations

import json

import pytest

from macaronic.testing import make_random_adapter, make_tiny_model_dir

TOOL_RESULT = {"events": [{"id": 3, "title": "Dentist", "start": "2026-12-02T09:00"}]}
CALL = '<tool_call>{"name": "list_events", "arguments": {}}</tool_call>'


@pytest.fixture(scope="module")
def runner(tmp_path_factory):
    from macaronic.contract.runner import HarnessRunner
    from macaronic.engine.config import ModelArgs
    from macaronic.harness import DEFAULT_BUNDLE
    from macaronic.pairs import PairManifest

    root = tmp_path_factory.mktemp("renderer")
    base = make_tiny_model_dir(root / "base", seed=7, max_position_embeddings=8192)
    args = ModelArgs.from_dir(base)
    ads = {r: make_random_adapter(root / r, args, seed=i + 1, mode="turn", role=r)
           for i, r in enumerate(["chat", "agent", "coding", "genui"])}
    r = HarnessRunner(PairManifest.build(base, ads, DEFAULT_BUNDLE))
    yield r
    r.close()


def _prompt_part(tok, messages: list[dict]) -> list[int]:
    """The SFT trainer's ids before its last target (what the model is trained to continue)."""
    from macaronic.datagen.examples import Example, encode

    enc = encode(tok, Example(tuple(messages)), 100_000)
    last = max(i for i, t in enumerate(enc.labels) if t and not enc.labels[i - 1])
    return list(enc.ids[:last])


@pytest.mark.parametrize("role", ["agent", "chat"])
def test_first_turn_prompt_ids_agree_everywhere(runner, role):
    from macaronic.contract.runner import LocalRunner
    from macaronic.evolve.successor import successes
    from macaronic.substrate.tools import openai_tools
    from macaronic.train import builders
    from macaronic.train.rollouts import rollout_prompt

    tok, llm = runner.llm.tokenizer, runner.llm
    user, reply = "What is on my calendar tomorrow?", "Nothing yet."
    tools = openai_tools() if role == "agent" else None
    # serving: the harness's view as the engine encodes it (and the prompt length it reports)
    served = runner.mol.turn([{"role": "user", "content": user}], tools=tools, model=role,
                             sampling={"max_tokens": 1, "seed": 0})
    serve_ids = llm.encode_chat(served.view)
    assert served.usage["prompt_tokens"] == len(serve_ids)
    # the SFT trainer (train/builders + datagen/examples)
    train_ids = _prompt_part(tok, list(builders._conv(role, user, {"role": "assistant", "content": reply})))
    # RFT: a graded success from experience, rendered by the successor builder
    contract = _Contract(role)
    (ex,) = successes(contract, runner.bundle, [{"suite": role, "family": "f", "passed": True,
                                                 "messages": [{"role": "user", "content": user},
                                                              {"role": "assistant", "content": reply}]}])[role]
    rft_ids = _prompt_part(tok, ex["messages"])
    # GRPO's rollout prompt, and the contract runner's direct path
    grpo_ids = rollout_prompt(tok, role, user)
    local = LocalRunner.prompt(runner, [{"role": "user", "content": user}], role,
                               tools if role == "agent" else None)
    runner_ids = llm.encode_chat(local)
    r = LocalRunner.reply(runner, [{"role": "user", "content": user}], role, seed=0, max_tokens=1)
    assert r.tokens == len(runner_ids) + 1
    assert serve_ids == train_ids == rft_ids == grpo_ids == runner_ids
    text = tok.decode(serve_ids)
    assert ("Call a tool with <tool_call>" in text) == (role == "agent") and "<tools>" not in text


def test_agent_step_after_a_tool_result_agrees(runner):
    """The second model turn of an agent episode: the call, then the result wrapped once."""
    from macaronic.contract.runner import LocalRunner
    from macaronic.evolve.successor import successes
    from macaronic.prompts import tool_result_message
    from macaronic.substrate.toolcalls import format_tool_result
    from macaronic.substrate.tools import openai_tools
    from macaronic.train import builders

    tok, llm = runner.llm.tokenizer, runner.llm
    user = "What is on my calendar?"
    episode = [{"role": "user", "content": user}, {"role": "assistant", "content": CALL},
               tool_result_message(TOOL_RESULT)]
    served = runner.mol.turn(episode, tools=openai_tools(), model="agent", sampling={"max_tokens": 1, "seed": 0})
    serve_ids = llm.encode_chat(served.view)
    # the trainer's agent episodes carry the result already formatted (train/builders.agent_turns)
    train = list(builders._conv("agent", user, {"role": "assistant", "content": CALL},
                                {"role": "tool", "content": format_tool_result(TOOL_RESULT)},
                                {"role": "assistant", "content": "Dentist at 9."}))
    (ex,) = successes(_Contract("agent"), runner.bundle,
                      [{"suite": "agent", "family": "f", "passed": True,
                        "messages": episode + [{"role": "assistant", "content": "Dentist at 9."}]}])["agent"]
    runner_ids = llm.encode_chat(LocalRunner.prompt(runner, episode, "agent", openai_tools()))
    assert serve_ids == _prompt_part(tok, train) == _prompt_part(tok, ex["messages"]) == runner_ids
    assert "<tool_response><tool_response>" not in tok.decode(serve_ids)  # wrapped once


def test_the_contract_runner_sends_tool_results_as_a_client_does():
    from macaronic.prompts import render_tool, tool_result_message
    from macaronic.substrate.toolcalls import format_tool_result

    m = tool_result_message(TOOL_RESULT)
    assert json.loads(m["content"]) == TOOL_RESULT and render_tool(m) == format_tool_result(TOOL_RESULT)


# The identity the shipped SmolLM2 specialists were trained under (the harness's until 2026-12-03,
# when the identity stopped describing the system: docs/LOG.md).
TRAINED_IDENTITY = """You are Macaronic, an open Mixture-of-LoRA assistant. You run on a small frozen base language
model with four specialist LoRA adapters: chat (conversation and general knowledge), agent
(acting on the user's calendar, reminders, contacts, notes and orders through tools), coding
(code of every kind, web pages included) and genui (interactive cards and UI widgets). A router
picks exactly one specialist for each user turn. Be accurate, say when you are unsure, and never
claim to be a different system.
"""
TRAINED_CHAT_INSTRUCTION = """Answer conversationally and concisely. Explain ideas in plain words, and say so when a
question is outside what you know."""


def test_shipped_chat_data_still_renders_as_recorded(monkeypatch):
    """The shipped chat specialist was trained on this layout: its recorded data manifest rebuilds
    (under the identity and chat instruction it was trained with)."""
    import dataclasses

    from macaronic.engine.llm import shipped_adapters_dir
    from macaronic.harness import load_bundle
    from macaronic.train import builders
    from macaronic.train.builders import build
    from macaronic.datagen.examples import manifest_hash

    def trained_bundle():
        b = load_bundle()
        roles = tuple(dataclasses.replace(r, system_prompt=TRAINED_CHAT_INSTRUCTION) if r.name == "chat" else r
                      for r in b.roles)
        return dataclasses.replace(b, identity=TRAINED_IDENTITY, roles=roles)

    monkeypatch.setattr(builders, "_bundle", trained_bundle)

    meta = json.loads((shipped_adapters_dir() / "chat" / "macaronic.json").read_text())
    seed = meta["training"]["config"].get("seed", 0)
    assert meta["data"]["source"] == "generator:chat"
    assert manifest_hash(build("chat", meta["data"]["examples"], seed)) == meta["data"]["manifest_sha256"]


class _Contract:
    def __init__(self, role):
        self.role = role

    def suite(self, name):
        class S:
            kind, role = name, self.role
        return S()


def test_shipped_qwen_genui_data_rebuilds_as_recorded():
    """The default base's GenUI specialist was trained on the GenUI data engine's examples (2026-12-04,
    the first nine intents), warm-started on every intent (2026-12-05), then on the composing engine
    (2026-12-06): every recorded data manifest rebuilds from the generator, count and seed it names."""
    from macaronic.datagen.examples import manifest_hash
    from macaronic.engine.llm import shipped_adapters_dir
    from macaronic.train.builders import build

    meta = json.loads((shipped_adapters_dir("qwen2.5-coder-0.5b") / "genui" / "macaronic.json").read_text())
    record, chain = meta, []
    while record is not None:
        training = record.get("training", record)  # a nested init record holds its config at its top
        data, config = record["data"], training["config"]
        generator = data["source"].removeprefix("generator:")
        assert manifest_hash(build(generator, data["examples"], config.get("seed", 0), base="qwen2.5-coder-0.5b")) == \
            data["manifest_sha256"], generator
        chain.append(generator)
        record = training.get("init")
    assert chain == ["genui_engine_compose", "genui_engine_wide", "genui_engine"]
