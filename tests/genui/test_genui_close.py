"""close_card: every A2UI answer the harness returns validates (schema + integrity), whatever
the model wrote: official example cards with each broken-card mutation, random corruptions, and
every truncation of an example card (a reply the token cap cut), repaired then closed."""

from __future__ import annotations

import copy
import json
import random

import pytest

from a2ui_cases import EXAMPLES, corrupt, example_id, load
from test_a2ui_broken import MUTATIONS

from macaronic.genui.close import card_text, close_card
from macaronic.genui.output import parse_genui_output
from macaronic.genui.repair import repair
from macaronic.genui.validate import validate


def test_examples_present():
    assert len(EXAMPLES) >= 30


@pytest.mark.parametrize("path", EXAMPLES, ids=example_id)
def test_a_valid_card_is_left_alone(path):
    card = {"text_response": "x", "a2ui": load(path)}
    assert validate(card).valid
    closed, fixes = close_card(card)
    assert closed == card and fixes == []


@pytest.mark.parametrize("path", EXAMPLES, ids=example_id)
def test_every_broken_variant_closes_into_a_valid_card_keeping_most_of_it(path):
    for mutate in MUTATIONS:
        messages = copy.deepcopy(load(path))
        try:
            mutate(messages)
        except StopIteration:
            continue
        card = {"text_response": "x", "a2ui": messages}
        assert not validate(card).valid
        closed, fixes = close_card(card)
        assert validate(closed).valid, (mutate.__name__, fixes)
        left = sum(len(m["surfaceUpdate"].get("components") or []) for m in messages if "surfaceUpdate" in m)
        assert fixes and (left <= 1 or "fallback_text_card" not in fixes), (mutate.__name__, fixes)


def test_random_corruptions_always_close_into_valid_cards():
    rng = random.Random(0)
    fell_back = 0
    for i in range(300):
        card = corrupt({"text_response": "t", "a2ui": load(EXAMPLES[i % len(EXAMPLES)])}, rng)
        closed, fixes = close_card(card)
        assert validate(closed).valid, fixes
        fell_back += "fallback_text_card" in fixes
    assert fell_back < 150  # most corruptions keep a real card, not the text fallback


