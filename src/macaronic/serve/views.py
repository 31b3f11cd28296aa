"""What one adapter sees of a conversation: the Macaronic prompt layout and the per-adapter views.

The layout (the same for serving and for training data, so import it from here):

    system     identity (bundle) + the client's leading system messages + the tool list (compact:
               one line per tool, `tool_prompt`)
    ...for each user turn k:
    system     the system prompt of the role that answered turn k (bundle roles/<role>.md)
    user       turn k's user message, verbatim
    assistant  the reply (tool calls rendered in the canonical <tool_call> text), tool results
               as `tool` messages wrapped in <tool_response>

`prompt_head(bundle, role, tools)` is the opening of a first turn in this layout; the trainer
(`macaronic.train.builders`) builds every example from it, so a served turn sees the prompt its
adapter was trained under. Role instructions sit *before* each user turn, never in one system prompt at the top: the top
must be the same whichever specialist answers, or a `turn`-mode switch would invalidate the
whole history's KV. Rebuilt for the next request, every earlier turn renders to exactly the
tokens the engine cached (the role that answered each turn is known, see store.py).

Views by adapter mode:
- `turn`: the whole history, exactly as above (no summaries; KV stays valid across switches);
- `full`: the adapter's *own view*: its own segments verbatim; a run of another adapter's
  assistant/tool messages folds into that adapter's hidden summary when one exists (a segment
  with no summary, e.g. from a `turn`-mode adapter or another client, stays verbatim).

Knows messages and the bundle; knows nothing about engines, routing or HTTP.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from macaronic.substrate.toolcalls import CLOSE, OPEN, RESULT_CLOSE, RESULT_OPEN, format_tool_call

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


def calls_text(tool_calls: list[dict]) -> str:
    """The canonical <tool_call> text of OpenAI tool calls (what the agent adapter emits)."""
    lines = []
    for c in tool_calls:
        try:
            args = json.loads(c["function"]["arguments"] or "{}")
            lines.append(format_tool_call(c["function"]["name"], args if isinstance(args, dict) else {"_value": args}))
        except (ValueError, RecursionError):  # not JSON, or nested past the recursion limit: verbatim
            lines.append(format_tool_call(c["function"]["name"], {"_raw": c["function"]["arguments"]}))
    return "\n".join(lines)


def content_key(previous_user: str, content: str, tool_calls: list[dict] | None = None) -> str:
    """Identity of an assistant message as a stateless client resends it: the preceding user
    text, the content (stripped) and the calls (names + arguments, not ids)."""
    calls = [[c["function"]["name"], c["function"]["arguments"]] for c in tool_calls or []]
    blob = json.dumps([previous_user, content.strip(), calls], ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()


def previous_user_text(messages: list[dict], index: int) -> str:
    for m in reversed(messages[:index]):
        if m["role"] == "user":
            return m["content"]
    return ""


def render_assistant(m: dict) -> str:
    if m.get("raw"):  # the text the adapter generated, so the cached tokens match exactly
        return m["raw"]
    calls = calls_text(m.get("tool_calls") or [])
    return "\n".join(x for x in (m["content"], calls) if x)


def render_tool(m: dict) -> str:
    try:
        obj = json.loads(m["content"])
        body = json.dumps(obj, ensure_ascii=False, sort_keys=True) if isinstance(obj, dict) else m["content"]
    except (ValueError, TypeError, RecursionError):  # not JSON, or nested past the recursion limit
        body = m["content"]
    return f"{RESULT_OPEN}{body}{RESULT_CLOSE}"


def turn_specialists(messages: list[dict], current: str | None) -> dict[int, str | None]:
    """Index of each user message -> the role that answered it (the first assistant message
    after it says), the current role for the last user turn."""
    out: dict[int, str | None] = {}
    users = [i for i, m in enumerate(messages) if m["role"] == "user"]
    for n, i in enumerate(users):
        end = users[n + 1] if n + 1 < len(users) else len(messages)
        answer = next((messages[j] for j in range(i + 1, end) if messages[j]["role"] == "assistant"), None)
        out[i] = answer.get("specialist") if answer is not None else (current if n == len(users) - 1 else None)
    return out


def tool_prompt(tools: list[dict]) -> str:
    """One line per tool (name, arguments with `?` when optional, the description's first sentence)
    plus the calling convention. The full JSON-schema listing of the substrate's tools is ~3,100
    tokens, too long for a 135M base on CPU, and the specialists were trained on this form."""
    lines = ["Tools (name(arguments): what it does):"]
    for t in tools:  # the server validated the schemas (serve/validate.py); stay total on any dict anyway
        fn = t.get("function", t)
        params = fn.get("parameters") if isinstance(fn.get("parameters"), dict) else {}
        props = params.get("properties") if isinstance(params.get("properties"), dict) else {}
        required = params.get("required") if isinstance(params.get("required"), list) else []
        req = {r for r in required if isinstance(r, str)}
        desc = fn.get("description") if isinstance(fn.get("description"), str) else ""
        args = ", ".join(a if a in req else a + "?" for a in props)
        lines.append(f"- {fn['name']}({args}): {desc.split('.')[0]}.")
    lines.append(f'Call a tool with {OPEN}{{"name": ..., "arguments": {{...}}}}{CLOSE}; results come back as '
                 f"{RESULT_OPEN}...{RESULT_CLOSE}. When done, answer the user in plain text.")
    return "\n".join(lines)


def header(bundle, client_system: list[str], tools: list[dict] | None) -> dict:
    parts = [bundle.identity.strip(), *[s.strip() for s in client_system if s.strip()]]
    if tools:
        parts.append(tool_prompt(tools))
    return {"role": "system", "content": "\n\n".join(parts)}


def role_instruction(bundle, role: str | None) -> dict | None:
    if role is None:
        return None
    try:
        return {"role": "system", "content": bundle.role(role).system_prompt.strip()}
    except KeyError:
        return None


def prompt_head(bundle, role: str | None, tools: list[dict] | None = None,
                client_system: list[str] = ()) -> list[dict]:
    """The messages before a conversation's first user message when `role` answers it: the header
    (identity, client system text, tool list) and the role's instruction. Shared by serving
    (`build_view`) and training data (`macaronic.train.builders`)."""
    ins = role_instruction(bundle, role)
    return [header(bundle, list(client_system), tools), *([ins] if ins else [])]


def build_view(messages: list[dict], bundle, *, adapter: str | None, mode: str, specialist: str | None,
               tools: list[dict] | None = None) -> list[dict]:
    """The {role, content} list `adapter` (mode `full` or `turn`) answers from."""
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


def _render(m: dict) -> dict:
    if m["role"] == "assistant":
        return {"role": "assistant", "content": render_assistant(m)}
    if m["role"] == "tool":
        return {"role": "tool", "content": render_tool(m)}
    return {"role": m["role"], "content": m["content"]}


def summary_view(view: list[dict], reply: str, bundle) -> list[dict]:
    """The summary hop's prompt: the answer's view, the reply, then the bundle's instruction."""
    return view + [{"role": "assistant", "content": reply}, {"role": "user", "content": bundle.summary_prompt.strip()}]
