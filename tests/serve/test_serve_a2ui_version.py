"""A client states the A2UI version it renders (`a2ui_version`, default "0.8"); the genui
specialist answers in it: it decodes v0.8 under its grammar, and the harness serves the validated
(or closed) card converted to v0.9 (`genui/convert.py`), streamed or not."""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from test_serve_mol import card_reply

from macaronic.genui import v09
from macaronic.genui.convert import card_to_v09
from macaronic.genui.validate import validate
from macaronic.serve import views


def client(url):
    return openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0, timeout=120)


def test_a_v09_client_gets_a_v09_card_and_a_v08_client_the_card_as_written(inproc):
    url, mol, script = inproc
    script.replies["genui"] = card_reply()
    c = client(url)
    ask = [{"role": "user", "content": "a lunch card"}]
    r = c.chat.completions.create(model="genui", messages=ask, max_tokens=1024, extra_body={"a2ui_version": "0.9"})
    card = json.loads(r.choices[0].message.content)
    meta = r.model_extra["macaronic"]["genui"]
    assert card["text_response"] == "Here is a card." and v09.is_v09(card["a2ui"])
    assert validate(card).valid and meta["a2ui"] == card["a2ui"] and meta["valid"] and meta["a2ui_version"] == "0.9"
    assert card["a2ui"][0]["createSurface"]["surfaceId"] == "s1"

    r8 = c.chat.completions.create(model="genui", messages=ask, max_tokens=1024)  # the default
    assert r8.choices[0].message.content == card_reply()
    assert "a2ui_version" not in r8.model_extra["macaronic"]["genui"]

    # streamed: its text_response as it decodes, already in the served form, then the rest of the
    # converted card; every delta adds to a prefix of the served card (no v0.8 JSON on the way)
    chunks = list(c.chat.completions.create(model="genui", messages=ask, max_tokens=1024, stream=True,
                                            extra_body={"a2ui_version": "0.9"}))
    deltas = [ch.choices[0].delta.content for ch in chunks if ch.choices and ch.choices[0].delta.content]
    text = "".join(deltas)
    assert json.loads(text) == card and text == r.choices[0].message.content
    assert len(deltas) > 3 and "".join(deltas[:-1]) == '{"text_response":"Here is a card.', deltas
    assert "surfaceUpdate" not in text and "beginRendering" not in text

    # the next turn carries the v0.9 card back: the harness still knows the genui specialist wrote it
    more = ask + [{"role": "assistant", "content": r.choices[0].message.content}, {"role": "user", "content": "again"}]
    assert mol.annotate(views.normalize_messages(more))[1]["specialist"] == "genui"


def test_the_genui_specialist_reads_its_v09_card_back_as_the_v08_it_wrote(inproc):
    """A two-turn v0.9 conversation through the official client: the second turn's prompt holds
    the first card in v0.8, exactly as the specialist decoded it (what a v0.8 client's history
    renders to), never the v0.9 the client got; streamed or not."""
    url, _, script = inproc
    script.replies["genui"] = card_reply()
    c = client(url)
    for stream in (False, True):
        ask = [{"role": "user", "content": f"a lunch card {stream}"}]
        if stream:
            chunks = c.chat.completions.create(model="genui", messages=ask, max_tokens=1024, stream=True,
                                               extra_body={"a2ui_version": "0.9"})
            served = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
        else:
            served = c.chat.completions.create(model="genui", messages=ask, max_tokens=1024,
                                               extra_body={"a2ui_version": "0.9"}).choices[0].message.content
        assert v09.is_v09(json.loads(served)["a2ui"])
        more = ask + [{"role": "assistant", "content": served}, {"role": "user", "content": "make it for two"}]
        c.chat.completions.create(model="genui", messages=more, max_tokens=1024, extra_body={"a2ui_version": "0.9"})
        adapter, view = next((a, v) for a, v in reversed(script.seen) if v[-1]["content"] == "make it for two")
        replies = [m["content"] for m in view if m["role"] == "assistant"]
        assert adapter == "genui" and replies == [card_reply()], replies
        assert not any(v09.VERSION in m["content"] for m in view)


