"""Bad input is a clear error, never an exception: invalid JSON, unknown components, cyclic
trees, megabyte payloads, wrong envelopes."""

from __future__ import annotations

import json

from macaronic.genui.output import MAX_BYTES, parse_genui_output
from macaronic.genui.validate import Limits, validate


def card(*components, data=None, root="root", sid="s"):
    msgs = [{"surfaceUpdate": {"surfaceId": sid, "components": list(components)}}]
    if data is not None:
        msgs.append({"dataModelUpdate": {"surfaceId": sid, "contents": data}})
    msgs.append({"beginRendering": {"surfaceId": sid, "root": root}})
    return msgs


def text(cid, value):
    return {"id": cid, "component": {"Text": {"text": {"literalString": value}}}}


def column(cid, *kids):
    return {"id": cid, "component": {"Column": {"children": {"explicitList": list(kids)}}}}


def envelope(messages, text_response="ok"):
    return json.dumps({"text_response": text_response, "a2ui": messages})


def errors_of(out):
    return {(e["path"], e["message"]) for e in out.validation.errors}


def test_valid_reply_parses():
    out = parse_genui_output(envelope(card(column("root", "t"), text("t", "hello"))))
    assert out.valid and out.text_response == "ok" and len(out.messages) == 2 and out.repairs == []


def test_invalid_json_is_a_clear_error():
    out = parse_genui_output("I cannot do that.")
    assert not out.valid
    assert out.validation.errors[0]["message"].startswith("not JSON")


def test_unknown_component_type():
    bad = {"id": "root", "component": {"Carousel": {}}}
    out = parse_genui_output(envelope(card(bad)))
    assert ("/a2ui/0/surfaceUpdate/components/0/component/Carousel",) == tuple(
        e["path"] for e in out.validation.errors if "Carousel" in e["message"])


def test_two_component_types_in_one_wrapper():
    bad = {"id": "root", "component": {"Text": {"text": {"literalString": "a"}}, "Divider": {}}}
    out = validate(card(bad))
    assert out.errors[0]["path"] == "/0/surfaceUpdate/components/0/component"


def test_cyclic_tree():
    out = validate(card(column("root", "a"), column("a", "b"), column("b", "a")))
    assert [e["path"] for e in out.errors] == ["/0/surfaceUpdate/components/2/component/Column/children/explicitList/0"]
    assert "a -> b -> a" in out.errors[0]["message"]


def test_self_reference():
    out = validate(card(column("root", "root")))
    assert "cycle" in out.errors[0]["message"]


def test_depth_is_bounded():
    chain = [column(f"c{i}", f"c{i + 1}") for i in range(40)] + [text("c40", "deep")]
    out = validate(card(*chain, root="c0"), Limits(max_depth=32))
    assert any("deeper than 32" in e["message"] and e["path"] == "/1/beginRendering/root" for e in out.errors)
    assert validate(card(*chain, root="c0"), Limits(max_depth=64)).valid


def test_megabyte_payload_is_capped():
    huge = envelope(card(text("root", "x" * (1024 * 1024))))
    out = parse_genui_output(huge)
    assert not out.valid
    assert f"the cap is {MAX_BYTES} bytes" in out.validation.errors[0]["message"]


def test_too_many_components():
    many = [column("root", *[f"t{i}" for i in range(3000)])] + [text(f"t{i}", "x") for i in range(3000)]
    out = validate(card(*many))
    assert "at most 2000 allowed" in out.errors[0]["message"]


def test_bare_list_needs_envelope_in_contract_mode():
    raw = json.dumps(card(text("root", "x")))
    assert not parse_genui_output(raw).valid
    assert parse_genui_output(raw, require_envelope=False).valid


def test_envelope_errors():
    out = validate({"text_response": 3, "a2ui": [], "extra": 1})
    paths = {e["path"] for e in out.errors}
    assert {"/text_response", "/extra", "/a2ui"} <= paths
    assert validate("just a string").errors[0]["path"] == ""


def test_message_with_two_kinds_and_unknown_kind():
    out = validate([{"surfaceUpdate": {}, "beginRendering": {}}, {"renderAll": {}}])
    assert out.errors[0]["path"] == "/0"
    assert out.errors[1]["path"] == "/1/renderAll"


