"""Generated tool worlds for the agent engine: a domain's records, the tools over them (names,
descriptions, typed / enum / optional arguments, optionally masked names), and their execution.

A world holds one domain's records, each under an id nobody can guess ("TK-4821"), so a request
that names a record by its title or name needs a lookup first. Its tools are a search, a get, an
update, a delete, a create over the domain, a message tool, and one or two tools of another
domain as distractors. Tool and argument names are drawn from synonyms, or masked to opaque
names (`fn_3a1c`), so the name to call has to be read from the description. Domains here are
never the agent suite's (calendar, reminders, contacts, notes, orders).

Knows nothing about requests, phrasings or training: `World.call` executes, nothing else.
"""

from __future__ import annotations

import copy
import datetime as dt
import random
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Field:
    name: str
    kind: str  # str | int | num | enum | date | email
    values: tuple = ()  # enum values, or a pool to draw from
    label: str = ""  # how a request names it
    lo: float = 0
    hi: float = 100

    @property
    def said(self) -> str:
        return self.label or self.name.replace("_", " ")


@dataclass(frozen=True)
class Domain:
    noun: str
    plural: str
    key: str  # the field a request names a record by
    prefix: str  # id prefix
    desc: str  # what the tools cover, in a few words
    keys: tuple[str, ...]
    fields: tuple[Field, ...]
    owner: str | None = None  # an email field a message can go to
    terminal: tuple[str, str] | None = None  # (field, value): a record in this state refuses changes
    people: bool = False  # keys are "First Last" names (a first name alone can be ambiguous)

    def field(self, name: str) -> Field:
        return next(f for f in self.fields if f.name == name)

    @property
    def mutable(self) -> tuple[Field, ...]:
        return tuple(f for f in self.fields if f.kind != "email")


FIRST = ("Sam", "Alex", "Maria", "Jonas", "Priya", "Leo", "Hana", "Omar", "Ines", "Tom", "Yuki", "Nora",
         "Felix", "Amara", "Diego", "Lena", "Ravi", "Clara", "Kofi", "Mei")
LAST = ("Ortiz", "Lee", "Novak", "Haddad", "Brennan", "Sato", "Okafor", "Lindqvist", "Moreau", "Petrov",
        "Castillo", "Nakamura", "Schulz", "Adeyemi", "Rossi", "Kowalski", "Dubois", "Fischer", "Iyer", "Walsh")
PEOPLE = tuple(f"{f} {l}" for f in FIRST for l in LAST)

