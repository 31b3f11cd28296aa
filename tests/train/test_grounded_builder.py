"""`agent_grounded`: every other agent episode under a consistent tool renaming, read from the list."""

from __future__ import annotations

import random
import re

from macaronic.substrate.tools import openai_tools
from macaronic.train.builders import build, rename_in, tool_renaming

NAMES = [t["function"]["name"] for t in openai_tools()]


def listed(head: str) -> set[str]:
    return set(re.findall(r"^- (\w+)\(", head, flags=re.M))


def called(messages) -> list[str]:
    return [n for m in messages if m["role"] == "assistant" for n in re.findall(r'"name": "(\w+)"', m["content"])]


def test_renaming_is_a_bijection_and_moves_names():
    moved = 0
    for seed in range(20):
        r = tool_renaming(NAMES, random.Random(seed))
        assert sorted(r) == sorted(NAMES) and len(set(r.values())) == len(NAMES)
        moved += sum(a != b for a, b in r.items())
    assert moved > 100  # not the identity in disguise


def test_rename_in_replaces_whole_names_only():
    r = {"list_events": "show_meetings", "get_event": "fetch_meeting"}
    assert rename_in("ids from list_events; get_event(event_id); list_events_x", r) == \
        "ids from show_meetings; fetch_meeting(event_id); list_events_x"


def test_grounded_examples_call_only_listed_tools_and_keep_the_rest():
    grounded, plain = build("agent_grounded", 12, 3), build("agent", 12, 3)
    renamed = [g for g in grounded if g.source.endswith("+renamed")]
    assert len(renamed) == 6
    for g, p in zip(grounded, plain):
        head = g.messages[0]["content"]
        assert called(g.messages) and set(called(g.messages)) <= listed(head)
        assert [m["role"] for m in g.messages] == [m["role"] for m in p.messages]
        user = [m for m in g.messages if m["role"] == "user"]
        assert user == [m for m in p.messages if m["role"] == "user"]  # requests are untouched
        if g.source.endswith("+renamed"):
            assert listed(head) != set(NAMES) and len(listed(head)) == len(NAMES)
        else:
            assert g.messages == p.messages
    assert any(set(called(g.messages)) - set(NAMES) for g in renamed)
    assert build("agent_grounded", 12, 3) == grounded  # seeded
