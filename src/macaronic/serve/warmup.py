"""Start-up warm-up: what a server's first request would pay, paid before it listens.

Measured cold (SmolLM2-135M, `macaronic serve`, a busy 2-core box, 2026-12-04): a first GenUI card
waited 10-14 s for its first token and a first turn with the built-in tools 7-8 s (building the
tokenizer's grammar info, starting a grammar worker process, compiling), a first plain turn 0.6-1 s
(the system prompt's prefill, first use of the kernels, the router's state loaded); later ones
0.1-0.6 s. `macaronic bench --only first-request` measures it (docs/LOG.md has the figures).

`warm(mol)` runs short turns (two tokens each) through the served harness on a throwaway memory
(`MoL.scratch`: nothing lands in the store), in steps (`plan`):

- at once, so decode runs a mixed-adapter batch: one routed turn (the router's state and its forward
  on the base) and one turn forced to each other role (prefill and decode under each served
  adapter's LoRA slot; each role's system prompt left in the engine's prefix cache, where the first
  real turn reuses it);
- the card role's turn: a grammar worker started, the GenUI card grammar compiled and cached;
- a turn offered the built-in tools (what the web chat sends): their tool-call grammar compiled and
  cached (in the same worker: the second one starts when two compiles first run at once);
- a routed turn and a tools turn again, other text: the path of every later turn, most of the
  prompt found in the prefix cache.

With `--engine-only` each model id (the base, every adapter) gets one raw turn instead; with a
remote engine only the local router is warmed (the engine warms itself). A failed warm-up turn is
logged and reported, never fatal: the server still starts. `WarmServer` is uvicorn's server that
runs `warm` in its own event loop before it opens the socket, so nothing answers (not even
/health) until the warm-up is over. Knows the harness and uvicorn's start-up; nothing about HTTP
routes.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field

import uvicorn

log = logging.getLogger("macaronic.serve")

WARM_TOKENS = 2  # a prefill and one decode step
ROUTED = "Hello! What can you help me with?"
TOOLS = "What is on my calendar today?"  # names a built-in tool: the tools route (the agent) answers
CARD = "Show a small card with today's date."
AGAIN = "Thanks! And what is a good name for a cat?"
TOOLS_AGAIN = "Show my reminders for this week."


@dataclass
class Warmup:
    """What the warm-up did: /health reports it. `seconds` is None until it ran (or when off)."""

    enabled: bool = True
    seconds: float | None = None
    steps: dict[str, float] = field(default_factory=dict)  # what -> seconds
    turns: int = 0
    errors: list[str] = field(default_factory=list)

    def report(self) -> dict:
        if not self.enabled:
            return {"enabled": False}
        return {"enabled": True, "done": self.seconds is not None, "seconds": self.seconds,
                "steps": dict(self.steps), "turns": self.turns, "errors": list(self.errors)}

    def line(self) -> str:
        """The start-up log line."""
        steps = ", ".join(f"{k} {v:.1f} s" for k, v in self.steps.items())
        errs = f"; {len(self.errors)} turn(s) failed: {self.errors[0]}" if self.errors else ""
        return f"macaronic serve: warmed up in {self.seconds:.1f} s ({self.turns} turns; {steps}){errs}"


def plan(mol, engine_only: bool, builtin_tools: list[dict] | None) -> list[tuple[str, list[dict]]]:
    """The warm-up turns for this server, as steps run one after the other: (step name, the turns
    run at once in it as keyword arguments of `MoL.astream`)."""
    say = [{"role": "user", "content": ROUTED}]
    sampling = {"max_tokens": WARM_TOKENS, "temperature": 0}
    if engine_only:
        ids = [mol.backend.base()["id"], *mol.backend.adapters()]
        return [("turns", [dict(messages=say, model=m, sampling=sampling, raw=True) for m in ids])]
    card = mol.card_role()
    plain = [dict(messages=say, model=mol.config.public_name, sampling=sampling)]
    plain += [dict(messages=say, model=role, sampling=sampling) for role in mol.bundle.role_names if role != card]
    # Grammar steps one at a time: the first starts a grammar worker that the second then reuses (on
    # two busy cores, two workers starting at once took longer than one after the other).
    steps = [("turns", plain)]
    if card in mol.bundle.role_names:
        steps.append(("card grammar", [dict(messages=[{"role": "user", "content": CARD}], model=card,
                                            sampling=sampling)]))
    if builtin_tools:
        steps.append(("tools grammar", [dict(messages=[{"role": "user", "content": TOOLS}],
                                             model=mol.config.public_name, sampling=sampling,
                                             tools=builtin_tools)]))
    # Then the path of every later turn: most of the prompt found in the prefix cache, the rest prefilled
    again = [dict(messages=[{"role": "user", "content": AGAIN}], model=mol.config.public_name, sampling=sampling)]
    if builtin_tools:
        again.append(dict(messages=[{"role": "user", "content": TOOLS_AGAIN}], model=mol.config.public_name,
                          sampling=sampling, tools=builtin_tools))
    steps.append(("reuse", again))
    return steps


async def _turn(mol, kw: dict) -> None:
    async for _ in mol.astream(**kw):
        pass


async def warm(mol, engine_only: bool = False, builtin_tools: list[dict] | None = None,
               state: Warmup | None = None) -> Warmup:
    """Warm `mol`'s backend, router and grammar cache; fills and returns `state`."""
    state = state or Warmup()
    t0 = time.perf_counter()
    scratch = mol.scratch()
    if mol.backend.label != "local":  # a remote engine: only the router runs here
        if mol.router is not None and not engine_only:
            try:
                await scratch.route([{"role": "user", "content": ROUTED}])
                state.turns = 1
            except Exception as e:  # noqa: BLE001 - a warm-up never stops the server
                state.errors.append(f"route: {e}")
        state.steps["router"] = round(time.perf_counter() - t0, 2)
    else:
        t = time.perf_counter()
        await mol.backend.grammars()  # the tokenizer's grammar info, shared by every grammar below
        state.steps["grammar info"] = round(time.perf_counter() - t, 2)
        for name, kws in plan(scratch, engine_only, builtin_tools):
            t = time.perf_counter()
            done = await asyncio.gather(*(_turn(scratch, kw) for kw in kws), return_exceptions=True)
            for kw, r in zip(kws, done):
                if isinstance(r, BaseException):
                    state.errors.append(f"{kw['model']}{' with tools' if kw.get('tools') else ''}: {r}")
            state.turns += len(kws)
            state.steps[name] = round(time.perf_counter() - t, 2)
    state.seconds = round(time.perf_counter() - t0, 2)
    for e in state.errors:
        log.warning("warm-up turn failed: %s", e)
    return state


class WarmServer(uvicorn.Server):
    """uvicorn's server that awaits `warm()` (in the serving loop) and then `ready()` before it
    starts listening."""

    def __init__(self, config: uvicorn.Config, warm=None, ready=None):
        super().__init__(config)
        self.warm, self.ready = warm, ready

    async def startup(self, sockets=None) -> None:
        if self.warm is not None:
            await self.warm()
        if self.ready is not None:
            self.ready()
        await super().startup(sockets=sockets)
