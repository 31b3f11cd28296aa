"""One client cannot stall, starve or steer the server (issue 41, items 1, 2 and 6), against a real
`macaronic serve` on the tiny models: slow patterns and large or slow schemas stay off the event
loop and within their budgets (a 400 naming the budget), a remote `$ref` is refused and never
fetched, `parallel_tool_calls: false` gives at most one call, a reply cut by the token cap keeps
the calls that completed, and a schema that can never end is a 400, not a 500."""

from __future__ import annotations

import socket
import threading
import time

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from serve_helpers import ServerProcess, model_args

COMPILE_BUDGET_S = 1.0


@pytest.fixture(scope="module")
def srv(tiny_models, tmp_path_factory):
    s = ServerProcess([*model_args(*tiny_models), "--router-policy", "prompted",
                       "--store", str(tmp_path_factory.mktemp("budgets") / "s.sqlite"), "--max-tokens-limit", "256",
                       "--max-body-bytes", str(8 << 20), "--compile-budget-s", str(COMPILE_BUDGET_S)])
    yield s
    s.stop()


def tool(name: str, parameters: dict) -> dict:
    return {"type": "function", "function": {"name": name, "parameters": parameters}}


def chat(url: str, timeout: float = 120, **body) -> httpx.Response:
    body = {"model": "agent", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 16, **body}
    return httpx.post(url + "/v1/chat/completions", json=body, timeout=timeout)


def while_in_flight(url: str, request) -> tuple[float, httpx.Response]:
    """(the slowest /health answer while `request()` runs in another thread, its response)."""
    out = {}
    th = threading.Thread(target=lambda: out.setdefault("r", request()))
    th.start()
    time.sleep(0.2)
    worst = 0.0
    while th.is_alive():
        t0 = time.monotonic()
        try:
            httpx.get(url + "/health", timeout=5)
        except httpx.TimeoutException:
            pass
        worst = max(worst, time.monotonic() - t0)
        time.sleep(0.05)
    th.join()
    return worst, out["r"]


def refused(r: httpx.Response, *words: str) -> dict:
    assert r.status_code == 400, r.text[:300]
    err = r.json()["error"]
    assert err["type"] == "invalid_request_error", err
    for w in words:
        assert w in err["message"], err
    return err


FORCED = {"type": "function", "function": {"name": "f"}}


def test_a_catastrophic_pattern_does_not_stall_health(srv):
    """The grammar forces "a"*26 + "b"; the allOf pattern (checked after decoding) backtracks 2**26
    times in `re`: it froze every stream for seconds. Now it runs off the loop under the regex budget."""
    params = {"type": "object", "properties": {"x": {"type": "string", "pattern": "^a{26}b$"}}, "required": ["x"],
              "allOf": [{"properties": {"x": {"pattern": "^(a|a)+$"}}}]}
    worst, r = while_in_flight(srv.url, lambda: chat(srv.url, tools=[tool("f", params)], tool_choice=FORCED,
                                                     max_tokens=200))
    assert r.status_code == 200, r.text[:300]
    assert worst < 1.0, f"/health took {worst:.2f} s while a slow pattern was checked"
    meta = r.json()["macaronic"]
    assert "budget" in meta.get("tool_error", ""), meta  # the call failed its check, within the budget


def test_too_many_or_too_large_tools_are_refused_at_once(srv):
    r = chat(srv.url, tools=[tool(f"t{i}", {"type": "object", "properties": {}}) for i in range(129)])
    refused(r, "129 tools", "--max-tools")
    # the probe's request: 115 tools with large anyOfs, 4 MB; it held the loop for 22 s before its 400
    big = {"type": "object", "properties": {f"p{j}": {"anyOf": [{"type": "string", "enum": [f"v{k}" for k in range(20)]},
                                                               {"type": "integer"}]} for j in range(150)}}
    t0 = time.monotonic()
    worst, r = while_in_flight(srv.url, lambda: chat(srv.url, tools=[tool(f"t{i}", big) for i in range(115)]))
    refused(r, "--max-schema")
    # parsing 3.5 MB of JSON holds the GIL for a moment (more on a loaded 2-core box); before: 16 s
    assert time.monotonic() - t0 < 8 and worst < 2.0


def test_deep_schemas_are_refused(srv):
    deep: dict = {"type": "string"}
    for _ in range(40):
        deep = {"type": "object", "properties": {"x": deep}}
    refused(chat(srv.url, tools=[tool("f", deep)]), "deeper than 32", "--max-schema-depth")


