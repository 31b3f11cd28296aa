"""A2UI v0.8 -> v0.9 (`genui/convert.py`): every v0.8 card the project has converts to a card the
v0.9 validator (official schema, then integrity) accepts, with the same words and data."""

import json

import pytest
from a2ui_cases import EXAMPLES, example_id, load, needs_examples

from macaronic.genui import v09
from macaronic.genui.convert import card_to_v08, card_to_v09, streamed_head, to_v08, to_v09, v08_text
from macaronic.genui.datamodel import build_models, set_path
from macaronic.genui.tasks import FAMILIES, make_task
from macaronic.genui.validate import validate

GOLD = [pytest.param(make_task(f, i).gold["a2ui"], id=f"{f}-{i}") for f in FAMILIES for i in range(3)]


def words(obj, out=None):
    """Every string in a card that is not an id, a key or a type name."""
    out = set() if out is None else out
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k not in ("id", "surfaceId", "component", "child", "children", "root", "explicitList",
                         "componentId", "trigger", "content", "entryPointChild", "contentChild", "catalogId",
                         "version", "path", "dataBinding", "name", "key", "usageHint", "variant",
                         "font"):  # v0.9's theme has no font
                words(v, out)
    elif isinstance(obj, list):
        for v in obj:
            words(v, out)
    elif isinstance(obj, str):
        out.add(obj)
    return out


def check(messages):
    assert validate(messages).valid
    out = to_v09(messages)
    errors, layers = v09.validate_messages(out)
    assert errors == [] and "integrity" in layers
    assert validate(out).valid  # the dispatching validator says v0.9 and agrees
    assert all(m["version"] == "v0.9" for m in out)
    v08_words = words([m for m in messages if "dataModelUpdate" not in m])
    assert v08_words <= words(out)
    return out


def v09_data(messages) -> dict:
    """Each surface's data model once every v0.9 update is applied."""
    out: dict = {}
    for m in messages:
        if "updateDataModel" in m:
            body = m["updateDataModel"]
            out[body["surfaceId"]] = set_path(out.get(body["surfaceId"], {}), body["path"], body["value"])
    return out


@pytest.mark.parametrize("messages", GOLD)
def test_every_gold_card_converts_to_a_valid_v09_card(messages):
    assert v09_data(check(messages)) == build_models(messages)  # the same data model


@needs_examples
@pytest.mark.parametrize("path", EXAMPLES, ids=example_id)
def test_every_official_v08_example_converts_to_a_valid_v09_card(path):
    check(load(path))


def test_the_mapping_of_kinds_components_and_properties():
    v08 = [
        {"surfaceUpdate": {"surfaceId": "s", "components": [
            {"id": "top", "component": {"Column": {"children": {"explicitList": ["t", "f", "c", "b"]},
                                                   "alignment": "center"}}},
            {"id": "root", "component": {"Text": {"text": {"literalString": "Hi"}, "usageHint": "h2"}}},
            {"id": "t", "component": {"Row": {"children": {"explicitList": ["root"]}, "distribution": "spaceBetween"}}},
            {"id": "f", "component": {"TextField": {"label": {"literalString": "Name"}, "text": {"path": "/name"},
                                                    "textFieldType": "date"}}},
            {"id": "c", "component": {"MultipleChoice": {"selections": {"path": "/size", "literalArray": ["M"]},
                                                         "options": [{"label": {"literalString": "M"}, "value": "M"}],
                                                         "maxAllowedSelections": 1}}},
            {"id": "bt", "component": {"Text": {"text": {"literalString": "Go"}}}},
            {"id": "b", "weight": 1, "component": {"Button": {"child": "bt", "primary": True, "action": {
                "name": "go", "context": [{"key": "who", "value": {"path": "/name"}},
                                          {"key": "n", "value": {"literalNumber": 2}}]}}}},
        ]}},
        {"dataModelUpdate": {"surfaceId": "s", "contents": [{"key": "name", "valueString": "Ada"}]}},
        {"beginRendering": {"surfaceId": "s", "root": "top", "styles": {"primaryColor": "#112233", "font": "x"}}},
    ]
    out = check(v08)
    assert out[0] == {"version": "v0.9", "createSurface": {"surfaceId": "s", "catalogId": v09.BASIC_CATALOG_ID,
                                                            "theme": {"primaryColor": "#112233"}}}
    comps = {c["id"]: c for c in out[1]["updateComponents"]["components"]}
    assert comps["root"] == {"id": "root", "component": "Column", "children": ["t", "f", "c", "b"], "align": "center"}
    assert comps["root-0"] == {"id": "root-0", "component": "Text", "text": "Hi", "variant": "h2"}  # renamed away
    assert comps["t"] == {"id": "t", "component": "Row", "children": ["root-0"], "justify": "spaceBetween"}
    assert comps["f"] == {"id": "f", "component": "TextField", "label": "Name", "value": {"path": "/name"},
                          "variant": "shortText"}
    assert comps["c"] == {"id": "c", "component": "ChoicePicker", "value": {"path": "/size"},
                          "options": [{"label": "M", "value": "M"}], "variant": "mutuallyExclusive"}
    assert comps["b"] == {"id": "b", "component": "Button", "weight": 1, "child": "bt", "variant": "primary",
                          "action": {"event": {"name": "go", "context": {"who": {"path": "/name"}, "n": 2}}}}
    rest = out[2:]
    # the literal that initialised /size becomes data; /name is the card's own data, left alone
    assert {"version": "v0.9", "updateDataModel": {"surfaceId": "s", "path": "/size", "value": ["M"]}} in rest
    assert {"version": "v0.9", "updateDataModel": {"surfaceId": "s", "path": "/", "value": {"name": "Ada"}}} in rest


