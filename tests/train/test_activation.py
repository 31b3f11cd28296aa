"""An adapter activated at the assistant header: the trainer's forward is the served one, and the
user turn's K/V are the bare base's, so another adapter (or the router) reuses them."""

from __future__ import annotations

import json

import pytest
import torch

from macaronic.commands.train import main
from tests.engine.test_engine import Recorder
from tests.train.conftest import conv


@pytest.fixture(scope="module")
def trained(tiny_base, tiny_data, tmp_path_factory):
    out = tmp_path_factory.mktemp("activation") / "asst"
    rc = main(["chat", "--data", str(tiny_data), "--out", str(out), "--base", str(tiny_base), "--steps", "3",
               "--batch", "2", "--lr", "5e-2", "--mode", "turn", "--activation", "assistant", "--dtype", "float32",
               "--no-progress"])
    assert rc == 0
    return out


def test_the_rule_finds_the_turns_first_assistant_header(tiny_tok, tiny_data):
    from macaronic.datagen.examples import encode_all, read_jsonl
    from macaronic.engine.llm import TurnRule

    rule = TurnRule(tiny_tok)
    enc, _ = encode_all(tiny_tok, read_jsonl(tiny_data), 4096)
    for e in enc:
        ids = list(e.ids)
        assert e.turn_start < e.answer_start == rule.active_from(ids, "assistant")
        assert tiny_tok.decode(ids[e.turn_start:e.answer_start]).startswith("<|im_start|>user\ncount to")
        assert tiny_tok.decode(ids[e.answer_start:]).startswith("<|im_start|>assistant\n<tool_call>")
        assert not any(e.labels[: e.answer_start + 1])  # every target is predicted with the adapter on
    served = tiny_tok.apply_chat_template(list(read_jsonl(tiny_data)[0].messages[:4]), tokenize=False,
                                          add_generation_prompt=True)  # history, then a user turn
    sids = tiny_tok.encode(served, add_special_tokens=False)
    head = rule.answer_start(sids)  # the generation prompt's header, not the history's assistant message
    assert tiny_tok.decode(sids[head:]) == "<|im_start|>assistant\n"


def test_manifest_and_engine_read_the_activation(trained, tiny_base):
    from macaronic.engine.adapters import AdapterError, read_adapter
    from macaronic.engine.config import ModelArgs
    from macaronic.engine.llm import assistant_marker_ids, load_llm

    meta = json.loads((trained / "macaronic.json").read_text())
    assert meta["mode"] == "turn" and meta["activation"] == "assistant"
    assert meta["training"]["config"]["activation"] == "assistant"
    llm = load_llm(tiny_base, [trained])
    try:
        cfg = json.loads((trained / "adapter_config.json").read_text())
        assert cfg["alora_invocation_tokens"] == assistant_marker_ids(llm.tokenizer)
        info = llm.adapters.get(trained.name)
        assert info.activation == "assistant" and info.public()["activation"] == "assistant"
    finally:
        llm.close()
    meta["mode"] = "full"  # an activation point means nothing without the turn rule: refused
    (trained.parent / "bad").mkdir(exist_ok=True)
    (trained.parent / "bad" / "adapter_model.safetensors").write_bytes((trained / "adapter_model.safetensors").read_bytes())
    (trained.parent / "bad" / "adapter_config.json").write_text(json.dumps({k: v for k, v in cfg.items()
                                                                           if k != "alora_invocation_tokens"}))
    (trained.parent / "bad" / "macaronic.json").write_text(json.dumps(meta))
    with pytest.raises(AdapterError, match="activation 'assistant' is for mode 'turn'"):
        read_adapter(trained.parent / "bad", ModelArgs.from_dir(tiny_base))


