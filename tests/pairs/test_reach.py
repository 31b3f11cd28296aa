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


def test_routed_tasks_a_role_change_cannot_reach(tmp_path):
    """Inside the routed suite: a conversation none of whose turns went to the changed role is the
    parent's, when routes read no adapter (the shipped head state); the prompted router (it scores
    with the chat adapter) and a router change reach every task."""
    from macaronic.engine.llm import shipped_adapters_dir
    from macaronic.pairs.reach import reusable_tasks, routes_read_roles

    def row(task, *routed):
        return {"suite": "mixed", "task": task, "sample": 0, "detail": {"turns": [{"routed": r} for r in routed]}}

    rows = [row("a", "chat", "genui"), row("b", "coding", "agent"), row("c", "agent"), {"suite": "chat", "task": "x"}]
    bare = _pair(tmp_path, "bare").harness["path"]
    assert routes_read_roles(bare)  # no fitted state: the prompted policy
    assert reusable_tasks(C(), ["adapter:agent"], rows, bare) == set()
    fitted = tmp_path / "fitted"
    shutil.copytree(bare, fitted)
    shutil.copytree(shipped_adapters_dir() / "router", fitted / "router_state")
    assert not routes_read_roles(fitted)
    assert reusable_tasks(C(), ["adapter:agent", "prompt:agent"], rows, fitted) == {"mixed/a"}
    assert reusable_tasks(C(), ["decoding:chat"], rows, fitted) == {"mixed/b", "mixed/c"}
    assert reusable_tasks(C(), ["router"], rows, fitted) == set()
    assert reusable_tasks(C(), ["adapter:agent", "all"], rows, fitted) == set()
    rows.append(row("a", "agent"))  # a second sample of task a reached agent: not reusable
    assert reusable_tasks(C(), ["adapter:agent"], rows, fitted) == set()
    cfg = json.loads((fitted / "router.json").read_text())
    (fitted / "router.json").write_text(json.dumps({**cfg, "policy": "arrow"}))
    assert routes_read_roles(fitted)  # Arrow reads the adapters
