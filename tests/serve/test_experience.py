"""Served experience (issue 38 item 1) against a real `macaronic serve --experience FILE` on loopback,
through the official `openai` client, read back from the real SQLite file: a routed turn, a tool-result
follow-up, a regenerate and an edit detected from the next request's history, feedback linked by
response id, `macaronic experience export` and `forget`; and a server without the flag records nothing."""

from __future__ import annotations

import json
import sqlite3
import time
from datetime import datetime

import httpx
import openai
import pytest

from serve_helpers import ServerProcess, model_args

LEVEL = {"type": "function", "function": {
    "name": "set_level", "description": "Set the alarm level",
    "parameters": {"type": "object", "properties": {"level": {"type": "string", "enum": ["low", "high"]}},
                   "required": ["level"], "additionalProperties": False}}}


@pytest.fixture(scope="module")
def recording(tiny_models, tmp_path_factory):
    d = tmp_path_factory.mktemp("experience")
    s = ServerProcess([*model_args(*tiny_models), "--router-policy", "prompted", "--store", str(d / "state.sqlite"),
                       "--experience", str(d / "experience.sqlite"), "--max-tokens-limit", "256"])
    s.file = d / "experience.sqlite"
    s.client = openai.OpenAI(base_url=s.url + "/v1", api_key="x", max_retries=0)
    yield s
    s.stop()


def query(path, sql, args=(), want=lambda rows: bool(rows), timeout=10.0):
    """Rows of `sql` once `want(rows)` holds (the server writes on its own thread, just after answering)."""
    deadline = time.monotonic() + timeout
    while True:
        db = sqlite3.connect(path)
        db.row_factory = sqlite3.Row
        try:
            rows = [dict(r) for r in db.execute(sql, args)]
        finally:
            db.close()
        if want(rows) or time.monotonic() > deadline:
            return rows
        time.sleep(0.05)


def turn(server, response_id):
    rows = query(server.file, "SELECT * FROM turns WHERE response_id = ?", (response_id,))
    assert len(rows) == 1, rows
    return rows[0]


def events(server, response_id, n=1):
    return query(server.file, "SELECT * FROM events WHERE response_id = ? ORDER BY id", (response_id,),
                 want=lambda rows: len(rows) >= n)


def test_a_routed_turn_is_recorded_with_its_route_pair_and_reply(recording):
    msgs = [{"role": "user", "content": "hello, how are you today?"}]
    r = recording.client.chat.completions.create(model="macaronic", messages=msgs, max_tokens=8)
    meta, t = r.model_extra["macaronic"], turn(recording, r.id)
    assert t["endpoint"] == "chat" and t["model"] == "macaronic" and t["pair_id"] == meta["pair_id"]
    assert (t["role"], t["adapter"], t["policy"]) == (meta["specialist"], meta["adapter"], meta["policy"])
    assert meta["policy"] not in ("forced", "sticky", "tools") and t["confidence"] == pytest.approx(meta["confidence"])
    assert json.loads(t["request"]) == msgs and json.loads(t["reply"])["content"] == r.choices[0].message.content
    assert t["finish_reason"] == r.choices[0].finish_reason and t["grammar"] is None
    # streamed, through the Responses API too
    chunks = list(recording.client.chat.completions.create(model="macaronic", messages=msgs, max_tokens=4,
                                                           stream=True))
    assert turn(recording, chunks[0].id)["request_hash"] == t["request_hash"]
    resp = recording.client.responses.create(model="macaronic", input="write a haiku", max_output_tokens=4)
    assert turn(recording, resp.id)["endpoint"] == "responses"


def test_a_tool_result_follow_up_is_read_off_the_next_request(recording):
    c = recording.client
    convo = [{"role": "user", "content": "set the alarm"}]
    r1 = c.chat.completions.create(model="macaronic", messages=convo, tools=[LEVEL], tool_choice="required",
                                   parallel_tool_calls=False, max_tokens=160, temperature=0)
    msg = r1.choices[0].message
    assert msg.tool_calls, r1
    t1 = turn(recording, r1.id)
    assert t1["grammar"] == "tools" and t1["policy"] == "tools" and t1["role"] == "agent"
    assert json.loads(t1["offered"]) == {"tools": ["set_level"], "tool_choice": "required"}
    assert json.loads(t1["reply"])["tool_calls"][0]["function"]["name"] == "set_level"
    convo += [msg.model_dump(exclude_none=True),
              {"role": "tool", "tool_call_id": msg.tool_calls[0].id, "content": '{"error": "the alarm is offline"}'}]
    r2 = c.chat.completions.create(model="macaronic", messages=convo, tools=[LEVEL], max_tokens=8)
    assert r2.model_extra["macaronic"]["policy"] == "sticky"
    (e,) = events(recording, r1.id)
    detail = json.loads(e["detail"])
    assert e["kind"] == "tool_results" and e["by_response_id"] == r2.id and detail["errors"] == 1
    assert detail["results"][0]["tool_call_id"] == msg.tool_calls[0].id
    assert turn(recording, r2.id)["last_role"] == "tool"


