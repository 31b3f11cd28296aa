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
