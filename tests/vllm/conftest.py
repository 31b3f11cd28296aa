"""Fixtures for the end-to-end tests against a real vLLM (its CPU build from `scripts/setup --vllm`).

These tests run only when tests/vllm is named on the command line (`pytest tests/vllm`, the CI
step after the default suite): the default `scripts/test` run needs no vLLM. One vLLM process
serves the whole session; if it cannot start, every test here errors (no skip)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "serve"))  # serve_helpers: the real `macaronic serve` subprocess


@pytest.fixture(scope="session")
def vllm(tmp_path_factory):
    from macaronic.bench.vllm_server import VllmServer, export

    out = export(tmp_path_factory.mktemp("vllm") / "export")
    server = VllmServer(out).start()
    print(f"\nvLLM {server.version()} up in {server.startup_s} s at {server.url}", file=sys.stderr)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def front(vllm, tmp_path_factory):
    """`macaronic serve --engine openai://...` on that vLLM; the router (prompted policy) runs on the
    local default base."""
    from serve_helpers import ServerProcess

    store = tmp_path_factory.mktemp("front") / "state.sqlite"
    s = ServerProcess(["--engine", "openai://" + vllm.url.removeprefix("http://"), "--router-policy", "prompted",
                       "--store", str(store)], timeout=300)
    s.store = store
    yield s
    s.stop()
