"""genui.inline: a card's data model written into its components renders the same card."""

from __future__ import annotations

import re

import pytest

from a2ui_cases import EXAMPLES, example_id, load, needs_examples
from macaronic.genui.inline import inline
from macaronic.genui.render_html import render_html
from macaronic.genui.validate import validate


def shown(messages) -> str:
    """The rendered card without component ids (inlining renames a template's copies)."""
    return re.sub(r' data-component-id="[^"]*"', "", render_html(messages))


def components(messages):
    return [c for m in messages for c in m.get("surfaceUpdate", {}).get("components", [])]


def check(messages) -> list:
    out = inline(messages)
    assert validate(out).valid, validate(out).errors[:3]
    assert shown(out) == shown(messages)
    comps = components(out)
    assert not any("template" in str(c) for c in comps)
    order = [c["id"] for c in comps]
    for i, c in enumerate(comps):  # a container comes before what it holds
        (props,) = c["component"].values()
        kids = list((props.get("children") or {}).get("explicitList", [])) + [
            props[k] for k in ("child", "entryPointChild", "contentChild") if isinstance(props.get(k), str)]
        assert all(order.index(k) > i for k in kids if k in order), c["id"]
    return out


@needs_examples
@pytest.mark.parametrize("path", EXAMPLES, ids=example_id)
def test_official_examples_render_the_same_inlined(path):
    """The official v0.8 examples (forms, lists bound to data, icons from the data): valid and the
    same rendering after inlining; what a user edits stays bound to the data model."""
    doc = load(path)
    check(doc if isinstance(doc, list) else doc["a2ui"])


def test_every_gold_card_of_the_suite_and_the_failure_data_renders_the_same_inlined():
    from macaronic.evolve.failure_data import SKILLS, genui_task
    from macaronic.genui.tasks import FAMILIES, TEST_FAMILIES, make_task

    tasks = [make_task(f, i, 0) for f in FAMILIES if f not in TEST_FAMILIES for i in range(2)]
    tasks += [genui_task(f, i, 0) for f in SKILLS["show_values"] for i in range(3)]
    for t in tasks:
        check(t.gold["a2ui"])
    inlined = check(genui_task(SKILLS["show_values"][0], 0, 0).gold["a2ui"])  # the shopping list
    assert not any("dataModelUpdate" in m for m in inlined)  # nothing is edited: no data model left
    assert "path" not in str(inlined)


def test_a_list_of_checkboxes_keeps_each_box_bound_under_an_absolute_path():
    """Hand-written: a template of rows, each a CheckBox bound to its item's `done` (relative) and a
    label from the item; a Button sends the list's title. The labels and title become literals,
    each box stays bound to `/todos/<i>/done`, and the data model stays."""
    card = [
        {"surfaceUpdate": {"surfaceId": "s", "components": [
            {"id": "root", "component": {"Column": {"children": {"explicitList": ["head", "todos", "go"]}}}},
            {"id": "head", "component": {"Text": {"text": {"path": "/title"}, "usageHint": "h2"}}},
            {"id": "todos", "component": {"List": {"children": {"template": {"componentId": "todo",
                                                                             "dataBinding": "/todos"}}}}},
            {"id": "todo", "component": {"CheckBox": {"label": {"path": "label"}, "value": {"path": "done"}}}},
            {"id": "go-label", "component": {"Text": {"text": {"literalString": "Save"}}}},
            {"id": "go", "component": {"Button": {"child": "go-label", "action": {
                "name": "save", "context": [{"key": "list", "value": {"path": "/title"}},
                                            {"key": "first", "value": {"path": "/todos/0/done"}}]}}}},
        ]}},
        {"dataModelUpdate": {"surfaceId": "s", "contents": [{"key": "title", "valueString": "Chores"}]}},
        {"dataModelUpdate": {"surfaceId": "s", "path": "/todos/0", "contents": [
            {"key": "label", "valueString": "Dishes"}, {"key": "done", "valueBoolean": True}]}},
        {"dataModelUpdate": {"surfaceId": "s", "path": "/todos/1", "contents": [
            {"key": "label", "valueString": "Laundry"}, {"key": "done", "valueBoolean": False}]}},
        {"beginRendering": {"surfaceId": "s", "root": "root"}},
    ]
    out = check(card)
    by_id = {c["id"]: c["component"] for c in components(out)}
    assert [c["id"] for c in components(out)] == ["root", "head", "todos", "todo-0", "todo-1", "go", "go-label"]
    assert by_id["head"]["Text"]["text"] == {"literalString": "Chores"}
    assert by_id["todo-1"]["CheckBox"] == {"label": {"literalString": "Laundry"}, "value": {"path": "/todos/1/done"}}
    context = by_id["go"]["Button"]["action"]["context"]
    assert context == [{"key": "list", "value": {"literalString": "Chores"}},
                       {"key": "first", "value": {"path": "/todos/0/done"}}]  # the user's tick, still read live
    assert sum("dataModelUpdate" in m for m in out) == 3


def test_a_card_that_cannot_be_inlined_says_why():
    card = [{"surfaceUpdate": {"surfaceId": "s", "components": [
        {"id": "root", "component": {"Column": {"children": {"template": {"componentId": "row",
                                                                         "dataBinding": "/rows"}}}}},
        {"id": "row", "component": {"Text": {"text": {"path": "name"}}}},
        {"id": "row-0", "component": {"Text": {"text": {"literalString": "taken"}}}},
        {"id": "more", "component": {"Column": {"children": {"explicitList": ["row-0"]}}}}]}},
        {"dataModelUpdate": {"surfaceId": "s", "path": "/rows/0", "contents": [{"key": "name", "valueString": "a"}]}},
        {"beginRendering": {"surfaceId": "s", "root": "root"}}]
    assert [c["id"] for c in components(inline(card))] == ["root", "row-0"]  # `more` is not reached: no clash
    card[0]["surfaceUpdate"]["components"][0]["component"]["Column"]["children"] = {"explicitList": ["list", "more"]}
    card[0]["surfaceUpdate"]["components"].append(
        {"id": "list", "component": {"List": {"children": {"template": {"componentId": "row", "dataBinding": "/rows"}}}}})
    with pytest.raises(ValueError, match="row-0"):
        inline(card)
    with pytest.raises(ValueError, match="root"):
        inline([card[0], {"beginRendering": {"surfaceId": "s", "root": "nowhere"}}])
