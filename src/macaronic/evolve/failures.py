"""Failure traces -> clusters: what went wrong, by suite and kind, read from graded result rows.

A cluster is (suite, label). Labels come from the trace itself (the messages and the grader's
detail), never from the test split:

  agent   no_call (answered without acting), invented_tool (a call to a tool not in the list),
          bad_arguments (a call the parser refused), act_without_lookup (the first call writes
          although the task needs a fact first), copied_placeholder (a write carries a <...>
          placeholder of the request instead of the value a lookup returned), empty_lookup (a
          write after a lookup that found nothing: the fact was looked for in the wrong place),
          answered_after_lookup (only lookups, and the state is not what was asked: it answered
          where it should have acted), wrong_state, missing_facts
  genui   invalid_card, missing_content
  coding  no_function (no `def`), wrong_output
  chat    too_long, wrong_answer
  mixed   wrong_route:<role>, wrong_answer:<role>

A suite named after a specialist is labelled by the function its registry entry names (`failures`:
the four above are `agent_labels`, `genui_labels`, `coding_labels`, `chat_labels`); a failing row
of a suite without one is labelled `failed`.

A registry entry's `hints` (here `AGENT_HINTS`, ...) map a label to a one-line instruction for the
role's prompt: the prompt-variant operator's text (a fixed reflection per failure kind, not a
generated one); `hints_for` reads them through the registry. Pure.
"""

from __future__ import annotations

import json
import re
from collections import Counter

from macaronic.specialist import lookup

LOOKUPS = ("search_", "list_", "get_")
PLACEHOLDER = re.compile(r"<[^<>\n]{1,40}>")

CHAT_HINTS = {
    "too_long": "Answer in one short sentence.",
    "wrong_answer": "Answer exactly what was asked; give the fact itself.",
}
AGENT_HINTS = {
    "no_call": "When the user asks you to change or look up their data, call a tool; do not answer from memory.",
    "invented_tool": "Call only tools whose names appear in the tool list, spelled exactly.",
    "bad_arguments": "Give every required argument, with the type the tool list shows.",
    "act_without_lookup": ("When the request needs a fact you do not have yet (a company, a phone number, an "
                           "order status), first call the tool that looks it up, then act with what it "
                           "returned."),
    "missing_facts": "In your final answer, state the facts the tools returned (names, dates, statuses).",
    "copied_placeholder": ("When the request holds a placeholder in angle brackets, such as <company>, write "
                           "the value the lookup returned in its place."),
    "empty_lookup": ("Look a fact up with the tool for its kind of record: a person's phone, email or "
                     "company with search_contacts, an order with list_orders, a note with "
                     "search_notes, a reminder with list_reminders, an event with list_events."),
    "answered_after_lookup": ("When the user wants something changed, make the change with the tool that does "
                              "it after the lookup; do not stop at the lookup."),
    "wrong_state": "Change exactly what the user asked for, with the values they gave.",
}
CODING_HINTS = {
    "no_function": "Reply with the whole function in one ```python block.",
    "wrong_output": "Check the function against the examples in the request before replying.",
}
GENUI_HINTS = {
    "invalid_card": 'Reply with one JSON object {"text_response": ..., "a2ui": [...]} and nothing else.',
    "missing_content": "Put every item, field and value the user mentions into the card.",
}


def _calls(text: str):
    from macaronic.substrate.toolcalls import parse_tool_calls
    from macaronic.substrate.tools import TOOLS

    return parse_tool_calls(text, TOOLS)


def label(row: dict) -> list[str]:
    """The failure labels of one graded row (empty when it passed)."""
    if row.get("passed"):
        return []
    if row["suite"] == "mixed":
        out = []
        for t in (row.get("detail") or {}).get("turns", []):
            if not t.get("route_ok"):
                out.append(f"wrong_route:{t['gold']}")
            elif not t.get("answer_ok"):
                out.append(f"wrong_answer:{t['gold']}")
        return out
    labels = lookup(row["suite"], "failures")
    return labels(row) if labels else ["failed"]


def _replies(row: dict) -> list[str]:
    return [m["content"] for m in row.get("messages", []) if m["role"] == "assistant"]


def agent_labels(row: dict) -> list[str]:
    detail = row.get("detail") or {}
    calls, errors, args = [], [], []
    for r in _replies(row):
        p = _calls(r)
        calls += [c["function"]["name"] for c in p.tool_calls]
        args += [c["function"]["arguments"] for c in p.tool_calls]
        if p.error:
            errors.append(p.error)
    if errors and not calls:
        return ["invented_tool" if any("unknown tool" in e for e in errors) else "bad_arguments"]
    if not calls:
        return ["no_call"]
    if not calls[0].startswith(LOOKUPS) and len(calls) == 1 and detail.get("state_match") is False:
        return ["act_without_lookup"]
    request = next((m["content"] for m in row.get("messages", []) if m["role"] == "user"), "")
    writes = [a for name, a in zip(calls, args) if not name.startswith(LOOKUPS)]  # a lookup may search for it
    if not detail.get("state_match") and any(ph in a for ph in PLACEHOLDER.findall(request) for a in writes):
        return ["copied_placeholder"]
    if detail.get("state_match") and detail.get("facts_missing"):
        return ["missing_facts"]
    if not detail.get("state_match"):
        if writes and _empty_lookup_before_write(row.get("messages", [])):
            return ["empty_lookup"]
        if not writes:
            return ["answered_after_lookup"]
    return ["wrong_state"]


def genui_labels(row: dict) -> list[str]:
    return ["invalid_card"] if not (row.get("detail") or {}).get("l1_valid", True) else ["missing_content"]


def coding_labels(row: dict) -> list[str]:
    return ["no_function"] if not any("def " in r for r in _replies(row)) else ["wrong_output"]


def chat_labels(row: dict) -> list[str]:
    replies = _replies(row)
    return ["too_long"] if replies and len(replies[-1].split()) > 30 else ["wrong_answer"]


def _empty_lookup_before_write(messages: list[dict]) -> bool:
    """Whether a write call follows a tool result whose lists are all empty (a lookup that found
    nothing)."""
    empty = False
    for m in messages:
        if m["role"] == "tool":
            text = re.sub(r"</?tool_response>", "", str(m.get("content", ""))).strip()
            try:
                res = json.loads(text)
            except ValueError:
                continue
            lists = [v for v in res.values() if isinstance(v, list)] if isinstance(res, dict) else []
            empty = bool(lists) and not any(lists)
        elif m["role"] == "assistant" and empty:
            if any(not c["function"]["name"].startswith(LOOKUPS) for c in _calls(m["content"]).tool_calls):
                return True
    return False


def clusters(rows: list[dict]) -> Counter:
    """(suite, label) -> number of failing rows with it."""
    c: Counter = Counter()
    for r in rows:
        for lb in label(r):
            c[(r["suite"], lb)] += 1
    return c


def hint(suite: str, lab: str) -> str | None:
    """The one-line instruction the registry entry `suite` gives for failure label `lab` (its
    `hints`), or None."""
    hints = lookup(suite, "hints")
    return hints.get(lab) if hints else None


def hints_for(c: Counter) -> list[tuple[str, str, tuple, int]]:
    """(role, hint, cluster, count) for the clusters that have a hint, largest first."""
    out = []
    for key, n in c.most_common():
        text = hint(*key)
        if text is not None:
            out.append((key[0], text, key, n))
    return out
