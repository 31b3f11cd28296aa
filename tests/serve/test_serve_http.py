"""A real `macaronic serve` subprocess driven by the official `openai` client and raw HTTP."""

from __future__ import annotations

import json
import re

import httpx
import openai
import pytest

from serve_helpers import ServerProcess, model_args

KEYS = {"adapter", "policy", "confidence", "route_ms", "prefill_tokens", "reused_tokens", "pair_id", "ttft_ms", "decode_ms"}


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)


def test_chat_routed_and_forced(client, server):
    r = client.chat.completions.create(model="macaronic", messages=[{"role": "user", "content": "hello"}],
                                       max_tokens=5, temperature=0)
    meta = r.model_extra["macaronic"]
    assert KEYS <= set(meta) and meta["policy"] == "prompted" and meta["adapter"] in {"chat", "agent", "coding", "genui"}
    assert r.usage.completion_tokens <= 5 and r.usage.prompt_tokens == meta["prefill_tokens"] + meta["reused_tokens"]
    assert len(meta["pair_id"]) == 64 and meta["pair_id"] == httpx.get(server.url + "/health").json()["pair_id"]
    f = client.chat.completions.create(model="coding", messages=[{"role": "user", "content": "hello"}],
                                       max_tokens=5, temperature=0)
    assert f.model_extra["macaronic"]["adapter"] == "coding" and f.model_extra["macaronic"]["policy"] == "forced"


def test_streaming_carries_metadata_in_the_final_chunk_and_reuse_across_turns(client):
    convo = [{"role": "user", "content": "stream a reply"}]
    chunks = list(client.chat.completions.create(model="chat", messages=convo, max_tokens=8, temperature=0,
                                                 stream=True, stream_options={"include_usage": True}))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    finals = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert len(finals) == 1 and KEYS <= set(finals[0].model_extra["macaronic"])
    assert chunks[-1].usage.completion_tokens == 8 and text
    # the next turn on another turn-mode adapter reuses the whole first turn
    convo += [{"role": "assistant", "content": text}, {"role": "user", "content": "and code?"}]
    r = client.chat.completions.create(model="coding", messages=convo, max_tokens=4, temperature=0)
    meta = r.model_extra["macaronic"]
    assert meta["reused_tokens"] >= finals[0].model_extra["macaronic"]["prefill_tokens"]
    assert r.usage.prompt_tokens_details.cached_tokens == meta["reused_tokens"]


def test_models_list_names_the_routed_model_and_adapters(client):
    models = {m.id: m.model_extra.get("macaronic", {}) for m in client.models.list()}
    assert models["macaronic"]["kind"] == "routed"
    assert {k for k, v in models.items() if v.get("kind") == "adapter"} == {"chat", "agent", "coding", "genui"}
    assert models["agent"]["mode"] == "full" and models["chat"]["mode"] == "turn"


