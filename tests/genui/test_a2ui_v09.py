"""A2UI v0.9 beside v0.8: the official v0.9 conformance cases (vendored from google/A2UI), run
against the vendored schemas, and the validator dispatching on the version a message states."""

import json
from pathlib import Path

import pytest

from macaronic.genui import v09
from macaronic.genui.validate import validate

CASES = Path(__file__).with_name("a2ui_v0_9_cases")
SUITES = sorted(CASES.glob("*.json"))


def conformance_cases():
    for path in SUITES:
        suite = json.loads(path.read_text())
        for i, case in enumerate(suite["tests"]):
            yield pytest.param(suite.get("schema", "server_to_client.json"), case,
                               id=f"{path.stem}-{i}")


def test_the_official_cases_are_all_here():
    cases = list(conformance_cases())
    assert len(SUITES) == 8 and len(cases) == 76
    assert {c.values[1]["valid"] for c in cases} == {True, False}


@pytest.mark.parametrize("schema,case", list(conformance_cases()))
def test_official_v09_conformance_case(schema, case):
    errors = v09.message_errors(case["data"], schema=schema)
    assert (not errors) == case["valid"], (case["description"], errors)


def test_official_v09_example_stream_is_valid_as_a_whole():
    lines = [json.loads(line) for line in (CASES / "contact_form_example.jsonl").read_text().splitlines() if line.strip()]
    for line in lines:
        assert v09.message_errors(line) == []
    result = validate(lines)
    assert result.valid, result.errors
    assert result.layers == ("envelope", "jsonschema", "integrity")


CARD = [
    {"version": "v0.9", "createSurface": {"surfaceId": "s", "catalogId": v09.BASIC_CATALOG_ID}},
    {"version": "v0.9", "updateComponents": {"surfaceId": "s", "components": [
        {"id": "root", "component": "Column", "children": ["t", "b"]},
        {"id": "t", "component": "Text", "text": "Hello"},
        {"id": "bt", "component": "Text", "text": "OK"},
        {"id": "b", "component": "Button", "child": "bt", "action": {"event": {"name": "ok"}}},
    ]}},
]


def test_validator_accepts_v09_envelope_and_still_v08():
    assert validate({"text_response": "hi", "a2ui": CARD}).valid
    v08 = [{"surfaceUpdate": {"surfaceId": "s", "components": [
               {"id": "root", "component": {"Text": {"text": {"literalString": "hi"}}}}]}},
           {"beginRendering": {"surfaceId": "s", "root": "root"}}]
    result = validate(v08)
    assert result.valid and "models" in result.layers


@pytest.mark.parametrize("edit,needle", [
    (lambda c: c[1]["updateComponents"]["components"][0]["children"].append("ghost"), "undefined component 'ghost'"),
    (lambda c: c[1]["updateComponents"]["components"][0].update(id="top"), "no component with id 'root'"),
    (lambda c: c[1]["updateComponents"]["components"].append(dict(c[1]["updateComponents"]["components"][1])), "duplicate component id 't'"),
    (lambda c: c.pop(0), "before its createSurface"),
    (lambda c: c[1]["updateComponents"]["components"][2].update(component="Card", child="b", text=None) or
               c[1]["updateComponents"]["components"][2].pop("text"), "cycle"),
    (lambda c: c[1]["updateComponents"]["components"][1].update(text={"literalString": "v0.8 style"}), "schema:"),
])
def test_v09_integrity_and_schema_faults_are_refused(edit, needle):
    card = json.loads(json.dumps(CARD))
    edit(card)
    result = validate(card)
    assert not result.valid
    assert any(needle in e["message"] for e in result.errors), result.errors


@pytest.mark.parametrize("edit,fix", [
    (lambda c: c[1]["updateComponents"]["components"][0]["children"].append("ghost"), "child_dropped:ghost"),
    (lambda c: c[1]["updateComponents"]["components"][1].update(text={"literalString": "x"}), "component_dropped:t"),
    (lambda c: c.pop(0), "create_surface_set"),
    (lambda c: c[1]["updateComponents"]["components"][0].update(id="top"), "root_set:top"),
    (lambda c: c[1]["updateComponents"].update(components=[{"id": "root", "component": "Nope"}]), "fallback_text_card"),
])
def test_a_broken_v09_card_is_closed_as_v09(edit, fix):
    from macaronic.genui.close import close_card

    assert close_card({"text_response": "hi", "a2ui": CARD}, "hi") == ({"text_response": "hi", "a2ui": CARD}, [])
    card = json.loads(json.dumps(CARD))
    edit(card)
    out, fixes = close_card({"text_response": "hi", "a2ui": card}, "hi")
    assert fix in fixes and validate(out).valid, (fixes, out)
    assert all(m.get("version") == "v0.9" for m in out["a2ui"])


def test_a_v08_list_with_delete_surface_stays_v08():
    """`deleteSurface` is a message of both versions: alone it implies no v0.9."""
    from macaronic.genui.v09 import is_v09

    v08 = [{"beginRendering": {"surfaceId": "s", "root": "r", "styles": {}}}, {"deleteSurface": {"surfaceId": "s"}}]
    assert not is_v09(v08)
    assert is_v09([{"version": "v0.9", "deleteSurface": {"surfaceId": "s"}}])
    assert is_v09([{"createSurface": {"surfaceId": "s"}}])
