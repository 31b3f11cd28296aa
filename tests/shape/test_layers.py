"""The package's layer order (docs/ARCHITECTURE.md), proved: every module belongs to one layer, and no
module imports a module of a higher layer, counting imports inside functions (a lazy import is
still a dependency). Library folders hold no argparse and read no sys.argv: every command's parsing
is in the entry-point layer (`macaronic.commands`, dispatched by `macaronic.cli`), which may import
anything."""

from __future__ import annotations

import ast
from pathlib import Path

import macaronic

from test_import_graph import import_graph  # tests/shape is on sys.path (pytest's prepend mode)

ROOT = Path(macaronic.__file__).resolve().parent

# bottom first: a module may import its own layer and the layers before it. The same list, with what
# each layer holds, is the "Layers" section of docs/ARCHITECTURE.md.
LAYERS: list[tuple[str, ...]] = [
    ("macaronic", "splits", "migrations", "specialist"),  # the version; split hashing; migrations; the specialist registry
    ("substrate",),
    ("prompts",),
    ("engine",),
    ("testing",),
    ("export", "llamacpp"),
    ("harness",),
    ("router",),
    ("genui",),
    ("suites",),
    ("pairs",),
    ("serve",),
    ("contract",),
    ("datagen",),
    ("train",),
    ("evolve",),
    ("bench",),
    ("commands", "cli"),  # the entry-point layer
]
ENTRY = LAYERS[-1]


def unit(module: str) -> str:
    """The folder or top-level module a module belongs to: macaronic.serve.mol -> serve."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def layer_of(module: str) -> int:
    u = unit(module)
    for i, names in enumerate(LAYERS):
        if u in names:
            return i
    raise KeyError(f"{module}: {u!r} is in no layer; place it in LAYERS and in docs/ARCHITECTURE.md")


def upward(graph: dict[str, set[str]]) -> list[str]:
    """Every import of a higher layer, as 'module (layer) -> target (layer)'."""
    out = []
    for m, targets in sorted(graph.items()):
        for t in sorted(targets):
            if layer_of(t) > layer_of(m):
                out.append(f"{m} ({unit(m)}) -> {t} ({unit(t)})")
    return out


def test_the_checker_finds_an_upward_import():
    graph = {"macaronic.engine.llm": {"macaronic.serve.mol"}, "macaronic.serve.mol": {"macaronic.engine.llm"},
             "macaronic.commands.serve": {"macaronic.serve.mol", "macaronic.bench.docs"}}
    assert upward(graph) == ["macaronic.engine.llm (engine) -> macaronic.serve.mol (serve)"]


def test_every_module_has_a_layer():
    for m in import_graph(ROOT):
        layer_of(m)
    assert sum(len(names) for names in LAYERS) == len({n for names in LAYERS for n in names})  # no unit twice


def test_no_module_imports_a_higher_layer():
    assert upward(import_graph(ROOT)) == []


def test_the_architecture_page_lists_the_same_layers():
    """The page's "Layers" section numbers the same units in the same order, bottom first:
    "1. `__init__.py`, `splits.py`, `migrations.py`: ..." then "2. `substrate/`: ..."."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "ARCHITECTURE.md").read_text()
    section = text.split("\n## Layers\n", 1)[1].split("\n## ", 1)[0]
    listed = []
    for line in section.splitlines():
        head, dot, rest = line.partition(". ")
        if dot and head.isdigit():
            names = rest.split(":", 1)[0].split(",")
            listed.append(tuple(n.strip().strip("`").removesuffix("/").removesuffix(".py").replace("__init__", "macaronic")
                                for n in names))
    assert listed == LAYERS


def entry_points(root: Path) -> list[str]:
    """Modules outside the entry-point layer that parse a command line (argparse, sys.argv)."""
    out = []
    for p in sorted(root.rglob("*.py")):
        rel = p.relative_to(root.parent).with_suffix("").parts
        module = ".".join(rel[:-1] if rel[-1] == "__init__" else rel)
        if unit(module) in ENTRY:
            continue
        for node in ast.walk(ast.parse(p.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            if "argparse" in names:
                out.append(f"{module}: imports argparse")
            if isinstance(node, ast.Attribute) and node.attr == "argv" and isinstance(node.value, ast.Name) \
                    and node.value.id == "sys":
                out.append(f"{module}: reads sys.argv")
    return out


def test_library_folders_parse_no_command_line():
    assert entry_points(ROOT) == []


def test_every_command_is_dispatched_from_the_entry_layer():
    from macaronic.cli import COMMANDS

    for name, (target, _) in COMMANDS.items():
        assert target.startswith("macaronic.commands."), (name, target)