DOMAINS: tuple[Domain, ...] = (
    Domain("ticket", "tickets", "title", "TK", "support tickets",
           ("Printer jams on floor 3", "VPN drops every hour", "Laptop fan is loud", "Cannot log in to payroll",
            "Projector in room B flickers", "Email quota exceeded", "Badge reader offline", "Slow wifi in lobby",
            "Monitor has dead pixels", "Shared drive is read-only", "Phone line crackles", "Coffee machine error E4"),
           (Field("status", "enum", ("open", "in_progress", "resolved", "closed")),
            Field("priority", "enum", ("low", "normal", "high", "urgent")),
            Field("assignee_email", "email", label="assignee"),
            Field("due", "date", label="due date")),
           owner="assignee_email", terminal=("status", "closed")),
    Domain("book", "books", "title", "BK", "the library catalogue",
           ("The Silent Harbor", "Atlas of Small Rivers", "A Winter in Lisbon", "The Glass Orchard",
            "Notes on Tides", "Paper Lanterns", "The Last Cartographer", "Salt and Cedar", "Echoes of Mars",
            "The Quiet Engine", "Blue Hour", "Letters from Oslo"),
           (Field("status", "enum", ("available", "checked_out", "reserved", "lost")),
            Field("shelf", "str", ("A1", "A2", "B4", "C3", "D7", "E2")),
            Field("copies", "int", lo=1, hi=9),
            Field("borrower_email", "email", label="borrower")),
           owner="borrower_email", terminal=("status", "lost")),
    Domain("pet", "pets", "name", "PT", "the vet clinic's patients",
           ("Biscuit", "Pepper", "Mochi", "Juniper", "Rocket", "Olive", "Waffles", "Ziggy", "Clover", "Nugget",
            "Pickles", "Marble"),
           (Field("species", "enum", ("dog", "cat", "rabbit", "parrot", "hamster")),
            Field("weight_kg", "num", lo=0.3, hi=40, label="weight"),
            Field("next_visit", "date", label="next visit"),
            Field("owner_email", "email", label="owner")),
           owner="owner_email"),
    Domain("employee", "employees", "name", "EM", "the staff directory",
           PEOPLE,
           (Field("department", "enum", ("sales", "engineering", "finance", "support", "legal")),
            Field("office", "str", ("Berlin", "Austin", "Lagos", "Osaka", "Lyon", "Toronto")),
            Field("extension", "int", lo=100, hi=999),
            Field("email", "email")),
           owner="email", people=True),
    Domain("product", "products", "name", "PR", "the shop's inventory",
           ("Blue ceramic mug", "Oak cutting board", "Linen tea towel", "Steel water bottle", "Wool beanie",
            "Bamboo toothbrush", "Canvas tote bag", "Cast iron skillet", "Glass teapot", "Cork yoga mat",
            "Walnut desk tray", "Copper watering can"),
           (Field("category", "enum", ("kitchen", "home", "outdoor", "apparel", "bath")),
            Field("stock", "int", lo=0, hi=250),
            Field("price", "num", lo=2, hi=120),
            Field("supplier_email", "email", label="supplier")),
           owner="supplier_email"),
    Domain("device", "devices", "name", "DV", "the smart-home devices",
           ("kitchen lights", "hallway thermostat", "garage door", "porch camera", "living room speaker",
            "bedroom fan", "garden sprinkler", "office lamp", "basement dehumidifier", "front door lock"),
           (Field("power", "enum", ("on", "off")),
            Field("level", "int", lo=0, hi=100),
            Field("room", "str", ("kitchen", "hallway", "garage", "porch", "office", "garden")),
            Field("mode", "enum", ("auto", "eco", "manual"))),
           None),
    Domain("invoice", "invoices", "client", "IN", "the billing system's invoices",
           ("Northwind Traders", "Blue Fern Studio", "Helios Dental", "Quarry & Co", "Maple Street Bakery",
            "Orbit Logistics", "Tidewater Marine", "Lumen Labs", "Red Kite Films", "Sable Architects"),
           (Field("amount", "num", lo=50, hi=9000),
            Field("status", "enum", ("draft", "sent", "paid", "overdue")),
            Field("due", "date", label="due date"),
            Field("billing_email", "email", label="billing contact")),
           owner="billing_email", terminal=("status", "paid")),
    Domain("dish", "dishes", "name", "DS", "the cafe menu's dishes",
           ("Lemon garlic pasta", "Smoky lentil soup", "Miso glazed salmon", "Chickpea curry",
            "Rhubarb crumble", "Mushroom risotto", "Green shakshuka", "Peanut noodles", "Apricot tart",
            "Herb focaccia"),
           (Field("cuisine", "enum", ("italian", "indian", "japanese", "french", "middle_eastern")),
            Field("minutes", "int", lo=10, hi=180, label="cooking time"),
            Field("servings", "int", lo=1, hi=12),
            Field("rating", "num", lo=1, hi=5)),
           None),
    Domain("vehicle", "vehicles", "plate", "VH", "the company's fleet",
           ("KX-4417", "BR-2290", "LM-8053", "TZ-6618", "QP-3172", "HN-5904", "DW-7741", "CF-1386", "MS-9025"),
           (Field("status", "enum", ("in_service", "in_repair", "retired")),
            Field("mileage_km", "int", lo=1000, hi=250000, label="mileage"),
            Field("next_service", "date", label="next service"),
            Field("driver_email", "email", label="driver")),
           owner="driver_email", terminal=("status", "retired")),
    Domain("course", "courses", "name", "CR", "the school's course list",
           ("Intro to Statistics", "Modern Poetry", "Organic Chemistry I", "Urban Design", "Spanish for Travel",
            "Ancient Rome", "Data Visualization", "Field Botany", "Jazz Harmony", "Public Speaking"),
           (Field("credits", "int", lo=1, hi=6),
            Field("room", "str", ("H101", "H204", "L3", "Annex 2", "Lab 5")),
            Field("term", "enum", ("spring", "summer", "autumn", "winter")),
            Field("teacher_email", "email", label="teacher")),
           owner="teacher_email"),
    Domain("member", "members", "name", "MB", "the gym's memberships",
           PEOPLE,
           (Field("plan", "enum", ("basic", "plus", "premium")),
            Field("status", "enum", ("active", "paused", "cancelled")),
            Field("renewal", "date", label="renewal date"),
            Field("email", "email")),
           owner="email", terminal=("status", "cancelled"), people=True),
    Domain("shipment", "shipments", "reference", "SH", "the warehouse's outgoing shipments",
           ("PO-7731", "PO-1184", "PO-5520", "PO-9043", "PO-3376", "PO-6612", "PO-2208", "PO-8891"),
           (Field("carrier", "enum", ("dhl", "ups", "fedex", "postal")),
            Field("weight_kg", "num", lo=0.5, hi=800, label="weight"),
            Field("ship_date", "date", label="ship date"),
            Field("status", "enum", ("pending", "packed", "shipped", "delivered"))),
           None, terminal=("status", "delivered")),
    Domain("room", "rooms", "name", "RM", "the office's meeting rooms",
           ("Aurora", "Basalt", "Cedar", "Delta", "Ember", "Fjord", "Granite", "Harbor", "Iris", "Juniper Hall"),
           (Field("capacity", "int", lo=2, hi=40),
            Field("floor", "int", lo=1, hi=12),
            Field("av_setup", "enum", ("none", "screen", "video_conference")),
            Field("status", "enum", ("available", "maintenance"))),
           None),
    Domain("plant", "plants", "name", "PL", "the greenhouse's plants",
           ("Monstera", "Fiddle leaf fig", "Snake plant", "Bird of paradise", "Peace lily", "String of pearls",
            "Olive tree", "Boston fern", "Jade plant", "Rubber plant"),
           (Field("water_every_days", "int", lo=1, hi=30, label="watering interval"),
            Field("light", "enum", ("low", "medium", "bright")),
            Field("bench", "str", ("north", "south", "east", "west", "center")),
            Field("last_repotted", "date", label="last repotting date")),
           None),
)