def test_a_v09_card_the_server_never_served_is_read_back_in_v08_too(inproc):
    """A v0.9 card the memory does not know (kept by a client across a server restart, or another
    server's) is converted back (`convert.to_v08`): the prompt holds a valid v0.8 card with its words."""
    url, _, script = inproc
    script.replies["genui"] = card_reply()
    foreign = card_to_v09(json.loads(card_reply()))
    foreign["text_response"] = "A card from elsewhere."
    more = [{"role": "user", "content": "a card"}, {"role": "assistant", "content": json.dumps(foreign)},
            {"role": "user", "content": "again"}]
    client(url).chat.completions.create(model="genui", messages=more, max_tokens=1024,
                                        extra_body={"a2ui_version": "0.9"})
    adapter, view = next((a, v) for a, v in reversed(script.seen) if v[-1]["content"] == "again")
    back = json.loads(next(m["content"] for m in view if m["role"] == "assistant"))
    assert adapter == "genui" and back["text_response"] == "A card from elsewhere." and not v09.is_v09(back["a2ui"])
    assert validate(back).valid and card_to_v09(back) == foreign


def test_a_card_cut_by_the_token_cap_is_closed_then_served_in_v09(inproc):
    """Closing happens on what the specialist wrote (v0.8, genui/close.py), conversion after it:
    a card cut at max_tokens reaches a v0.9 client closed, valid and in v0.9."""
    url, _, script = inproc
    script.replies["genui"] = card_reply()
    r = client(url).chat.completions.create(model="genui", messages=[{"role": "user", "content": "a lunch card"}],
                                            max_tokens=200, extra_body={"a2ui_version": "0.9"})
    meta = r.model_extra["macaronic"]["genui"]
    card = json.loads(r.choices[0].message.content)
    assert r.choices[0].finish_reason == "length" and meta["closed"] and meta["raw_errors"]
    assert meta["valid"] and v09.is_v09(card["a2ui"]) and validate(card).valid and meta["a2ui"] == card["a2ui"]


def test_a_version_nobody_renders_is_a_clear_400(inproc):
    url, _, _ = inproc
    for bad in ("1.0", "v0.9", 0.9, ""):
        r = httpx.post(url + "/v1/chat/completions", json={
            "model": "genui", "messages": [{"role": "user", "content": "x"}], "a2ui_version": bad})
        err = r.json()["error"]
        assert r.status_code == 400 and err["param"] == "a2ui_version", (bad, err)
        if isinstance(bad, str):
            assert "'0.8' or '0.9'" in err["message"], err
    r = httpx.post(url + "/v1/responses", json={"model": "genui", "input": "x", "a2ui_version": "2"})
    assert r.status_code == 400 and r.json()["error"]["param"] == "a2ui_version"


def test_the_responses_api_takes_the_version_too(inproc):
    url, _, script = inproc
    script.replies["genui"] = card_reply()
    r = client(url).responses.create(model="genui", input="a lunch card", extra_body={"a2ui_version": "0.9"})
    assert v09.is_v09(json.loads(r.output_text)["a2ui"])


