"""Failure-driven data: training episodes for the skill the agent's failure clusters point at.

Skill `lookup_then_act` (clusters act_without_lookup / wrong_state / no_call: the agent acts
without first looking up the fact the action needs, or looks it up and then answers instead of
acting). Episodes compose two tools the way the held-out families do (a lookup, then a write that
carries a value the lookup returned into another tool) but on compositions that are in no split of
any contract: calendar+reminders, commerce+notes, calendar+notes, reminders+calendar and
commerce+calendar (test composes calendar+contacts and contacts+reminders; v5 dev composes
contacts+notes and commerce+reminders).
Skill `state_facts` (cluster missing_facts: the agent did the right thing but its final reply
leaves out what the tools returned, e.g. the amount of a refund): episodes of a lookup, a write,
and a final reply that states the value the write returned, on writes that are in no v5 split
(cancel an unshipped order and state the amount, tick off a reminder and state its due date,
change a contact's phone and state their company).
Skill `fill_placeholders` (cluster copied_placeholder: the write carries the request's `<...>`
placeholder instead of the value the lookup returned): the same five compositions, requests that
name the value to fill in with an angle-bracket placeholder, gold writes that carry the value.
Skill `pick_tools` (clusters empty_lookup: the agent looked the fact up in the wrong place, e.g.
a person's phone number in the calendar, and wrote anyway; answered_after_lookup: it looked up and
then answered where the request asked for a change): lookups with the tools the other skills'
data leaves out (search_notes, search_contacts, list_reminders) and writes chosen by the request's
verb (append, delete, update, create), several phrased as a wish or a question rather than an
order ("Could you ...?", "I'd like ..."), on compositions in no split (notes alone,
reminders+notes, reminders alone with delete, contacts alone with an email derived from the
looked-up one).
Skill `find_person` (cluster empty_lookup, most often a person's phone number looked for in the
calendar; the lookup-then-act data looks up events in three of its five compositions): a person's
phone, company or email looked up in the contacts and written onto another contact, the field named
by the request; two lookups, then an update (contacts alone, as in train, but a value carried from
one contact into another; test composes contacts with calendar and reminders, v5 dev with notes).
Skill `verb_to_write` (kept for the record: run-q3's generation 6; cluster answered_after_lookup: the agent looked the record up, then
answered, e.g. with an order's status where a refund was asked; run-q3's union also cancelled
delivered orders it was asked to refund): the write the request asks for among a record's sibling writes, chosen by the
request's verb and the record's status; a refund of a delivered order or a cancellation of an
unshipped one, whichever the order allows, each followed by a note (commerce+notes, in no split),
and a reminder ticked off or deleted by what the request says happened (reminders alone, as in
train). No episode refunds an order outside the refund window (the test split's refusal).
Skill `order_writes` (cluster answered_after_lookup, replacing verb_to_write in the operator after
run-q3's generation 6: verb_to_write's reminder episodes taught the agent to tick off a reminder
when asked for a refund): the write an order allows, on orders only: a refund of a delivered order
inside the refund window, then a note with the amount or an event to drop it off
(commerce+notes, commerce+calendar, in no split), or a refund or a cancellation by the order's
status, then a note. No episode refunds an order outside the window (the test split's refusal).
Skill `show_values` (GenUI cluster missing_content: the card renders but leaves out items, fields
or values of the request's data): gold cards that show every value of the data, on card families in
no split (shopping list, team roster, flight status, bill split, recipe), built from the components
of the GenUI train families only (Card, Column, Row, List, Text, Button, Divider); v5 dev holds out
itinerary and form, test product_list and preferences. From data version 3 the cards (and the genui
replay trained beside them) are written inline (`card_style`): each value a literal in the component
that shows it, each list's items spelled out, containers before what they hold.
Agent gold actions are replayed on a real substrate episode (`train.builders.agent_episode`), in the
served layout (successor.py's `failure_data` step trains on them, warm-started, with a replay).
Data only: knows nothing about training or the loop.
"""

from __future__ import annotations

