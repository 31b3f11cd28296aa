"""toolnames counts invented tools and schema-breaking arguments from evaluated rows."""

from macaronic.contract.toolnames import summarize


def row(suite, *contents, score=0.0):
    return {"suite": suite, "score": score,
            "messages": [{"role": "user", "content": "hi"}] + [{"role": "assistant", "content": c} for c in contents]}


def test_counts_invented_and_bad_calls_per_episode():
    ok = '<tool_call>{"name": "list_orders", "arguments": {}}</tool_call>'
    invented = '<tool_call>{"name": "create_reminder", "arguments": {"title": "x"}}</tool_call>'
    bad = '<tool_call>{"name": "list_orders", "arguments": {"query": 5}}</tool_call>'
    s = summarize([row("agent", ok, score=1.0), row("agent", ok, invented), row("agent", bad), row("agent", "prose")])
    a = s["agent"]
    assert a["episodes"] == 4 and a["invented_tool"] == 0.25 and a["bad_arguments"] == 0.25
    assert a["calls_per_episode"] == 1.0 and a["score"] == 0.25
    assert "invented_tool" not in summarize([row("bfcl_simple", invented)])["bfcl_simple"]
