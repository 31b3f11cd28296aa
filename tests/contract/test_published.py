"""Published contracts are immutable: their bytes match contracts/SHA256SUMS and they check."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from macaronic.commands.contract import main as contract_main

ROOT = Path(__file__).resolve().parents[2] / "contracts"
SUMS = [line.split() for line in (ROOT / "SHA256SUMS").read_text().splitlines() if line.strip()]


def test_every_contract_file_is_listed():
    assert sorted(p.name for p in ROOT.glob("*.yaml")) == sorted(name for _, name in SUMS)


@pytest.mark.parametrize("sha, name", SUMS)
def test_published_contract_is_unchanged_and_checks(sha, name, tmp_path):
    path = ROOT / name
    assert hashlib.sha256(path.read_bytes()).hexdigest() == sha, f"{name} changed after publication"
    rc = contract_main(["check", str(path), "--audit", str(tmp_path / "audit.jsonl")])
    from macaronic.suites.external import MissingPackage, bfcl_paths, humaneval_path

    try:
        humaneval_path(), bfcl_paths()
        assert rc == 0
    except MissingPackage:
        assert rc == 2  # the environment lacks a source package: not the contract's fault
