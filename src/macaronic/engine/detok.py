"""Linear-time text for a token stream: incremental detokenisation and stop-string matching.

`Detokenizer` turns one token at a time into text deltas with the prefix/read-offset scheme of
the `tokenizers` streaming decoder (`tokenizers.decoders.DecodeStream`): each step decodes only
the tokens since the last emitted chunk plus the chunk before it (so decoders that strip a
leading space, like SentencePiece's, see the same context), and a delta ending in an unfinished
UTF-8 sequence waits for its next byte. It works over any tokenizer with `decode(ids, ...)`, so
the text is exactly what decoding the whole sequence gives, without re-decoding it.

`StopMatcher` finds stop strings in the new text only: it keeps back a tail that could still grow
into a stop string (at most len - 1 characters per stop string) and searches that tail plus the
delta. Per-token work is bounded by the delta, the stop strings and
MAX_PENDING, never by the sequence length. Knows nothing about models, sampling or scheduling.
"""

from __future__ import annotations

MAX_PENDING = 16  # tokens without a complete character before their text is emitted as it stands


class Detokenizer:
    """Token ids in, text deltas out; `flush()` returns what is still held at the end."""

    def __init__(self, tokenizer, skip_special_tokens: bool = False):
        self.tok, self.skip = tokenizer, skip_special_tokens
        self.ids: list[int] = []  # the window: the previous chunk's tokens, then the pending ones
        self.prefix_len = 0  # ids[:prefix_len] is the previous chunk (context only)
        self.prefix_text = ""  # decode(ids[:prefix_len])
        self.sent = 0  # characters past prefix_text already returned (text before an unfinished one)

    def _decode(self, ids: list[int]) -> str:
        return self.tok.decode(ids, skip_special_tokens=self.skip) if ids else ""

    def step(self, token: int) -> str:
        self.ids.append(token)
        text = self._decode(self.ids)
        pending = len(self.ids) - self.prefix_len
        if text.endswith("\ufffd") and pending < MAX_PENDING:
            # an unfinished UTF-8 sequence: emit what precedes it, keep the tokens for its next byte
            delta = text.rstrip("\ufffd")[len(self.prefix_text) + self.sent :]
            self.sent += len(delta)
            return delta
        delta = text[len(self.prefix_text) + self.sent :]
        if len(text) > len(self.prefix_text) or pending >= MAX_PENDING:
            self._advance()
        return delta

    def flush(self) -> str:
        """Text of the pending tokens as it stands (replacement characters included)."""
        delta = self._decode(self.ids)[len(self.prefix_text) + self.sent :]
        self._advance()
        return delta

    def _advance(self) -> None:
        # the pending tokens become the context of the next window (a decoder that strips a
        # leading space sees the same start in both decodes, so the delta is exact)
        self.ids = self.ids[self.prefix_len :]
        self.prefix_len, self.sent = len(self.ids), 0
        self.prefix_text = self._decode(self.ids)


class StopMatcher:
    """Stop strings over a stream of text deltas, with a bounded hold-back.

    `feed(delta)` returns (text safe to emit, stopped). Once stopped, the text before the earliest
    stop string has been returned and nothing more is. `flush()` returns the held tail.
    """

    def __init__(self, stops: tuple[str, ...] = ()):
        self.stops = tuple(stops)
        self.held = ""  # decoded, not yet emitted: a tail that may begin a stop string
        self.stopped = False

    def feed(self, delta: str) -> tuple[str, bool]:
        if self.stopped:
            return "", True
        buf = self.held + delta
        if not self.stops:
            self.held = ""
            return buf, False
        # no stop string starts in emitted text (the hold-back guarantees it), so searching the
        # held tail plus the delta finds the earliest one
        at = min((i for i in (buf.find(x) for x in self.stops) if i >= 0), default=-1)
        if at >= 0:
            self.held, self.stopped = "", True
            return buf[:at], True
        safe = len(buf)
        for x in self.stops:  # hold back a tail that could still become a stop string
            for k in range(min(len(x) - 1, safe), 0, -1):
                if buf[safe - k : safe] == x[:k]:
                    safe -= k
                    break
        self.held = buf[safe:]
        return buf[:safe], False

    def flush(self) -> str:
        out, self.held = ("" if self.stopped else self.held), ""
        return out
