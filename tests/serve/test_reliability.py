"""Bad client input gets a 4xx in the OpenAI error shape, never a 500 (issue 20): tool schemas,
lone surrogates, deep nesting, unpaired tool messages, invalid bodies, unknown routes and methods,
slow bodies, client disconnects, server paths in engine errors. Each case was a 500 (or a hang,
or a 200) before; `model` is both an adapter ("agent", no router) and the routed name."""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import socket
import time

import httpx
import openai
import pytest

from serve_helpers import InProcessServer

HI = [{"role": "user", "content": "hi"}]
MODELS = ("agent", "macaronic")


def tool(parameters=..., description="does a thing", name="t"):
    fn = {"name": name, "description": description}
    if parameters is not ...:
        fn["parameters"] = parameters
    return {"type": "function", "function": fn}


BAD_TOOLS = {
    "parameters a string": (tool("oops"), "parameters"),
    "properties a list": (tool({"type": "object", "properties": []}), "properties"),
    "properties null": (tool({"type": "object", "properties": None}), "properties"),
    "required a number": (tool({"type": "object", "properties": {}, "required": 5}), "required"),
    "required not strings": (tool({"type": "object", "required": [1]}), "required"),
    "description a number": (tool({"type": "object"}, description=7), "description"),
    "not an object schema": (tool({"type": "string"}), "object"),
    "bad property schema": (tool({"type": "object", "properties": {"a": {"type": "nope"}}}), "properties"),
    "bad name": (tool({"type": "object"}, name="has space"), "name"),
    "duplicate names": ([tool(), tool()], "duplicate"),
}


def is_openai_error(r: httpx.Response, status: int) -> dict:
    assert r.status_code == status, (r.status_code, r.text[:400])
    body = r.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}, body
    assert body["error"]["type"] == ("invalid_request_error" if status < 500 else "server_error")
    assert r.headers["x-request-id"].startswith("req_")
    return body["error"]


def post(url: str, path: str, body) -> httpx.Response:
    """JSON as a client in any language may send it: ASCII-escaped, so lone surrogates travel too."""
    return httpx.post(url + path, content=json.dumps(body).encode(), timeout=60,
                      headers={"content-type": "application/json"})


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("case", sorted(BAD_TOOLS))
def test_bad_tool_schemas_are_400_on_both_apis_streaming_or_not(server, model, case):
    tools, word = BAD_TOOLS[case]
    tools = tools if isinstance(tools, list) else [tools]
    for stream in (False, True):
        r = post(server.url, "/v1/chat/completions",
                 {"model": model, "messages": HI, "tools": tools, "max_tokens": 2, "stream": stream})
        err = is_openai_error(r, 400)
        assert word in err["message"] and err["param"].startswith("tools[")
    r = post(server.url, "/v1/responses", {"model": model, "input": "hi", "max_output_tokens": 2,
                                          "tools": [{"type": "function", **t["function"]} for t in tools]})
    assert word in is_openai_error(r, 400)["message"]


def test_a_valid_tool_schema_still_works(server):
    good = tool({"type": "object", "properties": {"text": {"type": "string", "description": "what"}},
                 "required": ["text"]})
    r = post(server.url, "/v1/chat/completions", {"model": "agent", "messages": HI, "tools": [good], "max_tokens": 2})
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("model", MODELS)
def test_lone_surrogates_are_400(server, model):
    r = post(server.url, "/v1/chat/completions",
             {"model": model, "messages": [{"role": "user", "content": "a\ud800b"}], "max_tokens": 2})
    err = is_openai_error(r, 400)
    assert "surrogate" in err["message"] and err["param"] == "messages[0].content"
    r = post(server.url, "/v1/chat/completions", {"model": model, "max_tokens": 2, "messages": [
        {"role": "user", "content": [{"type": "text", "text": "\udfff"}]}]})
    assert "surrogate" in is_openai_error(r, 400)["message"]
    r = post(server.url, "/v1/responses", {"model": model, "input": "\ud800", "max_output_tokens": 2})
    assert is_openai_error(r, 400)["param"] == "input"
    # a surrogate *pair* is one valid character
    r = post(server.url, "/v1/chat/completions",
             {"model": model, "messages": [{"role": "user", "content": "\ud83d\ude00"}], "max_tokens": 2})
    assert r.status_code == 200, r.text


def convo_with_call(arguments: str, call_id: str = "c1", answer_id: str = "c1") -> list[dict]:
    return [{"role": "user", "content": "x"},
            {"role": "assistant", "content": None,
             "tool_calls": [{"id": call_id, "type": "function", "function": {"name": "t", "arguments": arguments}}]},
            {"role": "tool", "tool_call_id": answer_id, "content": "ok"}]


