"""The per-turn harness without HTTP: views, routing rules, memory, summaries, KV reuse, parsing."""

from __future__ import annotations

import json

import pytest

from macaronic.genui.build import Card
from macaronic.harness import load_bundle
from macaronic.serve import views
from macaronic.pairs.ids import pair_id
from macaronic.serve.mol import HarnessConfig, MoL, TurnError

GREEDY = {"temperature": 0.0, "max_tokens": 6}
TOOLS = [{"type": "function", "function": {
    "name": "create_reminder", "description": "Create a reminder",
    "parameters": {"type": "object", "properties": {"text": {"type": "string"}, "due": {"type": "string"}},
                   "required": ["text"]}}}]


def card_reply() -> str:
    c = Card("s1")
    c.column("root", c.text("title", "Lunch?"), c.button("ok", "Confirm", "confirm", {"slot": "noon"}))
    # compact, as the genui specialist writes (train.builders.genui_reply) and its grammar admits
    return json.dumps({"text_response": "Here is a card.", "a2ui": c.messages("root")}, separators=(",", ":"))


# ---- views (pure) ----

def test_layout_puts_role_instructions_before_each_user_turn():
    b = load_bundle()
    msgs = views.normalize_messages([
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": "u1"},
        {"role": "assistant", "content": "a1", "adapter": "chat", "specialist": "chat"},
        {"role": "user", "content": "u2"}])
    v = views.build_view(msgs, b, adapter="coding", mode="turn", specialist="coding")
    assert v[0]["role"] == "system" and v[0]["content"].startswith(b.identity.strip()) and "Be brief." in v[0]["content"]
    assert [m["role"] for m in v] == ["system", "system", "user", "assistant", "system", "user"]
    assert v[1]["content"] == b.role("chat").system_prompt.strip()
    assert v[4]["content"] == b.role("coding").system_prompt.strip()
    # the top of the prompt does not depend on who answers: a turn-mode switch keeps the history
    v2 = views.build_view(msgs, b, adapter="chat", mode="turn", specialist="chat")
    assert v2[:4] == v[:4]


def test_full_mode_own_view_folds_other_segments_into_summaries():
    b = load_bundle()
    msgs = views.normalize_messages([
        {"role": "user", "content": "remind me"},
        {"role": "assistant", "content": None, "adapter": "agent", "specialist": "agent",
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "x", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "{\"ok\": true}"},
        {"role": "assistant", "content": "Done.", "adapter": "agent", "specialist": "agent",
         "summary": "Agent created a reminder."},
        {"role": "user", "content": "now a card"},
        {"role": "assistant", "content": "{card}", "adapter": "genui", "specialist": "genui"},
        {"role": "user", "content": "again"}])
    v = views.build_view(msgs, b, adapter="genui", mode="full", specialist="genui")
    texts = [m["content"] for m in v]
    assert "[agent specialist, summarized] Agent created a reminder." in texts
    assert "Done." not in texts and not any("<tool_response>" in t for t in texts)
    assert "{card}" in texts  # its own segment stays verbatim
    turn = views.build_view(msgs, b, adapter="genui", mode="turn", specialist="genui")
    assert "Done." in [m["content"] for m in turn]
    assert any(m["role"] == "tool" and m["content"].startswith("<tool_response>") for m in turn)


def test_normalize_refuses_bad_messages():
    for bad in ([], [{"role": "wizard", "content": "x"}], [{"role": "user", "content": [{"type": "image"}]}],
                [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]):
        with pytest.raises(ValueError):
            views.normalize_messages(bad)


def test_pair_id_is_canonical():
    a = pair_id("fp", {"chat": "1", "agent": "2"}, "h")
    assert a == pair_id("fp", {"agent": "2", "chat": "1"}, "h")
    assert a != pair_id("fp", {"chat": "1", "agent": "3"}, "h") and a != pair_id("fp", {"chat": "1", "agent": "2"}, "h2")


# ---- turns on the tiny model ----

