"""Test helpers for the server: CLI arguments for tiny model directories, a real `macaronic serve` subprocess,
an in-process uvicorn server, and scripted replies (a logits processor that makes the tiny
random model say a given text; the engine, harness and HTTP layer all still run for real)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import torch

ROOT = Path(__file__).resolve().parents[2]


def model_args(base: Path, adapters: list[Path]) -> list[str]:
    out = ["--base", str(base)]
    for a in adapters:
        out += ["--adapter-dir", str(a)]
    return out


class ServerProcess:
    """`macaronic serve --port 0 ...` in a subprocess; `.url` once it printed its address."""

    def __init__(self, args: list[str], env: dict | None = None, timeout: float = 120, warmup: bool = False):
        # the start-up warm-up (serve/warmup.py) costs a server seconds of grammar compiles; only the
        # tests of the warm-up itself (and tests/qwen's real-model servers) pay for it
        args = [*args, *([] if warmup or "--no-warmup" in args else ["--no-warmup"])]
        self.args = args
        self.log = []
        full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
        self.proc = subprocess.Popen([sys.executable, "-m", "macaronic.cli", "serve", "--port", "0", *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=full_env,
                                     cwd=ROOT)
        self.url = None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            self.log.append(line)
            m = re.search(r"Web chat: (http://\S+?)/\s", line)
            if m:
                self.url = m.group(1)
                break
        if self.url is None:
            self.stop()
            raise RuntimeError("server did not start:\n" + "".join(self.log))
        threading.Thread(target=self._drain, daemon=True).start()
        for _ in range(200):
            try:
                if httpx.get(self.url + "/health", timeout=5).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.1)

    def _drain(self):
        for line in self.proc.stdout:
            self.log.append(line)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class InProcessServer:
    """uvicorn in a thread on a free loopback port, serving `create_app(mol, config)`."""

    def __init__(self, app):
        import socket

        import uvicorn

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)
        self.thread.start()
        for _ in range(200):
            if self.server.started:
                return
            time.sleep(0.05)
        raise RuntimeError("in-process server did not start")

    def stop(self):
        self.server.should_exit = True
        self.thread.join(timeout=20)


class Script:
    """What the tiny model says, by adapter: `replies[adapter]` is a string or a function of the
    view (the messages the adapter sees). Unscripted adapters generate freely."""

    def __init__(self, tokenizer, replies: dict | None = None):
        self.tok = tokenizer
        self.replies = dict(replies or {})
        self.seen: list[tuple[str | None, list[dict]]] = []
        self.eos = tokenizer.convert_tokens_to_ids("<|im_end|>")

    def __call__(self, messages: list[dict], adapter: str | None):
        self.seen.append((adapter, messages))
        reply = self.replies.get(adapter)
        if reply is None:
            return None
        text = reply(messages) if callable(reply) else reply
        ids = self.tok.encode(text, add_special_tokens=False)

        def force(generated: list[int], logits: torch.Tensor) -> torch.Tensor:
            target = ids[len(generated)] if len(generated) < len(ids) else self.eos
            # finite: a grammar that masks the scripted token still leaves valid choices
            out = torch.full_like(logits, -1e4)
            out[target] = 0.0
            return out

        return force