def test_a_regenerate_and_an_edit_are_detected(recording):
    c = recording.client
    first = [{"role": "user", "content": "tell me a story about a lighthouse"}]
    r1 = c.chat.completions.create(model="macaronic", messages=first, max_tokens=6)
    again = c.chat.completions.create(model="macaronic", messages=first, max_tokens=6)  # the web chat's Regenerate
    (e,) = events(recording, r1.id)
    assert (e["kind"], e["by_response_id"]) == ("regenerate", again.id)
    assert events(recording, again.id, 0) == []  # the regenerate is about the first answer, not the second

    convo = first + [{"role": "assistant", "content": again.choices[0].message.content},
                     {"role": "user", "content": "make it shorter"}]
    r2 = c.chat.completions.create(model="macaronic", messages=convo, max_tokens=6)
    (cont,) = events(recording, again.id)
    assert (cont["kind"], cont["by_response_id"]) == ("continued", r2.id)
    edited = convo[:-1] + [{"role": "user", "content": "make it funnier"}]  # the web chat's Edit
    r3 = c.chat.completions.create(model="macaronic", messages=edited, max_tokens=6)
    (e,) = events(recording, r2.id)
    assert (e["kind"], e["by_response_id"], json.loads(e["detail"])) == ("edit", r3.id, {"content": "make it funnier"})
    assert len(events(recording, again.id)) == 1  # the edit resent the reply: "continued" is not recorded twice


def test_feedback_is_linked_to_its_turn_and_export_and_forget_work(recording, tmp_path):
    from macaronic.commands.experience import main

    c = recording.client
    r = c.chat.completions.create(model="macaronic", messages=[{"role": "user", "content": "fix my loop: zebra"}],
                                  max_tokens=6)
    fb = httpx.post(recording.url + "/v1/feedback", json={"response_id": r.id, "rating": "down",
                                                          "expected_specialist": "coding", "comment": "it was code"})
    assert fb.status_code == 200 and fb.json()["linked"] is True
    stray = httpx.post(recording.url + "/v1/feedback", json={"response_id": "chatcmpl-unknown", "rating": "up"})
    assert stray.json()["linked"] is False
    cut = time.time()
    time.sleep(0.05)
    later = c.chat.completions.create(model="macaronic", messages=[{"role": "user", "content": "later: quokka"}],
                                      max_tokens=4)
    turn(recording, later.id)

    out = tmp_path / "x.jsonl"
    assert main(["export", str(recording.file), "--out", str(out)]) == 0
    recs = [json.loads(line) for line in out.read_text().splitlines()]
    mine = next(x for x in recs if x.get("response_id") == r.id)
    assert mine["type"] == "turn" and mine["route"]["role"] == turn(recording, r.id)["role"]
    assert mine["feedback"] == [{"created": mine["feedback"][0]["created"], "rating": "down",
                                 "expected_specialist": "coding", "comment": "it was code"}]
    assert {"type": "feedback", "response_id": "chatcmpl-unknown"}.items() <= recs[-1].items()
    assert any(x.get("next") for x in recs) and "request_hash" not in mine

    # forget what came before `cut`: the earlier turns leave the file (vacuumed), the later one stays
    assert main(["forget", str(recording.file), "--before", datetime.fromtimestamp(cut).isoformat()]) == 0
    left = query(recording.file, "SELECT response_id FROM turns")
    assert [x["response_id"] for x in left] == [later.id]
    assert query(recording.file, "SELECT * FROM feedback", want=lambda rows: True) == []
    data = b"".join(p.read_bytes() for p in recording.file.parent.glob("experience.sqlite*"))
    assert b"zebra" not in data and b"quokka" in data
    assert main(["forget", str(recording.file), "--all"]) == 0
    assert query(recording.file, "SELECT * FROM turns", want=lambda rows: True) == []
    # the server goes on recording into the same file
    r = c.chat.completions.create(model="macaronic", messages=[{"role": "user", "content": "hi again"}], max_tokens=2)
    assert turn(recording, r.id)
    assert main(["export", str(tmp_path / "none.sqlite"), "--out", str(out)]) == 2


def test_without_the_flag_nothing_is_recorded(server):
    """The shared server (no --experience): no experience file, no tables, and feedback says nothing of links."""
    r = openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0).chat.completions.create(
        model="macaronic", messages=[{"role": "user", "content": "hello"}], max_tokens=2)
    fb = httpx.post(server.url + "/v1/feedback", json={"response_id": r.id, "rating": "up"}).json()
    assert "linked" not in fb
    names = {p.name.split(".sqlite")[0] for p in server.store.parent.iterdir()}
    assert names <= {"state", "substrate"}, names
    tables = {n for (n,) in sqlite3.connect(server.store).execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert not tables & {"turns", "events"}
    assert "recording experience" not in "".join(server.log)


def test_the_experience_command_is_listed():
    from macaronic.cli import usage

    assert "experience" in usage()
