"""Fixtures: tiny model directories, one shared `macaronic serve` subprocess, and an in-process
MoL over the same tiny models with scripted replies."""

from __future__ import annotations

import pytest

from serve_helpers import InProcessServer, Script, ServerProcess, model_args

from macaronic.testing import make_role_models


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory):
    return make_role_models(tmp_path_factory.mktemp("serve-models"))


@pytest.fixture(scope="session")
def server(tiny_models, tmp_path_factory):
    """A real `macaronic serve` subprocess on the tiny models, routing with the prompted policy; with
    --api-docs, so the schema tests read its /openapi.json."""
    store = tmp_path_factory.mktemp("serve-store") / "state.sqlite"
    s = ServerProcess([*model_args(*tiny_models), "--router-policy", "prompted", "--store", str(store),
                       "--max-tokens-limit", "256", "--max-body-bytes", "200000", "--api-docs"])
    s.store = store
    yield s
    s.stop()


@pytest.fixture(scope="session")
def local_llm(tiny_models):
    from macaronic.engine.llm import EngineConfig, load_llm

    llm = load_llm(tiny_models[0], tiny_models[1], EngineConfig(max_tokens_limit=2048))
    yield llm
    llm.close()


@pytest.fixture()
def scripted(local_llm):
    """(MoL, Script) over the shared in-process tiny LLM; the router is the prompted policy."""
    from macaronic.harness import load_bundle
    from macaronic.router import Router, RouterConfig
    from macaronic.serve.backends import LocalBackend
    from macaronic.serve.mol import MoL

    bundle = load_bundle()
    script = Script(local_llm.tokenizer)
    router = Router(local_llm, bundle, config=RouterConfig.from_dict({**bundle.router, "policy": "prompted"}))
    return MoL(LocalBackend(local_llm, logits_hook=script), bundle, router), script


@pytest.fixture()
def inproc(scripted):
    """An in-process HTTP server over the scripted MoL: (url, mol, script)."""
    from macaronic.serve.app import create_app

    mol, script = scripted
    srv = InProcessServer(create_app(mol))
    yield srv.url, mol, script
    srv.stop()
