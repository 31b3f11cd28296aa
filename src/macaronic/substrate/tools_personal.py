"""Reminder, contact and note tools over the substrate's SQLite state.

Reminders and notes are shared (everyone's are visible) but only their owner may change them;
contacts are the actor's address book. Knows nothing about transactions or confirmation.
"""

from __future__ import annotations

import json

from macaronic.substrate.toolbase import (
    DATE, ID, Tool, ToolContext, ToolError, contains, delete_owned, described, fetch_one, obj, parse_date,
    require_owner, text,
)

LIMIT = 50
TAGS = {"type": "array", "items": text(30, min_len=1), "maxItems": 10, "uniqueItems": True}


# ---- reminders ------------------------------------------------------------------------

def reminder_dict(row) -> dict:
    d = dict(row)
    d["done"] = bool(d["done"])
    return d


def list_reminders(ctx: ToolContext, args: dict) -> dict:
    where, params = [], []
    if not args.get("include_done", False):
        where.append("done = 0")
    if "due_before" in args:
        where.append("due IS NOT NULL AND due <= ?")
        params.append(parse_date(args["due_before"], "due_before").isoformat())
    if args.get("query"):
        where.append(contains("title"))
        params.append(args["query"])
    sql = "SELECT * FROM reminders" + (" WHERE " + " AND ".join(where) if where else "")
    rows = ctx.conn.execute(sql + " ORDER BY due IS NULL, due, id LIMIT ?", (*params, LIMIT)).fetchall()
    return {"reminders": [reminder_dict(r) for r in rows]}


def add_reminder(ctx: ToolContext, args: dict) -> dict:
    due = parse_date(args["due"], "due").isoformat() if "due" in args else None
    cur = ctx.conn.execute("INSERT INTO reminders (owner, title, due, done) VALUES (?,?,?,0)",
                           (ctx.actor, args["title"], due))
    return {"created": reminder_dict(fetch_one(ctx, "reminders", cur.lastrowid, "reminder"))}


def complete_reminder(ctx: ToolContext, args: dict) -> dict:
    row = fetch_one(ctx, "reminders", args["reminder_id"], "reminder")
    require_owner(ctx, row, "reminder")
    ctx.conn.execute("UPDATE reminders SET done = 1 WHERE id = ?", (row["id"],))
    out = {"completed": reminder_dict(fetch_one(ctx, "reminders", row["id"], "reminder"))}
    if row["done"]:
        out["note"] = "this reminder was already completed"
    return out


def delete_reminder(ctx: ToolContext, args: dict) -> dict:
    return delete_owned(ctx, "reminders", args["reminder_id"], "reminder", reminder_dict)


# ---- contacts -------------------------------------------------------------------------

def search_contacts(ctx: ToolContext, args: dict) -> dict:
    q = args["query"]
    rows = ctx.conn.execute(
        f"SELECT * FROM contacts WHERE {contains('name')} OR {contains('email')} "
        f"OR {contains('company')} ORDER BY name, id LIMIT ?", (q, q, q, LIMIT)).fetchall()
    return {"contacts": [dict(r) for r in rows]}


def get_contact(ctx: ToolContext, args: dict) -> dict:
    return {"contact": dict(fetch_one(ctx, "contacts", args["contact_id"], "contact"))}


def add_contact(ctx: ToolContext, args: dict) -> dict:
    cur = ctx.conn.execute(
        "INSERT INTO contacts (owner, name, email, phone, company) VALUES (?,?,?,?,?)",
        (ctx.actor, args["name"], args.get("email", ""), args.get("phone", ""), args.get("company", "")))
    return {"created": dict(fetch_one(ctx, "contacts", cur.lastrowid, "contact"))}


CONTACT_FIELDS = ("name", "email", "phone", "company")


def update_contact(ctx: ToolContext, args: dict) -> dict:
    row = fetch_one(ctx, "contacts", args["contact_id"], "contact")
    require_owner(ctx, row, "contact")
    changes = {k: args[k] for k in CONTACT_FIELDS if k in args}
    if not changes:
        raise ToolError("invalid_arguments", f"nothing to update; give one of {', '.join(CONTACT_FIELDS)}")
    sets = ", ".join(f"{k} = ?" for k in changes)  # keys from the CONTACT_FIELDS whitelist
    ctx.conn.execute(f"UPDATE contacts SET {sets} WHERE id = ?", (*changes.values(), row["id"]))
    return {"updated": dict(fetch_one(ctx, "contacts", row["id"], "contact"))}


# ---- notes ----------------------------------------------------------------------------

def note_dict(row) -> dict:
    d = dict(row)
    d["tags"] = json.loads(d["tags"])
    return d


