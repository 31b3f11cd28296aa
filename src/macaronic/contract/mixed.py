"""The mixed suite: multi-turn conversations that cross roles, graded on routing and answers.

A conversation is 2-3 user turns, each with the role that should answer it and a cheap,
deterministic acceptance check on the answer:

  chat    the reply contains an expected word (a fact, or the assistant's name)
  coding  the reply defines the requested Python function (`def name(`)
  agent   the reply holds a well-formed tool call to the expected tool
  genui   the reply parses as a valid `{text_response, a2ui}` GenUI object

Families are whole conversation templates; each family belongs to one split for good (train,
dev or test), so test phrasings never appear in training. Pure data and checks: no models.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass



CAPITALS = [("France", "Paris"), ("Japan", "Tokyo"), ("Kenya", "Nairobi"), ("Peru", "Lima"),
            ("Norway", "Oslo"), ("Egypt", "Cairo"), ("Canada", "Ottawa"), ("Italy", "Rome")]
FUNCS = [("add_numbers", "returns the sum of two numbers a and b"),
         ("reverse_words", "reverses the order of the words in a sentence"),
         ("count_vowels", "counts the vowels in a string"),
         ("is_palindrome", "checks whether a string reads the same backwards"),
         ("celsius_to_fahrenheit", "converts a temperature from Celsius to Fahrenheit"),
         ("flatten_list", "flattens a list of lists into one list")]
PEOPLE = ["Dana Whitfield", "Omar Haddad", "Lena Fischer", "Ravi Menon", "Sofia Marquez"]
THINGS = ["dentist appointment", "team lunch", "budget review", "yoga class", "car service"]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]


@dataclass(frozen=True)
class Turn:
    text: str
    role: str
    expect: str  # chat: a word; coding: a function name; agent: a tool name; genui: ""


@dataclass(frozen=True)
class MixedTask:
    id: str
    family: str
    split: str
    turns: tuple[Turn, ...]

    def prompt_text(self) -> str:
        return "\n".join(t.text for t in self.turns)


def _chat_capital(rng):
    country, city = rng.choice(CAPITALS)
    return Turn(rng.choice([f"What is the capital of {country}?",
                            f"Quick question: which city is the capital of {country}?"]), "chat", city)


def _chat_identity(rng):
    return Turn(rng.choice(["By the way, who am I talking to?", "What is your name, assistant?",
                            "Tell me what you are."]), "chat", "Macaronic")


def _coding(rng):
    name, what = rng.choice(FUNCS)
    return Turn(rng.choice([f"Write a Python function named {name} that {what}.",
                            f"Can you code {name} in Python? It {what}."]), "coding", name)


def _coding_fix(rng):
    name, what = rng.choice(FUNCS)
    return Turn(f"My function {name} is broken. Rewrite {name} in Python so that it {what}.", "coding", name)


def _agent_reminder(rng):
    thing, day = rng.choice(THINGS), rng.choice(DAYS)
    return Turn(rng.choice([f"Add a reminder for my {thing} on {day}.",
                            f"Please remind me about the {thing} this {day}."]), "agent", "add_reminder")


def _agent_contact(rng):
    person = rng.choice(PEOPLE)
    return Turn(rng.choice([f"Look up the phone number of {person} in my contacts.",
                            f"Find {person} in my contacts for me."]), "agent", "search_contacts")


def _agent_event(rng):
    thing, day = rng.choice(THINGS), rng.choice(DAYS)
    return Turn(f"Put a {thing} on my calendar for {day} at 3pm.", "agent", "create_event")


def _genui_card(rng):
    city = rng.choice(CAPITALS)[1]
    return Turn(rng.choice([f"Show me a weather card for {city} with a refresh button.",
                            f"Render a small widget with the weather in {city}."]), "genui", "")


def _genui_form(rng):
    thing = rng.choice(THINGS)
    return Turn(f"Give me an interactive form to book a {thing}, with a date picker and a submit button.",
                "genui", "")


# family -> (split, turn builders in order)
FAMILIES: dict[str, tuple[str, tuple]] = {
    "capital_then_code": ("train", (_chat_capital, _coding)),
    "reminder_then_capital": ("train", (_agent_reminder, _chat_capital)),
    "card_then_code": ("train", (_genui_card, _coding)),
    "identity_contact_card": ("train", (_chat_identity, _agent_contact, _genui_card)),
    "code_then_event": ("train", (_coding, _agent_event)),
    "form_then_identity": ("dev", (_genui_form, _chat_identity)),
    "fix_then_reminder": ("dev", (_coding_fix, _agent_reminder)),
    "event_form_capital": ("test", (_agent_event, _genui_form, _chat_capital)),
    "fix_identity": ("test", (_coding_fix, _chat_identity)),
    "contact_then_fix": ("test", (_agent_contact, _coding_fix)),
}


def make_task(family: str, index: int, seed: int = 0) -> MixedTask:
    split, builders = FAMILIES[family]
    rng = random.Random(int(hashlib.sha256(f"mixed:{family}:{seed}:{index}".encode()).hexdigest()[:16], 16))
    return MixedTask(f"mixed-{family}-{seed}-{index}", family, split, tuple(b(rng) for b in builders))


def generate_tasks(split: str | None = None, per_family: int = 3, seed: int = 0) -> list[MixedTask]:
    return [make_task(f, i, seed) for f, (s, _) in FAMILIES.items() if split in (None, s)
            for i in range(per_family)]


def answer_ok(turn: Turn, reply: str) -> bool:
    """The per-turn acceptance check (see the module docstring)."""
    from macaronic.suites.registry import suite

    return suite(turn.role).turn_ok(turn.expect, reply)
