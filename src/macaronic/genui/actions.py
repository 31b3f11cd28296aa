"""A2UI v0.8 client-to-server `userAction`: build, check, feed back to the model, approve.

Knows the userAction shape (client_to_server.json), how a Button's `action.context` resolves
against a surface's data model (the Python twin of web/a2ui-card.js), the conversation message the harness
feeds back to the GenUI specialist, and the `confirm` convention for approving a pending write.
Knows nothing about the substrate that holds pending writes: it only returns `Approval`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from macaronic.genui.datamodel import MISSING, build_models, get_path, join_path
from macaronic.genui.shared import load_schema

REQUIRED = ("name", "surfaceId", "sourceComponentId", "timestamp", "context")
CONFIRM_ACTION = "confirm"


@dataclass(frozen=True)
class Approval:
    """The user approved the pending substrate write `confirmation_id` from a GenUI card."""

    confirmation_id: str
    surface_id: str
    source_component_id: str


def resolve_context(action: dict[str, Any], model: dict[str, Any], ctx: str = "/") -> dict[str, Any]:
    """A Button action's context with every binding resolved (missing paths become None)."""
    out: dict[str, Any] = {}
    for item in action.get("context") or []:
        value = item.get("value") or {}
        if "path" in value:
            found = get_path(model, join_path(ctx, value["path"]))
            out[item["key"]] = None if found is MISSING else found
        else:
            for key in ("literalString", "literalNumber", "literalBoolean"):
                if key in value:
                    out[item["key"]] = value[key]
                    break
    return out


def make_user_action(messages: list[dict[str, Any]], component_id: str, surface_id: str | None = None,
                     *, ctx: str = "/", timestamp: str | None = None,
                     model: dict[str, Any] | None = None) -> dict[str, Any]:
    """The userAction a click on Button `component_id` produces (what web/a2ui-card.js emits)."""
    for message in messages:
        body = message.get("surfaceUpdate")
        if not body or surface_id not in (None, body.get("surfaceId")):
            continue
        for entry in body.get("components", []):
            button = entry.get("component", {}).get("Button")
            if entry.get("id") == component_id and button:
                sid = body["surfaceId"]
                data = build_models(messages).get(sid, {}) if model is None else model
                return {"userAction": {
                    "name": button["action"]["name"], "surfaceId": sid, "sourceComponentId": component_id,
                    "timestamp": timestamp or datetime.now(timezone.utc).isoformat().replace("+00:00", "Z"),
                    "context": resolve_context(button["action"], data, ctx),
                }}
    raise KeyError(f"no Button {component_id!r} in surface {surface_id!r}")


def check_user_action(obj: Any) -> list[dict[str, str]]:
    """Errors (JSON-pointer paths) in a client-to-server message; [] when well formed."""
    if not isinstance(obj, dict) or set(obj) != {"userAction"}:
        return [{"path": "", "message": "expected exactly {\"userAction\": {...}}"}]
    body = obj["userAction"]
    if not isinstance(body, dict):
        return [{"path": "/userAction", "message": "must be an object"}]
    errors = [{"path": f"/userAction/{k}", "message": f"missing required property {k!r}"}
              for k in REQUIRED if k not in body]
    for key in REQUIRED[:3]:
        if key in body and (not isinstance(body[key], str) or not body[key]):
            errors.append({"path": f"/userAction/{key}", "message": "must be a non-empty string"})
    if "timestamp" in body and not is_timestamp(body["timestamp"]):
        errors.append({"path": "/userAction/timestamp", "message": "must be an ISO 8601 date-time"})
    if "context" in body and not isinstance(body["context"], dict):
        errors.append({"path": "/userAction/context", "message": "must be an object"})
    schema = load_schema("client_to_server.json")
    if schema is not None and not errors:
        import jsonschema

        errors += [{"path": "/" + "/".join(map(str, e.absolute_path)), "message": f"schema: {e.message}"}
                   for e in jsonschema.Draft202012Validator(schema).iter_errors(obj)]
    return errors


def is_timestamp(value: Any) -> bool:
    if not isinstance(value, str) or "T" not in value:
        return False
    try:
        datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


def user_action_to_message(user_action: dict[str, Any]) -> dict[str, str]:
    """The user-role conversation message that feeds a click back to the GenUI specialist: the
    v0.8 client-to-server event itself, as compact JSON."""
    errors = check_user_action(user_action)
    if errors:
        raise ValueError(f"malformed userAction: {errors}")
    return {"role": "user", "content": json.dumps(user_action, ensure_ascii=False, sort_keys=True)}


def approval_from(user_action: dict[str, Any]) -> Approval | None:
    """An `Approval` when the action is `confirm` with a `confirmation_id` in its context."""
    if check_user_action(user_action):
        return None
    body = user_action["userAction"]
    cid = body["context"].get("confirmation_id")
    if body["name"] != CONFIRM_ACTION or not isinstance(cid, str) or not cid:
        return None
    return Approval(cid, body["surfaceId"], body["sourceComponentId"])
