"""What one adapter sees of a conversation: the per-adapter views over the one prompt layout.

The layout (header, a role instruction before each user turn, replies and tool results) is the
renderer's, `macaronic.prompts`, shared with the trainers, RFT, GRPO and the contract runner; its
pieces are re-exported here for this module's callers. Rebuilt for the next request, every earlier
turn renders to exactly the tokens the engine cached (the role that answered each turn is known,
see store.py).

Views by adapter mode:
- `turn`: the whole history in the layout (`prompts.conversation`; no summaries; KV stays valid
  across switches);
- `full`: the adapter's *own view*: its own segments verbatim; a run of another adapter's
  assistant/tool messages folds into that adapter's hidden summary when one exists (a segment
  with no summary, e.g. from a `turn`-mode adapter or another client, stays verbatim).

Also here: client messages -> internal dicts (`normalize_messages`), and the identity of an
assistant message as a stateless client resends it (`content_key`). Knows messages and the
bundle; knows nothing about engines, routing or HTTP.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

# The layout itself is the one renderer's (macaronic.prompts); these names are re-exported for callers of views.
from macaronic.prompts import (  # noqa: F401
    answered_by as turn_specialists, calls_text, header, prompt_head, render_assistant, render_tool, rendered as _render,
    conversation, role_instruction, tool_prompt,
)

ROLES = ("system", "user", "assistant", "tool")
ANNOTATIONS = ("adapter", "specialist", "summary", "raw")  # keys the harness adds to assistant messages
MAX_MESSAGES = 512


def text_of(content: Any, where: str) -> str:
    """A message content (string, None or a list of text parts) as one string."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for i, p in enumerate(content):
            if isinstance(p, dict) and p.get("type") in ("text", "input_text", "output_text") \
                    and isinstance(p.get("text"), str):
                parts.append(p["text"])
            else:
                raise ValueError(f"{where}.content[{i}]: only text parts are supported")
        return "\n".join(parts)
    raise ValueError(f"{where}.content must be a string, a list of text parts or null")


def normalize_messages(messages: Any) -> list[dict]:
    """Client messages -> internal dicts {role, content: str, tool_calls?, tool_call_id?, ...}.
    `developer` counts as `system`. Raises ValueError naming the first bad message."""
    if not isinstance(messages, list) or not messages:
        raise ValueError("messages must be a non-empty list")
    if len(messages) > MAX_MESSAGES:
        raise ValueError(f"at most {MAX_MESSAGES} messages per request")
    out = []
    for i, m in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(m, dict):
            raise ValueError(f"{where} must be an object")
        role = "system" if m.get("role") == "developer" else m.get("role")
        if role not in ROLES:
            raise ValueError(f"{where}.role must be one of {', '.join(ROLES)} (or developer), got {m.get('role')!r}")
        msg: dict[str, Any] = {"role": role, "content": text_of(m.get("content"), where)}
        if role == "assistant":
            calls = m.get("tool_calls") or []
            if not isinstance(calls, list):
                raise ValueError(f"{where}.tool_calls must be a list")
            msg["tool_calls"] = [_check_call(c, f"{where}.tool_calls[{j}]") for j, c in enumerate(calls)]
            for k in ANNOTATIONS:
                if isinstance(m.get(k), str) and m[k]:
                    msg[k] = m[k]
        if role == "tool":
            msg["tool_call_id"] = m.get("tool_call_id") if isinstance(m.get("tool_call_id"), str) else None
        out.append(msg)
    if out[-1]["role"] not in ("user", "tool"):
        raise ValueError("the last message must be a user message or a tool result")
    return out


def _check_call(c: Any, where: str) -> dict:
    if not isinstance(c, dict) or not isinstance(c.get("function"), dict) \
            or not isinstance(c["function"].get("name"), str):
        raise ValueError(f"{where} must be {{\"id\", \"type\": \"function\", \"function\": {{\"name\", \"arguments\"}}}}")
    args = c["function"].get("arguments", "{}")
    if not isinstance(args, str):
        args = json.dumps(args, ensure_ascii=False, sort_keys=True)
    return {"id": str(c.get("id") or ""), "type": "function",
            "function": {"name": c["function"]["name"], "arguments": args}}


def _canonical_arguments(arguments) -> str:
    """A call's arguments as one string whatever the client made of them: clients resend the JSON
    they parsed (pydantic-ai writes it without spaces), so the key reads the value, not the text."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return arguments
    return json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def content_key(previous_user: str, content: str, tool_calls: list[dict] | None = None) -> str:
    """Identity of an assistant message as a stateless client resends it: the preceding user
    text, the content (stripped) and the calls (names + arguments by value, not ids)."""
    calls = [[c["function"]["name"], _canonical_arguments(c["function"]["arguments"])] for c in tool_calls or []]
    blob = json.dumps([previous_user, content.strip(), calls], ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()


def previous_user_text(messages: list[dict], index: int) -> str:
    for m in reversed(messages[:index]):
        if m["role"] == "user":
            return m["content"]
    return ""


def build_view(messages: list[dict], bundle, *, adapter: str | None, mode: str, specialist: str | None,
               tools: list[dict] | None = None) -> list[dict]:
    """The {role, content} list `adapter` (mode `full` or `turn`) answers from."""
    if mode != "full":
        return conversation(bundle, specialist, messages, tools)
    lead = 0
    while lead < len(messages) and messages[lead]["role"] == "system":
        lead += 1
    view = [header(bundle, [m["content"] for m in messages[:lead]], tools)]
    roles = turn_specialists(messages, specialist)
    i = lead
    while i < len(messages):
        m = messages[i]
        if m["role"] == "user":
            ins = role_instruction(bundle, roles.get(i))
            view += [ins] if ins else []
            view.append({"role": "user", "content": m["content"]})
        elif m["role"] == "system":
            view.append({"role": "system", "content": m["content"]})
        elif mode == "full" and m["role"] in ("assistant", "tool") and not _own(m, adapter, messages, i):
            j = i  # a run of another adapter's segment: fold it into its summary if it has one
            while j < len(messages) and messages[j]["role"] in ("assistant", "tool") \
                    and not _own(messages[j], adapter, messages, j):
                j += 1
            run = messages[i:j]
            last = next((x for x in reversed(run) if x["role"] == "assistant"), None)
            if last is not None and last.get("summary"):
                who = last.get("specialist") or last.get("adapter") or "another"
                view.append({"role": "assistant", "content": f"[{who} specialist, summarized] {last['summary']}"})
            else:
                view += [_render(x) for x in run]
            i = j
            continue
        else:
            view.append(_render(m))
        i += 1
    return view


def _own(m: dict, adapter: str | None, messages: list[dict], i: int) -> bool:
    """Whether an assistant or tool message belongs to `adapter`'s own segment."""
    if m["role"] == "tool":  # a tool result belongs to the assistant message that called it
        caller = next((x for x in reversed(messages[:i]) if x["role"] == "assistant"), None)
        return caller is None or caller.get("adapter") == adapter
    return m.get("adapter") == adapter


def summary_view(view: list[dict], reply: str, bundle) -> list[dict]:
    """The summary hop's prompt: the answer's view, the reply, then the bundle's instruction."""
    return view + [{"role": "assistant", "content": reply}, {"role": "user", "content": bundle.summary_prompt.strip()}]
