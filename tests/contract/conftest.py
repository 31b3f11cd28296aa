"""A tiny sealed contract and a tiny model-harness pair (random base, random role adapters)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

DRAFT = """\
# tiny test contract
contract: tiny
version: 1
primary: [agent, mixed]
suites:
  agent: {grader: agent.state_hash@1, role: agent, k: 2, per_family: 1, max_tokens: 8, max_steps: 1, guard: 0.5}
  mixed: {grader: mixed.route_answer@1, per_family: 1, max_tokens: 6}
  humaneval: {grader: humaneval.exec@1, limit: 2, max_tokens: 8, report_only: true}
gate: {resamples: 300}
"""


def sealed_contract(root: Path, draft: str = DRAFT) -> Path:
    from macaronic.contract.spec import seal

    (root / "draft.yaml").write_text(draft)
    return seal(root / "draft.yaml", root / "contract.yaml")


def tiny_pair(root: Path) -> Path:
    from macaronic.engine.config import ModelArgs
    from macaronic.harness import DEFAULT_BUNDLE
    from macaronic.pairs import PairManifest
    from macaronic.testing import make_random_adapter, make_tiny_model_dir

    # The agent tool prompt is ~10k bytes: the byte-level tiny tokenizer needs a long context.
    base = make_tiny_model_dir(root / "base", seed=3, max_position_embeddings=16384)
    args = ModelArgs.from_dir(base)
    ads = {r: make_random_adapter(root / "adapters" / r, args, seed=i + 1, mode="turn", role=r)
           for i, r in enumerate(["chat", "agent", "coding", "genui"])}
    shutil.copytree(DEFAULT_BUNDLE, root / "harness")
    return PairManifest.build(base, ads, root / "harness").save(root / "pair.json")


@pytest.fixture(scope="session")
def contract_file(tmp_path_factory, monkeypatch_session_audit):
    return sealed_contract(tmp_path_factory.mktemp("contract"))


@pytest.fixture(scope="session")
def pair_file(tmp_path_factory):
    return tiny_pair(tmp_path_factory.mktemp("pair"))


@pytest.fixture(scope="session")
def monkeypatch_session_audit(tmp_path_factory):
    """Keep split-read audits of this session out of the shared MACARONIC_HOME."""
    import os

    path = tmp_path_factory.mktemp("audit") / "splits.jsonl"
    old = os.environ.get("MACARONIC_AUDIT")
    os.environ["MACARONIC_AUDIT"] = str(path)
    yield path
    if old is None:
        os.environ.pop("MACARONIC_AUDIT", None)
    else:
        os.environ["MACARONIC_AUDIT"] = old


@pytest.fixture(scope="session")
def sealed_contract_factory():
    """`sealed_contract` for test modules (importing `conftest` by name is ambiguous across dirs)."""
    return sealed_contract