class Listener:
    """A loopback HTTP listener that counts connections (a fetched $ref would be one)."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port, self.hits, self.done = self.sock.getsockname()[1], 0, False
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while not self.done:
            try:
                c, _ = self.sock.accept()
            except OSError:
                continue
            self.hits += 1
            c.sendall(b'HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n{"type": "integer"}')
            c.close()

    def close(self):
        self.done = True
        self.sock.close()


@pytest.fixture(scope="module")
def listener():
    lis = Listener()
    yield lis
    lis.close()


def place(at: str, ref: str) -> dict:
    """A tool schema whose only call is forced to complete ({"x": 1}) with `ref` at `at`."""
    base = {"type": "object", "properties": {"x": {"const": 1}}, "required": ["x"]}
    sub = {"$ref": ref}
    return {"not": {**base, "not": sub}, "allOf": {**base, "allOf": [sub]},
            "property": {**base, "properties": {"x": {"const": 1}, "y": sub}},
            "defs": {**base, "$defs": {"a": sub}, "properties": {"x": {"const": 1}, "y": {"$ref": "#/$defs/a"}}},
            "items": {**base, "properties": {"x": {"const": 1}, "y": {"type": "array", "items": sub}}}}[at]


@settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
@given(at=st.sampled_from(["not", "allOf", "property", "defs", "items"]),
       scheme=st.sampled_from(["http://127.0.0.1:{port}/x.json", "https://127.0.0.1:{port}/x.json",
                               "file:///etc/passwd", "file:///nonexistent.json", "x.json", "//127.0.0.1:{port}/x"]),
       where=st.sampled_from(["tool", "response_format"]))
def test_remote_refs_are_refused_and_never_fetched(srv, listener, at, scheme, where):
    """A remote $ref used to be fetched when the call was checked (a connection to this listener),
    a file:// one probed the server's files (500 or 200), and a response_format one was accepted and
    not enforced. Now each is a 400 before any work, and nothing is opened."""
    ref = scheme.format(port=listener.port)
    if where == "tool":
        r = chat(srv.url, tools=[tool("f", place(at, ref))], tool_choice=FORCED, max_tokens=64)
    else:
        r = chat(srv.url, response_format={"type": "json_schema", "json_schema": {"name": "a", "schema": place(at, ref)}})
    refused(r, "not local")
    assert listener.hits == 0


def test_local_refs_still_work(srv):
    params = {"type": "object", "$defs": {"one": {"const": 1}}, "properties": {"x": {"$ref": "#/$defs/one"}},
              "required": ["x"]}
    r = chat(srv.url, tools=[tool("f", params)], tool_choice=FORCED, max_tokens=64)
    assert r.status_code == 200, r.text[:300]
    calls = r.json()["choices"][0]["message"].get("tool_calls") or []
    assert [c["function"]["arguments"] for c in calls] == ['{"x": 1}']


@pytest.mark.parametrize("params", [
    {"type": "object", "properties": {"x": {"anyOf": [{"$ref": "#/properties/x"}]}}, "required": ["x"]},
    {"type": "object", "anyOf": [{"$ref": "#"}]},
    {"type": "object", "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"anyOf": [{"$ref": "#/$defs/a"}]}},
     "properties": {"x": {"$ref": "#/$defs/a"}}},
])
def test_a_schema_that_can_never_end_is_a_400(srv, params):
    """A self-referencing anyOf compiled into a grammar with a rule that never ends; decoding under
    it failed ("grammar rejected token"): a 500. Now a 400 naming where the cycle closes."""
    refused(chat(srv.url, tools=[tool("f", params)], tool_choice="required", max_tokens=64), "no way to end")
    refused(chat(srv.url, response_format={"type": "json_schema", "json_schema": {"name": "a", "schema": params}}),
            "no way to end")
    ok = {"type": "object", "properties": {"x": {"anyOf": [{"type": "integer"}, {"$ref": "#/properties/x"}]}}}
    assert chat(srv.url, tools=[tool("f", ok)], tool_choice="required").status_code == 200


TWO = [tool(n, {"type": "object", "properties": {"a": {"const": 1}}, "required": ["a"]}) for n in ("f", "g")]


def calls_of(r: httpx.Response) -> list:
    assert r.status_code == 200, r.text[:300]
    return r.json()["choices"][0]["message"].get("tool_calls") or []


def test_parallel_tool_calls_false_gives_at_most_one_call(srv):
    many = 0
    for seed in range(6):
        body = {"tools": TWO, "tool_choice": "required", "seed": seed, "temperature": 1.0, "max_tokens": 200}
        many = max(many, len(calls_of(chat(srv.url, **body))))
        assert len(calls_of(chat(srv.url, parallel_tool_calls=False, **body))) == 1
        r = httpx.post(srv.url + "/v1/responses", timeout=120, json={
            "model": "agent", "input": "hi", "tools": [{"type": "function", **t["function"]} for t in TWO],
            "tool_choice": "required", "parallel_tool_calls": False, "max_output_tokens": 200})
        out = r.json()
        assert sum(o["type"] == "function_call" for o in out["output"]) <= 1 and out["parallel_tool_calls"] is False
    assert many >= 2, "these seeds should make several calls when parallel calls are allowed"


def test_a_cut_call_keeps_the_calls_before_it(srv):
    """OpenAI answers finish_reason "length" with the calls that completed; the harness used to drop them."""
    for seed in range(8):
        body = {"tools": TWO, "tool_choice": "required", "seed": seed, "temperature": 1.0}
        r = chat(srv.url, max_tokens=200, **body)
        full = calls_of(r)
        if len(full) >= 2 and r.json()["choices"][0]["finish_reason"] == "tool_calls":
            break
    else:
        pytest.fail("no seed made two calls")
    per_call = r.json()["usage"]["completion_tokens"] // len(full)
    cut = chat(srv.url, max_tokens=per_call + per_call // 2, **body)  # the cap lands inside the second call
    choice = cut.json()["choices"][0]
    assert choice["finish_reason"] == "length"
    kept = choice["message"].get("tool_calls") or []
    assert [c["function"] for c in kept] == [full[0]["function"]]
    assert "did not complete" in cut.json()["macaronic"]["tool_error"]


def requests_by_status(url: str) -> dict[str, float]:
    out = {}
    for line in httpx.get(url + "/metrics", timeout=10).text.splitlines():
        if line.startswith('macaronic_requests_total{endpoint="/v1/chat/completions"'):
            out[line.split('status="')[1].split('"')[0]] = float(line.rsplit(" ", 1)[1])
    return out


SLOW = {"type": "object", "properties": {"x": {"type": "string", "pattern": "[a-z]{1,12000}"}}}


def test_a_streaming_client_that_leaves_stops_its_compile(srv):
    """The grammar of a streaming request is built before its first event; a client that leaves
    meanwhile used to hold the build to its budget (then a 400 nobody read). Now it is stopped: 499."""
    chat(srv.url, tools=[tool("w", {"type": "object"})], tool_choice="required")  # the workers are up
    before = requests_by_status(srv.url)
    body = {"model": "agent", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 16, "stream": True,
            "tools": [tool("f", SLOW)], "tool_choice": FORCED}
    with pytest.raises(httpx.TimeoutException):
        with httpx.stream("POST", srv.url + "/v1/chat/completions", json=body, timeout=0.3) as r:
            r.read()
    time.sleep(COMPILE_BUDGET_S + 1.5)
    after = requests_by_status(srv.url)
    assert after.get("499", 0) == before.get("499", 0) + 1 and after.get("400", 0) == before.get("400", 0), after


def cpu_s(pid: int) -> float:
    """CPU seconds used so far by a process and its children (the grammar workers)."""
    import psutil

    procs = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    total = 0.0
    for p in procs:
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.NoSuchProcess:
            pass
    return total


def test_a_slow_compile_is_stopped_at_its_budget(srv):
    """A grammar that takes seconds to build (a pattern with a 12,000-wide repeat; the probe's 120
    tools compiled for ten minutes): a 400 naming the budget once it passes, /health answers
    meanwhile, and the work is stopped (its worker process killed), not left running."""
    chat(srv.url, tools=[tool("w", {"type": "object"})], tool_choice="required")  # the workers are up
    t0 = time.monotonic()
    worst, r = while_in_flight(srv.url, lambda: chat(srv.url, tools=[tool("f", SLOW)], tool_choice=FORCED))
    refused(r, "budget", "--compile-budget-s")
    assert r.json()["error"]["code"] == "budget_exceeded"
    assert time.monotonic() - t0 < COMPILE_BUDGET_S + 3 and worst < 1.0
    time.sleep(0.3)
    before = cpu_s(srv.proc.pid)
    time.sleep(1.5)
    assert cpu_s(srv.proc.pid) - before < 0.5, "the abandoned grammar build is still using the CPU"
