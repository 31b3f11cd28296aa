"""Locate the shared A2UI v0.8 reference files (official schemas and example cards).

Knows where the project keeps its read-only shared tree (`../shared` beside the repository, or
`$MACARONIC_SHARED`) and how the A2UI folder is laid out. Does not ship or copy those files: the
package works without them, and callers treat a missing tree as "layer not available".
"""

from __future__ import annotations

import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

ENV_VAR = "MACARONIC_SHARED"
STANDARD_CATALOG_ID = "https://a2ui.org/specification/v0_8/standard_catalog_definition.json"


def repo_root() -> Path:
    # src/macaronic/genui/shared.py -> repository root is three folders above `macaronic`.
    return Path(__file__).resolve().parents[3]


def shared_dir(root: str | os.PathLike | None = None) -> Path | None:
    """The shared tree: `$MACARONIC_SHARED` if set, else `<repo_root>/../shared`, else None."""
    env = os.environ.get(ENV_VAR)
    candidates = [Path(env)] if env else []
    candidates.append(Path(root if root is not None else repo_root()).parent / "shared")
    for path in candidates:
        if path.is_dir():
            return path
    return None


def a2ui_dir(root: str | os.PathLike | None = None) -> Path | None:
    base = shared_dir(root)
    path = base / "a2ui" / "v0_8" if base else None
    return path if path is not None and path.is_dir() else None


def example_files(root: str | os.PathLike | None = None) -> list[Path]:
    """Every official example card (`catalogs/*/examples/*.json`), sorted; [] when absent."""
    base = a2ui_dir(root)
    return sorted(base.glob("catalogs/*/examples/*.json")) if base else []


@lru_cache(maxsize=16)
def load_schema(name: str) -> dict[str, Any] | None:
    """An official schema file by name (e.g. `server_to_client_with_standard_catalog.json`)."""
    base = a2ui_dir()
    path = base / name if base else None
    if path is None or not path.is_file():
        return None
    return json.loads(path.read_text(encoding="utf-8"))

