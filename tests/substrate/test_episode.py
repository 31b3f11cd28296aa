"""Episodes: savepoint rollback, snapshots and undo, confirmation, permissions, policy, the log,
replay and the Episodes store."""

import datetime as dt
import json

import pytest

from macaronic.substrate import tools as tools_mod
from macaronic.substrate.episode import Episode, EpisodeConfig, Episodes, LogEntry
from macaronic.substrate.replay import ReplayMismatch, replay
from macaronic.substrate.state import StateSpec, dump
from macaronic.substrate.toolbase import Tool, ToolError, obj

SPEC = StateSpec(seed=11)


def own_event(ep, mine=True):
    rows = dump(ep.conn)["events"]
    return next(e for e in rows if (e["owner"] == ep.actor) == mine)


def order(ep, status, recent=None):
    for o in ep.call("list_orders")["orders"]:
        if o["status"] != status:
            continue
        if recent is None or o["refundable"] == recent:
            return o
    raise AssertionError(f"no {status} order")


# ---- transactions -------------------------------------------------------------------

def _half_write(kind, exc):
    def handler(ctx, args):
        ctx.conn.execute("INSERT INTO notes (owner, title, body, tags) VALUES ('alex', 'x', 'y', '[]')")
        ctx.conn.execute("DELETE FROM events")
        raise exc
    return Tool("create_note", "test double", obj(), kind, handler)


@pytest.mark.parametrize("exc", [ToolError("policy_refused", "no"), RuntimeError("boom")])
def test_failed_call_rolls_back_partial_writes(monkeypatch, exc):
    ep = Episode(SPEC)
    monkeypatch.setitem(tools_mod.TOOLS_BY_NAME, "create_note", _half_write("write", exc))
    before = ep.state_hash()
    result = ep.call("create_note", {})
    assert result["error"]["type"] == ("policy_refused" if isinstance(exc, ToolError) else "internal")
    assert ep.state_hash() == before
    assert len(dump(ep.conn)["events"]) > 0
    assert ep.log[-1].pre_hash == ep.log[-1].post_hash == before


def test_read_tool_cannot_write(monkeypatch):
    ep = Episode(SPEC)

    def sneaky(ctx, args):
        ctx.conn.execute("DELETE FROM events")
        return {}
    monkeypatch.setitem(tools_mod.TOOLS_BY_NAME, "get_today", Tool("get_today", "d", obj(), "read", sneaky))
    before = ep.state_hash()
    assert ep.call("get_today")["error"]["type"] == "internal"
    assert ep.state_hash() == before
    assert "created" in ep.call("add_reminder", {"title": "after"})  # query_only was switched off


def test_successful_write_changes_hash_and_is_logged():
    ep = Episode(SPEC)
    h0 = ep.state_hash()
    r = ep.call("add_reminder", {"title": "Buy milk", "due": "2025-03-01"})
    assert r["created"]["title"] == "Buy milk" and r["created"]["done"] is False
    e = ep.log[-1]
    assert (e.op, e.tool, e.pre_hash) == ("call", "add_reminder", h0)
    assert e.post_hash == ep.state_hash() != h0


# ---- snapshots and undo -----------------------------------------------------------

def test_snapshot_undo_restores_each_turn():
    ep = Episode(SPEC)
    h0 = ep.state_hash()
    ep.snapshot()
    ep.call("add_reminder", {"title": "turn one"})
    h1 = ep.state_hash()
    ep.snapshot()
    ev = own_event(ep)
    ep.call("delete_event", {"event_id": ev["id"]})
    ep.call("create_note", {"title": "t", "body": "b"})
    assert ep.undo()["undone"]["state_hash"] == h1
    assert ep.state_hash() == h1
    assert ep.call("get_event", {"event_id": ev["id"]})["event"]["id"] == ev["id"]
    ep.undo()
    assert ep.state_hash() == h0
    assert ep.undo()["error"]["type"] == "not_found"


def test_undo_restores_pending_confirmations():
    ep = Episode(SPEC, config=EpisodeConfig(confirm_all_writes=True))
    ep.snapshot()
    pid = ep.call("add_reminder", {"title": "x"})["pending_confirmation"]["id"]
    assert pid in ep.pending()
    ep.undo()
    assert ep.pending() == {}
    assert ep.confirm(pid)["error"]["type"] == "unknown_confirmation"


# ---- confirmation -----------------------------------------------------------------

