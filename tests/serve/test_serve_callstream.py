"""CallStreamer: however the text is split into deltas, the prose and each call's name and
arguments come out exactly once, in order, with nothing of the call markup in the prose."""

from __future__ import annotations

import random

from macaronic.serve.callstream import CallDelta, CallStreamer

TEXT = ('Sure thing. <tool_call>{"name": "set_level", "arguments": {"level": "hi}gh"}}</tool_call>\n'
        '<tool_call>{"name": "mute", "arguments": {"on": true}}</tool_call>')


def replay(text: str, rng: random.Random):
    cs, items, i = CallStreamer(), [], 0
    while i < len(text):
        j = i + rng.randint(1, 7)
        items += cs.feed(text[i:j])
        i = j
    prose = "".join(x for x in items if isinstance(x, str))
    calls: dict[int, dict] = {}
    for x in items:
        if isinstance(x, CallDelta):
            c = calls.setdefault(x.index, {"name": None, "args": "", "id": None})
            c["name"], c["id"] = x.name or c["name"], x.id or c["id"]
            c["args"] += x.arguments
    return prose, calls, cs


def test_any_split_gives_the_same_prose_and_calls():
    for seed in range(300):
        prose, calls, cs = replay(TEXT, random.Random(seed))
        assert prose == "Sure thing. "
        assert [(c["name"], c["args"]) for c in calls.values()] == [
            ("set_level", '{"level": "hi}gh"}'), ("mute", '{"on": true}')]
        assert [c["id"] for c in calls.values()] == cs.ids and len(set(cs.ids)) == 2


def test_prose_with_angle_brackets_is_not_held_forever():
    prose, calls, _ = replay("a < b and <tool is not a call", random.Random(0))
    assert calls == {} and prose.startswith("a < b and ")
