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


def _listed(name: str, listing: str) -> str:
    return f"- {name}(" if listing == "compact" else f"- {name}: "


def test_agent_example_tool_list_is_the_bundles_listing_and_complete():
    ex = builders.agent_examples(1)[0]
    head = ex.messages[0]["content"]
    assert head.startswith(load_bundle().identity.strip())
    assert "<tools>" not in head  # not the ~3,100-token JSON-schema listing
    for t in openai_tools():
        assert _listed(t["function"]["name"], load_bundle().tool_listing) in head
    assert ex.messages[1] == views.role_instruction(load_bundle(), "agent")


TOOL = {"type": "function", "function": {
    "name": "calc_area", "description": "Area of a shape. Units: m.",
    "parameters": {"type": "object", "required": ["w", "shape"], "properties": {
        "w": {"type": "number", "description": "Width, in metres."},
        "h": {"type": "number"},
        "shape": {"type": "string", "enum": ["square", "circle"], "description": "Which shape."},
        "sides": {"type": "array", "items": {"type": "integer"}, "default": [1, 2]},
        "box": {"type": "object", "properties": {"min": {"type": "number"}, "max": {"type": "number"}}, "required": ["min"]},
        "odd": "not a schema"}}}}


def test_client_tools_render_in_the_compact_form():
    text = views.tool_prompt([TOOL], "compact")
    assert "- calc_area(w, h?, shape, sides?, box?, odd?): Area of a shape." in text


def test_client_tools_render_in_the_typed_form_with_types_enums_and_descriptions():
    lines = views.tool_prompt([TOOL], "typed").splitlines()
    assert lines[:8] == [
        "Tools:",
        "- calc_area: Area of a shape. Units: m.",
        "    w (number): Width, in metres.",
        "    h (number, optional)",
        '    shape (string, one of "square"|"circle"): Which shape.',
        "    sides (array of integer, default [1, 2], optional)",
        "    box (object {min: number, max?: number}, optional)",
        "    odd (any, optional)"]
    deep: dict = {"type": "integer"}
    for _ in range(5000):  # nested past the recursion limit: cut, not a crash
        deep = {"type": "array", "items": deep}
    nested = {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"x": deep}}}}
    assert "    x (array of array of array of array of array of any, optional)" in views.tool_prompt([nested], "typed")
    long = dict(TOOL, function=dict(TOOL["function"], description="word " * 200))
    assert len(views.tool_prompt([long], "typed").splitlines()[1]) < 420  # a long description is cut, marked " ..."


def test_the_header_shows_client_tools_in_the_bundles_listing():
    bundle = load_bundle()
    head = views.prompt_head(bundle, "agent", [TOOL], ["Be brief."])
    assert head[0]["content"].endswith(views.tool_prompt([TOOL], bundle.tool_listing)) and "Be brief." in head[0]["content"]


def test_the_compact_listing_skips_a_preamble_the_tools_share():
    """Toolsets often open every description with the same preamble (BFCL's multi-turn backends:
    "This tool belongs to the Gorilla file system. It is a simple file system ..., etc. Tool
    description: ..."). The compact listing shows each tool's first sentence no other listed tool
    has; a lone tool, or tools with their own first sentences, keep the first sentence as before."""
    pre = "This tool belongs to the file system. It is simple, etc. "

    def tool(name, desc):
        return {"type": "function", "function": {"name": name, "description": desc,
                                                 "parameters": {"type": "object", "properties": {}}}}

    both = [tool("ls", pre + "List the directory. Python 3 syntax."), tool("pwd", pre + "Print the path. Python 3 syntax.")]
    lines = views.tool_prompt(both, "compact").splitlines()
    assert lines[1:3] == ["- ls(): List the directory.", "- pwd(): Print the path."]
    assert views.tool_prompt(both[:1], "compact").splitlines()[1] == "- ls(): This tool belongs to the file system."
    own = [tool("a", "Add two numbers. Returns JSON."), tool("b", "Split a string. Returns JSON.")]
    assert views.tool_prompt(own, "compact").splitlines()[1:3] == ["- a(): Add two numbers.", "- b(): Split a string."]
    same = [tool("x", "Does it."), tool("y", "Does it.")]  # nothing of its own: the first sentence
    assert views.tool_prompt(same, "compact").splitlines()[1:3] == ["- x(): Does it.", "- y(): Does it."]