def test_confirmation_holds_writes_until_confirmed():
    ep = Episode(SPEC, config=EpisodeConfig(confirm=frozenset({"delete_event"})))
    ev = own_event(ep)
    h0 = ep.state_hash()
    r = ep.call("delete_event", {"event_id": ev["id"]})
    pc = r["pending_confirmation"]
    assert pc["tool"] == "delete_event" and pc["arguments"] == {"event_id": ev["id"]}
    assert pc["preview"]["deleted"]["id"] == ev["id"]
    assert ep.state_hash() == h0  # nothing written yet, not even by the preview
    assert "created" in ep.call("add_reminder", {"title": "not gated"})
    h1 = ep.state_hash()
    done = ep.confirm(pc["id"])
    assert done["deleted"]["id"] == ev["id"]
    assert ep.state_hash() != h1
    assert ep.confirm(pc["id"])["error"]["type"] == "unknown_confirmation"


def test_rejected_confirmation_writes_nothing():
    ep = Episode(SPEC, config=EpisodeConfig(confirm_all_writes=True))
    h0 = ep.state_hash()
    pid = ep.call("create_note", {"title": "a", "body": "b"})["pending_confirmation"]["id"]
    assert ep.reject(pid)["rejected"]["tool"] == "create_note"
    assert ep.state_hash() == h0 and ep.pending() == {}
    assert ep.reject("confirm-999")["error"]["type"] == "unknown_confirmation"
    assert ep.confirm(["not", "hashable"])["error"]["type"] == "unknown_confirmation"


def test_confirmation_does_not_hold_reads_or_refused_writes():
    ep = Episode(SPEC, config=EpisodeConfig(confirm_all_writes=True))
    assert "events" in ep.call("list_events")
    theirs = own_event(ep, mine=False)
    r = ep.call("delete_event", {"event_id": theirs["id"]})
    assert r["error"]["type"] == "permission_denied" and ep.pending() == {}


# ---- permissions and policy -------------------------------------------------------

def test_cannot_change_another_actors_items():
    ep = Episode(SPEC)
    theirs = own_event(ep, mine=False)
    h0 = ep.state_hash()
    r = ep.call("delete_event", {"event_id": theirs["id"]})
    assert r["error"]["type"] == "permission_denied" and theirs["owner"] in r["error"]["message"]
    assert ep.call("update_event", {"event_id": theirs["id"], "title": "mine now"})["error"]["type"] == "permission_denied"
    assert ep.state_hash() == h0
    # The owner may.
    owner_ep = Episode(SPEC, actor=theirs["owner"])
    assert owner_ep.call("delete_event", {"event_id": theirs["id"]})["deleted"]["id"] == theirs["id"]


def test_orders_are_private_to_their_customer():
    ep = Episode(SPEC, actor="sam")
    assert ep.call("list_orders") == {"orders": []}
    assert ep.call("get_order", {"order_id": 1})["error"]["type"] == "permission_denied"


def test_refund_policy_thirty_days():
    ep = Episode(SPEC)
    ok = order(ep, "delivered", recent=True)
    r = ep.call("refund_order", {"order_id": ok["id"], "reason": "changed my mind"})
    assert r["refunded"]["status"] == "refunded" and r["refunded"]["closed_on"] == ep.today.isoformat()
    old = order(ep, "delivered", recent=False)
    h = ep.state_hash()
    r = ep.call("refund_order", {"order_id": old["id"]})
    assert r["error"]["type"] == "policy_refused" and "30 days" in r["error"]["message"]
    assert ep.state_hash() == h
    assert ep.call("refund_order", {"order_id": ok["id"]})["error"]["type"] == "policy_refused"  # twice


@pytest.mark.parametrize("age,allowed", [(30, True), (31, False), (0, True)])
def test_refund_window_boundary(age, allowed):
    ep = Episode(SPEC)
    o = order(ep, "delivered")
    day = (ep.today - dt.timedelta(days=age)).isoformat()
    ep.conn.execute("UPDATE orders SET delivered_on = ? WHERE id = ?", (day, o["id"]))
    r = ep.call("refund_order", {"order_id": o["id"]})
    assert ("refunded" in r) is allowed


def test_cancel_only_before_shipping():
    ep = Episode(SPEC)
    assert ep.call("cancel_order", {"order_id": order(ep, "placed")["id"]})["cancelled"]["status"] == "cancelled"
    r = ep.call("cancel_order", {"order_id": order(ep, "shipped")["id"]})
    assert r["error"]["type"] == "policy_refused"
    r = ep.call("refund_order", {"order_id": order(ep, "shipped")["id"]})
    assert r["error"]["type"] == "policy_refused" and "not been delivered" in r["error"]["message"]


