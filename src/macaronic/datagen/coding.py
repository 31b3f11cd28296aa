"""The coding data engine: generated Python problems with unit tests, in three prompt styles.

A problem comes from one of `coding_families.FAMILIES` (strings, lists, matrices, dicts, number
theory, parsing, intervals, recursion, small classes, dates and times; about sixty, each with its
own names, constants and variants). The family's reference solution is the truth: the tests'
expected values are computed by running it on the family's arguments (edge cases included), and
`verify` runs reference + tests in the coding suite's sandbox. A prompt takes one of three styles:

- `signature`: a typed `def` line with a docstring and `>>>` examples, as HumanEval-like prompts look;
- `request`: a plain-language request naming the function and its parameters;
- `fix`: the reference with one injected bug (a mutation that fails at least one test), to repair.

Nothing here is a coding-suite family (`suites/coding.py` FAMILIES) or a HumanEval problem, and
`tests/datagen/test_coding_engine.py` checks both (MBPP is not shipped with any installed package,
so no check against it is possible here; the families were written without it). Targets for
training come from the base itself (`train/rft.py`: sampled solutions kept when these tests pass).
Knows nothing about models or training.

    problems(n, seed) -> list[Problem]          deterministic; distinct prompts
    verify(problem) -> list[str]                 sandbox: the reference passes, a fix prompt's code fails
"""

from __future__ import annotations

import copy
import random
import re
import sys
import textwrap
from dataclasses import dataclass

from macaronic.datagen.coding_families import FAMILIES, Spec

STYLES = {"signature": 0.4, "request": 0.4, "fix": 0.2}


@dataclass(frozen=True)
class Problem:
    id: str
    family: str
    style: str
    prompt: str
    entry_point: str
    reference: str  # a correct solution (module source)
    tests: tuple[str, ...]  # one-line statements with asserts, as the coding suite's grader runs them
    broken: str = ""  # the buggy code a `fix` prompt shows

    def user_message(self) -> str:
        return self.prompt

    def reference_reply(self) -> str:
        return f"```python\n{self.reference.strip()}\n```"


class _Budget(Exception):
    pass


def _run(source: str, fn, budget: int = 200_000):
    """`fn(namespace)` after exec'ing `source` in-process, with a line budget: our own references
    and their mutants only (a mutant may loop; the sandbox is for model code)."""
    left = [budget]

    def tracer(frame, event, arg):
        left[0] -= 1
        if left[0] < 0:
            raise _Budget
        return tracer

    old = sys.gettrace()
    sys.settrace(tracer)
    try:
        ns: dict = {}
        exec(compile(source, "<engine>", "exec"), ns)
        return fn(ns)
    finally:
        sys.settrace(old)


def _call(spec: Spec, args: tuple) -> str:
    return f"{spec.name}({', '.join(map(repr, args))})"


def _expected(spec: Spec, source: str) -> list:
    """Per case: the value (function) or the checked values of the script (class); an exception
    instance where the code raised."""
    def one(ns, case):
        try:
            if not spec.is_class:
                return ns[spec.name](*copy.deepcopy(case))
            local, got = dict(ns), []
            for stmt in case:
                stmt = stmt.replace("NAME", spec.name)
                if stmt.startswith("?"):
                    got.append(eval(stmt[1:], local))
                else:
                    exec(stmt, local)
            return got
        except _Budget:
            raise
        except Exception as e:  # noqa: BLE001 - a mutant's error is an observable difference
            return e

    out = []
    for case in spec.cases:
        try:
            out.append(_run(source, lambda ns: one(ns, case)))
        except _Budget:
            out.append(TimeoutError("loops"))
    return out


def _check(expr: str, value) -> str:
    if isinstance(value, bool) or value is None:
        return f"assert {expr} is {value!r}"
    if isinstance(value, float):
        return f"assert abs({expr} - {value!r}) < 1e-6"
    return f"assert {expr} == {value!r}"


def _passes(got, value) -> bool:
    """Would `_check`'s assertion for `value` pass on `got`? (A mutant that turns 16 into 16.0 is
    no bug the tests can show: `16.0 == 16`.)"""
    if isinstance(got, BaseException):
        return False
    if isinstance(value, bool) or value is None:
        return got is value
    if isinstance(value, float):
        try:
            return abs(got - value) < 1e-6
        except TypeError:
            return False
    try:
        return bool(got == value)
    except Exception:
        return False


def _passes_all(got, values: list) -> bool:
    """A class case: every checked value would pass."""
    return isinstance(got, list) and len(got) == len(values) and all(_passes(g, v) for g, v in zip(got, values))


def _tests(spec: Spec, expected: list) -> list[str]:
    out = []
    for case, value in zip(spec.cases, expected):
        if not spec.is_class:
            out.append(_check(_call(spec, case), value))
            continue
        vals, parts = iter(value), []
        for stmt in case:
            stmt = stmt.replace("NAME", spec.name)
            parts.append(_check(stmt[1:], next(vals)) if stmt.startswith("?") else stmt)
        out.append("; ".join(parts))
    return out


