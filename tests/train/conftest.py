"""Tiny base model and tokenizer for the trainer tests."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def tiny_base(tmp_path_factory):
    from macaronic.testing import make_tiny_model_dir

    return make_tiny_model_dir(tmp_path_factory.mktemp("train-base") / "base", family="llama", seed=11)


@pytest.fixture(scope="session")
def tiny_tok():
    from macaronic.testing import tiny_tokenizer

    return tiny_tokenizer()


def conv(i: int = 0):
    return [{"role": "system", "content": "be brief"}, {"role": "user", "content": f"old question {i}"},
            {"role": "assistant", "content": "old answer"}, {"role": "user", "content": f"count to {i % 3 + 2}"},
            {"role": "assistant", "content": "<tool_call>{}</tool_call>"}, {"role": "tool", "content": "result"},
            {"role": "assistant", "content": " ".join(str(k) for k in range(i % 3 + 2))}]


@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory):
    from macaronic.datagen.examples import Example, write_jsonl

    path = tmp_path_factory.mktemp("train-data") / "data.jsonl"
    return write_jsonl(path, [Example(tuple(conv(i)), "chat", "test") for i in range(6)])
