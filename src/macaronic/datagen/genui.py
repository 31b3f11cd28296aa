"""The GenUI data engine: requests that name values and imply components, in many phrasings, each
with a gold card that shows every named value and uses the components the request implies.

Intents: an info card (a record's labelled values), a form (text, long text, number, date, a
single choice, a checkbox, a submit button that sends every field), a checklist, a settings card
of sliders, a choice among priced options, a list of rows, tabs, a date-and-slot picker, a stats
summary, a media card (audio, video or image with its title and detail), a decision card with two
named answer buttons, a profile card with a divider and two action buttons, and a notice behind a
button that opens a modal. Requests name the values inline, as a person types them ("a bug report form with a title
field, a severity choice (low, medium, high) and a Submit button"); one in four passes the values
as a `Data:` block instead. Kinds, labels and values are this engine's own: none is a GenUI suite
family's (meetings, weather, order_refund, contact, todo, confirm, form kinds, itinerary,
product_list, preferences), and `tests/datagen` checks it.

`verify` parses the reply as the server does (official A2UI v0.8 schema and integrity, no repair
needed) and renders it: every required component type, value and action must be in the rendered
card. Only verified examples are kept. Knows nothing about models or training.

    examples(n, seed) -> list[Example]     # `macaronic train genui --generator genui_engine`

`open_values=True` is the open engine (drawn button labels, redrawn numbers and codes, polls and named
tabs); `compose=True` the composing engine (named buttons, fields and checkboxes added to any intent);
`mix=True` with both, the mixing engine (widgets of several controls, lists as Lists, other languages).
"""

from __future__ import annotations

import contextvars
import dataclasses
import json
import random
import re

from macaronic.genui.build import Card
from macaronic.genui.tasks import Requirements

FORMS = {  # kind -> fields: (label, key, type, options)
    "bug report": [("Title", "title", "shortText", None), ("Severity", "severity", "choice", ["Low", "Medium", "High"]),
                   ("Steps to reproduce", "steps", "longText", None)],
    "RSVP": [("Your name", "name", "shortText", None), ("Attending", "attending", "checkbox", None),
             ("Number of guests", "guests", "number", None)],
    "job application": [("Full name", "name", "shortText", None), ("Role", "role", "choice", ["Designer", "Engineer", "Analyst"]),
                        ("Start date", "start", "date", None), ("Cover letter", "letter", "longText", None)],
    "support request": [("Email", "email", "shortText", None), ("Topic", "topic", "choice", ["Billing", "Technical", "Account"]),
                        ("Message", "message", "longText", None)],
    "newsletter signup": [("Email address", "email", "shortText", None), ("Weekly digest", "weekly", "checkbox", None)],
    "expense claim": [("Description", "description", "shortText", None), ("Amount", "amount", "number", None),
                      ("Date of purchase", "date", "date", None), ("Category", "category", "choice", ["Travel", "Meals", "Supplies"])],
    "room booking": [("Room", "room", "choice", ["Aurora", "Basalt", "Cedar"]), ("Date", "date", "date", None),
                     ("Attendees", "attendees", "number", None)],
    "course registration": [("Student name", "student", "shortText", None), ("Course", "course", "choice", ["Pottery", "Photography", "Spanish"]),
                            ("Evening classes only", "evening", "checkbox", None)],
    "pet adoption": [("Your name", "name", "shortText", None), ("Preferred animal", "animal", "choice", ["Cat", "Dog", "Rabbit"]),
                     ("Tell us about your home", "home", "longText", None)],
    "volunteer signup": [("Name", "name", "shortText", None), ("Phone", "phone", "shortText", None),
                         ("Available from", "from", "date", None), ("Has a driving licence", "licence", "checkbox", None)],
}
TYPE_WORDS = {"shortText": ("field", "box", "input"), "longText": ("text area", "box", "field"),
              "number": ("number field", "field"), "date": ("date picker", "date field"),
              "choice": ("choice", "dropdown", "selector"), "checkbox": ("checkbox", "tick box")}

RECORDS = {  # kind -> (title template, [(label, value pool)])
    "flight": ("Flight {v0}", [("Flight", ["BA 284", "LH 1123", "AF 7712", "KL 604", "IB 3150"]),
                               ("From", ["London", "Madrid", "Berlin", "Dublin", "Prague"]),
                               ("To", ["Valletta", "Vienna", "Athens", "Riga", "Porto"]),
                               ("Gate", ["B12", "A3", "C27", "D5", "E14"]), ("Boarding", ["09:40", "13:05", "18:20", "07:15"])]),
    "parcel": ("Parcel {v0}", [("Tracking number", ["ZX-88213", "QP-40291", "MN-11876", "RT-55032"]),
                               ("Carrier", ["Parcelfast", "GreenPost", "Swift Couriers"]),
                               ("Status", ["With the courier", "In transit", "Delivered", "Held at depot"]),
                               ("Expected", ["Tuesday", "Friday", "tomorrow", "12 June"])]),
    "utility bill": ("Electricity bill", [("Account", ["AC-30017", "AC-77120", "AC-41568"]),
                                          ("Amount due", ["$84.20", "$126.75", "$59.10", "$211.00"]),
                                          ("Due date", ["5 May", "18 September", "30 November"]),
                                          ("Usage", ["412 kWh", "655 kWh", "298 kWh"])]),
    "hotel booking": ("Booking at {v0}", [("Hotel", ["Harbour Inn", "The Linden", "Casa Verde", "Nordlys Lodge"]),
                                          ("Check-in", ["3 March", "21 July", "9 October"]),
                                          ("Nights", ["2", "3", "5", "7"]), ("Room", ["Double", "Twin", "Suite"]),
                                          ("Confirmation", ["HX7731", "LN0924", "CV5518"])]),
    "match score": ("{v0} vs {v1}", [("Home", ["Rovers", "Falcons", "City", "Wanderers"]),
                                     ("Away", ["United", "Athletic", "Rangers", "Harriers"]),
                                     ("Score", ["2-1", "0-0", "3-2", "1-4"]), ("Minute", ["45'", "78'", "90+2'", "FT"])]),
    "car rental": ("Rental {v0}", [("Reservation", ["CR-5512", "CR-9034", "CR-2760"]),
                                   ("Car", ["Compact hatchback", "Electric SUV", "Estate"]),
                                   ("Pick-up", ["Airport desk", "Central station", "Harbour office"]),
                                   ("Return by", ["Sunday 18:00", "Monday 09:00", "Friday noon"])]),
    "bank transfer": ("Transfer receipt", [("To", ["Maya Chen", "Oskar Berg", "Lina Haddad"]),
                                           ("Amount", ["€150.00", "€42.50", "€1,200.00"]),
                                           ("Reference", ["Rent March", "Concert tickets", "Dinner split"]),
                                           ("Date", ["2 April", "15 August", "29 December"])]),
    "prescription": ("Prescription", [("Medicine", ["Amoxicillin 500 mg", "Ibuprofen 200 mg", "Loratadine 10 mg"]),
                                      ("Dose", ["one tablet twice a day", "two tablets at night", "one tablet daily"]),
                                      ("Refills", ["0", "1", "2", "3"]), ("Pharmacy", ["Elm Street Pharmacy", "Riverside Chemist"])]),
}
CHECKLISTS = {"packing for a beach trip": ["Sunscreen", "Towel", "Swimsuit", "Sunglasses", "Water bottle", "Book"],
              "moving day": ["Book the van", "Label boxes", "Change address", "Defrost the fridge", "Return keys"],
              "launch day": ["Final QA pass", "Update changelog", "Notify support", "Post announcement", "Monitor errors"],
              "camping": ["Tent", "Sleeping bag", "Headlamp", "Stove", "First aid kit", "Matches"],
              "new hire onboarding": ["Laptop set up", "Badge issued", "Meet the team", "Read the handbook", "First 1:1"]}
SETTINGS = [("Volume", 0, 100), ("Brightness", 0, 100), ("Font size", 10, 32), ("Playback speed", 1, 3),
            ("Temperature", 16, 28), ("Fan speed", 1, 5), ("Daily goal (minutes)", 10, 120), ("Zoom", 50, 200)]
PLANS = {"subscription plan": [("Basic", "$5"), ("Plus", "$12"), ("Team", "$30"), ("Enterprise", "$99")],
         "delivery speed": [("Standard", "free"), ("Express", "$9"), ("Next morning", "$19")],
         "seat class": [("Economy", "$120"), ("Premium", "$260"), ("Business", "$540")],
         "coffee size": [("Small", "$2.80"), ("Medium", "$3.40"), ("Large", "$3.90")],
         "workshop ticket": [("Student", "$15"), ("Regular", "$40"), ("Supporter", "$75")]}
LISTS = {"reading list": [("Middlemarch", "George Eliot"), ("Beloved", "Toni Morrison"), ("Dune", "Frank Herbert"),
                          ("The Dispossessed", "Ursula K. Le Guin"), ("Kindred", "Octavia E. Butler")],
         "team roster": [("Maya Chen", "Design"), ("Oskar Berg", "Backend"), ("Lina Haddad", "QA"), ("Tom Reyes", "Mobile")],
         "playlist": [("Clair de Lune", "Debussy"), ("So What", "Dave Brubeck"), ("Teardrop", "Massive Attack"),
                      ("Hyperballad", "Björk")],
         "open tickets": [("Login loop on Safari", "High"), ("Export is slow", "Medium"), ("Typo in footer", "Low")],
         "wine list": [("Rioja Reserva", "$48"), ("Sancerre", "$52"), ("Barolo", "$95"), ("Vinho Verde", "$29")]}
TABS = {"product page": [("Overview", "A light, waterproof jacket for city and trail."), ("Specs", "Weight 320 g, two zip pockets."),
                         ("Reviews", "4.6 stars from 212 buyers.")],
        "course outline": [("Week 1", "Variables and types."), ("Week 2", "Loops and conditions."), ("Week 3", "Functions.")],
        "garden guide": [("Spring", "Sow peas and radishes."), ("Summer", "Water at dawn, mulch beds."),
                         ("Autumn", "Plant bulbs, rake leaves.")],
        "apartment listing": [("Details", "Two bedrooms, fourth floor, lift."), ("Location", "Five minutes from the metro."),
                              ("Price", "1,450 a month, bills extra.")]}
STATS = {"shop this week": [("Revenue", "$12,400"), ("Orders", "318"), ("Refunds", "4"), ("New customers", "57")],
         "website today": [("Visitors", "8,214"), ("Sign-ups", "143"), ("Bounce rate", "41%")],
         "fitness this month": [("Runs", "12"), ("Distance", "86 km"), ("Avg pace", "5:32 /km")],
         "support queue": [("Open", "23"), ("Waiting", "7"), ("Solved today", "64"), ("CSAT", "94%")]}
