"""userAction: built like web/a2ui-card.js builds it, fed back as a user message, `confirm` approves."""

from __future__ import annotations

import json

import pytest

from macaronic.genui.actions import (
    Approval, approval_from, check_user_action, make_user_action, user_action_to_message,
)
from macaronic.genui.tasks import make_task

LOGIN = [
    {"dataModelUpdate": {"surfaceId": "login", "contents": [{"key": "user", "valueString": "ada"}]}},
    {"surfaceUpdate": {"surfaceId": "login", "components": [
        {"id": "go", "component": {"Button": {"child": "l", "action": {"name": "login", "context": [
            {"key": "user", "value": {"path": "/user"}}, {"key": "remember", "value": {"literalBoolean": True}},
            {"key": "n", "value": {"literalNumber": 2}}, {"key": "missing", "value": {"path": "/nope"}}]}}}},
        {"id": "l", "component": {"Text": {"text": {"literalString": "Log in"}}}}]}},
    {"beginRendering": {"surfaceId": "login", "root": "go"}},
]


def test_make_user_action_resolves_context():
    event = make_user_action(LOGIN, "go", timestamp="2025-01-01T00:00:00Z")
    assert event == {"userAction": {"name": "login", "surfaceId": "login", "sourceComponentId": "go",
                                    "timestamp": "2025-01-01T00:00:00Z",
                                    "context": {"user": "ada", "remember": True, "n": 2, "missing": None}}}
    assert check_user_action(event) == []


def test_unknown_button_raises():
    with pytest.raises(KeyError):
        make_user_action(LOGIN, "l")


def test_check_user_action_reports_paths():
    assert check_user_action({"userAction": {"name": "x"}})[0]["path"] == "/userAction/surfaceId"
    bad = make_user_action(LOGIN, "go")
    bad["userAction"]["timestamp"] = "yesterday"
    assert check_user_action(bad) == [{"path": "/userAction/timestamp", "message": "must be an ISO 8601 date-time"}]
    assert check_user_action({"userAction": {}, "error": {}})[0]["path"] == ""


def test_user_action_becomes_a_user_message():
    event = make_user_action(LOGIN, "go", timestamp="2025-01-01T00:00:00Z")
    message = user_action_to_message(event)
    assert message["role"] == "user" and json.loads(message["content"]) == event
    with pytest.raises(ValueError):
        user_action_to_message({"userAction": {"name": "x"}})


def test_confirm_click_on_the_confirm_task_is_an_approval():
    task = make_task("confirm", 0)
    messages = task.gold["a2ui"]
    cid = task.context["pending_write"]["confirmation_id"]
    assert approval_from(make_user_action(messages, "ok")) == Approval(cid, messages[0]["surfaceUpdate"]["surfaceId"], "ok")
    assert approval_from(make_user_action(messages, "cancel")) is None  # cancel is not approval


def test_confirm_without_id_is_not_an_approval():
    event = {"userAction": {"name": "confirm", "surfaceId": "s", "sourceComponentId": "b",
                            "timestamp": "2025-01-01T00:00:00Z", "context": {}}}
    assert approval_from(event) is None