# ---- bugs for `fix` prompts --------------------------------------------------------------

MUTATIONS = ((" < ", " <= "), (" <= ", " < "), (" > ", " >= "), (" >= ", " > "), (" == ", " != "), (" != ", " == "),
             ("min(", "max("), ("max(", "min("), (" + 1", ""), (" - 1", ""), ("[1:]", "[2:]"), ("[:-1]", ""),
             (" and ", " or "), (" or ", " and "), (".lower()", ""), (".upper()", ""), ("return True", "return False"),
             ("return False", "return True"), (" // ", " / "), ("sorted(", "list("), ("[0]", "[-1]"), ("[-1]", "[0]"),
             ("+= 1", "+= 2"), (" * ", " + "), ("[::-1]", ""), ("append(", "insert(0, "), ("pop(0)", "pop()"),
             (" + ", " - "), (" - ", " + "), (" < ", " > "), (" > ", " < "), (" % ", " // "), (".strip()", ""),
             ("isdigit()", "isalnum()"), ("list(", "tuple("), ("isinstance(", "not isinstance("),
             ("weekday()", "isoweekday()"), ("02d", "d"))


def _mutants(source: str, rng: random.Random) -> list[str]:
    """Every one-site mutation of `source` (outside def/class/while lines), shuffled by `rng`."""
    lines, out = source.split("\n"), []
    for i, line in enumerate(lines):
        if line.lstrip().startswith(("def ", "class ", "while ", "import ", "from ")):
            continue
        for old, new in MUTATIONS:
            for m in re.finditer(re.escape(old), line):
                out.append("\n".join(lines[:i] + [line[:m.start()] + new + line[m.end():]] + lines[i + 1:]))
    rng.shuffle(out)
    return out


def _bug(spec: Spec, expected: list, rng: random.Random):
    """(mutant source, index of a case it gets wrong) or None: the first mutant that compiles and
    differs from the reference on a case without looping."""
    for mutant in _mutants(spec.source, rng)[:30]:
        try:
            compile(mutant, "<mutant>", "exec")
        except SyntaxError:
            continue
        got = _expected(spec, mutant)
        wrong = [i for i, (g, e) in enumerate(zip(got, expected))
                 if not (_passes_all(g, e) if spec.is_class else _passes(g, e))]
        if wrong and not any(isinstance(g, TimeoutError) for g in got):
            return mutant, wrong[0]
    return None


# ---- prompts -----------------------------------------------------------------------------

def _lower_first(s: str) -> str:
    return s[:1].lower() + s[1:]


def _third_person(doc: str) -> str:
    """"Return the ..." -> "returns the ..."."""
    verb, _, rest = doc.partition(" ")
    v = verb.lower()
    v = v[:-1] + "ies" if v.endswith("y") and v[-2:-1] not in "aeiou" else v + ("es" if v.endswith(("s", "sh", "ch", "x", "z")) else "s")
    return f"{v} {rest}"


def _params(spec: Spec) -> str:
    head = spec.source.split("\n", 1)[0]
    inner = head[head.index("(") + 1: head.rindex(")")]
    names, depth, cur = [], 0, ""
    for c in inner + ",":
        depth += c in "[(" and 1 or c in "])" and -1 or 0
        if c == "," and depth == 0:
            names.append(cur.split(":")[0].split("=")[0].strip())
            cur = ""
        else:
            cur += c
    return ", ".join(n for n in names if n)


def _stub(spec: Spec, expected: list, rng: random.Random, n_examples: int) -> str:
    """The signature-style code: the def (or class and method) lines with a docstring."""
    doc = textwrap.fill(spec.doc, 92, initial_indent="    ", subsequent_indent="    ").strip()
    if spec.is_class:
        methods = [ln for ln in spec.source.split("\n") if ln.startswith("    def ")]
        return f'class {spec.name}:\n    """{doc}\n    """\n\n' + "\n\n".join(f"{m}\n        ..." for m in methods) + "\n"
    head = spec.source.split("\n", 1)[0]
    ex = "".join(f"    >>> {_call(spec, c)}\n    {v!r}\n" for c, v in list(zip(spec.cases, expected))[:n_examples])
    return f'{head}\n    """{doc}\n{ex}    """\n'


def _signature(spec: Spec, expected: list, rng: random.Random) -> str:
    code = _stub(spec, expected, rng, rng.choice((1, 2, 2, 3)))
    return rng.choice((
        "Complete this Python function. Reply with the whole function in one ```python block.\n\n```python\n{c}```",
        "Implement the function below so that it does what its docstring says.\n\n```python\n{c}```",
        "```python\n{c}```\nWrite the body of this function.",
        "Fill in this Python code:\n\n```python\n{c}```",
        "Here is a stub. Make it work and return the complete code.\n\n```python\n{c}```",
    )).format(c=code)