SLOTS = ["8-10 am", "10-12 am", "12-2 pm", "2-4 pm", "4-6 pm", "6-8 pm"]

OPEN = ("", "", "Can you make ", "Please build ", "I'd like ", "Show me ", "Give me ", "Could you create ", "Make ",
        "Hey, I need ")


VERB_OPEN = ("", "", "Please ", "Can you ", "Could you ", "Hey, ")


def _ask(rng: random.Random, body: str) -> str:
    if _NAME.get() and not body[:1].islower():  # the naming engine's sentences say it all themselves
        return body
    o = rng.choice(VERB_OPEN if body.startswith(("let me", "show", "put")) else OPEN)
    text = (o + body) if o else _cap(body)
    return text.rstrip(".") + ("?" if o.startswith(("Can", "Could")) else rng.choice((".", "", " please.", ", thanks.")))


def _cap(s: str) -> str:
    return s[:1].upper() + s[1:]


def _slug(s: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", s.lower()).strip("-")[:24] or "x"


# ---- the open engine (`genui_engine_open`, 2026-12-06) -----------------------------------
# Under `examples(..., open_values=True)` a button the request names carries, three times in five, a
# label drawn from about 2,000 (`all_labels`: a verb alone or with an object, a short phrase; "Publish"
# is listed twice and stays so, as the recorded data drew it), and a record's numbers and codes
# are redrawn half the time, so a card copies what the request says instead of recalling a label
# or value it saw in training. Off (the default), no intent draws anything more from its rng, so
# `genui_engine` and `genui_engine_wide` rebuild the data they recorded.
_OPEN = contextvars.ContextVar("genui_open", default=False)
LABEL_VERBS = ("Confirm", "Renew", "Track", "Reorder", "Pause", "Resume", "Upload", "Share", "Join", "Archive",
               "Restore", "Publish", "Preview", "Export", "Print", "Invite", "Follow", "Claim", "Redeem", "Donate",
               "Enroll", "Schedule", "Reschedule", "Add", "Edit", "Copy", "Open", "Finish", "Begin", "Play",
               "Skip", "Retry", "Report", "Order", "Register", "Upgrade", "Activate", "Unlock", "Verify",
               "Assign", "Notify", "Sign", "Accept", "Hold", "Release", "Approve", "Publish", "Rename", "Compare",
               "Extend", "Transfer", "Refill", "Sync", "Scan", "Rate", "Tip", "Split", "Close", "Reopen", "Pin")
LABEL_OBJECTS = ("order", "plan", "seat", "draft", "photo", "note", "trip", "file", "booking", "payment", "session",
                 "spot", "slot", "request", "changes", "details", "code", "invite", "entry", "profile", "route",
                 "shift", "loan", "device", "parcel", "reading", "score", "goal", "budget", "story", "room", "team")
LABEL_PHRASES = ("Next", "Done", "Continue", "Proceed", "Go", "Let's go", "Count me in", "Looks good", "Not now",
                 "Maybe later", "Try again", "Start over", "Show me", "Notify me", "Sign me up", "Got it",
                 "Go to checkout", "See all", "Learn more", "Keep going", "I'm in", "Place order", "Pay later",
                 "Add to cart", "Add to calendar", "Check in", "Check out", "Top up", "Log out", "Opt out")


def all_labels() -> list[str]:
    """Every label the open engine can draw (the disjointness test reads it)."""
    return sorted({*LABEL_VERBS, *LABEL_PHRASES, *(f"{v} {o}" for v in LABEL_VERBS for o in LABEL_OBJECTS)})


def open_label(rng: random.Random) -> str:
    while True:
        r = rng.random()
        if r < 0.45:
            label = f"{rng.choice(LABEL_VERBS)} {rng.choice(LABEL_OBJECTS)}"
        else:
            label = rng.choice(LABEL_PHRASES) if r < 0.7 else rng.choice(LABEL_VERBS)
        if not (_COMPOSE.get() and label.lower() in HELD_OUT) and not (_MIX.get() and label.lower() in MIX_HELD_OUT) \
                and not (_NAME.get() and label.lower() in NAME_HELD_OUT):
            return label  # the open engine draws once, as it recorded


def _label(rng: random.Random, usual: str) -> str:
    """The label of a button the request names: `usual`, or under the open engine three in five a drawn one."""
    if not _OPEN.get() or rng.random() >= 0.6:
        return usual
    return open_label(rng)


def _a(word: str) -> str:
    return ("an " if word.lstrip("'")[0].lower() in "aeiou" else "a ") + word


def _named(rng: random.Random, label: str) -> str:
    """A button named in a request: bare, or quoted under the open engine one time in three."""
    return f"'{label}'" if _OPEN.get() and rng.random() < 0.33 else label


def _fresh(rng: random.Random, v: str) -> str:
    """Under the open engine, half the time `v` with its times, digit runs and code letters redrawn."""
    if not _OPEN.get() or rng.random() < 0.5 or not any(ch.isdigit() for ch in v):
        return v
    v = re.sub(r"\b\d{1,2}:\d{2}\b", lambda m: f"{rng.randint(0, 23):02d}:{rng.choice((5, 10, 20, 35, 40, 55)):02d}", v)
    v = re.sub(r"(?<![:\d])\d+(?![:\d])", lambda m: str(rng.randint(1, 9)) + "".join(
        str(rng.randint(0, 9)) for _ in m.group()[1:]), v)
    v = re.sub(r"\b[A-Z]{2,3}(?=[- ]?\d)", lambda m: "".join(rng.choice("ABCDEFGHJKLMNPRSTUVWXYZ")
                                                         for _ in m.group()), v)
    if _NAME.get():  # the naming engine says these in sentences: a day of the month is one, a pace is minutes
        v = re.sub(r"\b(\d+)(?=(?:-\d+)? (?:January|February|March|April|May|June|July|August|September|October|November|December))",
                   lambda m: str(int(m.group(1)) % 28 + 1), v)
        v = re.sub(r"\b(\d+):(\d\d)(?= /km)", lambda m: f"{int(m.group(1)) % 4 + 4}:{m.group(2)}", v)
    return v


# ---- intents ------------------------------------------------------------------------------

def info_card(rng, c: Card):
    kind = rng.choice(sorted(RECORDS))
    title_t, fields = RECORDS[kind]
    vals = [(label, _fresh(rng, rng.choice(pool))) for label, pool in fields]
    title = title_t.format(**{f"v{i}": v for i, (_, v) in enumerate(vals)})
    named = ", ".join(f"{label.lower()} {v}" for label, v in vals)
    req = rng.choice((f"a card for my {kind}: {named}", f"a {kind} card showing {named}",
                      f"a summary card of this {kind} - {named}", f"{kind} details as a card ({named})"))
    data = {kind: dict(vals)}
    if _NAME.get() and rng.random() < 0.6:  # the naming engine: the values said in passing, in a sentence
        req, data = _told(rng, RECORD_SENTENCES[kind], vals), None
    rows = [c.row(f"r-{i}", c.text(f"l-{i}", label, "caption"), c.text(f"v-{i}", v, "body"))
            for i, (label, v) in enumerate(vals)]
    c.card("root", c.column("body", c.text("title", title, "h2"), *rows))
    return req, data, f"Here is your {kind}.", Requirements(("Card", "Text"), tuple(v for _, v in vals))


def form(rng, c: Card):
    kind = rng.choice(sorted(FORMS))
    fields = FORMS[kind]
    parts = []
    for label, _, ftype, opts in fields:
        w = rng.choice(TYPE_WORDS[ftype])
        named = f"'{label}'" if ftype == "checkbox" or " " in label and rng.random() < 0.5 else label.lower()
        part = f"{named} {w}" + (f" ({', '.join(o.lower() for o in opts)})" if opts else "")
        parts.append(("an " if part[0].lower() in "aeiou" else "a ") + part)
    button = _label(rng, rng.choice(("Submit", "Send", "Register", "Apply")))
    kind_a = ("an " if kind[0].lower() in "aeiou" else "a ") + kind
    button_a = _a(_named(rng, button))
    req = rng.choice((f"{kind_a} form with " + ", ".join(parts) + f" and {button_a} button",
                      f"{kind_a} form: " + "; ".join(parts) + f"; plus {button_a} button",
                      f"a form for {kind_a} that has " + ", ".join(parts) + f", and {button_a} button at the bottom"))
    ids, values, comps = [], [], ["Button"]
    data = {}
    for label, key, ftype, opts in fields:
        fid = f"f-{key}"
        if ftype in ("shortText", "longText", "number"):
            c.add(fid, "TextField", label={"literalString": label}, text={"path": f"/form/{key}"}, textFieldType=ftype)
            comps.append("TextField")
            data[key] = ""
        elif ftype == "date":
            c.column(fid, c.text(f"{fid}-label", label, "caption"),
                     c.add(f"{fid}-input", "DateTimeInput", value={"path": f"/form/{key}"}, enableDate=True, enableTime=False))
            comps.append("DateTimeInput")
            data[key] = ""
        elif ftype == "choice":
            c.column(fid, c.text(f"{fid}-label", label, "caption"),
                     c.add(f"{fid}-input", "MultipleChoice", selections={"path": f"/form/{key}"},
                           options=[{"label": {"literalString": o}, "value": o.lower()} for o in opts], maxAllowedSelections=1))
            comps.append("MultipleChoice")
            data[key] = "[]"
            values += opts
        else:
            c.add(fid, "CheckBox", label={"literalString": label}, value={"path": f"/form/{key}"})
            comps.append("CheckBox")
            data[key] = False
        ids.append(fid)
        values.append(label)
    c.card("root", c.column("body", c.text("title", _cap(kind), "h2"), *ids, "submit"))
    action = "submit_" + _slug(kind).replace("-", "_")
    # a Button's context sends values, not lists: a choice's selections stay in the data model
    c.button("submit", button, action, {key: f"/form/{key}" for _, key, t, _ in fields if t != "choice"}, primary=True)
    c.data(data, "/form")
    return req, None, f"Here is the {kind} form.", Requirements(tuple(dict.fromkeys(comps)), (*values, button), (action,))


def checklist(rng, c: Card):
    kind = rng.choice(sorted(CHECKLISTS))
    items = rng.sample(CHECKLISTS[kind], rng.randint(3, min(5, len(CHECKLISTS[kind]))))
    listed = ", ".join(items)
    req = rng.choice((f"a checklist for {kind}: {listed}", f"a {kind} checklist with {listed}",
                      f"tick boxes for {kind} - {listed}"))
    ids = [c.add(f"c-{i}", "CheckBox", label={"literalString": it}, value={"path": f"/done/{i}"}) for i, it in enumerate(items)]
    c.card("root", c.column("body", c.text("title", _cap(kind), "h2"), *ids))
    c.data({str(i): False for i in range(len(items))}, "/done")
    return req, None, f"Your {kind} checklist.", Requirements(("CheckBox",), tuple(items))


def settings(rng, c: Card):
    chosen = rng.sample(SETTINGS, rng.randint(2, 3))
    now = [(label, lo, hi, rng.randint(lo, hi)) for label, lo, hi in chosen]
    listed = ", ".join(f"{label.lower()} ({lo} to {hi}, now {v})" for label, lo, hi, v in now)
    req = rng.choice((f"a settings card with sliders for {listed}", f"sliders to adjust {listed}",
                      f"a card where I can set {listed}, with a Save button"))
    save = _label(rng, "Save")
    if save != "Save":  # the open engine names the drawn label
        req = req.removesuffix(", with a Save button") + f", with {_a(_named(rng, save))} button"
    ids = []
    for i, (label, lo, hi, v) in enumerate(now):
        ids.append(c.add(f"s-{i}", "Slider", label={"literalString": label}, value={"path": f"/settings/{i}"},
                         minValue=lo, maxValue=hi))
    c.card("root", c.column("body", c.text("title", "Settings", "h2"), *ids, "save"))
    c.button("save", save, "save_settings", {_slug(label).replace("-", "_"): f"/settings/{i}" for i, (label, *_) in enumerate(now)},
             primary=True)
    c.data({str(i): v for i, (_, _, _, v) in enumerate(now)}, "/settings")
    shown = tuple(label for label, *_ in now) + ((save,) if save != "Save" else ())
    return req, None, "Adjust and save.", Requirements(("Slider", "Button"), shown, ("save_settings",))


def choice(rng, c: Card):
    kind = rng.choice(sorted(PLANS))
    opts = PLANS[kind]
    listed = ", ".join(f"{n} {p}" for n, p in opts)
    req = rng.choice((f"let me pick a {kind}: {listed}", f"a card to choose the {kind} ({listed}) with a Continue button",
                      f"options for {kind} - {listed} - and a button to confirm"))
    go = _label(rng, "Continue")
    if go != "Continue":
        req = f"a card to choose the {kind} ({listed}) with {_a(_named(rng, go))} button"
    c.card("root", c.column("body", c.text("title", "Choose a " + kind, "h2"),
                            c.add("pick", "MultipleChoice", selections={"path": "/choice"},
                                  options=[{"label": {"literalString": f"{n} - {p}"}, "value": _slug(n)} for n, p in opts],
                                  maxAllowedSelections=1),
                            "go"))
    c.button("go", go, "choose_option", primary=True)
    c.data({"choice": "[]"})
    return req, None, f"Pick a {kind}.", Requirements(("MultipleChoice", "Button"), tuple(n for n, _ in opts) +
                                                      tuple(p for _, p in opts) + ((go,) if go != "Continue" else ()),
                                                      ("choose_option",))


def rows_list(rng, c: Card):
    kind = rng.choice(sorted(LISTS))
    items = rng.sample(LISTS[kind], rng.randint(3, min(4, len(LISTS[kind]))))
    listed = "; ".join(f"{a} ({b})" for a, b in items)
    req = rng.choice((f"show my {kind} as a card: {listed}", f"a card listing my {kind} - {listed}",
                      f"my {kind} in a neat list: {listed}"))
    rows = [c.row(f"row-{i}", c.text(f"a-{i}", a, "body"), c.text(f"b-{i}", b, "caption"), distribution="spaceBetween")
            for i, (a, b) in enumerate(items)]
    if _MIX.get():  # the mixing engine: a list asked for is a List (its rows explicit), nothing more drawn
        rows = [c.add("items", "List", children={"explicitList": rows}, direction="vertical")]
    c.card("root", c.column("body", c.text("title", _cap(kind), "h2"), *rows))
    return req, {kind: [{"name": a, "detail": b} for a, b in items]}, f"Your {kind}.", \
        Requirements(("Card", "List" if _MIX.get() else "Row"), tuple(a for a, _ in items) + tuple(b for _, b in items))


def tabs(rng, c: Card):
    kind = rng.choice(sorted(TABS))
    items = TABS[kind]
    listed = "; ".join(f"{t}: {body}" for t, body in items)
    req = rng.choice((f"a {kind} with tabs - {listed}", f"tabs for my {kind}. {listed}",
                      f"put this {kind} into tabs ({listed})"))
    tab_items = [{"title": {"literalString": t}, "child": c.text(f"t-{i}", body, "body")} for i, (t, body) in enumerate(items)]
    c.card("root", c.column("body", c.text("title", _cap(kind), "h2"), c.add("tabs", "Tabs", tabItems=tab_items)))
    return req, None, f"Your {kind}.", Requirements(("Tabs",), tuple(t for t, _ in items) + (items[0][1],))


def slot_picker(rng, c: Card):
    what = rng.choice(("grocery delivery", "furniture delivery", "haircut", "boiler service", "vet visit"))
    slots = rng.sample(SLOTS, rng.randint(2, 4))
    listed = ", ".join(slots)
    req = rng.choice((f"a card to book a {what}: pick a date and a time slot ({listed}), then Book",
                      f"let me choose a day and a slot for my {what} - slots {listed}",
                      f"a {what} booking card with a date picker, slots {listed} and a Book button"))
    book = _label(rng, "Book")
    if book != "Book":
        req = rng.choice((f"a card to book a {what}: pick a date and a time slot ({listed}), then {_named(rng, book)}",
                          f"a {what} booking card with a date picker, slots {listed} and {_a(_named(rng, book))} button"))
    c.card("root", c.column("body", c.text("title", _cap(what), "h2"),
                            c.add("date", "DateTimeInput", value={"path": "/booking/date"}, enableDate=True, enableTime=False),
                            c.add("slot", "MultipleChoice", selections={"path": "/booking/slot"},
                                  options=[{"label": {"literalString": s}, "value": _slug(s)} for s in slots],
                                  maxAllowedSelections=1),
                            "book"))
    c.button("book", book, "book_slot", {"date": "/booking/date"}, primary=True)
    c.data({"date": "", "slot": "[]"}, "/booking")
    return req, None, f"Choose when for your {what}.", Requirements(("DateTimeInput", "MultipleChoice", "Button"),
                                                                     tuple(slots) + ((book,) if book != "Book" else ()),
                                                                     ("book_slot",))


def stats(rng, c: Card):
    kind = rng.choice(sorted(STATS))
    vals = [(label, _fresh(rng, v)) for label, v in STATS[kind]]
    listed = ", ".join(f"{label.lower()} {v}" for label, v in vals)
    req = rng.choice((f"a stats card for {kind}: {listed}", f"a dashboard tile for the {kind} - {listed}",
                      f"summary numbers for {kind}: {listed}"))
    data = {k: v for k, v in vals}
    if _NAME.get() and rng.random() < 0.6:  # the naming engine: the numbers said in passing
        req, data = _told(rng, STAT_SENTENCES[kind], vals), None
    cols = [c.column(f"s-{i}", c.text(f"n-{i}", v, "h3"), c.text(f"l-{i}", label, "caption")) for i, (label, v) in enumerate(vals)]
    c.card("root", c.column("body", c.text("title", _cap(kind), "h2"), c.row("nums", *cols, distribution="spaceAround")))
    return req, data, f"{_cap(kind)}.", Requirements(("Card", "Row"), tuple(v for _, v in vals))


MEDIA = {  # kind -> (component, noun, [(title, detail)], buttons)
    "song": ("AudioPlayer", "audio", [("Harbour Lights at Dusk", "4:12"), ("Paper Kites Over Porto", "3:47"),
                                      ("The Quiet Orchard", "5:03"), ("Salt and Cedar", "2:58")], ("Add to playlist", "Share")),
    "audiobook chapter": ("AudioPlayer", "audio", [("Chapter 7: The Lighthouse Keeper", "38 min"),
                                                   ("Chapter 2: Letters from Tallinn", "24 min")], ("Bookmark", "Share")),
    "lecture clip": ("Video", "video", [("Why Glaciers Move", "12 min"), ("Counting with Knots", "9 min"),
                                        ("A Short History of Maps", "15 min")], ("Watch later", "Share")),
    "cooking clip": ("Video", "video", [("Folding Dumplings Fast", "6 min"), ("Three Sauces from One Base", "11 min")],
                     ("Save", "Share")),
    "trip photo": ("Image", "image", [("Sunrise over Lake Bohinj", "taken July 2022"),
                                      ("Market Stalls in Oaxaca", "taken March 2021")], ("Download", "Share")),
    "artwork": ("Image", "image", [("Blue Heron in Reeds", "ink on paper, 2019"), ("Tram at Midnight", "oil, 2020")],
                ("Favourite", "Share")),
}
DECISIONS = {  # kind -> [(label, value pool)], button pairs
    "leave request": [("Employee", ["Tomasz Nowak", "Aiko Mori", "Femi Adeyemi"]), ("Dates", ["3-7 March", "12-14 June"])],
    "expense claim": [("Item", ["Team lunch", "Train to Leeds", "Conference badge"]), ("Amount", ["€84.20", "£46.10", "$129.00"])],
    "friend request": [("From", ["Ingrid Solberg", "Marco Bellini"]), ("Mutual friends", ["3", "11"])],
    "shift swap": [("With", ["Ravi Menon", "Chloe Dubois"]), ("Shift", ["Sat 7:00-15:00", "Tue 14:00-22:00"])],
}
ANSWERS = [("Approve", "Reject"), ("Accept", "Decline"), ("Confirm", "Cancel"), ("Yes", "No")]
PROFILES = [("Dr. Lena Osei", "Pediatrician", "lena.osei@example.net"), ("Jonas Ekberg", "Site Manager", "jonas@example.net"),
            ("Mei Takahashi", "Piano Teacher", "mei.t@example.net"), ("Omar Haddad", "Tax Advisor", "omar@example.net")]
NOTICES = {  # kind -> (button label, the text shown in the pop-up)
    "terms of the raffle": ("Read terms", "One entry per person. Winners are drawn on Friday at noon."),
    "return policy": ("See policy", "Unworn items can be returned within 30 days with the receipt."),
    "allergy notes": ("Show notes", "Contains sesame and tree nuts. Made in a kitchen that handles gluten."),
    "parking rules": ("View rules", "Residents park in bays 1-40. Visitors may stay up to 2 hours."),
}


def media(rng, c: Card):
    kind = rng.choice(sorted(MEDIA))
    comp, noun, items, buttons = MEDIA[kind]
    title, detail = rng.choice(items)
    with_button = rng.random() < 0.6
    button = _label(rng, rng.choice(buttons))
    # the closed engines keep their recorded "a" before every label (their manifests rebuild)
    tail = (f" and {_a(_named(rng, button)) if _OPEN.get() else 'a ' + button} button") if with_button else ""
    req = rng.choice((f"a card to play this {kind}: {title} ({detail}){tail}" if comp != "Image" else
                      f"a card showing this {kind}: {title}, {detail}{tail}",
                      f"a {noun} card for the {kind} '{title}' - {detail}{tail}",
                      f"show the {kind} {title} ({detail}) as a card{tail}"))
    url = f"https://media.example.com/{_slug(title)}" + {"AudioPlayer": ".mp3", "Video": ".mp4", "Image": ".jpg"}[comp]
    props = {"AudioPlayer": dict(url={"literalString": url}, description={"literalString": title}),
             "Video": dict(url={"literalString": url}),
             "Image": dict(url={"literalString": url}, altText={"literalString": title}, fit="cover")}[comp]
    kids = [c.add("media", comp, **props), c.text("title", title, "h3"), c.text("detail", detail, "caption")]
    if not with_button:
        c.card("root", c.column("body", *kids))
        return req, None, f"Here is the {kind}.", Requirements((comp, "Text"), (title, detail))
    act = _slug(button).replace("-", "_")
    c.card("root", c.column("body", *kids, c.button("act", button, act, {"item": title})))
    return req, None, f"Here is the {kind}.", Requirements((comp, "Text", "Button"), (title, detail, button), (act,))


def decision(rng, c: Card):
    kind = rng.choice(sorted(DECISIONS))
    vals = [(label, _fresh(rng, rng.choice(pool))) for label, pool in DECISIONS[kind]]
    yes, no = rng.choice(ANSWERS)
    named = ", ".join(f"{label.lower()} {v}" for label, v in vals)
    req = rng.choice((f"a card for this {kind} - {named} - with {yes} and {no} buttons",
                      f"show the {kind} ({named}) and let me {yes.lower()} or {no.lower()} it",
                      f"a {kind} card: {named}; buttons {yes} / {no}"))
    rows = [c.row(f"r-{i}", c.text(f"l-{i}", label, "caption"), c.text(f"v-{i}", v, "body"))
            for i, (label, v) in enumerate(vals)]
    key, sent = _slug(kind).replace("-", "_"), {k.lower().replace(" ", "_"): v for k, v in vals}  # each answer sends the record
    acts = (f"{_slug(yes)}_{key}", f"{_slug(no)}_{key}")
    c.button("yes", yes, acts[0], sent, primary=True)
    c.button("no", no, acts[1], sent)
    c.card("root", c.column("body", c.text("title", _cap(kind), "h2"), *rows, c.row("answer", "yes", "no")))
    return req, {kind: dict(vals)}, f"Here is the {kind}.", Requirements(("Card", "Button"),
                                                                         (*(v for _, v in vals), yes, no), acts)


def profile(rng, c: Card):
    name, role, email = rng.choice(PROFILES)
    buttons = rng.sample(("Call", "Email", "Message", "Book a visit"), 2)
    if _OPEN.get() and rng.random() < 0.5:
        buttons = [open_label(rng), open_label(rng)]
        buttons = buttons if buttons[0] != buttons[1] else [buttons[0], "Message"]
    req = rng.choice((f"a profile card for {name}, {role}, {email}, with a divider under the name and "
                      f"{buttons[0]} and {buttons[1]} buttons",
                      f"contact card: {name} ({role}), email {email}; a line between the header and the details; "
                      f"buttons {buttons[0]} and {buttons[1]}",
                      f"show {name} - {role} - {email} as a card, split by a divider, plus {buttons[0]} / {buttons[1]}"))
    acts = [_slug(b).replace("-", "_") for b in buttons]
    c.card("root", c.column("body", c.row("head", c.add("icon", "Icon", name={"literalString": "person"}),
                                          c.text("name", name, "h2")),
                            c.text("role", role, "caption"), c.add("line", "Divider"), c.text("email", email, "body"),
                            c.row("acts", c.button("b0", buttons[0], acts[0], {"email": email}, primary=True),
                                  c.button("b1", buttons[1], acts[1], {"email": email}))))
    return req, None, f"{name}'s card.", Requirements(("Card", "Divider", "Button"), (name, role, email, *buttons),
                                                       tuple(acts))


def notice(rng, c: Card):
    kind = rng.choice(sorted(NOTICES))
    button, text = NOTICES[kind]
    button = _label(rng, button)
    req = rng.choice((f"a card with a '{button}' button that opens a pop-up with the {kind}: {text}",
                      f"put the {kind} in a modal behind a {button} button. The text: {text}",
                      f"a small card where {button} opens a dialog saying: {text}"))
    c.text("modal-text", text, "body")
    c.add("modal-body", "Column", children={"explicitList": ["modal-title", "modal-text"]})
    c.text("modal-title", _cap(kind), "h3")
    c.button("open", button, "open_" + _slug(kind).replace("-", "_"))
    c.card("root", c.column("body", c.text("title", _cap(kind), "h2"),
                            c.add("modal", "Modal", entryPointChild="open", contentChild="modal-body")))
    return req, None, f"The {kind} is one tap away.", Requirements(("Modal", "Button"), (button, text))


QUESTIONS = {  # topic -> (question, option pool): polls, quizzes and surveys with a named answer button
    "team outing": ("Where should the team outing go?", ["bowling", "escape room", "karaoke", "mini golf", "picnic", "go-karts"]),
    "office snacks": ("Which snacks should we stock?", ["dried mango", "pretzels", "granola bars", "rice cakes", "dark chocolate"]),
    "quiz: colours": ("Which colour do you get by mixing blue and yellow?", ["green", "purple", "orange", "brown"]),
    "quiz: oceans": ("Which is the largest ocean?", ["Pacific", "Atlantic", "Indian", "Arctic"]),
    "commute": ("How do you usually get to work?", ["bike", "bus", "train", "walking", "car pool"]),
    "book club": ("What should we read next?", ["a thriller", "a memoir", "poetry", "science fiction", "a classic"]),
    "meeting day": ("Which day suits you for the retro?", ["Monday", "Tuesday", "Wednesday", "Friday"]),
    "newsletter topics": ("Which topics interest you?", ["product news", "tutorials", "events", "job openings"]),
    "plant type": ("What kind of plant do you want?", ["succulent", "fern", "herb", "flowering", "cactus"]),
    "feedback source": ("What brought you here today?", ["a podcast", "a colleague", "social media", "a newsletter"]),
}


def question(rng, c: Card):
    """A poll, quiz or survey question with its options and a named answer button (open engine only)."""
    topic = rng.choice(sorted(QUESTIONS))
    q, pool = QUESTIONS[topic]
    opts = rng.sample(pool, rng.randint(2, min(4, len(pool))))
    many = rng.random() < 0.3
    button = open_label(rng) if rng.random() < 0.7 else rng.choice(("Vote", "Submit", "Send"))
    listed = ", ".join(opts[:-1]) + " or " + opts[-1]
    pick = (" (pick any)" if many else rng.choice((" (one answer)", "", " - just one"))) if rng.random() < 0.7 else ""
    named = _named(rng, button)
    req = rng.choice((f"a poll: {q} Options: {listed}{pick}; then {_a(named)} button",
                      f"{topic.split(':')[0]} question - {q.lower().rstrip('?')}? choices {', '.join(opts)}{pick}, and {named}",
                      f"ask {q[0].lower() + q[1:]} with the options {listed}{pick} and {_a(named)} button",
                      f"a quick survey card: {q} {listed}{pick}. Button: {named}"))
    act = _slug(button).replace("-", "_")
    c.card("root", c.column("body", c.text("q", q, "h3"),
                            c.add("pick", "MultipleChoice", selections={"path": "/answer"},
                                  options=[{"label": {"literalString": o}, "value": _slug(o)} for o in opts],
                                  maxAllowedSelections=len(opts) if many else 1),
                            c.button("go", button, act, primary=True)))
    c.data({"answer": "[]"})
    return req, None, "Here is the question.", Requirements(("MultipleChoice", "Button"), (*opts, button), (act,))


def named_tabs(rng, c: Card):
    """Tabs the request names one by one, each with what it says (open engine only)."""
    kind = rng.choice(sorted(TABS))
    items = rng.sample(TABS[kind], rng.randint(2, len(TABS[kind])))
    words = ("two", "three", "four")[len(items) - 2]
    said = [f"one called {t} that says '{body}'" if rng.random() < 0.5 else f"one named {t} with: {body}" for t, body in items]
    req = rng.choice((f"{words} tabs please, " + ", ".join(said[:-1]) + " and " + said[-1],
                      f"tabs named {', '.join(t for t, _ in items)}. " + " ".join(f"{t}: {b}" for t, b in items),
                      f"{words} tabs - " + "; ".join(f"{t} shows {b}" for t, b in items)))
    tab_items = [{"title": {"literalString": t}, "child": c.text(f"t-{i}", body, "body")} for i, (t, body) in enumerate(items)]
    c.card("root", c.add("tabs", "Tabs", tabItems=tab_items))
    return req, None, "Here are the tabs.", Requirements(("Tabs",), tuple(t for t, _ in items) + (items[0][1],))


OPEN_INTENTS = {"question": (question, 3), "named_tabs": (named_tabs, 2)}  # drawn only by the open engine


# ---- the composing engine (`genui_engine_compose`, 2026-12-06) -------------------------------
# The open engine's intents are fixed combinations: an info card never has a button, a settings card
# always the same one. Asked for a record card "with a Change delivery button", or a slider and a
# comment box "and a Send feedback button", adapters trained on them leave the extra part out. Under
# `examples(..., compose=True)` three cards in five also get what the request adds to any intent:
# one or two named buttons, a text field (named, or a comment box) or a named checkbox, placed at
# the end of the card's body. Off (the default), nothing more is drawn.
_COMPOSE = contextvars.ContextVar("genui_compose", default=False)
# Labels of the open engine that the third hand-written set (written blind to the engine) also shows:
# the composing engine never draws them.
HELD_OUT = {"add to cart", "share"}
FIELD_LABELS = ("Delivery notes", "Reason", "Your question", "Promo code", "Nickname", "Phone number", "Room number",
                "Dietary needs", "Seat preference", "Extra requests", "Gift message", "Reference", "Team name",
                "Pickup point", "Licence plate", "Best time to call", "Coupon", "Middle name", "Floor", "Order note")
FIELD_WORDS = (("comment box", "Comment", "longText"), ("notes field", "Notes", "longText"),
               ("message box", "Message", "longText"), ("box for questions", "Questions", "longText"))
CHECK_LABELS = ("Remind me the day before", "Send me a copy", "Keep me posted", "Mark as urgent", "Repeat every week",
                "Save as my default", "Share with the team", "Add to favourites", "Hide from others", "Notify by text",
                "Pin to top", "Include a receipt", "Make it private", "Auto-renew", "Large print", "Text me updates")


def all_extras() -> list[str]:
    """Every field and checkbox label the composing engine can add (the disjointness test reads it)."""
    return sorted({*FIELD_LABELS, *(label for _, label, _ in FIELD_WORDS), *CHECK_LABELS})


def _extra(rng, c: Card, i: int, kind: str):
    """One part the request adds: (its noun phrase, component ids, components, values shown, data)."""
    if kind == "button":
        if _NAME.get():  # the naming engine: one, two or three buttons, a row of three said as "A / B / C"
            labels = list(dict.fromkeys(open_label(rng) for _ in range(rng.choices((1, 2, 3), weights=(5, 3, 2))[0])))
        else:
            labels = [open_label(rng) for _ in range(1 if rng.random() < 0.7 else 2)]
            if len(set(labels)) < len(labels):
                labels = labels[:1]
        ids = [c.button(f"x{i}-b{j}", label, _slug(label).replace("-", "_") or "go") for j, label in enumerate(labels)]
        named = [_named(rng, label) for label in labels]
        if len(named) == 3:
            named = [f"'{label}'" for label in labels] if rng.random() < 0.5 else labels
            phrase = rng.choice((f"{named[0]} / {named[1]} / {named[2]} buttons in a row",
                                 f"three buttons: {named[0]}, {named[1]} and {named[2]}"))
        else:
            phrase = f"{_a(named[0])} button" if len(named) == 1 else rng.choice(
                (f"{named[0]} and {named[1]} buttons", f"two buttons, {named[0]} and {named[1]}",
                 f"buttons for {named[0]} and {named[1]}"))
        return phrase, [ids[0] if len(ids) == 1 else c.row(f"x{i}-row", *ids)], ["Button"], labels, {}
    if kind == "field":
        if rng.random() < 0.5:
            word, label, ftype = rng.choice(FIELD_WORDS)
            phrase, shown = _a(word), []
        else:
            label, ftype = rng.choice(FIELD_LABELS), "shortText"
            phrase, shown = rng.choice((f"{_a(label)} field", f"a field for {label}", f"a '{label}' box")), [label]
        key = _slug(label).replace("-", "_")
        c.add(f"x{i}-field", "TextField", label={"literalString": label}, text={"path": f"/extra/{key}"}, textFieldType=ftype)
        return phrase, [f"x{i}-field"], ["TextField"], shown, {key: ""}
    label = rng.choice(CHECK_LABELS)
    key = _slug(label).replace("-", "_")
    phrase = rng.choice((f"a '{label}' checkbox", f"a tick box for {label}", f"a checkbox that says {label}"))
    c.add(f"x{i}-check", "CheckBox", label={"literalString": label}, value={"path": f"/extra/{key}"})
    return phrase, [f"x{i}-check"], ["CheckBox"], [label], {key: False}


def compose(rng, c: Card, request: str, req: Requirements) -> tuple[str, Requirements]:
    """Add one or two parts to a drawn card and its request (the composing engine)."""
    kinds = [rng.choices(("button", "field", "check"), weights=(6, 2, 2))[0]]
    if rng.random() < 0.35:
        kinds.append(rng.choice([k for k in ("button", "field", "check") if k != kinds[0]]))
    parts = [_extra(rng, c, i, kind) for i, kind in enumerate(kinds)]
    said = " and ".join(p[0] for p in parts)
    ids, comps, shown = (sum((p[k] for p in parts), []) for k in (1, 2, 3))
    data = {k: v for p in parts for k, v in p[4].items()}
    if _MIX.get() and "\n" in request:  # a list written one item per line: the added parts on a line of their own
        request = request.rstrip() + "\n" + rng.choice((f"Add {said}.", f"Also {said}, please.", f"Plus {said}."))
    elif request.rstrip()[-1:] in ".?!":
        request = request.rstrip() + rng.choice((f" Add {said}.", f" Also {said}, please.", f" Include {said} too."))
    else:
        request += rng.choice((f" and {said}", f", with {said}", f". Add {said}", f", plus {said}", f" - also {said}"))
    root = next(x["component"]["Card"] for x in c.components if x["id"] == "root")
    body = next((x["component"]["Column"] for x in c.components if x["id"] == root["child"] and "Column" in x["component"]),
                None)
    if body is not None:
        body["children"]["explicitList"] += ids
    else:
        root["child"] = c.column("main", root["child"], *ids)
    if data:
        c.data(data, "/extra")
    return request, dataclasses.replace(req, components=tuple(dict.fromkeys((*req.components, *comps))),
                                        values=(*req.values, *shown))


INTENTS = {"info_card": (info_card, 3), "form": (form, 4), "checklist": (checklist, 2), "settings": (settings, 2),
           "choice": (choice, 2), "list": (rows_list, 2), "tabs": (tabs, 1), "slot_picker": (slot_picker, 2),
           "stats": (stats, 2), "media": (media, 2), "decision": (decision, 2), "profile": (profile, 1),
           "notice": (notice, 1)}


# ---- the mixing engine (`genui_engine_mix`, 2026-12-06, twelfth session) --------------------------
# The composing engine's cards are one intent plus a part or two. Asked for a widget that strings
# several controls together ("rate it 1-5 with a slider, a text box for what could be better, and a
# 'Send' button"), a list asked for as a list, or a card in German or French, adapters trained on it
# leave parts out, answer a list with Rows, and drop the buttons of a request that is not in English.
# Under `examples(..., mix=True)` (the composing engine plus this) the engine also draws: `widget`, two
# to four controls (slider, single choice, named or comment text field, date picker, named checkbox;
# two or three in another language) in the order the request names them, under a title that names
# what it is for, sometimes a quoted line to show, and a named button; `item_list`, a list of items
# (with a detail, or a checkbox each) asked in many shapes (inline, one per line, pasted as CSV) and
# drawn as a List; and three in ten `widget`s in German, French, Spanish, Italian, Portuguese
# (European) or Dutch, their labels in that language. A widget is composed onto by nothing (it names
# its own button); what is composed onto a list written one item per line goes on a line of its own.
# A list of the older `list` intent is a List too. Button labels the fourth hand-written set shows
# (written blind, before this engine) are never drawn here. Off (the default), nothing is drawn.
_MIX = contextvars.ContextVar("genui_mix", default=False)
MIX_HELD_OUT = {"pause", "renew", "reschedule", "transfer"}  # the open engine's labels that the fourth set shows

SUBJECTS = {  # what a widget is for -> names it is for (shown in its title)
    "feedback": ["the Knife Skills evening", "Tuesday's Python meetup", "the harbour boat tour", "Workshop 4: Clay Glazes",
                 "the Year 9 parents' evening", "the Marlow Street pop-up"],
    "sign-up": ["the Ashgrove 10K", "Friday Board Games", "the Cedar Hall choir", "Junior Fencing (U12)",
                "the litter-pick on Canal Walk", "Saturday Repair Café"],
    "booking": ["Studio 3 at Brightwork", "the Elm Court tennis court", "Dr. Amara Nwosu", "the quiet room on level 5",
                "the Hollis Lane allotment shed", "the van from Kipling Hire"],
    "log": ["Ines's violin practice", "the sourdough starter", "Rufus's walks", "the greenhouse tomatoes",
            "my bench press", "the rain barrel"],
    "check-in": ["the night shift on Ward 6", "Camp Larchwood's second night", "Flat 4B's inspection", "the Thursday stand-up",
                 "the evening study hall", "Bay 12 at the depot"],
    "RSVP": ["Teodora's leaving drinks", "the Okafor-Lind wedding", "Grandpa Wil's 80th", "the Hanami picnic",
             "the Q2 kickoff at Dockside", "Jun and Priya's housewarming"],
}
SUBJECT_A = {"RSVP": "an RSVP"}
SLIDER_POOL = [("Effort", 1, 10), ("Mood", 1, 5), ("How busy", 0, 100), ("Spice level", 0, 5), ("Confidence", 1, 7),
               ("Sleep quality", 1, 10), ("Noise", 0, 10), ("Pace", 1, 9), ("Soreness", 0, 10), ("Hours", 0, 12),
               ("Group size", 2, 20), ("Rating", 1, 5), ("Budget in EUR", 50, 500), ("Glasses of water", 0, 12)]
RATED = {"Effort", "Mood", "Spice level", "Confidence", "Sleep quality", "Noise", "Pace", "Soreness", "Rating"}
CHOICE_POOL = [("Size", ["Small", "Regular", "Large"]), ("Format", ["In person", "Online", "Hybrid"]),
               ("Level", ["Starter", "Improver", "Advanced"]), ("Meal", ["Veggie", "Fish", "Chicken", "Vegan"]),
               ("Urgency", ["Whenever", "This week", "Today"]), ("Reply", ["Count me in", "Not sure yet", "Can't come"]),
               ("Surface", ["Clay", "Grass", "Hard court"]), ("Shift", ["Early", "Late", "Night"]),
               ("Colour", ["Sage", "Rust", "Ink blue"]), ("Weather", ["Sunny", "Overcast", "Drizzle", "Storm"]),
               ("Where", ["Gym", "Park", "Pool"]), ("Mode", ["Walk", "Cycle", "Drive"]), ("Room", ["Lounge", "Loft", "Cellar"]),
               ("Outcome", ["Passed", "Needs work", "Failed"]), ("Length", ["20 min", "40 min", "75 min"])]
FIELD_POOL = ("Allergies", "Emergency contact", "Distance (km)", "Topic", "Attendee name", "Weight (kg)", "Shoe size",
              "Table number", "Badge ID", "Guest of", "Plate number", "Song request", "Temperature reading",
              "Parent's phone", "What went well")
LINES = ("Doors open at 20:40", "Bring your own racket", "Replies close on Friday at noon", "Parking is behind the hall",
         "Wear shoes you can get muddy", "Ask for Hamid at the desk", "Masks optional", "Lunch is on us",
         "Entry code 3905 at the side gate", "Quiet hours start at 22:00")
DATE_WORDS = ("a date picker", "pick a date", "a day to pick", "the date", "a when (date)", "a date field")


def _key(label: str) -> str:
    """A data key from a label in any language: accents dropped, not the letters that carry them."""
    import unicodedata

    plain = unicodedata.normalize("NFKD", label).encode("ascii", "ignore").decode()
    return _slug(plain).replace("-", "_")


def _slider_words(rng, label, lo, hi):
    return rng.choice((f"a slider for {label} ({lo}-{hi})", f"{label} on a slider from {lo} to {hi}",
                       f"{label} slider {lo}-{hi}",
                       *((f"rate {label.lower()} {lo} to {hi} with a slider",) if label in RATED else ())))


def _choice_words(rng, label, opts):
    """How a request asks for a single choice, and whether it names the choice (the card's caption)."""
    if rng.random() < 0.25:
        return f"pick one of {' / '.join(opts)}", False
    return rng.choice((f"{label.lower()}: {', '.join(opts[:-1])} or {opts[-1]}", f"choose {label.lower()} ({', '.join(opts)})",
                       f"{_a(label.lower())} choice - {', '.join(opts)}")), True


def _field_words(rng, label):
    return rng.choice((f"{_a(label)} field", f"a box for {label}", f"{label} input", f"a text field '{label}'"))


def _check_words(rng, label):
    return rng.choice((f"a checkbox '{label}'", f"tick box: {label}", f"a checkbox that says {label}"))


def _button_words(rng, label):
    return rng.choice((f"a button '{label}'", f"{_a(label)} button", f"a button that says {label}", f"button: {label}",
                       f"{label} at the bottom (button)"))


WIDGET_LANGS = {  # language -> words and pools of a widget asked in it
    "de": {"ask": ("Bitte ein kleines Formular für {n}: ", "Kannst du mir ein Widget für {n} bauen? ", "Formular für {n} - "),
           "slider": "ein Schieberegler für {l} ({a} bis {b})", "choice": "Auswahl {l} ({o})", "or": " oder ",
           "field": "ein Feld „{l}“", "date": "ein Datum", "check": "ein Kästchen „{l}“", "button": "ein Button „{l}“",
           "and": " und ",
           "names": ["Töpferwerkstatt Holm", "Lauftreff Südpark", "Praxis Dr. Albers", "Hausversammlung Lindenhof"],
           "sliders": [("Zufriedenheit", 1, 5), ("Lautstärke", 0, 10)],
           "choices": [("Kurs", ["Anfänger", "Fortgeschrittene", "Profis"]), ("Essen", ["Vegetarisch", "Fleisch", "Fisch"])],
           "fields": ["Name", "Telefonnummer", "Bemerkung"], "checks": ["Erinnerung per SMS", "Newsletter abonnieren"],
           "buttons": ["Anmelden", "Absenden", "Übernehmen", "Jetzt buchen", "Eintragen"]},
    "fr": {"ask": ("Je voudrais un petit formulaire pour {n} : ", "Peux-tu faire une carte pour {n} ? ", "Formulaire pour {n} - "),
           "slider": "un curseur pour {l} (de {a} à {b})", "choice": "choix {l} ({o})", "or": " ou ",
           "field": "un champ « {l} »", "date": "une date", "check": "une case « {l} »", "button": "un bouton « {l} »",
           "and": " et ",
           "names": ["l'atelier vélo Rayon Vert", "la chorale Saint-Roch", "Mme Duval", "la brocante du quartier"],
           "sliders": [("Satisfaction", 1, 5), ("Difficulté", 1, 10)],
           "choices": [("Niveau", ["Novice", "Moyen", "Expert"]), ("Créneau", ["Matin", "Après-midi", "Soir"])],
           "fields": ["Prénom", "Téléphone", "Commentaire"], "checks": ["Me rappeler la veille", "Recevoir la newsletter"],
           "buttons": ["Valider", "C'est parti", "Réserver", "S'inscrire", "Je participe"]},
    "es": {"ask": ("Hazme un formulario para {n}: ", "¿Puedes crear una tarjeta para {n}? ", "Formulario para {n} - "),
           "slider": "un deslizador para {l} (de {a} a {b})", "choice": "elige {l} ({o})", "or": " o ",
           "field": "un campo «{l}»", "date": "una fecha", "check": "una casilla «{l}»", "button": "un botón «{l}»",
           "and": " y ",
           "names": ["el taller de cerámica Barro", "la peña ciclista Norte", "la doctora Ruiz", "la fiesta del barrio"],
           "sliders": [("Satisfacción", 1, 5), ("Dolor", 0, 10)],
           "choices": [("Turno", ["Mañana", "Tarde", "Noche"]), ("Talla", ["Pequeña", "Mediana", "Grande"])],
           "fields": ["Nombre", "Teléfono", "Comentarios"], "checks": ["Avisarme por correo", "Acepto las normas"],
           "buttons": ["Mandar", "Reservar", "Guardar", "Apuntarme", "Listo"]},
    "it": {"ask": ("Mi fai un modulo per {n}? ", "Vorrei una scheda per {n}: ", "Modulo per {n} - "),
           "slider": "un cursore per {l} (da {a} a {b})", "choice": "scegli {l} ({o})", "or": " o ",
           "field": "un campo «{l}»", "date": "una data", "check": "una casella «{l}»", "button": "un pulsante «{l}»",
           "and": " e ",
           "names": ["il corso di vela Libeccio", "la palestra Aurora", "il dottor Sala", "la cena di classe"],
           "sliders": [("Soddisfazione", 1, 5), ("Fatica", 1, 10)],
           "choices": [("Livello", ["Base", "Intermedio", "Avanzato"]), ("Orario", ["Mattina", "Pomeriggio", "Sera"])],
           "fields": ["Nome", "Cellulare", "Note"], "checks": ["Ricordamelo", "Iscrivimi alla newsletter"],
           "buttons": ["Invia", "Fatto", "Conferma", "Salva", "Partecipo"]},
    "pt": {"ask": ("Faz-me um formulário para {n}: ", "Podes criar um cartão para {n}? ", "Formulário para {n} - "),
           "slider": "um controlo deslizante para {l} (de {a} a {b})", "choice": "escolhe {l} ({o})", "or": " ou ",
           "field": "um campo «{l}»", "date": "uma data", "check": "uma caixa «{l}»", "button": "um botão «{l}»",
           "and": " e ",
           "names": ["a aula de surf Maré Alta", "o clube de leitura Pessoa", "a Dra. Sousa", "o arraial da rua"],
           "sliders": [("Satisfação", 1, 5), ("Energia", 1, 10)],
           "choices": [("Nível", ["Principiante", "Médio", "Avançado"]), ("Turno", ["Manhã", "Tarde", "Noite"])],
           "fields": ["Nome", "Telemóvel", "Observações"], "checks": ["Lembrar-me na véspera", "Aceito os termos"],
           "buttons": ["Enviar", "Marcar", "Guardar", "Inscrever-me", "Concluir"]},
    "nl": {"ask": ("Maak een formulier voor {n}: ", "Kun je een kaart maken voor {n}? ", "Formulier voor {n} - "),
           "slider": "een schuifregelaar voor {l} ({a} tot {b})", "choice": "kies {l} ({o})", "or": " of ",
           "field": "een veld „{l}”", "date": "een datum", "check": "een vinkje „{l}”", "button": "een knop „{l}”",
           "and": " en ",
           "names": ["de fietsclub Zuidwester", "het buurthuis De Linde", "mevrouw Jansen", "de schoolreis"],
           "sliders": [("Tevredenheid", 1, 5), ("Drukte", 0, 10)],
           "choices": [("Niveau", ["Starter", "Gevorderd", "Expert"]), ("Dagdeel", ["Ochtend", "Middag", "Avond"])],
           "fields": ["Voornaam", "Telefoon", "Opmerking"], "checks": ["Herinner mij", "Nieuwsbrief ontvangen"],
           "buttons": ["Versturen", "Aanmelden", "Opslaan", "Boeken", "Bevestigen"]},
}


def _widget_parts(rng, lang: dict | None):
    """Two to four controls (two or three in another language), each (kind, words in the request,
    label, options or range, whether the request names the label)."""
    kinds = rng.sample(("slider", "choice", "field", "date", "check"), rng.randint(2, 4 if lang is None else 3))
    parts = []
    for kind in kinds:
        if kind == "slider":
            label, lo, hi = rng.choice(lang["sliders"] if lang else SLIDER_POOL)
            words = lang["slider"].format(l=label, a=lo, b=hi) if lang else _slider_words(rng, label, lo, hi)
            parts.append(("slider", words, label, (lo, hi), True))
        elif kind == "choice":
            label, opts = rng.choice(lang["choices"] if lang else CHOICE_POOL)
            opts = opts if len(opts) <= 3 else rng.sample(opts, 3)
            if lang:
                words, named = lang["choice"].format(l=label, o=", ".join(opts[:-1]) + lang["or"] + opts[-1]), True
            else:
                words, named = _choice_words(rng, label, opts)
            parts.append(("choice", words, label, opts, named))
        elif kind == "field":
            if lang is None and rng.random() < 0.35:
                word, label, _ = rng.choice(FIELD_WORDS)
                parts.append(("long", _a(word), label, None, False))
            else:
                label = rng.choice(lang["fields"] if lang else FIELD_POOL)
                parts.append(("field", lang["field"].format(l=label) if lang else _field_words(rng, label), label, None, True))
        elif kind == "date":
            parts.append(("date", lang["date"] if lang else rng.choice(DATE_WORDS), "Date", None, False))
        else:
            label = rng.choice(lang["checks"] if lang else CHECK_LABELS)
            parts.append(("check", lang["check"].format(l=label) if lang else _check_words(rng, label), label, None, True))
    return parts


def widget(rng, c: Card):
    """Two to four controls in the order the request names them, a title naming what it is for, a named
    button, sometimes a quoted line to show; three in ten in another language (mixing engine only)."""
    code = rng.choice(sorted(WIDGET_LANGS)) if rng.random() < 0.3 else None
    lang = WIDGET_LANGS.get(code)
    if lang:
        name, what = rng.choice(lang["names"]), None
        button = rng.choice(lang["buttons"])
    else:
        what = rng.choice(sorted(SUBJECTS))
        name = rng.choice(SUBJECTS[what])
        button = open_label(rng)
    parts = _widget_parts(rng, lang)
    line = rng.choice(LINES) if lang is None and rng.random() < 0.25 else None
    if lang:
        said = [w for _, w, *_ in parts] + [lang["button"].format(l=button)]
        ask = rng.choice(lang["ask"]).format(n=name)
        if ask.rstrip().endswith("?"):  # a question, then the parts as a sentence of their own
            said[0] = _cap(said[0])
        req = ask + ", ".join(said[:-1]) + lang["and"] + said[-1]
        title = name
    else:
        said = [w for _, w, *_ in parts] + [_button_words(rng, button)]
        a_what = SUBJECT_A.get(what, _a(what))
        head = rng.choice((f"{a_what} widget for {name}", f"{a_what} form for {name}", f"a quick {what} thing for {name}",
                           f"a card for {what} - {name}"))
        if line:
            said.insert(rng.randint(0, len(said) - 1), f"show '{line}' " + rng.choice(("at the top", "under the title",
                                                                                       "somewhere visible")))
        style = rng.random()
        if style < 0.5:
            req = f"{head}: " + ", ".join(said[:-1]) + (", and " if rng.random() < 0.5 else " and ") + said[-1]
        elif style < 0.75:
            req = f"{head}\n" + "\n".join(f"- {s}" for s in said)
        else:
            req = f"{head}. " + ". ".join(_cap(s) for s in said)
        title = f"{_cap(what)}: {name}"
    ids, comps, values, data = [], [], [name, button], {}
    if line:
        ids.append(c.text("line", line, "body"))
        values.append(line)
    for i, (kind, _, label, extra, named) in enumerate(parts):
        key = _key(label)  # the data model and the button's context say what each control is
        key = key if key not in data and key[:1].isalpha() else f"{key}_{i}"
        if kind == "slider":
            ids.append(c.add(f"w-{i}", "Slider", label={"literalString": label}, value={"path": f"/widget/{key}"},
                             minValue=extra[0], maxValue=extra[1]))
            comps.append("Slider")
            values.append(label)
            data[key] = extra[0]
        elif kind == "choice":
            pick = c.add(f"w-{i}-input", "MultipleChoice", selections={"path": f"/widget/{key}"},
                         options=[{"label": {"literalString": o}, "value": _key(o)} for o in extra], maxAllowedSelections=1)
            ids.append(c.column(f"w-{i}", c.text(f"w-{i}-label", label, "caption"), pick) if named else pick)
            comps.append("MultipleChoice")
            values.extend(extra)
            data[key] = "[]"
        elif kind in ("field", "long"):
            ids.append(c.add(f"w-{i}", "TextField", label={"literalString": label}, text={"path": f"/widget/{key}"},
                             textFieldType="longText" if kind == "long" else "shortText"))
            comps.append("TextField")
            values += [label] if named else []
            data[key] = ""
        elif kind == "date":
            ids.append(c.add(f"w-{i}", "DateTimeInput", value={"path": f"/widget/{key}"}, enableDate=True, enableTime=False))
            comps.append("DateTimeInput")
            data[key] = ""
        else:
            ids.append(c.add(f"w-{i}", "CheckBox", label={"literalString": label}, value={"path": f"/widget/{key}"}))
            comps.append("CheckBox")
            values.append(label)
            data[key] = False
    act = _key(button)
    c.card("root", c.column("body", c.text("title", title, "h3"), *ids,
                            c.button("go", button, act, {k: f"/widget/{k}" for k, v in data.items() if v != "[]"},
                                     primary=True)))
    c.data(data, "/widget")
    reply = {"de": "Hier ist das Formular.", "fr": "Voici le formulaire.", "es": "Aquí está el formulario.",
             "it": "Ecco il modulo.", "pt": "Aqui está o formulário.", "nl": "Hier is het formulier."}.get(code, "Here it is.")
    return req, None, reply, Requirements(tuple(dict.fromkeys((*comps, "Button"))), tuple(values), (act,))


ITEM_LISTS = {  # kind (a plural noun) -> (detail name or None, [(item, detail)])
    "to-dos": (None, [("Renew the bike lock code", ""), ("Email Coach Barros", ""), ("Print the seating plan", ""),
                      ("Buy AAA batteries", ""), ("Return the ladder to Gus", ""), ("Book the MOT", "")]),
    "groceries to buy": ("qty", [("Rye flour", "2 bags"), ("Chickpeas", "3 tins"), ("Limes", "6"), ("Tortillas", "1 pack"),
                                 ("Halloumi", "2 blocks"), ("Kitchen roll", "4 rolls")]),
    "contacts": ("phone", [("Noor Saleh", "0161 555 0142"), ("Bram de Wit", "+31 6 5550 1288"), ("Keiko Arai", "555-0199"),
                           ("Dev Malhotra", "07700 900461"), ("Ruth Ekwueme", "555-0123")]),
    "recent orders": ("status", [("#A-7781", "Dispatched"), ("#A-7794", "Packing"), ("#A-7802", "Arrived"),
                                 ("#A-7815", "Refunded"), ("#A-7820", "Awaiting payment")]),
    "agenda items": ("time", [("Welcome and coffee", "08:45"), ("Budget review", "10:15"), ("Site walk", "11:30"),
                              ("Lunch at Fennel & Fig", "12:40"), ("Vendor demos", "14:10"), ("Wrap-up", "16:20")]),
    "songs for the road": ("artist", [("Pink + White", "Frank Ocean"), ("Retrograde", "James Blake"), ("Midnight City", "M83"),
                                      ("Holocene", "Bon Iver"), ("Let It Happen", "Tame Impala")]),
    "desk search results": ("price", [("Walnut desk 120 cm", "£189"), ("Oak desk 140 cm", "£245"),
                                      ("Standing desk frame", "£310"), ("Pine desk 100 cm", "£99")]),
    "chores": (None, [("Descale the kettle", ""), ("Water the ferns", ""), ("Fold the laundry", ""), ("Bleed the radiators", ""),
                      ("Wipe the hob", "")]),
    "homework tasks": ("due", [("Maths sheet 12", "Mon"), ("French verbs", "Wed"), ("Volcano model", "Fri"),
                               ("Read ch. 9", "Thu")]),
}
OWNERS = ("Ava", "Mateo", "the Bishop family", "Team Kestrel", "Grandma Rosa", "Flat 2", "Yusuf", "our book club")


def item_list(rng, c: Card):
    """A list of items asked for as a list (inline, one per line, or pasted CSV), drawn as a List: rows
    of item and detail, or a checkbox per item (mixing engine only)."""
    kind = rng.choice(sorted(ITEM_LISTS))
    detail, pool = ITEM_LISTS[kind]
    items = rng.sample(pool, rng.randint(3, min(5, len(pool))))
    checks = detail is None or rng.random() < 0.15
    owner = rng.choice(OWNERS) if rng.random() < 0.4 else None
    of = f" for {owner}" if owner else ""
    shown = [(a, b) for a, b in items] if detail and not checks else [(a, "") for a, _ in items]
    lines = False
    if detail and rng.random() < 0.2 and not checks:
        req, lines = f"show this as a list{of}:\nitem,{detail}\n" + "\n".join(f"{a},{b}" for a, b in items), True
    elif rng.random() < 0.5:
        listed = "\n".join(f"- {a}" + (f" ({b})" if b else "") for a, b in shown)
        req, lines = rng.choice((f"my {kind}{of} as a list:\n{listed}", f"a list card with my {kind}{of}\n{listed}",
                                 f"show my {kind}{of} in a list\n{listed}")), True
    else:
        inline = "; ".join(f"{a}" + (f" - {b}" if b else "") for a, b in shown)
        req = rng.choice((f"a list of my {kind}{of}: {inline}", f"a list view of the {kind}{of} - {inline}",
                          f"my {kind}{of} in a list: {inline}"))
    if checks:
        req += rng.choice(("\n(with checkboxes)", "\ncheckboxes please", "\neach one with a checkbox")) if lines else \
            rng.choice((" (with checkboxes)", ", each with a checkbox", " - tickable"))
        rows = [c.add(f"it-{i}", "CheckBox", label={"literalString": a}, value={"path": f"/items/{i}"})
                for i, (a, _) in enumerate(shown)]
        c.data({str(i): False for i in range(len(shown))}, "/items")
    else:
        rows = [c.row(f"it-{i}", c.text(f"it-{i}-a", a, "body"), c.text(f"it-{i}-b", b, "caption"),
                      distribution="spaceBetween") for i, (a, b) in enumerate(shown)]
    title = _cap(kind) + (f" - {owner}" if owner else "")
    c.card("root", c.column("body", c.text("title", title, "h3"),
                            c.add("items", "List", children={"explicitList": rows}, direction="vertical")))
    values = [a for a, _ in shown] + [b for _, b in shown if b] + ([owner] if owner else [])
    return req, None, f"Your {kind}.", Requirements(("List", "CheckBox") if checks else ("List",), tuple(values))


MIX_INTENTS = {"widget": (widget, 5), "item_list": (item_list, 3)}  # drawn only by the mixing engine


def all_mix_values() -> list[str]:
    """Every label, name and item the mixing engine's own pools hold (the disjointness test reads it;
    its buttons in English are the open engine's labels, `all_labels`)."""
    out = {n for names in SUBJECTS.values() for n in names} | {label for label, *_ in SLIDER_POOL} | set(FIELD_POOL)
    out |= {o for _, opts in CHOICE_POOL for o in opts} | {label for label, _ in CHOICE_POOL} | set(LINES) | set(OWNERS)
    out |= {x for _, pool in ITEM_LISTS.values() for pair in pool for x in pair if x}
    for lang in WIDGET_LANGS.values():
        out |= {*lang["names"], *lang["fields"], *lang["checks"], *lang["buttons"]}
        out |= {label for label, *_ in lang["sliders"]} | {label for label, _ in lang["choices"]}
        out |= {o for _, opts in lang["choices"] for o in opts}
    return sorted(out)


# ---- the naming engine (`genui_engine_name`, 2026-12-06, thirteenth session) ----------------------
# Cards of the engines before this one title themselves by their kind ("Playlist", "Newsletter
# signup"); asked for "a newsletter signup for the Birchwood Chess Club" or a playlist "called 'Rainy
# Sunday'", adapters trained on them leave the name out, and values said in passing inside a
# sentence ("my flight to Tromsø leaves at 07:25 from gate B12") come back partly. Under
# `examples(..., name=True)` (the mixing engine plus this) the engine also: names, on half the cards
# of the intents in `NAMED_BY`, who or where the card is for (an organisation, a place or a person, as
# that intent allows; said after the request, before it, or on a line of its own), shown as a caption
# under the title, or gives the card a title in quotes, which then is its title; says an info card's
# or a stats card's values in a sentence, with no labels, three times in five; and adds rows of up to
# three named buttons ("Start / Stop / Reset buttons in a row"). Off (the default), nothing more is drawn.
_NAME = contextvars.ContextVar("genui_name", default=False)
NAME_HELD_OUT = {"log out"}  # the open engine's label the fifth set shows ("pause" and "add to cart" are held out already)
RECORD_SENTENCES = {  # an info card's kind -> sentences saying its values in order (v0 ... vN; lN: first letter
    # lower-cased; aN: that with "a" or "an")
    "flight": ("my flight {v0} from {v1} to {v2} boards at {v4} from gate {v3}",
               "I'm flying {v1} to {v2} on {v0}, boarding {v4} at gate {v3}"),
    "parcel": ("my parcel {v0} is with {v1}, status: {l2}, expected {v3}",
               "{v1} has parcel {v0} - {l2}, expected {v3}"),
    "utility bill": ("my electricity bill came in: {v1} for {v3}, due {v2}, account {v0}",
                     "I owe {v1} on electricity account {v0} by {v2} (I used {v3})"),
    "hotel booking": ("I'm at {v0} from {v1}, {v2} nights in {a3} room, confirmation {v4}",
                      "booked {v0}, check-in {v1}, {v2} nights, {l3} room - confirmation number {v4}"),
    "match score": ("{v0} against {v1}: {v2}, minute {v3}", "{v0} v {v1}, {v2} ({v3})"),
    "car rental": ("I've rented {a1} (reservation {v0}), picking it up at the {l2} and returning it by {v3}",
                   "car hire {v0}: {a1} from the {l2}, back by {v3}"),
    "bank transfer": ("I sent {v1} to {v0} on {v3} with the reference {v2}",
                      "paid {v0} {v1} on {v3} (reference: {v2})"),
    "prescription": ("the pharmacist at {v3} gave me {v0}, {l1}, refills left: {v2}",
                     "{v0} from {v3}: {l1}, {v2} refills"),
}
STAT_SENTENCES = {
    "shop this week": ("the shop made {v0} this week on {v1} orders, with {v2} refunds and {v3} new customers",),
    "website today": ("{v0} people visited the site today, {v1} signed up and the bounce rate was {v2}",),
    "fitness this month": ("this month I went on {v0} runs, {v1} in total, at an average pace of {v2}",),
    "support queue": ("support has {v0} tickets open and {v1} waiting, solved {v2} today, CSAT at {v3}",),
}
TOLD_TAILS = (" - make it a card", ". Can you show that as a card?", ". Card please.", "; put that on a card.",
              ". Make me a little card for it.")
TOLD_LEADS = ("put this on a card: ", "show this as a card - ", "let me see this as a card: ")
ORGS = ("Quillfeather Bakery", "Brackenridge Rowing Club", "Oduya & Sons Plumbing", "Little Heron Nursery",
        "Northgate Tenants' Association", "Vasquez Family Dental", "Copperleaf Cafe", "Harwick Primary PTA",
        "Solstice Yoga Loft", "Tamsin's Flower Bar", "Kittiwake Books", "Fernhollow Vets", "Blue Lantern Theatre",
        "Marisol Travel", "Pinecrest HOA", "Ironbridge Climbing Wall", "Lakeshore Credit Union", "Gannet Cycles")
PLACES = ("Wexford Street depot", "Pier 9", "Kilnsey Campsite", "Alder Park Library", "Room 3.14, Sievert Building",
          "Ballyhoura Trailhead", "Hall C, Norrvik Expo", "Terminal 2 arrivals", "the Old Tannery", "Bay 7, Dunmore Marina",
          "Ostrava Main Station", "Lindenhof community garden", "Studio B, Pressworks", "Gate 3, Harlow Showground")
PEOPLE = ("Dr. Ingeborg Laszlo", "Coach Ayodele", "Mrs. Petrakis", "Uncle Baptiste", "Sanne Vermeulen", "Rafi Goldhaber",
          "Nana Kwabena", "Ms. Lindqvist", "Tobiah Quist", "Auntie Farida", "Mr. Oyelaran", "Carys Pemberton")
TITLES = ("Sunday Reset", "Late Bloomers", "Project Saffron", "Ops Morning Brief", "The Thursday Table", "Tidewater Notes",
          "Base Camp", "Kitchen Sprint", "Low Tide Club", "Second Breakfast", "North Star Goals", "Night Owl Finance",
          "Porch Light", "Quiet Hours", "Field Day Plan", "Grey Skies Mix", "Spring Ledger", "The Long Weekend")
NAMED_BY = {  # intent -> who or where its card can be for (an intent not listed is not named)
    "info_card": ("person",), "form": ("org",), "checklist": ("org", "person"), "settings": ("person", "place"),
    "choice": ("org",), "list": ("person", "org"), "tabs": ("org",), "slot_picker": ("org", "place"), "stats": ("org",),
    "decision": ("org",), "notice": ("org", "place"), "item_list": ("person",)}
SAID = {  # who or where -> (how a request says it after the rest, before it, on a line of its own)
    "org": ((". This is for {n}.", " - it's for {n}.", ". It's for {n}."), ("For {n}: ", "{n} - "),
            ("Organiser: {n}", "From: {n}", "For: {n}")),
    "place": ((". It's at {n}.", " - location: {n}.", ". Where: {n}."), ("At {n}: ", "Location {n} - "),
              ("Location: {n}", "Where: {n}")),
    "person": ((". This is for {n}.", " - it's for {n}."), ("For {n}: ", "{n} - "), ("For: {n}", "Name: {n}")),
}
CALLED = ((". Title it '{t}'.", ". Call it '{t}'.", " (title: {t})."), ("'{t}' - ", "Title: {t}. "), ("Title: {t}",))


def all_name_values() -> list[str]:
    """Every name and title the naming engine can add (the disjointness test reads it)."""
    return sorted({*ORGS, *PLACES, *PEOPLE, *TITLES})


def _told(rng, sentences, vals) -> str:
    """Values said in a sentence (the naming engine): begun by a lead the opener leaves alone, or ended by a tail."""
    keys = {}
    for i, (_, v) in enumerate(vals):
        low = v[:1].lower() + v[1:]
        keys |= {f"v{i}": v, f"l{i}": low, f"a{i}": _a(low)}
    said = rng.choice(sentences).format(**keys)
    if rng.random() < 0.4:
        return rng.choice(TOLD_LEADS) + said
    return _cap(said) + rng.choice(TOLD_TAILS)


def name_subject(rng, c: Card, intent: str, request: str, req: Requirements) -> tuple[str, str, str, Requirements]:
    """Name who or where a titled card is for (a caption under its title), or title it in quotes (naming
    engine): the request's new text, a prefix to put before its opener, a line to put after it, and
    what the card must show. A card whose title shows a value of the request (a list's owner) is left alone."""
    comps = {x["id"]: x["component"] for x in c.components}
    body = next((x["Column"] for x in comps.values() if "Column" in x and "title" in x["Column"]["children"]["explicitList"]),
                None)
    if intent not in NAMED_BY or body is None or "Text" not in comps.get("title", {}) or \
            any(v in comps["title"]["Text"]["text"].get("literalString", "") for v in req.values):
        return request, "", "", req
    if rng.random() < 0.35:
        name = rng.choice(TITLES)
        comps["title"]["Text"]["text"] = {"literalString": name}
        after, before, line = CALLED
    else:
        kind = rng.choice(NAMED_BY[intent])
        name = rng.choice({"org": ORGS, "place": PLACES, "person": PEOPLE}[kind])
        kids = body["children"]["explicitList"]
        kids.insert(kids.index("title") + 1, c.text("for", name, "caption"))
        after, before, line = SAID[kind]
    where = rng.random()
    prefix = suffix = ""
    if "\n" in request or where < 0.3:  # a line of its own, after the request's last word
        suffix = "\n" + rng.choice(line).format(n=name, t=name)
    elif where < 0.6 or request.rstrip()[-1:] in ".?!":
        prefix = rng.choice(before).format(n=name, t=name)
    else:
        request = request.rstrip() + rng.choice(after).format(n=name, t=name)
    return request, prefix, suffix, dataclasses.replace(req, values=(*req.values, name))


# ---- verification and examples ----------------------------------------------------------

def verify(reply: str, req: Requirements) -> list[str]:
    """Problems with a reply as the server would parse and draw it (empty: keep it)."""
    from macaronic.genui.grade import coverage
    from macaronic.genui.output import parse_genui_output

    parsed = parse_genui_output(reply)
    problems = [f"invalid: {e}" for e in parsed.validation.errors][:3] if not parsed.valid else []
    problems += [f"repaired: {r}" for r in parsed.repairs]
    met, missing = coverage(req, parsed.messages)
    return problems + missing


# The intents of the first engine (2026-12-04): `genui_engine` draws from these alone, so the shipped
# adapter it trained still rebuilds its recorded data; `genui_engine_wide` draws from all of INTENTS.
FIRST_INTENTS = ("info_card", "form", "checklist", "settings", "choice", "list", "tabs", "slot_picker", "stats")


def card(rng: random.Random, intent: str | None = None, sid: str = "card", intents=None):
    every = INTENTS | OPEN_INTENTS | MIX_INTENTS
    names = list(intents or INTENTS)
    name = intent or rng.choices(names, weights=[every[n][1] for n in names])[0]
    c = Card(sid)
    request, data, text, req = every[name][0](rng, c)
    if name == "widget":  # the mixing engine's widgets name their own button; in another language, no English opener
        request = _ask(rng, request) if text == "Here it is." else request
    elif data is not None and rng.random() < 0.25:  # the values as a data block, as a client might pass them
        head = re.split(r"[:(]| - | showing ", request)[0].strip()
        if _COMPOSE.get() and rng.random() < 0.6:
            head, req = compose(rng, c, head, req)
        request = _ask(rng, head) + "\n\nData:\n" + json.dumps(data, ensure_ascii=False)
    else:
        composed = _COMPOSE.get() and rng.random() < 0.6
        prefix = suffix = ""
        if _NAME.get() and rng.random() < 0.5:
            request, prefix, suffix, req = name_subject(rng, c, name, request, req)
        if composed:
            request, req = compose(rng, c, request, req)
        request = _ask(rng, request)
        if prefix:  # after a name, the request goes on without an opener of its own
            request = prefix + re.sub(r"^(Hey, |Please )", "", request)
        request += suffix
    reply = json.dumps({"text_response": text, "a2ui": c.messages("root")}, ensure_ascii=False, separators=(",", ":"))
    return name, request, reply, req


def examples(n: int, seed: int = 0, intents=FIRST_INTENTS, open_values: bool = False, compose: bool = False,
             mix: bool = False, name: bool = False) -> list:
    """`n` verified GenUI examples (seeded, deterministic) under the served genui prompt head.
    `open_values`: the open engine (drawn button labels, redrawn numbers and codes, `OPEN_INTENTS`);
    `compose`: the composing engine (named buttons, fields and checkboxes added to any intent);
    `mix`: the mixing engine (widgets of several controls, lists drawn as Lists, other languages);
    `name`: the naming engine (who or where a card is for, quoted titles, values said in a sentence)."""
    token, token2, token3, token4 = _OPEN.set(open_values), _COMPOSE.set(compose), _MIX.set(mix), _NAME.set(name)
    try:
        return _examples(n, seed, intents)
    finally:
        _OPEN.reset(token)
        _COMPOSE.reset(token2)
        _MIX.reset(token3)
        _NAME.reset(token4)


def _examples(n: int, seed: int, intents) -> list:
    from macaronic.harness import load_bundle
    from macaronic.prompts import prompt_head
    from macaronic.datagen.examples import Example

    head = prompt_head(load_bundle(), "genui")  # what the served harness puts before a genui turn
    engine = ("genui-name" if _NAME.get() else "genui-mix" if _MIX.get() else "genui-compose" if _COMPOSE.get()
              else "genui-open" if _OPEN.get() else "genui-engine")
    rng = random.Random(f"{engine}:{seed}")
    out = []
    while len(out) < n:
        name, request, reply, req = card(rng, sid=f"card-{len(out)}", intents=intents)
        problems = verify(reply, req)
        if problems:
            raise AssertionError(f"{name}: {problems}")
        out.append(Example((*head, {"role": "user", "content": request}, {"role": "assistant", "content": reply}), "genui",
                           f"engine/genui/{name}"))
    return out
