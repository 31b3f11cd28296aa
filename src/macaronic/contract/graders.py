"""Graders by name and version. A contract names `name@version`; changing what a grader does
means adding a version, never editing one in place, so old reports stay reproducible.

Each grader returns {"score": float in [0, 1], "passed": bool, ...details}. The grader receives
what its suite produced (a reply, an episode, a conversation); suites know how to call theirs.
"""

from __future__ import annotations

from typing import Any, Callable


def parse_grader(ref: str) -> tuple[str, int]:
    name, _, ver = ref.partition("@")
    return name, int(ver) if ver.isdigit() else -1


def agent_state_hash_v1(task, episode, reply: str) -> dict:
    from macaronic.substrate.tasks import grade

    g = grade(task, episode, reply)
    return {"score": float(g["passed"]), "passed": bool(g["passed"]), "state_match": g["state_match"],
            "facts_missing": g["facts_missing"]}


def genui_l1_l2_v1(task, reply: str) -> dict:
    """Score = mean of L1 validity and L2 content coverage; passed = valid and full coverage."""
    from macaronic.genui.grade import grade

    g = grade(task, reply)
    l1, l2 = float(g["l1_valid"]), float(g["l2_content"])
    return {"score": (l1 + l2) / 2, "passed": bool(l1 and l2 >= 1.0), "l1_valid": bool(l1), "l2_content": l2,
            "errors": [str(e) for e in g["errors"][:3]]}


def generated_v1(module) -> Callable:
    """Suites from other generators (coding, chat): their own grade(task, reply)."""
    def grade(task, reply: str) -> dict:
        g = module.grade(task, reply)
        if isinstance(g, dict):
            passed = bool(g.get("passed", g.get("score", 0) >= 1))
            return {**{k: v for k, v in g.items() if k in ("errors", "error", "reason", "checks", "tests_passed",
                                                            "tests_total", "timed_out")},
                    "score": float(g.get("score", passed)), "passed": passed}
        return {"score": float(bool(g)), "passed": bool(g)}
    return grade


def humaneval_exec_v1(task: dict, reply: str, timeout_s: float = 10.0) -> dict:
    """HumanEval: prompt + completion (or the reply's full function) + test, run in the coding suite's sandbox."""
    from macaronic.suites.coding import extract_code
    from macaronic.suites.sandbox import run_python

    code = extract_code(reply)
    body = code if f"def {task['entry_point']}" in code else task["prompt"] + code
    program = f"{body}\n\n{task['test']}\n\ncheck({task['entry_point']})\n"
    r = run_python(program, timeout_s=timeout_s, mem_mb=1024)
    err = (r.stderr.strip().splitlines() or [""])[-1][:300]
    return {"score": float(r.ok), "passed": r.ok, "status": "timeout" if r.timed_out else "passed" if r.ok else "failed",
            "detail": err}


def humaneval_exec_v2(task: dict, reply: str, timeout_s: float = 10.0) -> dict:
    """As v1, but a reply that rewrites the whole function keeps the prompt's header (imports
    such as `from typing import List`), as the official prompt + completion program would."""
    from macaronic.suites.coding import extract_code

    code = extract_code(reply)
    if f"def {task['entry_point']}" in code:
        header = task["prompt"].split(f"def {task['entry_point']}")[0]
        reply = f"```python\n{header}\n{code}\n```"
    return humaneval_exec_v1(task, reply, timeout_s)


def bfcl_ast_simple_v1(task: dict, reply: str) -> dict:
    """BFCL simple: one call to the one function; every given argument among the allowed values,
    every required argument given (an allowed value "" means the argument may be left out)."""
    from macaronic.substrate.toolcalls import parse_tool_calls

    tools = [{"type": "function", "function": {"name": f["name"], "parameters": {"type": "object"}}}
             for f in task["function"]]
    parsed = parse_tool_calls(reply, tools)
    calls = [(c["function"]["name"], c["function"]["arguments"]) for c in parsed.tool_calls]
    if len(calls) != 1:
        return {"score": 0.0, "passed": False, "reason": parsed.error or f"{len(calls)} calls"}
    name, args = calls[0]
    if isinstance(args, str):
        import json

        try:
            args = json.loads(args)
        except ValueError:
            return {"score": 0.0, "passed": False, "reason": "arguments are not JSON"}
    (gold_name, allowed), = task["ground_truth"][0].items()
    if name != gold_name:
        return {"score": 0.0, "passed": False, "reason": f"called {name!r}"}
    for key, values in allowed.items():
        if key not in args:
            if "" not in values:
                return {"score": 0.0, "passed": False, "reason": f"missing {key}"}
        elif not any(_same(args[key], v) for v in values):
            return {"score": 0.0, "passed": False, "reason": f"wrong {key}"}
    extra = set(args) - set(allowed)
    if extra:
        return {"score": 0.0, "passed": False, "reason": f"unknown arguments {sorted(extra)}"}
    return {"score": 1.0, "passed": True}


def _same(x: Any, y: Any) -> bool:
    if isinstance(x, str) and isinstance(y, str):
        return x.strip().lower() == y.strip().lower()
    if isinstance(x, (int, float)) and isinstance(y, (int, float)) and not isinstance(x, bool):
        return abs(float(x) - float(y)) < 1e-9
    return x == y


def mixed_v1(turns: list[dict]) -> dict:
    """Mixed conversations: per turn, half for the right route, half for an acceptable answer."""
    per = [0.5 * t["route_ok"] + 0.5 * t["answer_ok"] for t in turns]
    return {"score": sum(per) / len(per), "passed": all(p == 1.0 for p in per),
            "route_acc": sum(t["route_ok"] for t in turns) / len(turns),
            "answer_acc": sum(t["answer_ok"] for t in turns) / len(turns)}


# name -> version -> grader. Plain data: the contract's `grader: name@version` is a lookup here.
GRADERS: dict[str, dict[int, Callable]] = {
    "agent.state_hash": {1: agent_state_hash_v1},
    "genui.l1_l2": {1: genui_l1_l2_v1},
    "generated": {1: generated_v1},
    "humaneval.exec": {1: humaneval_exec_v1, 2: humaneval_exec_v2},
    "bfcl.ast_simple": {1: bfcl_ast_simple_v1},
    "mixed.route_answer": {1: mixed_v1},
}


def get(ref: str) -> Callable:
    name, ver = parse_grader(ref)
    return GRADERS[name][ver]
