"""Load through the HTTP server: N concurrent streaming chat completions over mixed adapters.

Starts `macaronic serve --engine-only` in a subprocess (the real server, the real engine), then
opens `streams` concurrent streams with the official `openai` client, the adapters taken in turn.
Reports aggregate completion tokens/s over the wall time of the whole load, time to first token
and the gap between streamed chunks (p50/p99 over every stream), and the server's peak resident
memory (VmHWM). Knows nothing about the engine's internals.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

from macaronic.testing import make_random_adapter


def _pct(xs: list[float], q: float) -> float | None:
    return round(float(np.percentile(xs, q)) * 1000, 1) if xs else None


class _Server:
    def __init__(self, args: list[str], env: dict | None = None, timeout: float = 300):
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
        self.proc = subprocess.Popen([sys.executable, "-m", "macaronic.cli", "serve", "--port", "0", *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        self.log: list[str] = []
        self.url = None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.url is None:
            line = self.proc.stdout.readline()
            if not line:
                break
            self.log.append(line)
            m = re.search(r"API: (http://\S+/v1)", line)
            self.url = m.group(1) if m else None
        if self.url is None:
            self.stop()
            raise RuntimeError("server did not start:\n" + "".join(self.log[-20:]))
        threading.Thread(target=lambda: [self.log.append(x) for x in self.proc.stdout], daemon=True).start()

    def peak_rss_mb(self) -> float | None:
        try:
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)
        except OSError:
            pass
        return None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


async def _one(client, model: str, i: int, max_tokens: int) -> dict:
    t0 = time.perf_counter()
    stamps, tokens = [], None
    stream = await client.chat.completions.create(
        model=model, max_tokens=max_tokens, temperature=0, stream=True, stream_options={"include_usage": True},
        messages=[{"role": "user", "content": f"Write a numbered list of {max_tokens} animals, item {i} first."}])
    async for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            stamps.append(time.perf_counter())
        if chunk.usage is not None:
            tokens = chunk.usage.completion_tokens
    return {"ttft": stamps[0] - t0 if stamps else None, "gaps": list(np.diff(stamps)), "tokens": tokens or 0}


async def _load(url: str, models: list[str], streams: int, max_tokens: int) -> tuple[list[dict], float]:
    import httpx
    import openai

    client = openai.AsyncOpenAI(base_url=url, api_key="bench", max_retries=0,
                                http_client=httpx.AsyncClient(limits=httpx.Limits(max_connections=streams + 4),
                                                              timeout=600))
    await _one(client, models[0], 0, 4)  # warm-up: first request pays for lazy set-up
    t = time.perf_counter()
    res = await asyncio.gather(*(_one(client, models[i % len(models)], i, max_tokens) for i in range(streams)))
    wall = time.perf_counter() - t
    await client.close()
    return list(res), wall


def http_load(workdir: Path, base_dir=None, streams: int = 32, max_tokens: int = 32, n_adapters: int = 4,
              precisions=(("float32", "none"),), threads: int | None = None) -> dict:
    """The load figures per precision ({"fp32": {...}, ...})."""
    from macaronic.engine.base import load_base

    args = load_base(base_dir).args
    dirs = []
    for i in range(n_adapters):
        d = workdir / f"load{i}"
        if not (d / "adapter_config.json").exists():
            make_random_adapter(d, args, rank=8, seed=400 + i, mode="turn", scale=0.05)
        dirs.append(d)
    out: dict = {"streams": streams, "max_tokens": max_tokens, "adapters": n_adapters}
    for dtype, quant in precisions:
        cmd = ["--engine-only", "--router-policy", "none", "--max-batch", str(streams), "--dtype", dtype, "--quant", quant,
               *(x for d in dirs for x in ("--adapter-dir", str(d)))]
        if base_dir:
            cmd += ["--base", str(base_dir)]
        srv = _Server(cmd, env={"OMP_NUM_THREADS": str(threads)} if threads else None)  # the server's torch threads
        try:
            res, wall = asyncio.run(_load(srv.url, [d.name for d in dirs], streams, max_tokens))
            rss = srv.peak_rss_mb()
        finally:
            srv.stop()
        ttft = [r["ttft"] for r in res if r["ttft"] is not None]
        gaps = [g for r in res for g in r["gaps"]]
        tokens = sum(r["tokens"] for r in res)
        key = {"float32": "fp32", "bfloat16": "bf16"}[dtype] if quant == "none" else quant
        out[key] = {"tok_s": round(tokens / wall, 1), "completion_tokens": tokens, "wall_s": round(wall, 2),
                    "ttft_p50_ms": _pct(ttft, 50), "ttft_p99_ms": _pct(ttft, 99),
                    "gap_p50_ms": _pct(gaps, 50), "gap_p99_ms": _pct(gaps, 99), "peak_rss_mb": rss}
    return out