def test_not_found_and_bad_values():
    ep = Episode(SPEC)
    assert ep.call("get_event", {"event_id": 9999})["error"]["type"] == "not_found"
    r = ep.call("create_event", {"title": "x", "start": "2025-02-30T10:00", "end": "2025-02-30T11:00"})
    assert r["error"]["type"] == "invalid_arguments" and "real time" in r["error"]["message"]
    r = ep.call("create_event", {"title": "x", "start": "2025-02-03T10:00", "end": "2025-02-03T09:00"})
    assert "must be after" in r["error"]["message"]
    ev = own_event(ep)
    assert ep.call("update_event", {"event_id": ev["id"]})["error"]["type"] == "invalid_arguments"


# ---- log and replay ---------------------------------------------------------------

def busy_episode() -> Episode:
    ep = Episode(SPEC, config=EpisodeConfig(confirm=frozenset({"refund_order"})))
    ev = own_event(ep)
    ep.snapshot()
    ep.call("create_event", {"title": "Planning", "start": "2025-03-03T09:00", "end": "2025-03-03T10:00",
                             "attendees": ["b@x.example", "a@x.example"]})
    ep.call("get_event", {"event_id": 9999})  # error: skipped on replay
    ep.call("update_event", {"event_id": ev["id"], "location": "Room 9"})
    ep.snapshot()
    ep.call("delete_event", {"event_id": ev["id"]})
    ep.undo()
    pid = ep.call("refund_order", {"order_id": order(ep, "delivered", recent=True)["id"]})["pending_confirmation"]["id"]
    ep.confirm(pid)
    pid2 = ep.call("refund_order", {"order_id": order(ep, "delivered", recent=True)["id"]})["pending_confirmation"]["id"]
    ep.reject(pid2)
    ep.call("add_reminder", '{"title": "from a JSON string"}')
    ep.call("nope", {})
    return ep


def test_replay_reproduces_state_and_results():
    ep = busy_episode()
    again = replay(ep.spec, ep.log, config=ep.config)
    assert again.state_hash() == ep.state_hash()
    assert [e.seq for e in ep.log] == list(range(len(ep.log)))


def test_replay_from_jsonl_and_detects_tampering():
    ep = busy_episode()
    entries = [json.loads(line) for line in ep.log_jsonl().splitlines()]
    assert replay(ep.spec, entries, config=ep.config).state_hash() == ep.state_hash()
    tampered = [dict(e) for e in entries]
    i = next(i for i, e in enumerate(tampered) if e["tool"] == "update_event")
    tampered[i]["arguments"] = {**tampered[i]["arguments"], "location": "Room 10"}
    with pytest.raises(ReplayMismatch):
        replay(ep.spec, tampered, config=ep.config)
    with pytest.raises(ReplayMismatch):
        replay(StateSpec(seed=12), entries, config=ep.config)


def test_log_is_append_only_view():
    ep = busy_episode()
    log = ep.log
    assert isinstance(log, tuple) and all(isinstance(e, LogEntry) for e in log)
    ep.call("get_today")
    assert len(ep.log) == len(log) + 1 and ep.log[: len(log)] == log


# ---- the store --------------------------------------------------------------------

def test_episodes_store_by_id():
    store = Episodes(max_open=2)
    a = store.create(5)
    b = store.create(StateSpec(seed=5), actor="sam", episode_id="fixed")
    assert store.get(a.id) is a and store.get("fixed") is b and b.actor == "sam"
    assert a.state_hash() == b.state_hash()  # same seed, same state, whoever acts
    with pytest.raises(RuntimeError):
        store.create(6)
    assert store.close(a.id) and not store.close(a.id)
    with pytest.raises(KeyError):
        store.get(a.id)
    assert store.ids() == ["fixed"] and len(store) == 1


def test_file_backed_episode(tmp_path):
    ep = Episode(SPEC, path=str(tmp_path / "ep.db"))
    mem = Episode(SPEC)
    for e in (ep, mem):
        e.snapshot()
        e.call("add_reminder", {"title": "disk"})
    assert ep.state_hash() == mem.state_hash()
    ep.undo()
    assert ep.state_hash() == ep.initial_hash
    ep.close()
