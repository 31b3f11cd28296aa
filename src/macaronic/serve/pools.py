"""The server's threads for work kept off the event loop, one pool per kind of work.

A pool shared by every kind lets one kind's storm queue the others: six requests whose grammars
compile (each waiting on a grammar worker process for up to its budget) filled asyncio's default
pool, and the router's forwards waited behind them for 41 s. Each kind has its own threads here, so
a compile storm never delays routing or the rendering of another client's prompt:

- `TURN`: what every turn needs and that is quick: routing, rendering and tokenizing the prompt,
  checking a request that carries no schemas.
- `CHECKS`: checking client-written schemas (jsonschema walks them) and, outside `macaronic serve`,
  building and compiling grammars in threads.
- `GRAMMAR`: threads that wait on the grammar worker processes (`stoppable.py`); they hold no CPU.

Knows threads; nothing about what runs on them.
"""

from __future__ import annotations

import asyncio
import functools
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, TypeVar

T = TypeVar("T")

TURN = ThreadPoolExecutor(max_workers=4, thread_name_prefix="macaronic-turn")
CHECKS = ThreadPoolExecutor(max_workers=2, thread_name_prefix="macaronic-checks")
GRAMMAR = ThreadPoolExecutor(max_workers=32, thread_name_prefix="macaronic-grammar-wait")


async def run(pool: ThreadPoolExecutor, fn: Callable[..., T], *args, **kw) -> T:
    """`fn(*args, **kw)` on `pool`, awaited from the event loop."""
    return await asyncio.get_running_loop().run_in_executor(pool, functools.partial(fn, *args, **kw))
