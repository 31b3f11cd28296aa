"""Calendar tools: read the shared calendar, create/update/delete the actor's own events.

Everyone's events are visible (a shared household/team calendar); only the owner may change
or delete one. Knows nothing about transactions or confirmation: the episode wraps each call.
"""

from __future__ import annotations

import json

from macaronic.substrate.toolbase import (
    DATE, DATETIME, ID, Tool, ToolContext, ToolError, contains, delete_owned, described, fetch_one, obj,
    parse_date, parse_datetime, require_owner, text,
)

EMAILS = {"type": "array", "items": text(120), "maxItems": 20, "uniqueItems": True,
          "description": "attendee email addresses"}
LIMIT = 50


def event_dict(row) -> dict:
    d = dict(row)
    d["attendees"] = json.loads(d["attendees"])
    return d


def get_today(ctx: ToolContext, args: dict) -> dict:
    return {"today": ctx.today.isoformat(), "weekday": ctx.today.strftime("%A"), "actor": ctx.actor}


def list_events(ctx: ToolContext, args: dict) -> dict:
    where, params = [], []
    if "date" in args:
        day = parse_date(args["date"], "date").isoformat()
        where.append("substr(start, 1, 10) = ?")
        params.append(day)
    if "start_date" in args:
        where.append("substr(start, 1, 10) >= ?")
        params.append(parse_date(args["start_date"], "start_date").isoformat())
    if "end_date" in args:
        where.append("substr(start, 1, 10) <= ?")
        params.append(parse_date(args["end_date"], "end_date").isoformat())
    if args.get("query"):
        where.append(contains("title"))
        params.append(args["query"])
    if "owner" in args:
        where.append("owner = ?")
        params.append(args["owner"])
    sql = "SELECT * FROM events" + (" WHERE " + " AND ".join(where) if where else "")
    rows = ctx.conn.execute(sql + " ORDER BY start, id LIMIT ?", (*params, LIMIT + 1)).fetchall()
    return {"events": [event_dict(r) for r in rows[:LIMIT]], "truncated": len(rows) > LIMIT}


def get_event(ctx: ToolContext, args: dict) -> dict:
    return {"event": event_dict(fetch_one(ctx, "events", args["event_id"], "event"))}


def _check_span(start: str, end: str) -> None:
    if parse_datetime(end, "end") <= parse_datetime(start, "start"):
        raise ToolError("invalid_arguments", f"end {end} must be after start {start}")


def create_event(ctx: ToolContext, args: dict) -> dict:
    _check_span(args["start"], args["end"])
    cur = ctx.conn.execute(
        'INSERT INTO events (owner, title, start, "end", location, attendees) VALUES (?,?,?,?,?,?)',
        (ctx.actor, args["title"], args["start"], args["end"], args.get("location", ""),
         json.dumps(sorted(args.get("attendees", [])))))
    return {"created": event_dict(fetch_one(ctx, "events", cur.lastrowid, "event"))}


UPDATABLE = ("title", "start", "end", "location", "attendees")


def update_event(ctx: ToolContext, args: dict) -> dict:
    row = fetch_one(ctx, "events", args["event_id"], "event")
    require_owner(ctx, row, "event")
    changes = {k: args[k] for k in UPDATABLE if k in args}
    if not changes:
        raise ToolError("invalid_arguments", f"nothing to update; give one of {', '.join(UPDATABLE)}")
    merged = {**dict(row), **changes}
    _check_span(merged["start"], merged["end"])
    if "attendees" in changes:
        changes["attendees"] = json.dumps(sorted(changes["attendees"]))
    # Column names come from the UPDATABLE whitelist, values are bound parameters.
    sets = ", ".join(f'"{k}" = ?' for k in changes)
    ctx.conn.execute(f"UPDATE events SET {sets} WHERE id = ?", (*changes.values(), row["id"]))
    return {"updated": event_dict(fetch_one(ctx, "events", row["id"], "event"))}


def delete_event(ctx: ToolContext, args: dict) -> dict:
    return delete_owned(ctx, "events", args["event_id"], "event", event_dict)


EVENT_ID = described(ID, "id of the event, from list_events")

TOOLS = (
    Tool("get_today", "Return the current date, weekday and the user you act for.",
         obj(), "read", get_today),
    Tool("list_events",
         "List calendar events (everyone's), ordered by start time. Filter by an exact date, "
         "a date range, a title substring or an owner.",
         obj({"date": DATE, "start_date": DATE, "end_date": DATE,
              "query": text(100, "substring of the title"), "owner": text(40)}),
         "read", list_events),
    Tool("get_event", "Get one calendar event by id.", obj({"event_id": EVENT_ID}, ("event_id",)),
         "read", get_event),
    Tool("create_event", "Create an event on the user's calendar.",
         obj({"title": text(200, min_len=1), "start": DATETIME, "end": DATETIME,
              "location": text(200), "attendees": EMAILS}, ("title", "start", "end")),
         "write", create_event),
    Tool("update_event", "Change fields of one of the user's own events; give only the fields to change.",
         obj({"event_id": EVENT_ID, "title": text(200, min_len=1), "start": DATETIME,
              "end": DATETIME, "location": text(200), "attendees": EMAILS}, ("event_id",)),
         "write", update_event, destructive=True),
    Tool("delete_event", "Delete one of the user's own events.",
         obj({"event_id": EVENT_ID}, ("event_id",)), "write", delete_event, destructive=True),
)
