"""Failure-driven data: training episodes for the skill the agent's failure clusters point at.

Skill `lookup_then_act` (clusters act_without_lookup / wrong_state / no_call: the agent acts
without first looking up the fact the action needs, or looks it up and then answers instead of
acting). Episodes compose two tools the way the held-out families do (a lookup, then a write that
carries a value the lookup returned into another tool) but on compositions that are in no split of
any contract: calendar+reminders, commerce+notes, calendar+notes, reminders+calendar and
commerce+calendar (test composes calendar+contacts and contacts+reminders; v5 dev composes
contacts+notes and commerce+reminders).
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


def event_to_note(rng: random.Random, w: World):
    ev = _pick(rng, [e for e in w.mine("events") if e["start"][:10] >= w.today.isoformat()], "future event")
    request = rng.choice((
        f"Find when my '{ev['title']}' starts and save a note titled '{ev['title']} start' with that time.",
        f"Make a note called '{ev['title']} start' whose text is the start time of that event (look it up).",
    ))
    return request, [("list_events", {"query": ev["title"]}),
                     ("create_note", {"title": f"{ev['title']} start", "body": ev["start"]})], []


def reminder_to_event(rng: random.Random, w: World):
    r = _pick(rng, [r for r in w.mine("reminders") if r.get("due") and not r.get("done")], "open reminder with a due date")
    request = rng.choice((
        f"Block 09:00 to 10:00 on my calendar for '{r['title']}' on the day that reminder is due.",
        f"Check when '{r['title']}' is due and put an event with that title on that day, 09:00-10:00.",
    ))
    day = r["due"][:10]
    return request, [("list_reminders", {"query": r["title"]}),
                     ("create_event", {"title": r["title"], "start": f"{day}T09:00", "end": f"{day}T10:00"})], []


def order_to_event(rng: random.Random, w: World):
    o = _pick(rng, [o for o in w.mine("orders", owner_field="customer") if o.get("delivered_on")], "delivered order")
    request = rng.choice((
        f"Put 'Unpack {o['item'].lower()}' on my calendar from 18:00 to 18:30 on the day that order was delivered.",
        f"Look up when my {o['item'].lower()} order arrived and add an event 'Unpack {o['item'].lower()}' that "
        f"day, 18:00-18:30.",
    ))
    day = o["delivered_on"][:10]
    return request, [("list_orders", {"query": o["item"]}),
                     ("create_event", {"title": f"Unpack {o['item'].lower()}", "start": f"{day}T18:00",
                                       "end": f"{day}T18:30"})], []


SKILLS = {"lookup_then_act": (Family("event_to_reminder", "evolve", "calendar+reminders", event_to_reminder),
                              Family("order_to_note", "evolve", "commerce+notes", order_to_note),
                              Family("event_to_note", "evolve", "calendar+notes", event_to_note),
                              Family("reminder_to_event", "evolve", "reminders+calendar", reminder_to_event),
                              Family("order_to_event", "evolve", "commerce+calendar", order_to_event))}


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