def test_templates_tabs_modal_and_slider():
    v08 = [
        {"beginRendering": {"surfaceId": "s", "root": "root"}},
        {"surfaceUpdate": {"surfaceId": "s", "components": [
            {"id": "root", "component": {"Tabs": {"tabItems": [{"title": {"literalString": "A"}, "child": "l"},
                                                               {"title": {"literalString": "B"}, "child": "m"}]}}},
            {"id": "l", "component": {"List": {"children": {"template": {"componentId": "row", "dataBinding": "/items"}},
                                               "direction": "vertical", "alignment": "start"}}},
            {"id": "row", "component": {"Text": {"text": {"path": "name"}}}},
            {"id": "m", "component": {"Modal": {"entryPointChild": "open", "contentChild": "sl"}}},
            {"id": "open", "component": {"Text": {"text": {"literalString": "open"}}}},
            {"id": "sl", "component": {"Slider": {"value": {"path": "/v"}, "minValue": 1}}},
        ]}},
        {"dataModelUpdate": {"surfaceId": "s", "contents": [
            {"key": "items", "valueMap": [{"key": "0", "valueString": "{\"name\": \"a\"}"}]}]}},
    ]
    comps = {c["id"]: c for c in check(v08)[1]["updateComponents"]["components"]}
    assert comps["root"]["tabs"] == [{"title": "A", "child": "l"}, {"title": "B", "child": "m"}]
    assert comps["l"] == {"id": "l", "component": "List", "children": {"componentId": "row", "path": "/items"},
                          "direction": "vertical", "align": "start"}
    assert comps["row"]["text"] == {"path": "name"}  # relative inside a template, as in v0.8
    assert comps["m"] == {"id": "m", "component": "Modal", "trigger": "open", "content": "sl"}
    assert comps["sl"] == {"id": "sl", "component": "Slider", "value": {"path": "/v"}, "min": 1, "max": 100}


def test_an_update_to_an_earlier_surface_keeps_its_ids_and_a_v09_card_is_left_alone():
    update = [{"dataModelUpdate": {"surfaceId": "s", "path": "/n", "contents": [{"key": "a", "valueNumber": 1}]}}]
    assert to_v09(update) == [{"version": "v0.9", "updateDataModel": {"surfaceId": "s", "path": "/n", "value": {"a": 1}}}]
    card = {"text_response": "x", "a2ui": to_v09(make_task(next(iter(FAMILIES)), 0).gold["a2ui"])}
    assert card_to_v09(card) is card
    before = json.dumps(GOLD[0].values[0])
    card_to_v09({"text_response": "", "a2ui": GOLD[0].values[0]})
    assert json.dumps(GOLD[0].values[0]) == before  # the input is not changed


@pytest.mark.long  # over 10 s on 2 cores: the long CI step keeps the default suite under 15 minutes
def test_a_v09_card_cut_anywhere_closes_into_a_valid_v09_card():
    """The closer on v0.9 text (a v0.9 card cut by a token cap): repaired, then closed by the v0.9
    rules, it stays v0.9 and valid, wherever the cut falls after its first message."""
    from macaronic.genui.close import card_text, close_card
    from macaronic.genui.output import parse_genui_output

    for messages in [GOLD[0].values[0], GOLD[5].values[0]]:
        card = {"text_response": "Here.", "a2ui": to_v09(messages)}
        text = card_text(card)
        start = text.index('"version"', text.index('"createSurface"') + 1)  # after the first message
        for cut in range(start, len(text), 41):
            out = parse_genui_output(text[:cut])
            closed, fixes = close_card(out.obj, text[:cut])
            assert v09.is_v09(closed["a2ui"]) and validate(closed).valid, (cut, fixes)


