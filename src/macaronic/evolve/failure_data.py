"""Failure-driven data: training episodes for the skill the agent's failure clusters point at.

Skill `lookup_then_act` (clusters act_without_lookup / wrong_state / no_call: the agent acts
without first looking up the fact the action needs). Episodes compose two tools the way the
held-out families do (a lookup, then a write that uses what it returned) but on compositions that
are in no split of any contract: calendar+reminders and commerce+notes (test composes
calendar+contacts and contacts+reminders; v5 dev composes contacts+notes and commerce+reminders).
Gold actions are replayed on a real substrate episode (`train.builders.agent_episode`), in the
served layout (successor.py's `failure_data` step trains on them, warm-started, with a replay).
Data only: knows nothing about training or the loop.
"""

from __future__ import annotations

import random

from macaronic.substrate.tasks import AgentTask, Family, NoCandidate, World, _pick, build_task


def event_to_reminder(rng: random.Random, w: World):
    ev = _pick(rng, [e for e in w.mine("events") if e["start"][:10] >= w.today.isoformat()], "future event")
    request = rng.choice((
        f"When is my '{ev['title']}'? Set a reminder 'Prepare for {ev['title']}' due that same day.",
        f"Add a reminder titled 'Prepare for {ev['title']}' on the day of that event (check the calendar).",
    ))
    return request, [("list_events", {"query": ev["title"]}),
                     ("add_reminder", {"title": f"Prepare for {ev['title']}", "due": ev["start"][:10]})], []


def order_to_note(rng: random.Random, w: World):
    o = _pick(rng, w.mine("orders", owner_field="customer"), "order")
    request = rng.choice((
        f"Look at my {o['item'].lower()} order and write a note titled '{o['item']} order' saying its status.",
        f"Save a note '{o['item']} order' whose text is the current status of that order.",
    ))
    return request, [("list_orders", {"query": o["item"]}),
                     ("create_note", {"title": f"{o['item']} order", "body": o["status"]})], [o["status"]]


SKILLS = {"lookup_then_act": (Family("event_to_reminder", "evolve", "calendar+reminders", event_to_reminder),
                              Family("order_to_note", "evolve", "commerce+notes", order_to_note))}


def make(fam: Family, seed: int) -> AgentTask:
    """`substrate.tasks.make_task` for a family outside the suite's table."""
    return build_task(fam, seed)


def examples(skill: str, n: int, seed: int = 0) -> list[dict]:
    fams = SKILLS[skill]
    out, s = [], 10_000 + seed
    while len(out) < n and s < 10_000 + seed + 50 * n:
        try:
            t = make(fams[len(out) % len(fams)], s)
        except NoCandidate:
            s += 1
            continue
        from macaronic.train.builders import agent_episode

        out.append(agent_episode(t).to_dict())
        s += 1
    return out
