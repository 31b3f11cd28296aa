"""Agent frameworks pointed at `model="macaronic"` get tool calls: LangChain's `bind_tools` through
`langchain-openai`, over HTTP on loopback to the in-process server whose route hop is scripted to
say genui (a request that names its tools is the tools rule's) and whose agent is scripted to call (a tiny random model
would write whatever the grammar allows)."""

from __future__ import annotations

import pytest

langchain_openai = pytest.importorskip("langchain_openai")
from langchain_core.tools import tool  # noqa: E402

from test_serve_tools import SaysGenui, agent_reply  # noqa: E402


@tool
def create_reminder(text: str) -> str:
    """Create a reminder with this text."""
    return "ok"


def _chat(url: str):
    return langchain_openai.ChatOpenAI(model="macaronic", base_url=url + "/v1", api_key="unused", max_retries=0,
                                       temperature=0, max_tokens=128, timeout=120)


def test_langchain_bind_tools_routes_to_the_agent_whatever_the_text(inproc):
    url, mol, script = inproc
    script.replies["agent"] = agent_reply
    mol.router = SaysGenui()  # the head would send this text to genui
    msg = _chat(url).bind_tools([create_reminder]).invoke("remind me to buy milk")  # tool_choice auto
    assert [c["name"] for c in msg.tool_calls] == ["create_reminder"]
    assert msg.tool_calls[0]["args"] == {"text": "buy milk"}


def test_langchain_tool_round_trip_stays_on_the_agent(inproc):
    from langchain_core.messages import HumanMessage, ToolMessage

    url, mol, script = inproc
    script.replies["agent"] = agent_reply
    mol.router = SaysGenui()
    llm = _chat(url).bind_tools([create_reminder], tool_choice="required")
    history = [HumanMessage("remind me to buy milk")]
    first = llm.invoke(history)
    assert first.tool_calls[0]["name"] == "create_reminder"
    history += [first, ToolMessage('{"id": 7}', tool_call_id=first.tool_calls[0]["id"])]
    final = _chat(url).bind_tools([create_reminder]).invoke(history)
    assert final.content == "Done: reminder 7." and not final.tool_calls
