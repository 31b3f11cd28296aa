"""Export -> a real vLLM (CPU build) -> `macaronic serve --engine openai://` -> the official `openai`
client: routed, forced, tool-call, streamed and switched turns, with routing metadata and token
accounting (vLLM's `cached_tokens`) checked. Generations stay short: vLLM on 2 cores is slow."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import httpx
import openai
import pytest

ROLES = {"chat", "agent", "coding", "genui"}
WEATHER = [{"type": "function", "function": {
    "name": "get_weather", "description": "Current weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]


@pytest.fixture(scope="module")
def client(front):
    return openai.OpenAI(base_url=front.url + "/v1", api_key="unused", max_retries=0, timeout=600)


def wait_for_summaries(store, n: int, timeout: float = 300) -> bool:
    """The full-mode summary hop finishes after the answer was sent; wait for its row in the store."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with sqlite3.connect(store) as db:
            if db.execute("SELECT count(*) FROM segments WHERE summary != ''").fetchone()[0] >= n:
                return True
        time.sleep(0.5)
    return False


def check_accounting(r):
    meta = r.model_extra["macaronic"]
    assert r.usage.prompt_tokens == meta["prefill_tokens"] + meta["reused_tokens"] > 0
    assert r.usage.prompt_tokens_details.cached_tokens == meta["reused_tokens"]
    return meta


def test_vllm_serves_the_exported_adapters_and_the_front_sees_them_full_mode(vllm, client):
    models = httpx.get(vllm.url + "/v1/models").json()["data"]
    base = [m["id"] for m in models if not m.get("parent")]
    assert len(base) == 1 and {m["id"] for m in models if m.get("parent") == base[0]} == ROLES
    front = {m.id: m.model_extra["macaronic"] for m in client.models.list()}
    assert {k for k, v in front.items() if v["kind"] == "adapter"} == ROLES
    # plain LoRA on vLLM: every adapter is a full-mode adapter with its role from its name
    assert all(front[r]["mode"] == "full" and front[r]["role"] == r for r in ROLES)
    # vLLM names each adapter's directory (`root`); the front, on the same machine, hashes it
    from macaronic.engine.adapters import dir_sha256

    roots = {m["id"]: m["root"] for m in models if m.get("parent")}
    assert {r: front[r]["id"] for r in ROLES} == {r: dir_sha256(Path(roots[r])) for r in ROLES}
    assert front["macaronic"]["kind"] == "routed"


def test_routed_turn_goes_through_vllm_with_a_summary_hop(vllm, client, front):
    before = vllm.requests_done()
    r = client.chat.completions.create(model="macaronic", max_tokens=12, messages=[
        {"role": "user", "content": "Write a Python function that reverses a string."}])
    meta = check_accounting(r)
    assert meta["policy"] == "prompted" and meta["adapter"] in ROLES and meta["specialist"] == meta["adapter"]
    assert meta["mode"] == "full" and 0 <= meta["confidence"] <= 1 and meta["route_ms"] > 0
    assert r.choices[0].message.content and r.usage.completion_tokens <= 12
    # the summary hop runs after the answer, on vLLM too (routing is local): answer + summary
    assert wait_for_summaries(front.store, 1) and vllm.requests_done() - before >= 2


def test_forced_coding_turn_and_vllm_prefix_cache(client):
    # vLLM's CPU build caches whole 128-token blocks: the prompt must span at least one whole block
    # whatever the harness's system prompt weighs, so the request itself is long
    spec = " ".join(f"Case {i}: add({i}, {i + 1}) returns {2 * i + 1}." for i in range(1, 25))
    msgs = [{"role": "user", "content": "Write a Python function add(a, b) that returns a + b. " + spec}]
    first = client.chat.completions.create(model="coding", messages=msgs, max_tokens=12, temperature=0)
    meta = check_accounting(first)
    assert (meta["adapter"], meta["specialist"], meta["policy"], meta["mode"]) == ("coding", "coding", "forced", "full")
    again = client.chat.completions.create(model="coding", messages=msgs, max_tokens=12, temperature=0)
    meta2 = check_accounting(again)
    # vLLM's per-adapter prefix cache: the same prompt on the same adapter reuses whole blocks
    assert 0 < meta2["reused_tokens"] < again.usage.prompt_tokens
    assert again.choices[0].message.content == first.choices[0].message.content


