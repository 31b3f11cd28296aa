"""Which precision `macaronic serve` runs when nothing says: the registry's served precision for a
registered base, fp32 for a model directory, and an explicit flag or environment variable wins."""

from __future__ import annotations

import pytest

from macaronic.engine.bases import BASES, DEFAULT_BASE
from macaronic.commands.serve import parser, served_precision


@pytest.fixture(autouse=True)
def _no_env(monkeypatch):
    monkeypatch.delenv("MACARONIC_DTYPE", raising=False)
    monkeypatch.delenv("MACARONIC_QUANT", raising=False)


def test_a_registered_base_serves_its_registered_precision():
    assert served_precision(None, None, None) == dict(zip(("dtype", "quant"), BASES[DEFAULT_BASE].served))
    # the rule's outcomes (README): int4 on SmolLM2-135M and on Qwen2.5-Coder-0.5B
    assert BASES["smollm2-135m-instruct"].served == ("bfloat16", "int4")
    assert served_precision("qwen2.5-coder-0.5b", None, None) == {"dtype": "bfloat16", "quant": "int4"}


def test_a_model_directory_or_an_explicit_choice_keeps_what_it_says(monkeypatch, tmp_path):
    assert served_precision(str(tmp_path), None, None) == {}  # EngineConfig's fp32
    assert served_precision(None, "float32", None) == {"dtype": "float32"}
    assert served_precision(None, None, "none") == {"quant": "none"}
    monkeypatch.setenv("MACARONIC_QUANT", "int8")
    assert served_precision(None, None, None) == {}  # from_env reads it


def test_help_names_the_served_default():
    text = parser().format_help()
    assert "served precision" in text