import datetime as dt
import json
import random
from dataclasses import replace

from macaronic.specialist import output_of
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


def cancel_amount(rng: random.Random, w: World):
    o = _pick(rng, [o for o in w.mine("orders", owner_field="customer") if o["status"] == "placed"], "unshipped order")
    request = rng.choice((
        f"Cancel the {o['item'].lower()} order and tell me how much it was.",
        f"Please cancel my {o['item'].lower()} order; what amount does that free up?",
    ))
    return request, [("list_orders", {"query": o["item"]}), ("cancel_order", {"order_id": o["id"]})], \
        [f"{o['amount_cents'] // 100}.{o['amount_cents'] % 100:02d}"]


def complete_due(rng: random.Random, w: World):
    r = _pick(rng, [r for r in w.mine("reminders", done=0) if r.get("due")], "open reminder with a due date")
    request = rng.choice((
        f"Tick off '{r['title']}' and remind me when it was due.",
        f"Mark '{r['title']}' as done. What was its due date?",
    ))
    return request, [("list_reminders", {"query": r["title"]}), ("complete_reminder", {"reminder_id": r["id"]})], \
        [r["due"][:10]]


def phone_company(rng: random.Random, w: World):
    c = _pick(rng, [c for c in w.mine("contacts") if c.get("company")], "contact with a company")
    phone = f"+1-555-{rng.randrange(100, 1000):03d}-{rng.randrange(0, 10000):04d}"
    request = rng.choice((
        f"Update {c['name']}'s phone to {phone}, and which company are they with again?",
        f"{c['name']} changed numbers: {phone}. Save it and tell me where they work.",
    ))
    return request, [("search_contacts", {"query": c["name"]}),
                     ("update_contact", {"contact_id": c["id"], "phone": phone})], [c["company"]]


def ph_event_reminder(rng: random.Random, w: World):
    ev = _pick(rng, [e for e in w.mine("events") if e["start"][:10] >= w.today.isoformat()], "future event")
    day = ev["start"][:10]
    request = rng.choice((
        f"Add a reminder 'Prepare for {ev['title']} on <date>' due that day, with the event's date filled in.",
        f"Look up my '{ev['title']}' and set a reminder titled 'Prepare for {ev['title']} on <date>' due the same "
        "day, <date> being its date.",
    ))
    return request, [("list_events", {"query": ev["title"]}),
                     ("add_reminder", {"title": f"Prepare for {ev['title']} on {day}", "due": day})], []


def ph_order_note(rng: random.Random, w: World):
    o = _pick(rng, w.mine("orders", owner_field="customer"), "order")
    request = rng.choice((
        f"Write a note titled '{o['item']} order' with the text 'Status: <status>', the order's status filled in.",
        f"Check my {o['item'].lower()} order and save a note '{o['item']} order' saying 'Status: <status>' "
        "with its real status.",
    ))
    return request, [("list_orders", {"query": o["item"]}),
                     ("create_note", {"title": f"{o['item']} order", "body": f"Status: {o['status']}"})], []


def ph_event_note(rng: random.Random, w: World):
    ev = _pick(rng, [e for e in w.mine("events") if e["start"][:10] >= w.today.isoformat()], "future event")
    request = rng.choice((
        f"Save a note '{ev['title']}' whose text is 'Starts at <start>', filled in from my calendar.",
        f"Find my '{ev['title']}' and make a note called '{ev['title']}' with the text 'Starts at <start>', "
        "<start> being its start time.",
    ))
    return request, [("list_events", {"query": ev["title"]}),
                     ("create_note", {"title": ev["title"], "body": f"Starts at {ev['start']}"})], []


def ph_reminder_event(rng: random.Random, w: World):
    r = _pick(rng, [r for r in w.mine("reminders") if r.get("due") and not r.get("done")], "open reminder with a due date")
    day = r["due"][:10]
    request = rng.choice((
        f"Put an event '{r['title']} (due <due date>)' on my calendar, 09:00-10:00 on the day that reminder is "
        "due, with the date filled in.",
        f"Check when '{r['title']}' is due and add an event titled '{r['title']} (due <due date>)' that day, "
        "09:00-10:00.",
    ))
    return request, [("list_reminders", {"query": r["title"]}),
                     ("create_event", {"title": f"{r['title']} (due {day})", "start": f"{day}T09:00",
                                       "end": f"{day}T10:00"})], []