def test_a_later_update_that_redefines_an_earlier_surfaces_root_replaces_root():
    """Turn 1 began surface `s` with root `card`; turn 2 (v0.8, no beginRendering) redefines `card`.
    Converted with the conversation's roots, turn 2 replaces `root`, as a v0.8 renderer would
    replace its root; without them it keeps its ids (an added component nothing draws)."""
    from macaronic.genui.convert import surface_roots

    first = [{"surfaceUpdate": {"surfaceId": "s", "components": [
        {"id": "card", "component": {"Column": {"children": {"explicitList": ["t"]}}}},
        {"id": "root", "component": {"Text": {"text": {"literalString": "a component called root"}}}},
        {"id": "t", "component": {"Text": {"text": {"literalString": "Hi"}}}}]}},
        {"beginRendering": {"surfaceId": "s", "root": "card"}}]
    later = [{"surfaceUpdate": {"surfaceId": "s", "components": [
        {"id": "card", "component": {"Column": {"children": {"explicitList": ["t", "u", "root"]}}}},
        {"id": "u", "component": {"Text": {"text": {"literalString": "Bye"}}}}]}}]
    replies = ["plain text first", json.dumps({"text_response": "Hi.", "a2ui": first}),
               "```json\n" + json.dumps({"text_response": "x", "a2ui": [{"deleteSurface": {"surfaceId": "gone"}}]}) + "\n```"]
    roots = surface_roots(replies)
    assert roots == {"s": "card"}
    ids = lambda msgs: [c["id"] for m in msgs if "updateComponents" in m for c in m["updateComponents"]["components"]]
    assert ids(to_v09(first)) == ["root", "root-0", "t"]
    assert ids(to_v09(later, roots)) == ["root", "u"]
    assert to_v09(later, roots)[0]["updateComponents"]["components"][0]["children"] == ["t", "u", "root-0"]
    assert ids(to_v09(later)) == ["card", "u"]  # with no roots known: its ids kept
    # a surface deleted later is no longer an earlier surface, and a v0.9 card is not read as v0.8
    assert surface_roots([*replies, json.dumps({"text_response": "", "a2ui": [{"deleteSurface": {"surfaceId": "s"}}]})]) == {}
    assert surface_roots([json.dumps({"text_response": "", "a2ui": to_v09(first)})]) == {}


def test_what_v09_refuses_and_v08_let_through_is_closed_when_served():
    """An empty id passes v0.8 (and v0.9's schema) but the official v0.9 renderer refuses the whole
    message: the v0.9 integrity layer names it, and the served card drops that component."""
    from macaronic.genui.convert import served_card

    v08 = [{"surfaceUpdate": {"surfaceId": "s", "components": [
        {"id": "root", "component": {"Column": {"children": {"explicitList": ["t"]}}}},
        {"id": "t", "component": {"Text": {"text": {"literalString": "Hi"}}}},
        {"id": "", "component": {"Divider": {}}}]}}, {"beginRendering": {"surfaceId": "s", "root": "root"}}]
    assert validate(v08).valid
    errors, _ = v09.validate_messages(to_v09(v08))
    assert [e["message"] for e in errors] == ["empty component id"]
    genui = {"valid": True, "errors": [], "text_response": "Hi.", "a2ui": v08}
    out, text = served_card(genui, "0.9")
    assert out["valid"] and out["closed"] == ["component_dropped:"] and validate(out["a2ui"]).valid
    assert json.loads(text) == {"text_response": "Hi.", "a2ui": out["a2ui"]}
    assert served_card(genui, "0.8") == (genui, None)


# ---- back: what the genui specialist reads of a v0.9 card in its history ----

def engine_cards(seeds=(0, 1, 2), n=20):
    from macaronic.datagen.genui import INTENTS, examples

    return [json.loads(e.messages[-1]["content"])["a2ui"] for seed in seeds
            for e in examples(n, seed, intents=tuple(INTENTS))]


def test_every_card_we_have_comes_back_to_a_valid_v08_card_that_converts_the_same():
    """to_v09 then to_v08: a valid v0.8 card with the same words and data model, which converts to
    the same v0.9 again (the gold cards, the official v0.8 examples, the GenUI engine's cards)."""
    cards = [p.values[0] for p in GOLD] + [load(p) for p in EXAMPLES] + engine_cards()
    assert len(cards) >= 30 + 60
    for messages in cards:
        out = to_v09(messages)
        back = to_v08(out)
        assert validate(back).valid, validate(back).errors
        assert not v09.is_v09(back) and to_v09(back) == out
        assert words([m for m in messages if "dataModelUpdate" not in m]) <= words(back)
        assert build_models(back) == v09_data(out)


