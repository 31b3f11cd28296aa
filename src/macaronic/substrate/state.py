"""The substrate's world state: an SQLite schema, seeded initial states and a canonical hash.

A state is a plain `sqlite3.Connection` (a database file or `:memory:`) holding five domains
(calendar events, reminders, contacts, notes, orders) plus a `meta` table with the simulated
"today" of the episode. `make_state(seed)` builds the same rows for the same seed on any machine;
`state_hash(conn)` dumps every table as sorted JSON and hashes it, which is what grading compares.

This module knows nothing about tools, permissions, episodes or logs: it only creates, copies,
dumps and hashes states.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import random
import sqlite3
from dataclasses import dataclass, field

DEFAULT_ACTOR = "alex"
OTHER_ACTORS = ("sam", "jordan")
EPOCH = dt.date(2025, 1, 6)  # a Monday; "today" is a seeded offset from it

SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE contacts (
    id INTEGER PRIMARY KEY, owner TEXT NOT NULL, name TEXT NOT NULL,
    email TEXT NOT NULL, phone TEXT NOT NULL, company TEXT NOT NULL);
CREATE TABLE events (
    id INTEGER PRIMARY KEY, owner TEXT NOT NULL, title TEXT NOT NULL,
    start TEXT NOT NULL, "end" TEXT NOT NULL, location TEXT NOT NULL,
    attendees TEXT NOT NULL);
CREATE TABLE reminders (
    id INTEGER PRIMARY KEY, owner TEXT NOT NULL, title TEXT NOT NULL,
    due TEXT, done INTEGER NOT NULL DEFAULT 0);
CREATE TABLE notes (
    id INTEGER PRIMARY KEY, owner TEXT NOT NULL, title TEXT NOT NULL,
    body TEXT NOT NULL, tags TEXT NOT NULL);
CREATE TABLE orders (
    id INTEGER PRIMARY KEY, customer TEXT NOT NULL, item TEXT NOT NULL,
    amount_cents INTEGER NOT NULL, status TEXT NOT NULL, ordered_on TEXT NOT NULL,
    delivered_on TEXT, closed_on TEXT);
"""

# Dump order is fixed so the hash never depends on sqlite_master ordering.
TABLES = ("meta", "contacts", "events", "reminders", "notes", "orders")
KEYS = {"meta": "key"}  # every other table is keyed by `id`

FIRST = ("Ana", "Ben", "Chloe", "Dev", "Elena", "Farid", "Grace", "Hugo", "Iris", "Jonas",
         "Kemi", "Liam", "Maya", "Noah", "Olga", "Priya", "Quinn", "Rosa", "Tariq", "Uma",
         "Victor", "Wen", "Yusuf", "Zoe")
LAST = ("Abbott", "Bauer", "Costa", "Diallo", "Eriksen", "Fischer", "Garcia", "Haddad",
        "Ito", "Jensen", "Kowalski", "Larsen", "Moreau", "Nakamura", "Okafor", "Petrov",
        "Quispe", "Rossi", "Sato", "Tanaka")
COMPANIES = ("Northwind", "Bluefin Labs", "Cedar Clinic", "Harbor Bank", "Lumen Studio",
             "Orchid Foods", "Pioneer Legal", "Quartz Media", "Riverside School", "Summit Gym")
EVENT_TITLES = ("Team standup", "Dentist appointment", "Budget review", "Yoga class",
                "Lunch with a client", "Quarterly planning", "Piano lesson", "Car service",
                "Book club", "Design critique", "Parent-teacher meeting", "Hiring sync",
                "Physio session", "Product demo", "Haircut", "Board meeting", "Code review",
                "Vet visit", "Coffee chat", "Tax advisor call", "Marketing sync",
                "Sprint retro", "Moving day prep", "Guitar lesson", "Eye exam", "Team dinner",
                "Offsite planning", "Insurance call", "Language class", "Roadmap review")
LOCATIONS = ("Room 4B", "Main office", "Cafe Lumen", "Online", "City clinic", "Home",
             "Library", "Gym", "Conference hall", "Downtown studio")
REMINDER_TITLES = ("Pay electricity bill", "Renew passport", "Buy birthday gift",
                   "Call the plumber", "Return library books", "Book flights",
                   "Water the plants", "Submit expense report", "Order printer ink",
                   "Schedule car inspection", "Send thank-you cards", "Back up laptop",
                   "Pick up dry cleaning", "Update resume", "Cancel old subscription",
                   "Refill prescription", "Change smoke alarm battery", "Pay rent")
NOTE_TOPICS = ("Packing list", "Garden plan", "Meeting notes", "Recipe ideas", "Gift ideas",
               "Reading list", "Trip itinerary", "Workout routine", "Project ideas",
               "Wifi setup", "Budget draft", "Interview questions", "Home repairs",
               "Podcast notes")