def note_append(rng: random.Random, w: World):
    n = _pick(rng, w.mine("notes"), "note")
    line = rng.choice(("Bring the charger.", "Ask about the deposit.", "Check the weather first.",
                       "Compare prices online.", "Call back before Friday."))
    topic = n["title"].lower()
    request = rng.choice((
        f"Add the line '{line}' to my {topic} note.",
        f"Could you put '{line}' at the end of my note '{n['title']}'?",
        f"I'd like my {topic} note to also say: {line}",
    ))
    return request, [("search_notes", {"query": n["title"]}),
                     ("append_to_note", {"note_id": n["id"], "text": line})], []


def reminder_to_note(rng: random.Random, w: World):
    r = _pick(rng, [r for r in w.mine("reminders") if r.get("due") and not r.get("done")], "open reminder with a due date")
    request = rng.choice((
        f"When is '{r['title']}' due? Save a note titled '{r['title']} due' whose text is that date.",
        f"Could you write the due date of my '{r['title']}' reminder into a new note called '{r['title']} due'?",
    ))
    return request, [("list_reminders", {"query": r["title"]}),
                     ("create_note", {"title": f"{r['title']} due", "body": r["due"][:10]})], []


def reminder_delete(rng: random.Random, w: World):
    r = _pick(rng, w.mine("reminders", done=0), "open reminder")
    request = rng.choice((
        f"Delete my reminder '{r['title']}'; I don't need it any more.",
        f"I'd like the '{r['title']}' reminder gone, please remove it.",
        f"Could you drop the reminder about '{r['title']}'? It's not happening.",
    ))
    return request, [("list_reminders", {"query": r["title"]}), ("delete_reminder", {"reminder_id": r["id"]})], []


def contact_email_domain(rng: random.Random, w: World):
    c = _pick(rng, [c for c in w.mine("contacts") if "@" in (c.get("email") or "")], "contact with an email")
    domain = rng.choice(("mail.example", "newco.example", "hq.example", "team.example"))
    local = c["email"].split("@")[0]
    request = rng.choice((
        f"{c['name']}'s email moved to the domain {domain}. Update it, keeping the part before the @.",
        f"Could you change {c['name']}'s email to the same name at {domain}?",
        f"I'd like {c['name']}'s contact to use {domain} for email now (same user name).",
    ))
    return request, [("search_contacts", {"query": c["name"]}),
                     ("update_contact", {"contact_id": c["id"], "email": f"{local}@{domain}"})], []



def _copy_field(field_: str, phrasings):
    """A family: one contact's `field_` looked up and written onto a second contact whose `field_`
    differs; `phrasings` are request templates over {src} and {dst} (the two names)."""
    def build(rng: random.Random, w: World):
        people = [c for c in w.mine("contacts") if c.get(field_)]
        src = _pick(rng, people, f"contact with a {field_}")
        dst = _pick(rng, [c for c in people if c["id"] != src["id"] and c[field_] != src[field_]],
                    f"second contact with another {field_}")
        request = rng.choice(phrasings).format(src=src["name"], dst=dst["name"])
        return request, [("search_contacts", {"query": src["name"]}), ("search_contacts", {"query": dst["name"]}),
                         ("update_contact", {"contact_id": dst["id"], field_: src[field_]})], []
    return build


company_match = _copy_field("company", (
    "{dst} now works at the same company as {src}. Update {dst}'s contact.",
    "Could you set {dst}'s company to whatever company {src} is with?",
    "I'd like {dst}'s contact to show {src}'s company, they joined it last week."))
_SHARED_PHONE = ("{dst} shares {src}'s phone line now. Give {dst}'s contact that number.",
                 "Put {src}'s number on {dst}'s contact too, they answer the same phone.",
                 "Can you make {dst}'s phone the same as {src}'s?")