AGENT_SUITE_NOUNS = ("event", "reminder", "contact", "note", "order", "calendar")  # the contract's: never here

# logical operation -> synonyms for its verb; the noun follows (singular or plural)
VERBS = {"search": ("search", "find", "lookup", "query"), "get": ("get", "fetch", "read", "describe"),
         "update": ("update", "edit", "modify", "set"), "delete": ("delete", "remove", "drop", "archive"),
         "create": ("create", "add", "new", "register")}
MESSAGE_NAMES = ("send_message", "notify", "email_person", "message_person", "post_message")


def _email(name: str, rng: random.Random) -> str:
    base = name.lower().replace(" ", ".")
    return f"{base}@{rng.choice(('example.com', 'mail.example.org', 'corp.example.net'))}"


def value_for(f: Field, rng: random.Random, today: dt.date):
    if f.kind == "enum":
        return rng.choice(f.values)
    if f.kind == "str":
        return rng.choice(f.values)
    if f.kind == "int":
        return rng.randint(int(f.lo), int(f.hi))
    if f.kind == "num":
        return round(rng.uniform(f.lo, f.hi), 1 if f.hi < 100 else 2)
    if f.kind == "date":
        return (today + dt.timedelta(days=rng.randint(-20, 120))).isoformat()
    if f.kind == "email":
        return _email(rng.choice(PEOPLE), rng)
    raise ValueError(f.kind)


