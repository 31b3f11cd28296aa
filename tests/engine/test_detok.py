"""The linear token loop: incremental text and stop strings equal the old whole-sequence re-decode,
chunk for chunk, and the work per token does not grow with the sequence."""

from __future__ import annotations

import random

import pytest
import torch

from macaronic.engine.base import load_base, resolve_base
from macaronic.engine.detok import MAX_PENDING, Detokenizer, StopMatcher
from macaronic.engine.engine import EngineConfig
from macaronic.engine.llm import LLM, load_tokenizer
from macaronic.engine.sampling import SamplingParams

TEXT = "héllo wörld — 中文 and 🎉 emoji; STOP here, then more: naïve café 日本語 end."


def old_stream(tok, ids: list[int], stops: tuple[str, ...]) -> tuple[list[str], str]:
    """The engine's previous text loop, kept as the reference twin: re-decode everything per token."""
    events, emitted, generated, last = [], 0, [], ""
    for t in ids:
        generated.append(t)
        text = tok.decode(generated, skip_special_tokens=False)
        stop_at = min((i for i in (text.find(x, max(0, emitted - len(x))) for x in stops) if i >= 0), default=-1)
        if stop_at >= 0:
            if stop_at > emitted:
                events.append(text[emitted:stop_at])
            return events, "stop"
        last = text
        safe = len(text)
        if text.endswith("\ufffd"):
            safe = len(text.rstrip("\ufffd"))
        for x in stops:
            for k in range(min(len(x) - 1, safe), 0, -1):
                if text[safe - k : safe] == x[:k]:
                    safe -= k
                    break
        if safe > emitted:
            events.append(text[emitted:safe])
            emitted = safe
    if len(last) > emitted:
        events.append(last[emitted:])
    return events, "length"


def new_stream(tok, ids: list[int], stops: tuple[str, ...]) -> tuple[list[str], str]:
    """What the engine does now (engine._emit / _flush), without a model."""
    d, m, events = Detokenizer(tok), StopMatcher(stops), []
    for t in ids:
        text, stopped = m.feed(d.step(t))
        if text:
            events.append(text)
        if stopped:
            return events, "stop"
    tail = m.flush() + d.flush()
    if tail:
        events.append(tail)
    return events, "length"


@pytest.fixture(scope="module")
def tiny_tok(tiny_dirs):
    return load_tokenizer(tiny_dirs["llama"])


@pytest.fixture(scope="module")
def smol_tok():
    return load_tokenizer(resolve_base(None))


def _cases(tok, rng: random.Random, n: int):
    ids = tok.encode(TEXT, add_special_tokens=False)
    vocab = len(tok)
    for _ in range(n):
        kind = rng.random()
        if kind < 0.4:  # real text, cut anywhere
            seq = ids[: rng.randint(1, len(ids))]
        elif kind < 0.7:  # random ids: broken UTF-8, byte tokens, specials
            seq = [rng.randrange(vocab) for _ in range(rng.randint(1, 40))]
        else:  # text with random tokens spliced in
            seq = list(ids)
            for _ in range(rng.randint(1, 5)):
                seq.insert(rng.randrange(len(seq) + 1), rng.randrange(vocab))
        # stop strings are matched on complete characters: one holding U+FFFD (an undecodable
        # byte) is no request a client makes, and the old loop matched it against half characters
        text = tok.decode(seq, skip_special_tokens=False).replace("\ufffd", "")
        stops: tuple[str, ...] = ()
        if rng.random() < 0.8 and len(text) > 2:
            stops = tuple({text[a : a + rng.randint(1, 6)] for a in (rng.randrange(len(text)) for _ in range(rng.randint(1, 3)))} - {""})
            if rng.random() < 0.3:
                stops += ("never-matches-xyz",)
        yield seq, stops


@pytest.mark.parametrize("which", ["tiny_tok", "smol_tok"])
def test_incremental_text_equals_the_old_redecode_chunk_for_chunk(which, request):
    tok = request.getfixturevalue(which)
    rng = random.Random(1234)
    n = 0
    for seq, stops in _cases(tok, rng, 400):
        assert new_stream(tok, seq, stops) == old_stream(tok, seq, stops), (seq, stops)
        n += 1
    assert n == 400


