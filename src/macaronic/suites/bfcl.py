"""BFCL v4's single-turn AST categories from the `bfcl-eval` package, graded by the package's own
checker (`bfcl_eval.eval_checker.ast_eval.ast_checker`), as the leaderboard grades them.

Categories: simple (python), multiple, parallel, parallel_multiple (AST match against the
possible answers, calls in any order for parallel) and irrelevance (passes when the reply holds no
call). The checker module imports `bfcl_eval.constants.model_config`, which imports every vendor
SDK the package's runner supports; it only reads one flag from it (`underscore_to_dot`, for
hosted APIs that cannot name a function `math.factorial`). So that module is replaced, before the
import, by one that answers False: our tool names keep their dots. Knows nothing about models.
"""

from __future__ import annotations

import json
import sys
import types
from functools import lru_cache

from macaronic.suites.external import BFCL_PACKAGE, package_dir

CATEGORIES = {  # name -> (questions, possible answers or None)
    "simple": ("BFCL_v4_simple_python.json", "BFCL_v4_simple_python.json"),
    "multiple": ("BFCL_v4_multiple.json", "BFCL_v4_multiple.json"),
    "parallel": ("BFCL_v4_parallel.json", "BFCL_v4_parallel.json"),
    "parallel_multiple": ("BFCL_v4_parallel_multiple.json", "BFCL_v4_parallel_multiple.json"),
    "irrelevance": ("BFCL_v4_irrelevance.json", None),
}
CHECKER_NAME = "macaronic"  # the model name the checker is told (it only looks up underscore_to_dot)


def problems(category: str, limit: int | None = None) -> list[dict]:
    """The category's problems in the package's order: {id, question, function, ground_truth?}."""
    if category not in CATEGORIES:
        raise ValueError(f"unknown BFCL category {category!r}; choose from {sorted(CATEGORIES)}")
    d = package_dir("bfcl_eval", BFCL_PACKAGE) / "data"
    qf, af = CATEGORIES[category]
    out = [json.loads(line) for line in (d / qf).read_text().splitlines() if line.strip()][:limit]
    if af is None:
        return out
    answers = {x["id"]: x["ground_truth"] for x in map(json.loads, (d / "possible_answer" / af).read_text().splitlines()) if x}
    return [{**p, "ground_truth": answers[p["id"]]} for p in out]


def first_turn(problem: dict) -> list[dict]:
    q = problem["question"][0] if isinstance(problem["question"][0], list) else problem["question"]
    return [{"role": m["role"], "content": m["content"]} for m in q]


@lru_cache(maxsize=1)
def _checker():
    name = "bfcl_eval.constants.model_config"
    if name not in sys.modules:
        stub = types.ModuleType(name)
        stub.MODEL_CONFIG_MAPPING = {CHECKER_NAME: types.SimpleNamespace(underscore_to_dot=False)}
        sys.modules[name] = stub
    from bfcl_eval.constants.enums import Language
    from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker

    return ast_checker, Language.PYTHON


def grade(category: str, problem: dict, calls: list[tuple[str, dict]]) -> dict:
    """{passed, error}: `calls` (name, arguments) graded as the leaderboard grades the category."""
    if category == "irrelevance":
        return {"passed": not calls, "error": None if not calls else f"{len(calls)} call(s)"}
    if not calls:
        return {"passed": False, "error": "no call"}
    ast_checker, python = _checker()
    try:
        r = ast_checker(problem["function"], [{n: a} for n, a in calls], problem["ground_truth"], python,
                        category, CHECKER_NAME)
    except Exception as e:  # a malformed output the checker cannot read is a failure, not a crash
        return {"passed": False, "error": f"checker: {type(e).__name__}: {e}"}
    return {"passed": bool(r["valid"]), "error": None if r["valid"] else "; ".join(map(str, r.get("error", [])))[:300]}
