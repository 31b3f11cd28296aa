"""The steps of `macaronic specialist add` that need no model: reading examples, the held-out split,
the user bundle, the default grader, the routing data and the routing check."""

from __future__ import annotations

import json

import pytest

from macaronic.harness import DEFAULT_BUNDLE, load_bundle
from macaronic.specialist import resolve
from macaronic.train import user_specialist as us


def write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_examples_in_both_shapes_and_every_problem_at_once(tmp_path):
    f = write(tmp_path / "ok.jsonl", [{"prompt": "p", "completion": "c"},
                                      {"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"},
                                                    {"role": "assistant", "content": "a"}]}])
    assert us.read_examples(f) == [[{"role": "user", "content": "p"}, {"role": "assistant", "content": "c"}],
                                   [{"role": "user", "content": "u"}, {"role": "assistant", "content": "a"}]]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "p"}\nnot json\n{"messages": [{"role": "user", "content": "u"}]}\n')
    with pytest.raises(us.ExamplesError) as e:
        us.read_examples(bad)
    assert all(f"line {n}" in str(e.value) for n in (1, 2, 3))


def test_holdout_and_the_user_bundle(tmp_path):
    convs = [[{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"a{i}"}] for i in range(10)]
    train, held = us.holdout(convs, 5)
    assert [c[0]["content"] for c in held] == ["q4", "q9"] and len(train) == 8
    b = load_bundle(us.write_bundle(DEFAULT_BUNDLE, tmp_path / "bundle", "sql", "Writes SQL.", "Answer in SQL.", train))
    assert b.role_names[-1] == "sql" and b.role("sql").alias == "L4" and b.role("sql").system_prompt == "Answer in SQL."
    assert b.decoding_for("sql")["temperature"] == 0.0
    assert b.role_names[:4] == load_bundle().role_names  # the shipped roles unchanged
    with pytest.raises(ValueError, match="already has"):
        us.write_bundle(tmp_path / "bundle", tmp_path / "again", "sql", "d", "i", train)
    us.drop_role(tmp_path / "bundle", "sql")
    assert load_bundle(tmp_path / "bundle").role_names == load_bundle().role_names
    ex = us.training_examples(b, "sql", train[:1])[0]
    assert ex.messages[-2:] == tuple(train[0]) and ex.messages[1] == {"role": "system", "content": "Answer in SQL."}


def test_grader_routing_data_and_checks():
    conv = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "SELECT  1;"}]
    assert us.contains_gold(conv, "Sure: select 1;") == 1.0 and us.contains_gold(conv, "SELECT 2;") == 0.0
    assert resolve("macaronic.train.user_specialist:contains_gold") is us.contains_gold
    rows = us.routing_examples("sql", [conv], "train")
    assert rows[0]["label"] == "sql" and rows[0]["messages"] == conv[:1] and rows[0]["kind"] == "template"
    many = [{"label": l, "i": i} for i in range(10) for l in ("a", "b")]
    assert len(us.limited(many, 3)) == 6 and us.limited(many, None) == many
    same = us.routing_check([1.0] * 20, [1.0] * 20, [1.0])
    worse = us.routing_check([1.0] * 20, [0.0] * 10 + [1.0] * 10, [1.0])
    assert same["passed"] and not worse["passed"]


def test_add_refuses_an_evolve_reference_that_does_not_resolve_before_any_work(tmp_path, monkeypatch, capsys):
    """`specialist add --hints/--failures/--failure-data/--devscore MODULE:ATTRIBUTE`: each must
    resolve when it is given, a one-line error otherwise, and nothing is trained or written."""
    from pathlib import Path

    from macaronic.commands.specialist import main

    monkeypatch.setenv("MACARONIC_SPECIALISTS", str(tmp_path / "sp"))
    examples = Path(__file__).resolve().parents[2] / "examples" / "sql.jsonl"
    for flag, ref in (("--hints", "macaronic.evolve.failures:NO_SUCH_HINTS"), ("--failures", "no_such_module:f"),
                      ("--devscore", "not a reference")):
        assert main(["add", "sql", "--examples", str(examples), flag, ref]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"macaronic specialist: error: {flag} {ref}:") and "\n" not in err, err
    assert not (tmp_path / "sp").exists() or not any((tmp_path / "sp").rglob("*.safetensors"))
