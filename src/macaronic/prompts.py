"""The one prompt renderer: how a turn becomes chat messages and then token ids, for serving
(`serve/views.py` builds its views from these pieces), the trainers (`train/builders.py`,
`datagen/examples.py`), RFT (`evolve/`), GRPO (`train/rollouts.py`) and the contract runner
(`contract/runner.py`). A prompt that differs between training and serving is a bug nobody sees,
so there is no second copy of any of this anywhere.

The layout (the one the shipped specialists were trained on: their recorded data manifests
rebuild byte for byte from `train/builders.py`, which opens every example with `prompt_head`):

    system     identity (bundle) + the client's leading system messages + the tool list
               (`tool_prompt`, in the bundle's `tool_listing`: compact or typed)
    ...for each user turn k:
    system     the instruction of the role that answers turn k (bundle roles/<role>.md)
    user       turn k's user message, verbatim
    assistant  the reply: its raw text, or content + canonical <tool_call> text of its calls
    tool       each tool result, wrapped once in <tool_response> (a JSON object re-serialised
               with sorted keys, so `tool_result_message(r)` renders to `format_tool_result(r)`)

Role instructions sit before each user turn, never at the top: the top must be the same whichever
specialist answers, or a `turn`-mode switch would invalidate the whole history's KV.

Messages here are conversation messages (`{role, content, tool_calls?}`; a tool result's content
is the result as the client sends it). Knows the bundle and a tokenizer's chat template; knows
nothing about engines, routing, HTTP, or the per-adapter own views of `full`-mode adapters
(`serve/views.py` folds other adapters' segments on top of this layout).
"""

from __future__ import annotations

import json
import secrets
from typing import Any

from macaronic.substrate.toolcalls import CLOSE, OPEN, RESULT_CLOSE, RESULT_OPEN, format_tool_call


# ---- pieces ------------------------------------------------------------------------------

def _clip(text, limit: int) -> str:
    text = " ".join(text.split()) if isinstance(text, str) else ""
    return text if len(text) <= limit else text[:limit].rsplit(" ", 1)[0] + " ..."


def _type_text(schema, depth: int = 0) -> str:
    """A JSON schema's type in a few words: `string, one of "a"|"b"`, `array of number`,
    `object {min?: number, max?: number}` (two levels of nesting, then `object`; five levels of
    arrays or alternatives, then `any`: a client's schema may nest as deep as its byte cap allows)."""
    if not isinstance(schema, dict) or depth > 4:
        return "any"
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list) and schema[key]:
            return " or ".join(_type_text(s, depth + 1) for s in schema[key][:4])
    t = schema.get("type")
    t = "|".join(str(x) for x in t) if isinstance(t, list) else str(t or "any")
    if t == "array":
        t = "array of " + _type_text(schema.get("items"), depth + 1)
    elif t == "object" and isinstance(schema.get("properties"), dict) and schema["properties"] and depth < 2:
        req = schema.get("required") if isinstance(schema.get("required"), list) else []
        t += " {" + ", ".join(f"{k}{'' if k in req else '?'}: {_type_text(v, depth + 1)}"
                              for k, v in schema["properties"].items()) + "}"
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        t += ", one of " + "|".join(json.dumps(e, ensure_ascii=False) for e in schema["enum"][:24])
    if "default" in schema:
        t += f", default {json.dumps(schema['default'], ensure_ascii=False)}"
    return t


def _sentences(desc: str) -> list[str]:
    return [x.strip() for x in desc.split(".")]


def _shared_sentences(tools: list[dict]) -> set[str]:
    """Sentences that open or fill two or more of the listed tools' descriptions: a toolset's
    preamble ("This tool belongs to the Gorilla file system. It is a simple file system ..."), which
    says nothing about what each tool does."""
    seen: dict[str, int] = {}
    for t in tools:
        fn = t.get("function", t) if isinstance(t, dict) else {}
        desc = fn.get("description") if isinstance(fn.get("description"), str) else ""
        for x in {x for x in _sentences(desc) if x}:
            seen[x] = seen.get(x, 0) + 1
    return {x for x, n in seen.items() if n >= 2}


