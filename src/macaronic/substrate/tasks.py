"""Agent-suite tasks: seeded template families over the substrate, their fixed splits, the
grader and pass^k.

A task is an initial state spec, a user request (drawn from several phrasings), the gold actions
that fulfil it and the facts the final reply must state. `grade` follows the state-hash rule:
the final state must equal the state produced by replaying the gold actions on the same initial
state, and every required fact must appear in the reply.

Each family has one split for good: `train`, `dev`, or `test`. Test families are only marked
here; sealing them from training is the contract's job, not this module's.
"""

from __future__ import annotations

import datetime as dt
import random
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from math import comb

from macaronic.substrate.episode import Episode, EpisodeConfig
from macaronic.substrate.replay import expected_hash
from macaronic.substrate.state import DEFAULT_ACTOR, StateSpec, dump, state_hash



@dataclass(frozen=True)
class AgentTask:
    id: str
    family: str
    split: str
    seed: int
    state: StateSpec
    request: str
    gold_actions: tuple[tuple[str, dict], ...]
    required_facts: tuple[str, ...] = ()
    actor: str = DEFAULT_ACTOR
    # How many consecutive gold actions one assistant message makes together (independent calls in
    # one step); empty: one call a message. Training episodes only; grading reads the end state.
    groups: tuple[int, ...] = ()

    def start(self, config: EpisodeConfig | None = None) -> Episode:
        """A fresh episode on this task's initial state."""
        return Episode(self.state, actor=self.actor, config=config)

    def to_dict(self) -> dict:
        return {"id": self.id, "family": self.family, "split": self.split, "seed": self.seed,
                "state": self.state.to_dict(), "request": self.request,
                "gold_actions": [[t, a] for t, a in self.gold_actions],
                "required_facts": list(self.required_facts), "actor": self.actor,
                **({"groups": list(self.groups)} if self.groups else {})}

    @classmethod
    def from_dict(cls, d: dict) -> AgentTask:
        return cls(id=d["id"], family=d["family"], split=d["split"], seed=int(d["seed"]),
                   state=StateSpec.from_dict(d["state"]), request=d["request"],
                   gold_actions=tuple((t, a) for t, a in d["gold_actions"]),
                   required_facts=tuple(d.get("required_facts", ())), actor=d.get("actor", DEFAULT_ACTOR),
                   groups=tuple(d.get("groups", ())))


class NoCandidate(Exception):
    """The seeded state has no row this family can build a task on."""


@dataclass(frozen=True)
class World:
    """The initial state as plain rows, plus the fields builders need."""

    rows: dict[str, list[dict]]
    today: dt.date
    actor: str

    def mine(self, table: str, owner_field: str = "owner", **eq) -> list[dict]:
        return [r for r in self.rows[table] if r[owner_field] == self.actor
                and all(r.get(k) == v for k, v in eq.items())]


Built = tuple[str, list[tuple[str, dict]], list[str]]  # request, gold actions, required facts


@dataclass(frozen=True)
class Family:
    name: str
    split: str
    domain: str
    build: Callable[[random.Random, World], Built] = field(repr=False)
    groups: tuple[int, ...] = ()  # its tasks' `AgentTask.groups` (calls made together); empty: one a step


# ---- phrasing helpers --------------------------------------------------------------------

def _day(rng: random.Random, d: dt.date) -> str:
    return rng.choice((d.isoformat(), f"{d.strftime('%A')} {d.isoformat()}"))


def _pick(rng: random.Random, rows: list[dict], what: str) -> dict:
    if not rows:
        raise NoCandidate(what)
    return rng.choice(rows)


def _hm(t: str) -> str:
    return t[11:16]


NEW_EVENTS = ("Call with the landlord", "Dinner with Mia", "Bike repair", "Project kickoff",
              "Study session", "Flu shot", "Concert tickets pickup", "Team lunch",
              "Passport photo", "Interview prep", "Swim lesson", "Garden centre visit")
NEW_REMINDERS = ("Buy groceries", "Call grandma", "Check tire pressure", "Pay parking ticket",
                 "Renew gym membership", "Print boarding pass", "Defrost the freezer",
                 "Book a table for Friday", "Email the landlord", "Sign permission slip")