def test_missing_begin_rendering_and_missing_root():
    msgs = card(text("root", "x"))[:1]
    assert "no beginRendering" in validate(msgs).errors[0]["message"]
    assert validate(msgs, Limits(require_begin_rendering=False)).valid
    out = validate(card(text("a", "x"), root="root"))
    assert out.errors == [{"path": "/1/beginRendering/root", "message": "root 'root' is not a component of surface 's'"}]


def test_button_needs_an_action_name():
    button = {"id": "root", "component": {"Button": {"child": "l", "action": {"name": ""}}}}
    out = validate(card(button, text("l", "Go")))
    assert out.errors[0]["path"] == "/0/surfaceUpdate/components/0/component/Button/action/name"


def test_data_paths_resolve_including_templates():
    tpl = {"id": "root", "component": {"List": {"children": {"template": {"componentId": "item", "dataBinding": "/rows"}}}}}
    item = {"id": "item", "component": {"Text": {"text": {"path": "title"}}}}
    rows = [{"key": "rows", "valueMap": [{"key": "0", "valueString": "x"}]}]
    # `/rows/0` is a string, so the relative `title` inside the template does not resolve.
    out = validate(card(tpl, item, data=rows))
    assert out.errors[0]["path"] == "/0/surfaceUpdate/components/1/component/Text/text/path"
    good = [{"dataModelUpdate": {"surfaceId": "s", "path": "/rows/0", "contents": [{"key": "title", "valueString": "A"}]}}]
    assert validate(card(tpl, item)[:1] + good + card(tpl, item)[1:]).valid
    missing = validate(card(tpl, item))
    assert missing.errors[0]["path"] == "/0/surfaceUpdate/components/0/component/List/children/template/dataBinding"


def test_input_paths_need_not_exist_and_feed_action_context():
    field = {"id": "f", "component": {"TextField": {"label": {"literalString": "Name"}, "text": {"path": "/name"}}}}
    button = {"id": "b", "component": {"Button": {"child": "l", "action": {"name": "go", "context": [
        {"key": "name", "value": {"path": "/name"}}, {"key": "other", "value": {"path": "/nope"}}]}}}}
    out = validate(card(column("root", "f", "b"), field, button, text("l", "Go")))
    assert [e["path"] for e in out.errors] == [
        "/0/surfaceUpdate/components/2/component/Button/action/context/1/value/path"]


def test_minimal_catalog_restricts_components():
    msgs = card({"id": "root", "component": {"Divider": {}}})
    msgs[-1]["beginRendering"]["catalogId"] = "https://a2ui.org/specification/v0_8/catalogs/minimal/minimal_catalog.json"
    out = validate(msgs)
    assert out.errors[0]["path"] == "/0/surfaceUpdate/components/0/component/Divider"
    msgs[-1]["beginRendering"]["catalogId"] = "https://example.com/unknown.json"
    assert validate(msgs).errors[0]["path"] == "/1/beginRendering/catalogId"


def test_weight_only_under_row_or_column():
    weighted = {"id": "t", "weight": 1, "component": {"Text": {"text": {"literalString": "x"}}}}
    assert validate(card(column("root", "t"), weighted)).valid
    out = validate(card({"id": "root", "component": {"Card": {"child": "t"}}}, weighted))
    assert out.errors[0]["path"] == "/0/surfaceUpdate/components/1/weight"


def test_unreachable_component_is_a_warning():
    out = validate(card(text("root", "x"), text("orphan", "y")))
    assert out.valid and out.warnings[0]["path"] == "/0/surfaceUpdate/components/1"


def test_nulls_and_bad_enums_are_rejected_precisely():
    bad = {"id": "root", "component": {"Text": {"text": {"literalString": "a"}, "usageHint": None}}}
    assert validate(card(bad)).errors[0]["path"] == "/0/surfaceUpdate/components/0/component/Text/usageHint"
    bad = {"id": "root", "component": {"Image": {"url": {"literalString": "u"}, "fit": "stretch"}}}
    assert validate(card(bad)).errors[0]["path"] == "/0/surfaceUpdate/components/0/component/Image/fit"
