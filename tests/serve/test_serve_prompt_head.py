"""Served agent turns open with exactly the messages the agent specialist was trained under."""

from macaronic.harness import load_bundle
from macaronic.serve import views
from macaronic.specialist import BUILTIN_NAMES
from macaronic.substrate.tools import openai_tools
from macaronic.train import builders


def test_training_examples_open_with_the_served_view():
    bundle, tools = load_bundle(), openai_tools()
    for role in BUILTIN_NAMES:
        user = f"a first request for {role}"
        served = views.build_view(views.normalize_messages([{"role": "user", "content": user}]), bundle,
                                  adapter=role, mode="turn", specialist=role,
                                  tools=tools if role == "agent" else None)
        trained = list(builders._conv(role, user))
        assert trained == served, role


def test_agent_example_tool_list_is_compact_and_complete():
    ex = builders.agent_examples(1)[0]
    head = ex.messages[0]["content"]
    assert head.startswith(load_bundle().identity.strip())
    assert "<tools>" not in head  # not the ~3,100-token JSON-schema listing
    for t in openai_tools():
        assert f"- {t['function']['name']}(" in head
    assert ex.messages[1] == views.role_instruction(load_bundle(), "agent")


def test_client_tools_render_in_the_same_compact_form():
    tool = {"type": "function", "function": {"name": "calc_area", "description": "Area of a shape. Units: m.",
                                             "parameters": {"type": "object", "required": ["w"],
                                                            "properties": {"w": {}, "h": {}}}}}
    text = views.tool_prompt([tool])
    assert "- calc_area(w, h?): Area of a shape." in text
    head = views.prompt_head(load_bundle(), "agent", [tool], ["Be brief."])
    assert head[0]["content"].endswith(text) and "Be brief." in head[0]["content"]
