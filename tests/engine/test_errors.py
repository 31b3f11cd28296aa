"""Typed engine errors: every refusal carries a code, and serving maps codes (never message text)
to HTTP statuses in one place; checked through a real HTTP server with the openai client."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import openai
import pytest

from macaronic.engine import errors
from macaronic.engine.errors import EngineError
from macaronic.engine.llm import EngineConfig, load_llm
from macaronic.engine.sampling import SamplingParams
from macaronic.serve.backends import HTTP_OF_ENGINE_CODE
from macaronic.testing import make_random_adapter


@pytest.fixture()
def llm(tiny_dirs, tmp_path):
    m = load_llm(tiny_dirs["llama"], [], EngineConfig(max_context=256, max_loras=1))
    for i in range(3):
        m.add_adapter(make_random_adapter(tmp_path / f"ad{i}", m.args, rank=2, seed=i, mode="full"), name=f"a{i}")
    yield m
    m.close()


@pytest.fixture()
def http(llm):
    """A real in-process `macaronic serve` app in engine-only mode over the tiny LLM."""
    import uvicorn

    from macaronic.harness import load_bundle
    from macaronic.router import Router, RouterConfig
    from macaronic.serve.app import ServeConfig, create_app
    from macaronic.serve.backends import LocalBackend
    from macaronic.serve.mol import MoL

    bundle = load_bundle()
    router = Router(llm, bundle, config=RouterConfig.from_dict({**bundle.router, "policy": "prompted"}))
    app = create_app(MoL(LocalBackend(llm), bundle, router), ServeConfig(engine_only=True))
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off"))
    t = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    t.start()
    while not server.started:
        time.sleep(0.05)
    yield openai.OpenAI(base_url=f"http://127.0.0.1:{sock.getsockname()[1]}/v1", api_key="x", max_retries=0)
    server.should_exit = True
    t.join(timeout=20)


def test_every_code_has_one_http_status():
    assert set(HTTP_OF_ENGINE_CODE) == set(errors.CODES)
    assert HTTP_OF_ENGINE_CODE[errors.OVERLOADED][0] == 503
    assert HTTP_OF_ENGINE_CODE[errors.UNKNOWN_ADAPTER][0] == 404
    with pytest.raises(AssertionError):
        EngineError("no_such_code", "x")
    e = EngineError(errors.BAD_PROMPT, "empty prompt")
    assert isinstance(e, ValueError) and str(e) == "empty prompt" and e.code == "bad_prompt"


def test_refusals_reach_http_with_their_status(llm, http, tiny_dirs):
    say = [{"role": "user", "content": "hello"}]

    def status(model, messages=say, **kw):
        with pytest.raises(openai.APIStatusError) as err:
            http.chat.completions.create(model=model, messages=messages, max_tokens=4, **kw)
        return err.value.status_code, err.value.body.get("code"), err.value.body.get("message")

    assert status("a0", [{"role": "user", "content": "x " * 400}])[:2] == (400, "context_length_exceeded")
    # a registered adapter whose weights went bad on disk: refused at admission, before any token
    (Path(llm.adapters.get("a2").path) / "adapter_model.safetensors").write_bytes(b"broken")
    code, oa, msg = status("a2")
    assert (code, oa) == (500, "adapter_load_failed") and msg
    # every slot pinned by a running request and none will free: 503, and a retry later succeeds
    slot = llm.adapters.acquire("a0")
    try:
        assert status("a1")[:2] == (503, "overloaded")
    finally:
        llm.adapters.release(slot)
    r = http.chat.completions.create(model="a1", messages=say, max_tokens=4)
    assert r.choices[0].finish_reason in ("length", "stop")


def test_requests_wait_for_a_slot_a_running_request_will_free(llm):
    """More adapters in flight than slots: later ones wait for a slot, none fails."""
    p = llm.encode_chat([{"role": "user", "content": "queue"}])
    sp = SamplingParams(max_tokens=6, stop_token_ids=())
    solo = {}
    for a in ("a0", "a1"):
        h = llm.submit(p, a, sp)
        h.result()
        solo[a] = h.output_ids
    hs = [(a, llm.submit(p, a, sp)) for a in ("a0", "a1", "a0", "a1")]
    for a, h in hs:
        _, last = h.result()
        assert last.finish_reason == "length" and h.output_ids == solo[a]


def test_engine_errors_on_events_carry_codes(llm):
    h = llm.submit(llm.encode_chat([{"role": "user", "content": "x"}]), "a0", SamplingParams(max_tokens=3),
                   logits_processor=lambda g, lg: 1 / 0)
    _, last = h.result()
    assert last.finish_reason == "error" and last.code == errors.INTERNAL and "division" in last.error