NEW_NOTES = (("Weekend plan", "Farmers market on Saturday, hike on Sunday."),
             ("Talk ideas", "Open with the latency chart, end with a live demo."),
             ("Things to fix", "Squeaky door, dripping tap, loose shelf."),
             ("Gift list", "Scarf for Ana, a puzzle for Ben."),
             ("Car details", "Plate KX-4471, next service at 60000 km."))


# ---- families ----------------------------------------------------------------------------

def calendar_create(rng: random.Random, w: World) -> Built:
    title = rng.choice(NEW_EVENTS)
    day = w.today + dt.timedelta(days=rng.randrange(1, 15))
    hour, mins = rng.randrange(8, 19), rng.choice((0, 30))
    start = dt.datetime.combine(day, dt.time(hour, mins))
    end = start + dt.timedelta(minutes=rng.choice((30, 60, 90, 120)))
    s, e = start.strftime("%H:%M"), end.strftime("%H:%M")
    request = rng.choice((
        f"Put '{title}' on my calendar on {_day(rng, day)} from {s} to {e}.",
        f"Please schedule an event called '{title}' for {_day(rng, day)}, {s}-{e}.",
        f"Can you add '{title}' to my calendar? It's {_day(rng, day)} {s} to {e}.",
        f"Block {s} to {e} on {_day(rng, day)} for '{title}'.",
    ))
    args = {"title": title, "start": start.strftime("%Y-%m-%dT%H:%M"), "end": end.strftime("%Y-%m-%dT%H:%M")}
    return request, [("create_event", args)], []


def calendar_reschedule(rng: random.Random, w: World) -> Built:
    ev = _pick(rng, [e for e in w.mine("events") if e["start"][:10] >= w.today.isoformat()], "future event")
    old_s, old_e = (dt.datetime.strptime(ev[k], "%Y-%m-%dT%H:%M") for k in ("start", "end"))
    new_s = dt.datetime.combine(old_s.date() + dt.timedelta(days=rng.randrange(1, 8)),
                                dt.time(rng.randrange(8, 18), rng.choice((0, 30))))
    new_e = new_s + (old_e - old_s)
    s, e = new_s.strftime("%H:%M"), new_e.strftime("%H:%M")
    request = rng.choice((
        f"Move my '{ev['title']}' to {_day(rng, new_s.date())}, {s} to {e}.",
        f"Something came up. Can you reschedule '{ev['title']}' to {_day(rng, new_s.date())} from {s} to {e}?",
        f"Please push '{ev['title']}' to {_day(rng, new_s.date())} {s}-{e}.",
    ))
    gold = [("list_events", {"query": ev["title"]}),
            ("update_event", {"event_id": ev["id"], "start": new_s.strftime("%Y-%m-%dT%H:%M"),
                              "end": new_e.strftime("%Y-%m-%dT%H:%M")})]
    return request, gold, []


def calendar_cancel(rng: random.Random, w: World) -> Built:
    ev = _pick(rng, [e for e in w.mine("events") if e["start"][:10] >= w.today.isoformat()], "future event")
    day = dt.date.fromisoformat(ev["start"][:10])
    request = rng.choice((
        f"Cancel my '{ev['title']}' on {_day(rng, day)}.",
        f"Please delete the '{ev['title']}' event from my calendar ({_day(rng, day)}).",
        f"I won't make it to '{ev['title']}' on {_day(rng, day)}; remove it.",
    ))
    return request, [("list_events", {"date": day.isoformat()}), ("delete_event", {"event_id": ev["id"]})], []


def calendar_cancel_not_owner(rng: random.Random, w: World) -> Built:
    ev = _pick(rng, [e for e in w.rows["events"] if e["owner"] != w.actor], "someone else's event")
    day = dt.date.fromisoformat(ev["start"][:10])
    request = rng.choice((
        f"Delete '{ev['title']}' on {_day(rng, day)} from the calendar.",
        f"Get rid of the '{ev['title']}' event on {_day(rng, day)}, please.",
    ))
    # Not the actor's event: the right outcome is no change and a reply naming its owner.
    return request, [("list_events", {"date": day.isoformat()})], [ev["owner"]]


def reminder_add(rng: random.Random, w: World) -> Built:
    title = rng.choice(NEW_REMINDERS)
    due = w.today + dt.timedelta(days=rng.randrange(0, 21))
    request = rng.choice((
        f"Remind me to {title[0].lower() + title[1:]} by {_day(rng, due)}. Title it '{title}'.",
        f"Add a reminder '{title}' due {_day(rng, due)}.",
        f"New to-do: '{title}', due on {_day(rng, due)}.",
    ))
    return request, [("add_reminder", {"title": title, "due": due.isoformat()})], []