shared_phone = _copy_field("phone", _SHARED_PHONE)
# Data version 1 (run-q3's generations 3-8) phrased one request with the contract's contacts+notes
# dev family's own parenthetical, "(find it first)"; generation 8's union then wrote "find it first."
# as a note's text on that dev family. Version 2 words it otherwise; version 1 stays for reruns.
shared_phone_v1 = _copy_field("phone", (_SHARED_PHONE[0], "Copy {src}'s phone number into {dst}'s contact (find it first).",
                                        _SHARED_PHONE[2]))
shared_inbox = _copy_field("email", (
    "{dst} reads mail at {src}'s email address now. Update {dst}'s contact.",
    "Please put {src}'s email address on {dst}'s contact as well."))



def _undo_phrasing(rng: random.Random, item: str, title: str) -> str:
    return rng.choice((
        f"I don't want the {item} any more. Undo that purchase the way its status allows and save a note "
        f"'{title}' with the status it had.",
        f"Could you back out of my {item} order (whatever its status permits) and keep a note '{title}' "
        f"saying what status it was in?",
        f"I'd like to be rid of the {item} order. Undo it and note its status under '{title}'.",
    ))


def refund_to_note(rng: random.Random, w: World):
    from macaronic.substrate.tools_commerce import REFUND_WINDOW_DAYS, money

    o = _pick(rng, [o for o in w.mine("orders", owner_field="customer", status="delivered")
                    if (w.today - dt.date.fromisoformat(o["delivered_on"][:10])).days <= REFUND_WINDOW_DAYS],
              "delivery inside the refund window")
    item, title, amount = o["item"].lower(), f"Refund: {o['item']}", money(o["amount_cents"])
    request = rng.choice((
        f"I'm sending the {item} back. Get my money back and save a note '{title}' with the amount.",
        f"Could you refund my {item} order and write a note titled '{title}' saying how much came back?",
        f"I'd like a refund on the {item}; keep a note '{title}' with the amount too.",
    ))
    return request, [("list_orders", {"query": o["item"]}), ("refund_order", {"order_id": o["id"]}),
                     ("create_note", {"title": title, "body": amount})], [amount]


def undo_to_note(rng: random.Random, w: World):
    from macaronic.substrate.tools_commerce import REFUND_WINDOW_DAYS

    def undoable(o, status):  # half cancellations, half refunds: the status decides, not the words
        return o["status"] == status and (status == "placed" or
                                          (w.today - dt.date.fromisoformat(o["delivered_on"][:10])).days
                                          <= REFUND_WINDOW_DAYS)

    status = rng.choice(("placed", "delivered"))
    o = _pick(rng, [o for o in w.mine("orders", owner_field="customer") if undoable(o, status)], f"{status} order")
    title = f"Undone: {o['item']}"
    write = ("cancel_order" if o["status"] == "placed" else "refund_order", {"order_id": o["id"]})
    return _undo_phrasing(rng, o["item"].lower(), title), [("list_orders", {"query": o["item"]}), write,
                                                           ("create_note", {"title": title, "body": o["status"]})], []


def done_or_drop(rng: random.Random, w: World):
    r = _pick(rng, w.mine("reminders", done=0), "open reminder")
    done = rng.random() < 0.5
    request = rng.choice((f"I finished '{r['title']}'. Mark it done.",
                          f"Could you tick off '{r['title']}'? That's taken care of.",
                          f"'{r['title']}' happened already; check it off, please.") if done else
                         (f"Forget about '{r['title']}', it's off. Remove the reminder.",
                          f"I'd like '{r['title']}' gone from my reminders; it isn't happening.",
                          f"Could you get rid of the '{r['title']}' reminder? No longer needed."))
    write = "complete_reminder" if done else "delete_reminder"
    return request, [("list_reminders", {"query": r["title"]}), (write, {"reminder_id": r["id"]})], []



