"""`macaronic serve` warms up before it listens: the first card and the first turn with the built-in
tools find their grammar compiled, the first turn finds its system prompt in the prefix cache, and
/health says what the warm-up did. `--no-warmup` turns it off (every other server test starts so: test_serve_http checks it listens cold). No timing here: the speed is
`macaronic bench --only first-request`."""

from __future__ import annotations

import re

import httpx
import pytest

from serve_helpers import ServerProcess, model_args


def grammar_counts(url: str) -> tuple[int, int]:
    text = httpx.get(url + "/metrics", timeout=30).text
    get = lambda name: int(float(re.search(rf"^macaronic_engine_grammar_{name}_total (\S+)$", text, re.M).group(1)))
    return get("compiled"), get("hits")


def chat(url: str, **body) -> dict:
    r = httpx.post(url + "/v1/chat/completions", json={"max_tokens": 4, "temperature": 0, **body}, timeout=300)
    assert r.status_code == 200, r.text
    return r.json()


@pytest.mark.real_model
@pytest.mark.long  # the real base's whole warm-up (grammar compiles, every role's turn): the long CI step
def test_first_requests_find_the_server_warm(tmp_path):
    s = ServerProcess(["--store", str(tmp_path / "s.sqlite"), "--substrate", ":memory:"], timeout=300, warmup=True)
    try:
        log = "".join(s.log)
        assert re.search(r"warmed up in [\d.]+ s \(\d+ turns", log), log
        assert log.index("warmed up in") < log.index("Web chat:")  # nothing listens before the warm-up ends
        w = httpx.get(s.url + "/health", timeout=30).json()["warmup"]
        roles = len(httpx.get(s.url + "/v1/models", timeout=30).json()["data"]) - 2  # less the routed id and the base
        assert w["enabled"] and w["done"] and w["seconds"] > 0 and w["errors"] == []
        assert w["turns"] == 1 + roles + 1 + 2  # routed, each role, the built-in tools; again, both
        assert set(w["steps"]) == {"grammar info", "turns", "card grammar", "tools grammar", "reuse"}
        compiled, hits = grammar_counts(s.url)
        # the card grammar and the built-in tools', each compiled once; the tools' found again (by the
        # second tools turn, and by the agent's read of a turn the tools decision revisits)
        assert compiled == 2 and hits >= 1

        first = chat(s.url, model="macaronic", messages=[{"role": "user", "content": "What is the capital of France?"}])
        meta = first["macaronic"]
        assert meta["specialist"] == "chat" and meta["reused_tokens"] > 0  # its system prompt was cached

        card = chat(s.url, model="genui", messages=[{"role": "user", "content": "A card listing three fruits."}])
        assert card["macaronic"]["constrained"] == "genui"
        assert grammar_counts(s.url) == (compiled, hits + 1)  # found compiled

        tools = httpx.get(s.url + "/v1/tools", timeout=30).json()["data"]
        r = chat(s.url, model="macaronic", tools=tools, messages=[{"role": "user", "content": "Show my reminders."}])
        # the agent reads it under the tools grammar (the tools decision), then answers under it, or
        # hands it to chat, which answers without the tools: either way nothing new is compiled
        declined = r["macaronic"]["reason"].endswith("tools-decided-no-call")
        assert r["macaronic"]["constrained"] == (None if declined else "tools"), r["macaronic"]
        now_compiled, now_hits = grammar_counts(s.url)
        assert now_compiled == compiled and now_hits >= hits + 2
    finally:
        s.stop()


@pytest.mark.long  # over 10 s on 2 cores: the long CI step keeps the default suite under 15 minutes
def test_warmup_on_tiny_models_is_reported(tiny_models, tmp_path):
    """A server on other adapters (tiny random ones) warms up too, a warm-up turn that fails does not
    stop it, and nothing the warm-up did lands in the store."""
    store = tmp_path / "s.sqlite"
    s = ServerProcess([*model_args(*tiny_models), "--router-policy", "none", "--store", str(store),
                       "--substrate", ":memory:"], warmup=True)
    try:
        w = httpx.get(s.url + "/health", timeout=30).json()["warmup"]
        assert w["done"], w
        # the built-in tools' prompt is longer than the tiny model's context: reported, not fatal, and
        # their grammar was still compiled (before the prompt met the engine)
        assert w["errors"] and all("does not fit the context window" in e for e in w["errors"]), w
        assert grammar_counts(s.url)[0] == 2
        first = chat(s.url, model="macaronic", messages=[{"role": "user", "content": "Hello! What can you help me with?"}])
        assert first["macaronic"]["reused_tokens"] > 0
    finally:
        s.stop()
    import sqlite3

    with sqlite3.connect(store) as db:
        assert db.execute("SELECT count(*) FROM segments").fetchone()[0] == 1  # the one real turn
