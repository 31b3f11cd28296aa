"""Agent frameworks pointed at `model="macaronic"` get tool calls: LangChain's `bind_tools` through
`langchain-openai`, the OpenAI Agents SDK's run loop (Chat Completions and Responses) and a pydantic-ai
agent with a tool, over HTTP on loopback to the in-process server whose route hop is scripted to
say genui (a request that names its tools is the tools rule's) and whose agent is scripted to open with the call, as
the shipped agents do (a tiny random model would write whatever the grammar allows)."""

from __future__ import annotations

import pytest

langchain_openai = pytest.importorskip("langchain_openai")
from langchain_core.tools import tool  # noqa: E402

from test_serve_tools import SaysGenui, agent_calls  # noqa: E402


@tool
def create_reminder(text: str) -> str:
    """Create a reminder with this text."""
    return "ok"


def _chat(url: str):
    return langchain_openai.ChatOpenAI(model="macaronic", base_url=url + "/v1", api_key="unused", max_retries=0,
                                       temperature=0, max_tokens=128, timeout=120)


def test_langchain_bind_tools_routes_to_the_agent_whatever_the_text(inproc):
    url, mol, script = inproc
    script.replies["agent"] = agent_calls
    mol.router = SaysGenui()  # the head would send this text to genui
    msg = _chat(url).bind_tools([create_reminder]).invoke("remind me to buy milk")  # tool_choice auto
    assert [c["name"] for c in msg.tool_calls] == ["create_reminder"]
    assert msg.tool_calls[0]["args"] == {"text": "buy milk"}


def test_langchain_tool_round_trip_stays_on_the_agent(inproc):
    from langchain_core.messages import HumanMessage, ToolMessage

    url, mol, script = inproc
    script.replies["agent"] = agent_calls
    mol.router = SaysGenui()
    llm = _chat(url).bind_tools([create_reminder], tool_choice="required")
    history = [HumanMessage("remind me to buy milk")]
    first = llm.invoke(history)
    assert first.tool_calls[0]["name"] == "create_reminder"
    history += [first, ToolMessage('{"id": 7}', tool_call_id=first.tool_calls[0]["id"])]
    final = _chat(url).bind_tools([create_reminder]).invoke(history)
    assert final.content == "Done: reminder 7." and not final.tool_calls


import agents  # noqa: E402  the OpenAI Agents SDK (openai-agents, in the test extra)


@pytest.mark.parametrize("api", ["chat_completions", "responses"])
def test_openai_agents_sdk_gets_a_tool_call_and_finishes_on_the_agent(inproc, api):
    """The Agents SDK's run loop against `model="macaronic"`: the route hop would say genui, the
    tools rule sends the turn to the agent, the SDK runs the tool and sends its result back, and the
    agent's final answer ends the run; through Chat Completions and through the Responses API."""
    import openai

    url, mol, script = inproc
    script.replies["agent"] = agent_calls
    mol.router = SaysGenui()
    agents.set_tracing_disabled(True)
    ran = []

    @agents.function_tool
    def create_reminder(text: str) -> str:
        """Create a reminder with this text."""
        ran.append(text)
        return '{"id": 7}'

    client = openai.AsyncOpenAI(base_url=url + "/v1", api_key="unused", max_retries=0)
    model = (agents.OpenAIChatCompletionsModel("macaronic", client) if api == "chat_completions"
             else agents.OpenAIResponsesModel("macaronic", client))
    agent = agents.Agent(name="assistant", instructions="Help with reminders.", model=model, tools=[create_reminder],
                         model_settings=agents.ModelSettings(temperature=0, max_tokens=128))
    result = agents.Runner.run_sync(agent, "remind me to buy milk", max_turns=4)
    assert ran == ["buy milk"]
    assert result.final_output == "Done: reminder 7."


def test_pydantic_ai_agent_gets_a_tool_call_and_finishes_on_the_agent(inproc):
    """A pydantic-ai agent with one tool against `model="macaronic"` (its OpenAI chat model)."""
    import pydantic_ai
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    url, mol, script = inproc
    script.replies["agent"] = agent_calls
    mol.router = SaysGenui()
    model = OpenAIChatModel("macaronic", provider=OpenAIProvider(base_url=url + "/v1", api_key="unused"))
    agent = pydantic_ai.Agent(model, instructions="Help with reminders.")
    ran = []

    @agent.tool_plain
    def create_reminder(text: str) -> str:
        """Create a reminder with this text."""
        ran.append(text)
        return '{"id": 7}'

    result = agent.run_sync("remind me to buy milk", model_settings={"temperature": 0, "max_tokens": 128})
    assert ran == ["buy milk"]
    assert result.output == "Done: reminder 7."
