"""Training examples as chat messages, and their encoding into ids + a loss mask.

An example is a conversation whose last user message opens the *current turn*; the assistant
messages after it (tool calls, final reply) are the targets. Tool results inside the turn are
context, never targets. Earlier turns are history: no loss, and in `turn` mode no adapter (nor
on the current user message, for an adapter that activates at the assistant header).

`encode` renders with the base's chat template and finds each target span by rendering the
conversation up to that message (templates are prefix-stable: each message appends text), so
the mask is exact for any ChatML-like template. Knows nothing about models or optimizers.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from macaronic.engine.llm import TurnRule  # one turn rule for training and serving
from macaronic.engine.llm import user_marker_ids as user_marker  # the aLoRA invocation tokens


@dataclass(frozen=True)
class Example:
    messages: tuple[dict, ...]
    role: str = ""
    source: str = ""  # generator family or file, for manifests

    def to_dict(self) -> dict:
        return {"messages": list(self.messages), "role": self.role, "source": self.source}

    @classmethod
    def from_dict(cls, d: dict) -> "Example":
        if not isinstance(d, dict) or not isinstance(d.get("messages"), list) or not d["messages"]:
            raise ValueError("an example needs a non-empty 'messages' list")
        return cls(tuple(d["messages"]), d.get("role", ""), d.get("source", ""))


@dataclass(frozen=True)
class Encoded:
    ids: tuple[int, ...]
    labels: tuple[bool, ...]  # labels[i]: ids[i] is a target (predicted from position i - 1)
    turn_start: int  # first id of the latest user message's header: where a turn-mode adapter activates
    answer_start: int  # first id of the turn's first assistant header: where an `activation: "assistant"` one does
    meta: dict = field(default_factory=dict, compare=False, hash=False)

    @property
    def n_targets(self) -> int:
        return sum(self.labels)


def current_turn(messages) -> int:
    """Index of the last user message; the current turn is messages[i:]."""
    for i in range(len(messages) - 1, -1, -1):
        if messages[i]["role"] == "user":
            return i
    raise ValueError("an example needs a user message")


def _render(tokenizer, messages, gen: bool) -> list[int]:
    from macaronic.prompts import encode  # the same chat-template call as serving

    return encode(tokenizer, messages, add_generation_prompt=gen)


def encode(tokenizer, example: Example, max_len: int, rule: TurnRule | None = None) -> Encoded:
    """Ids and loss mask: targets are the assistant messages after the last user message, each
    through its end-of-turn token. Raises ValueError when the targets do not fit in max_len."""
    msgs = list(example.messages)
    t = current_turn(msgs)
    if not any(m["role"] == "assistant" for m in msgs[t + 1:]):
        raise ValueError("the current turn has no assistant message to learn")
    ids = _render(tokenizer, msgs, gen=False)
    labels = [False] * len(ids)
    eos = tokenizer.eos_token_id
    for i in range(t + 1, len(msgs)):
        if msgs[i]["role"] != "assistant":
            continue
        before = _render(tokenizer, msgs[:i], gen=True)
        through = _render(tokenizer, msgs[: i + 1], gen=False)
        if ids[: len(through)] != through or through[: len(before)] != before:
            raise ValueError("chat template is not prefix-stable; cannot mask targets")
        end = len(through)
        if eos in through[len(before):]:  # learn to stop, not the template's trailing newline
            end = len(before) + through[len(before):].index(eos) + 1
        for j in range(len(before), end):
            labels[j] = True
    rule = rule or TurnRule(tokenizer)
    if len(ids) > max_len:
        raise ValueError(f"example is {len(ids)} tokens, over max_len {max_len}")
    return Encoded(tuple(ids), tuple(labels), rule.start(ids), rule.answer_start(ids))


def encode_all(tokenizer, examples, max_len: int) -> tuple[list[Encoded], int]:
    """Encode what fits; returns (encoded, number dropped for length)."""
    rule = TurnRule(tokenizer)
    out, dropped = [], 0
    for ex in examples:
        try:
            out.append(encode(tokenizer, ex, max_len, rule))
        except ValueError as e:
            if "over max_len" not in str(e):
                raise
            dropped += 1
    return out, dropped


# ---- files and manifests ------------------------------------------------------------------

def write_jsonl(path: str | Path, examples) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        for ex in examples:
            f.write(json.dumps(ex.to_dict(), ensure_ascii=False, sort_keys=True) + "\n")
    return path


def read_jsonl(path: str | Path) -> list[Example]:
    """Examples from a JSONL file of {"messages": [...]} objects; every bad line is reported."""
    out, problems = [], []
    for n, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append(Example.from_dict(json.loads(line)))
        except (json.JSONDecodeError, ValueError) as e:
            problems.append(f"{path}:{n}: {e}")
    if problems:
        raise ValueError("bad training data:\n  " + "\n  ".join(problems[:20]))
    if not out:
        raise ValueError(f"{path}: no examples")
    return out


def manifest_hash(examples) -> str:
    """sha256 of the canonical JSON of every example, in order: the data's identity."""
    h = hashlib.sha256()
    for ex in examples:
        h.update(json.dumps(ex.to_dict(), ensure_ascii=False, sort_keys=True).encode() + b"\n")
    return h.hexdigest()
