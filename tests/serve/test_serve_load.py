"""Load and cancellation: 32 concurrent streaming clients on loopback complete without errors
(tokens/s reported, never asserted), and a client that disconnects cancels its generation."""

from __future__ import annotations

import asyncio
import json
import socket
import time

import httpx
import openai

from serve_helpers import InProcessServer

CLIENTS, MAX_TOKENS = 32, 16


def test_32_concurrent_streaming_clients(server, capsys):
    async def one(client, i):
        model = "macaronic" if i % 8 == 0 else ("chat", "agent", "coding", "genui")[i % 4]
        stream = await client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": f"load test client {i}"}], max_tokens=MAX_TOKENS,
            temperature=0.7, seed=i, stream=True, stream_options={"include_usage": True})
        text, usage, meta = [], None, None
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                text.append(chunk.choices[0].delta.content)
            if chunk.choices and chunk.choices[0].finish_reason:
                meta = chunk.model_extra["macaronic"]
            usage = chunk.usage or usage
        return usage.completion_tokens, meta

    async def main():
        async with openai.AsyncOpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0, timeout=300) as c:
            t0 = time.perf_counter()
            results = await asyncio.gather(*(one(c, i) for i in range(CLIENTS)))
            return results, time.perf_counter() - t0

    results, wall = asyncio.run(main())
    tokens = sum(n for n, _ in results)
    assert len(results) == CLIENTS and all(meta and meta["adapter"] for _, meta in results)
    assert all(0 < n <= MAX_TOKENS for n, _ in results)
    with capsys.disabled():
        print(f"\n[load] {CLIENTS} concurrent streaming clients: {tokens} tokens in {wall:.2f} s = "
              f"{tokens / wall:.1f} tokens/s (tiny model, loopback)")


def test_client_disconnect_cancels_generation(scripted):
    from macaronic.serve.app import create_app

    mol, script = scripted
    # a reply that does not end before max_tokens, and never repeats (the loop cut would stop a
    # periodic one): only cancelling stops it short of 1200 tokens
    script.replies["chat"] = " ".join(str(i) for i in range(3000))
    llm = mol.backend.llm
    srv = InProcessServer(create_app(mol))
    try:
        before = llm.engine.stats["generated_tokens"]
        body = {"model": "chat", "messages": [{"role": "user", "content": "talk forever"}], "max_tokens": 1200,
                "stream": True}
        with httpx.Client(timeout=60) as c:
            with c.stream("POST", srv.url + "/v1/chat/completions", json=body) as r:
                lines = r.iter_lines()
                got = [next(lines) for _ in range(6)]  # a few events: generation is running
        assert any('"content"' in x for x in got)
        for _ in range(600):  # wait until the engine has no running sequence left
            if not llm.engine._active and not llm.engine._waiting:
                break
            time.sleep(0.05)
        assert not llm.engine._active
        assert llm.engine.stats["generated_tokens"] - before < 1200  # stopped long before max_tokens
        assert llm.engine.stats["generated_tokens"] - before > 0
        # the non-streaming path cancels too: the client goes away as soon as generation has begun
        # (closing the socket, not a wall-clock timeout, which a loaded machine would stretch)
        before = llm.engine.stats["generated_tokens"]
        host, port = srv.url.removeprefix("http://").split(":")
        payload = json.dumps({**body, "stream": False}).encode()
        sock = socket.create_connection((host, int(port)))
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n" % len(payload) + payload)
        for _ in range(600):
            if llm.engine.stats["generated_tokens"] > before:
                break
            time.sleep(0.01)
        sock.close()
        for _ in range(600):
            if not llm.engine._active and not llm.engine._waiting:
                break
            time.sleep(0.05)
        assert 0 < llm.engine.stats["generated_tokens"] - before < 1200
    finally:
        srv.stop()