def test_trainer_forward_is_the_served_forward(trained, tiny_base):
    """Served: the engine's prefill of a chat request on the adapter (active_from from the manifest),
    its first sampled logits; trained: `turn_logits` at the example's answer_start, the trainer's
    own PEFT model with the saved weights. PEFT's aLoRA (invocation = the assistant header) agrees."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from macaronic.datagen.examples import Example, encode
    from macaronic.engine.llm import load_llm
    from macaronic.engine.sampling import SamplingParams
    from macaronic.train.sft import TrainConfig, init_from, load_model, turn_logits

    llm = load_llm(tiny_base, [trained])
    try:
        msgs = conv(4)[:4]  # history, then the user turn; the engine adds the generation prompt
        ids = llm.encode_chat(msgs)
        req = llm.request(ids, trained.name)
        enc = encode(llm.tokenizer, Example(tuple(conv(4)[:5])), 4096)  # the same turn with its reply
        assert req.active_from == enc.answer_start > llm.turn_start(ids)
        assert list(enc.ids[: len(ids)]) == ids
        rec = Recorder()
        h = llm.submit(ids, trained.name, SamplingParams(temperature=0.0, max_tokens=1), logits_processor=rec)
        h.result()
        served = rec.logits[0].float()

        pm = load_model(TrainConfig(role="chat", save_every=0), tiny_base)
        init_from(pm, trained)
        mine = turn_logits(pm.eval(), ids, enc.answer_start)  # [T, V]
        assert (mine[-1] - served).abs().max().item() <= 1e-4
        scratch = llm.score(ids, [None] * req.active_from + [trained.name] * (len(ids) - req.active_from))
        assert (mine - scratch).abs().max().item() <= 1e-4
        base = llm.score(ids, None)
        assert torch.equal(scratch[: req.active_from], base[: req.active_from])  # the user turn is the base's
        assert (scratch[-1] - base[-1]).abs().max().item() > 1e-3  # training moved the reply

        peft = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tiny_base, dtype=torch.float32),
                                         str(trained)).eval()
        with torch.no_grad():
            ref = peft(input_ids=torch.tensor([ids])).logits[0]
        assert (ref - scratch).abs().max().item() <= 1e-4
    finally:
        llm.close()


def test_user_turn_kv_is_the_bare_base_and_is_shared(trained, tiny_base, tmp_path):
    """A turn answered by the assistant-activated adapter leaves the user turn's K/V in the cache
    exactly as the bare base computes them: another assistant-activated adapter answering the same
    turn reuses every position before the assistant header and computes only from there."""
    import shutil

    from macaronic.engine.kvcache import BASE
    from macaronic.engine.kvpool import KVBuffer
    from macaronic.engine.llm import load_llm
    from macaronic.engine.model import SeqSlice
    from macaronic.engine.sampling import SamplingParams

    other = shutil.copytree(trained, tmp_path / "other")
    meta = json.loads((other / "macaronic.json").read_text())
    (other / "macaronic.json").write_text(json.dumps({**meta, "description": "another adapter"}))  # another id
    llm = load_llm(tiny_base, [trained, other])
    try:
        assert llm.adapters.get("other").id != llm.adapters.get(trained.name).id
        ids = llm.encode_chat(conv(2)[:4])
        a = llm.request(ids, trained.name).active_from
        h = llm.submit(ids, trained.name, SamplingParams(temperature=0.0, max_tokens=4))
        h.result()
        entry = max(llm.engine.cache._entries.values(), key=lambda e: len(e.tokens))
        assert list(entry.tokens[: len(ids)]) == ids
        assert (entry.labels[:a] == BASE).all() and (entry.labels[a:] != BASE).all()
        kv = KVBuffer(llm.args, len(ids), llm.base.model.dtype)
        with torch.inference_mode():
            llm.base.model(torch.tensor(ids), [SeqSlice(kv, len(ids))], logits="last")
        assert torch.equal(entry.kv.k[:, :, :a], kv.k[:, :, :a])  # k, v: [L, n_kv, T, head_dim]
        assert torch.equal(entry.kv.v[:, :, :a], kv.v[:, :, :a])
        assert not torch.equal(entry.kv.k[:, :, a:len(ids)], kv.k[:, :, a:])  # the reply's are the adapter's
        h2 = llm.submit(ids, "other", SamplingParams(temperature=0.0, max_tokens=1))
        h2.result()
        assert h2.usage["reused_tokens"] == a and h2.usage["prefill_tokens"] == len(ids) - a
    finally:
        llm.close()



def test_a_pair_renders_no_instruction_before_a_turn_its_adapter_answers_from_the_assistant_header(trained, tiny_base):
    """The served layout under the assistant-header rule: the role adds no instruction before the user
    turn, so the turn up to the assistant header is the bare base's layout, the same in every role (one
    prefill any specialist continues and the router can read); the contract's runner renders the same."""
    from macaronic.contract.runner import LocalRunner
    from macaronic.engine.llm import load_llm
    from macaronic.harness import load_bundle
    from macaronic.prompts import conversation
    from macaronic.serve.mol import MoL

    b = load_bundle()
    assert b.role("chat").system_prompt  # the bundle's own chat instruction, left out below
    llm = load_llm(tiny_base, [])
    llm.add_adapter(trained, name="chat")  # as the contract's runner registers a pair's adapters: by role
    try:
        mol = MoL.from_llm(llm, b)
        assert mol.adapter_for_role("chat") == "chat" and mol.backend.adapters()["chat"].activation == "assistant"
        assert mol.bundle.role("chat").system_prompt == "" and mol.bundle.id == b.id
        assert mol.bundle.role("genui").system_prompt == b.role("genui").system_prompt  # no adapter: as before
        msgs = [{"role": "user", "content": "Name three rivers."}]
        assert conversation(mol.bundle, "chat", msgs) == [conversation(b, None, msgs)[0], msgs[0]]
        runner = type("Shim", (), {"bundle": b, "llm": llm})()
        assert LocalRunner.prompt(runner, msgs, "chat", None) == conversation(mol.bundle, "chat", msgs)
    finally:
        llm.close()


