"""Stream tool calls as they decode: text deltas in, content deltas and call deltas out.

Under the tool-call grammar (serve/structured.py) a call is always written
`<tool_call>{"name": "<name>", "arguments": <JSON>}</tool_call>`, so a streaming client can get
the call's name as soon as its head is complete and its arguments as they decode (OpenAI's
`delta.tool_calls`), instead of the whole call at the end. Text that could still become the
start of a call, or the end of one, is held back until it is decided. Knows the tool-call text
format only; nothing about HTTP, engines or schemas.
"""

from __future__ import annotations

import json
import re
import secrets
from dataclasses import dataclass

from macaronic.substrate.toolcalls import CLOSE, OPEN

HEAD = re.compile(re.escape(OPEN) + r'\{"name": ("(?:[^"\\]|\\.)*"), "arguments": ')
TAIL = "}" + CLOSE


@dataclass(frozen=True)
class CallDelta:
    index: int
    id: str | None = None  # set on a call's first delta, with its name
    name: str | None = None
    arguments: str = ""


def held_prefix(text: str, marker: str) -> int:
    """Length of the longest tail of `text` that is a proper prefix of `marker`."""
    for k in range(min(len(marker) - 1, len(text)), 0, -1):
        if text.endswith(marker[:k]):
            return k
    return 0


class CallStreamer:
    """Feed text deltas; get back a list of str (content) and CallDelta items, in order."""

    def __init__(self):
        self.buf = ""
        self.in_call = False
        self.ids: list[str] = []

    def feed(self, delta: str) -> list:
        self.buf += delta
        out: list = []
        while True:
            if not self.in_call:
                i = self.buf.find(OPEN)
                if i < 0:
                    keep = held_prefix(self.buf, OPEN)
                    text = self.buf[: len(self.buf) - keep]
                    if self.ids and not text.strip():
                        return out  # whitespace after a call: a separator unless text follows
                    self.buf = self.buf[len(self.buf) - keep:]
                    if text:
                        out.append(text)
                    return out
                m = HEAD.match(self.buf, i)
                if m is None:  # the head is still decoding
                    if self.buf[:i].strip():
                        out.append(self.buf[:i])
                    self.buf = self.buf[i:]
                    return out
                if self.buf[:i].strip():
                    out.append(self.buf[:i])
                call_id = f"call_{secrets.token_hex(6)}"
                self.ids.append(call_id)
                out.append(CallDelta(len(self.ids) - 1, call_id, json.loads(m.group(1))))
                self.buf, self.in_call = self.buf[m.end():], True
            else:
                j = self.buf.find(TAIL)
                if j < 0:
                    keep = held_prefix(self.buf, TAIL)
                    part, self.buf = self.buf[: len(self.buf) - keep], self.buf[len(self.buf) - keep:]
                    if part:
                        out.append(CallDelta(len(self.ids) - 1, arguments=part))
                    return out
                if self.buf[:j]:
                    out.append(CallDelta(len(self.ids) - 1, arguments=self.buf[:j]))
                self.buf, self.in_call = self.buf[j + len(TAIL):], False
