"""What the router reads from a conversation: the current request, the current adapter, and
whether the turn is a tool result that must stay with its caller.

The router sees only the latest user request (the original's rule); history matters only for
stickiness and hysteresis. Assistant messages name the specialist role that produced them in a `"specialist"` key (the
key the serving layer stores on every reply).
"""

from __future__ import annotations


def message_text(message: dict) -> str:
    """Text of a message whose content is a string or a list of OpenAI-style parts."""
    content = message.get("content")
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "\n".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")


def request_text(conversation: list[dict]) -> str:
    """The latest user message's text ("" when there is none)."""
    for m in reversed(conversation):
        if m.get("role") == "user":
            return message_text(m)
    return ""


def current_specialist(conversation: list[dict]) -> str | None:
    """The specialist that produced the latest assistant message, if it says."""
    for m in reversed(conversation):
        if m.get("role") == "assistant":
            return m.get("specialist")
    return None


def tool_caller(conversation: list[dict]) -> dict | None:
    """If the last message is a tool result, the assistant message that issued the call (matched
    by tool_call_id when present); else None. The one stickiness rule: the serving layer sends a
    tool result back to that message's adapter, the router to its specialist."""
    if not conversation or conversation[-1].get("role") != "tool":
        return None
    call_id = conversation[-1].get("tool_call_id")
    for m in reversed(conversation[:-1]):
        if m.get("role") == "user":
            return None  # a tool result after a new user turn has no caller in this turn
        if m.get("role") == "assistant" and m.get("tool_calls"):
            ids = {c.get("id") for c in m["tool_calls"]}
            if call_id is None or call_id in ids:
                return m
    return None