@pytest.mark.parametrize("model", MODELS)
def test_deeply_nested_tool_arguments_are_400(server, model):
    deep = '{"a": ' + "[" * 3000 + "]" * 3000 + "}"
    r = post(server.url, "/v1/chat/completions", {"model": model, "max_tokens": 2, "messages": convo_with_call(deep)})
    err = is_openai_error(r, 400)
    assert "nested deeper" in err["message"] and err["param"] == "messages[1].tool_calls[0].function.arguments"
    shallow = '{"a": ' + "[" * 10 + "]" * 10 + "}"
    r = post(server.url, "/v1/chat/completions", {"model": model, "max_tokens": 2, "messages": convo_with_call(shallow)})
    assert r.status_code == 200, r.text
    # JSON contents are parsed too (tool results, A2UI userAction events): found by the fuzz test
    deep_result = convo_with_call("{}")
    deep_result[2]["content"] = deep
    r = post(server.url, "/v1/chat/completions", {"model": model, "max_tokens": 2, "messages": deep_result})
    assert is_openai_error(r, 400)["param"] == "messages[2].content"
    action = '{"userAction": ' + "[" * 3000 + "]" * 3000 + "}"
    r = post(server.url, "/v1/chat/completions", {"model": model, "max_tokens": 2,
                                                "messages": [{"role": "user", "content": action}]})
    assert is_openai_error(r, 400)["param"] == "messages[0].content"
    # arguments that are not JSON at all pass through verbatim (a model may have written them)
    r = post(server.url, "/v1/chat/completions", {"model": model, "max_tokens": 2, "messages": convo_with_call("{oops")})
    assert r.status_code == 200, r.text


def test_deeply_nested_bodies_are_400(server):
    nested: object = "x"
    for _ in range(200):
        nested = [nested]
    r = post(server.url, "/v1/chat/completions", {"model": "agent", "messages": HI, "max_tokens": 2, "user": "u",
                                                "metadata": nested})
    assert "nested deeper" in is_openai_error(r, 400)["message"]
    r = httpx.post(server.url + "/v1/chat/completions", content=b"[" * 100_000 + b"]" * 100_000,
                   headers={"content-type": "application/json"})
    assert is_openai_error(r, 400)["code"] == "invalid_json"


@pytest.mark.parametrize("model", MODELS)
def test_a_tool_message_must_answer_a_call(server, model):
    orphan = [{"role": "user", "content": "x"}, {"role": "tool", "tool_call_id": "c1", "content": "ok"}]
    r = post(server.url, "/v1/chat/completions", {"model": model, "max_tokens": 2, "messages": orphan})
    assert "must answer a preceding assistant" in is_openai_error(r, 400)["message"]
    r = post(server.url, "/v1/chat/completions",
             {"model": model, "max_tokens": 2, "messages": convo_with_call("{}", "c1", "c2")})
    err = is_openai_error(r, 400)
    assert "matches no call" in err["message"] and err["param"] == "messages[2].tool_call_id"
    missing = convo_with_call("{}")
    del missing[2]["tool_call_id"]
    r = post(server.url, "/v1/chat/completions", {"model": model, "max_tokens": 2, "messages": missing})
    assert "tool_call_id is required" in is_openai_error(r, 400)["message"]
    r = post(server.url, "/v1/responses", {"model": model, "max_output_tokens": 2, "store": False, "input": [
        {"type": "message", "role": "user", "content": "x"},
        {"type": "function_call_output", "call_id": "nope", "output": "ok"}]})
    assert "must answer" in is_openai_error(r, 400)["message"]


def test_tool_choice_is_checked(server):
    good = tool({"type": "object"})
    for choice, word in [("sometimes", "must be one of"), ({"type": "function", "function": {"name": "other"}},
                                                          "not among the tools"), ("required", "needs tools")]:
        body = {"model": "agent", "messages": HI, "max_tokens": 2, "tool_choice": choice,
                **({"tools": [good]} if choice != "required" else {})}
        assert word in is_openai_error(post(server.url, "/v1/chat/completions", body), 400)["message"]