def reminder_complete(rng: random.Random, w: World) -> Built:
    r = _pick(rng, w.mine("reminders", done=0), "open reminder")
    request = rng.choice((
        f"I've done '{r['title']}', tick it off.",
        f"Mark the reminder '{r['title']}' as complete.",
        f"'{r['title']}' is taken care of. Please check it off my list.",
    ))
    return request, [("list_reminders", {"query": r["title"]}), ("complete_reminder", {"reminder_id": r["id"]})], []


def contact_lookup(rng: random.Random, w: World) -> Built:
    c = _pick(rng, w.mine("contacts"), "contact")
    field_, word = rng.choice((("email", "email address"), ("phone", "phone number")))
    request = rng.choice((
        f"What's {c['name']}'s {word}?",
        f"Can you look up the {word} for {c['name']}?",
        f"I need {c['name']}'s {word}, please.",
    ))
    return request, [("search_contacts", {"query": c["name"]})], [c[field_]]


def contact_update(rng: random.Random, w: World) -> Built:
    c = _pick(rng, w.mine("contacts"), "contact")
    phone = f"+1-555-{rng.randrange(100, 1000):03d}-{rng.randrange(0, 10000):04d}"
    request = rng.choice((
        f"{c['name']} has a new phone number: {phone}. Update the contact.",
        f"Change {c['name']}'s phone to {phone}.",
        f"Please update the number for {c['name']} to {phone}.",
    ))
    return request, [("search_contacts", {"query": c["name"]}),
                     ("update_contact", {"contact_id": c["id"], "phone": phone})], []


def note_create(rng: random.Random, w: World) -> Built:
    title, body = rng.choice(NEW_NOTES)
    request = rng.choice((
        f"Make a note titled '{title}' that says: {body}",
        f"Save a note. Title: '{title}'. Text: {body}",
        f"Jot this down under '{title}': {body}",
    ))
    return request, [("create_note", {"title": title, "body": body})], []


def order_status(rng: random.Random, w: World) -> Built:
    o = _pick(rng, [o for o in w.mine("orders", owner_field="customer")
                    if o["status"] in ("placed", "shipped", "delivered")], "open order")
    request = rng.choice((
        f"Has my {o['item'].lower()} arrived yet?",
        f"What's the status of my {o['item'].lower()} order?",
        f"Where is the {o['item'].lower()} I ordered?",
    ))
    facts = [o["status"]] + ([o["delivered_on"]] if o["delivered_on"] else [])
    return request, [("list_orders", {"query": o["item"]})], facts


def _orders(w: World, status: str, recent: bool | None = None) -> list[dict]:
    out = []
    for o in w.mine("orders", owner_field="customer", status=status):
        if recent is not None:
            age = (w.today - dt.date.fromisoformat(o["delivered_on"])).days
            if (age <= 30) != recent:
                continue
        out.append(o)
    return out


def refund_eligible(rng: random.Random, w: World) -> Built:
    o = _pick(rng, _orders(w, "delivered", recent=True), "recent delivery")
    request = rng.choice((
        f"I'd like a refund for the {o['item'].lower()}.",
        f"My {o['item'].lower()} order isn't what I expected. Please refund it.",
        f"Can I get my money back for my {o['item'].lower()} order?",
    ))
    amount = f"{o['amount_cents'] // 100}.{o['amount_cents'] % 100:02d}"
    return request, [("list_orders", {"query": o["item"]}), ("refund_order", {"order_id": o["id"]})], [amount]


def refund_ineligible(rng: random.Random, w: World) -> Built:
    o = _pick(rng, _orders(w, "delivered", recent=False), "old delivery")
    request = rng.choice((
        f"Please refund my {o['item'].lower()}.",
        f"I want to return the {o['item'].lower()} for a refund.",
        f"Refund the {o['item'].lower()} order, it broke.",
    ))
    return request, [("list_orders", {"query": o["item"]})], ["30 days"]


