"""`macaronic mcp`: serve the action substrate's tools over MCP stdio (substrate/mcp_server.py)."""

from __future__ import annotations

import argparse
import json

from macaronic.substrate.episode import EpisodeConfig, Episodes
from macaronic.substrate.mcp_server import build_server, screened_stdio, tool_listing
from macaronic.substrate.tools import write_tools


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="macaronic mcp",
                                description="Serve the action substrate's tools over MCP stdio.")
    p.add_argument("--confirm-writes", action="store_true",
                   help="every write tool returns pending_confirmation until confirm_action")
    p.add_argument("--confirm", action="append", default=[], metavar="TOOL", choices=write_tools(),
                   help="a write tool that needs confirmation (repeatable)")
    p.add_argument("--max-episodes", type=int, default=256, help="open episodes at most (default 256)")
    p.add_argument("--list-tools", action="store_true", help="print the tool listing as JSON and exit")
    return p.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if args.list_tools:
        print(json.dumps(tool_listing(), indent=2))
        return 0
    import anyio

    config = EpisodeConfig(confirm=frozenset(args.confirm), confirm_all_writes=args.confirm_writes)
    server = build_server(Episodes(max_open=args.max_episodes, default_config=config), config)

    async def serve() -> None:
        async with screened_stdio() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(serve)
    return 0
