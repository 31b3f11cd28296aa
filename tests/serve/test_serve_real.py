"""The real default base behind `macaronic serve` as served by default (its served precision, the
shipped router state; few and fast: one server, two requests)."""

from __future__ import annotations

import openai
import pytest

from serve_helpers import ServerProcess

pytestmark = pytest.mark.real_model


@pytest.mark.long  # over 10 s on 2 cores: the long CI step keeps the default suite under 15 minutes
def test_real_base_answers_routes_and_reuses(tmp_path):
    s = ServerProcess(["--store", str(tmp_path / "s.sqlite")], timeout=300)
    try:
        c = openai.OpenAI(base_url=s.url + "/v1", api_key="x", max_retries=0, timeout=300)
        convo = [{"role": "user", "content": "What is the capital of France?"}]
        r = c.chat.completions.create(model="macaronic", messages=convo, max_tokens=24, temperature=0)
        meta = r.model_extra["macaronic"]
        assert "Paris" in r.choices[0].message.content
        assert meta["policy"] == "head" and meta["specialist"] == "chat"
        convo += [{"role": "assistant", "content": r.choices[0].message.content},
                  {"role": "user", "content": "And of Italy?"}]
        r2 = c.chat.completions.create(model="macaronic", messages=convo, max_tokens=24, temperature=0)
        assert r2.model_extra["macaronic"]["reused_tokens"] > 0
    finally:
        s.stop()
