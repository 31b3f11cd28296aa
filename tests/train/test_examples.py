"""The loss mask covers exactly the assistant messages of the current turn."""

from __future__ import annotations

import pytest

from macaronic.datagen.examples import Example, encode, manifest_hash, read_jsonl, user_marker
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


# A template that renders tool results as a *user* message wrapped in <tool_response> (as Qwen2.5's
# does): the turn must still start at the latest message whose role is user, in training and serving.
QWEN_LIKE = (
    "{%- for m in messages %}{%- if m.role == 'tool' %}"
    "{%- if loop.index0 == 0 or messages[loop.index0 - 1].role != 'tool' %}{{ '<|im_start|>user' }}{%- endif %}"
    "{{ '\\n<tool_response>\\n' + m.content + '\\n</tool_response>' }}"
    "{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}{{ '<|im_end|>\\n' }}{%- endif %}"
    "{%- else %}{{ '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{%- endif %}"
)


def _agent_episode():
    from macaronic.prompts import rendered, tool_result_message

    return [{"role": "system", "content": "sys"}, {"role": "user", "content": "old question"},
            {"role": "assistant", "content": "old answer"}, {"role": "user", "content": "refund order 7"},
            {"role": "assistant", "content": "<tool_call>{\"name\": \"refund\"}</tool_call>"},
            rendered(tool_result_message({"ok": True})), rendered(tool_result_message({"id": 7})),
            {"role": "assistant", "content": "Refunded."}]


def test_tool_results_rendered_as_user_turns_do_not_start_a_turn():
    from macaronic.engine.llm import TurnRule
    from macaronic.prompts import encode as render
    from macaronic.testing import tiny_tokenizer

    tok = tiny_tokenizer()
    tok.chat_template = QWEN_LIKE
    rule = TurnRule(tok)
    assert rule.tool_header is not None and rule.tool_header[: len(rule.marker)] == rule.marker
    msgs = _agent_episode()
    enc = encode(tok, Example(tuple(msgs)), max_len=4096)
    assert tok.decode(list(enc.ids[enc.turn_start:])).startswith("<|im_start|>user\nrefund order 7")
    text = _target_text(tok, enc)
    assert text.startswith("<tool_call>") and text.endswith("Refunded.<|im_end|>")  # the call is trained
    assert not any(enc.labels[: enc.turn_start])
    # serving finds the same start on the prompt of the step after the tool results
    served = render(tok, msgs[:-1])
    assert rule.start(served) == enc.turn_start
    # each result is wrapped once: the template's wrapper, not the layout's as well
    full = tok.decode(list(enc.ids))
    assert full.count("<tool_response>") == 2 and "<tool_response>\n<tool_response>" not in full
    # a plain ChatML template (tool results under their own header) keeps the old rule and layout
    plain = tiny_tokenizer()
    assert TurnRule(plain).tool_header is None
    enc2 = encode(plain, Example(tuple(msgs)), max_len=4096)
    assert plain.decode(list(enc2.ids)).count("<tool_response>") == 2
    assert plain.decode(list(enc2.ids[enc2.turn_start:])).startswith("<|im_start|>user\nrefund order 7")


def test_call_markers_held_as_added_tokens_are_spelled_out():
    """A vocabulary with `<tool_call>`/`</tool_call>` as added tokens (Qwen2.5's, whose rows the
    model never learned) gets them as ordinary tokens, in prompts and in training targets alike."""
    from macaronic.prompts import encode as render
    from macaronic.prompts import spelled_markers
    from macaronic.testing import tiny_tokenizer

    tok = tiny_tokenizer()
    tok.add_tokens(["<tool_call>", "</tool_call>"])
    dead = {tok.convert_tokens_to_ids("<tool_call>"), tok.convert_tokens_to_ids("</tool_call>")}
    assert set(spelled_markers(tok)) == dead
    msgs = _agent_episode()
    ids = render(tok, msgs)
    assert not dead & set(ids) and tok.decode(ids).count("<tool_call>") == 1
    enc = encode(tok, Example(tuple(msgs)), max_len=4096)
    assert not dead & set(enc.ids) and _target_text(tok, enc).startswith("<tool_call>")
    assert spelled_markers(tiny_tokenizer()) == {}  # a vocabulary without them is unchanged
