"""The segment memory's key: an assistant message as a stateless client resends it."""

from __future__ import annotations

from macaronic.serve.views import content_key


def _call(arguments):
    return [{"id": "x", "type": "function", "function": {"name": "create_reminder", "arguments": arguments}}]


def test_a_call_keys_by_its_arguments_value_not_their_spelling():
    """pydantic-ai resends the arguments it parsed without spaces; the key (and so the tool result's
    way back to the adapter that called) must not depend on that."""
    ours = content_key("remind me", "", _call('{"text": "buy milk", "at": 6}'))
    assert content_key("remind me", "", _call('{"at":6,"text":"buy milk"}')) == ours
    assert content_key("remind me", "", _call({"text": "buy milk", "at": 6})) == ours
    assert content_key("remind me", "", _call('{"text": "buy bread", "at": 6}')) != ours
    assert content_key("remind me", "", _call("not json")) != ours  # kept as written, no crash
    assert content_key("remind me", "  ", None) == content_key("remind me", "", [])
