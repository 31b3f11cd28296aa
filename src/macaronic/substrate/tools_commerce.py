"""Commerce tools: the actor's orders, with a refund and a cancellation policy.

Policy, checked against the episode's simulated today:
- a refund is allowed only for a delivered order, within REFUND_WINDOW_DAYS of delivery;
- a cancellation is allowed only before the order ships (status `placed`);
- an actor sees and acts on their own orders only.
Knows nothing about transactions or confirmation: the episode wraps each call.
"""

from __future__ import annotations

import datetime as dt

from macaronic.substrate.toolbase import (
    ID, Tool, ToolContext, ToolError, contains, described, fetch_one, obj, require_owner, text,
)

REFUND_WINDOW_DAYS = 30
STATUSES = ("placed", "shipped", "delivered", "refunded", "cancelled")


def money(cents: int) -> str:
    return f"${cents // 100}.{cents % 100:02d}"


def order_dict(row, today: dt.date) -> dict:
    d = dict(row)
    d["amount"] = money(d["amount_cents"])
    if d["status"] == "delivered" and d["delivered_on"]:
        last = dt.date.fromisoformat(d["delivered_on"]) + dt.timedelta(days=REFUND_WINDOW_DAYS)
        d["refundable_until"] = last.isoformat()
        d["refundable"] = today <= last
    else:
        d["refundable"] = False
    return d


def _own_order(ctx: ToolContext, order_id: int):
    row = fetch_one(ctx, "orders", order_id, "order")
    require_owner(ctx, row, "order", owner_field="customer")
    return row


def list_orders(ctx: ToolContext, args: dict) -> dict:
    sql, params = "SELECT * FROM orders WHERE customer = ?", [ctx.actor]
    if "status" in args:
        sql += " AND status = ?"
        params.append(args["status"])
    if args.get("query"):
        sql += " AND " + contains("item")
        params.append(args["query"])
    rows = ctx.conn.execute(sql + " ORDER BY ordered_on DESC, id DESC", params).fetchall()
    return {"orders": [order_dict(r, ctx.today) for r in rows]}


def get_order(ctx: ToolContext, args: dict) -> dict:
    return {"order": order_dict(_own_order(ctx, args["order_id"]), ctx.today)}


def refund_refusal(row, today: dt.date) -> str | None:
    """Why the policy refuses a refund of this order today, or None when it allows it."""
    if row["status"] == "refunded":
        return f"order {row['id']} was already refunded on {row['closed_on']}"
    if row["status"] in ("placed", "shipped"):
        return (f"order {row['id']} has not been delivered yet (status {row['status']}); "
                "refunds apply to delivered orders, an order not yet shipped can be cancelled")
    if row["status"] != "delivered":
        return f"order {row['id']} is {row['status']} and cannot be refunded"
    age = (today - dt.date.fromisoformat(row["delivered_on"])).days
    if age > REFUND_WINDOW_DAYS:
        return (f"refunds are only allowed within {REFUND_WINDOW_DAYS} days of delivery; order "
                f"{row['id']} was delivered on {row['delivered_on']}, {age} days ago")
    return None


def refund_order(ctx: ToolContext, args: dict) -> dict:
    # The optional free-text `reason` is not stored: grading compares state hashes, and wording
    # must not decide whether a refund was right.
    row = _own_order(ctx, args["order_id"])
    reason = refund_refusal(row, ctx.today)
    if reason:
        raise ToolError("policy_refused", reason)
    ctx.conn.execute("UPDATE orders SET status = 'refunded', closed_on = ? WHERE id = ?",
                     (ctx.today.isoformat(), row["id"]))
    out = order_dict(fetch_one(ctx, "orders", row["id"], "order"), ctx.today)
    return {"refunded": out, "amount_refunded": out["amount"]}


def cancel_order(ctx: ToolContext, args: dict) -> dict:
    row = _own_order(ctx, args["order_id"])
    if row["status"] != "placed":
        hint = " (ask for a refund after delivery)" if row["status"] in ("shipped", "delivered") else ""
        raise ToolError("policy_refused",
                        f"only orders not yet shipped can be cancelled; order {row['id']} is "
                        f"{row['status']}{hint}")
    ctx.conn.execute("UPDATE orders SET status = 'cancelled', closed_on = ? WHERE id = ?",
                     (ctx.today.isoformat(), row["id"]))
    return {"cancelled": order_dict(fetch_one(ctx, "orders", row["id"], "order"), ctx.today)}


ORDER_ID = described(ID, "id of the order, from list_orders")

TOOLS = (
    Tool("list_orders", "List the user's orders, newest first; filter by status or item substring.",
         obj({"status": {"type": "string", "enum": list(STATUSES)},
              "query": text(100, "substring of the item name")}),
         "read", list_orders),
    Tool("get_order", "Get one of the user's orders by id, with its refund eligibility.",
         obj({"order_id": ORDER_ID}, ("order_id",)), "read", get_order),
    Tool("refund_order",
         f"Refund a delivered order. Policy: only within {REFUND_WINDOW_DAYS} days of delivery.",
         obj({"order_id": ORDER_ID, "reason": text(500)}, ("order_id",)),
         "write", refund_order, destructive=True),
    Tool("cancel_order", "Cancel an order that has not shipped yet.",
         obj({"order_id": ORDER_ID}, ("order_id",)), "write", cancel_order, destructive=True),
)
