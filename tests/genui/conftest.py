"""Genui fixtures: one headless Chromium shared by every browser test (never downloaded:
the system /usr/bin/chromium, no network)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # for `a2ui_cases`, whatever the import mode

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")  # module: Playwright's sync API holds an event loop open while it lives
def browser():
    if not CHROMIUM.exists():
        pytest.fail("/usr/bin/chromium is not installed: run scripts/setup --test (apt-get install chromium)")
    from playwright import sync_api

    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        yield b
        b.close()