def test_turn_mode_switch_reuses_history_full_mode_does_not(scripted):
    mol, _ = scripted
    mol.backend.llm.engine.cache.clear()  # the shared tiny engine may hold an earlier test's agent prefix
    convo = [{"role": "user", "content": "tell me about the moon please"}]
    r1 = mol.turn(convo, model="chat", sampling=GREEDY)
    assert r1.route.mode == "turn" and r1.macaronic()["policy"] == "forced"
    convo += [{"role": "assistant", "content": r1.content}, {"role": "user", "content": "write code"}]
    r2 = mol.turn(convo, model="coding", sampling=GREEDY)
    # the whole first turn (prompt + reply) is reused although the adapter changed
    assert r2.usage["reused_tokens"] >= r1.usage["prompt_tokens"]
    assert r2.route.adapter == "coding"
    convo += [{"role": "assistant", "content": r2.content}, {"role": "user", "content": "remind me"}]
    r3 = mol.turn(convo, model="agent", sampling=GREEDY)
    assert r3.route.mode == "full" and r3.usage["reused_tokens"] == 0  # KV is per adapter in full mode


def test_memory_recovers_the_adapter_and_summary_of_a_resent_message(scripted):
    mol, script = scripted
    script.replies["agent"] = "I set the reminder for you."
    convo = [{"role": "user", "content": "remind me to call mom"}]
    r1 = mol.turn(convo, model="agent", sampling=GREEDY | {"max_tokens": 64})
    assert r1.content == "I set the reminder for you." and r1.summary  # full mode: summary hop ran
    # a stateless client resends the reply without saying who wrote it
    convo += [{"role": "assistant", "content": r1.content}, {"role": "user", "content": "show it as a card"}]
    r2 = mol.turn(convo, model="genui", sampling=GREEDY)
    assert r2.messages[1]["adapter"] == "agent" and r2.messages[1]["specialist"] == "agent"
    assert any(m["content"] == f"[agent specialist, summarized] {r1.summary}" for m in r2.view)
    assert not any(m["content"] == r1.content for m in r2.view)


def test_tool_calls_parsed_and_tool_result_sticks_to_the_caller(scripted):
    mol, script = scripted
    script.replies["agent"] = lambda view: (
        "Reminder created." if view[-1]["role"] == "tool" else
        'Sure. <tool_call>{"name": "create_reminder", "arguments": {"text": "call mom"}}</tool_call>')
    convo = [{"role": "user", "content": "remind me to call mom"}]
    r1 = mol.turn(convo, tools=TOOLS, model="agent", sampling=GREEDY | {"max_tokens": 96})
    assert r1.finish_reason == "tool_calls" and r1.content == "Sure."
    call = r1.tool_calls[0]
    assert call["function"]["name"] == "create_reminder" and json.loads(call["function"]["arguments"]) == {"text": "call mom"}
    convo += [{"role": "assistant", "content": r1.content, "tool_calls": r1.tool_calls},
              {"role": "tool", "tool_call_id": call["id"], "content": json.dumps({"id": 7, "ok": True})}]
    r2 = mol.turn(convo, tools=TOOLS, sampling=GREEDY | {"max_tokens": 64})  # routed model name
    assert r2.route.policy == "sticky" and r2.route.adapter == "agent" and r2.route.ms == 0
    assert r2.content == "Reminder created." and r2.finish_reason == "stop"
    assert r2.usage["reused_tokens"] > r1.usage["prompt_tokens"]  # same adapter: its own cache


def test_bad_tool_call_is_reported_not_raised(scripted):
    mol, script = scripted
    script.replies["agent"] = '<tool_call>{"name": "launch_rocket", "arguments": {}}</tool_call>'
    free = MoL(mol.backend, mol.bundle, mol.router, config=HarnessConfig(constrain=False))
    r = free.turn([{"role": "user", "content": "go"}], tools=TOOLS, model="agent", sampling=GREEDY | {"max_tokens": 80})
    assert r.tool_calls == [] and "unknown tool" in r.macaronic()["tool_error"] and r.finish_reason == "stop"