def search_notes(ctx: ToolContext, args: dict) -> dict:
    where, params = [], []
    if args.get("query"):
        where.append(f"({contains('title')} OR {contains('body')})")
        params += [args["query"], args["query"]]
    if "tag" in args:
        where.append("EXISTS (SELECT 1 FROM json_each(notes.tags) WHERE value = ?)")
        params.append(args["tag"])
    sql = "SELECT * FROM notes" + (" WHERE " + " AND ".join(where) if where else "")
    rows = ctx.conn.execute(sql + " ORDER BY id LIMIT ?", (*params, LIMIT)).fetchall()
    return {"notes": [note_dict(r) for r in rows]}


def get_note(ctx: ToolContext, args: dict) -> dict:
    return {"note": note_dict(fetch_one(ctx, "notes", args["note_id"], "note"))}


def create_note(ctx: ToolContext, args: dict) -> dict:
    cur = ctx.conn.execute("INSERT INTO notes (owner, title, body, tags) VALUES (?,?,?,?)",
                           (ctx.actor, args["title"], args["body"], json.dumps(sorted(args.get("tags", [])))))
    return {"created": note_dict(fetch_one(ctx, "notes", cur.lastrowid, "note"))}


def append_to_note(ctx: ToolContext, args: dict) -> dict:
    row = fetch_one(ctx, "notes", args["note_id"], "note")
    require_owner(ctx, row, "note")
    body = (row["body"] + "\n" + args["text"]) if row["body"] else args["text"]
    if len(body) > 8000:
        raise ToolError("too_large", "a note body is limited to 8000 characters")
    ctx.conn.execute("UPDATE notes SET body = ? WHERE id = ?", (body, row["id"]))
    return {"updated": note_dict(fetch_one(ctx, "notes", row["id"], "note"))}


def delete_note(ctx: ToolContext, args: dict) -> dict:
    return delete_owned(ctx, "notes", args["note_id"], "note", note_dict)


REMINDER_ID = described(ID, "id of the reminder, from list_reminders")
CONTACT_ID = described(ID, "id of the contact, from search_contacts")
NOTE_ID = described(ID, "id of the note, from search_notes")

TOOLS = (
    Tool("list_reminders", "List reminders (open ones unless include_done), soonest due first.",
         obj({"include_done": {"type": "boolean"}, "due_before": DATE,
              "query": text(100, "substring of the title")}),
         "read", list_reminders),
    Tool("add_reminder", "Add a reminder for the user, optionally with a due date.",
         obj({"title": text(200, min_len=1), "due": DATE}, ("title",)), "write", add_reminder),
    Tool("complete_reminder", "Mark one of the user's reminders as done.",
         obj({"reminder_id": REMINDER_ID}, ("reminder_id",)), "write", complete_reminder,
         destructive=True),
    Tool("delete_reminder", "Delete one of the user's reminders.",
         obj({"reminder_id": REMINDER_ID}, ("reminder_id",)), "write", delete_reminder,
         destructive=True),
    Tool("search_contacts", "Find contacts whose name, email or company contains the query.",
         obj({"query": text(100, min_len=1)}, ("query",)), "read", search_contacts),
    Tool("get_contact", "Get one contact by id.", obj({"contact_id": CONTACT_ID}, ("contact_id",)),
         "read", get_contact),
    Tool("add_contact", "Add a contact to the user's address book.",
         obj({"name": text(100, min_len=1), "email": text(120), "phone": text(40),
              "company": text(100)}, ("name",)), "write", add_contact),
    Tool("update_contact", "Change fields of a contact; give only the fields to change.",
         obj({"contact_id": CONTACT_ID, "name": text(100, min_len=1), "email": text(120),
              "phone": text(40), "company": text(100)}, ("contact_id",)),
         "write", update_contact, destructive=True),
    Tool("search_notes", "Find notes whose title or body contains the query, optionally by tag.",
         obj({"query": text(100), "tag": text(30)}), "read", search_notes),
    Tool("get_note", "Get one note by id.", obj({"note_id": NOTE_ID}, ("note_id",)), "read", get_note),
    Tool("create_note", "Create a note for the user.",
         obj({"title": text(200, min_len=1), "body": text(4000), "tags": TAGS}, ("title", "body")),
         "write", create_note),
    Tool("append_to_note", "Append a line of text to one of the user's notes.",
         obj({"note_id": NOTE_ID, "text": text(2000, min_len=1)}, ("note_id", "text")),
         "write", append_to_note, destructive=True),
    Tool("delete_note", "Delete one of the user's notes.", obj({"note_id": NOTE_ID}, ("note_id",)),
         "write", delete_note, destructive=True),
)
