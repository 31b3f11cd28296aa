"""Hand-written routing turns (handwritten.txt), parsed into routing examples.

The turns were typed one by one in 30 writers' voices (terse, chatty, typos, Spanish,
French/German, Portuguese/Italian/Dutch/Japanese/Chinese, pasted code and stack traces, UI asks
that name no component, tool asks that name no tool, injection attempts, multi-turn; office
rewrites, answers in exact formats, prose explanations, editing and translating pasted text): no
templates, no fills. Each writer is pinned to one split in the file, so the held-out part tests
voices never seen in training (the writer-level split; the template data splits by family).

Examples have the shape of macaronic.router.data ({"id", "messages", "label", "family", "split",
"group", "kind"}, plus "style" and "writer"). family = "hw/<writer>". kind is "hand" for a plain
turn, "injection" for a turn with an embedded routing instruction (its "twin" is the same turn
without it, also an example), "multiturn" for a turn after earlier turns. This module knows
nothing about models.
"""

from __future__ import annotations

import copy
import hashlib
from functools import lru_cache
from pathlib import Path

from macaronic.specialist import BUILTIN_NAMES
from macaronic.splits import SPLITS

DATA = Path(__file__).with_name("handwritten.txt")
ROLES = BUILTIN_NAMES  # the file labels turns with the built-in specialists only
SEP = " ¦ "


def _unescape(text: str) -> str:
    return text.strip().replace("\\n", "\n")


def _messages(spec: str, where: str) -> list[dict]:
    """'u: ... ¦ a[role]: ... ¦ u: ...' -> chat messages (assistants tagged with their adapter)."""
    out = []
    for part in spec.split(SEP):
        part = part.strip()
        if part.startswith("u:"):
            out.append({"role": "user", "content": _unescape(part[2:])})
        elif part.startswith("a[") and "]:" in part:
            role, text = part[2:].split("]:", 1)
            if role not in ROLES:
                raise ValueError(f"{where}: unknown assistant role {role!r}")
            out.append({"role": "assistant", "content": _unescape(text), "specialist": role})
        else:
            raise ValueError(f"{where}: a multi-turn part must start with 'u:' or 'a[role]:': {part[:40]!r}")
    if not out or out[-1]["role"] != "user":
        raise ValueError(f"{where}: a multi-turn example must end with a user turn")
    return out


def parse(text: str) -> list[dict]:
    """Examples from the file's text, in file order; every format error is reported at once."""
    examples, errors = [], []
    writer = split = style_default = None
    counter = 0
    for n, line in enumerate(text.splitlines(), 1):
        where = f"handwritten.txt:{n}"
        if not line.strip() or line.startswith("#"):
            continue
        if line.startswith("@writer "):
            head, _, who = line[len("@writer "):].partition("|")
            parts = head.split()
            if len(parts) != 2 or parts[1] not in SPLITS:
                errors.append(f"{where}: expected '@writer <id> <split> | <who>'")
                continue
            writer, split, style_default, counter = parts[0], parts[1], who.strip(), 0
            continue
        if writer is None:
            errors.append(f"{where}: a turn before any @writer line")
            continue
        tag, sep, body = line.partition("|")
        words = tag.split()
        if not sep or not words or words[0] not in ROLES or len(words) > 2:
            errors.append(f"{where}: expected '<role>[ <style>]| <text>'")
            continue
        label, style = words[0], (words[1] if len(words) == 2 else "plain")
        base = {"label": label, "family": f"hw/{writer}", "split": split, "writer": writer,
                "style": style}
        eid = f"hw/{writer}/{counter}"
        counter += 1
        try:
            if style == "inj":
                if SEP not in body:
                    raise ValueError(f"{where}: an injection line needs '<clean>{SEP}<injected>'")
                clean, injected = body.split(SEP, 1)
                examples.append({**base, "id": eid, "group": eid, "kind": "hand", "style": "inj-twin",
                                 "messages": [{"role": "user", "content": _unescape(clean)}]})
                examples.append({**base, "id": eid + "/inj", "group": eid + "/inj", "kind": "injection",
                                 "twin": eid, "messages": [{"role": "user", "content": _unescape(injected)}]})
            elif style == "multi":
                examples.append({**base, "id": eid, "group": eid, "kind": "multiturn",
                                 "messages": _messages(body, where)})
            else:
                if not body.strip():
                    raise ValueError(f"{where}: empty turn")
                examples.append({**base, "id": eid, "group": eid, "kind": "hand",
                                 "messages": [{"role": "user", "content": _unescape(body)}]})
        except ValueError as e:
            errors.append(str(e))
    if errors:
        raise ValueError("invalid hand-written routing data:\n" + "\n".join(f"  - {e}" for e in errors))
    return examples


@lru_cache(maxsize=1)
def _cached() -> tuple[dict, ...]:
    return tuple(parse(DATA.read_text(encoding="utf-8")))


def load_handwritten(split: str | None = None) -> list[dict]:
    """Fresh copies of the hand-written examples of one split (or all)."""
    if split is not None and split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; expected one of {SPLITS}")
    return [copy.deepcopy(e) for e in _cached() if split is None or e["split"] == split]


def data_hash() -> str:
    return hashlib.sha256(DATA.read_bytes()).hexdigest()


INTENTS = Path(__file__).with_name("handwritten_intents.txt")


def parse_intents(text: str, examples: list[dict]) -> dict[str, str]:
    """Example id -> "<role>.<intent>" for every hand-written example (an injection takes its
    twin's); every format error, unknown id, missing id or role mismatch is reported at once."""
    by_id = {e["id"]: e for e in examples}
    out, errors, role = {}, [], None
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line in ROLES:
            role = line
            continue
        for item in line.split(";"):
            parts = item.split()
            eid = f"hw/{parts[0]}" if len(parts) == 2 else None
            if role is None or eid is None:
                errors.append(f"handwritten_intents.txt:{n}: expected '<writer>/<n> <intent>' after a role line: {item.strip()!r}")
            elif eid not in by_id:
                errors.append(f"handwritten_intents.txt:{n}: no hand-written turn {parts[0]}")
            elif by_id[eid]["label"] != role:
                errors.append(f"handwritten_intents.txt:{n}: {parts[0]} is a {by_id[eid]['label']} turn, listed under {role}")
            elif eid in out:
                errors.append(f"handwritten_intents.txt:{n}: {parts[0]} listed twice")
            else:
                out[eid] = f"{role}.{parts[1]}"
    for e in examples:
        if e["kind"] == "injection":
            if e["twin"] in out:
                out[e["id"]] = out[e["twin"]]
        elif e["id"] not in out:
            errors.append(f"handwritten_intents.txt: no intent for {e['id'][3:]}")
    if errors:
        raise ValueError("invalid hand-written intents:\n" + "\n".join(f"  - {e}" for e in errors))
    return out


@lru_cache(maxsize=1)
def _intents() -> tuple[tuple[str, str], ...]:
    return tuple(parse_intents(INTENTS.read_text(encoding="utf-8"), list(_cached())).items())


def load_intents() -> dict[str, str]:
    """Example id -> its route at 40 routes ("<role>.<intent>"), labelled by hand."""
    return dict(_intents())