def refund_to_event(rng: random.Random, w: World):
    from macaronic.substrate.tools_commerce import REFUND_WINDOW_DAYS, money

    o = _pick(rng, [o for o in w.mine("orders", owner_field="customer", status="delivered")
                    if (w.today - dt.date.fromisoformat(o["delivered_on"][:10])).days <= REFUND_WINDOW_DAYS],
              "delivery inside the refund window")
    day = w.today + dt.timedelta(days=rng.randrange(1, 6))
    hour = rng.randrange(9, 18)
    title, item = f"Drop off {o['item'].lower()}", o["item"].lower()
    request = rng.choice((
        f"The {item} has to go back: get me a refund and block {day.isoformat()} {hour}:00-{hour}:30 in my "
        f"calendar as '{title}'.",
        f"Can I have my money back for the {item}? Also put '{title}' on {day.isoformat()} from {hour}:00 to "
        f"{hour}:30.",
        f"I'd like to return my {item} for a refund, and add an event '{title}' on {day.isoformat()}, "
        f"{hour}:00 to {hour}:30.",
    ))
    return request, [("list_orders", {"query": o["item"]}), ("refund_order", {"order_id": o["id"]}),
                     ("create_event", {"title": title, "start": f"{day.isoformat()}T{hour:02d}:00",
                                       "end": f"{day.isoformat()}T{hour:02d}:30"})], [money(o["amount_cents"])]


# ---- GenUI: show every value -------------------------------------------------------------

GROCERIES = ["Eggs", "Milk", "Rice", "Apples", "Coffee beans", "Tomatoes", "Bread", "Lentils", "Butter"]
DISHES = {"Pancakes": ["Flour", "Milk", "Eggs", "Butter", "Sugar"],
          "Tomato soup": ["Tomatoes", "Onion", "Garlic", "Stock", "Basil"],
          "Fried rice": ["Rice", "Eggs", "Peas", "Soy sauce", "Spring onion"],
          "Lentil curry": ["Lentils", "Coconut milk", "Curry paste", "Spinach", "Lime"]}
AIRPORTS = ["LIS", "OSL", "NBO", "YUL", "KIX", "AUS", "LIM", "TBS"]


def shopping_list(rng: random.Random, sid: str):
    from macaronic.genui.build import Card
    from macaronic.genui.tasks import Requirements

    rows = [{"item": g, "qty": str(rng.randint(1, 6))} for g in rng.sample(GROCERIES, rng.choice([3, 4, 5]))]
    prompts = ["Show my shopping list.", "Put my groceries in a list card with a button to mark them bought.",
               "Can I see what I still need to buy?", "Shopping list card, with quantities, please."]
    c = Card(sid)
    c.card("root", c.column("body", c.text("title", "Shopping list", "h2"), "items", "bought"))
    c.list("items", "item", "/items")
    c.row("item", c.text("item-name", "@item", "body"), c.text("item-qty", "@qty", "caption"),
          distribution="spaceBetween")
    c.button("bought", "Mark all bought", "mark_bought", primary=True)
    c.items("/items", rows)
    req = Requirements(("Card", "List", "Button"), tuple(r["item"] for r in rows) + tuple(r["qty"] for r in rows),
                       ("mark_bought",))
    return prompts, {"items": rows}, f"{len(rows)} things to buy.", c.messages("root"), req


def team_roster(rng: random.Random, sid: str):
    from macaronic.genui.build import Card
    from macaronic.genui.tasks import PEOPLE, Requirements

    roles = ["Engineer", "Designer", "Product lead", "Researcher", "Analyst", "Tester"]
    rows = [{"name": n, "role": rng.choice(roles)} for n in rng.sample(PEOPLE, rng.choice([2, 3, 4]))]
    team = rng.choice(["Platform", "Growth", "Mobile", "Data"])
    prompts = [f"Show the {team} team with everyone's role.", f"Who is on the {team} team? Card please.",
               f"List the {team} team members and add a button to message them all.",
               f"Render a roster card for team {team}."]
    c = Card(sid)
    c.card("root", c.column("body", c.text("title", "/team", "h2"), "members", "message"))
    c.list("members", "member", "/members")
    c.column("member", c.text("member-name", "@name", "h4"), c.text("member-role", "@role", "caption"))
    c.button("message", "Message team", "message_team", {"team": "/team"})
    c.data({"team": team})
    c.items("/members", rows)
    req = Requirements(("Card", "List", "Button"), (team, *(r["name"] for r in rows), *(r["role"] for r in rows)),
                       ("message_team",), (("message_team", "team", team),))
    return prompts, {"team": team, "members": rows}, f"The {team} team has {len(rows)} people.", \
        c.messages("root"), req