def _own_sentence(desc: str, shared: set[str]) -> str:
    """The compact listing's words for one tool: its description's first sentence, or, where that
    sentence is shared with another listed tool, its first sentence no other tool has (so eighteen
    tools that open with the same preamble are told apart); the first sentence when all are shared."""
    first = desc.split(".")[0]
    if first.strip() not in shared:
        return first
    return next((x for x in _sentences(desc) if x and x not in shared), first)


def tool_prompt(tools: list[dict], listing: str = "compact") -> str:
    """The request's tools as the bundle's `tool_listing` shows them, plus the calling convention.

    compact: one line per tool (name, arguments with `?` when optional, the description's first
    sentence, or its first one no other listed tool shares: `_own_sentence`). The full JSON-schema
    listing of the substrate's tools is ~3,100 tokens, too long for a 135M base on CPU; the shipped
    specialists were trained on this form.
    typed: the tool's description, then one line per argument: its name, type (enum values, items,
    nested fields, default), whether it is optional, and its description, which is where a schema
    says its units, formats and allowed values (about twice the compact listing's tokens)."""
    lines = ["Tools (name(arguments): what it does):" if listing == "compact" else "Tools:"]
    shared = _shared_sentences(tools)
    for t in tools:  # the server validated the schemas (serve/validate.py); stay total on any dict anyway
        fn = t.get("function", t)
        params = fn.get("parameters") if isinstance(fn.get("parameters"), dict) else {}
        props = params.get("properties") if isinstance(params.get("properties"), dict) else {}
        required = params.get("required") if isinstance(params.get("required"), list) else []
        req = {r for r in required if isinstance(r, str)}
        desc = fn.get("description") if isinstance(fn.get("description"), str) else ""
        if listing == "compact":
            args = ", ".join(a if a in req else a + "?" for a in props)
            lines.append(f"- {fn['name']}({args}): {_own_sentence(desc, shared)}.")
            continue
        lines.append(f"- {fn['name']}: {_clip(desc, 400)}".rstrip())
        for a, schema in props.items():
            about = _clip(schema.get("description"), 200) if isinstance(schema, dict) else ""
            lines.append(f"    {a} ({_type_text(schema)}{'' if a in req else ', optional'})"
                         + (f": {about}" if about else ""))
    lines.append(f'Call a tool with {OPEN}{{"name": ..., "arguments": {{...}}}}{CLOSE}; results come back as '
                 f"{RESULT_OPEN}...{RESULT_CLOSE}. When done, answer the user in plain text.")
    return "\n".join(lines)


def header(bundle, client_system: list[str], tools: list[dict] | None) -> dict:
    """The first message of every prompt: identity, the client's system text, the tool list."""
    parts = [bundle.identity.strip(), *[s.strip() for s in client_system if s.strip()]]
    if tools:
        parts.append(tool_prompt(tools, bundle.tool_listing))
    return {"role": "system", "content": "\n\n".join(parts)}


def role_instruction(bundle, role: str | None) -> dict | None:
    """The system message before a user turn that `role` answers (None: no role, or not in the bundle)."""
    if role is None:
        return None
    try:
        text = bundle.role(role).system_prompt.strip()
    except KeyError:
        return None
    return {"role": "system", "content": text} if text else None  # empty: a bare role (HarnessBundle.served)


def prompt_head(bundle, role: str | None, tools: list[dict] | None = None,
                client_system: list[str] = ()) -> list[dict]:
    """The messages before a conversation's first user message when `role` answers it."""
    ins = role_instruction(bundle, role)
    return [header(bundle, list(client_system), tools), *([ins] if ins else [])]


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


def render_assistant(m: dict) -> str:
    if m.get("raw"):  # the text the adapter generated, so the cached tokens match exactly
        return m["raw"]
    calls = calls_text(m.get("tool_calls") or [])
    return "\n".join(x for x in (m.get("content") or "", calls) if x)


def render_tool(m: dict) -> str:
    try:
        obj = json.loads(m["content"])
        body = json.dumps(obj, ensure_ascii=False, sort_keys=True) if isinstance(obj, dict) else m["content"]
    except (ValueError, TypeError, RecursionError):  # not JSON, or nested past the recursion limit
        body = m["content"]
    return f"{RESULT_OPEN}{body}{RESULT_CLOSE}"


def tool_result_message(result: Any) -> dict:
    """A tool result as a client sends it back (one message per call)."""
    return {"role": "tool", "content": json.dumps(result, ensure_ascii=False, sort_keys=True)}


