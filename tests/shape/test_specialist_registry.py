"""A specialist is data: the registry (`macaronic.specialist`) is the one place that lists the
built-in specialists or says what one outputs. This test fails on a new tuple, list or dict of
built-in names, or a comparison with a built-in name, anywhere else in the package. The files
listed in ALLOWED still do, each for the reason given: they compare another namespace that shares a
word with a specialist."""

from __future__ import annotations

import ast
from pathlib import Path

import macaronic
from macaronic.specialist import BUILTIN, BUILTIN_NAMES, OUTPUTS, Specialist, load_user, output_of, save_user

ROOT = Path(macaronic.__file__).resolve().parent

ALLOWED = {
    # another namespace that shares a word with a specialist
    "cli.py": "command names (`macaronic chat`, `macaronic genui`)",
    "contract/suites.py": "contract suite kinds (the published contract's vocabulary)",
    "train/builders.py": "data-engine (generator) names, which the registry's `engine` field points at",
    "router/families.py": "the built-ins' routing examples, labelled by name (the registry's `routing` field)",
    "testing/__init__.py": "test doubles for the four built-ins",
    "testing/router_fakes.py": "test doubles for the four built-ins",
}


def role_name_uses(tree: ast.AST) -> list[int]:
    """Lines of a tuple/list/set or dict keys with two or more built-in names, or a comparison
    (==, !=, in, not in) with one. A comparison of a `.kind` (a contract suite's kind, a
    `Structure`'s kind: the card grammar) is another namespace, not a specialist."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            bad = sum(isinstance(e, ast.Constant) and e.value in BUILTIN_NAMES for e in node.elts) >= 2
        elif isinstance(node, ast.Dict):
            bad = sum(isinstance(k, ast.Constant) and k.value in BUILTIN_NAMES for k in node.keys) >= 2
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            bad = any(isinstance(c, ast.Constant) and c.value in BUILTIN_NAMES for c in sides) \
                and any(isinstance(o, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)) for o in node.ops) \
                and not any(isinstance(c, ast.Attribute) and c.attr == "kind" for c in sides)
        else:
            bad = False
        if bad:
            out.append(node.lineno)
    return sorted(out)


def test_the_checker_finds_a_role_tuple_and_a_branch():
    src = 'ROLES = ("chat", "agent")\nif role == "genui":\n    pass\nok = ("chat",)\nkind = s.kind == "genui"\n'
    assert role_name_uses(ast.parse(src)) == [1, 2]


def test_no_role_tuple_or_role_name_branch_outside_the_registry():
    found = {}
    for p in sorted(ROOT.rglob("*.py")):
        rel = p.relative_to(ROOT).as_posix()
        if rel == "specialist.py":
            continue
        lines = role_name_uses(ast.parse(p.read_text()))
        if lines:
            found[rel] = lines
    assert {k: v for k, v in found.items() if k not in ALLOWED} == {}
    assert sorted(k for k in ALLOWED if k not in found) == []  # an exception that no longer applies goes


def test_builtin_entries():
    assert BUILTIN_NAMES == ("chat", "agent", "coding", "genui")  # the order every reader iterates
    assert {s.output for s in BUILTIN} <= set(OUTPUTS)
    assert [output_of(n) for n in BUILTIN_NAMES] == ["text", "tool_calls", "text", "card"]
    assert output_of("not-a-specialist") == "text" and output_of(None) == "text"
    from macaronic.harness import load_bundle
    from macaronic.suites.registry import suite
    from macaronic.train.builders import GENERATORS

    bundle = load_bundle()
    for s in BUILTIN:  # every entry's instruction and decoding are in the bundle, its engine and suite exist
        assert bundle.role(s.name).system_prompt and bundle.decoding_for(s.name)
        assert s.engine in GENERATORS and suite(s.name).role == s.name


def test_user_entries_round_trip(tmp_path, monkeypatch):
    monkeypatch.setenv("MACARONIC_SPECIALISTS", str(tmp_path))
    assert load_user() == ()
    sql = Specialist("sql", "text", examples="b/examples/sql.jsonl", base="b", adapter="b/adapters/sql",
                     grader="mymod:grade", description="SQL")
    save_user([sql])
    assert load_user() == (sql,) and output_of("sql") == "text"
    save_user([Specialist("chat")])
    import pytest

    with pytest.raises(ValueError, match="built-in"):
        load_user()


def test_the_small_base_is_named_in_the_bases_module_only():
    """The small base's name is typed once, as `SMALL_BASE` in engine/bases.py (beside its entry);
    every other module imports the constant."""
    from macaronic.engine.bases import SMALL_BASE

    def typed(src: str) -> bool:
        return any(isinstance(n, ast.Constant) and n.value == SMALL_BASE for n in ast.walk(ast.parse(src)))

    assert typed(f'BASE = "{SMALL_BASE}"\n') and not typed('BASE = SMALL_BASE\n')
    found = [p.relative_to(ROOT).as_posix() for p in sorted(ROOT.rglob("*.py")) if typed(p.read_text())]
    assert found == ["engine/bases.py"]