def flight_status(rng: random.Random, sid: str):
    from macaronic.genui.build import Card
    from macaronic.genui.tasks import Requirements

    a, b = rng.sample(AIRPORTS, 2)
    data = {"flight": f"{rng.choice(['TP', 'SK', 'KQ', 'AC'])} {rng.randint(100, 9999)}", "from": a, "to": b,
            "departs": f"{rng.randint(5, 22):02d}:{rng.choice(['05', '20', '35', '50'])}",
            "gate": f"{rng.choice('ABCDE')}{rng.randint(1, 40)}"}
    prompts = [f"Show the status of flight {data['flight']}.", f"Flight card for {data['flight']}, with a check-in button.",
               f"When does {data['flight']} leave and from which gate?", f"Put my flight {data['flight']} in a card."]
    c = Card(sid)
    c.card("root", c.column("body", c.text("title", "/flight", "h2"), "route", c.add("div", "Divider"),
                            c.text("departs", "/departs", "body"), c.text("gate", "/gate", "body"), "checkin"))
    c.row("route", c.text("from", "/from", "h4"), c.text("arrow", "to", "caption"), c.text("to", "/to", "h4"),
          alignment="center")
    c.button("checkin", "Check in", "check_in", {"flight": "/flight"}, primary=True)
    c.data(data)
    req = Requirements(("Card", "Button"), tuple(data.values()), ("check_in",), (("check_in", "flight", data["flight"]),))
    return prompts, data, f"Flight {data['flight']} departs at {data['departs']}.", c.messages("root"), req


def bill_split(rng: random.Random, sid: str):
    from macaronic.genui.build import Card
    from macaronic.genui.tasks import PEOPLE, Requirements, money

    rows = [{"name": n.split()[0], "owes": money(rng, 5, 60)} for n in rng.sample(PEOPLE, rng.choice([2, 3, 4]))]
    total = money(rng, 60, 240)
    prompts = ["Show who owes what for dinner.", "Split the bill: a card with each person's share and the total.",
               "Can you lay out the bill split with a settle-up button?", "Bill split card, please."]
    c = Card(sid)
    c.card("root", c.column("body", c.text("title", "Bill split", "h2"), "shares", c.add("div", "Divider"),
                            "total-row", "settle"))
    c.list("shares", "share", "/shares")
    c.row("share", c.text("share-name", "@name", "body"), c.text("share-owes", "@owes", "body"),
          distribution="spaceBetween")
    c.row("total-row", c.text("total-label", "Total", "h4"), c.text("total", "/total", "h4"),
          distribution="spaceBetween")
    c.button("settle", "Settle up", "settle_up", {"total": "/total"}, primary=True)
    c.data({"total": total})
    c.items("/shares", rows)
    req = Requirements(("Card", "List", "Divider", "Button"),
                       (total, *(r["name"] for r in rows), *(r["owes"] for r in rows)), ("settle_up",))
    return prompts, {"shares": rows, "total": total}, f"The bill comes to {total}.", c.messages("root"), req


