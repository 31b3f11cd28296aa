"""Seeded states are deterministic, complete and hash canonically."""

import datetime as dt

from jsonschema import Draft202012Validator

from macaronic.substrate.state import StateSpec, dump, make_state, seed_today, state_hash
from macaronic.substrate.tools import TOOLS, mcp_tools, openai_tools


def test_same_seed_same_state_different_seed_different_state():
    a, b, c = make_state(7), make_state(7), make_state(8)
    assert dump(a) == dump(b)
    assert state_hash(a) == state_hash(b)
    assert state_hash(a) != state_hash(c)


def test_hash_is_independent_of_insertion_order():
    a = make_state(1)
    b = make_state(1)
    # Rewrite b's events in reverse insertion order: same rows, so the same canonical hash.
    rows = [tuple(r) for r in b.execute("SELECT * FROM events ORDER BY id DESC")]
    b.execute("DELETE FROM events")
    b.executemany('INSERT INTO events VALUES (?,?,?,?,?,?,?)', rows)
    assert state_hash(a) == state_hash(b)
    b.execute("UPDATE events SET title = title || '!' WHERE id = 1")
    assert state_hash(a) != state_hash(b)


def test_file_database_matches_memory(tmp_path):
    path = str(tmp_path / "state.db")
    on_disk = StateSpec(seed=3).build(path)
    assert state_hash(on_disk) == state_hash(StateSpec(seed=3).build())
    on_disk.close()
    assert (tmp_path / "state.db").stat().st_size > 0


def test_today_is_seeded_or_given():
    assert make_state(5).execute("SELECT value FROM meta WHERE key='today'").fetchone()[0] == seed_today(5).isoformat()
    conn = make_state(5, today="2026-03-01")
    assert conn.execute("SELECT value FROM meta WHERE key='today'").fetchone()[0] == "2026-03-01"


def test_every_state_has_each_order_policy_case():
    for seed in range(20):
        rows = dump(make_state(seed))
        today = dt.date.fromisoformat({r["key"]: r["value"] for r in rows["meta"]}["today"])
        ages = [(today - dt.date.fromisoformat(o["delivered_on"])).days
                for o in rows["orders"] if o["status"] == "delivered"]
        assert any(a <= 30 for a in ages) and any(a > 30 for a in ages)
        assert {"placed", "shipped", "refunded", "cancelled"} <= {o["status"] for o in rows["orders"]}
        titles = [e["title"] for e in rows["events"]]
        assert len(titles) == len(set(titles))  # tasks name events by title


def test_tool_schemas_are_valid_and_tagged():
    assert len(TOOLS) >= 15
    for t, o, m in zip(TOOLS, openai_tools(), mcp_tools()):
        Draft202012Validator.check_schema(t.parameters)
        assert o["type"] == "function" and o["function"]["name"] == t.name
        assert set(o["function"]) == {"name", "description", "parameters"}
        assert t.parameters["additionalProperties"] is False
        assert t.kind in ("read", "write")
        assert m["annotations"]["readOnlyHint"] is (t.kind == "read")
        if t.kind == "read":
            assert m["annotations"]["destructiveHint"] is False
    names = {t.name for t in TOOLS}
    for required in ("list_events", "create_event", "update_event", "delete_event", "search_contacts",
                     "get_contact", "add_reminder", "complete_reminder", "list_reminders", "create_note",
                     "search_notes", "list_orders", "get_order", "refund_order", "cancel_order"):
        assert required in names