def schema_of(f: Field, enum_case: str) -> dict:
    if f.kind == "enum":
        return {"type": "string", "enum": [cased(v, enum_case) for v in f.values]}
    if f.kind == "int":
        return {"type": "integer"}
    if f.kind == "num":
        return {"type": "number"}
    if f.kind == "date":
        return {"type": "string", "description": "date as YYYY-MM-DD"}
    return {"type": "string"}


def cased(v: str, case: str) -> str:
    return v.upper() if case == "upper" else v


@dataclass
class World:
    domain: Domain
    records: dict[str, dict]  # id -> record (key and fields)
    names: dict[str, str]  # logical op ("search", ..., "message") -> tool name shown
    params: dict[str, str]  # logical parameter ("id", "query", field names, "to", "text") -> shown name
    enum_case: str
    summary_search: bool  # search returns id and key only: a field needs get(id)
    today: dt.date
    distractors: list[dict] = field(default_factory=list)
    sent: list[dict] = field(default_factory=list)
    next_n: int = 0

    # ---- views ----

    def tools(self) -> list[dict]:
        d, p = self.domain, self.params
        fn = lambda op, desc, props, req: {"type": "function", "function": {  # noqa: E731
            "name": self.names[op], "description": desc,
            "parameters": {"type": "object", "properties": props, "required": req}}}
        fields = {p[f.name]: schema_of(f, self.enum_case) for f in d.fields}
        idp = {p["id"]: {"type": "string", "description": f"the {d.noun}'s id"}}
        search_ret = "their ids and " + d.key if self.summary_search else "every field"
        out = [
            fn("search", f"Search {d.desc} by {d.key}. Returns the matching {d.plural} with {search_ret}.",
               {p["query"]: {"type": "string", "description": f"part of the {d.noun}'s {d.key}"}}, [p["query"]]),
            fn("get", f"Get one {d.noun} of {d.desc} by its id, with every field.", idp, [p["id"]]),
            fn("update", f"Change fields of one {d.noun} by its id; give only the fields to change.",
               {**idp, **fields}, [p["id"]]),
            fn("delete", f"Delete one {d.noun} by its id.", idp, [p["id"]]),
            fn("create", f"Create a new {d.noun}. Returns its id.",
               {p["key"]: {"type": "string"}, **fields}, [p["key"]]),
        ]
        if d.owner:
            out.append(fn("message", "Send a short message to a person by email address.",
                          {p["to"]: {"type": "string", "description": "email address"},
                           p["text"]: {"type": "string"}}, [p["to"], p["text"]]))
        return out + self.distractors

    def find(self, key: str) -> dict | None:
        return next((r for r in self.records.values() if r[self.domain.key] == key), None)

    def snapshot(self) -> dict:
        return {"records": copy.deepcopy(self.records), "sent": copy.deepcopy(self.sent)}

    # ---- execution ----

    def call(self, name: str, args: dict) -> dict:
        """Execute one call by its shown tool name and shown argument names."""
        op = next((o for o, n in self.names.items() if n == name), None)
        if op is None:
            return {"error": f"unknown tool {name}"}
        p, d = self.params, self.domain  # argument names are read per operation: shown names may repeat across them
        fields = {f.name: self.normal(f, args[p[f.name]]) for f in d.fields if p[f.name] in args}
        if op == "search":
            q = str(args.get(p["query"], "")).strip().lower()
            hits = [r for r in self.records.values() if q and q in r[d.key].lower()]
            if self.summary_search:
                return {"results": [{"id": r["id"], d.key: r[d.key]} for r in hits]}
            return {"results": [self.shown(r) for r in hits]}
        if op == "message":
            self.sent.append({"to": args.get(p["to"]), "text": args.get(p["text"])})
            return {"sent": True, "to": args.get(p["to"])}
        if op == "create":
            self.next_n += 1
            rid = f"{d.prefix}-{9000 + self.next_n}"
            self.records[rid] = {"id": rid, d.key: args.get(p["key"]), **fields}
            return {"created": True, "id": rid}
        rid = args.get(p["id"])
        if rid not in self.records:
            return {"error": f"no {d.noun} with id {rid}"}
        rec = self.records[rid]
        if op == "get":
            return self.shown(rec)
        if d.terminal and rec.get(d.terminal[0]) == d.terminal[1]:
            return {"error": f"{d.noun} {rid} is {d.terminal[1].replace('_', ' ')} and cannot be changed"}
        if op == "delete":
            del self.records[rid]
            return {"deleted": True, "id": rid}
        if not fields:
            return {"error": "nothing to change"}
        rec.update(fields)
        return {"updated": True, "id": rid}

    def normal(self, f: Field, v):
        return v.lower() if f.kind == "enum" and isinstance(v, str) else v

    def shown(self, rec: dict) -> dict:
        """A record as the tools return it: shown argument names, enums in the world's case."""
        out = {"id": rec["id"], self.domain.key: rec[self.domain.key]}
        for f in self.domain.fields:
            if f.name in rec:
                out[self.params[f.name]] = cased(rec[f.name], self.enum_case) if f.kind == "enum" else rec[f.name]
        return out

    def arg(self, f: Field, v):
        """A field value as an argument: the schema's enum case."""
        return cased(v, self.enum_case) if f.kind == "enum" else v