def recipe(rng: random.Random, sid: str):
    from macaronic.genui.build import Card
    from macaronic.genui.tasks import Requirements

    dish = rng.choice(sorted(DISHES))
    rows = [{"name": i} for i in rng.sample(DISHES[dish], rng.choice([3, 4, 5]))]
    prompts = [f"Show the ingredients for {dish.lower()}.", f"Recipe card for {dish.lower()}, please.",
               f"What do I need for {dish.lower()}? Put it in a card with a start button.",
               f"List the {dish.lower()} ingredients."]
    c = Card(sid)
    c.card("root", c.column("body", c.text("title", "/dish", "h2"), "ingredients", "start"))
    c.list("ingredients", "ingredient", "/ingredients")
    c.text("ingredient", "@name", "body")
    c.button("start", "Start cooking", "start_cooking", {"dish": "/dish"})
    c.data({"dish": dish})
    c.items("/ingredients", rows)
    req = Requirements(("Card", "List", "Button"), (dish, *(r["name"] for r in rows)), ("start_cooking",))
    return prompts, {"dish": dish, "ingredients": [r["name"] for r in rows]}, f"{dish} needs {len(rows)} things.", \
        c.messages("root"), req


def genui_task(fam: Family, index: int, seed: int = 0):
    """A GenUITask of a family outside the suite's table (split "evolve")."""
    from macaronic.genui.tasks import build_task as build_genui

    return build_genui(fam.name, fam.build, index, seed, "evolve", salt="evolve:")


# Skill `calls_together` (BFCL parallel-multiple lost by the warm starts of 2026-12-04: every other
# skill's episode makes one call a step, and the adapter learnt to make the first of two independent
# calls and wait): two lookup-then-act requests in one message, on different tools; both lookups in
# one step, both writes in the next (`AgentTask.groups`), the reply names both writes.
TOGETHER = ((event_to_reminder, order_to_note, "calendar+reminders+commerce+notes"),
            (event_to_reminder, order_to_event, "calendar+reminders+commerce"),
            (reminder_to_event, order_to_note, "reminders+calendar+commerce+notes"),
            (event_to_note, reminder_to_event, "calendar+notes+reminders"),
            (event_to_note, order_to_event, "calendar+notes+commerce"))
JOINS = ("Also, ", "And ", "Second thing: ", "Separately, ", "")


def _together(first, second):
    def build(rng: random.Random, w: World):
        r1, g1, f1 = first(rng, w)
        r2, g2, f2 = second(rng, w)
        join = rng.choice(JOINS)
        r2 = r2[0].lower() + r2[1:] if join in ("Also, ", "And ") else r2
        return f"{r1} {join}{r2}", [g1[0], g2[0], g1[1], g2[1]], [*f1, *f2]
    return build


SKILLS = {"fill_placeholders": (Family("ph_event_reminder", "evolve", "calendar+reminders", ph_event_reminder),
                                Family("ph_order_note", "evolve", "commerce+notes", ph_order_note),
                                Family("ph_event_note", "evolve", "calendar+notes", ph_event_note),
                                Family("ph_reminder_event", "evolve", "reminders+calendar", ph_reminder_event)),
          "state_facts": (Family("cancel_amount", "evolve", "commerce", cancel_amount),
                          Family("complete_due", "evolve", "reminders", complete_due),
                          Family("phone_company", "evolve", "contacts", phone_company)),
          "lookup_then_act": (Family("event_to_reminder", "evolve", "calendar+reminders", event_to_reminder),
                              Family("order_to_note", "evolve", "commerce+notes", order_to_note),
                              Family("event_to_note", "evolve", "calendar+notes", event_to_note),
                              Family("reminder_to_event", "evolve", "reminders+calendar", reminder_to_event),
                              Family("order_to_event", "evolve", "commerce+calendar", order_to_event)),
          "pick_tools": (Family("note_append", "evolve", "notes", note_append),
                         Family("reminder_to_note", "evolve", "reminders+notes", reminder_to_note),
                         Family("reminder_delete", "evolve", "reminders", reminder_delete),
                         Family("contact_email_domain", "evolve", "contacts", contact_email_domain)),
          "find_person": (Family("company_match", "evolve", "contacts", company_match),
                          Family("shared_phone", "evolve", "contacts", shared_phone),
                          Family("shared_inbox", "evolve", "contacts", shared_inbox)),
          "order_writes": (Family("refund_to_note", "evolve", "commerce+notes", refund_to_note),
                           Family("undo_to_note", "evolve", "commerce+notes", undo_to_note),
                           Family("refund_to_event", "evolve", "commerce+calendar", refund_to_event)),
          "verb_to_write": (Family("refund_to_note", "evolve", "commerce+notes", refund_to_note),
                            Family("undo_to_note", "evolve", "commerce+notes", undo_to_note),
                            Family("done_or_drop", "evolve", "reminders", done_or_drop)),
          "calls_together": tuple(Family(f"together_{a.__name__}_{b.__name__}", "evolve", domains, _together(a, b),
                                         groups=(2, 2)) for a, b, domains in TOGETHER),
          "show_values": (Family("shopping_list", "evolve", "genui", shopping_list),
                          Family("team_roster", "evolve", "genui", team_roster),
                          Family("flight_status", "evolve", "genui", flight_status),
                          Family("bill_split", "evolve", "genui", bill_split),
                          Family("recipe", "evolve", "genui", recipe))}