def order_cancel(rng: random.Random, w: World) -> Built:
    o = _pick(rng, _orders(w, "placed"), "unshipped order")
    request = rng.choice((
        f"Cancel my order for the {o['item'].lower()}.",
        f"I changed my mind about the {o['item'].lower()}; please cancel it.",
        f"Stop the {o['item'].lower()} order before it ships.",
    ))
    return request, [("list_orders", {"query": o["item"]}), ("cancel_order", {"order_id": o["id"]})], []


def meeting_with_contact(rng: random.Random, w: World) -> Built:
    c = _pick(rng, w.mine("contacts"), "contact")
    title = rng.choice(("Catch-up", "Project sync", "Intro call", "Contract review"))
    day = w.today + dt.timedelta(days=rng.randrange(1, 10))
    start = dt.datetime.combine(day, dt.time(rng.randrange(9, 17), 0))
    end = start + dt.timedelta(minutes=rng.choice((30, 60)))
    s, e = start.strftime("%H:%M"), end.strftime("%H:%M")
    request = rng.choice((
        f"Set up a '{title}' with {c['name']} on {_day(rng, day)} from {s} to {e}, and invite them.",
        f"Book '{title}' on {_day(rng, day)} {s}-{e} and add {c['name']} as an attendee.",
    ))
    args = {"title": title, "start": start.strftime("%Y-%m-%dT%H:%M"),
            "end": end.strftime("%Y-%m-%dT%H:%M"), "attendees": [c["email"]]}
    return request, [("search_contacts", {"query": c["name"]}), ("create_event", args)], []


def contact_to_reminder(rng: random.Random, w: World) -> Built:
    c = _pick(rng, w.mine("contacts"), "contact")
    due = w.today + dt.timedelta(days=rng.randrange(1, 14))
    request = rng.choice((
        f"Find out which company {c['name']} works for and add a reminder 'Send invoice to "
        f"<company>' due {_day(rng, due)}, with the company's name filled in.",
        f"I owe {c['name']}'s company an invoice. Add a reminder titled 'Send invoice to "
        f"<their company>' for {_day(rng, due)}.",
    ))
    return request, [("search_contacts", {"query": c["name"]}),
                     ("add_reminder", {"title": f"Send invoice to {c['company']}", "due": due.isoformat()})], []


# Held-out compositions for contract v5's dev split, built like the test families (two tools
# never composed in a train family, the second step needs a fact only the first lookup gives).
# Split "heldout": no split query returns them (v1-v4 splits are unchanged); a contract names them.

def contact_to_note(rng: random.Random, w: World) -> Built:
    c = _pick(rng, w.mine("contacts"), "contact")
    request = rng.choice((
        f"Look up {c['name']}'s phone number and save a note titled 'Call {c['name']}' whose text "
        f"is just that number.",
        f"Make a note called 'Call {c['name']}' containing {c['name']}'s phone number (find it first).",
    ))
    return request, [("search_contacts", {"query": c["name"]}),
                     ("create_note", {"title": f"Call {c['name']}", "body": c["phone"]})], []


def order_to_reminder(rng: random.Random, w: World) -> Built:
    o = _pick(rng, [o for o in w.mine("orders", owner_field="customer")
                    if o["status"] in ("placed", "shipped")], "undelivered order")
    due = w.today + dt.timedelta(days=rng.randrange(1, 10))
    request = rng.choice((
        f"Check where my {o['item'].lower()} order stands and add a reminder '{o['item']}: <status>' "
        f"due {_day(rng, due)}, with the order's current status filled in.",
        f"Add a reminder for {_day(rng, due)} titled '{o['item']}: <its order status>' (look the status up).",
    ))
    return request, [("list_orders", {"query": o["item"]}),
                     ("add_reminder", {"title": f"{o['item']}: {o['status']}", "due": due.isoformat()})], [o["status"]]


FAMILIES: tuple[Family, ...] = (
    Family("calendar_create", "train", "calendar", calendar_create),
    Family("calendar_reschedule", "train", "calendar", calendar_reschedule),
    Family("calendar_cancel", "train", "calendar", calendar_cancel),
    Family("calendar_cancel_not_owner", "train", "calendar", calendar_cancel_not_owner),
    Family("reminder_add", "train", "reminders", reminder_add),
    Family("reminder_complete", "train", "reminders", reminder_complete),
    Family("contact_lookup", "train", "contacts", contact_lookup),
    Family("contact_update", "train", "contacts", contact_update),
    Family("note_create", "train", "notes", note_create),
    Family("order_status", "train", "commerce", order_status),
    Family("refund_eligible", "dev", "commerce", refund_eligible),
    Family("order_cancel", "dev", "commerce", order_cancel),
    Family("refund_ineligible", "test", "commerce", refund_ineligible),
    Family("meeting_with_contact", "test", "calendar+contacts", meeting_with_contact),
    Family("contact_to_reminder", "test", "contacts+reminders", contact_to_reminder),
    Family("contact_to_note", "heldout", "contacts+notes", contact_to_note),
    Family("order_to_reminder", "heldout", "commerce+reminders", order_to_reminder),
)
FAMILIES_BY_NAME = {f.name: f for f in FAMILIES}


