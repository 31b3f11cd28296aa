"""Broken variants generated from the official examples are rejected, each with an error at
the exact JSON pointer of the fault."""

from __future__ import annotations

import copy

import pytest
from a2ui_cases import EXAMPLES, example_id, load, needs_examples

from macaronic.genui.validate import validate

pytestmark = needs_examples


def locate(messages):
    """(index of the surfaceUpdate, its components, index of beginRendering, root id)."""
    su = next(i for i, m in enumerate(messages) if "surfaceUpdate" in m)
    br = next(i for i, m in enumerate(messages) if "beginRendering" in m)
    return su, messages[su]["surfaceUpdate"]["components"], br, messages[br]["beginRendering"]["root"]


def ctype(entry):
    return next(iter(entry["component"]))


def drop_root(messages):
    su, comps, br, root = locate(messages)
    comps[:] = [c for c in comps if c["id"] != root]
    return f"/{br}/beginRendering/root"


def dangle_child(messages):
    su, comps, _, _ = locate(messages)
    j, c = next((j, c) for j, c in enumerate(comps) if "explicitList" in c["component"][ctype(c)].get("children", {}))
    c["component"][ctype(c)]["children"]["explicitList"][0] = "no-such-component"
    return f"/{su}/surfaceUpdate/components/{j}/component/{ctype(c)}/children/explicitList/0"


def add_cycle(messages):
    su, comps, _, root = locate(messages)
    j, c = next((j, c) for j, c in enumerate(comps)
                if c["id"] != root and "explicitList" in c["component"][ctype(c)].get("children", {}))
    kids = c["component"][ctype(c)]["children"]["explicitList"]
    kids.append(root)
    return f"/{su}/surfaceUpdate/components/{j}/component/{ctype(c)}/children/explicitList/{len(kids) - 1}"


def unknown_type(messages):
    su, comps, _, _ = locate(messages)
    j = len(comps) - 1
    comps[j]["component"] = {"Carousel": {"items": []}}
    return f"/{su}/surfaceUpdate/components/{j}/component/Carousel"


def button_without_action(messages):
    su, comps, _, _ = locate(messages)
    j, c = next((j, c) for j, c in enumerate(comps) if ctype(c) == "Button")
    del c["component"]["Button"]["action"]
    return f"/{su}/surfaceUpdate/components/{j}/component/Button/action"


def duplicate_id(messages):
    su, comps, _, _ = locate(messages)
    if len(comps) < 2:
        raise StopIteration
    j = len(comps) - 1
    comps[j]["id"] = comps[0]["id"]
    return f"/{su}/surfaceUpdate/components/{j}/id"


def bad_data_path(messages):
    su, comps, _, _ = locate(messages)
    j, c = next((j, c) for j, c in enumerate(comps) if ctype(c) == "Text" and "path" in c["component"]["Text"]["text"])
    c["component"]["Text"]["text"]["path"] = "/no/such/value"
    return f"/{su}/surfaceUpdate/components/{j}/component/Text/text/path"


MUTATIONS = [drop_root, dangle_child, add_cycle, unknown_type, button_without_action, duplicate_id, bad_data_path]


def _applies(path, mutate) -> bool:
    try:
        mutate(copy.deepcopy(load(path)))
        return True
    except StopIteration:  # the example has no place for this fault (e.g. no Button to break)
        return False


def cases():
    return [pytest.param(path, mutate, id=f"{example_id(path)}-{mutate.__name__}")
            for path in EXAMPLES for mutate in MUTATIONS if _applies(path, mutate)]


@pytest.mark.parametrize("path,mutate", cases())
def test_broken_variant_rejected_at_exact_path(path, mutate):
    messages = copy.deepcopy(load(path))
    expected = mutate(messages)
    result = validate({"text_response": "x", "a2ui": messages})
    assert not result.valid
    paths = [e["path"] for e in result.errors]
    assert "/a2ui" + expected in paths, result.errors


def test_every_mutation_applies_somewhere():
    applied = {m.__name__: 0 for m in MUTATIONS}
    for path in EXAMPLES:
        for mutate in MUTATIONS:
            try:
                mutate(copy.deepcopy(load(path)))
                applied[mutate.__name__] += 1
            except StopIteration:
                pass
    assert all(n >= 3 for n in applied.values()), applied