def _masked(rng: random.Random) -> str:
    return rng.choice(("fn", "tool", "op", "api")) + "_" + "".join(rng.choice("0123456789abcdef") for _ in range(4))


def make_world(rng: random.Random, domain: Domain | None = None, n_records: int | None = None) -> World:
    d = domain or rng.choice(DOMAINS)
    today = dt.date(2027, 1, 1) + dt.timedelta(days=rng.randint(0, 700))
    masked = rng.random() < 0.25
    noun = d.noun if rng.random() < 0.7 else d.plural
    names = {op: (_masked(rng) if masked else f"{rng.choice(VERBS[op])}_{d.plural if op == 'search' else noun}")
             for op in VERBS}
    names["message"] = _masked(rng) if masked else rng.choice(MESSAGE_NAMES)
    if len(set(names.values())) < len(names):
        names = {op: f"{op}_{i}_{d.noun}" for i, op in enumerate(names)}
    params = {"id": rng.choice(("id", f"{d.noun}_id", "ref")), "query": rng.choice(("query", d.key, "q", "text")),
              "key": d.key, "to": rng.choice(("to", "recipient", "email")),
              "text": rng.choice(("text", "message", "body"))}
    if params["query"] == "text" and params["text"] == "text":
        params["query"] = "query"
    for f in d.fields:
        params[f.name] = f.name
    keys = rng.sample(d.keys, min(len(d.keys), n_records or rng.randint(3, 6)))
    records = {}
    for k in keys:
        rid = f"{d.prefix}-{rng.randint(1000, 8999)}"
        while rid in records:
            rid = f"{d.prefix}-{rng.randint(1000, 8999)}"
        records[rid] = {"id": rid, d.key: k, **{f.name: value_for(f, rng, today) for f in d.fields}}
    w = World(d, records, names, params, "upper" if rng.random() < 0.2 else "lower", rng.random() < 0.5, today)
    other = rng.choice([x for x in DOMAINS if x.noun != d.noun])
    for op in rng.sample(("search", "create"), rng.randint(0, 2)):
        w.distractors.append({"type": "function", "function": {
            "name": f"{VERBS[op][0]}_{other.plural if op == 'search' else other.noun}",
            "description": f"{'Search' if op == 'search' else 'Create an entry in'} {other.desc}.",
            "parameters": {"type": "object", "properties": {"query" if op == "search" else other.key: {"type": "string"}},
                           "required": ["query" if op == "search" else other.key]}}})
    rng.shuffle(w.distractors)
    return w
