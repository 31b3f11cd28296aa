"""The loss mask covers exactly the assistant messages of the current turn."""

from __future__ import annotations

import pytest

from macaronic.train.examples import Example, encode, manifest_hash, read_jsonl, user_marker
from tests.train.conftest import conv


def _target_text(tok, enc):
    return tok.decode([i for i, l in zip(enc.ids, enc.labels) if l])


def test_mask_is_current_turn_assistant_only(tiny_tok):
    enc = encode(tiny_tok, Example(tuple(conv(1))), max_len=4096)
    text = _target_text(tiny_tok, enc)
    assert text == "<tool_call>{}</tool_call><|im_end|>0 1 2<|im_end|>"
    assert "old answer" not in text and "result" not in text  # history and tool results are context
    # nothing before the turn start is a target
    assert not any(enc.labels[: enc.turn_start])


def test_turn_start_matches_engine(tiny_base, tiny_tok):
    from macaronic.engine.llm import load_llm

    llm = load_llm(tiny_base, [])
    try:
        enc = encode(tiny_tok, Example(tuple(conv(2))), max_len=4096)
        assert list(enc.ids) == llm.encode_chat(conv(2), add_generation_prompt=False)
        assert enc.turn_start == llm.turn_start(list(enc.ids)) > 0
        assert user_marker(tiny_tok) == llm._user_marker
    finally:
        llm.close()


def test_errors(tiny_tok, tmp_path):
    with pytest.raises(ValueError, match="no assistant"):
        encode(tiny_tok, Example(({"role": "user", "content": "hi"},)), max_len=100)
    with pytest.raises(ValueError, match="over max_len"):
        encode(tiny_tok, Example(tuple(conv(0))), max_len=10)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"messages": []}\nnot json\n')
    with pytest.raises(ValueError) as e:
        read_jsonl(bad)
    assert ":1:" in str(e.value) and ":2:" in str(e.value)  # every bad line is reported


def test_manifest_hash_changes_with_data():
    a = [Example(tuple(conv(0)))]
    b = [Example(tuple(conv(1)))]
    assert manifest_hash(a) == manifest_hash(list(a)) != manifest_hash(b)


def test_builders_use_train_families_only():
    from macaronic.suites import coding
    from macaronic.train.builders import build

    ex = build("coding", 30)
    fams = {e.source.split("/")[1] for e in ex}
    assert fams and all(coding.FAMILIES[f][0] == "train" for f in fams)
    agent = build("agent", 6)
    assert all(any("<tool_call>" in m["content"] for m in e.messages if m["role"] == "assistant") for e in agent)
    from macaronic.substrate.tasks import FAMILIES_BY_NAME
    assert all(FAMILIES_BY_NAME[e.source.split("/")[1]].split == "train" for e in agent)
