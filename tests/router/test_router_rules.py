"""Stickiness, hysteresis, cascade fallback and the default route."""

from macaronic.router import Router, RouterConfig, decide
from macaronic.testing.router_fakes import FakeBackbone

CFG = RouterConfig()


def tool_turn(caller="genui"):
    return [{"role": "user", "content": "Write a Python function that adds two numbers."},
            {"role": "assistant", "content": "", "adapter": caller,
             "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "x", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "{}"}]


def test_tool_result_sticks_to_caller_without_scoring(fitted):
    bb = FakeBackbone()
    router = Router(bb, fitted.bundle, fitted.state)
    d = router.route(tool_turn("genui"))
    assert (d.adapter, d.policy, d.reason, d.confidence) == ("genui", "sticky", "sticky-tool", 1.0)
    assert bb.calls == {"pooled_hidden": 0, "next_logprobs": 0}
    off = router.with_config(tool_stickiness=False).route(tool_turn("genui"), policy="probe")
    assert off.policy == "probe"


def test_tool_result_after_new_user_turn_is_not_sticky():
    convo = tool_turn() + [{"role": "user", "content": "thanks"}]
    from macaronic.router.conversation import tool_caller
    assert tool_caller(convo) is None


def test_decide_default_route_on_low_confidence():
    assert decide({"chat": 0.35, "agent": 0.33, "coding": 0.32}, False, None, CFG) == \
        ("coding", "low-confidence-default")
    assert decide({"chat": 0.9, "coding": 0.1}, True, None, CFG) == ("coding", "low-confidence-default")
    assert decide({"chat": 0.9, "coding": 0.1}, False, None, CFG) == ("chat", "scored")


def test_decide_hysteresis():
    probs = {"chat": 0.5, "agent": 0.4, "coding": 0.1}
    assert decide(probs, False, "agent", CFG) == ("agent", "hysteresis")  # leads by 0.10 < 0.15
    assert decide(probs, False, "coding", CFG) == ("chat", "scored")  # leads by 0.40
    no_h = RouterConfig(hysteresis_margin=0.0)
    assert decide(probs, False, "agent", no_h) == ("chat", "scored")


def test_route_uses_current_adapter_for_hysteresis(fitted):
    convo = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello", "adapter": "agent"},
             {"role": "user", "content": "Who made you?"}]
    wide = fitted.with_config(hysteresis_margin=1.0, min_confidence=0.0)
    d = wide.route(convo, policy="probe")
    assert d.adapter == "agent" and d.reason in ("hysteresis", "scored")


def test_default_route_when_unsure(fitted):
    d = fitted.with_config(min_confidence=0.999).route([{"role": "user", "content": "hmm"}], policy="probe")
    assert (d.adapter, d.reason) == ("coding", "low-confidence-default")


def test_cascade_falls_back_to_prompted_when_unsure(fitted):
    always = fitted.with_config(cascade_threshold=1.01, min_confidence=0.0)
    d = always.route([{"role": "user", "content": "Who made you?"}], policy="cascade")
    assert d.policy == "prompted" and d.reason in ("cascade-fallback", "hysteresis")
    never = fitted.with_config(cascade_threshold=0.0, min_confidence=0.0)
    bb_calls = fitted.backbone.calls["next_logprobs"]
    d = never.route([{"role": "user", "content": "Who made you?"}], policy="cascade")
    assert d.policy == "probe" and fitted.backbone.calls["next_logprobs"] == bb_calls


def test_config_rejects_unknown_options():
    import pytest
    with pytest.raises(ValueError, match="unknown router option"):
        RouterConfig.from_dict({"polcy": "probe"})
    with pytest.raises(ValueError, match="cascade"):
        RouterConfig.from_dict({"cheap_policy": "cascade"})
