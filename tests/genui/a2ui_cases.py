"""Helpers shared by the genui tests: the official A2UI v0.8 example cards (read from the shared
tree, never copied) and a random corrupter for robustness tests."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from macaronic.genui.shared import example_files

EXAMPLES = example_files()
JUNK = [None, 0, -1.5, True, "", "x", [], {}, [1, "a"], {"k": None}, {"path": 3}, {"Text": 1}]


def example_id(path: Path) -> str:
    return f"{path.parent.parent.name}/{path.stem}"


def load(path: Path):
    return json.loads(path.read_text(encoding="utf-8"))


needs_examples = pytest.mark.skipif(not EXAMPLES, reason="shared A2UI v0.8 files not found (set MACARONIC_SHARED)")


def nodes(obj, path=()):
    yield path
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from nodes(v, path + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from nodes(v, path + (i,))


def corrupt(obj, rng):
    """A deep copy of `obj` with one random node deleted or replaced by junk."""
    obj = copy.deepcopy(obj)
    path = rng.choice(list(nodes(obj))[1:])
    parent = obj
    for key in path[:-1]:
        parent = parent[key]
    if rng.random() < 0.3 and isinstance(parent, dict):
        del parent[path[-1]]
    else:
        parent[path[-1]] = copy.deepcopy(rng.choice(JUNK))
    return obj
