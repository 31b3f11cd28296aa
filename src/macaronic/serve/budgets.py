"""What one request may cost the server: the budgets on client-written schemas and grammars.

A tool list or a `response_format` is code the server runs: jsonschema walks it, xgrammar compiles
it, and a `pattern` is a regular expression matched against model output. `Budgets` bounds each
(tools per request, schema bytes, nodes and depth, the time to build and compile a grammar, the
time one `pattern` may take to match). `check_request(...)` measures a request against the static
ones before any other work, without recursion, and refuses any `$ref` that is not local (`#...`),
so the server never opens a URL or a file a client names. A refusal is a 400 whose message names
the budget and the `macaronic serve` flag that sets it.

`off_loop(fn, budget_s=...)` runs slow work (schema checks, grammar builds and compiles) off the
event loop (each kind of work on its own threads, `pools.py`) and gives up when the budget passes or
the client goes away. With `stoppable` (what
`macaronic serve` sets) `fn` runs in a worker process (`serve/stoppable.py`) that is killed then, so
an abandoned compile stops using the CPU at once; otherwise (library use, the evaluator) on a small
thread pool, where an abandoned compile runs on in its thread (Python cannot stop one) and its
result is dropped, the pool's size bounding how many can. Knows JSON Schema's shape; nothing about
HTTP, engines or routing.
"""

from __future__ import annotations

import asyncio
import functools
import json
import threading
from dataclasses import dataclass
from typing import Any, Callable, TypeVar

T = TypeVar("T")
REF_KEYS = ("$ref", "$dynamicRef", "$recursiveRef")


@dataclass(frozen=True)
class Budgets:
    max_tools: int = 128  # OpenAI's own limit
    max_schema_bytes: int = 64 * 1024  # one tool's parameters or one response_format schema, as JSON
    max_total_schema_bytes: int = 8 * 64 * 1024  # all schemas of one request together
    max_schema_nodes: int = 10_000  # schema objects and lists of one request together
    max_schema_depth: int = 32
    compile_s: float = 10.0  # each of: checking a request, building its grammar, compiling it
    regex_s: float = 0.1  # one `pattern` matched against one decoded value
    stoppable: bool = False  # grammar builds and compiles in worker processes that are killed at the budget


FLAGS = {"max_tools": "--max-tools", "max_schema_bytes": "--max-schema-bytes",
         "max_total_schema_bytes": "--max-schema-bytes", "max_schema_nodes": "--max-schema-nodes",
         "max_schema_depth": "--max-schema-depth", "compile_s": "--compile-budget-s", "regex_s": "--regex-budget-s"}


class BudgetError(ValueError):
    """A request over a budget (`budget` names it) or with a remote reference; the server answers 400."""

    def __init__(self, message: str, param: str | None = None, budget: str | None = None):
        super().__init__(message + (f" (the server's {FLAGS[budget]})" if budget else ""))
        self.param, self.budget = param, budget
        self.code = "budget_exceeded" if budget else "invalid_schema"


def check_request(tools: Any, response_format: Any, b: Budgets) -> None:
    """Tools and `response_format` against the static budgets; BudgetError on the first excess."""
    if isinstance(tools, list) and len(tools) > b.max_tools:
        raise BudgetError(f"tools: {len(tools)} tools; this server takes at most {b.max_tools} per request",
                          "tools", "max_tools")
    state = {"nodes": 0, "bytes": 0}
    for i, t in enumerate(tools if isinstance(tools, list) else []):
        fn = t.get("function") if isinstance(t, dict) and isinstance(t.get("function"), dict) else t
        if isinstance(fn, dict) and fn.get("parameters") is not None:
            schema(fn["parameters"], f"tools[{i}].function.parameters", b, state)
    if isinstance(response_format, dict):
        body = response_format.get("json_schema", response_format)
        if isinstance(body, dict) and body.get("schema") is not None:
            schema(body["schema"], "response_format.json_schema.schema", b, state)


