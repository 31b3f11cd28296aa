"""Hostile and malformed tool input: every case is a readable error and the state hash holds."""

import json

import pytest

from macaronic.substrate.episode import Episode
from macaronic.substrate.state import TABLES, StateSpec, dump
from macaronic.substrate.tools import MAX_ARGUMENT_BYTES

INJECTION = "'; DROP TABLE events; --"
SPEC = StateSpec(seed=21)


@pytest.fixture
def ep():
    return Episode(SPEC)


def tables(ep):
    return {r[0] for r in ep.conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def nested(levels):
    d = {}
    for _ in range(levels):
        d = {"a": d}
    return d


BAD_CALLS = [
    ("unknown tool", "drop_database", {}, "unknown_tool"),
    ("non-string tool name", 42, {}, "unknown_tool"),
    ("invalid JSON", "get_event", '{"event_id": 1', "invalid_json"),
    ("JSON array args", "get_event", "[1, 2]", "invalid_arguments"),
    ("list args", "get_event", [1], "invalid_arguments"),
    ("string for integer", "get_event", {"event_id": "1"}, "invalid_arguments"),
    ("injection as id", "get_event", {"event_id": "1; DROP TABLE events"}, "invalid_arguments"),
    ("bool for integer", "get_event", {"event_id": True}, "invalid_arguments"),
    ("negative id", "get_order", {"order_id": -1}, "invalid_arguments"),
    ("missing required", "create_event", {"title": "x"}, "invalid_arguments"),
    ("extra property", "get_today", {"sudo": True}, "invalid_arguments"),
    ("bad date format", "list_events", {"date": "tomorrow"}, "invalid_arguments"),
    ("injection in date", "list_events", {"date": INJECTION}, "invalid_arguments"),
    ("enum violation", "list_orders", {"status": "lost"}, "invalid_arguments"),
    ("string too long", "add_reminder", {"title": "x" * 201}, "invalid_arguments"),
    ("not serializable", "add_reminder", {"title": object()}, "invalid_arguments"),
    ("deeply nested JSON text", "get_today", "[" * 10_000, "invalid_arguments"),
    ("deeply nested dict", "get_today", nested(5_000), "invalid_arguments"),
    ("megabyte string", "create_note", {"title": "t", "body": "x" * 1_000_000}, "too_large"),
    ("megabyte JSON text", "create_note", json.dumps({"title": "t", "body": "y" * 1_000_000}), "too_large"),
    ("many small strings", "create_event",
     {"title": "t", "start": "2025-01-01T10:00", "end": "2025-01-01T11:00",
      "attendees": [f"{i}@x" * 30 for i in range(400)]}, "too_large"),
]


@pytest.mark.parametrize("label,name,args,kind", BAD_CALLS, ids=[c[0] for c in BAD_CALLS])
def test_bad_call_is_an_error_result_and_changes_nothing(ep, label, name, args, kind):
    before = ep.state_hash()
    result = ep.call(name, args)
    assert set(result) == {"error"}, result
    assert result["error"]["type"] == kind
    assert isinstance(result["error"]["message"], str) and 0 < len(result["error"]["message"]) < 2000
    assert ep.state_hash() == before
    json.dumps(result)  # readable by a model
    assert len(json.dumps(ep.log[-1].arguments, default=str)) < 4096  # megabytes never reach the log


@pytest.mark.parametrize("name,args", [
    ("search_contacts", {"query": INJECTION}),
    ("search_notes", {"query": INJECTION}),
    ("search_notes", {"tag": INJECTION}),
    ("list_events", {"query": INJECTION}),
    ("list_events", {"owner": INJECTION}),
    ("list_reminders", {"query": INJECTION}),
    ("list_orders", {"query": INJECTION}),
    ("search_contacts", {"query": "%"}),
    ("search_contacts", {"query": "' OR '1'='1"}),
])
def test_injection_in_read_arguments_is_inert(ep, name, args):
    before = ep.state_hash()
    result = ep.call(name, args)
    assert "error" not in result
    assert all(v == [] for k, v in result.items() if isinstance(v, list))  # nothing matches literally
    assert ep.state_hash() == before and set(TABLES) <= tables(ep)


def test_injection_in_write_arguments_is_stored_verbatim(ep):
    r = ep.call("create_note", {"title": INJECTION, "body": INJECTION, "tags": [INJECTION]})
    note_id = r["created"]["id"]
    ev = ep.call("create_event", {"title": INJECTION, "start": "2025-02-01T10:00", "end": "2025-02-01T11:00",
                                  "location": "\"); DELETE FROM notes; --"})
    assert set(TABLES) <= tables(ep)
    assert ep.call("get_note", {"note_id": note_id})["note"]["title"] == INJECTION
    assert ep.call("search_notes", {"query": "DROP TABLE"})["notes"][0]["id"] == note_id
    assert ep.call("search_notes", {"tag": INJECTION})["notes"][0]["id"] == note_id
    assert ep.call("list_events", {"query": INJECTION})["events"][0]["id"] == ev["created"]["id"]
    assert len(dump(ep.conn)["notes"]) > 1


def test_update_cannot_smuggle_columns(ep):
    mine = next(e for e in dump(ep.conn)["events"] if e["owner"] == ep.actor)
    before = ep.state_hash()
    r = ep.call("update_event", {"event_id": mine["id"], "owner": "sam"})
    assert r["error"]["type"] == "invalid_arguments"
    r = ep.call("update_event", {"event_id": mine["id"], 'title" = \'x\', owner = \'sam': "x"})
    assert r["error"]["type"] == "invalid_arguments"
    assert ep.state_hash() == before


def test_size_cap_boundary(ep):
    # A note body at its schema limit passes; the byte cap sits above every schema limit.
    assert "created" in ep.call("create_note", {"title": "t", "body": "z" * 4000})
    assert MAX_ARGUMENT_BYTES > 4000 + 200


def test_unicode_is_kept(ep):
    r = ep.call("add_contact", {"name": "Zoë Ångström 李", "email": "zoe@example.org"})
    assert ep.call("search_contacts", {"query": "ångström"})["contacts"][0]["id"] == r["created"]["id"]
    assert ep.call("get_contact", {"contact_id": r["created"]["id"]})["contact"]["name"] == "Zoë Ångström 李"