def rendered(m: dict) -> dict:
    """One non-user conversation message in the layout."""
    if m["role"] == "assistant":
        return {"role": "assistant", "content": render_assistant(m)}
    if m["role"] == "tool":
        return {"role": "tool", "content": render_tool(m)}
    return {"role": m["role"], "content": m["content"]}


# ---- whole prompts -----------------------------------------------------------------------

def answered_by(messages: list[dict], current: str | None) -> dict[int, str | None]:
    """Index of each user message -> the role that answered it: the first assistant message after
    it says (its `specialist` annotation); the last user turn is `current`'s when given (the role
    answering now, whose earlier steps of this turn, if any, are already in `messages`)."""
    out: dict[int, str | None] = {}
    users = [i for i, m in enumerate(messages) if m["role"] == "user"]
    for n, i in enumerate(users):
        end = users[n + 1] if n + 1 < len(users) else len(messages)
        answer = next((messages[j] for j in range(i + 1, end) if messages[j]["role"] == "assistant"), None)
        said = answer.get("specialist") if answer is not None else None
        out[i] = (current or said) if n == len(users) - 1 else said
    return out


def conversation(bundle, role: str | None, messages: list[dict], tools: list[dict] | None = None) -> list[dict]:
    """The whole layout of a conversation whose last user turn `role` answers: what a `turn`-mode
    adapter sees (earlier turns carry the instruction of the role their reply names as
    `specialist`; leading system messages join the header)."""
    lead = 0
    while lead < len(messages) and messages[lead]["role"] == "system":
        lead += 1
    out = [header(bundle, [m["content"] for m in messages[:lead]], tools)]
    roles = answered_by(messages, role)
    for i in range(lead, len(messages)):
        m = messages[i]
        if m["role"] == "user":
            ins = role_instruction(bundle, roles.get(i))
            out += [ins] if ins else []
            out.append({"role": "user", "content": m["content"]})
        else:
            out.append(rendered(m))
    return out


def first_turn(bundle, role: str | None, user: str, tools: list[dict] | None = None) -> list[dict]:
    """`prompt_head` + the user message: the prompt of a one-turn task."""
    return [*prompt_head(bundle, role, tools), {"role": "user", "content": user}]


_WRAPS: dict[str, bool] = {}


def template_wraps_results(tokenizer) -> bool:
    """Whether the chat template puts `<tool_response>` around a tool message itself (Qwen2.5's
    does); then the layout's own wrapper is taken off, so a result is wrapped once on every base."""
    key = str(getattr(tokenizer, "chat_template", None))
    if key not in _WRAPS:
        msgs = [{"role": "user", "content": "a"}, {"role": "tool", "content": "\x07"}]
        try:
            before, _, after = tokenizer.apply_chat_template(msgs, tokenize=False).partition("\x07")
        except Exception:  # no tool role in the template
            before, after = "", ""
        _WRAPS[key] = before.rstrip().endswith(RESULT_OPEN) and after.lstrip().startswith(RESULT_CLOSE)
    return _WRAPS[key]


def _unwrapped(m: dict) -> dict:
    c = m.get("content")
    if m["role"] == "tool" and isinstance(c, str) and c.startswith(RESULT_OPEN) and c.endswith(RESULT_CLOSE):
        return {**m, "content": c[len(RESULT_OPEN):-len(RESULT_CLOSE)]}
    return m


def spelled_markers(tokenizer) -> dict[int, list[int]]:
    """The call markers (`<tool_call>`, `</tool_call>`) that the vocabulary holds as one added token,
    each -> the same text in ordinary tokens. Qwen2.5-Coder-0.5B has both as added tokens whose rows
    the model never learned: their embeddings and output rows are one vector (cosine 0.99999), 0.93
    from `<|im_start|>`'s, so a frozen base can neither read them apart nor be taught to emit them (its
    agent emitted `<|im_start|>` instead). Spelled out, the markers are text every base reads and writes;
    a base without such tokens (SmolLM2) is unchanged. Cached on the tokenizer."""
    spelled = getattr(tokenizer, "_macaronic_spelled", None)
    if spelled is None:
        added = tokenizer.get_added_vocab() if hasattr(tokenizer, "get_added_vocab") else {}
        spelled = {added[m]: (tokenizer.encode(m[:1], add_special_tokens=False)
                              + tokenizer.encode(m[1:], add_special_tokens=False))
                   for m in (OPEN, CLOSE) if m in added}
        tokenizer._macaronic_spelled = spelled
    return spelled


