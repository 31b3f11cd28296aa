"""Near-miss JSON from a model is repaired, and every repair is named."""

from __future__ import annotations

import json

import pytest

from macaronic.genui.repair import repair

GOOD = {"text_response": "Hi \u201cthere\u201d", "a2ui": [{"deleteSurface": {"surfaceId": "s"}}]}
TEXT = json.dumps(GOOD, ensure_ascii=False)


@pytest.mark.parametrize("raw,repairs", [
    (TEXT, []),
    (f"```json\n{TEXT}\n```", ["markdown_fence"]),
    (f"Sure, here it is:\n```\n{TEXT}\n```\nAnything else?", ["markdown_fence", "prose_before", "prose_after"]),
    (f"Here is the card: {TEXT} Enjoy!", ["prose_before", "prose_after"]),
    (TEXT.replace('"text_response"', "\u201ctext_response\u201d"), ["smart_quotes"]),
    (TEXT.replace("}}]", "},},],"), ["trailing_comma"]),
])
def test_repairs_recover_the_object(raw, repairs):
    result = repair(raw)
    assert result.ok, result.error
    assert result.obj == GOOD
    assert sorted(result.repairs) == sorted(repairs)


def test_truncated_tail_is_closed():
    result = repair(TEXT[: TEXT.index("surfaceId") + 14])  # cut inside the surface id string
    assert result.ok and result.obj == GOOD
    assert result.repairs == ["closed_string", "closed_brackets"]
    result = repair(TEXT[: TEXT.index("surfaceId") + 16])  # cut after it
    assert result.obj == GOOD and result.repairs == ["closed_brackets"]


def test_truncated_after_key_drops_partial_member():
    result = repair('{"text_response": "ok", "a2ui": [{"beginRendering": {"surfaceId": "s", "root":')
    assert result.ok
    assert result.obj == {"text_response": "ok", "a2ui": [{"beginRendering": {"surfaceId": "s"}}]}
    assert "dropped_partial_tail" in result.repairs


def test_smart_quotes_inside_content_survive():
    result = repair("{\u201ca\u201d: \u201csay \u201chi\u201d now\u201d}")
    assert result.obj == {"a": "say \u201chi\u201d now"}


def test_raw_newline_in_string_is_escaped():
    result = repair('{"a": "two\nlines"}')
    assert result.obj == {"a": "two\nlines"} and result.repairs == ["escaped_control_chars"]


@pytest.mark.parametrize("raw", ["", "no json here at all", '{"a": nope}', "{] oops ["])
def test_hopeless_input_reports_an_error(raw):
    result = repair(raw)
    assert not result.ok and result.obj is None and result.error
