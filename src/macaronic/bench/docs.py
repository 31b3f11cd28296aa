"""Write one benchmark's table into a markdown file, between its own start/end markers.

Knows markdown files and marker comments; nothing about what was measured.
"""

from __future__ import annotations

import re
from pathlib import Path

NEW_FILE = "# Benchmarks\n\nEvery figure here comes from a command quoted with it.\n\n"


def write_section(path: Path, start: str, end: str, title: str, body: str) -> None:
    """Replace the text between `start` and `end` in `path` (appended when absent) with a
    `## title` section holding `body`."""
    block = f"{start}\n## {title}\n\n{body}\n{end}"
    text = path.read_text() if path.exists() else NEW_FILE
    if start in text and end in text:
        text = re.sub(re.escape(start) + ".*?" + re.escape(end), lambda _: block, text, flags=re.S)
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    path.write_text(text)