@pytest.mark.long  # over 15 s on 2 cores: the long CI step keeps the default suite under 15 minutes
@pytest.mark.real_model
def test_the_shipped_genui_specialist_answers_in_v09_on_a_real_server(tmp_path):
    """SmolLM2-135M with its shipped genui adapter, through the official client: the card the
    specialist decodes (v0.8, closed if the token cap cut it) arrives as a valid v0.9 card."""
    from serve_helpers import ServerProcess

    # the card grammar's first compile took over the default 10 s budget on a loaded 2-core box: this
    # test is about the conversion, tests/serve/test_serve_budgets.py about the budget
    s = ServerProcess(["--base", "smollm2-135m-instruct", "--store", str(tmp_path / "s.sqlite"),
                       "--compile-budget-s", "120"], timeout=300)
    try:
        r = client(s.url).chat.completions.create(
            model="genui", messages=[{"role": "user", "content": "A card to book a table: name field and a Book button"}],
            max_tokens=160, temperature=0, extra_body={"a2ui_version": "0.9"})
        card = json.loads(r.choices[0].message.content)
        meta = r.model_extra["macaronic"]
        assert meta["specialist"] == "genui" and meta["genui"]["valid"] and meta["genui"]["a2ui_version"] == "0.9"
        assert v09.is_v09(card["a2ui"]) and all(m["version"] == "v0.9" for m in card["a2ui"])
        assert v09.validate_messages(card["a2ui"])[0] == []
        assert any("updateComponents" in m for m in card["a2ui"])
        # streamed: the text_response in the served form as it decodes, the deltas adding up to the card
        deltas = [ch.choices[0].delta.content for ch in client(s.url).chat.completions.create(
            model="genui", messages=[{"role": "user", "content": "A card to book a table: name field and a Book button"}],
            max_tokens=160, temperature=0, stream=True, extra_body={"a2ui_version": "0.9"})
            if ch.choices and ch.choices[0].delta.content]
        streamed = json.loads("".join(deltas))
        assert v09.validate_messages(streamed["a2ui"])[0] == [] and streamed["text_response"]
        assert len(deltas) > 2 and all(d not in ("", None) for d in deltas)
        assert "".join(deltas[:-1]).startswith('{"text_response":"') and "a2ui" not in "".join(deltas[:-1])
    finally:
        s.stop()


def test_a_card_whose_root_misses_components_is_served_with_them(inproc):
    """A valid card written as several tops (a form whose first field was made the root) would draw
    one field; the harness puts the other tops under the root, streamed or not."""
    from macaronic.genui.close import stray_components
    from macaronic.genui.render_html import render_html

    url, _, script = inproc
    comps = [{"id": n, "component": {"TextField": {"label": {"literalString": n}, "text": {"path": f"/f/{n}"}}}}
             for n in ("Name", "Email")]
    comps += [{"id": "go-label", "component": {"Text": {"text": {"literalString": "Sign me up"}}}},
              {"id": "go", "component": {"Button": {"child": "go-label", "action": {"name": "send"}}}}]
    written = {"text_response": "Here is the form.", "a2ui": [{"surfaceUpdate": {"surfaceId": "s", "components": comps}},
                                                              {"beginRendering": {"surfaceId": "s", "root": "Name"}}]}
    assert validate(written).valid and stray_components(written) == ["Email", "go"]
    script.replies["genui"] = json.dumps(written, separators=(",", ":"))
    c = client(url)
    ask = [{"role": "user", "content": "a sign-up form"}]
    r = c.chat.completions.create(model="genui", messages=ask, max_tokens=1024)
    card = json.loads(r.choices[0].message.content)
    assert validate(card).valid and stray_components(card) == []
    assert "Sign me up" in render_html(card["a2ui"]) and "strays_adopted" in r.model_extra["macaronic"]["genui"]["closed"]
    streamed = "".join(ch.choices[0].delta.content or "" for ch in c.chat.completions.create(
        model="genui", messages=ask, max_tokens=1024, stream=True) if ch.choices)
    assert json.loads(streamed) == card
    # written with an escape the served form spells otherwise: the stream still adds up to the served card
    script.replies["genui"] = json.dumps({**written, "text_response": "Caf\u00e9 sign-up"}, separators=(",", ":"))
    assert "\\u00e9" in script.replies["genui"]
    for kw in ({}, {"stream": True}):
        reply = c.chat.completions.create(model="genui", messages=ask, max_tokens=1024, **kw)
        text = reply.choices[0].message.content if not kw else "".join(
            ch.choices[0].delta.content or "" for ch in reply if ch.choices)
        assert json.loads(text)["text_response"] == "Caf\u00e9 sign-up" and stray_components(json.loads(text)) == []
    # a whole card, nothing to close, written with escapes: streamed, it is the text the card wrote
    script.replies["genui"] = json.dumps({**card, "text_response": "Caf\u00e9 sign-up"}, separators=(",", ":"))
    whole = c.chat.completions.create(model="genui", messages=ask, max_tokens=1024).choices[0].message.content
    streamed = "".join(ch.choices[0].delta.content or "" for ch in c.chat.completions.create(
        model="genui", messages=ask, max_tokens=1024, stream=True) if ch.choices)
    assert streamed == whole == script.replies["genui"]