NOTE_WORDS = ("remember", "check", "compare", "prices", "friday", "bring", "weekend", "list",
              "follow up", "ask", "draft", "ideas", "budget", "before", "morning", "quiet")
ITEMS = ("Wireless headphones", "Espresso machine", "Running shoes", "Desk lamp",
         "Backpack", "Phone case", "Yoga mat", "Blender", "Electric kettle", "Office chair",
         "Hiking boots", "Water bottle", "Bluetooth speaker", "Winter jacket", "Monitor stand",
         "Air purifier", "Cookware set", "Smart watch", "Board game", "Rain jacket")
# Orders are drawn from this plan so every state has each policy case (a refund inside the
# window, one outside it, a cancellable order, ...), whatever the seed.
ORDER_PLAN = ("delivered_recent", "delivered_recent", "delivered_old", "delivered_old",
              "shipped", "placed", "placed", "refunded", "cancelled", "delivered_recent",
              "delivered_old", "shipped")


@dataclass(frozen=True)
class StateSize:
    contacts: int = 16
    events: int = 22
    reminders: int = 12
    notes: int = 10
    orders: int = len(ORDER_PLAN)


@dataclass(frozen=True)
class StateSpec:
    """Everything needed to rebuild an initial state: same spec, same rows, same hash."""

    seed: int
    today: str | None = None  # ISO date; None derives it from the seed
    size: StateSize = field(default_factory=StateSize)
    actor: str = DEFAULT_ACTOR

    def build(self, path: str = ":memory:") -> sqlite3.Connection:
        return make_state(self.seed, today=self.today, size=self.size, actor=self.actor, path=path)

    def to_dict(self) -> dict:
        return {"seed": self.seed, "today": self.today, "actor": self.actor,
                "size": self.size.__dict__.copy()}

    @classmethod
    def from_dict(cls, d: dict) -> StateSpec:
        size = StateSize(**d["size"]) if d.get("size") else StateSize()
        return cls(seed=int(d["seed"]), today=d.get("today"), size=size,
                   actor=d.get("actor", DEFAULT_ACTOR))


def seed_today(seed: int) -> dt.date:
    return EPOCH + dt.timedelta(days=seed % 360)


def connect(path: str = ":memory:") -> sqlite3.Connection:
    # Autocommit mode: the episode layer issues its own SAVEPOINTs, so the sqlite3 module must
    # not open implicit transactions behind its back.
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.row_factory = sqlite3.Row
    # SQLite's lower() folds ASCII only; searches should find "Ångström" from "ångström".
    conn.create_function("casefold", 1, lambda v: v.casefold() if isinstance(v, str) else v,
                         deterministic=True)
    return conn


def make_state(seed: int, *, today: str | None = None, size: StateSize | None = None,
               actor: str = DEFAULT_ACTOR, path: str = ":memory:") -> sqlite3.Connection:
    """Create a database at `path` with the seeded initial rows and return the connection."""
    size = size or StateSize()
    day = dt.date.fromisoformat(today) if today else seed_today(seed)
    rng = random.Random(f"macaronic-substrate-{seed}")
    conn = connect(path)
    conn.executescript(SCHEMA)
    people = (actor,) + tuple(a for a in OTHER_ACTORS if a != actor)
    with_tx(conn, lambda: _fill(conn, rng, day, size, people))
    return conn