def test_hand_written_stop_strings_across_tokens_and_multibyte(tiny_tok, smol_tok):
    for tok in (tiny_tok, smol_tok):
        ids = tok.encode(TEXT, add_special_tokens=False)
        for stops, want in [
            (("STOP",), TEXT[: TEXT.index("STOP")]),
            (("中文",), TEXT[: TEXT.index("中文")]),  # a stop made of multi-byte characters
            (("🎉 emo",), TEXT[: TEXT.index("🎉")]),
            (("x", "wörld —"), TEXT[: TEXT.index("wörld")]),  # the earliest of several
            (("café 日本語 end.!",), TEXT),  # a prefix held back to the end, then released
            ((), TEXT),
        ]:
            events, reason = new_stream(tok, ids, stops)
            assert "".join(events) == want and reason == ("length" if want == TEXT else "stop")
            assert (events, reason) == old_stream(tok, ids, stops)
        # a multi-byte character is never split across events, nor sent as a replacement character
        events, _ = new_stream(tok, ids, ())
        assert all("\ufffd" not in e for e in events) and len(events) > 10


def test_hold_back_is_bounded_by_the_stop_strings():
    stops = ("abcabd", "zz")  # prefixes of both come up all the time, the strings never do
    m = StopMatcher(stops)
    out, rng, longest = [], random.Random(0), 0
    for _ in range(5000):
        text, stopped = m.feed("".join(rng.choice("abcz") + rng.choice("abc ") for _ in range(rng.randint(0, 2))))
        # each stop string holds back at most its length - 1, one after the other
        assert not stopped and len(m.held) <= sum(len(x) - 1 for x in stops)
        longest = max(longest, len(m.held))
        out.append(text)
    assert longest == 6  # "z" + "abcab" was held back at some point
    out.append(m.flush())
    assert m.held == "" and "abcabd" not in "".join(out)


class CountingTokenizer:
    """A real tokenizer that counts the token ids each decode call is given (test double)."""

    def __init__(self, tok):
        self._tok, self.calls, self.ids = tok, 0, 0
        self.longest = 0

    def decode(self, ids, **kw):
        self.calls += 1
        self.ids += len(ids)
        self.longest = max(self.longest, len(ids))
        return self._tok.decode(ids, **kw)

    def __len__(self):
        return len(self._tok)

    def __getattr__(self, name):
        return getattr(self._tok, name)


def test_work_per_token_does_not_grow_with_sequence_length(tiny_dirs):
    tok = CountingTokenizer(load_tokenizer(tiny_dirs["llama"]))
    llm = LLM(load_base(tiny_dirs["llama"]), tok, EngineConfig(max_context=2048, max_tokens_limit=2048))
    script = tok.encode(TEXT * 12, add_special_tokens=False)  # multi-byte characters throughout

    def scripted(generated, logits):  # the tiny model says the script (test double)
        out = torch.full_like(logits, float("-inf"))
        out[script[len(generated) % len(script)]] = 0.0
        return out

    per_token = {}
    try:
        prompt = llm.encode_chat([{"role": "user", "content": "go"}])
        for n in (64, 1024):
            tok.calls = tok.ids = tok.longest = 0
            sp = SamplingParams(max_tokens=n, stop_token_ids=(), stop=("never-matches", "zzz"), repetition_penalty=1.1)
            h = llm.submit(prompt, None, sp, logits_processor=scripted)
            text, last = h.result()
            assert last.finish_reason == "length" and len(h.output_ids) == n
            per_token[n] = (tok.ids / n, tok.calls / n, tok.longest)
            assert text == tok.decode(h.output_ids, skip_special_tokens=False)  # nothing lost
    finally:
        llm.close()
    # the old loop decoded n(n+1)/2 ids in all (512 per token at n = 1024); now a few per token
    for n, (ids_per_token, calls_per_token, longest) in per_token.items():
        assert ids_per_token <= 8 and calls_per_token <= 2.5 and longest <= 2 * MAX_PENDING, (n, per_token[n])
    assert per_token[1024][0] <= per_token[64][0] * 1.25 + 0.5


def test_engine_stream_equals_the_reference_with_stops_across_tokens(tiny_dirs):
    tok = load_tokenizer(tiny_dirs["llama"])
    llm = LLM(load_base(tiny_dirs["llama"]), tok, EngineConfig(max_context=1024))
    script = tok.encode(TEXT, add_special_tokens=False)

    def scripted(generated, logits):
        out = torch.full_like(logits, float("-inf"))
        out[script[len(generated)]] = 0.0
        return out

    try:
        prompt = llm.encode_chat([{"role": "user", "content": "go"}])
        for stops in [("OP he",), ("ö",), ("日本語 end.!",), ("中", "naïve")]:
            for n in (len(script), 9):
                h = llm.submit(prompt, None, SamplingParams(max_tokens=n, stop=stops, stop_token_ids=()),
                               logits_processor=scripted)
                events = [ev for ev in h]
                got = ([ev.text for ev in events if ev.text], events[-1].finish_reason)
                assert got == old_stream(tok, script[:n], stops), (stops, n)
    finally:
        llm.close()
