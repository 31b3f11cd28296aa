"""`--engine openai://HOST:PORT`: the harness drives a second `macaronic serve --engine-only`
process, where adapters are model ids, and answers exactly like the embedded engine."""

from __future__ import annotations

import httpx
import openai
import pytest

from serve_helpers import ServerProcess, model_args


@pytest.fixture(scope="module")
def engine(tiny_models, tmp_path_factory):
    s = ServerProcess([*model_args(*tiny_models), "--engine-only",
                       "--store", str(tmp_path_factory.mktemp("engine") / "s.sqlite")])
    yield s
    s.stop()


@pytest.fixture(scope="module")
def front(engine, tiny_models, tmp_path_factory):
    # the router runs on a local backbone: the tiny base (no adapters), prompted policy
    s = ServerProcess(["--engine", "openai://" + engine.url.removeprefix("http://"), "--base", str(tiny_models[0]),
                       "--router-policy", "prompted", "--store", str(tmp_path_factory.mktemp("front") / "s.sqlite")])
    yield s
    s.stop()


def test_engine_only_serves_adapters_as_model_ids(engine):
    models = httpx.get(engine.url + "/v1/models").json()["data"]
    kinds = {m["id"]: m["macaronic"]["kind"] for m in models}
    assert "macaronic" not in kinds and sorted(k for k, v in kinds.items() if v == "adapter") == \
        ["agent", "chat", "coding", "genui"]
    r = httpx.post(engine.url + "/v1/chat/completions",
                   json={"model": "macaronic", "messages": [{"role": "user", "content": "x"}]})
    assert r.status_code == 404


def test_remote_engine_matches_the_embedded_engine(front, tiny_models):
    from macaronic.engine.llm import load_llm
    from macaronic.serve.mol import MoL

    # Compared with a fresh embedded engine that sees the same requests: both caches start
    # empty, so both compute the same positions in the same chunks (a random tiny model's greedy
    # choice can flip on float noise between a cached and a recomputed prefix).
    llm = load_llm(*tiny_models)
    local = MoL.from_llm(llm)
    convo = [{"role": "user", "content": "compare engines"}]
    remote = openai.OpenAI(base_url=front.url + "/v1", api_key="x", max_retries=0)
    models = {m.id: m.model_extra["macaronic"] for m in remote.models.list()}
    assert models["agent"]["mode"] == "full" and models["chat"]["role"] == "chat"
    try:
        for adapter in ("chat", "agent"):
            a = remote.chat.completions.create(model=adapter, messages=convo, max_tokens=8, temperature=0)
            b = local.turn(convo, model=adapter, sampling={"max_tokens": 8, "temperature": 0})
            assert a.choices[0].message.content == b.content
            ma = a.model_extra["macaronic"]
            assert ma["adapter"] == adapter and ma["policy"] == "forced" and ma["pair_id"] == local.pair_id
            assert a.usage.prompt_tokens == b.usage["prompt_tokens"] == ma["prefill_tokens"] + ma["reused_tokens"]
    finally:
        llm.close()
    # the same request again is served from the engine's prefix cache
    again = remote.chat.completions.create(model="chat", messages=convo, max_tokens=8, temperature=0)
    assert again.model_extra["macaronic"]["reused_tokens"] > 0


def test_remote_routed_and_streaming(front):
    c = openai.OpenAI(base_url=front.url + "/v1", api_key="x", max_retries=0)
    r = c.chat.completions.create(model="macaronic", messages=[{"role": "user", "content": "hey"}], max_tokens=4)
    meta = r.model_extra["macaronic"]
    assert meta["policy"] == "prompted" and meta["adapter"] in {"chat", "agent", "coding", "genui"}
    chunks = list(c.chat.completions.create(model="coding", messages=[{"role": "user", "content": "s"}],
                                            max_tokens=5, temperature=0, stream=True))
    assert chunks[-1].choices[0].finish_reason == "length"
    assert chunks[-1].model_extra["macaronic"]["adapter"] == "coding"