def with_tx(conn: sqlite3.Connection, fn) -> None:
    conn.execute("BEGIN")
    try:
        fn()
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _fill(conn, rng: random.Random, day: dt.date, size: StateSize, people: tuple) -> None:
    actor = people[0]
    conn.execute("INSERT INTO meta VALUES ('today', ?)", (day.isoformat(),))
    conn.execute("INSERT INTO meta VALUES ('actor', ?)", (actor,))
    names = rng.sample([f"{f} {l}" for f in FIRST for l in LAST], size.contacts)
    for name in names:
        first, last = name.lower().split()
        company = rng.choice(COMPANIES)
        email = f"{first}.{last}@{company.split()[0].lower()}.example"
        phone = f"+1-555-{rng.randrange(100, 1000):03d}-{rng.randrange(0, 10000):04d}"
        conn.execute("INSERT INTO contacts (owner, name, email, phone, company) VALUES (?,?,?,?,?)",
                     (actor, name, email, phone, company))
    emails = [r[0] for r in conn.execute("SELECT email FROM contacts ORDER BY id")]
    titles = rng.sample(EVENT_TITLES, min(size.events, len(EVENT_TITLES)))
    for title, owner in zip(titles, _owners(rng, len(titles), people, 0.3)):
        date = day + dt.timedelta(days=rng.randrange(-10, 25))
        hour, minutes = rng.randrange(8, 18), rng.choice((0, 30))
        start = dt.datetime.combine(date, dt.time(hour, minutes))
        end = start + dt.timedelta(minutes=rng.choice((30, 60, 90)))
        attendees = sorted(rng.sample(emails, rng.randrange(0, 3)))
        conn.execute("INSERT INTO events (owner, title, start, \"end\", location, attendees) "
                     "VALUES (?,?,?,?,?,?)",
                     (owner, title, _fmt(start), _fmt(end), rng.choice(LOCATIONS),
                      json.dumps(attendees)))
    titles = rng.sample(REMINDER_TITLES, min(size.reminders, len(REMINDER_TITLES)))
    for title, owner in zip(titles, _owners(rng, len(titles), people, 0.25)):
        due = (day + dt.timedelta(days=rng.randrange(-5, 20))).isoformat() if rng.random() < 0.8 else None
        done = 1 if rng.random() < 0.2 else 0
        conn.execute("INSERT INTO reminders (owner, title, due, done) VALUES (?,?,?,?)",
                     (owner, title, due, done))
    titles = rng.sample(NOTE_TOPICS, min(size.notes, len(NOTE_TOPICS)))
    for title, owner in zip(titles, _owners(rng, len(titles), people, 0.3)):
        body = " ".join(rng.choice(NOTE_WORDS) for _ in range(rng.randrange(6, 14))).capitalize() + "."
        tags = sorted(set(rng.sample(("home", "work", "travel", "ideas", "health"), 2)))
        conn.execute("INSERT INTO notes (owner, title, body, tags) VALUES (?,?,?,?)",
                     (owner, title, body, json.dumps(tags)))
    plan = list(ORDER_PLAN[: size.orders])
    rng.shuffle(plan)
    for item, kind in zip(rng.sample(ITEMS, len(plan)), plan):
        _insert_order(conn, rng, day, actor, item, kind)


def _owners(rng: random.Random, n: int, people: tuple, share: float) -> list[str]:
    """Owners for n shared items: a fixed share belongs to the other people, so every state has
    items the actor may read but not change."""
    k = min(n, max(1, round(n * share))) if n > 1 else 0
    owners = [people[0]] * (n - k) + [people[1 + i % (len(people) - 1)] for i in range(k)]
    rng.shuffle(owners)
    return owners


def _insert_order(conn, rng: random.Random, day: dt.date, actor: str, item: str, kind: str) -> None:
    delivered_age = {"delivered_recent": rng.randrange(1, 26), "delivered_old": rng.randrange(35, 90),
                     "refunded": rng.randrange(5, 25)}.get(kind)
    status = {"delivered_recent": "delivered", "delivered_old": "delivered"}.get(kind, kind)
    if delivered_age is not None:
        delivered = day - dt.timedelta(days=delivered_age)
        ordered = delivered - dt.timedelta(days=rng.randrange(2, 8))
    else:
        delivered = None
        ordered = day - dt.timedelta(days=rng.randrange(0, 6))
    closed = None
    if kind == "refunded":
        closed = (delivered + dt.timedelta(days=rng.randrange(1, 4))).isoformat()
    elif kind == "cancelled":
        closed = ordered.isoformat()
    amount = rng.randrange(8, 400) * 100 + rng.choice((0, 49, 99))
    conn.execute("INSERT INTO orders (customer, item, amount_cents, status, ordered_on, "
                 "delivered_on, closed_on) VALUES (?,?,?,?,?,?,?)",
                 (actor, item, amount, status, ordered.isoformat(),
                  delivered.isoformat() if delivered else None, closed))


def _fmt(t: dt.datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M")


def today_of(conn: sqlite3.Connection) -> dt.date:
    return dt.date.fromisoformat(conn.execute("SELECT value FROM meta WHERE key='today'").fetchone()[0])


def dump(conn: sqlite3.Connection) -> dict[str, list[dict]]:
    """All tables as {table: [row dicts sorted by key]}: the canonical view of a state."""
    out = {}
    for table in TABLES:
        key = KEYS.get(table, "id")
        rows = conn.execute(f'SELECT * FROM {table} ORDER BY "{key}"').fetchall()
        out[table] = [dict(r) for r in rows]
    return out


def canonical_json(obj) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def state_hash(conn: sqlite3.Connection) -> str:
    return hashlib.sha256(canonical_json(dump(conn)).encode()).hexdigest()


def copy_state(src: sqlite3.Connection, dst: sqlite3.Connection | None = None) -> sqlite3.Connection:
    """Copy every page of `src` into `dst` (a fresh in-memory database when None)."""
    dst = dst or connect(":memory:")
    src.backup(dst)
    return dst
