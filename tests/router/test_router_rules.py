"""Stickiness, hysteresis, cascade fallback and the default route."""

from macaronic.router import Router, RouterConfig, decide
from macaronic.testing.router_fakes import FakeBackbone

CFG = RouterConfig()


def tool_turn(caller="genui"):
    return [{"role": "user", "content": "Write a Python function that adds two numbers."},
            {"role": "assistant", "content": "", "specialist": caller,
             "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "x", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "{}"}]


def test_tool_result_sticks_to_caller_without_scoring(fitted):
    bb = FakeBackbone()
    router = Router(bb, fitted.bundle, fitted.state)
    d = router.route(tool_turn("genui"))
    assert (d.role, d.policy, d.reason, d.confidence) == ("genui", "sticky", "sticky-tool", 1.0)
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


def test_route_uses_current_specialist_for_hysteresis(fitted):
    convo = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello", "specialist": "agent"},
             {"role": "user", "content": "Who made you?"}]
    wide = fitted.with_config(hysteresis_margin=1.0, min_confidence=0.0)
    d = wide.route(convo, policy="probe")
    assert d.role == "agent" and d.reason in ("hysteresis", "scored")


def test_default_route_when_unsure(fitted):
    d = fitted.with_config(min_confidence=0.999).route([{"role": "user", "content": "hmm"}], policy="probe")
    assert (d.role, d.reason) == ("coding", "low-confidence-default")


def _with_bands(fitted, choice: str):
    from dataclasses import replace

    import numpy as np

    from macaronic.router.bands import EDGES, BandTable

    options = ("keep", "default", "prompted")
    table = BandTable("head", options, np.array(EDGES), np.full(len(EDGES) - 1, options.index(choice)),
                      np.zeros(len(EDGES) - 1, np.int64), np.zeros((3, len(EDGES) - 1)))
    return Router(fitted.backbone, fitted.bundle, replace(fitted.state, bands=table),
                  replace(fitted.config, min_confidence=0.0, hysteresis_margin=0.0))


def test_cascade_defers_only_where_its_band_table_says(fitted):
    turn = [{"role": "user", "content": "Who made you?"}]
    calls = fitted.backbone.calls["next_logprobs"]
    d = _with_bands(fitted, "keep").route(turn, policy="cascade")
    assert d.policy == "head" and d.reason == "scored"
    assert fitted.backbone.calls["next_logprobs"] == calls  # the prompted policy was never asked
    d = _with_bands(fitted, "prompted").route(turn, policy="cascade")
    assert d.policy == "prompted" and d.reason == "cascade-fallback"
    d = _with_bands(fitted, "default").route(turn, policy="cascade")
    assert (d.role, d.reason) == ("coding", "band-default")


def test_fitted_band_table_never_picks_an_option_worse_than_the_primary_on_dev(fitted):
    import numpy as np

    bands = fitted.state.bands
    assert bands is not None and bands.primary == fitted.config.cheap_policy
    for b, c in enumerate(bands.choice):
        if c != 0:
            assert bands.dev_acc[c, b] > bands.dev_acc[0, b]


def test_a_state_without_band_table_keeps_the_threshold_cascade(fitted):
    from dataclasses import replace

    old = Router(fitted.backbone, fitted.bundle, replace(fitted.state, bands=None),
                 replace(fitted.config, cheap_policy="probe", cascade_threshold=1.01, min_confidence=0.0))
    d = old.route([{"role": "user", "content": "Who made you?"}], policy="cascade")
    assert d.policy == "prompted" and d.reason in ("cascade-fallback", "hysteresis")


def test_config_rejects_unknown_options():
    import pytest
    with pytest.raises(ValueError, match="unknown router option"):
        RouterConfig.from_dict({"polcy": "probe"})
    with pytest.raises(ValueError, match="cascade"):
        RouterConfig.from_dict({"cheap_policy": "cascade"})


def test_tools_rule_sends_requests_that_carry_tools_to_the_tools_route():
    from types import SimpleNamespace

    from macaronic.router.config import mentions_tools, tool_session, tools_route

    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}},
             {"type": "function", "function": {"name": "create_reminder", "parameters": {"type": "object"}}}]
    roles = ["chat", "agent", "coding", "genui"]
    bundle = SimpleNamespace(router={}, role_names=roles)
    weather = "What's the weather in Paris today?"
    assert tools_route(bundle, tools, None, weather) == "agent"
    assert tools_route(bundle, tools, "auto", "remind me to call mum at 6pm") == "agent"  # remind / reminder
    assert tools_route(bundle, tools, "auto", "write me a short poem about the sea") is None  # the head routes
    assert tools_route(bundle, tools, "required", "write me a short poem") == "agent"
    assert tools_route(bundle, tools, {"type": "function", "function": {"name": "get_weather"}}, "hi") == "agent"
    assert tools_route(bundle, tools, "none", weather) is None  # the client said no calls: the head routes
    assert tools_route(bundle, [], "auto", weather) is None and tools_route(bundle, None, None, weather) is None
    # a follow-up in a tool session (an earlier assistant turn called a tool) is the agent's, whatever its words
    assert tools_route(bundle, tools, "auto", "and the other one too", in_session=True) == "agent"
    assert tools_route(bundle, tools, "none", "and the other one too", in_session=True) is None
    assert tools_route(bundle, [], "auto", "and the other one too", in_session=True) is None
    called = {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function",
                                                                     "function": {"name": "f", "arguments": "{}"}}]}
    assert tool_session([{"role": "user", "content": "a"}, called, {"role": "tool", "content": "{}"},
                         {"role": "user", "content": "b"}])
    assert not tool_session([{"role": "user", "content": "a"}, {"role": "assistant", "content": "hi"},
                             {"role": "user", "content": "b"}])
    assert not tool_session([called])  # the latest message itself is not history
    assert tools_route(SimpleNamespace(router={"tools_route": None}, role_names=roles), tools, None, weather) is None
    assert tools_route(SimpleNamespace(router={"tools_route": "sql"}, role_names=roles), tools, None, weather) is None
    # generic verbs say nothing; names split on dots and camelCase
    assert not mentions_tools("Please get me the list of everything", tools)
    assert mentions_tools("What is the factorial of 5?", [{"function": {"name": "math.factorial"}}])
    assert mentions_tools("convert this currency", [{"function": {"name": "convertCurrency"}}])
    assert not mentions_tools("Calculate the area of a triangle", [{"function": {"name": "determine_body_mass_index"}}])