def _request(spec: Spec, expected: list, rng: random.Random) -> str:
    if spec.is_class:
        return rng.choice((
            "Write a Python class `{n}`. {d}", "Implement a small class {n} in Python: {ld}",
            "I need a Python class called {n}. {d} Keep it simple.", "Python, please: a class `{n}`. {d}",
        )).format(n=spec.name, d=spec.doc, ld=_lower_first(spec.doc))
    sig = f"{spec.name}({_params(spec)})"
    text = rng.choice((
        "Write a Python function `{sig}` that {t}", "Implement `{sig}` in Python. It should {l}",
        "I need a function {sig}: {d}", "Can you write {sig} in Python? It {t}",
        "Python question: {d} Call the function `{n}` and give it the parameters ({p}).",
        "{d}\n\nName it {n}, parameters: {p}.",
    )).format(sig=sig, t=_third_person(spec.doc), l=_lower_first(spec.doc), d=spec.doc, n=spec.name,
              p=_params(spec))
    if rng.random() < 0.5 and not isinstance(expected[0], Exception):
        text += rng.choice(("\n\nFor example, `{c}` should give `{v!r}`.", " Example: {c} -> {v!r}.",
                            "\nE.g. {c} returns {v!r}.")).format(c=_call(spec, spec.cases[0]), v=expected[0])
    return text


def _fix(spec: Spec, expected: list, rng: random.Random, mutant: str, wrong: int) -> str:
    what = spec.doc if spec.is_class else _lower_first(spec.doc)
    if spec.is_class:
        symptom = "One of its methods gives the wrong answer."
    else:
        symptom = f"`{_call(spec, spec.cases[wrong])}` should give `{expected[wrong]!r}`, but it doesn't."
    return rng.choice((
        "This code should do the following, but it has a bug. Fix it.\n\n{what}\n\n```python\n{m}```",
        "My `{n}` is wrong. {s} Here it is:\n\n```python\n{m}```\nWhat's the bug? Give me the corrected code.",
        "Find and fix the bug in `{n}`.\n\n```python\n{m}```\nSpec: {what}",
        "```python\n{m}```\n{s} Please fix it.",
    )).format(what=what, m=mutant, n=spec.name, s=symptom)


# ---- problems ----------------------------------------------------------------------------

def make_problem(family: str, index: int, seed: int = 0, style: str | None = None) -> Problem:
    rng = random.Random(f"coding-engine:{family}:{seed}:{index}")
    spec = FAMILIES[family](rng)
    expected = _expected(spec, spec.source)
    bad = [c for c, v in zip(spec.cases, expected) if isinstance(v, Exception)]
    if bad:
        raise AssertionError(f"{family}: the reference raised on {bad}")
    tests = tuple(_tests(spec, expected))
    style = style or rng.choices(list(STYLES), weights=list(STYLES.values()))[0]
    broken = ""
    if style == "fix":
        found = _bug(spec, expected, rng)
        if found is None:
            style = "request"
        else:
            broken, wrong = found
            prompt = _fix(spec, expected, rng, broken, wrong)
    if style == "signature":
        prompt = _signature(spec, expected, rng)
    elif style == "request":
        prompt = _request(spec, expected, rng)
    return Problem(f"gen-{family}-{seed}-{index}", family, style, prompt, spec.name, spec.source, tests, broken)


def problems(n: int, seed: int = 0) -> list[Problem]:
    """`n` problems with distinct prompts, cycling through the families in order."""
    fams, out, seen, i = list(FAMILIES), [], set(), 0
    while len(out) < n:
        p = make_problem(fams[i % len(fams)], i // len(fams), seed)
        i += 1
        if p.prompt not in seen:
            seen.add(p.prompt)
            out.append(p)
        if i > 50 * n + 1000:
            raise RuntimeError(f"only {len(out)} distinct problems after {i} draws")
    return out


def run_tests(code: str, tests, timeout_s: float = 5.0) -> tuple[int, int]:
    """(tests passed, tests total) for `code` in the coding suite's sandbox."""
    from macaronic.suites.coding import CodingTask, grade

    t = CodingTask("check", "check", "train", "", "", "", tuple(tests))
    g = grade(t, f"```python\n{code}\n```", timeout_s=timeout_s)
    return (0 if g["timed_out"] else g["tests_passed"]), g["tests_total"]


def verify(p: Problem) -> list[str]:
    """What is wrong with `p` (empty: nothing): its reference must pass every test in the sandbox,
    and a fix prompt's code must fail one."""
    errs = []
    ok, total = run_tests(p.reference, p.tests)
    if ok != total or total == 0:
        errs.append(f"{p.id}: the reference passes {ok}/{total} tests")
    if p.style == "fix":
        ok, total = run_tests(p.broken, p.tests)
        if ok == total:
            errs.append(f"{p.id}: the broken code passes every test")
    return errs