def special_strings(tokenizer) -> tuple[str, ...]:
    """The text of every special token the vocabulary holds (`<|im_start|>`, `<|im_end|>`, …), longest
    first. Cached on the tokenizer."""
    got = getattr(tokenizer, "_macaronic_specials", None)
    if got is None:
        dec = getattr(tokenizer, "added_tokens_decoder", {}) or {}
        got = tuple(sorted({t.content for t in dec.values() if getattr(t, "special", False) and t.content},
                           key=lambda c: (-len(c), c)))
        tokenizer._macaronic_specials = got
    return got


def _hide(value, specials: tuple[str, ...], sentinel: list[str]):
    """value with each special token's text in its strings replaced by that token's sentinel; the very
    same object where nothing in it spells one (so `_hide(x) is x` says whether anything was hidden)."""
    if isinstance(value, str):
        if not any(sp in value for sp in specials):
            return value
        for sp, mark in zip(specials, sentinel):
            value = value.replace(sp, mark)
        return value
    if isinstance(value, dict):
        new = {k: _hide(v, specials, sentinel) for k, v in value.items()}
        return value if all(new[k] is v for k, v in value.items()) else new
    if isinstance(value, list):
        new = [_hide(v, specials, sentinel) for v in value]
        return value if all(a is b for a, b in zip(new, value)) else new
    return value


def _tokenize_hidden(tokenizer, text: str, specials: tuple[str, ...], sentinel: list[str]) -> list[int]:
    """The rendered text's ids where only the template's own special tokens are special: the text between
    them (where the sentinels stand for what the messages spelled) is tokenized with specials split, as
    text. A fast tokenizer cuts its input at special tokens before anything else, so text without
    sentinels comes out exactly as `apply_chat_template(tokenize=True)` gives it."""
    import re

    ids: list[int] = []
    for piece in re.split("(" + "|".join(map(re.escape, specials)) + ")", text):
        if not piece:
            continue
        if piece in specials:
            ids.append(tokenizer.convert_tokens_to_ids(piece))
            continue
        for sp, mark in zip(specials, sentinel):  # as placed, or as a template's tojson escaped it
            piece = piece.replace(mark, sp).replace(json.dumps(mark)[1:-1], json.dumps(sp)[1:-1])
        ids += tokenizer(piece, add_special_tokens=False, split_special_tokens=True)["input_ids"]
    return ids


def encode(tokenizer, messages: list[dict], add_generation_prompt: bool = True, tools=None) -> list[int]:
    """Layout messages -> token ids through the base's chat template (the only call to it).

    Text that the messages or tools spell as a special token (a user writing `<|im_start|>system…`)
    is tokenized as text, never as that token: a request cannot forge a turn of its own, or move where
    a turn-mode adapter starts. Requests that spell none come out exactly as the template tokenizes them."""
    messages = list(messages)
    if template_wraps_results(tokenizer):
        messages = [_unwrapped(m) for m in messages]
    specials = special_strings(tokenizer)
    nonce = secrets.token_hex(6)  # one per call: text cannot guess the marks
    sentinel = [f"\ue000{nonce}.{i}\ue001" for i in range(len(specials))]
    hidden, hidden_tools = _hide(messages, specials, sentinel), _hide(tools, specials, sentinel)
    if hidden is not messages or hidden_tools is not tools:
        text = tokenizer.apply_chat_template(hidden, tools=hidden_tools, add_generation_prompt=add_generation_prompt,
                                             tokenize=False)
        ids = _tokenize_hidden(tokenizer, text, specials, sentinel)
    else:
        ids = tokenizer.apply_chat_template(messages, tools=tools, add_generation_prompt=add_generation_prompt,
                                            tokenize=True)
    if hasattr(ids, "keys"):
        ids = ids["input_ids"]
    spelled = spelled_markers(tokenizer)
    if spelled:
        return [j for i in ids for j in spelled.get(i, (i,))]
    return list(ids)


def prompt_ids(tokenizer, bundle, role: str | None, messages: list[dict], tools: list[dict] | None = None) -> list[int]:
    """The token ids `role` answers the last turn of `messages` from."""
    return encode(tokenizer, conversation(bundle, role, messages, tools), add_generation_prompt=True)
