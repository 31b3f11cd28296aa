"""Every official A2UI v0.8 example card passes our validator, the official JSON schema, and
(as a second opinion) the a2ui-pydantic package."""

from __future__ import annotations

import pytest
from a2ui_cases import EXAMPLES, example_id, load, needs_examples

from macaronic.genui.models import STANDARD_COMPONENTS
from macaronic.genui.render_html import render_html
from macaronic.genui.shared import load_schema
from macaronic.genui.validate import validate

pytestmark = needs_examples


@pytest.mark.parametrize("path", EXAMPLES, ids=example_id)
def test_example_is_valid(path):
    result = validate(load(path))
    assert result.valid, result.errors
    assert result.layers == ("envelope", "models", "jsonschema", "integrity")
    assert result.warnings == []


@pytest.mark.parametrize("path", EXAMPLES, ids=example_id)
def test_example_valid_inside_envelope(path):
    result = validate({"text_response": "Here you go.", "a2ui": load(path)})
    assert result.valid, result.errors


@pytest.mark.parametrize("path", EXAMPLES, ids=example_id)
def test_a2ui_pydantic_agrees(path):
    a2ui_pydantic = pytest.importorskip("a2ui_pydantic")
    for message in load(path):
        a2ui_pydantic.A2UIMessage.model_validate(message)


@pytest.mark.parametrize("path", EXAMPLES, ids=example_id)
def test_example_renders_without_errors(path):
    html = render_html(load(path))
    assert 'class="a2ui-surface"' in html and "a2ui-error" not in html


def test_examples_cover_both_catalogs():
    catalogs = {p.parent.parent.name for p in EXAMPLES}
    assert catalogs == {"basic", "minimal"} and len(EXAMPLES) >= 30


def test_models_match_standard_catalog():
    catalog = load_schema("standard_catalog_definition.json")
    assert list(STANDARD_COMPONENTS) == list(catalog["components"])
    for name, schema in catalog["components"].items():
        model_fields = set(STANDARD_COMPONENTS[name].model_fields)
        assert model_fields == set(schema.get("properties", {})), name
        required = {f for f, info in STANDARD_COMPONENTS[name].model_fields.items() if info.is_required()}
        assert required == set(schema.get("required", [])), name


def test_a2ui_pydantic_accepts_our_gold_cards():
    a2ui_pydantic = pytest.importorskip("a2ui_pydantic")
    from macaronic.genui.tasks import generate_tasks

    for task in generate_tasks(per_family=2):
        for message in task.gold["a2ui"]:
            a2ui_pydantic.A2UIMessage.model_validate(message)


def test_shared_locator_honours_env(monkeypatch, tmp_path):
    from macaronic.genui import shared

    monkeypatch.setenv(shared.ENV_VAR, str(tmp_path))
    assert shared.shared_dir() == tmp_path and shared.a2ui_dir() is None
    monkeypatch.delenv(shared.ENV_VAR)
    # without the variable: the `shared` folder beside the checkout, or None (whatever this checkout has)
    (tmp_path / "repo").mkdir()
    assert shared.shared_dir(tmp_path / "repo") is None
    (tmp_path / "shared").mkdir()
    assert shared.shared_dir(tmp_path / "repo") == tmp_path / "shared"


def test_a2ui_pydantic_is_laxer_than_us():
    """Recorded disagreement: a2ui-pydantic ignores unknown keys (and drops catalogId); we and the
    official schema reject unknown keys."""
    a2ui_pydantic = pytest.importorskip("a2ui_pydantic")
    message = {"beginRendering": {"surfaceId": "s", "root": "r", "bogus": 1}}
    a2ui_pydantic.A2UIMessage.model_validate(message)  # accepted there
    errors = validate([message]).errors
    assert any(e["path"] == "/0/beginRendering/bogus" for e in errors)