def make_task(family: str, seed: int) -> AgentTask:
    """One task: the family's builder applied to the state seeded by `seed`."""
    return build_task(FAMILIES_BY_NAME[family], seed)


def build_task(fam: Family, seed: int) -> AgentTask:
    """`make_task` for any family, also one outside the suite's table."""
    family = fam.name
    spec = StateSpec(seed=seed)
    conn = spec.build()
    try:
        rows = dump(conn)
    finally:
        conn.close()
    today = dt.date.fromisoformat(next(r["value"] for r in rows["meta"] if r["key"] == "today"))
    rng = random.Random(f"{family}:{seed}")
    request, gold, facts = fam.build(rng, World(rows, today, spec.actor))
    return AgentTask(id=f"{family}/{seed}", family=family, split=fam.split, seed=seed, state=spec,
                     request=request, gold_actions=tuple(gold), required_facts=tuple(facts),
                     actor=spec.actor, groups=fam.groups)


def generate_tasks(split: str | None = None, n_per_family: int = 10, base_seed: int = 0,
                   families: Iterable[str] | None = None) -> list[AgentTask]:
    """`n_per_family` tasks per family of `split` (all splits when None), seeds from base_seed."""
    names = list(families) if families is not None else [f.name for f in FAMILIES]
    out = []
    for name in names:
        if split is not None and FAMILIES_BY_NAME[name].split != split:
            continue
        seed, made = base_seed, 0
        while made < n_per_family and seed < base_seed + 50 * n_per_family:
            try:
                out.append(make_task(name, seed))
                made += 1
            except NoCandidate:
                pass  # this seeded state lacks the row the family needs; take the next seed
            seed += 1
    return out


# ---- grading ----------------------------------------------------------------------------

def _norm(s: str) -> str:
    return re.sub(r"\s+", " ", s).strip().lower()


def has_fact(fact: str, reply: str) -> bool:
    """Case- and spacing-insensitive, and not inside a longer word or number ("30" is not in "130")."""
    return re.search(r"(?<!\w)" + re.escape(_norm(fact)) + r"(?!\w)", _norm(reply)) is not None


def initial_hash(spec: StateSpec) -> str:
    conn = spec.build()
    try:
        return state_hash(conn)
    finally:
        conn.close()


def grade(task: AgentTask, episode: Episode, reply: str) -> dict:
    """The state-hash rule plus required facts in the final reply."""
    expected = expected_hash(task.state, task.gold_actions, actor=task.actor)
    final = episode.state_hash()
    same_start = episode.initial_hash == initial_hash(task.state)
    state_match = same_start and final == expected
    found = [f for f in task.required_facts if has_fact(f, reply or "")]
    missing = [f for f in task.required_facts if f not in found]
    return {"task_id": task.id, "passed": state_match and not missing, "state_match": state_match,
            "facts_found": found, "facts_missing": missing, "expected_hash": expected,
            "final_hash": final, "same_initial_state": same_start}


def pass_hat_k(trials: Mapping[str, Sequence[bool]] | Sequence[Sequence[bool]], k: int) -> float:
    """pass^k: the chance that k i.i.d. trials of a task all pass, averaged over tasks.

    Per task with n trials of which c passed, the unbiased estimate is C(c, k) / C(n, k).
    """
    groups = list(trials.values()) if isinstance(trials, Mapping) else list(trials)
    if not groups:
        raise ValueError("no tasks")
    scores = []
    for g in groups:
        n, c = len(g), sum(bool(x) for x in g)
        if n < k:
            raise ValueError(f"a task has {n} trials, fewer than k={k}")
        scores.append(comb(c, k) / comb(n, k))
    return sum(scores) / len(scores)
