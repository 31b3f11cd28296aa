"""Seeded task generators for the GenUI suite.

Each family is a plain function `(rng, surface_id) -> (prompts, context, text, messages,
requirements)`: many phrasings of one request, the data the card must show, and a gold card
built with `build.Card`. Splits: families in TEST_FAMILIES are held out entirely for test; the
others split instances between train and dev. Knows nothing about grading (`grade.py`) or models.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass, field
from typing import Any, Callable

from macaronic.genui.build import Card

TEST_FAMILIES = ("product_list", "preferences")
DEV_EVERY = 5  # every fifth instance of a train family goes to dev


@dataclass(frozen=True)
class Requirements:
    components: tuple[str, ...] = ()  # component types the card must render
    values: tuple[str, ...] = ()  # data values the card must display
    actions: tuple[str, ...] = ()  # Button action names the card must offer
    action_context: tuple[tuple[str, str, Any], ...] = ()  # (action, key, value) a click must send

    def count(self) -> int:
        return len(self.components) + len(self.values) + len(self.actions) + len(self.action_context)


@dataclass(frozen=True)
class GenUITask:
    id: str
    family: str
    split: str
    prompt: str
    context: dict[str, Any]
    gold: dict[str, Any]
    requirements: Requirements
    prompts: tuple[str, ...] = field(default=(), repr=False)  # every phrasing of this request

    def user_message(self) -> str:
        """The request as the harness sends it: the prompt and the data to show, as JSON."""
        return f"{self.prompt}\n\nData:\n{json.dumps(self.context, ensure_ascii=False, sort_keys=True)}"


# ---- value pools --------------------------------------------------------------------------

PEOPLE = ["Ada Lovelace", "Grace Hopper", "Alan Turing", "Katherine Johnson", "Linus Pauling",
          "Hedy Lamarr", "Claude Shannon", "Barbara Liskov", "Edsger Dijkstra", "Frances Allen"]
MEETINGS = ["Design review", "1:1 with Sam", "Sprint planning", "Budget sync", "Customer call",
            "Hiring panel", "Roadmap review", "Team standup", "Vendor demo", "Retro"]
TIMES = ["9:00 AM", "9:30 AM", "10:00 AM", "11:15 AM", "1:00 PM", "2:30 PM", "3:45 PM", "4:30 PM"]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]
CITIES = ["Lisbon", "Oslo", "Nairobi", "Montreal", "Kyoto", "Austin", "Lima", "Tbilisi"]
CONDITIONS = [("Sunny", "star"), ("Cloudy", "visibilityOff"), ("Rain", "warning"), ("Snow", "info")]
PRODUCTS = ["Trail Backpack", "Desk Lamp", "Espresso Grinder", "Wool Scarf", "Bluetooth Speaker",
            "Ceramic Mug", "Yoga Mat", "Fountain Pen", "Running Shoes", "Notebook Set"]
TASKS = ["Pay rent", "Call the dentist", "Renew passport", "Buy groceries", "Water the plants",
         "Email the landlord", "Book flights", "Return library books", "Fix the bike"]
TOPPINGS = ["Mushrooms", "Olives", "Peppers", "Onions", "Basil", "Pineapple", "Jalapenos"]
WRITES = ["delete the file report-draft.txt", "send the invoice to billing@acme.test",
          "cancel the subscription 'Pro plan'", "transfer $250 to savings",
          "archive 14 old emails", "drop the table staging_orders"]


def pick(rng: random.Random, pool: list[Any], k: int) -> list[Any]:
    return rng.sample(pool, k)


def money(rng: random.Random, lo: int = 5, hi: int = 200) -> str:
    return f"${rng.randint(lo, hi)}.{rng.choice(['00', '50', '99', '25'])}"


# ---- families -----------------------------------------------------------------------------
Family = Callable[[random.Random, str], tuple[list[str], dict, str, list[dict], Requirements]]


def meetings(rng: random.Random, sid: str):
    n = rng.choice([2, 3, 4])
    rows = [{"title": t, "time": f"{d} {h}"} for t, d, h in
            zip(pick(rng, MEETINGS, n), pick(rng, DAYS, n), sorted(pick(rng, TIMES, n)))]
    word = {2: "two", 3: "three", 4: "four"}[n]
    prompts = [f"Show my next {word} meetings as a card with a reschedule button.",
               f"Can you put my upcoming {n} meetings in a card? Add a button to reschedule.",
               f"List the next {word} things on my calendar, with a way to reschedule them.",
               f"I need a card of my next {n} meetings and a reschedule option.",
               f"What are my next {word} meetings? Show them as a card with a Reschedule button.",
               f"Give me a meetings card (next {n}) plus a reschedule action."]
    c = Card(sid)
    c.card("root", c.column("body", c.text("title", f"Next {n} meetings", "h2"), "meetings", "reschedule"))
    c.list("meetings", "meeting", "/meetings")
    c.column("meeting", c.text("meeting-title", "@title", "body"), c.text("meeting-time", "@time", "caption"))
    c.button("reschedule", "Reschedule", "reschedule", {"first_meeting": "/meetings/0/title"}, primary=True)
    c.items("/meetings", rows)
    req = Requirements(("Card", "List", "Button"), tuple(r["title"] for r in rows), ("reschedule",))
    return prompts, {"meetings": rows}, f"Here are your next {n} meetings.", c.messages("root"), req


def weather(rng: random.Random, sid: str):
    city = rng.choice(CITIES)
    cond, icon = rng.choice(CONDITIONS)
    temp, spread = rng.randint(-5, 34), rng.randint(3, 9)
    data = {"city": city, "condition": cond, "temp": f"{temp}°C",
            "high": f"{temp + spread}°C", "low": f"{temp - spread}°C"}
    prompts = [f"What's the weather in {city}? Show it as a card.", f"Weather card for {city}, please.",
               f"Show me current conditions in {city}.", f"How warm is it in {city} right now? Card please.",
               f"Display today's weather for {city} with high and low.", f"{city} weather, as a widget."]
    c = Card(sid)
    c.card("root", c.column("body", "header", c.text("temp", "/temp", "h1"), "range", "refresh"))
    c.row("header", c.add("icon", "Icon", name={"literalString": icon}), c.text("city", "/city", "h3"),
          c.text("cond", "/condition", "caption"), alignment="center")
    c.row("range", c.text("high", "/high", "body"), c.text("low", "/low", "body"))
    c.button("refresh", "Refresh", "refresh_weather", {"city": "/city"})
    c.data(data)
    req = Requirements(("Card", "Icon", "Text"), (city, data["temp"], data["high"], data["low"]), ())
    return prompts, data, f"It is {data['temp']} and {cond.lower()} in {city}.", c.messages("root"), req


def order_refund(rng: random.Random, sid: str):
    order_id = f"A-{rng.randint(10000, 99999)}"
    items = [{"name": p, "price": money(rng)} for p in pick(rng, PRODUCTS, rng.choice([1, 2, 3]))]
    total = money(rng, 50, 400)
    prompts = [f"Show a summary of order {order_id} with a refund button.",
               f"I want to see order {order_id} and request a refund.",
               f"Order {order_id}: summary card with a 'Request refund' action.",
               f"Can I get a refund on {order_id}? Show me the order first.",
               f"Summarize my order {order_id} and let me ask for a refund."]
    c = Card(sid)
    c.card("root", c.column("body", c.text("title", "/order_id", "h2"), "items", c.add("div", "Divider"),
                            "total-row", "refund"))
    c.list("items", "item", "/items")
    c.row("item", c.text("item-name", "@name", "body"), c.text("item-price", "@price", "body"),
          distribution="spaceBetween")
    c.row("total-row", c.text("total-label", "Total", "h4"), c.text("total", "/total", "h4"),
          distribution="spaceBetween")
    c.button("refund", "Request refund", "refund", {"order_id": "/order_id"}, primary=True)
    c.data({"order_id": order_id, "total": total})
    c.items("/items", items)
    req = Requirements(("Card", "Button", "Divider"), (order_id, total, *(i["name"] for i in items)),
                       ("refund",), (("refund", "order_id", order_id),))
    context = {"order_id": order_id, "items": items, "total": total}
    return prompts, context, f"Order {order_id} totals {total}.", c.messages("root"), req


def contact(rng: random.Random, sid: str):
    name = rng.choice(PEOPLE)
    handle = name.split()[0].lower()
    data = {"name": name, "email": f"{handle}@example.org", "phone": f"+1 555 {rng.randint(1000, 9999)}",
            "title": rng.choice(["Engineer", "Designer", "Product lead", "Researcher"])}
    prompts = [f"Show {name}'s contact card.", f"Contact details for {name}, with call and email buttons.",
               f"Pull up {name} as a contact card.", f"How do I reach {name}? Card please.",
               f"Make a contact card for {name}."]
    c = Card(sid)
    c.card("root", c.column("body", "top", c.add("div", "Divider"), c.text("email", "/email"),
                            c.text("phone", "/phone"), "actions"))
    c.row("top", c.add("avatar", "Icon", name={"literalString": "accountCircle"}),
          c.column("who", c.text("name", "/name", "h3"), c.text("role", "/title", "caption")), alignment="center")
    c.row("actions", c.button("call", "Call", "call", {"phone": "/phone"}),
          c.button("mail", "Email", "email", {"email": "/email"}, primary=True))
    c.data(data)
    req = Requirements(("Card", "Button"), (name, data["email"], data["phone"]), ("call", "email"))
    return prompts, data, f"Here is {name}'s contact card.", c.messages("root"), req


def todo(rng: random.Random, sid: str):
    rows = [{"title": t, "done": rng.random() < 0.3} for t in pick(rng, TASKS, rng.choice([3, 4, 5]))]
    prompts = ["Show my todo list with checkboxes.", "Render my tasks as a checklist.",
               "Give me my to-dos so I can tick them off.", "Checklist of my open tasks, please.",
               "Turn these tasks into a todo list with checkboxes and a save button."]
    c = Card(sid)
    c.card("root", c.column("body", c.text("title", "To do", "h2"), "tasks", "save"))
    c.list("tasks", "task", "/tasks")
    c.add("task", "CheckBox", label={"path": "title"}, value={"path": "done"})
    c.button("save", "Save", "save_tasks", primary=True)
    c.items("/tasks", rows)
    req = Requirements(("List", "CheckBox"), tuple(r["title"] for r in rows), ("save_tasks",))
    return prompts, {"tasks": rows}, f"You have {len(rows)} tasks.", c.messages("root"), req


def confirm(rng: random.Random, sid: str):
    write = rng.choice(WRITES)
    cid = f"cf-{rng.randint(100000, 999999)}"
    prompts = [f"Ask me to confirm before you {write}.", f"Please {write} (confirm with me first).",
               f"Show a confirmation dialog: {write}.", f"Before you {write}, get my OK.",
               f"I want to {write}; show confirm and cancel buttons."]
    c = Card(sid)
    c.card("root", c.column("body", c.text("title", "Confirm action", "h3"), c.text("what", "/description"),
                            "buttons"))
    c.row("buttons", c.button("cancel", "Cancel", "cancel", {"confirmation_id": "/confirmation_id"}),
          c.button("ok", "Confirm", "confirm", {"confirmation_id": "/confirmation_id"}, primary=True),
          distribution="end")
    description = f"About to {write}."
    c.data({"description": description, "confirmation_id": cid})
    req = Requirements(("Button",), (description,), ("confirm", "cancel"), (("confirm", "confirmation_id", cid),))
    context = {"pending_write": {"description": description, "confirmation_id": cid}}
    return prompts, context, "Please confirm.", c.messages("root"), req


FORMS = {
    "sign-up": [("Full name", "name", "shortText"), ("Email", "email", "shortText"), ("Password", "password", "obscured")],
    "shipping address": [("Street", "street", "shortText"), ("City", "city", "shortText"), ("Postcode", "postcode", "shortText")],
    "feedback": [("Your name", "name", "shortText"), ("Comments", "comments", "longText")],
    "booking": [("Guest name", "guest", "shortText"), ("Guests", "guests", "number"), ("Notes", "notes", "longText")],
}


def form(rng: random.Random, sid: str):
    kind = rng.choice(sorted(FORMS))
    fields = FORMS[kind]
    prompts = [f"Give me a {kind} form.", f"I need a {kind} form with a submit button.",
               f"Show a form for {kind} details.", f"Create a {kind} form I can fill in.",
               f"Render the {kind} form, please."]
    c = Card(sid)
    ids = [c.add(f"f-{key}", "TextField", label={"literalString": label}, text={"path": f"/form/{key}"},
                 textFieldType=ftype) for label, key, ftype in fields]
    c.card("root", c.column("body", c.text("title", kind.capitalize() + " form", "h2"), *ids, "submit"))
    c.button("submit", "Submit", "submit_form", {key: f"/form/{key}" for _, key, _ in fields}, primary=True)
    c.data({key: "" for _, key, _ in fields}, "/form")
    req = Requirements(("TextField", "Button"), tuple(label for label, _, _ in fields), ("submit_form",))
    return prompts, {"form": kind, "fields": [label for label, _, _ in fields]}, f"Here is the {kind} form.", \
        c.messages("root"), req


def product_list(rng: random.Random, sid: str):
    rows = [{"id": f"p{rng.randint(100, 999)}", "name": n, "price": money(rng),
             "image": f"https://img.example/{n.lower().replace(' ', '-')}.jpg"}
            for n in pick(rng, PRODUCTS, rng.choice([2, 3, 4]))]
    prompts = ["Show these products with add-to-cart buttons.", "List the products as cards I can shop from.",
               "Product list with images, prices and an add to cart button each.",
               "Let me browse these items and add them to my cart.", "Make a shoppable list of these products."]
    c = Card(sid)
    c.column("root", c.text("title", "Products", "h2"), "products")
    c.list("products", "product", "/products")
    c.card("product", c.row("product-row", c.add("product-image", "Image", url={"path": "image"}, usageHint="icon"),
                            c.column("product-info", c.text("product-name", "@name", "h4"),
                                     c.text("product-price", "@price", "body")),
                            c.button("add", "Add to cart", "add_to_cart", {"product_id": "@id"}),
                            alignment="center"))
    c.items("/products", rows)
    req = Requirements(("List", "Image", "Button"), tuple(r["name"] for r in rows) + tuple(r["price"] for r in rows),
                       ("add_to_cart",))
    return prompts, {"products": rows}, f"{len(rows)} products.", c.messages("root"), req


def preferences(rng: random.Random, sid: str):
    options = pick(rng, TOPPINGS, 4)
    chosen = options[:1]
    level = rng.randint(1, 5)
    prompts = ["Let me pick pizza toppings and a spice level.", "Show topping choices and a spice slider.",
               "I want to customise my order: toppings plus how spicy.",
               "Build a toppings picker with a heat slider and an order button.",
               "Preferences card: toppings (multiple) and spice level 1-5."]
    c = Card(sid)
    c.card("root", c.column("body", c.text("title", "Customise", "h2"), "toppings", "spice", "order"))
    c.add("toppings", "MultipleChoice", selections={"path": "/selected"},
          options=[{"label": {"literalString": o}, "value": o.lower()} for o in options])
    c.add("spice", "Slider", label={"literalString": "Spice level"}, value={"path": "/spice"}, minValue=1, maxValue=5)
    c.button("order", "Order", "place_order", {"spice": "/spice"}, primary=True)
    c.data({"spice": level, "selected": json.dumps([o.lower() for o in chosen])})
    req = Requirements(("MultipleChoice", "Slider", "Button"), tuple(options), ("place_order",))
    return prompts, {"toppings": options, "spice": level}, "Pick your toppings.", c.messages("root"), req


def itinerary(rng: random.Random, sid: str):
    city = rng.choice(CITIES)
    days = [{"day": f"Day {i + 1}", "plan": rng.choice(["Museum", "Hike", "Food tour", "Old town walk", "Beach"])}
            for i in range(rng.choice([2, 3]))]
    prompts = [f"Show my {city} itinerary with a tab per day.", f"Trip plan for {city}, one tab for each day.",
               f"Tabs for each day of my {city} trip.", f"Put my {city} schedule in day tabs."]
    c = Card(sid)
    tabs = []
    for i, d in enumerate(days):
        c.text(f"plan-{i}", f"/days/{i}/plan", "body")
        tabs.append({"title": {"path": f"/days/{i}/day"}, "child": f"plan-{i}"})
    c.card("root", c.column("body", c.text("title", "/city", "h2"), c.add("tabs", "Tabs", tabItems=tabs)))
    c.data({"city": city})
    c.items("/days", days)
    req = Requirements(("Tabs", "Card"), (city, *(d["plan"] for d in days)), ())
    return prompts, {"city": city, "days": days}, f"Your {city} trip.", c.messages("root"), req


FAMILIES: dict[str, Family] = {
    "meetings": meetings, "weather": weather, "order_refund": order_refund, "contact": contact,
    "todo": todo, "confirm": confirm, "form": form, "itinerary": itinerary,
    "product_list": product_list, "preferences": preferences,
}


def make_task(family: str, index: int, seed: int = 0) -> GenUITask:
    split = "test" if family in TEST_FAMILIES else "dev" if index % DEV_EVERY == DEV_EVERY - 1 else "train"
    return build_task(family, FAMILIES[family], index, seed, split)


def build_task(family: str, fn: Family, index: int, seed: int, split: str, salt: str = "") -> GenUITask:
    """`make_task` for any family function, also one outside the suite's table (`salt` keeps its
    random stream apart from the table's)."""
    key = f"{salt}{family}:{seed}:{index}"
    rng = random.Random(int(hashlib.sha256(key.encode()).hexdigest()[:16], 16))
    prompts, context, text, messages, req = fn(rng, f"{family}-{index}")
    return GenUITask(f"genui-{family}-{seed}-{index}", family, split, rng.choice(prompts), context,
                     {"text_response": text, "a2ui": messages}, req, tuple(prompts))


def generate_tasks(seed: int = 0, per_family: int = 10, families: tuple[str, ...] | None = None,
                   split: str | None = None) -> list[GenUITask]:
    """Deterministic tasks: `per_family` instances of each family, optionally one split only."""
    tasks = [make_task(f, i, seed) for f in (families or tuple(FAMILIES)) for i in range(per_family)]
    return [t for t in tasks if split is None or t.split == split]
