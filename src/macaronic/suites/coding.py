"""Coding suite: seeded function-writing tasks with unit tests, and a sandboxed grader.

Each family is a function `(rng) -> (prompt, entry_point, reference, tests)` whose parameters
(names, constants, examples) vary with the seed; tests are plain `assert` lines. Every family
belongs to one split for good (train / dev / test); the reference solution is the SFT target for
train families. HumanEval is not here and is never trained on. Grading extracts the first
fenced Python block (or the whole reply), appends the tests and runs them in `sandbox.run_python`.

    generate_tasks(split, n_per_family=10, seed=0) -> list[CodingTask]
    grade(task, reply) -> {"task_id", "passed", "tests_passed", "tests_total", "error", "timed_out"}
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from macaronic.splits import SPLITS
from macaronic.suites.sandbox import run_python



@dataclass(frozen=True)
class CodingTask:
    id: str
    family: str
    split: str
    prompt: str
    entry_point: str
    reference: str  # a correct solution (module source)
    tests: tuple[str, ...]  # assert statements

    def user_message(self) -> str:
        return self.prompt

    def reference_reply(self) -> str:
        return f"```python\n{self.reference.strip()}\n```"


def _ask(rng, what: str, name: str, sig: str) -> str:
    return rng.choice((
        f"Write a Python function `{name}{sig}` that {what}.",
        f"Implement `{name}{sig}` in Python: it {what}.",
        f"I need a Python function named {name} with signature {name}{sig}. It {what}.",
        f"Please write {name}{sig} in Python. The function {what}.",
    ))


# ---- families: (rng) -> (prompt, entry_point, reference, tests) ---------------------------

def sum_multiples(rng):
    k, name = rng.choice((2, 3, 5, 7)), rng.choice(("sum_multiples", "total_of_multiples", "add_multiples"))
    ref = f"def {name}(nums):\n    return sum(x for x in nums if x % {k} == 0)\n"
    cases = [[1, 2, 3, 4, 5, 6, 10, 14, 15, 21], [], [k, -k, 1], [7 * k, 3]]
    tests = [f"assert {name}({c!r}) == {sum(x for x in c if x % k == 0)}" for c in cases]
    return _ask(rng, f"returns the sum of the numbers in the list `nums` that are divisible by {k}", name, "(nums)"), name, ref, tests


def count_vowels(rng):
    name = rng.choice(("count_vowels", "vowel_count", "num_vowels"))
    ref = f"def {name}(s):\n    return sum(1 for c in s.lower() if c in 'aeiou')\n"
    cases = ["Hello World", "", "AEIOU xyz", "rhythm", "Programming in Python"]
    tests = [f"assert {name}({c!r}) == {sum(1 for ch in c.lower() if ch in 'aeiou')}" for c in cases]
    return _ask(rng, "returns how many vowels (a, e, i, o, u, any case) the string `s` contains", name, "(s)"), name, ref, tests


def reverse_words(rng):
    name = rng.choice(("reverse_words", "flip_words", "words_backwards"))
    ref = f"def {name}(s):\n    return ' '.join(reversed(s.split()))\n"
    cases = ["the quick brown fox", "hello", "", "  a  b c "]
    tests = [f"assert {name}({c!r}) == {' '.join(reversed(c.split()))!r}" for c in cases]
    return _ask(rng, "returns the words of the string `s` in reverse order, joined by single spaces", name, "(s)"), name, ref, tests


def clamp(rng):
    lo, hi = sorted(rng.sample(range(-20, 40), 2))
    name = rng.choice(("clamp", "bound", "limit_value"))
    ref = f"def {name}(x):\n    return max({lo}, min({hi}, x))\n"
    cases = [lo - 5, lo, (lo + hi) // 2, hi, hi + 7]
    tests = [f"assert {name}({c}) == {max(lo, min(hi, c))}" for c in cases]
    return _ask(rng, f"returns `x` clamped to the range [{lo}, {hi}]", name, "(x)"), name, ref, tests


def dedupe(rng):
    name = rng.choice(("dedupe", "unique_in_order", "remove_duplicates"))
    ref = f"def {name}(items):\n    seen = set()\n    out = []\n    for x in items:\n        if x not in seen:\n            seen.add(x)\n            out.append(x)\n    return out\n"
    cases = [[3, 1, 3, 2, 1], [], ["a", "b", "a"], [5, 5, 5]]
    tests = [f"assert {name}({c!r}) == {list(dict.fromkeys(c))!r}" for c in cases]
    return _ask(rng, "returns the items of the list with duplicates removed, keeping the first occurrence order", name, "(items)"), name, ref, tests


def is_palindrome(rng):
    name = rng.choice(("is_palindrome", "palindrome", "reads_same_backwards"))
    ref = f"def {name}(s):\n    t = [c.lower() for c in s if c.isalnum()]\n    return t == t[::-1]\n"
    cases = ["A man, a plan, a canal: Panama", "hello", "", "No lemon, no melon", "ab"]
    f = lambda s: [c.lower() for c in s if c.isalnum()] == [c.lower() for c in s if c.isalnum()][::-1]
    tests = [f"assert {name}({c!r}) is {f(c)}" for c in cases]
    return _ask(rng, "returns True if `s` is a palindrome when case and non-alphanumeric characters are ignored", name, "(s)"), name, ref, tests


def fahrenheit(rng):
    name = rng.choice(("c_to_f", "celsius_to_fahrenheit", "to_fahrenheit"))
    ref = f"def {name}(c):\n    return c * 9 / 5 + 32\n"
    cases = [0, 100, -40, 37]
    tests = [f"assert abs({name}({c}) - {c * 9 / 5 + 32}) < 1e-9" for c in cases]
    return _ask(rng, "converts a temperature `c` in degrees Celsius to Fahrenheit", name, "(c)"), name, ref, tests


def char_freq(rng):
    name = rng.choice(("char_counts", "letter_frequency", "count_chars"))
    ref = f"def {name}(s):\n    out = {{}}\n    for c in s:\n        out[c] = out.get(c, 0) + 1\n    return out\n"
    cases = ["banana", "", "aab"]
    tests = [f"assert {name}({c!r}) == {dict((ch, c.count(ch)) for ch in c)!r}" for c in cases]
    return _ask(rng, "returns a dict mapping each character of `s` to the number of times it occurs", name, "(s)"), name, ref, tests


def running_max(rng):
    name = rng.choice(("running_max", "prefix_max", "cumulative_max"))
    ref = f"def {name}(nums):\n    out = []\n    for x in nums:\n        out.append(x if not out else max(out[-1], x))\n    return out\n"
    def f(c):
        out = []
        for x in c:
            out.append(x if not out else max(out[-1], x))
        return out
    cases = [[1, 3, 2, 5, 4], [], [-1, -2], [7]]
    tests = [f"assert {name}({c!r}) == {f(c)!r}" for c in cases]
    return _ask(rng, "returns a list whose i-th item is the largest of nums[0..i]", name, "(nums)"), name, ref, tests


def nth_fib(rng):
    name = rng.choice(("fib", "fibonacci", "nth_fibonacci"))
    ref = f"def {name}(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a\n"
    fibs = [0, 1, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144]
    tests = [f"assert {name}({n}) == {fibs[n]}" for n in (0, 1, 2, 7, 12)]
    return _ask(rng, "returns the n-th Fibonacci number, with fib(0) == 0 and fib(1) == 1", name, "(n)"), name, ref, tests


def second_largest(rng):
    name = rng.choice(("second_largest", "runner_up", "second_max"))
    ref = f"def {name}(nums):\n    vals = sorted(set(nums), reverse=True)\n    return vals[1] if len(vals) > 1 else None\n"
    cases = [[4, 1, 4, 3], [7], [2, 2], [-1, -5, 0]]
    f = lambda c: (sorted(set(c), reverse=True)[1] if len(set(c)) > 1 else None)
    tests = [f"assert {name}({c!r}) == {f(c)!r}" for c in cases]
    return _ask(rng, "returns the second largest distinct value in `nums`, or None if there is none", name, "(nums)"), name, ref, tests


def rotate(rng):
    name = rng.choice(("rotate_left", "rotate", "shift_left"))
    ref = f"def {name}(items, k):\n    if not items:\n        return []\n    k %= len(items)\n    return items[k:] + items[:k]\n"
    cases = [([1, 2, 3, 4, 5], 2), ([], 3), ([1, 2], 5), (["a", "b", "c"], 0)]
    f = lambda it, k: (it[k % len(it):] + it[:k % len(it)]) if it else []
    tests = [f"assert {name}({a!r}, {k}) == {f(a, k)!r}" for a, k in cases]
    return _ask(rng, "rotates the list `items` left by `k` positions and returns the new list", name, "(items, k)"), name, ref, tests


def gcd_fn(rng):
    name = rng.choice(("gcd", "greatest_common_divisor", "hcf"))
    ref = f"def {name}(a, b):\n    while b:\n        a, b = b, a % b\n    return abs(a)\n"
    import math
    cases = [(12, 18), (7, 5), (0, 9), (100, 75)]
    tests = [f"assert {name}({a}, {b}) == {math.gcd(a, b)}" for a, b in cases]
    return _ask(rng, "returns the greatest common divisor of the integers `a` and `b`", name, "(a, b)"), name, ref, tests


def title_case(rng):
    name = rng.choice(("title_words", "capitalize_words", "make_title"))
    ref = f"def {name}(s):\n    return ' '.join(w[:1].upper() + w[1:].lower() for w in s.split())\n"
    cases = ["hello world", "pYTHON is FUN", "", "a"]
    f = lambda s: " ".join(w[:1].upper() + w[1:].lower() for w in s.split())
    tests = [f"assert {name}({c!r}) == {f(c)!r}" for c in cases]
    return _ask(rng, "capitalizes the first letter of each word of `s`, lowercases the rest, and joins words with single spaces", name, "(s)"), name, ref, tests


def flatten(rng):
    name = rng.choice(("flatten", "flatten_once", "concat_lists"))
    ref = f"def {name}(lists):\n    return [x for sub in lists for x in sub]\n"
    cases = [[[1, 2], [3], []], [], [["a"], ["b", "c"]]]
    tests = [f"assert {name}({c!r}) == {[x for s in c for x in s]!r}" for c in cases]
    return _ask(rng, "flattens a list of lists by one level", name, "(lists)"), name, ref, tests


def count_words_longer(rng):
    k = rng.choice((3, 4, 5))
    name = rng.choice(("count_long_words", "long_word_count", "words_over"))
    ref = f"def {name}(s):\n    return sum(1 for w in s.split() if len(w) > {k})\n"
    cases = ["the quick brown fox jumps", "", "extraordinary things happen"]
    tests = [f"assert {name}({c!r}) == {sum(1 for w in c.split() if len(w) > k)}" for c in cases]
    return _ask(rng, f"returns how many whitespace-separated words of `s` are longer than {k} characters", name, "(s)"), name, ref, tests


def digit_sum(rng):
    name = rng.choice(("digit_sum", "sum_digits", "add_digits"))
    ref = f"def {name}(n):\n    return sum(int(d) for d in str(abs(n)))\n"
    cases = [0, 1234, -56, 9999]
    tests = [f"assert {name}({c}) == {sum(int(d) for d in str(abs(c)))}" for c in cases]
    return _ask(rng, "returns the sum of the decimal digits of the integer `n` (ignore the sign)", name, "(n)"), name, ref, tests


def merge_sorted(rng):
    name = rng.choice(("merge_sorted", "merge_lists", "combine_sorted"))
    ref = f"def {name}(a, b):\n    i = j = 0\n    out = []\n    while i < len(a) and j < len(b):\n        if a[i] <= b[j]:\n            out.append(a[i]); i += 1\n        else:\n            out.append(b[j]); j += 1\n    return out + a[i:] + b[j:]\n"
    cases = [([1, 4, 9], [2, 3, 10]), ([], [1]), ([5], [])]
    tests = [f"assert {name}({a!r}, {b!r}) == {sorted(a + b)!r}" for a, b in cases]
    return _ask(rng, "merges two sorted lists `a` and `b` into one sorted list", name, "(a, b)"), name, ref, tests


FAMILIES = {
    "sum_multiples": ("train", sum_multiples), "count_vowels": ("train", count_vowels),
    "reverse_words": ("train", reverse_words), "clamp": ("train", clamp), "dedupe": ("train", dedupe),
    "is_palindrome": ("train", is_palindrome), "fahrenheit": ("train", fahrenheit),
    "char_freq": ("train", char_freq), "running_max": ("train", running_max), "nth_fib": ("train", nth_fib),
    "second_largest": ("train", second_largest), "rotate": ("train", rotate),
    "gcd": ("dev", gcd_fn), "title_case": ("dev", title_case), "flatten": ("dev", flatten),
    "count_long_words": ("test", count_words_longer), "digit_sum": ("test", digit_sum),
    "merge_sorted": ("test", merge_sorted),
}


def make_task(family: str, index: int, seed: int = 0) -> CodingTask:
    split, fn = FAMILIES[family]
    rng = random.Random(f"coding:{family}:{seed}:{index}")
    prompt, entry, ref, tests = fn(rng)
    return CodingTask(f"coding-{family}-{seed}-{index}", family, split, prompt, entry, ref, tuple(tests))


def generate_tasks(split: str | None = None, n_per_family: int = 10, seed: int = 0) -> list[CodingTask]:
    """`n_per_family` tasks for each family of `split` (every split when None)."""
    if split is not None and split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; expected one of {SPLITS}")
    return [make_task(f, i, seed) for f, (s, _) in FAMILIES.items() if split in (None, s)
            for i in range(n_per_family)]


_FENCE = re.compile(r"```(?:python|py|Python)?[ \t]*\n(.*?)(?:```|\Z)", re.S)


def extract_code(reply: str) -> str:
    """The first fenced code block (an unclosed last fence counts), else the whole reply."""
    m = _FENCE.search(reply or "")
    return m.group(1) if m else (reply or "")


def grade(task: CodingTask, reply: str, timeout_s: float = 5.0) -> dict:
    """Run the reply's code plus each test in the sandbox; passed = every test passed."""
    code = extract_code(reply)
    harness = ["import sys", "_ok = 0", f"_n = {len(task.tests)}"]
    harness += [f"try:\n    {t}\n    _ok += 1\nexcept Exception as e:\n    print('FAIL', {t!r}, type(e).__name__, file=sys.stderr)"
                for t in task.tests]
    harness.append("print(f'RESULT {_ok}/{_n}')")
    res = run_python(code + "\n\n" + "\n".join(harness), timeout_s=timeout_s)
    m = re.search(r"RESULT (\d+)/(\d+)", res.stdout)
    ok = int(m.group(1)) if m else 0
    err = None if res.ok and m else (res.stderr.strip().splitlines() or ["no result"])[-1][:300]
    if res.timed_out:
        err = "timed out"
    return {"task_id": task.id, "passed": bool(m) and ok == len(task.tests) and res.ok,
            "tests_passed": ok, "tests_total": len(task.tests), "error": err, "timed_out": res.timed_out}