def test_every_route_answers_errors_in_the_openai_shape(server):
    u = server.url
    assert is_openai_error(httpx.get(u + "/nope"), 404)["code"] == "not_found"
    assert is_openai_error(httpx.get(u + "/v1/nope"), 404)["code"] == "not_found"
    assert is_openai_error(httpx.get(u + "/v1/chat/completions"), 405)["code"] == "method_not_allowed"
    assert is_openai_error(httpx.put(u + "/v1/models"), 405)["code"] == "method_not_allowed"
    assert is_openai_error(httpx.get(u + "/v1/responses/resp_missing"), 404)["code"] == "response_not_found"
    assert is_openai_error(httpx.get(u + "/static/nope.js"), 404)["code"] == "not_found"
    bad_utf8 = b'{"model": "chat", "messages": [{"role": "user", "content": "\xff\xfe"}]}'
    r = httpx.post(u + "/v1/chat/completions", content=bad_utf8, headers={"content-type": "application/json"})
    assert "UTF-8" in is_openai_error(r, 400)["message"]
    for raw in (b"{not json", b"", b"[1, 2]", b'"text"', b"null"):
        r = httpx.post(u + "/v1/chat/completions", content=raw, headers={"content-type": "application/json"})
        is_openai_error(r, 400)
    r = httpx.post(u + "/v1/chat/completions", content=b"model=x", headers={"content-type": "text/plain"})
    is_openai_error(r, 400)
    r = httpx.post(u + "/v1/chat/completions", content=b"x" * 300_000, headers={"content-type": "application/json"})
    assert is_openai_error(r, 413)["code"] == "request_too_large"
    r = httpx.post(u + "/v1/chat/completions", json={"model": "chat", "messages": []})
    assert is_openai_error(r, 400)["param"] == "messages"
    assert httpx.get(u + "/health").headers["x-request-id"].startswith("req_")


def test_a_partial_body_times_out_with_408(scripted):
    from macaronic.serve.app import ServeConfig, create_app

    mol, _ = scripted
    srv = InProcessServer(create_app(mol, ServeConfig(body_idle_s=0.5, body_timeout_s=2)))
    try:
        port = int(srv.url.rsplit(":", 1)[1])
        head = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Content-Length: 100\r\n\r\n")
        for drip in (False, True):  # a stalled body, and one dripping a byte at a time
            with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
                t0 = time.monotonic()
                s.sendall(head + b'{"mo')
                s.settimeout(0.3 if drip else 30)
                reply = b""
                while b'"request_timeout"' not in reply:  # the head and the body may come in two reads
                    try:
                        chunk = s.recv(4096)
                    except socket.timeout:
                        if not reply:  # still dripping the body; once the reply began, only read
                            s.sendall(b" ")
                        continue
                    if not chunk:
                        break
                    reply += chunk
                wall = time.monotonic() - t0
            assert reply.startswith(b"HTTP/1.1 408") and b'"request_timeout"' in reply, reply[:300]
            assert wall < 10, wall  # bounded by the configured limits, not by the client
    finally:
        srv.stop()


def test_a_client_that_disconnects_is_no_500(scripted, caplog):
    """A non-streaming client that goes away: 499 in /metrics, no 500, nothing logged as failed."""
    from macaronic.serve.app import create_app

    mol, script = scripted
    ends = {script.eos, script.tok.eos_token_id} - {None}

    def slow(messages, adapter):
        def proc(generated, logits):
            time.sleep(0.01)
            logits = logits.clone()  # the answer never ends early, so every client gives up first
            logits[list(ends)] = -1e4
            return logits
        return proc

    mol.backend.logits_hook = slow
    srv = InProcessServer(create_app(mol))
    body = {"model": "chat", "messages": [{"role": "user", "content": "talk"}], "max_tokens": 400}

    async def go():
        async with httpx.AsyncClient() as c:
            for _ in range(3):
                with pytest.raises(httpx.TimeoutException):
                    await c.post(srv.url + "/v1/chat/completions", json=body, timeout=0.6)

    try:
        with caplog.at_level(logging.WARNING):
            asyncio.run(go())
            for _ in range(100):
                metrics = httpx.get(srv.url + "/metrics").text
                if 'endpoint="/v1/chat/completions",status="499"} 3' in metrics:
                    break
                time.sleep(0.1)
        assert 'endpoint="/v1/chat/completions",status="499"} 3' in metrics, metrics
        assert 'status="500"' not in metrics
        assert "already running" not in caplog.text and "failed" not in caplog.text, caplog.text
    finally:
        srv.stop()


def test_an_unexpected_error_is_a_500_in_the_openai_shape_with_a_request_id(scripted, caplog):
    from macaronic.serve.app import create_app

    mol, _ = scripted
    srv = InProcessServer(create_app(mol))

    def broken(*a, **k):
        raise ZeroDivisionError("boom")

    mol.annotate = broken  # an internal bug, after validation
    try:
        with caplog.at_level(logging.ERROR):
            r = post(srv.url, "/v1/chat/completions", {"model": "chat", "messages": HI, "max_tokens": 2})
            err = is_openai_error(r, 500)
            rid = r.headers["x-request-id"]
            assert rid in err["message"] and "boom" not in err["message"] and err["code"] == "internal_error"
            assert rid in caplog.text and "ZeroDivisionError" in caplog.text  # the traceback is in the log
            c = openai.OpenAI(base_url=srv.url + "/v1", api_key="x", max_retries=0)
            with pytest.raises(openai.InternalServerError):
                c.chat.completions.create(model="chat", messages=HI, max_tokens=2, stream=True)
        assert httpx.get(srv.url + "/health").status_code == 200
    finally:
        srv.stop()


