import os
import shutil

import pytest

from macaronic.harness import DEFAULT_BUNDLE, BundleError, bundle_hash, load_bundle


@pytest.fixture
def copy(tmp_path):
    dst = tmp_path / "bundle"
    shutil.copytree(DEFAULT_BUNDLE, dst)
    return dst


def test_default_bundle_loads():
    b = load_bundle()
    assert b.role_names == ["chat", "agent", "coding", "genui"]
    assert [b.role(f"L{i}").name for i in range(4)] == b.role_names
    assert b.router["default_route"] == "coding"
    assert "Macaronic" in b.system_prompt("chat")
    assert len(b.id) == 64


def test_hash_stable_and_independent_of_mtime_and_newlines(copy):
    h = bundle_hash(copy)
    assert h == bundle_hash(DEFAULT_BUNDLE) == load_bundle(copy).id
    for p in copy.rglob("*"):
        os.utime(p, (1, 1))
    assert bundle_hash(copy) == h
    p = copy / "identity.md"
    p.write_bytes(p.read_bytes().replace(b"\n", b"\r\n"))
    assert bundle_hash(copy) == h


def test_hash_independent_of_creation_order(tmp_path, copy):
    other = tmp_path / "reversed"
    files = sorted(p for p in copy.rglob("*") if p.is_file())
    for p in reversed(files):  # create in the opposite order
        dst = other / p.relative_to(copy)
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_bytes(p.read_bytes())
    assert bundle_hash(other) == bundle_hash(copy)


@pytest.mark.parametrize("rel", ["identity.md", "roles/genui.md", "router.json", "route/user.md"])
def test_hash_changes_when_any_file_changes(copy, rel):
    h = bundle_hash(copy)
    p = copy / rel
    p.write_bytes(p.read_bytes() + b" ")
    assert bundle_hash(copy) != h


def test_hash_changes_on_rename_and_new_file(copy):
    h = bundle_hash(copy)
    (copy / "summary.md").rename(copy / "summary2.md")
    h2 = bundle_hash(copy)
    assert h2 != h
    (copy / "extra.txt").write_text("")
    assert bundle_hash(copy) != h2


def test_new_role_needs_no_code(copy):
    (copy / "roles" / "math.md").write_text(
        "---\nname: math\nalias: L4\norder: 4\ndescription: Proves and computes.\n---\n"
        "## Boundary rules\n- Arithmetic and proofs are math.\n\n## System prompt\nShow your steps.\n")
    b = load_bundle(copy)
    assert b.role_names[-1] == "math" and b.role("L4").boundary == ("Arithmetic and proofs are math.",)


def test_loader_reports_all_errors(copy):
    (copy / "summary.md").unlink()
    (copy / "router.json").write_text("{not json")
    (copy / "roles" / "chat.md").write_text("no front matter")
    with pytest.raises(BundleError) as e:
        load_bundle(copy)
    text = "\n".join(e.value.errors)
    for needle in ("missing summary.md", "router.json: invalid JSON", "roles/chat.md: missing '---'"):
        assert needle in text


def test_a_role_marked_bare_adds_no_instruction_where_its_pair_has_no_adapter():
    from macaronic.harness import load_bundle
    from macaronic.prompts import conversation

    b = load_bundle()
    assert {r.name for r in b.roles if r.without_adapter == "base"} == {"chat", "coding"}
    assert b.served(["chat", "agent", "coding", "genui"]) is b  # every adapter there: nothing changes
    served = b.served(["agent", "genui"])
    assert served.id == b.id and served.role("chat").system_prompt == "" == served.role("coding").system_prompt
    assert served.role("genui").system_prompt == b.role("genui").system_prompt  # its format stays
    msgs = [{"role": "user", "content": "hi"}]
    assert conversation(served, "chat", msgs) == [conversation(b, None, msgs)[0], msgs[0]]  # the bare base's layout
    assert len(conversation(b, "chat", msgs)) == 3
    at_answer = b.served(["chat", "agent", "coding", "genui"], ["genui"])  # genui's adapter: assistant header
    assert at_answer.role("genui").system_prompt == "" and at_answer.role("agent").system_prompt == b.role("agent").system_prompt
    assert conversation(at_answer, "genui", msgs) == conversation(served, "chat", msgs)  # one layout up to the answer


def test_a_role_file_with_an_unknown_without_adapter_value_is_refused():
    from macaronic.harness.bundle import parse_role

    errors = []
    text = ("---\nname: x\nalias: L9\norder: 9\nwithout_adapter: maybe\ndescription: d\n---\n"
            "## Boundary rules\n- r\n## System prompt\nbe x\n")
    assert parse_role(text, "x.md", errors) is None and "without_adapter" in errors[0]


def test_bundle_json_names_the_tool_listing_and_an_unknown_one_is_refused(copy):
    import json

    meta = json.loads((copy / "bundle.json").read_text())
    meta.pop("tool_listing", None)
    (copy / "bundle.json").write_text(json.dumps(meta))
    assert load_bundle(copy).tool_listing == "compact"  # a bundle from before the setting: as it was served then
    meta["tool_listing"] = "full-json"
    (copy / "bundle.json").write_text(json.dumps(meta))
    with pytest.raises(BundleError) as e:
        load_bundle(copy)
    assert "tool_listing must be one of ['compact', 'typed']" in "\n".join(e.value.errors)