@pytest.mark.parametrize("path", EXAMPLES[::3], ids=example_id)
def test_every_truncation_is_closed_into_a_valid_card(path):
    text = card_text({"text_response": "Here you go.", "a2ui": load(path)})
    for cut in range(1, len(text), max(1, len(text) // 60)):
        prefix = text[:cut]
        r = repair(prefix)
        closed, _ = close_card(r.obj, prefix)
        assert validate(closed).valid, prefix


def test_garbage_and_prose_become_a_text_card():
    for junk in (None, 3, "plain words", [1, 2], {"text_response": 5, "a2ui": "no"}):
        closed, fixes = close_card(junk, "plain words")
        assert validate(closed).valid and fixes
    closed, _ = close_card(None, "Your flight AF123 is on time.")
    assert "AF123" in json.dumps(closed)


def test_parse_then_close_matches_what_the_harness_returns():
    good = card_text({"text_response": "ok", "a2ui": load(EXAMPLES[0])})
    assert parse_genui_output(good).valid
    closed, fixes = close_card(json.loads(good), good)
    assert fixes == [] and card_text(closed) == good


def test_a_closed_card_with_no_words_shows_its_text_response():
    card = {"text_response": "Your flight AF123 leaves at 10:40.", "a2ui": [
        {"surfaceUpdate": {"surfaceId": "s", "components": [
            {"id": "root", "component": {"Column": {"children": {"explicitList": ["ghost", "box"]}}}},
            {"id": "box", "component": {"Row": {"children": {"explicitList": ["gone"]}}}}]}}]}
    closed, fixes = close_card(card)
    assert validate(closed).valid and "text_response_shown" in fixes
    texts = [c for m in closed["a2ui"] if "surfaceUpdate" in m for c in m["surfaceUpdate"]["components"]
             if "Text" in c["component"]]
    assert texts and texts[0]["component"]["Text"]["text"]["literalString"] == "Your flight AF123 leaves at 10:40."
    root = next(m["beginRendering"]["root"] for m in closed["a2ui"] if "beginRendering" in m)
    top = next(c for m in closed["a2ui"] if "surfaceUpdate" in m for c in m["surfaceUpdate"]["components"]
               if c["id"] == root)
    assert top["component"]["Column"]["children"]["explicitList"][0] == texts[0]["id"]


def test_a_valid_card_without_words_is_not_touched():
    card = {"text_response": "x", "a2ui": [
        {"surfaceUpdate": {"surfaceId": "s", "components": [{"id": "d", "component": {"Divider": {}}}]}},
        {"beginRendering": {"surfaceId": "s", "root": "d"}}]}
    assert validate(card).valid and close_card(card) == (card, [])


def _card(components, root):
    return {"text_response": "t", "a2ui": [{"surfaceUpdate": {"surfaceId": "s", "components": components}},
                                           {"beginRendering": {"surfaceId": "s", "root": root}}]}


def _text(cid, s):
    return {"id": cid, "component": {"Text": {"text": {"literalString": s}}}}


def test_components_the_root_does_not_reach_are_put_under_it():
    from macaronic.genui.close import stray_components
    from macaronic.genui.render_html import render_html

    # a form written as three tops, the first made the root: the renderer would draw one field
    field = lambda cid: {"id": cid, "component": {"TextField": {"label": {"literalString": cid},  # noqa: E731
                                                                "text": {"path": f"/f/{cid}"}}}}
    button = {"id": "go", "component": {"Button": {"child": "go-label", "action": {"name": "send"}}}}
    card = _card([field("name"), field("email"), _text("go-label", "Sign me up"), button], "name")
    assert validate(card).valid and stray_components(card) == ["email", "go"]
    assert "Sign me up" not in render_html(card["a2ui"])
    closed, fixes = close_card(card)
    assert fixes == ["strays_adopted"] and validate(closed).valid and stray_components(closed) == []
    drawn = render_html(closed["a2ui"])
    assert "Sign me up" in drawn and drawn.count("<input") == 2

    # a label written for a button that was never written: shown at the end of the root Card's Column
    card = _card([_text("title", "Party"), {"id": "body", "component": {"Column": {"children": {"explicitList": ["title"]}}}},
                  {"id": "root", "component": {"Card": {"child": "body"}}}, _text("save-label", "Save it")], "root")
    closed, fixes = close_card(card)
    assert fixes == ["strays_adopted"]
    body = next(c for c in closed["a2ui"][0]["surfaceUpdate"]["components"] if c["id"] == "body")
    assert body["component"]["Column"]["children"]["explicitList"] == ["title", "save-label"]

    # a stray that is invalid once drawn (its action sends a list) stays out; the others come in
    bad = {"id": "cancel", "component": {"Button": {"child": "x-label", "action": {
        "name": "c", "context": [{"key": "k", "value": {"path": "/pick"}}]}}}}
    card = _card([_text("title", "Rooms"), {"id": "body", "component": {"Column": {"children": {"explicitList": ["title"]}}}},
                  _text("x-label", "Cancel"), bad, _text("note", "Book by noon")], "body")
    card["a2ui"].insert(1, {"dataModelUpdate": {"surfaceId": "s", "contents": [{"key": "pick", "valueString": "[]"}]}})
    assert validate(card).valid and stray_components(card) == ["cancel", "note"]  # "[]" is a list: sent, invalid
    closed, fixes = close_card(card)
    assert fixes == ["strays_adopted"] and validate(closed).valid and stray_components(closed) == ["cancel"]
    assert "Book by noon" in render_html(closed["a2ui"])