def test_clear_4xx_errors(client, server):
    hi = [{"role": "user", "content": "hi"}]
    with pytest.raises(openai.NotFoundError, match="unknown model"):
        client.chat.completions.create(model="gpt-9", messages=hi)
    with pytest.raises(openai.BadRequestError, match="max_tokens"):
        client.chat.completions.create(model="chat", messages=hi, max_tokens=100_000)
    with pytest.raises(openai.BadRequestError, match="context window"):
        client.chat.completions.create(model="chat", messages=[{"role": "user", "content": "ab " * 1500}], max_tokens=4)
    with pytest.raises(openai.BadRequestError, match="messages"):
        client.chat.completions.create(model="chat", messages=[{"role": "robot", "content": "x"}])
    url = server.url + "/v1/chat/completions"
    r = httpx.post(url, content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 400 and "not valid JSON" in r.json()["error"]["message"]
    r = httpx.post(url, json={"model": "chat", "messages": [{"role": "user", "content": "x" * 300_000}]})
    assert r.status_code == 413
    r = httpx.post(url, json={"model": "chat", "messages": hi, "temperature": 9})
    assert r.status_code == 400 and r.json()["error"]["param"] == "temperature"
    r = httpx.post(url, json={"model": "chat", "messages": hi, "ignore_eos": "sometimes"})  # a field of ours, not extra
    assert r.status_code == 400 and r.json()["error"]["param"] == "ignore_eos"


def test_ignore_eos_gives_replies_of_max_tokens(client):
    """vLLM's `ignore_eos` through the official client (`extra_body`), as benchmark clients send it: every
    reply runs to max_tokens, text and streamed; a reply under a grammar still ends where the grammar does."""
    hi = [{"role": "user", "content": "say one word"}]
    r = client.chat.completions.create(model="chat", messages=hi, max_tokens=9, temperature=0, extra_body={"ignore_eos": True})
    assert r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 9
    chunks = list(client.chat.completions.create(model="chat", messages=hi, max_tokens=7, temperature=0, stream=True,
                                                 stream_options={"include_usage": True}, extra_body={"ignore_eos": True}))
    assert chunks[-1].usage.completion_tokens == 7
    j = client.chat.completions.create(model="chat", messages=hi, max_tokens=200, temperature=0,
                                       response_format={"type": "json_object"}, extra_body={"ignore_eos": True})
    assert j.choices[0].finish_reason in ("stop", "length")
    if j.choices[0].finish_reason == "stop":
        json.loads(j.choices[0].message.content)


@pytest.mark.long  # over 10 s on 2 cores: the long CI step keeps the default suite under 15 minutes
def test_responses_api_previous_response_id_survives_a_restart(tiny_models, tmp_path):
    store = tmp_path / "state.sqlite"
    args = [*model_args(*tiny_models), "--router-policy", "prompted", "--store", str(store)]
    s1 = ServerProcess(args)
    try:
        c = openai.OpenAI(base_url=s1.url + "/v1", api_key="x", max_retries=0)
        r1 = c.responses.create(model="agent", input="remind me to water the plants", max_output_tokens=6,
                                temperature=0)
        # the tiny random model's 6 tokens may decode to whitespace: only the status and the adapter are stable
        assert r1.status == "incomplete" and r1.model_extra["macaronic"]["adapter"] == "agent"
        r2 = c.responses.create(model="macaronic", input="thanks", previous_response_id=r1.id,
                                max_output_tokens=6, temperature=0)
        assert r2.previous_response_id == r1.id
        assert c.responses.retrieve(r2.id).id == r2.id
    finally:
        s1.stop()
    s2 = ServerProcess(args)  # a fresh process over the same SQLite file
    try:
        # started with --no-warmup (serve_helpers' default): it listens cold, and says so
        assert "warmed up" not in "".join(s2.log)
        assert httpx.get(s2.url + "/health", timeout=30).json()["warmup"] == {"enabled": False}
        metrics = httpx.get(s2.url + "/metrics", timeout=30).text
        assert re.search(r"^macaronic_engine_grammar_compiled_total 0(\.0)?$", metrics, re.M), metrics
        c = openai.OpenAI(base_url=s2.url + "/v1", api_key="x", max_retries=0)
        r3 = c.responses.create(model="chat", input="what did I ask first?", previous_response_id=r2.id,
                                max_output_tokens=6, temperature=0)
        assert r3.previous_response_id == r2.id and r3.output_text
        # the stored chain was used: the prompt holds three user turns, not one
        assert r3.usage.input_tokens > r1.usage.input_tokens + 40
        with pytest.raises(openai.NotFoundError):
            c.responses.create(model="chat", input="x", previous_response_id="resp_missing")
        events = [e.type for e in c.responses.create(model="chat", input="stream", max_output_tokens=4,
                                                         temperature=0, stream=True)]
        assert events[0] == "response.created" and events[-1] == "response.completed"
        assert "response.output_text.delta" in events
    finally:
        s2.stop()


def test_metrics_count_routes_tokens_and_latency(client, server):
    client.chat.completions.create(model="genui", messages=[{"role": "user", "content": "m"}], max_tokens=3)
    text = httpx.get(server.url + "/metrics").text
    assert 'macaronic_routes_total{adapter="genui",policy="forced"}' in text
    for name in ('macaronic_tokens_total{kind="reused"}', 'macaronic_tokens_total{kind="prefill"}',
                 'macaronic_request_seconds_bucket{endpoint="/v1/chat/completions",le="+Inf"}',
                 'macaronic_requests_total{endpoint="/v1/chat/completions",status="200"}',
                 "macaronic_ttft_seconds_count"):
        assert name in text, name


def test_api_key_required_and_never_logged(scripted, tmp_path, caplog):
    import logging

    from macaronic.serve.app import ServeConfig, create_app
    from macaronic.commands.serve import api_key_from, parser
    from serve_helpers import InProcessServer

    key = "sk-test-" + "7" * 24
    keyfile = tmp_path / "key"
    keyfile.write_text(key + "\n")
    assert api_key_from(parser().parse_args(["--api-key-file", str(keyfile)])) == key
    caplog.set_level(logging.DEBUG)
    mol, _ = scripted
    s = InProcessServer(create_app(mol, ServeConfig(api_key=key)))
    try:
        hi = {"model": "chat", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
        assert httpx.post(s.url + "/v1/chat/completions", json=hi).status_code == 401
        assert httpx.post(s.url + "/v1/chat/completions", json=hi,
                          headers={"Authorization": "Bearer " + key[:-1] + "8"}).status_code == 401
        assert httpx.get(s.url + "/metrics").status_code == 401
        assert httpx.post(s.url + "/v1/feedback", json={"response_id": "x", "rating": "up"}).status_code == 401
        assert httpx.get(s.url + "/health").status_code == 200
        c = openai.OpenAI(base_url=s.url + "/v1", api_key=key, max_retries=0)
        r = c.chat.completions.create(model="chat", messages=hi["messages"], max_tokens=2)
        assert r.model_extra["macaronic"]["adapter"] == "chat"
        assert httpx.get(s.url + "/v1/models", headers={"x-api-key": key}).status_code == 200
    finally:
        s.stop()
    assert key not in caplog.text


def test_web_chat_assets_are_served(server):
    page = httpx.get(server.url + "/")
    assert page.status_code == 200 and "/static/chat.js" in page.text
    for name in ("chat.js", "chat.css", "a2ui-card.js", "markdown.js", "vendor/a2ui-lit.js"):
        assert httpx.get(f"{server.url}/static/{name}").status_code == 200
    assert httpx.get(server.url + "/static/..%2Fserve%2Fapp.py").status_code == 404
    assert "/v1/chat/completions" in json.dumps(httpx.get(server.url + "/openapi.json").json()["paths"])


def test_feedback_is_recorded_in_the_servers_store(server):
    import sqlite3

    ok = httpx.post(server.url + "/v1/feedback", json={"response_id": "chatcmpl-abc", "rating": "down",
                                                       "expected_specialist": "coding"})
    assert ok.status_code == 200 and ok.json()["object"] == "feedback" and ok.json()["id"] >= 1
    rows = sqlite3.connect(server.store).execute(
        "SELECT rating, expected_specialist FROM feedback WHERE response_id = 'chatcmpl-abc'").fetchall()
    assert rows == [("down", "coding")]
    for bad, param in [({"response_id": "x"}, "rating"), ({"response_id": "x", "expected_specialist": "poet"},
                       "expected_specialist"), ({"response_id": "x", "rating": "meh"}, "rating")]:
        r = httpx.post(server.url + "/v1/feedback", json=bad)
        assert r.status_code == 400 and r.json()["error"]["param"] == param, (bad, r.text)
