"""The suite registry: for each role, where its tasks come from, what a task asks the model (its
first user message) and how a reply is graded. Training (SFT checks, dev scoring, GRPO rewards)
and the mixed suite read it instead of each keeping its own ladder of roles.

The task sources keep their own modules (chat and coding in `suites/`, agent episodes in
`substrate/tasks.py`, GenUI cards in `genui/tasks.py`); an entry adapts each to one shape:

- `generate(split, per_family, seed)`: the split's tasks (one signature for all four);
- `user(task)`: the task's user message;
- `grade(task, reply)`: a dict with at least `pass` (bool), plus the suite's own metrics;
- `reward(grade)`: a GRPO reward in [0, 1] from that dict;
- `dev(n, seed)`: the dev-split tasks the sanity checks score (spread over families);
- `rl_tasks(n, seed)`: fresh train-family instances for on-policy training (seeds from 1000);
- `turn_ok(expect, reply)`: the mixed suite's per-turn acceptance for this role;
- `max_new`: the token cap of a check reply;
- `hint(task)`: the reference answer a hinted retry shows (evolve's STaR-style collection), or None.

The contract's sealed kinds (`contract/suites.py`) run episodes and cards through the served
harness; they are the contract's, not this registry's. Knows nothing about engines or prompts
(the renderer, `macaronic.prompts`, builds every prompt from `user(task)`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Callable

from macaronic.specialist import BUILTIN, get, resolve

RL_SEED = 1000  # rl_tasks instances start here: never the indices SFT data or dev checks use


@dataclass(frozen=True)
class Suite:
    role: str
    max_new: int
    generate: Callable[[str | None, int, int], list]
    user: Callable[[Any], str]
    grade: Callable[[Any, str], dict]
    reward: Callable[[dict], float]
    dev: Callable[[int, int], list]
    rl_tasks: Callable[[int, int], list]
    turn_ok: Callable[[str, str], bool]
    hint: Callable[[Any], str | None] | None = None  # the reference answer a hinted retry shows (evolve)


def _spread(ts: list, n: int) -> list:
    return [ts[i] for i in range(0, len(ts), max(1, len(ts) // n))][:n]


def _train_instances(families: dict, make, n: int, seed: int) -> list:
    fams = [f for f, (s, _) in families.items() if s == "train"]
    return [make(fams[i % len(fams)], RL_SEED + i // len(fams), seed) for i in range(n)]


# ---- chat ----

def _chat_generate(split, per_family, seed):
    from macaronic.suites.chat import generate_tasks

    return generate_tasks(split, per_family, seed)


def _chat_grade(task, reply):
    from macaronic.suites.chat import grade

    g = grade(task, reply)
    return {"pass": g["passed"], "score": g["score"]}


def _chat_rl(n, seed):
    from macaronic.suites.chat import FAMILIES, make_task

    return _train_instances(FAMILIES, make_task, n, seed)


def _chat_hint(t):
    return getattr(t, "gold", None) or None


def _chat_turn_ok(expect, reply):
    return re.search(r"(?<!\w)" + re.escape(expect.lower()) + r"(?!\w)", reply.lower()) is not None


# ---- coding ----

def _coding_generate(split, per_family, seed):
    from macaronic.suites.coding import generate_tasks

    return generate_tasks(split, per_family, seed)


def _coding_grade(task, reply):
    from macaronic.suites.coding import grade

    g = grade(task, reply)
    return {"pass": g["passed"], "tests": g["tests_passed"] / g["tests_total"]}


def _coding_rl(n, seed):
    from macaronic.suites.coding import FAMILIES, make_task

    return _train_instances(FAMILIES, make_task, n, seed)


def _coding_hint(t):
    return t.reference_reply() if hasattr(t, "reference_reply") else None


def _coding_turn_ok(expect, reply):
    return re.search(r"def\s+" + re.escape(expect) + r"\s*\(", reply) is not None


# ---- agent ----

def _agent_generate(split, per_family, seed):
    from macaronic.substrate.tasks import generate_tasks

    return generate_tasks(split, n_per_family=per_family, base_seed=seed)


def _agent_calls(reply):
    from macaronic.substrate.toolcalls import parse_tool_calls

    p = parse_tool_calls(reply)
    return p, ([(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in p.tool_calls] if p.ok else [])


def _agent_grade(task, reply):
    """The first call against the gold first action."""
    _, calls = _agent_calls(reply)
    name, args = task.gold_actions[0]
    return {"pass": bool(calls) and calls[0] == (name, args), "parsed": bool(calls),
            "tool": bool(calls) and calls[0][0] == name}


def _agent_reward(g: dict) -> float:
    # The validity step matters: the shipped agent's greedy first call on fresh train instances
    # names the gold tool 1 time in 10 and is unparseable 8 times in 10, so gold-only rewards gave
    # GRPO groups with no signal.
    return 1.0 if g["pass"] else 0.5 if g["tool"] else 0.25 if g["parsed"] else 0.0


def _agent_rl(n, seed):
    from macaronic.substrate.tasks import generate_tasks

    return generate_tasks("train", n_per_family=max(1, n // 10 + 1), base_seed=RL_SEED + seed)[:n]


def _agent_hint(t):
    from macaronic.substrate.toolcalls import format_tool_call

    if not getattr(t, "gold_actions", None):
        return None
    return "the tool calls, in order: " + " then ".join(format_tool_call(n, a) for n, a in t.gold_actions)


def _agent_turn_ok(expect, reply):
    p, _ = _agent_calls(reply)
    return p.ok and any(c["function"]["name"] == expect for c in p.tool_calls)


# ---- genui ----

def _genui_generate(split, per_family, seed):
    from macaronic.genui.tasks import generate_tasks

    return generate_tasks(seed=seed, per_family=per_family, split=split)


def _genui_grade(task, reply):
    from macaronic.genui.grade import grade

    g = grade(task, reply)
    return {"pass": bool(g["l1_valid"]), "l2": g["l2_content"]}


def _genui_rl(n, seed):
    from macaronic.genui.tasks import FAMILIES, TEST_FAMILIES, make_task

    fams = [f for f in FAMILIES if f not in TEST_FAMILIES]
    return [t for t in (make_task(fams[i % len(fams)], RL_SEED + i // len(fams), seed) for i in range(2 * n))
            if t.split == "train"][:n]


def _genui_turn_ok(expect, reply):
    from macaronic.genui.output import parse_genui_output

    return parse_genui_output(reply).valid


CHAT = Suite("chat", 96, _chat_generate, lambda t: t.prompt, _chat_grade, lambda g: g["score"],
             lambda n, seed: _chat_generate("dev", -(-n // 3), seed)[:n], _chat_rl, _chat_turn_ok, _chat_hint)
CODING = Suite("coding", 200, _coding_generate, lambda t: t.prompt, _coding_grade, lambda g: g["tests"],
               lambda n, seed: _spread(_coding_generate("dev", -(-n // 3), seed), n), _coding_rl, _coding_turn_ok,
               _coding_hint)
AGENT = Suite("agent", 160, _agent_generate, lambda t: t.request, _agent_grade, _agent_reward,
              lambda n, seed: _agent_generate("dev", -(-n // 2), seed)[:n], _agent_rl, _agent_turn_ok, _agent_hint)
GENUI = Suite("genui", 800, _genui_generate, lambda t: t.user_message(), _genui_grade,
              lambda g: 0.5 * g["pass"] + 0.5 * g["l2"],
              lambda n, seed: _genui_generate("dev", 10, seed)[:n], _genui_rl, _genui_turn_ok)

# name -> suite, for every built-in specialist, by the module:attribute its registry entry names (the
# entries name this module's constants, defined above, so resolving them here is safe mid-import)
SUITES: dict[str, Suite] = {s.name: resolve(s.suite) for s in BUILTIN if s.suite}


def suite(role: str) -> Suite:
    """The suite of a specialist, as its registry entry names it."""
    try:
        return SUITES[role]
    except KeyError:
        pass
    try:
        ref = get(role).suite
    except (KeyError, ValueError):
        ref = None
    if ref is None:
        raise ValueError(f"no suite for role {role!r}; have {sorted(SUITES)}")
    return resolve(ref)
