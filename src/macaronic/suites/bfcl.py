"""BFCL v4 from the `bfcl-eval` package, graded by the package's own checkers, as the leaderboard
grades them.

Single-turn categories: simple (python; simple_java and simple_javascript beside it, the
leaderboard's "simple" being the unweighted mean of the three), multiple, parallel, parallel_multiple (AST match against
the possible answers by `bfcl_eval.eval_checker.ast_eval.ast_checker`, calls in any order for
parallel) and irrelevance (passes when the reply holds no call). multi_turn_base: a conversation
of pre-scripted user turns over the package's own stateful backends (GorillaFileSystem,
TradingBot, TravelAPI, ...); the model's calls run on one instance per problem and row, their
results go back as tool messages, and `multi_turn_checker` compares the backends' state and the
calls' results with the ground truth's after every turn. The checker module imports `bfcl_eval.constants.model_config`, which imports every vendor
SDK the package's runner supports; it only reads one flag from it (`underscore_to_dot`, for
hosted APIs that cannot name a function `math.factorial`). So that module is replaced, before the
import, by one that answers False: our tool names keep their dots. Knows nothing about models.
"""

from __future__ import annotations

import copy
import json
import re
import sys
import types
import uuid
from functools import lru_cache

from macaronic.suites.external import BFCL_PACKAGE, package_dir

CATEGORIES = {  # name -> (questions, possible answers or None)
    "simple": ("BFCL_v4_simple_python.json", "BFCL_v4_simple_python.json"),
    "simple_java": ("BFCL_v4_simple_java.json", "BFCL_v4_simple_java.json"),
    "simple_javascript": ("BFCL_v4_simple_javascript.json", "BFCL_v4_simple_javascript.json"),
    "multiple": ("BFCL_v4_multiple.json", "BFCL_v4_multiple.json"),
    "parallel": ("BFCL_v4_parallel.json", "BFCL_v4_parallel.json"),
    "parallel_multiple": ("BFCL_v4_parallel_multiple.json", "BFCL_v4_parallel_multiple.json"),
    "irrelevance": ("BFCL_v4_irrelevance.json", None),
    "multi_turn_base": ("BFCL_v4_multi_turn_base.json", "BFCL_v4_multi_turn_base.json"),
}
MULTI_TURN = ("multi_turn_base",)
# the leaderboard's "simple" column: the unweighted mean of its three languages (eval_runner_helper)
SIMPLE_LANGUAGES = ("simple", "simple_java", "simple_javascript")
MAX_STEPS = 20  # the leaderboard's cap on model calls within one user turn (MAXIMUM_STEP_LIMIT)
CHECKER_NAME = "macaronic"  # the model name the checker is told (it only looks up underscore_to_dot)


def problems(category: str, limit: int | None = None, offset: int = 0) -> list[dict]:
    """The category's problems in the package's order, from `offset` on, at most `limit`: {id,
    question, function, ground_truth?}."""
    if category not in CATEGORIES:
        raise ValueError(f"unknown BFCL category {category!r}; choose from {sorted(CATEGORIES)}")
    d = package_dir("bfcl_eval", BFCL_PACKAGE) / "data"
    qf, af = CATEGORIES[category]
    out = [json.loads(line) for line in (d / qf).read_text().splitlines() if line.strip()]
    out = out[offset:][:limit]
    if category in MULTI_TURN:  # the functions are the involved backends' docs, as the package's loader adds them
        from bfcl_eval.constants.executable_backend_config import MULTI_TURN_FUNC_DOC_FILE_MAPPING as docs

        for p in out:
            p["function"] = [json.loads(line) for c in p["involved_classes"]
                             for line in (d / "multi_turn_func_doc" / docs[c]).read_text().splitlines() if line.strip()]
    _checker()
    from bfcl_eval.utils import _func_doc_language_specific_pre_processing as language_hints

    for p in out:  # the model reads the loader's hints ("... in Java 8 SDK syntax.", typed strings); the checker the originals
        p["checked_function"] = p["function"]
        p["function"] = language_hints(copy.deepcopy(p["function"]), _package_category(category))
    if af is None:
        return out
    answers = {x["id"]: x["ground_truth"] for x in map(json.loads, (d / "possible_answer" / af).read_text().splitlines()) if x}
    return [{**p, "ground_truth": answers[p["id"]]} for p in out]