def schema(value: Any, where: str, b: Budgets, state: dict | None = None) -> None:
    """One schema: size, nodes, depth (iteratively, stopping at the first excess) and local refs only."""
    state = state if state is not None else {"nodes": 0, "bytes": 0}
    stack: list[tuple[Any, str, int]] = [(value, "", 0)]
    size = 0
    while stack:
        v, path, d = stack.pop()
        if d > b.max_schema_depth:
            raise BudgetError(f"{where}: schema nested deeper than {b.max_schema_depth} levels at {_at(path)}",
                              where, "max_schema_depth")
        if isinstance(v, dict):
            state["nodes"] += 1
            size += 2
            for k, x in v.items():
                size += len(k) + 4
                if k in REF_KEYS and isinstance(x, str) and not x.startswith("#"):
                    raise BudgetError(f"{where}: {k} {_short(x)} at {_at(path)} is not local; only references "
                                      "into the same schema (\"#...\") are allowed, nothing is fetched", where)
                stack.append((x, f"{path}/{k}", d + 1))
        elif isinstance(v, list):
            state["nodes"] += 1
            size += 2
            stack.extend((x, f"{path}/{j}", d + 1) for j, x in enumerate(v))
        else:
            size += len(v) + 2 if isinstance(v, str) else 8
        if state["nodes"] > b.max_schema_nodes:
            raise BudgetError(f"{where}: the request's schemas have more than {b.max_schema_nodes} objects and "
                              "lists together", where, "max_schema_nodes")
        if size > b.max_schema_bytes:
            raise BudgetError(f"{where} is larger than {b.max_schema_bytes} bytes", where, "max_schema_bytes")
    state["bytes"] += size
    if state["bytes"] > b.max_total_schema_bytes:
        raise BudgetError(f"{where}: the request's schemas together are larger than {b.max_total_schema_bytes} "
                          "bytes", where, "max_total_schema_bytes")


# ---- slow work off the event loop -----------------------------------------------------------

_workers = None
_workers_lock = threading.Lock()


def workers():
    """The server's stoppable grammar workers (started on first use)."""
    global _workers
    from macaronic.serve.stoppable import Stoppable

    with _workers_lock:
        if _workers is None:
            _workers = Stoppable(size=2, warm=("macaronic.serve.structured", "xgrammar"))
        return _workers


async def off_loop(fn: Callable[..., T], *args, budget_s: float | None = None,
                   what: str = "compiling the grammar", stoppable: bool = False, pool=None) -> T:
    """`fn(*args)` off the event loop; BudgetError once `budget_s` passes. A cancelled caller (the
    client went away) abandons it too. `stoppable`: in a worker process, killed then (`fn` and its
    arguments must pickle), waited on from `pools.GRAMMAR`; else on `pool` (default `pools.CHECKS`,
    at most two at once: an abandoned compile keeps its thread until it ends), where it runs on
    unobserved."""
    from macaronic.serve import pools

    loop = asyncio.get_running_loop()
    if stoppable:
        from macaronic.serve.stoppable import Stopped

        cancel = threading.Event()
        try:
            return await loop.run_in_executor(pools.GRAMMAR, workers().call, functools.partial(fn, *args), budget_s, cancel)
        except asyncio.CancelledError:
            cancel.set()  # the worker is killed within 50 ms
            raise
        except Stopped:
            raise BudgetError(f"{what} took longer than its budget of {budget_s:g} s; it was stopped", None,
                              "compile_s") from None
    fut = loop.run_in_executor(pool or pools.CHECKS, fn, *args)
    try:
        return await asyncio.wait_for(fut, budget_s)
    except asyncio.TimeoutError:
        raise BudgetError(f"{what} took longer than its budget of {budget_s:g} s", None, "compile_s") from None


def _at(path: str) -> str:
    return _short(path or "/", 80)


def _short(s: str, n: int = 80) -> str:
    r = json.dumps(s, ensure_ascii=False)
    return r if len(r) <= n else r[:n - 4] + '..."'
