"""What differs between two pairs, and which suites that can reach (pairs/reach.py)."""

from __future__ import annotations

import json
import shutil

from macaronic.pairs.reach import components_between, reached_suites


class S:
    def __init__(self, name, role, report_only=False):
        self.name, self.role, self.report_only = name, role, report_only


class C:
    suites = (S("chat", "chat"), S("agent", "agent"), S("mixed", None), S("bfcl", "agent", True))


def _pair(tmp_path, name, edit=None):
    from macaronic.harness import DEFAULT_BUNDLE
    from macaronic.pairs import PairManifest

    h = shutil.copytree(DEFAULT_BUNDLE, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    if edit:
        edit(h)
    return PairManifest.build(None, {}, h, base_fp="f" * 64)


def test_components_and_reach(tmp_path):
    a = _pair(tmp_path, "a")

    def prompt(h):
        (h / "roles" / "agent.md").write_text((h / "roles" / "agent.md").read_text() + "Look things up first.\n")

    def decoding(h):
        d = json.loads((h / "decoding.json").read_text())
        d["roles"]["chat"]["temperature"] = 0.0
        (h / "decoding.json").write_text(json.dumps(d))

    def boundary(h):
        t = (h / "roles" / "chat.md").read_text().replace("## Boundary rules", "## Boundary rules\n- Jokes are chat.")
        (h / "roles" / "chat.md").write_text(t)

    assert components_between(a, _pair(tmp_path, "b")) == set()
    assert components_between(a, _pair(tmp_path, "c", prompt)) == {"prompt:agent"}
    assert components_between(a, _pair(tmp_path, "d", decoding)) == {"decoding:chat"}
    assert components_between(a, _pair(tmp_path, "e", boundary)) == {"prompt:chat", "router"}  # the route prompt reads it
    assert reached_suites(C(), {"prompt:agent"}) == {"agent", "mixed"}
    assert reached_suites(C(), {"prompt:agent"}, report_only=True) == {"agent", "mixed", "bfcl"}
    assert reached_suites(C(), {"router"}, report_only=True) == {"mixed"}
    assert reached_suites(C(), {"all"}) == {"chat", "agent", "mixed"}
