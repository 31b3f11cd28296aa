"""The built-in tools over HTTP on a real `macaronic serve`: GET /v1/tools lists the substrate's
schemas, POST /v1/tools/execute runs a call on the server's own SQLite substrate (behind the API
key), refused calls come back as error results, and the state outlives a restart."""

from __future__ import annotations

import sqlite3

import httpx
import pytest

from serve_helpers import ServerProcess, model_args

KEY = "sk-tools-test"


@pytest.mark.long  # over 10 s on 2 cores: the long CI step keeps the default suite under 15 minutes
def test_execute_endpoint_acts_on_the_servers_substrate_and_it_lasts(tiny_models, tmp_path):
    store = tmp_path / "serve" / "state.sqlite"
    args = [*model_args(*tiny_models), "--router-policy", "none", "--store", str(store), "--api-key", KEY]
    auth = {"Authorization": f"Bearer {KEY}"}
    s = ServerProcess(args)
    try:
        assert httpx.get(s.url + "/v1/tools").status_code == 401
        assert httpx.post(s.url + "/v1/tools/execute", json={"name": "get_today"}).status_code == 401
        listed = httpx.get(s.url + "/v1/tools", headers=auth).json()["data"]
        names = [t["function"]["name"] for t in listed]
        assert {"add_reminder", "create_event", "search_contacts", "create_note"} <= set(names)
        assert not (tmp_path / "serve" / "substrate.sqlite").exists()  # created on first use only

        r = httpx.post(s.url + "/v1/tools/execute", headers=auth, json={
            "name": "add_reminder", "arguments": '{"title": "buy oat milk", "due": "2031-05-04"}', "call_id": "c1"})
        body = r.json()
        assert r.status_code == 200 and body["ok"] and body["call_id"] == "c1", body
        db = tmp_path / "serve" / "substrate.sqlite"
        rows = sqlite3.connect(db).execute("SELECT title, due, done FROM reminders WHERE title = 'buy oat milk'").fetchall()
        assert rows == [("buy oat milk", "2031-05-04", 0)]

        for bad, kind in [({"name": "add_reminder", "arguments": {"text": "x"}}, "invalid_arguments"),
                          ({"name": "launch_rocket", "arguments": {}}, "unknown_tool"),
                          ({"name": "add_reminder", "arguments": "{not json"}, "invalid_json")]:
            r = httpx.post(s.url + "/v1/tools/execute", headers=auth, json=bad)
            assert r.status_code == 200 and not r.json()["ok"] and r.json()["result"]["error"]["type"] == kind, r.text
        r = httpx.post(s.url + "/v1/tools/execute", headers=auth, json={"arguments": {}})
        assert r.status_code == 400 and r.json()["error"]["param"] == "name"
    finally:
        s.stop()

    s = ServerProcess(args)  # the same store: the same substrate file, reopened
    try:
        r = httpx.post(s.url + "/v1/tools/execute", headers=auth, json={"name": "list_reminders",
                                                                        "arguments": {"query": "oat milk"}})
        assert r.status_code == 200 and r.json()["ok"], r.text
        assert [x["title"] for x in r.json()["result"]["reminders"]] == ["buy oat milk"]
    finally:
        s.stop()
