"""The agent data engine: requests over generated tool worlds (`datagen.worlds`), gold trajectories
planned from the world's state, executed on the world and kept only when the verifier passes.

Patterns (each a function of a world and a seeded rng that writes one transcript):
look up then act; look up then answer (through `get` when the search returns ids only); act only
if a stated condition holds; parallel calls (two lookups, two writes); chains that carry a looked-up
value into another tool (message the record's owner); a clarifying question when a first name
matches two people; nothing found; a tool's error read back; no call when the tools cannot do
what is asked; a direct call with values normalised (dates to ISO, enums to the schema's case,
prices to numbers); and a second user turn that acts on what the first one found.

The verifier (`verify`) replays the transcript on a fresh copy of the world: every call names a
tool of the list with arguments valid under its schema; every argument value is grounded (said by
the user, returned by an earlier result, an enum of the schema, or a normalisation the pattern
declared); no result is an error unless the pattern expects it; the world ends in the state the
pattern declared; and the final reply states the declared facts.

    examples(n, seed) -> list[Example]     # `macaronic train agent --generator agent_engine`
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import random
from dataclasses import dataclass, field
from typing import Callable

from macaronic.datagen.worlds import DOMAINS, Domain, Field, World, make_world, value_for


class Skip(Exception):
    """This world cannot host this pattern (for example no record with a condition to test)."""


@dataclass
class Transcript:
    world: World
    turns: list[list[dict]] = field(default_factory=list)  # per user turn: its messages
    derived: set = field(default_factory=set)  # normalised values the requests imply (ISO dates, numbers)
    changes: list[tuple] = field(default_factory=list)  # declared end state: (id, field, value) | ("deleted", id) | ...
    facts: list[str] = field(default_factory=list)  # what the last reply must say
    errors_expected: int = 0
    start: World | None = None  # the world as the first request found it (after the pattern's setup)

    def user(self, text: str) -> None:
        if self.start is None:
            self.start = copy.deepcopy(self.world)
        self.turns.append([{"role": "user", "content": text}])

    def call(self, *calls: tuple[str, dict]) -> list[dict]:
        """One assistant message with these calls (logical op, logical args), executed; the results."""
        from macaronic.substrate.toolcalls import format_tool_calls

        w = self.world
        shown = [(w.names[op], {w.params.get(k, k): v for k, v in args.items()}) for op, args in calls]
        results = [w.call(n, a) for n, a in shown]
        self.turns[-1].append({"role": "assistant", "content": format_tool_calls(shown)})
        self.turns[-1] += [{"role": "tool", "content": json.dumps(r, ensure_ascii=False, sort_keys=True)}
                           for r in results]
        return results

    def reply(self, text: str, *facts) -> None:
        self.turns[-1].append({"role": "assistant", "content": text})
        self.facts = [str(f) for f in facts]


# ---- phrasing ----------------------------------------------------------------------------

OPEN = ("", "", "", "Please ", "Hey, ", "Hi! ", "Quick one: ", "Could you ", "Can you ", "I need you to ")
CLOSE = ("", "", "", " Thanks!", " Thank you.", " please.", " Cheers.")


def polite(rng: random.Random, body: str) -> str:
    o = rng.choice(OPEN)
    if o in ("Please ", "Hey, "):
        body = body[0].lower() + body[1:] if not body[:2].isupper() else body
    if o in ("Could you ", "Can you ", "I need you to "):
        text = o + body[0].lower() + body[1:]
        text = text.rstrip(".") + ("?" if o != "I need you to " else ".")
    else:
        text = o + body
    return text + rng.choice(CLOSE) if not text.endswith("?") else text


def name_of(d: Domain, key: str, rng: random.Random) -> str:
    k = key if rng.random() < 0.6 else f"'{key}'"
    return rng.choice((f"the {d.noun} {k}", f"{k}", f"the {d.noun} called {k}" if d.key in ("name", "title") else f"the {d.noun} {k}"))


def said_value(f: Field, v, rng: random.Random, t: Transcript):
    """How a request says a field value, and what the call should carry (declared as derived)."""
    if f.kind == "date":
        day = dt.date.fromisoformat(v)
        text = rng.choice((day.strftime("%B %-d, %Y"), day.strftime("%-d %B %Y"), v, day.strftime("%b %-d %Y")))
        t.derived.add(json.dumps(v))
        return text
    if f.kind == "enum":
        return v.replace("_", " ") if rng.random() < 0.7 else v
    if f.kind == "num" and f.name == "price":
        t.derived.add(json.dumps(v))
        return f"${v:.2f}"
    if f.kind == "num" and f.name.endswith("_kg"):
        t.derived.add(json.dumps(v))
        return f"{v} kg"
    return str(v)


def new_value(f: Field, old, rng: random.Random, today: dt.date):
    for _ in range(20):
        v = value_for(f, rng, today)
        if v != old:
            return v
    raise Skip("no other value")


def pick(w: World, rng: random.Random, cond=None) -> dict:
    rs = [r for r in w.records.values() if cond is None or cond(r)]
    if not rs:
        raise Skip("no record")
    return rng.choice(rs)


def live(w: World):
    t = w.domain.terminal
    return lambda r: not t or r.get(t[0]) != t[1]


def settable(d: Domain) -> list[Field]:
    return [f for f in d.fields if f.kind != "email" and (not d.terminal or f.name != d.terminal[0])]


def lookup(t: Transcript, r: dict, query: str | None = None) -> str:
    d = t.world.domain
    res = t.call(("search", {"query": query or r[d.key]}))[0]
    ids = [x["id"] for x in res["results"]]
    assert r["id"] in ids, (r, res)
    return r["id"]


def read(t: Transcript, r: dict, query: str | None = None) -> dict:
    """Look a record up and return it as the tools show it (through get when the search gives ids only)."""
    rid = lookup(t, r, query)
    if t.world.summary_search:
        return t.call(("get", {"id": rid}))[0]
    res = json.loads(t.turns[-1][-1]["content"])
    return next(x for x in res["results"] if x["id"] == rid)


def note_about(t: Transcript, key: str, news: str) -> str:
    """The text of a message about a record (declared as derived: the request implies it)."""
    text = f"About {key}: {news[0].upper() + news[1:]}."
    t.derived.add(json.dumps(text))
    return text


def vtext(v) -> str:
    return str(v).replace("_", " ") if isinstance(v, str) else str(v)


# ---- patterns ----------------------------------------------------------------------------

def p_lookup_act(t: Transcript, rng: random.Random) -> None:
    w, d = t.world, t.world.domain
    r = pick(w, rng, live(w))
    f = rng.choice(settable(d))
    v = new_value(f, r[f.name], rng, w.today)
    said = said_value(f, v, rng, t)
    who = name_of(d, r[d.key], rng)
    t.user(polite(rng, rng.choice((f"Set the {f.said} of {who} to {said}.", f"Change the {f.said} of {who} to {said}.",
                                   f"Update {who}: {f.said} should be {said}.",
                                   f"{who[0].upper() + who[1:]} needs its {f.said} changed to {said}."))))
    rid = lookup(t, r)
    t.call(("update", {"id": rid, f.name: w.arg(f, v)}))
    t.changes.append((rid, f.name, v))
    t.reply(rng.choice((f"Done: the {f.said} of {r[d.key]} is now {vtext(v)}.",
                        f"I updated {r[d.key]} ({rid}): {f.said} set to {vtext(v)}.")), r[d.key])


def p_lookup_answer(t: Transcript, rng: random.Random) -> None:
    w, d = t.world, t.world.domain
    r = pick(w, rng)
    f = rng.choice([x for x in d.fields])
    who = name_of(d, r[d.key], rng)
    t.user(polite(rng, rng.choice((f"What is the {f.said} of {who}?", f"Look up {who} and tell me its {f.said}.",
                                   f"Find {who}. What's the {f.said}?"))))
    shown = read(t, r)
    v = shown[w.params[f.name]]
    t.reply(rng.choice((f"The {f.said} of {r[d.key]} is {vtext(v)}.", f"{r[d.key]}: {f.said} {vtext(v)}.")), vtext(v))


def p_conditional(t: Transcript, rng: random.Random) -> None:
    w, d = t.world, t.world.domain
    enums = [f for f in d.fields if f.kind == "enum"]
    if not enums:
        raise Skip("no enum field to test")
    cf = rng.choice(enums)
    r = pick(w, rng, live(w))
    holds = rng.random() < 0.5
    cv = r[cf.name] if holds else rng.choice([x for x in cf.values if x != r[cf.name]])
    targets = [f for f in settable(d) if f.name != cf.name]
    if not targets:
        raise Skip("nothing else to set")
    f = rng.choice(targets)
    v = new_value(f, r[f.name], rng, w.today)
    said = said_value(f, v, rng, t)
    who = name_of(d, r[d.key], rng)
    t.user(polite(rng, rng.choice((f"If {who} is {vtext(cv)}, set its {f.said} to {said}. Otherwise leave it alone.",
                                   f"Check {who}: only if its {cf.said} is {vtext(cv)}, change the {f.said} to {said}.",
                                   f"Change the {f.said} of {who} to {said}, but only when its {cf.said} is still {vtext(cv)}."))))
    shown = read(t, r)
    now = shown[w.params[cf.name]]
    if holds:
        t.call(("update", {"id": r["id"], f.name: w.arg(f, v)}))
        t.changes.append((r["id"], f.name, v))
        t.reply(f"{r[d.key]} is {vtext(now).lower()}, so I set its {f.said} to {vtext(v)}.", r[d.key])
    else:
        t.reply(rng.choice((f"{r[d.key]} is {vtext(now).lower()}, not {vtext(cv)}, so I left it unchanged.",
                            f"I didn't change anything: the {cf.said} of {r[d.key]} is {vtext(now).lower()}, not {vtext(cv)}.")),
                vtext(now).lower())


def p_parallel(t: Transcript, rng: random.Random) -> None:
    w, d = t.world, t.world.domain
    live_rs = [r for r in w.records.values() if live(w)(r)]
    if len(live_rs) < 2:
        raise Skip("two records needed")
    a, b = rng.sample(live_rs, 2)
    f = rng.choice(settable(d))
    v = new_value(f, a[f.name], rng, w.today)
    said = said_value(f, v, rng, t)
    t.user(polite(rng, rng.choice((f"Set the {f.said} of both {a[d.key]} and {b[d.key]} to {said}.",
                                   f"Change {f.said} to {said} for {a[d.key]} and for {b[d.key]}.",
                                   f"{a[d.key]} and {b[d.key]}: make the {f.said} {said} on both."))))
    ra, rb = t.call(("search", {"query": a[d.key]}), ("search", {"query": b[d.key]}))
    ids = [next(x["id"] for x in res["results"] if x[d.key] == r[d.key]) for res, r in ((ra, a), (rb, b))]
    t.call(*[("update", {"id": i, f.name: w.arg(f, v)}) for i in ids])
    t.changes += [(i, f.name, v) for i in ids]
    t.reply(f"Done: {a[d.key]} and {b[d.key]} now both have {f.said} {vtext(v)}.", a[d.key], b[d.key])


def p_parallel_create(t: Transcript, rng: random.Random) -> None:
    w, d = t.world, t.world.domain
    pool = [k for k in d.keys if w.find(k) is None]
    if len(pool) < 2:
        raise Skip("no new keys")
    ka, kb = rng.sample(pool, 2)
    f = rng.choice(settable(d))
    va, vb = value_for(f, rng, w.today), value_for(f, rng, w.today)
    sa, sb = said_value(f, va, rng, t), said_value(f, vb, rng, t)
    t.user(polite(rng, rng.choice((f"Add two new {d.plural}: {ka} with {f.said} {sa}, and {kb} with {f.said} {sb}.",
                                   f"Create {d.plural} '{ka}' ({f.said} {sa}) and '{kb}' ({f.said} {sb})."))))
    res = t.call(("create", {"key": ka, f.name: w.arg(f, va)}), ("create", {"key": kb, f.name: w.arg(f, vb)}))
    t.changes += [("created", ka, f.name, va), ("created", kb, f.name, vb)]
    t.reply(f"I created {ka} ({res[0]['id']}) and {kb} ({res[1]['id']}).", res[0]["id"], res[1]["id"])


def p_chain_message(t: Transcript, rng: random.Random) -> None:
    w, d = t.world, t.world.domain
    if not d.owner:
        raise Skip("no owner field")
    r = pick(w, rng)
    of = d.field(d.owner)
    news = rng.choice(("it has been moved to next week", "the paperwork is ready", "there is an update waiting",
                       "we need a quick call about it", "everything is sorted now"))
    who = name_of(d, r[d.key], rng)
    t.user(polite(rng, rng.choice((f"Let the {of.said} of {who} know that {news}.",
                                   f"Message whoever is the {of.said} for {who}: {news}.",
                                   f"Find the {of.said} of {who} and tell them {news}."))))
    shown = read(t, r)
    to = shown[w.params[of.name]]
    t.call(("message", {"to": to, "text": note_about(t, r[d.key], news)}))
    t.changes.append(("sent", to))
    t.reply(f"I messaged {to} about {r[d.key]}.", to)


def p_clarify(t: Transcript, rng: random.Random) -> None:
    w, d = t.world, t.world.domain
    if not d.people:
        raise Skip("not a people domain")
    r = pick(w, rng, live(w))
    first = r[d.key].split()[0]
    twin_key = next((k for k in rng.sample(d.keys, len(d.keys)) if k.split()[0] == first and k != r[d.key]
                     and w.find(k) is None), None)
    if twin_key is None:
        raise Skip("no twin")
    twin = copy.deepcopy(r)
    twin_id = f"{d.prefix}-{int(r['id'].split('-')[1]) % 8999 + 1000 + 1}"
    if twin_id in w.records:
        raise Skip("id clash")
    twin.update({"id": twin_id, d.key: twin_key})
    w.records[twin_id] = twin
    f = rng.choice(settable(d))
    v = new_value(f, r[f.name], rng, w.today)
    said = said_value(f, v, rng, t)
    t.user(polite(rng, rng.choice((f"Set {first}'s {f.said} to {said}.", f"Change the {f.said} for {first} to {said}."))))
    res = t.call(("search", {"query": first}))[0]
    names = [x[d.key] for x in res["results"]]
    if len(names) < 2:
        raise Skip("not ambiguous")
    listed = " and ".join(names) if len(names) == 2 else ", ".join(names)
    t.reply(f"I found {len(names)} {d.plural} named {first}: {listed}. Which one do you mean?", *names)


def p_not_found(t: Transcript, rng: random.Random) -> None:
    w, d = t.world, t.world.domain
    missing = [k for k in d.keys if w.find(k) is None and not any(k.lower() in r[d.key].lower() or r[d.key].lower() in k.lower()
                                                                 for r in w.records.values())]
    if not missing:
        raise Skip("nothing missing")
    k = rng.choice(missing)
    f = rng.choice(settable(d))
    v = value_for(f, rng, w.today)
    said = said_value(f, v, rng, t)
    t.user(polite(rng, rng.choice((f"Set the {f.said} of {name_of(d, k, rng)} to {said}.",
                                   f"Delete {name_of(d, k, rng)}.", f"What is the {f.said} of {name_of(d, k, rng)}?"))))
    res = t.call(("search", {"query": k}))[0]
    assert not res["results"]
    t.reply(rng.choice((f"I couldn't find a {d.noun} called {k}, so nothing was changed.",
                        f"There is no {d.noun} matching {k}. Could you check the {d.key}?")), k)


def p_error(t: Transcript, rng: random.Random) -> None:
    w, d = t.world, t.world.domain
    if not d.terminal:
        raise Skip("no terminal state")
    r = pick(w, rng)
    r[d.terminal[0]] = d.terminal[1]  # make this record refuse changes
    delete = rng.random() < 0.4
    who = name_of(d, r[d.key], rng)
    if delete:
        t.user(polite(rng, rng.choice((f"Delete {who}.", f"Remove {who} from the system."))))
    else:
        f = rng.choice(settable(d))
        v = new_value(f, r[f.name], rng, w.today)
        t.user(polite(rng, f"Set the {f.said} of {who} to {said_value(f, v, rng, t)}."))
    rid = lookup(t, r)
    res = t.call(("delete", {"id": rid}) if delete else ("update", {"id": rid, f.name: w.arg(f, v)}))[0]
    t.errors_expected = 1
    t.reply(f"I couldn't: the system says {res['error']}. Nothing was changed.", res["error"])


OTHER_ASKS = ("Order a large pepperoni pizza to my flat.", "Transfer 200 euros to my brother.",
              "Book me a taxi to the airport at 6am.", "Turn my bank card off for a week.",
              "Post 'Happy Friday!' on my social media.", "Renew my passport.",
              "Buy two tickets for the concert on Saturday.", "Schedule a haircut for Thursday.")


def p_irrelevant(t: Transcript, rng: random.Random) -> None:
    w, d = t.world, t.world.domain
    other = rng.choice([x for x in DOMAINS if x.noun != d.noun and x.desc not in json.dumps(w.distractors)])
    if rng.random() < 0.5:
        ask = rng.choice(OTHER_ASKS)
    else:
        f = rng.choice(settable(other))
        ask = f"Set the {f.said} of the {other.noun} {rng.choice(other.keys)} to {vtext(value_for(f, rng, w.today))}."
    t.user(polite(rng, ask))
    t.reply(rng.choice((f"I can't do that with the tools I have: they cover {d.desc} only. Nothing was changed.",
                        f"None of my tools can do that; they only work on {d.desc}.")), d.desc)


WORDS = ("lantern", "orchard", "pebble", "harbour", "saffron", "quilt", "meadow", "compass", "ember", "walrus",
         "violin", "thimble", "glacier", "biscuit", "falcon", "mosaic")
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


def offtopic_question(rng: random.Random) -> tuple[str, str, str]:
    """(question, answer, the fact the answer must state): a question no tool is for, answered
    from the question alone (computed here, so the answer is right)."""
    kind = rng.randrange(6)
    if kind == 0:
        a, b = rng.randint(11, 49), rng.randint(11, 49)
        return f"What is {a} times {b}?", f"{a} times {b} is {a * b}.", str(a * b)
    if kind == 1:
        h = rng.randint(2, 30)
        return f"How many minutes are there in {h} hours?", f"{h} hours is {h * 60} minutes.", str(h * 60)
    if kind == 2:
        w = rng.choice(WORDS)
        return f"How many letters are in the word '{w}'?", f"'{w}' has {len(w)} letters.", str(len(w))
    if kind == 3:
        d = rng.randrange(7)
        return (f"Which day of the week comes after {WEEKDAYS[d]}?", f"{WEEKDAYS[(d + 1) % 7]} comes after {WEEKDAYS[d]}.",
                WEEKDAYS[(d + 1) % 7])
    if kind == 4:
        ws = rng.sample(WORDS, 3)
        first = sorted(ws)[0]
        return (f"Which of these comes first alphabetically: {', '.join(ws)}?", f"'{first}' comes first.", first)
    a, b = rng.randint(100, 999), rng.randint(100, 999)
    return f"What is {a} plus {b}?", f"{a} plus {b} is {a + b}.", str(a + b)


def p_offtopic(t: Transcript, rng: random.Random) -> None:
    """A question none of the tools is for: answered in text, no call (tools attached or not)."""
    q, answer, fact = offtopic_question(rng)
    t.user(q)
    t.reply(answer, fact)


def p_direct_create(t: Transcript, rng: random.Random) -> None:
    w, d = t.world, t.world.domain
    pool = [k for k in d.keys if w.find(k) is None]
    if not pool:
        raise Skip("no new key")
    k = rng.choice(pool)
    fs = rng.sample(settable(d), min(len(settable(d)), rng.randint(1, 3)))
    vals = {f.name: value_for(f, rng, w.today) for f in fs}
    parts = [f"{f.said} {said_value(f, vals[f.name], rng, t)}" for f in fs]
    t.user(polite(rng, rng.choice((f"Add a new {d.noun} {k} with " + ", ".join(parts) + ".",
                                   f"Create a {d.noun} called '{k}': " + "; ".join(parts) + ".",
                                   f"New {d.noun}: {k}, " + ", ".join(parts) + "."))))
    res = t.call(("create", {"key": k, **{f.name: w.arg(f, vals[f.name]) for f in fs}}))[0]
    t.changes += [("created", k, n, v) for n, v in vals.items()]
    t.reply(f"I created the {d.noun} {k} with id {res['id']}.", res["id"])


def p_delete(t: Transcript, rng: random.Random) -> None:
    w, d = t.world, t.world.domain
    r = pick(w, rng, live(w))
    t.user(polite(rng, rng.choice((f"Delete {name_of(d, r[d.key], rng)}.", f"Please remove {name_of(d, r[d.key], rng)}; we don't need it.",
                                   f"Get rid of {name_of(d, r[d.key], rng)}."))))
    rid = lookup(t, r)
    t.call(("delete", {"id": rid}))
    t.changes.append(("deleted", rid))
    t.reply(f"I deleted {r[d.key]} ({rid}).", r[d.key])


def p_direct_get(t: Transcript, rng: random.Random) -> None:
    """The request names the id itself: one get, no search."""
    w, d = t.world, t.world.domain
    r = pick(w, rng)
    f = rng.choice(d.fields)
    t.user(polite(rng, rng.choice((f"What is the {f.said} of {d.noun} {r['id']}?", f"Show me {d.noun} {r['id']}.",
                                   f"Pull up {r['id']} and tell me the {f.said}."))))
    shown = t.call(("get", {"id": r["id"]}))[0]
    v = shown[w.params[f.name]]
    t.reply(f"{r['id']} is {r[d.key]}; its {f.said} is {vtext(v)}.", vtext(v))


def p_followup(t: Transcript, rng: random.Random) -> None:
    """A first turn that looks a record up, then a second turn that acts on it by pronoun."""
    w, d = t.world, t.world.domain
    r = pick(w, rng, live(w))
    f0 = rng.choice(d.fields)
    t.user(polite(rng, f"What is the {f0.said} of {name_of(d, r[d.key], rng)}?"))
    shown = read(t, r)
    t.reply(f"The {f0.said} of {r[d.key]} is {vtext(shown[w.params[f0.name]])}.")
    f = rng.choice(settable(d))
    v = new_value(f, r[f.name], rng, w.today)
    said = said_value(f, v, rng, t)
    t.user(rng.choice((f"Thanks. Now set its {f.said} to {said}.", f"OK, change its {f.said} to {said} then.",
                       f"Great - and make the {f.said} {said}.")))
    t.call(("update", {"id": r["id"], f.name: w.arg(f, v)}))
    t.changes.append((r["id"], f.name, v))
    t.reply(f"Done: {r[d.key]} now has {f.said} {vtext(v)}.", r[d.key])


@dataclass(eq=False)  # compared by identity: a plan keys its lookups by step
class Step:
    """One thing a chained request asks for: its clause, the record it names (looked up first by its
    key; `full`: every field needed, a get after an ids-only search), and `act(rid, shown)` -> (the
    call to make or None, `done(result)` -> (what the reply says, the fact it must state))."""
    clause: str
    record: dict | None
    full: bool
    act: Callable


def _step_create(t: Transcript, rng: random.Random, used: set) -> Step:
    w, d = t.world, t.world.domain
    pool = [k for k in d.keys if w.find(k) is None and k not in used]
    if not pool:
        raise Skip("no new key")
    k = rng.choice(pool)
    used.add(k)
    fs = rng.sample(settable(d), min(len(settable(d)), rng.randint(1, 2)))
    vals = {f.name: value_for(f, rng, w.today) for f in fs}
    parts = " and ".join(f"{f.said} {said_value(f, vals[f.name], rng, t)}" for f in fs)
    clause = rng.choice((f"add a new {d.noun} {k} with {parts}", f"create the {d.noun} '{k}' ({parts})"))

    def act(rid, shown):
        t.changes.extend(("created", k, n, v) for n, v in vals.items())
        return ("create", {"key": k, **{f.name: w.arg(f, vals[f.name]) for f in fs}}), \
            lambda res: (f"I created {k} ({res['id']})", res["id"])
    return Step(clause, None, False, act)


def _step_update(t: Transcript, rng: random.Random, used: set) -> Step:
    w, d = t.world, t.world.domain
    r = pick(w, rng, lambda x: live(w)(x) and x[d.key] not in used)
    used.add(r[d.key])
    f = rng.choice(settable(d))
    v = new_value(f, r[f.name], rng, w.today)
    said = said_value(f, v, rng, t)
    clause = rng.choice((f"set the {f.said} of {name_of(d, r[d.key], rng)} to {said}",
                         f"change {r[d.key]}'s {f.said} to {said}"))

    def act(rid, shown):
        t.changes.append((rid, f.name, v))
        return ("update", {"id": rid, f.name: w.arg(f, v)}), \
            lambda res: (f"I set the {f.said} of {r[d.key]} to {vtext(v)}", r[d.key])
    return Step(clause, r, False, act)


def _step_delete(t: Transcript, rng: random.Random, used: set) -> Step:
    w, d = t.world, t.world.domain
    r = pick(w, rng, lambda x: live(w)(x) and x[d.key] not in used)
    used.add(r[d.key])
    clause = rng.choice((f"delete {name_of(d, r[d.key], rng)}", f"remove {name_of(d, r[d.key], rng)}"))

    def act(rid, shown):
        t.changes.append(("deleted", rid))
        return ("delete", {"id": rid}), lambda res: (f"I deleted {r[d.key]} ({rid})", r[d.key])
    return Step(clause, r, False, act)


def _step_answer(t: Transcript, rng: random.Random, used: set) -> Step:
    w, d = t.world, t.world.domain
    r = pick(w, rng, lambda x: x[d.key] not in used)
    used.add(r[d.key])
    f = rng.choice(d.fields)
    clause = rng.choice((f"tell me the {f.said} of {name_of(d, r[d.key], rng)}",
                         f"look up the {f.said} of {name_of(d, r[d.key], rng)}"))

    def act(rid, shown):
        v = vtext(shown[w.params[f.name]])
        return None, lambda res: (f"the {f.said} of {r[d.key]} is {v}", v)
    return Step(clause, r, True, act)


def _step_message(t: Transcript, rng: random.Random, used: set) -> Step:
    w, d = t.world, t.world.domain
    if not d.owner:
        raise Skip("no owner field")
    r = pick(w, rng, lambda x: x[d.key] not in used)
    used.add(r[d.key])
    of = d.field(d.owner)
    news = rng.choice(("it is on the agenda for Monday", "the numbers are in", "it needs a check this week",
                       "it has been reviewed"))
    clause = rng.choice((f"let the {of.said} of {name_of(d, r[d.key], rng)} know that {news}",
                         f"tell whoever is the {of.said} for {r[d.key]} that {news}"))

    def act(rid, shown):
        to = shown[w.params[of.name]]
        t.changes.append(("sent", to))
        return ("message", {"to": to, "text": note_about(t, r[d.key], news)}), lambda res: (f"I messaged {to} about {r[d.key]}", to)
    return Step(clause, r, True, act)


STEPS = (_step_create, _step_update, _step_delete, _step_answer, _step_message)


def _chained_request(t: Transcript, rng: random.Random) -> list[Step]:
    """Two or three steps on different records, asked in one message (four phrasings)."""
    used: set = set()
    steps = [rng.choice(STEPS)(t, rng, used) for _ in range(rng.choice((2, 2, 3)))]
    clauses = [x.clause for x in steps]
    cap = lambda s: s[0].upper() + s[1:]  # noqa: E731
    style = rng.randrange(4)
    if style == 0:
        body = cap(", then ".join(clauses)) + "."
    elif style == 1:
        body = " ".join(f"{w} {c}." for w, c in zip(("First,", "Then", "Finally,") if len(clauses) == 3
                                                       else ("First,", "Then"), clauses))
    elif style == 2:
        body = ("Two things:" if len(clauses) == 2 else "A few things:") + "\n" + \
            "\n".join(f"{i + 1}. {cap(c)}." for i, c in enumerate(clauses))
    else:
        body = cap(", ".join(clauses[:-1]) + " and " + clauses[-1]) + "."
    t.user(polite(rng, body) if style != 2 else body)
    return steps


def p_sequence(t: Transcript, rng: random.Random) -> None:
    """One request that asks for two or three different things in order; done one after another,
    each looked up when it names a record (a chain of two to six calls, one a step), then one reply
    that says what each step did."""
    steps = _chained_request(t, rng)
    done = []
    for x in steps:
        rid = shown = None
        if x.record is not None:
            shown = read(t, x.record) if x.full else None
            rid = shown["id"] if shown else lookup(t, x.record)
        call, finish = x.act(rid, shown)
        done.append(finish(t.call(call)[0] if call else None))
    t.reply("Done: " + "; ".join(s for s, _ in done) + ".", *[f for _, f in done])


def p_together(t: Transcript, rng: random.Random) -> None:
    """The same requests, the independent calls made together: every lookup in one step (the gets
    after an ids-only search in the next), then every write in one step, then one reply."""
    w, d = t.world, t.world.domain
    steps = _chained_request(t, rng)
    named = [x for x in steps if x.record is not None]
    rids, shown = {}, {}
    if named:
        found = t.call(*[("search", {"query": x.record[d.key]}) for x in named])
        for x, res in zip(named, found):
            hit = next(h for h in res["results"] if h["id"] == x.record["id"])
            rids[x] = hit["id"]
            if x.full and not w.summary_search:
                shown[x] = hit
        need = [x for x in named if x.full and w.summary_search]
        if need:
            for x, res in zip(need, t.call(*[("get", {"id": rids[x]}) for x in need])):
                shown[x] = res
    acts = [x.act(rids.get(x), shown.get(x)) for x in steps]
    calls = [c for c, _ in acts if c]
    results = iter(t.call(*calls) if calls else [])
    done = [finish(next(results) if c else None) for c, finish in acts]
    t.reply("Done: " + "; ".join(s for s, _ in done) + ".", *[f for _, f in done])


PATTERNS = {"lookup_act": (p_lookup_act, 4), "lookup_answer": (p_lookup_answer, 3), "conditional": (p_conditional, 2),
            "parallel": (p_parallel, 2), "parallel_create": (p_parallel_create, 1), "chain_message": (p_chain_message, 2),
            "clarify": (p_clarify, 2), "direct_get": (p_direct_get, 1), "not_found": (p_not_found, 1), "error": (p_error, 1),
            "irrelevant": (p_irrelevant, 2), "offtopic": (p_offtopic, 2), "direct_create": (p_direct_create, 2), "delete": (p_delete, 1),
            "followup": (p_followup, 2)}
# Patterns outside the default mix, drawn only when named (`examples(..., patterns=...)`): adding one
# to PATTERNS would change every draw of `examples(n, seed)`, and the shipped agent's recorded data
# rebuilds from those draws byte for byte (tests/train/test_agent_data.py).
CHAINS = {"sequence": (p_sequence, 1), "together": (p_together, 1)}


# ---- verification ------------------------------------------------------------------------

def _values(x) -> list:
    if isinstance(x, dict):
        return [v for y in x.values() for v in _values(y)]
    if isinstance(x, list):
        return [v for y in x for v in _values(y)]
    return [x]


def verify(world0: World, t: Transcript) -> list[str]:
    """Replay `t` on a copy of the world it started from; every problem found (empty: keep it)."""
    import jsonschema

    from macaronic.substrate.toolcalls import parse_tool_calls

    w = copy.deepcopy(world0)
    tools = w.tools()
    schemas = {x["function"]["name"]: x["function"]["parameters"] for x in tools}
    problems, said, seen, errors = [], "", [], 0
    for turn in t.turns:
        for m in turn:
            if m["role"] == "user":
                said += "\n" + m["content"].lower()
            elif m["role"] == "tool":
                seen += _values(json.loads(m["content"]))
            elif "<tool_call>" in m["content"]:
                parsed = parse_tool_calls(m["content"], tools)
                if not parsed.ok or not parsed.tool_calls:
                    problems.append(f"unparsable calls: {parsed.error}")
                    continue
                for c in parsed.tool_calls:
                    name, args = c["function"]["name"], json.loads(c["function"]["arguments"])
                    try:
                        jsonschema.validate(args, schemas[name])
                    except jsonschema.ValidationError as e:
                        problems.append(f"{name}: {e.message}")
                    for k, v in args.items():
                        prop = schemas[name]["properties"].get(k, {})
                        ok = (v in prop.get("enum", ()) or v in seen or json.dumps(v) in t.derived
                              or str(v).lower() in said)
                        if not ok:
                            problems.append(f"{name}.{k}={v!r} is not grounded")
                    res = w.call(name, args)
                    errors += "error" in res
    if errors != t.errors_expected:
        problems.append(f"{errors} error results, {t.errors_expected} expected")
    problems += _state_problems(world0, w, t)
    final = t.turns[-1][-1]
    if final["role"] != "assistant" or "<tool_call>" in final["content"]:
        problems.append("the transcript does not end on a reply")
    problems += [f"reply lacks {f!r}" for f in t.facts if f.lower() not in final["content"].lower()]
    return problems


def _state_problems(w0: World, w: World, t: Transcript) -> list[str]:
    exp = copy.deepcopy(w0.records)
    sent = []
    created = {}
    for ch in t.changes:
        if ch[0] == "deleted":
            exp.pop(ch[1], None)
        elif ch[0] == "sent":
            sent.append(ch[1])
        elif ch[0] == "created":
            created.setdefault(ch[1], {})[ch[2]] = ch[3]
        else:
            exp[ch[0]][ch[1]] = ch[2]
    key = w.domain.key
    got = {rid: r for rid, r in w.records.items() if rid in w0.records}
    problems = [] if got == exp else ["end state differs from the declared changes"]
    new = {r[key]: {k: v for k, v in r.items() if k not in ("id", key)} for rid, r in w.records.items()
           if rid not in w0.records}
    if new != created:
        problems.append(f"created {new}, declared {created}")
    if [s["to"] for s in w.sent] != sent:
        problems.append("messages sent differ from the declared ones")
    return problems


# ---- examples ----------------------------------------------------------------------------

def transcript(rng: random.Random, pattern: str | None = None) -> tuple[World, Transcript, str]:
    """One verified transcript (raises Skip when the drawn world cannot host the pattern)."""
    names = list(PATTERNS)
    name = pattern or rng.choices(names, weights=[PATTERNS[n][1] for n in names])[0]
    w = make_world(rng)
    t = Transcript(w)
    {**PATTERNS, **CHAINS}[name][0](t, rng)
    problems = verify(t.start, t)
    if problems:
        raise AssertionError(f"{name}: {problems}")
    return t.start, t, name


def messages_of(w: World, t: Transcript, bundle=None) -> list[dict]:
    from macaronic.prompts import prompt_head

    if bundle is None:
        from macaronic.harness import load_bundle

        bundle = load_bundle()
    from macaronic.substrate.toolcalls import format_tool_result

    head = prompt_head(bundle, "agent", w.tools())
    out = list(head)
    for i, turn in enumerate(t.turns):
        if i:  # each later user turn has its role instruction before it, as served
            out.append(head[-1])
        out += [{"role": "tool", "content": format_tool_result(json.loads(m["content"]))} if m["role"] == "tool" else m
                for m in turn]
    return out


def examples(n: int, seed: int = 0, patterns: tuple[str, ...] | None = None) -> list:
    """`n` verified agent conversations (seeded, deterministic), patterns mixed by weight; `patterns`
    names the ones to draw from (default: PATTERNS, the default mix; CHAINS only when named)."""
    from macaronic.harness import load_bundle
    from macaronic.datagen.examples import Example

    bundle = load_bundle()
    table = {**PATTERNS, **CHAINS}
    unknown = [p for p in patterns or () if p not in table]
    if unknown:
        raise ValueError(f"unknown agent patterns {unknown}; choose from {sorted(table)}")
    rng = random.Random(f"agent-engine:{seed}" if patterns is None else f"agent-engine:{seed}:{','.join(patterns)}")

    def one():
        pattern = None if patterns is None else rng.choices(patterns, weights=[table[p][1] for p in patterns])[0]
        w, t, name = transcript(rng, pattern)
        return Example(tuple(messages_of(w, t, bundle)), "agent", f"engine/agent/{name}/{w.domain.noun}")

    return draw_verified(n, one, "the agent engine")


def draw_verified(n: int, make, what: str) -> list:
    """`n` results of `make()`, skipping the draws that raise `Skip` (at most 20 per result, plus 100)."""
    out, tries = [], 0
    while len(out) < n:
        tries += 1
        if tries > 20 * n + 100:
            raise RuntimeError(f"{what} skipped too many draws")
        try:
            out.append(make())
        except Skip:
            continue
    return out