def test_a_corrupt_adapter_reports_its_name_not_the_server_path(tiny_models, tmp_path, caplog):
    """An adapter corrupted after the server started: a 5xx naming the adapter; the path is only logged."""
    from macaronic.engine.llm import EngineConfig, load_llm
    from macaronic.harness import load_bundle
    from macaronic.serve.app import create_app
    from macaronic.serve.backends import LocalBackend
    from macaronic.serve.mol import MoL

    base, adapters = tiny_models
    copies = [shutil.copytree(a, tmp_path / a.name) for a in adapters]
    llm = load_llm(base, copies, EngineConfig(max_tokens_limit=64))
    srv = InProcessServer(create_app(MoL(LocalBackend(llm), load_bundle(), None)))
    try:
        agent = next(c for c in copies if c.name == "agent")
        (agent / "adapter_model.safetensors").write_bytes(b"corrupt")
        with caplog.at_level(logging.ERROR):
            for stream in (False, True):
                r = post(srv.url, "/v1/chat/completions",
                         {"model": "agent", "messages": HI, "max_tokens": 2, "stream": stream})
                text = r.text
                assert "agent" in text and str(tmp_path) not in text, text
                if not stream:
                    assert is_openai_error(r, r.status_code)["type"] == "server_error" and r.status_code >= 500
        assert str(tmp_path) in caplog.text  # the operator still sees where
    finally:
        srv.stop()
        llm.close()


def test_slow_or_broken_request_heads(scripted):
    """The server's protocol (serve/http.py): a partial head gets a 408 after the head timeout, a
    silent connection is closed, an unparsable request is a 400 in the OpenAI shape, and keep-alive
    requests still work."""
    import threading

    import uvicorn

    from macaronic.serve.app import create_app
    from macaronic.serve.http import protocol

    mol, _ = scripted
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(mol), log_level="warning", lifespan="off",
                                           http=protocol(head_timeout_s=0.5)))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)

    def exchange(data: bytes) -> tuple[bytes, float]:
        with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
            t0 = time.monotonic()
            s.sendall(data)
            reply = b""
            while chunk := s.recv(4096):
                reply += chunk
            return reply, time.monotonic() - t0

    try:
        reply, wall = exchange(b"GET /hea")
        assert reply.startswith(b"HTTP/1.1 408") and b'"request_timeout"' in reply and wall < 10, (reply, wall)
        reply, wall = exchange(b"")
        assert reply == b"" and wall < 10
        reply, _ = exchange(b"GET /health HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n")
        assert reply.startswith(b"HTTP/1.1 400") and b'"invalid_http_request"' in reply, reply
        with httpx.Client(base_url=f"http://127.0.0.1:{port}") as c:  # one connection, reused
            assert [c.get("/health").status_code for _ in range(3)] == [200, 200, 200]
    finally:
        server.should_exit = True
        thread.join(timeout=20)


def test_n_samples_then_a_cached_prefix_is_no_engine_error(tiny_models):
    """Found by the fuzz test: n > 1 forks its samples inside the engine's inference mode; when that
    grew the K/V pool, the next request reusing a cached prefix copied into a pool row outside
    inference mode and failed ("Inplace update to inference tensor outside InferenceMode"), a 500."""
    from macaronic.engine.llm import EngineConfig, load_llm
    from macaronic.engine.sampling import SamplingParams

    llm = load_llm(tiny_models[0], [], EngineConfig(max_tokens_limit=256))
    try:
        prompt = llm.encode_chat([{"role": "user", "content": "a prompt whose prefix gets cached"}])
        text, last = llm.submit(prompt, None, SamplingParams(max_tokens=2, temperature=0)).result()
        assert last.finish_reason != "error", last.error
        other = llm.encode_chat([{"role": "user", "content": "six samples of another prompt"}])
        sp = SamplingParams(max_tokens=200, temperature=1.0, seed=1)
        handles = llm.engine.submit_n([llm.request(other, None, sp) for _ in range(6)])  # > 4 rows: the pool grows
        for _ in range(400):
            if llm.engine.stats["prefill_tokens"] and len(llm.engine._active) == 6:
                break
            time.sleep(0.01)
        again = prompt + llm.tokenizer.encode(" and more", add_special_tokens=False)
        _, last = llm.submit(again, None, SamplingParams(max_tokens=2, temperature=0)).result()
        assert last.finish_reason != "error", last.error
        assert last.usage["reused_tokens"] > 0  # it did reuse the cached prefix, into the grown pool
        for h in handles:
            assert h.result()[1].finish_reason != "error"
    finally:
        llm.close()
