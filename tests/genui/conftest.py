"""Shared fixtures: the official A2UI v0.8 example cards (read from the shared tree, never
copied) and one headless Chromium for every browser test."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from macaronic.genui.shared import example_files

EXAMPLES = example_files()
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def example_id(path: Path) -> str:
    return f"{path.parent.parent.name}/{path.stem}"


def load(path: Path):
    return json.loads(path.read_text(encoding="utf-8"))


needs_examples = pytest.mark.skipif(not EXAMPLES, reason="shared A2UI v0.8 files not found (set MACARONIC_SHARED)")


@pytest.fixture(scope="session")
def browser():
    if not CHROMIUM.exists():
        pytest.skip("/usr/bin/chromium is not installed")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        yield b
        b.close()
