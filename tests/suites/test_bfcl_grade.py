"""BFCL's own AST checker through `macaronic.suites.bfcl.grade`: gold answers pass, wrong ones fail,
parallel calls match in any order, irrelevance passes only without a call."""

from __future__ import annotations

from macaronic.suites.bfcl import (CATEGORIES, MULTI_TURN, called_names, execute, grade, grade_multi_turn, problems,
                                   turn_measures)


def first(allowed: dict) -> dict:
    """The first possible value of each argument ("" means: leave it out; a dict nests its own)."""
    return {k: first(v[0]) if isinstance(v[0], dict) else v[0] for k, v in allowed.items() if v and v[0] != ""}


def gold_calls(problem: dict) -> list[tuple[str, dict]]:
    return [(name, first(allowed)) for call in problem["ground_truth"] for name, allowed in call.items()]


def test_every_category_loads_with_the_leaderboard_sizes():
    sizes = {c: len(problems(c)) for c in CATEGORIES}
    assert sizes == {"simple": 400, "simple_java": 100, "simple_javascript": 50, "multiple": 200, "parallel": 200, "parallel_multiple": 200, "irrelevance": 240,
                     "multi_turn_base": 200}


def test_gold_answers_pass_and_wrong_ones_fail():
    for cat in ("simple", "multiple", "parallel", "parallel_multiple"):
        for p in problems(cat, 15):
            calls = gold_calls(p)
            assert grade(cat, p, calls)["passed"], (cat, p["id"], grade(cat, p, calls))
            assert not grade(cat, p, [])["passed"]
            name, args = calls[0]
            assert not grade(cat, p, [("not_a_function", args)] + calls[1:])["passed"]
    p = problems("parallel", 1)[0]
    assert grade("parallel", p, list(reversed(gold_calls(p))))["passed"]  # any order
    assert not grade("parallel", p, gold_calls(p)[:1])["passed"]  # one call short


def test_irrelevance_passes_only_without_a_call():
    p = problems("irrelevance", 1)[0]
    assert grade("irrelevance", p, [])["passed"]
    assert not grade("irrelevance", p, [(p["function"][0]["name"], {})])["passed"]


def test_multi_turn_gold_passes_on_the_backends_and_short_answers_fail():
    """The ground truth, one step per turn, replays to a pass on fresh backends; a conversation that
    stops calling early, or calls the wrong thing, fails; each replay starts from the initial state."""
    for p in problems("multi_turn_base", 12):
        gold = [[turn] for turn in p["ground_truth"]]
        assert p["function"] and all("name" in f for f in p["function"])
        assert grade_multi_turn(p, gold)["passed"], p["id"]
        assert grade_multi_turn(p, gold)["passed"], p["id"]  # twice: no state kept between replays
        assert not grade_multi_turn(p, gold[:-1] + [[]])["passed"]
        assert not grade_multi_turn(p, gold[:-1])["passed"]  # a turn missing
    p = problems("multi_turn_base", 1)[0]
    assert not grade_multi_turn(p, [[["ls()"]] for _ in p["ground_truth"]])["passed"]


def test_multi_turn_calls_run_on_one_backend_per_row():
    p = problems("multi_turn_base", 1)[0]  # GorillaFileSystem: workspace/{document, archive}
    assert "document" in execute(p, ["ls()"], "row-a")[0]
    assert execute(p, ["cd(folder='document')"], "row-a")[0].endswith('"document"}')
    assert "final_report.pdf" in execute(p, ["ls()"], "row-a")[0]  # the row's state persists
    assert "document" in execute(p, ["ls()"], "row-b")[0]  # another row starts fresh
    assert execute(p, ["no_such_function()"], "row-a")[0].startswith("Error during execution")


def test_java_and_javascript_are_graded_from_their_string_forms():
    """The leaderboard's loader turns every Java / JavaScript parameter into a string with a typed
    hint; the checker reads the language back from the string: gold values written as strings pass."""
    def as_string(v):
        return ("true" if v else "false") if isinstance(v, bool) else str(v)

    for cat in ("simple_java", "simple_javascript"):
        ps = problems(cat)
        assert all(prop["type"] == "string" for p in ps for f in p["function"]
                   for prop in f["parameters"]["properties"].values())
        assert all(("Java 8 SDK" if cat == "simple_java" else "JavaScript") in p["function"][0]["description"] for p in ps)
        passed = 0
        for p in ps[:30]:
            (call,) = p["ground_truth"]
            (name, allowed), = call.items()
            if any(isinstance(v[0], (dict, list)) for v in allowed.values() if v):
                continue
            args = {k: as_string(v[0]) for k, v in allowed.items() if v and v[0] != ""}
            g = grade(cat, p, [(name, args)])
            passed += g["passed"]
            assert not grade(cat, p, [("not_" + name, args)])["passed"]
        assert passed >= 10, (cat, passed)


def test_problems_from_an_offset_are_the_next_batch():
    first = [p["id"] for p in problems("simple", 5)]
    assert [p["id"] for p in problems("simple", 3, offset=2)] == first[2:5]
    assert problems("simple", 5, offset=10_000) == []


def test_per_turn_measures_of_multi_turn_rows():
    gold = {"p": [["cd(folder='a')", "mkdir(dir_name='b')", "mv(source='x', destination='b')"], [], ["ls()"]]}
    rows = [{"id": "p", "passed": False, "turns": [[["cd(folder='a')"], ["mv(source='x',destination='b')"]],
                                                     [["ls()"]], []]}]
    assert called_names(["cd(folder='a')", " os.path.join(a='b')", "not a call"]) == {"cd", "os.path.join"}
    m = turn_measures(rows, gold)
    assert set(m) == {("p", 0), ("p", 2)}  # a turn whose ground truth calls nothing is not measured
    assert m[("p", 0)] == {"passed": 0.0, "right": 1.0, "exact": 0.0, "recall": 2 / 3, "chained": 1.0, "none": 0.0}
    assert m[("p", 2)] == {"passed": 0.0, "right": 0.0, "exact": 0.0, "recall": 0.0, "chained": 0.0, "none": 1.0}