ROLE = {"show_values": "genui"}  # every other skill is the agent's
# The data version in which each skill's families last changed (a skill not named: version 1). A
# failure_data step names the version it was built with ("data"; none is 1), so a step screened under
# one version is not mistaken for the same candidate under another.
# Version 3: show_values' cards are written inline (`genui.inline`: each value a literal where it is
# shown, each list its items spelled out, containers first), and so is the genui replay beside them;
# generation 2 and 12's cards kept values in the data model and the adapter learnt to fill the data
# model without the components that show it. From version 3 the replay also leaves out the
# contract's dev families (successor.dev_families: the shipped GenUI adapter's data holds v5's dev
# families itinerary and form, and generation 12 replayed them).
CHANGED = {"find_person": 2, "show_values": 3}
DATA_VERSION = max(CHANGED.values(), default=1)
INLINE_CARDS = NO_DEV_REPLAY = 3  # the data version from which genui cards are inline / dev families not replayed
_V1 = {"find_person": tuple(replace(f, build=shared_phone_v1) if f.name == "shared_phone" else f
                            for f in SKILLS["find_person"])}


def step_version(skills) -> int:
    """The version a failure_data step over `skills` names: unchanged skills keep version 1, so a
    step over them keeps its signature (it would give the same data again)."""
    return max((CHANGED.get(s, 1) for s in skills), default=1)


def families(skill: str, version: int = DATA_VERSION) -> tuple[Family, ...]:
    """The skill's families as data version `version` built them."""
    if not 1 <= version <= DATA_VERSION:
        raise ValueError(f"failure data version {version} is unknown (this build knows 1..{DATA_VERSION})")
    return _V1.get(skill, SKILLS[skill]) if version == 1 else SKILLS[skill]


def make(fam: Family, seed: int) -> AgentTask:
    """`substrate.tasks.make_task` for a family outside the suite's table."""
    return build_task(fam, seed)


def examples(skill: str, n: int, seed: int = 0, version: int = DATA_VERSION) -> list[dict]:
    fams = families(skill, version)
    if output_of(ROLE.get(skill)) == "card":
        from macaronic.train.builders import genui_example

        out = [genui_example(genui_task(fams[i % len(fams)], i // len(fams), seed)).to_dict() for i in range(n)]
        return [card_style(e, version) for e in out]
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


def card_style(example: dict, version: int = DATA_VERSION) -> dict:
    """A genui training example as data version `version` writes its card: from version 3 inline
    (`genui.inline`); before, as built. An example whose reply is not a card is left as it is."""
    if version < INLINE_CARDS:
        return example
    from macaronic.genui.inline import inline
    from macaronic.train.builders import genui_reply

    msgs = example["messages"]
    try:
        reply = json.loads(msgs[-1]["content"])
        reply = {**reply, "a2ui": inline(reply["a2ui"])}
    except (ValueError, KeyError, TypeError, AttributeError):
        return example
    return {**example, "messages": [*msgs[:-1], {**msgs[-1], "content": genui_reply(reply)}]}
