"""`macaronic mcp` answers every request line, malformed or 5,000 deep, with a JSON-RPC error
(issue 20): a real stdio subprocess fed raw lines, hand-written and hypothesis-generated."""

from __future__ import annotations

import json
import select
import subprocess
import sys
import time

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from macaronic.substrate.mcp_server import INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR, screen

INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}


class Pipe:
    def __init__(self):
        self.p = subprocess.Popen([sys.executable, "-m", "macaronic.cli", "mcp"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        assert self.ask(json.dumps(INIT).encode())["id"] == 0
        self.send(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')

    def send(self, line: bytes):
        self.p.stdin.write(line + b"\n")
        self.p.stdin.flush()

    def recv(self, timeout: float = 20) -> dict | None:
        ready, _, _ = select.select([self.p.stdout], [], [], timeout)
        return json.loads(self.p.stdout.readline()) if ready else None

    def ask(self, line: bytes, timeout: float = 20) -> dict | None:
        self.send(line)
        return self.recv(timeout)

    def close(self):
        self.p.kill()
        self.p.wait()


@pytest.fixture(scope="module")
def pipe():
    p = Pipe()
    yield p
    p.close()


def deep(n: int, id_: int) -> bytes:
    return (b'{"jsonrpc": "2.0", "id": %d, "method": "tools/call", "params": {"name": "start_episode", '
            b'"arguments": {"a": ' % id_ + b"[" * n + b"]" * n + b"}}}")


CASES = [  # line, expected id, expected code (None: a result or the SDK's own error)
    (b"{oops", None, PARSE_ERROR),
    (b"[1, 2]", None, INVALID_REQUEST),
    (b'"text"', None, INVALID_REQUEST),
    (b'{"jsonrpc": "2.0", "id": 7}', 7, INVALID_REQUEST),
    (b'{"jsonrpc": "1.0", "id": 8, "method": "tools/list"}', 8, INVALID_REQUEST),
    (b'{"jsonrpc": "2.0", "id": 9, "method": "nope"}', 9, None),
    (b'{"jsonrpc": "2.0", "id": 10, "method": "tools/call", "params": 5}', 10, INVALID_PARAMS),
    (deep(5000, 11), 11, INVALID_REQUEST),
    (deep(300, 12), 12, INVALID_REQUEST),
    (b'{"jsonrpc": "2.0", "id": "s-13", "method": "tools/call", "params": {}}', "s-13", None),
    (b'{"jsonrpc": "2.0", "id": 14, "method": "tools/call", "params": {"name": 5}}', 14, None),
    (b'{"jsonrpc": "2.0", "id": 15, "method": "tools/call", "params": {"name": "start_episode", "arguments": 3}}',
     15, None),
    (b'{"jsonrpc": "2.0", "id": 16, "method": "tools/call", "params": {"name": "get_today", '
     b'"arguments": {"episode_id": "\\ud800"}}}', 16, None),
]


def test_every_malformed_request_gets_an_answer(pipe):
    for line, rid, code in CASES:
        t0 = time.monotonic()
        reply = pipe.ask(line)
        assert reply is not None, f"no answer to {line[:80]!r}"
        assert reply["id"] == rid and time.monotonic() - t0 < 20, (line[:80], reply)
        if code is not None:
            assert reply["error"]["code"] == code, (line[:80], reply)
        else:
            assert "error" in reply or reply["result"].get("isError"), (line[:80], reply)
    # the session still works, and a notification (no id) gets no answer
    pipe.send(b'{"jsonrpc": "2.0", "method": "notifications/nope", "params": 5}')
    listed = pipe.ask(b'{"jsonrpc": "2.0", "id": 99, "method": "tools/list"}')
    assert listed["id"] == 99 and any(t["name"] == "start_episode" for t in listed["result"]["tools"])


def test_screen_passes_what_the_sdk_takes():
    assert screen(json.dumps(INIT)) is None and screen("   ") is None
    assert screen('{"jsonrpc": "2.0", "id": 3, "result": {}}') is None
    assert screen(deep(5000, 4).decode())["id"] == 4  # the id found without parsing


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=12)
methods = st.sampled_from(["tools/call", "tools/list", "initialize", "ping", "resources/list", "nope", ""])
tool_names = st.sampled_from(["start_episode", "get_today", "list_orders", "close_episode", "x", ""])
params = st.one_of(json_values, st.fixed_dictionaries(
    {"name": st.one_of(tool_names, json_values), "arguments": st.one_of(json_values, st.dictionaries(
        st.sampled_from(["seed", "episode_id", "today", "actor", "x"]), json_values, max_size=3))}))


def test_fuzzed_requests_each_get_one_answer(pipe):
    """Hypothesis-generated requests (any params, any method): each id gets exactly one answer."""
    counter = iter(range(1000, 10**6))

    @given(method=methods, params=params, drop_params=st.booleans())
    @settings(max_examples=120, deadline=None, derandomize=True, database=None,
              phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
    def run(method, params, drop_params):
        rid = next(counter)
        msg = {"jsonrpc": "2.0", "id": rid, "method": method, **({} if drop_params else {"params": params})}
        reply = pipe.ask(json.dumps(msg).encode())
        assert reply is not None and reply["id"] == rid, (msg, reply)

    run()
    assert pipe.ask(b'{"jsonrpc": "2.0", "id": "last", "method": "ping"}')["id"] == "last"


BAD_IDS = [b"1.5", b'{"a": 1}', b"1e400", b"true", b"false", b"null", b"[1]", b"-0.5"]


def test_a_bad_id_gets_an_invalid_request_answer(pipe):
    """Issue 41: ids 1.5, {"a": 1}, 1e400 and true passed as notifications and got no answer at all.
    JSON-RPC: an id that is not a string or an integer is an invalid request, answered with id null."""
    for raw in BAD_IDS:
        reply = pipe.ask(b'{"jsonrpc": "2.0", "id": ' + raw + b', "method": "tools/list"}', timeout=10)
        assert reply is not None, f"no answer for id {raw!r}"
        assert reply["id"] is None and reply["error"]["code"] == INVALID_REQUEST, (raw, reply)
    assert pipe.ask(b'{"jsonrpc": "2.0", "id": 5, "method": "ping"}')["id"] == 5  # the session goes on


@given(rid=st.floats(allow_nan=False).filter(lambda f: not f.is_integer()) | st.booleans()
       | st.dictionaries(st.text(max_size=4), st.integers(), max_size=2) | st.lists(st.integers(), max_size=2))
@settings(max_examples=25, deadline=None, database=None, suppress_health_check=list(HealthCheck))
def test_screen_answers_every_bad_id(rid):
    line = json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/list"})
    err = screen(line)
    assert err is not None and err["id"] is None and err["error"]["code"] == INVALID_REQUEST and not err["notification"]


def test_a_huge_method_name_is_not_echoed(pipe):
    """A 10 MB method name came back whole in the error; the answer now quotes 64 characters of it."""
    line = b'{"jsonrpc": "2.0", "id": 77, "method": "' + b"m" * (10 << 20) + b'"}'
    reply = pipe.ask(line, timeout=60)
    assert reply is not None and reply["id"] == 77 and reply["error"]["code"] == METHOD_NOT_FOUND
    assert len(json.dumps(reply)) < 400, len(json.dumps(reply))