def test_the_v09_only_parts_are_dropped_and_values_typed_by_the_v08_catalog():
    v9 = [{"version": "v0.9", "createSurface": {"surfaceId": "s", "catalogId": v09.BASIC_CATALOG_ID,
                                                 "theme": {"primaryColor": "#112233"}}},
          {"version": "v0.9", "updateComponents": {"surfaceId": "s", "components": [
              {"id": "root", "component": "Column", "children": ["f", "c", "b"], "justify": "center"},
              {"id": "f", "component": "TextField", "label": "Name", "value": {"path": "/name"}, "variant": "shortText",
               "checks": [{"call": "required", "args": {}}]},
              {"id": "c", "component": "ChoicePicker", "value": ["a"], "variant": "mutuallyExclusive",
               "options": [{"label": "A", "value": "a"}]},
              {"id": "t", "component": "Text", "text": {"call": "formatDate", "args": {}}},
              {"id": "b", "component": "Button", "child": "t", "variant": "primary",
               "action": {"event": {"name": "go", "context": {"who": {"path": "/name"}, "n": 2}}}}]}},
          {"version": "v0.9", "updateDataModel": {"surfaceId": "s", "path": "/name", "value": "Ada"}}]
    back = to_v08(v9)
    assert [next(iter(m)) for m in back] == ["surfaceUpdate", "dataModelUpdate", "beginRendering"]
    comps = {c["id"]: c["component"] for c in back[0]["surfaceUpdate"]["components"]}
    assert comps["root"] == {"Column": {"children": {"explicitList": ["f", "c", "b"]}, "distribution": "center"}}
    assert comps["f"] == {"TextField": {"label": {"literalString": "Name"}, "text": {"path": "/name"},
                                        "textFieldType": "shortText"}}
    assert comps["c"] == {"MultipleChoice": {"selections": {"literalArray": ["a"]}, "maxAllowedSelections": 1,
                                             "options": [{"label": {"literalString": "A"}, "value": "a"}]}}
    assert comps["t"] == {"Text": {}}  # a function call: v0.8 cannot say it
    assert comps["b"] == {"Button": {"child": "t", "primary": True, "action": {"name": "go", "context": [
        {"key": "who", "value": {"path": "/name"}}, {"key": "n", "value": {"literalNumber": 2}}]}}}
    assert back[1] == {"dataModelUpdate": {"surfaceId": "s", "contents": [{"key": "name", "valueString": "Ada"}]}}
    assert back[2] == {"beginRendering": {"surfaceId": "s", "root": "root", "styles": {"primaryColor": "#112233"}}}


def test_v08_text_reads_only_v09_cards():
    card = json.loads(json.dumps({"text_response": "Hi", "a2ui": GOLD[0].values[0]}))
    served = json.dumps(card_to_v09(card))
    assert json.loads(v08_text(served)) == card_to_v08(card_to_v09(card))
    assert validate(json.loads(v08_text(served))).valid
    for other in (json.dumps(card), "plain words", '{"text_response": "v0.9', "", None, '["v0.9"]'):
        assert v08_text(other) is None


def test_a_streamed_head_only_grows_and_starts_the_served_card():
    """Cut anywhere, a card's text shows as the opening of the served (compact) card with the
    text_response so far: each head extends the last, escapes and surrogate pairs never split."""
    for tr, spaced in (('Say "hi" \u00e9 \U0001f600\\ \n end', True), ("Here is a card.", False)):
        card = {"text_response": tr, "a2ui": GOLD[0].values[0]}
        text = json.dumps(card, separators=None if spaced else (",", ":"), ensure_ascii=spaced)
        served = json.dumps(card, ensure_ascii=False, separators=(",", ":"))
        heads = [streamed_head(text[:i]) for i in range(len(text) + 1)]
        assert heads[0] == "" and heads[-1] == '{"text_response":' + json.dumps(tr, ensure_ascii=False)[:-1]
        for a, b in zip(heads, heads[1:]):
            assert b.startswith(a) and served.startswith(b), (a, b)
    assert streamed_head('```json\n{"text_response":"Hi') == '{"text_response":"Hi'
    assert streamed_head('{"a2ui":[') == "" and streamed_head("Hello") == ""
