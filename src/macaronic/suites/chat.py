"""Chat suite: seeded conversational tasks with checkable answers, and their grader.

Families: identity (who the assistant is and how it works), facts from small closed tables
(capitals, arithmetic, unit conversions, word counts), and conciseness under an explicit limit.
Each task carries `must` (phrases that must appear, case-insensitive, any of each group),
`must_not` (phrases that must not appear) and `max_words`. `gold` is a reference reply used as
the SFT target for train families. Every family belongs to one split for good.

    generate_tasks(split, n_per_family=10, seed=0, base=None) -> list[ChatTask]
    grade(task, reply) -> {"task_id", "passed", "score", "checks": {...}}

The identity families name the base the assistant runs on (`base`: a registered base name,
engine/bases.py). `generate_tasks` (the contract's and the suite tools' tasks) names SmolLM2-135M
unless told otherwise, whatever the default base: the sealed manifests of contracts v4 and v5 hash
that wording (the test family's checks name no base). Training data (`make_task` with the base being
trained) names the base it trains for; every other family is the same for every base.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from macaronic.engine.bases import SMALL_BASE
from macaronic.splits import SPLITS


def identity(base: str | None = None) -> str:
    from macaronic.engine.bases import get

    return (f"I am Macaronic, a Mixture-of-LoRA assistant running on {get(base).display} with four specialists: "
            "chat, agent, coding and genui.")


TASKS_BASE = SMALL_BASE  # what generate_tasks' identity families name (pinned by tests/engine/test_bases.py: sealed manifests)
ROUTING = "A router picks exactly one specialist adapter for each user turn."


@dataclass(frozen=True)
class ChatTask:
    id: str
    family: str
    split: str
    prompt: str
    gold: str
    must: tuple[tuple[str, ...], ...] = ()  # each group: at least one phrase must appear
    must_not: tuple[str, ...] = ()
    max_words: int = 80


CAPITALS = {"France": "Paris", "Japan": "Tokyo", "Kenya": "Nairobi", "Canada": "Ottawa", "Peru": "Lima",
            "Norway": "Oslo", "Egypt": "Cairo", "Portugal": "Lisbon", "Australia": "Canberra",
            "Germany": "Berlin", "Mexico": "Mexico City", "India": "New Delhi", "Spain": "Madrid",
            "Italy": "Rome", "Chile": "Santiago", "Georgia": "Tbilisi"}
NOT_ME = ("I am ChatGPT", "I am SmolLM", "trained by OpenAI", "I am Claude", "I am Gemini")


def who(rng, base=None):
    q = rng.choice(("Who are you?", "What are you?", "Introduce yourself.", "What's your name?",
                    "Tell me about yourself in one sentence.", "Are you ChatGPT?", "Which model am I talking to?"))
    return q, identity(base), (("Macaronic",),), NOT_ME, 60


def how_work(rng, base=None):
    q = rng.choice(("How do you work?", "How are you built?", "What is under the hood?",
                    "Explain your architecture briefly.", "How do you decide how to answer me?"))
    gold = (f"{identity(base)} {ROUTING} The base model stays frozen; each specialist is a small LoRA adapter "
            "trained for its kind of request.")
    return q, gold, (("Macaronic",), ("LoRA", "adapter", "specialist"), ("router", "route")), NOT_ME, 90


def specialists(rng):
    q = rng.choice(("Which specialists do you have?", "What adapters do you use?", "What can you do?",
                    "List your specialists.", "What are your skills?"))
    gold = ("I have four specialists: chat for conversation and general knowledge, agent for acting on "
            "your calendar, reminders, contacts, notes and orders through tools, coding for code of every "
            "kind, and genui for interactive cards and widgets.")
    return q, gold, (("chat",), ("agent",), ("coding",), ("genui",)), NOT_ME, 90


def base_model(rng, base=None):
    from macaronic.engine.bases import get

    q = rng.choice(("What base model do you run on?", "Which language model is underneath you?",
                    "How big is your base model?", "What model powers you?"))
    return q, get(base).identity, get(base).identity_must, ("I am ChatGPT",), 60


def capital(rng):
    country = rng.choice(sorted(CAPITALS))
    q = rng.choice((f"What is the capital of {country}?", f"Capital of {country}?",
                    f"Which city is the capital of {country}?"))
    return q, f"The capital of {country} is {CAPITALS[country]}.", ((CAPITALS[country],),), (), 30


def add(rng):
    a, b = rng.randrange(2, 500), rng.randrange(2, 500)
    q = rng.choice((f"What is {a} + {b}?", f"Add {a} and {b}.", f"What's the sum of {a} and {b}?"))
    return q, f"{a} + {b} = {a + b}.", ((str(a + b),),), (), 30


def multiply(rng):
    a, b = rng.randrange(2, 30), rng.randrange(2, 30)
    q = rng.choice((f"What is {a} times {b}?", f"Multiply {a} by {b}.", f"What's {a} x {b}?"))
    return q, f"{a} × {b} = {a * b}.", ((str(a * b),),), (), 30


def km_to_m(rng):
    km = rng.randrange(1, 50)
    q = rng.choice((f"How many meters are in {km} kilometers?", f"Convert {km} km to meters."))
    return q, f"{km} km is {km * 1000} meters.", ((str(km * 1000), f"{km * 1000:,}"),), (), 30


def hours_to_minutes(rng):
    h = rng.randrange(1, 24)
    q = rng.choice((f"How many minutes are in {h} hours?", f"Convert {h} hours to minutes."))
    return q, f"{h} hours is {h * 60} minutes.", ((str(h * 60),),), (), 30


def one_word(rng):
    country = rng.choice(sorted(CAPITALS))
    q = f"Answer with one word only: what is the capital of {country}?"
    cap = CAPITALS[country]
    return q, cap + ".", ((cap,),), (), len(cap.split()) + 1


def greeting(rng):
    q = rng.choice(("Hi!", "Hello there.", "Good morning!", "Hey, how are you?"))
    return q, "Hello! I'm Macaronic. How can I help you today?", (("hello", "hi", "help"),), NOT_ME, 30


def thanks(rng):
    q = rng.choice(("Thanks!", "Thank you, that helped.", "Great, thanks a lot."))
    return q, "You're welcome! Let me know if there is anything else.", (("welcome", "glad"),), (), 30


FAMILIES = {
    "who": ("train", who), "specialists": ("train", specialists), "capital": ("train", capital),
    "add": ("train", add), "km_to_m": ("train", km_to_m), "greeting": ("train", greeting),
    "base_model": ("dev", base_model), "multiply": ("dev", multiply), "thanks": ("dev", thanks),
    "how_work": ("test", how_work), "hours_to_minutes": ("test", hours_to_minutes), "one_word": ("test", one_word),
}


BASE_FAMILIES = ("who", "how_work", "base_model")  # the families whose gold or checks name the base


def make_task(family: str, index: int, seed: int = 0, base: str | None = None) -> ChatTask:
    split, fn = FAMILIES[family]
    rng = random.Random(f"chat:{family}:{seed}:{index}")
    q, gold, must, must_not, max_words = fn(rng, base) if family in BASE_FAMILIES else fn(rng)
    return ChatTask(f"chat-{family}-{seed}-{index}", family, split, q, gold, tuple(must), tuple(must_not), max_words)


def generate_tasks(split: str | None = None, n_per_family: int = 10, seed: int = 0,
                   base: str | None = None) -> list[ChatTask]:
    if split is not None and split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; expected one of {SPLITS}")
    base = base or TASKS_BASE
    return [make_task(f, i, seed, base) for f, (s, _) in FAMILIES.items() if split in (None, s)
            for i in range(n_per_family)]


def _has(phrase: str, text: str) -> bool:
    return re.search(r"(?<!\w)" + re.escape(phrase.lower()) + r"(?!\w)", text.lower()) is not None


def grade(task: ChatTask, reply: str) -> dict:
    """All `must` groups present, no `must_not` phrase, at most `max_words` words."""
    reply = reply or ""
    must = [any(_has(p, reply) for p in group) for group in task.must]
    bad = [p for p in task.must_not if _has(p, reply)]
    words = len(reply.split())
    checks = {"must": must, "must_not_found": bad, "words": words, "concise": 0 < words <= task.max_words}
    parts = must + [not bad, checks["concise"]]
    return {"task_id": task.id, "passed": all(parts), "score": sum(parts) / len(parts), "checks": checks}