def test_training_data_at_the_assistant_header_lose_the_role_instruction_as_serving_does():
    """`macaronic train --activation assistant` trains on the layout the pair serves that adapter with:
    the role's instruction before each user turn it answers is left out (`builders.at_answer`), the
    header and everything else kept; applying it twice changes nothing."""
    from macaronic.harness import load_bundle
    from macaronic.prompts import conversation
    from macaronic.train.builders import at_answer, build

    examples = build("genui_engine_compose", 3, seed=7)
    got = at_answer(examples, "genui")
    ins = load_bundle().role("genui").system_prompt.strip()
    for ex, new in zip(examples, got):
        assert sum(m["content"] == ins for m in ex.messages) == 1
        assert [m for m in ex.messages if m["content"] != ins] == list(new.messages)
        served = conversation(load_bundle().served(["genui"], ["genui"]), "genui", list(new.messages[1:-1]))
        assert served == list(new.messages[:-1])  # the served layout, byte for byte
    assert at_answer(got, "genui") == got


def test_macaronic_train_at_the_assistant_header_reads_its_data_without_the_instruction(tmp_path):
    """`macaronic train --activation assistant` lays out what it reads (a data file or a generator) as
    the pair will serve it; `--activation user` reads it as it is."""
    from argparse import Namespace

    from macaronic.commands.train import load_examples
    from macaronic.datagen.examples import write_jsonl
    from macaronic.harness import load_bundle
    from macaronic.train.builders import build

    ins = load_bundle().role("genui").system_prompt.strip()
    data = tmp_path / "genui.jsonl"
    write_jsonl(data, build("genui_engine_compose", 2, seed=3))
    for kw in ({"data": data}, {"data": None, "generator": "genui_engine_compose", "examples": 2, "seed": 3,
                                "base": "qwen2.5-coder-0.5b"}):
        as_is, _ = load_examples(Namespace(role="genui", activation="user", **kw))
        at, _ = load_examples(Namespace(role="genui", activation="assistant", **kw))
        assert all(any(m["content"] == ins for m in ex.messages) for ex in as_is)
        assert not any(m["content"] == ins for ex in at for m in ex.messages)
        assert [len(ex.messages) - 1 for ex in as_is] == [len(ex.messages) for ex in at]


def test_a_front_over_an_engine_reads_the_activation_and_renders_the_same_layout(trained, tiny_base):
    """`macaronic serve --engine openai://` in front of a `--engine-only` server: the engine lists the
    adapter's activation in /v1/models, the front's backend reads it, and the front's pair renders
    the turn without the role instruction, as the engine's own pair would."""
    import httpx

    from macaronic.engine.llm import load_llm
    from macaronic.harness import load_bundle
    from macaronic.serve.app import create_app
    from macaronic.serve.guard import ServeConfig
    from macaronic.serve.mol import MoL
    from macaronic.serve.remote import RemoteBackend
    from tests.serve.serve_helpers import InProcessServer

    llm = load_llm(tiny_base, [])
    llm.add_adapter(trained, name="chat")
    srv = InProcessServer(create_app(MoL.from_llm(llm, load_bundle()), ServeConfig(engine_only=True)))
    try:
        listed = {m["id"]: m["macaronic"] for m in httpx.get(srv.url + "/v1/models").json()["data"]}
        assert listed["chat"]["activation"] == "assistant"
        front = MoL(RemoteBackend("openai://" + srv.url.removeprefix("http://")), load_bundle())
        assert front.backend.adapters()["chat"].activation == "assistant"
        assert front.bundle.role("chat").system_prompt == ""
    finally:
        srv.stop()
        llm.close()