def test_constrained_agent_cannot_invent_a_tool(scripted):
    mol, script = scripted
    script.replies["agent"] = '<tool_call>{"name": "launch_rocket", "arguments": {}}</tool_call>'
    r = mol.turn([{"role": "user", "content": "go"}], tools=TOOLS, model="agent", sampling=GREEDY | {"max_tokens": 80})
    names = {t["function"]["name"] for t in TOOLS}
    assert "launch_rocket" not in r.text and r.macaronic()["constrained"] == "tools"
    assert all(c["function"]["name"] in names for c in r.tool_calls)
    assert r.tool_calls or r.finish_reason == "length" and "did not complete" in r.macaronic()["tool_error"]


def test_genui_reply_is_validated_and_user_action_sticks(scripted):
    mol, script = scripted
    script.replies["genui"] = lambda view: card_reply() if "userAction" not in view[-1]["content"] else \
        '{"text_response":"Booked.","a2ui":[{"deleteSurface":{"surfaceId":"s1"}}]}'
    convo = [{"role": "user", "content": "show me a lunch card"}]
    r1 = mol.turn(convo, model="genui", sampling=GREEDY | {"max_tokens": 1024})
    g = r1.macaronic()["genui"]
    assert g["valid"], g["errors"]
    assert g["text_response"] == "Here is a card." and any("surfaceUpdate" in m for m in g["a2ui"])
    action = {"userAction": {"name": "confirm", "surfaceId": "s1", "sourceComponentId": "ok",
                             "timestamp": "2025-01-01T00:00:00Z", "context": {"slot": "noon"}}}
    convo += [{"role": "assistant", "content": r1.content}, {"role": "user", "content": json.dumps(action)}]
    r2 = mol.turn(convo, sampling=GREEDY | {"max_tokens": 64})
    assert r2.route.policy == "sticky-action" and r2.route.adapter == "genui"
    assert r2.macaronic()["genui"]["text_response"] == "Booked."


def test_routed_turn_reports_the_router_decision(scripted):
    mol, _ = scripted
    r = mol.turn([{"role": "user", "content": "hello"}], sampling=GREEDY)
    m = r.macaronic()
    assert m["policy"] == "prompted" and m["adapter"] in {"chat", "agent", "coding", "genui"}
    assert 0 < m["confidence"] <= 1 and m["route_ms"] > 0 and m["pair_id"] == mol.pair_id
    assert set(r.route.probs) == {"chat", "agent", "coding", "genui"}


def test_requests_refused_with_clear_errors(scripted):
    mol, _ = scripted
    hi = [{"role": "user", "content": "hi"}]
    with pytest.raises(TurnError, match="unknown model") as e:
        mol.turn(hi, model="nope")
    assert e.value.status == 404
    with pytest.raises(TurnError, match="max_tokens"):
        mol.turn(hi, model="chat", sampling={"max_tokens": 10**6})
    with pytest.raises(TurnError, match="context window"):
        mol.turn([{"role": "user", "content": "x " * 3000}], model="chat", sampling=GREEDY)
    with pytest.raises(TurnError, match="seed"):
        mol.turn(hi, model="chat", sampling={"seed": -1})


def test_without_a_router_turns_take_the_default_route(scripted):
    mol, _ = scripted
    mol.router = None  # `--router-policy none`
    r = mol.turn([{"role": "user", "content": "hi"}], sampling=GREEDY)
    assert r.route.policy == "default" and r.route.specialist == mol.bundle.router["default_route"] == "coding"


def test_a_pair_without_the_chat_adapter_answers_chat_turns_as_the_bare_base():
    from macaronic.serve import views
    from macaronic.serve.mol import MoL
    from macaronic.testing import tiny_llm

    mol = MoL.from_llm(tiny_llm(n_adapters=0))
    msgs = [{"role": "user", "content": "hi"}]
    view = views.build_view(msgs, mol.bundle, adapter=None, mode="turn", specialist="chat")
    assert [m["role"] for m in view] == ["system", "user"]  # identity header only, no chat instruction
    agent = views.build_view(msgs, mol.bundle, adapter=None, mode="turn", specialist="agent")
    assert [m["role"] for m in agent] == ["system", "system", "user"]  # the agent's protocol stays
