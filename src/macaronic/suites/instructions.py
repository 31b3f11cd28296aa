"""A hand-written chat suite of checkable instructions (IFEval-style): each prompt
(`macaronic/data/chat_instructions.json`) was written by hand, one by one, and carries checks on
the reply: counts (words, sentences, bullets, numbered items, paragraphs, lines), case, how it
starts and ends, words it must or must not use, JSON with given keys, titles, placeholders,
highlights, a postscript, sections.

`grade(prompt, reply)` gives {passed (every check: IFEval's strict prompt-level accuracy),
checks: [bool per instruction]}. Knows nothing about models or serving.
"""

from __future__ import annotations

import json
import re
from importlib import resources


def _words(t: str) -> list[str]:
    return re.findall(r"[A-Za-z0-9#'’/.-]+", t)


def _sentences(t: str) -> int:
    t = re.sub(r"\b(e\.g|i\.e|etc|Mr|Mrs|Dr|St|vs)\.", r"\1", t.strip())
    return len([s for s in re.split(r"(?<=[.!?])[\"”')\]]*\s+", t) if s.strip()])


def _lines(t: str) -> list[str]:
    return [x for x in t.strip().splitlines() if x.strip()]


def _json(t: str):
    m = re.fullmatch(r"\s*```(?:json)?\s*(.*?)\s*```\s*", t, re.S)
    try:
        return json.loads(m.group(1) if m else t)
    except ValueError:
        return None


def _has(t: str, w: str) -> bool:
    if re.fullmatch(r"[\w' ]+", w):
        return re.search(r"(?<![\w])" + re.escape(w) + r"(?![\w])", t, re.I) is not None
    return w.lower() in t.lower()


CHECKS = {
    "words": lambda t, a: a.get("min", 0) <= len(_words(t)) <= a.get("max", 10**9),
    "sentences": lambda t, a: (_sentences(t) == a["n"]) if "n" in a else a.get("min", 0) <= _sentences(t) <= a.get("max", 10**9),
    "bullets": lambda t, a: len([x for x in _lines(t) if re.match(r"\s*[-*•]\s+\S", x)]) == a["n"],
    "numbered": lambda t, a: len([x for x in _lines(t) if re.match(r"\s*\d+[.)]\s+\S", x)]) == a["n"],
    "paragraphs": lambda t, a: len([p for p in re.split(r"\n\s*\n", t.strip()) if p.strip()]) == a["n"],
    "lines": lambda t, a: len(_lines(t)) == a["n"],
    "lowercase": lambda t, a: t.strip() != "" and t == t.lower(),
    "uppercase": lambda t, a: t.strip() != "" and t == t.upper(),
    "starts_with": lambda t, a: t.strip().lower().startswith(a["text"].lower()),
    "ends_with": lambda t, a: t.strip().rstrip("*_ ").lower().endswith(a["text"].lower()),
    "question_end": lambda t, a: t.strip().rstrip("*_\"” ").endswith("?"),
    "include": lambda t, a: all(_has(t, w) for w in a["words"]),
    "exclude": lambda t, a: not any(_has(t, w) for w in a["words"]),
    "no_letter": lambda t, a: a["letter"].lower() not in t.lower(),
    "no_commas": lambda t, a: "," not in t,
    "commas": lambda t, a: t.count(",") >= a["min"],
    "json": lambda t, a: isinstance(j := _json(t), dict) and all(k in j for k in a["keys"]),
    "title": lambda t, a: re.search(r"<<[^<>\n]+>>", t) is not None,
    "quoted": lambda t, a: len(s := t.strip()) > 1 and s[0] in "\"“" and s[-1] in "\"”",
    "postscript": lambda t, a: re.search(r"(^|\n)\s*" + re.escape(a["marker"]), t) is not None,
    "placeholders": lambda t, a: len(re.findall(r"\[[^\[\]\n]+\]", t)) >= a["min"],
    "highlights": lambda t, a: len(re.findall(r"\*[^*\n]+\*", t)) >= a["min"],
    "one_word": lambda t, a: len(_words(t.strip().strip(".!\"'"))) == 1,
    "sections": lambda t, a: len(re.findall(re.escape(a["marker"]) + r"\s*\d", t)) == a["n"],
    "line_prefixes": lambda t, a: bool(_lines(t)) and all(x.strip().startswith(tuple(a["prefixes"])) for x in _lines(t)),
}


SETS = {1: "data/chat_instructions.json",  # 104 prompts, written here one by one
        2: "data/chat_instructions_2.json"}  # 100 more, written blind on 2026-12-07 by a writer shown only the checks


def load(path=None, which: int = 1) -> list[dict]:
    """The prompts of set `which` (or the file at `path`): [{id, prompt, checks: [[name, args], ...]}];
    every check name must be known."""
    if not path and which not in SETS:
        raise ValueError(f"no instruction set {which}; have {sorted(SETS)}")
    text = path.read_text() if path else resources.files("macaronic").joinpath(SETS[which]).read_text()
    prompts = json.loads(text)["prompts"]
    bad = [(p["id"], c) for p in prompts for c, _ in p["checks"] if c not in CHECKS]
    if bad:
        raise ValueError(f"unknown checks {bad}")
    return prompts


def load_every() -> list[dict]:
    """Every set's prompts (what nothing may train on)."""
    return [p for which in sorted(SETS) for p in load(which=which)]


def grade(prompt: dict, reply: str) -> dict:
    results = [bool(CHECKS[name](reply, args)) for name, args in prompt["checks"]]
    return {"passed": all(results), "checks": results}