def test_tool_call_then_the_result_sticks_to_the_agent(client):
    msgs = [{"role": "user", "content": "What is the weather in Paris?"}]
    r = client.chat.completions.create(model="agent", messages=msgs, tools=WEATHER, max_tokens=48, temperature=0)
    check_accounting(r)
    call = r.choices[0].message.tool_calls[0]
    assert r.choices[0].finish_reason == "tool_calls" and call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Paris"}
    msgs += [r.choices[0].message.model_dump(exclude_none=True),
             {"role": "tool", "tool_call_id": call.id, "content": json.dumps({"temp_c": 18, "sky": "clear"})}]
    after = client.chat.completions.create(model="macaronic", messages=msgs, tools=WEATHER, max_tokens=12,
                                           temperature=0)
    meta = check_accounting(after)
    assert meta["adapter"] == "agent" and meta["policy"] == "sticky"


def test_stream(client):
    chunks = list(client.chat.completions.create(
        model="coding", messages=[{"role": "user", "content": "Print hello in Python."}], max_tokens=8,
        temperature=0, stream=True, stream_options={"include_usage": True}))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    finals = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert text and finals[-1].choices[0].finish_reason in ("length", "stop")
    meta = next(c.model_extra["macaronic"] for c in chunks if (c.model_extra or {}).get("macaronic"))
    assert meta["adapter"] == "coding" and meta["mode"] == "full"
    usage = [c.usage for c in chunks if c.usage]
    assert usage and usage[-1].completion_tokens <= 8 and usage[-1].prompt_tokens > 0


def test_switch_of_specialists_between_turns(client, front):
    msgs = [{"role": "user", "content": "Hi! Tell me something nice about mornings."}]
    one = client.chat.completions.create(model="chat", messages=msgs, max_tokens=12, temperature=0)
    assert check_accounting(one)["adapter"] == "chat"
    msgs += [{"role": "assistant", "content": one.choices[0].message.content},
             {"role": "user", "content": "Now write a Python function that returns the square of x."}]
    two = client.chat.completions.create(model="coding", messages=msgs, max_tokens=12, temperature=0)
    meta = check_accounting(two)
    assert (meta["adapter"], meta["mode"]) == ("coding", "full")
    # full mode on vLLM: the chat segment reached coding as chat's hidden summary (own view), and
    # chat's summary hop ran on vLLM before coding answered
    with sqlite3.connect(front.store) as db:
        rows = db.execute("SELECT adapter, summary FROM segments").fetchall()
    assert any(a == "chat" and s for a, s in rows)
    back = client.chat.completions.create(model="macaronic", max_tokens=8, messages=msgs + [
        {"role": "assistant", "content": two.choices[0].message.content},
        {"role": "user", "content": "Thanks, that was great!"}])
    assert check_accounting(back)["adapter"] in ROLES


def test_bad_requests_get_openai_errors(client):
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="no-such-adapter", messages=[{"role": "user", "content": "x"}],
                                       max_tokens=2)
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="coding", messages=[{"role": "user", "content": "x"}], max_tokens=-3)


def test_bench_streams_are_equally_long_on_vllm(vllm):
    """`macaronic bench vllm` compares decode at equal output lengths: vLLM honours the `ignore_eos`
    the bench sends, so every stream (adapters round-robin) is exactly as long as asked, even when
    the reply would end at once (without `ignore_eos` a one-word answer stops after a few tokens)."""
    import asyncio

    from macaronic.bench import vllm_peer

    names = [x["name"] for x in json.loads((vllm.export_dir / "manifest.json").read_text())["adapters"]]
    got = asyncio.run(vllm_peer._streams(vllm.url, 3, 24, names, ask="Reply with the one word yes and nothing else."))
    assert got["mean_tokens"] == 24.0 and got["tok_s"] > 0
