"""Memory is bounded (issue 20): rounds of concurrent, all-distinct requests (every adapter, tools
with fresh names, fresh response_format schemas, stored Responses) against a real server on the
tiny model, with small cache limits so that every bound is hit many times over. After every round
each cache is within its bound (prefix cache bytes, compiled grammars, segment memory, pending
summaries, engine sequences) and the process RSS has stopped growing.

The RSS check is a plateau, not a speed: growth over the last rounds must stay far below what
the traffic would cost if one cache kept everything (printed with the series)."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from serve_helpers import InProcessServer

pytestmark = pytest.mark.long  # ten rounds of twenty concurrent requests: the long CI step

ROUNDS, STREAMS = 10, 20
CACHE_BYTES = 4 << 20  # the prefix cache's bound here (the server default is 1 GiB)
MAX_SEGMENTS = 40
WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa".split()


def rss_mb() -> float:
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def body(r: int, i: int) -> tuple[str, dict]:
    words = " ".join(WORDS[(r * 7 + i * 3 + k) % len(WORDS)] for k in range(40))
    text = f"request {r}-{i}: {words}"
    model = ("chat", "agent", "coding", "genui", "macaronic")[i % 5]
    if i % 4 == 3:
        return "/v1/responses", {"model": model, "input": text, "max_output_tokens": 4, "stream": i % 2 == 0}
    req = {"model": model, "messages": [{"role": "user", "content": text}], "max_tokens": 4, "stream": i % 2 == 0}
    if i % 4 == 1:
        req["tools"] = [{"type": "function", "function": {
            "name": f"tool_{r}_{i}", "description": "a fresh tool",
            "parameters": {"type": "object", "properties": {f"arg_{r}_{i}": {"type": "string"}}}}}]
    elif i % 4 == 2 and model != "genui":
        req["response_format"] = {"type": "json_schema", "json_schema": {"name": f"s{r}{i}", "schema": {
            "type": "object", "properties": {f"k_{r}_{i}": {"type": "integer"}}, "required": [f"k_{r}_{i}"]}}}
    return "/v1/chat/completions", req


def test_memory_plateaus_under_distinct_traffic(tiny_models, tmp_path, capsys):
    from macaronic.engine.llm import EngineConfig, load_llm
    from macaronic.harness import load_bundle
    from macaronic.serve.app import create_app
    from macaronic.serve.backends import LocalBackend
    from macaronic.serve.mol import MoL
    from macaronic.serve.store import Store

    llm = load_llm(tiny_models[0], tiny_models[1], EngineConfig(max_tokens_limit=64, prefix_cache_bytes=CACHE_BYTES))
    backend = LocalBackend(llm)
    store = Store(tmp_path / "state.sqlite", max_segments=MAX_SEGMENTS)
    mol = MoL(backend, load_bundle(), None, store)
    srv = InProcessServer(create_app(mol))
    series = []

    async def one_round(r: int):
        async with httpx.AsyncClient(base_url=srv.url, timeout=120) as c:
            rs = await asyncio.gather(*(c.post(path, json=b) for path, b in (body(r, i) for i in range(STREAMS))))
        bad = [(x.status_code, x.text[:200]) for x in rs if x.status_code != 200]
        assert not bad, bad

    try:
        for r in range(ROUNDS):
            asyncio.run(one_round(r))
            # summaries of full-mode adapters start after the reply went out (a client can read a
            # whole streamed reply before its summary task exists): idle means idle for 1 s on end,
            # within up to 2 min on a loaded box
            quiet = 0
            for _ in range(2400):
                idle = not mol._pending and not llm.engine._active and not llm.engine._waiting
                quiet = quiet + 1 if idle else 0
                if quiet >= 20:
                    break
                time.sleep(0.05)
            (segments,) = store._db().execute("SELECT count(*) FROM segments").fetchone()
            grammars = backend._grammars
            row = {"round": r, "rss_mb": round(rss_mb(), 1), "prefix_bytes": llm.engine.cache.nbytes,
                   "prefix_entries": len(llm.engine.cache), "segments": segments,
                   "grammars": len(grammars._cache) if grammars is not None else 0,
                   "pending": len(mol._pending), "active": len(llm.engine._active)}
            series.append(row)
            assert row["prefix_bytes"] <= CACHE_BYTES and row["segments"] <= MAX_SEGMENTS, row
            assert grammars is None or row["grammars"] <= grammars.max_cached, row
            assert row["pending"] == 0 and row["active"] == 0, row
    finally:
        srv.stop()
        llm.close()
    with capsys.disabled():
        print("\n[soak] " + "\n[soak] ".join(str(s) for s in series))
    # every bound was reached (the test exercised eviction), and RSS stopped growing
    assert series[-1]["segments"] == MAX_SEGMENTS and series[-1]["prefix_bytes"] > CACHE_BYTES // 2
    grammars = backend._grammars
    assert grammars.stats["compiled"] > grammars.max_cached and series[-1]["grammars"] == grammars.max_cached
    assert max(s["prefix_entries"] for s in series) > 1
    late = [s["rss_mb"] for s in series[ROUNDS // 2:]]
    assert max(late) - late[0] < 64, series  # tiny model: MBs of noise; an unbounded cache grows per round
