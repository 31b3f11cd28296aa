"""Pair ids, manifests, the append-only lineage and the `macaronic pair` CLI."""

from __future__ import annotations

import json
import shutil
import sqlite3

import pytest

from macaronic.harness import DEFAULT_BUNDLE
from macaronic.pairs import Lineage, LineageError, PairManifest, pair_id
from macaronic.commands.pair import main as pair_main
from macaronic.pairs.ids import diff
from macaronic.pairs.lineage import MIGRATIONS

FP = "f" * 64


@pytest.fixture(scope="module")
def parts(tmp_path_factory):
    from macaronic.engine.config import ModelArgs
    from macaronic.testing import make_random_adapter, tiny_hf_config

    root = tmp_path_factory.mktemp("parts")
    # ModelArgs from a config dict: the adapters only need shapes, not a model on disk.
    cfg = tiny_hf_config()
    (root / "base").mkdir()
    cfg.save_pretrained(root / "base")
    args = ModelArgs.from_dir(root / "base")
    ads = {r: make_random_adapter(root / r, args, seed=i, role=r) for i, r in enumerate(["chat", "agent"])}
    shutil.copytree(DEFAULT_BUNDLE, root / "harness")
    return root, ads


def test_pair_id_is_content_not_paths(parts, tmp_path):
    root, ads = parts
    a = PairManifest.build(None, ads, root / "harness", base_fp=FP)
    moved = {r: shutil.copytree(p, tmp_path / "elsewhere" / r) for r, p in ads.items()}
    b = PairManifest.build(None, moved, shutil.copytree(root / "harness", tmp_path / "h2"), base_fp=FP)
    assert a.id == b.id == pair_id(FP, a.adapter_ids, a.harness["id"])
    assert diff(a, b) == []
    # swapping roles, another base or another harness is another pair
    swapped = PairManifest.build(None, {"chat": ads["agent"], "agent": ads["chat"]}, root / "harness", base_fp=FP)
    assert swapped.id != a.id
    assert PairManifest.build(None, ads, root / "harness", base_fp="e" * 64).id != a.id
    (tmp_path / "h2" / "summary.md").write_text("Summarize in one line.\n")
    c = PairManifest.build(None, ads, tmp_path / "h2", base_fp=FP)
    assert c.id != a.id
    assert diff(a, c)[0].startswith("harness:") and "  ~ summary.md" in diff(a, c)


def test_manifest_round_trip_and_verify(parts, tmp_path):
    root, ads = parts
    h = shutil.copytree(root / "harness", tmp_path / "h")
    m = PairManifest.build(None, ads, h, base_fp=FP)
    assert PairManifest.load(m.save(tmp_path / "pair.json")) == m
    assert m.verify() == []
    (h / "identity.md").write_text("You are someone else.\n")
    assert any("harness" in e and "changed" in e for e in m.verify())
    doc = json.loads((tmp_path / "pair.json").read_text())
    doc["adapters"]["chat"]["id"] = "0" * 64
    with pytest.raises(ValueError, match="does not match"):
        PairManifest.from_dict(doc)


def test_lineage_is_append_only_and_keyed(parts, tmp_path):
    root, ads = parts
    m = PairManifest.build(None, ads, root / "harness", base_fp=FP)
    with Lineage(tmp_path / "l.sqlite") as lin:
        lin.add_pair(m)
        lin.add_pair(m)  # same pair twice: one row
        assert lin.pairs() == [m.id]
        s1 = lin.record(key="gen-1", pair_id=m.id, parent_id=None, decision="reference", reasons=[], changes=[])
        assert lin.record(key="gen-1", pair_id=m.id, parent_id=None, decision="accept", reasons=[], changes=[]) == s1
        assert [r["decision"] for r in lin.records()] == ["reference"]
        lin.move_alias("champion", m.id, "first", key="k1")
        lin.move_alias("champion", m.id, "first", key="k1")
        assert len(lin.alias_history("champion")) == 1
        for sql in ("UPDATE records SET decision = 'accept'", "DELETE FROM records", "DELETE FROM alias_moves",
                    "UPDATE pairs SET manifest = '{}'", "DELETE FROM pairs"):
            with pytest.raises(sqlite3.DatabaseError, match="append-only"):
                lin.conn.execute(sql)
        assert lin.records()[0]["decision"] == "reference"
        with pytest.raises(ValueError):
            lin.move_alias("king", m.id, "no such alias")


def test_aliases_resolve_and_keep_history(parts, tmp_path):
    root, ads = parts
    a = PairManifest.build(None, ads, root / "harness", base_fp=FP)
    b = PairManifest.build(None, {"chat": ads["chat"]}, root / "harness", base_fp=FP)
    with Lineage(tmp_path / "l.sqlite") as lin:
        lin.add_pair(a), lin.add_pair(b)
        lin.move_alias("champion", a.id, "initial")
        lin.move_alias("champion", b.id, "accepted")
        assert lin.resolve("champion") == b.id
        assert [h["pair_id"] for h in lin.alias_history("champion")] == [a.id, b.id]
        assert lin.resolve(a.id[:10]) == a.id
        assert lin.pair(b.id[:8]).adapters.keys() == {"chat"}
        with pytest.raises(LineageError):
            lin.resolve("challenger")
        with pytest.raises(LineageError):
            lin.resolve("abc")  # too short to be a prefix, not an alias


def test_migrations_apply_once(tmp_path):
    p = tmp_path / "l.sqlite"
    Lineage(p).close()
    with Lineage(p) as lin:
        versions = [v for (v,) in lin.conn.execute("SELECT version FROM _migrations ORDER BY version")]
    assert versions == list(range(1, len(MIGRATIONS) + 1))


def test_pair_cli_show_diff(parts, tmp_path, capsys):
    root, ads = parts
    db = tmp_path / "l.sqlite"
    a = PairManifest.build(None, ads, root / "harness", base_fp=FP)
    b = PairManifest.build(None, {"chat": ads["chat"]}, root / "harness", base_fp=FP)
    with Lineage(db) as lin:
        lin.add_pair(a), lin.add_pair(b)
        lin.move_alias("champion", a.id, "initial")
        lin.record(key="g1", pair_id=b.id, parent_id=a.id, generation=1, decision="reject",
                   reasons=[{"rule": "primary", "ok": False}], changes=[{"step": "rft"}])
    assert pair_main(["--lineage", str(db), "show", "champion"]) == 0
    out = capsys.readouterr().out
    assert a.id in out and "(champion)" in out and "parent of" in out
    assert pair_main(["--lineage", str(db), "diff", "champion", b.id[:12]]) == 0
    out = capsys.readouterr().out
    assert f"adapter agent: removed {ads and a.adapters['agent']['id'][:12]}" in out
    assert pair_main(["--lineage", str(db), "show", b.id, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["records"][0]["decision"] == "reject"
    assert pair_main(["--lineage", str(db), "show", "nothing-here"]) == 1