def _package_category(category: str) -> str:
    return "simple_python" if category == "simple" else category


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
    from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker

    return ast_checker


def _language(category: str):
    from bfcl_eval.constants.enums import Language

    return {"simple_java": Language.JAVA, "simple_javascript": Language.JAVASCRIPT}.get(category, Language.PYTHON)


def grade(category: str, problem: dict, calls: list[tuple[str, dict]]) -> dict:
    """{passed, error}: `calls` (name, arguments) graded as the leaderboard grades the category."""
    if category == "irrelevance":
        return {"passed": not calls, "error": None if not calls else f"{len(calls)} call(s)"}
    if not calls:
        return {"passed": False, "error": "no call"}
    ast_checker = _checker()
    try:
        r = ast_checker(problem["checked_function"], [{n: a} for n, a in calls], problem["ground_truth"], _language(category),
                        _package_category(category), CHECKER_NAME)
    except Exception as e:  # a malformed output the checker cannot read is a failure, not a crash
        return {"passed": False, "error": f"checker: {type(e).__name__}: {e}"}
    return {"passed": bool(r["valid"]), "error": None if r["valid"] else "; ".join(map(str, r.get("error", [])))[:300]}


def call_strings(calls: list[tuple[str, dict]]) -> list[str]:
    """(name, arguments) as the call strings the package executes and grades (`name(k=repr(v), ...)`)."""
    return [f"{name}({','.join(f'{k}={v!r}' for k, v in args.items())})" for name, args in calls]


def called_names(calls: list[str]) -> set[str]:
    """The function names in call strings (`cd(folder='x')` -> `cd`)."""
    return {m.group(1) for c in calls if (m := re.match(r"\s*([\w.]+)\(", c))}


def turn_measures(rows: list[dict], gold: dict[str, list[list[str]]]) -> dict[tuple[str, int], dict]:
    """Per-turn measures of multi-turn rows (as `probe bfcl` writes them: id, passed, turns = per user
    turn, per step, the call strings) over the turns whose ground truth (`gold`: id -> per turn, its
    call strings) calls something: (id, turn) -> passed (the problem's), right (a ground-truth function
    called), exact (the same set of functions), recall (the share of the ground truth's functions
    called), chained (two or more steps), none (no call). The checker grades only whole problems,
    which small models rarely pass; these say what moved in between."""
    out = {}
    for r in rows:
        for k, steps in enumerate(r["turns"]):
            if not gold[r["id"]][k]:
                continue
            want, got = called_names(gold[r["id"]][k]), called_names([c for s in steps for c in s])
            out[(r["id"], k)] = {"passed": float(r["passed"]), "right": float(bool(want & got)),
                                 "exact": float(want == got), "recall": len(want & got) / max(1, len(want)),
                                 "chained": float(len(steps) >= 2), "none": float(not steps)}
    return out


def execute(problem: dict, calls: list[str], row: str) -> list[str]:
    """Run call strings on the problem's backends for one row (`row` names the row's instances, which
    persist across the problem's turns; use a fresh name per run). One result string per call; a
    failing call's result is its error text, as the leaderboard's runner returns it."""
    _checker()
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils import execute_multi_turn_func_call

    results, _ = execute_multi_turn_func_call(calls, problem["initial_config"], problem["involved_classes"],
                                              row, problem["id"], long_context=False, is_evaL_run=False)
    return results


def grade_multi_turn(problem: dict, turns: list[list[list[str]]], row: str = "graded") -> dict:
    """{passed, error}: `turns` (per user turn, per model step, the call strings) replayed on fresh
    backends and checked against the ground truth by the package's multi-turn checker."""
    _checker()
    row = f"{row}_{uuid.uuid4().hex}"  # the package keeps instances by name: every replay starts fresh
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker

    if len(turns) != len(problem["ground_truth"]):
        return {"passed": False, "error": f"{len(turns)} turns answered of {len(problem['ground_truth'])}"}
    try:
        r = multi_turn_checker(turns, problem["ground_truth"], problem, problem["id"].rsplit("_", 1)[0], row)
    except Exception as e:  # a call the checker cannot replay is a failure, not a crash
        return {"passed": False, "error": f"checker: {type(e).__name__}: {e}"}
    return {"passed": bool(r["valid"]), "error": None if r["valid"] else str(r.get("error_message", r))[:300]}
