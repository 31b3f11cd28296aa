"""The server's built-in tools: one long-lived substrate state (reminders, calendar, contacts,
notes, orders) that the web chat's agent acts on through `POST /v1/tools/execute`.

The state is an SQLite file (`--substrate`, by default beside the store), created on first use
from the substrate's seeded demo world and reopened as it is on later starts, with its "today"
moved to the real date. Every call goes through the substrate's own `Episode` (schema checks,
one SAVEPOINT per call, errors as results), exactly as MCP and the agent tasks run them.
Knows nothing about HTTP, models or the page.
"""

from __future__ import annotations

import datetime as dt
import threading
from pathlib import Path
from typing import Any

from macaronic.substrate.episode import Episode, EpisodeConfig
from macaronic.substrate.state import StateSpec, connect
from macaronic.substrate.tools import TOOLS, openai_tools, write_tools

SEED = 0  # the demo world's contacts, events and orders; the same on every machine
MAX_LOG = 256  # the in-memory action log of a state that lives as long as the server


class ServedSubstrate:
    """A persistent substrate state. `path=":memory:"` for tests and throwaway servers."""

    def __init__(self, path: str | Path = ":memory:", today: dt.date | None = None):
        self.path = str(path)
        self._today = (today or dt.date.today()).isoformat()
        self._episode: Episode | None = None
        self._lock = threading.Lock()

    def tools(self) -> list[dict]:
        """The OpenAI `tools` list a client sends to let the agent act on this state."""
        return openai_tools()

    def writes(self) -> list[str]:
        """The tools whose calls change the state (the rest only read it)."""
        return list(write_tools())

    def names(self) -> list[str]:
        return [t.name for t in TOOLS]

    def execute(self, name: str, arguments: Any) -> dict:
        """Run one call; a refused call (unknown tool, bad arguments, policy) is an `{"error"}` result."""
        return self.episode().call(name, arguments)

    def episode(self) -> Episode:
        with self._lock:  # opened lazily: a server nobody asks to act never creates the file
            if self._episode is None:
                self._episode = self._open()
            return self._episode

    def _open(self) -> Episode:
        spec = StateSpec(seed=SEED, today=self._today)
        config = EpisodeConfig(max_log=MAX_LOG)
        fresh = self.path == ":memory:" or not Path(self.path).exists()
        if fresh:
            if self.path != ":memory:":
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            return Episode(spec, config=config, path=self.path, episode_id="served")
        conn = connect(self.path)
        conn.execute("UPDATE meta SET value = ? WHERE key = 'today'", (self._today,))
        return Episode(spec, config=config, conn=conn, episode_id="served")

    def close(self) -> None:
        with self._lock:
            if self._episode is not None:
                self._episode.close()
                self._episode = None
