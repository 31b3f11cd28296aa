"""`macaronic mcp`: the substrate's tools over MCP stdio, built on the official SDK's low-level
`Server`.

State is addressed by episode id, as MCP calls are stateless: `start_episode` builds a seeded
state and returns its id, and every substrate tool takes an extra `episode_id` argument.
Episode controls (`confirm_action`, `reject_action`, `snapshot`, `undo`, `state_hash`,
`close_episode`) are tools too. Results are the substrate's JSON, as text and as structured
content; substrate errors are tool results with `isError` set, never protocol errors.

Knows nothing about models, prompts or grading.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from dataclasses import dataclass

from macaronic import __version__
from macaronic.substrate.episode import Episode, EpisodeConfig, Episodes
from macaronic.substrate.state import StateSpec
from macaronic.substrate.toolbase import ToolError, error_result, obj, text
from macaronic.substrate.tools import TOOLS, TOOLS_BY_NAME, schema_errors, write_tools

EPISODE_ID = text(64, "id returned by start_episode", min_len=1)
READ = {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True, "openWorldHint": False}
WRITE = {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": False, "openWorldHint": False}


@dataclass(frozen=True)
class Control:
    """An episode-control tool: not part of the world, but of how an agent session drives it."""

    name: str
    description: str
    parameters: dict
    annotations: dict
    run: Callable[[Episodes, EpisodeConfig, dict], dict]


def _with_episode(fn: Callable[[Episode, dict], dict]):
    def run(episodes: Episodes, _config: EpisodeConfig, args: dict) -> dict:
        return fn(episodes.get(args["episode_id"]), args)
    return run


def _start(episodes: Episodes, config: EpisodeConfig, args: dict) -> dict:
    if args.get("confirm_writes") is not None:
        config = EpisodeConfig(confirm=config.confirm, confirm_all_writes=bool(args["confirm_writes"]),
                               max_argument_bytes=config.max_argument_bytes)
    spec = StateSpec(seed=args["seed"], today=args.get("today"))
    ep = episodes.create(spec, actor=args.get("actor"), config=config)
    return {"episode_id": ep.id, "today": ep.today.isoformat(), "actor": ep.actor,
            "state_hash": ep.state_hash(),
            "confirm": sorted(n for n in write_tools() if ep.config.needs_confirmation(TOOLS_BY_NAME[n]))}


def _close(episodes: Episodes, _config: EpisodeConfig, args: dict) -> dict:
    if not episodes.close(args["episode_id"]):
        raise KeyError(f"no open episode {args['episode_id'][:80]!r}")
    return {"closed": args["episode_id"]}


ID_ONLY = obj({"episode_id": EPISODE_ID}, ("episode_id",))
CONFIRMATION = obj({"episode_id": EPISODE_ID, "confirmation_id": text(64, min_len=1)},
                   ("episode_id", "confirmation_id"))

CONTROLS: tuple[Control, ...] = (
    Control("start_episode", "Start an episode on a fresh seeded state; returns its episode_id.",
            obj({"seed": {"type": "integer", "minimum": 0, "maximum": 2**31 - 1},
                 "actor": text(40, "user to act for (default alex)", min_len=1),
                 "today": {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}$"},
                 "confirm_writes": {"type": "boolean", "description": "writes wait for confirm_action"}},
                ("seed",)), WRITE, _start),
    Control("close_episode", "Close an episode and free its state.", ID_ONLY,
            {**WRITE, "destructiveHint": True}, _close),
    Control("confirm_action", "Approve a pending write (a pending_confirmation id); it runs now.",
            CONFIRMATION, {**WRITE, "destructiveHint": True},
            _with_episode(lambda ep, a: ep.confirm(a["confirmation_id"]))),
    Control("reject_action", "Drop a pending write; nothing is changed.", CONFIRMATION, WRITE,
            _with_episode(lambda ep, a: ep.reject(a["confirmation_id"]))),
    Control("snapshot", "Remember the episode's state (start of a user turn).", ID_ONLY, WRITE,
            _with_episode(lambda ep, a: ep.snapshot())),
    Control("undo", "Restore the latest snapshot.", ID_ONLY, {**WRITE, "destructiveHint": True},
            _with_episode(lambda ep, a: ep.undo())),
    Control("state_hash", "The canonical sha256 of the episode's state.", ID_ONLY, READ,
            _with_episode(lambda ep, a: {"state_hash": ep.state_hash()})),
)
CONTROLS_BY_NAME = {c.name: c for c in CONTROLS}


def tool_listing() -> list[dict]:
    """Every MCP tool as wire-format dicts: controls, then substrate tools with episode_id."""
    out = [{"name": c.name, "description": c.description, "inputSchema": c.parameters,
            "annotations": c.annotations} for c in CONTROLS]
    for t in TOOLS:
        schema = dict(t.parameters)
        schema["properties"] = {"episode_id": EPISODE_ID, **t.parameters["properties"]}
        schema["required"] = ["episode_id", *t.parameters["required"]]
        out.append({"name": t.name, "description": t.description, "inputSchema": schema,
                    "annotations": t.mcp_annotations()})
    return out


def dispatch(episodes: Episodes, config: EpisodeConfig, name: str, arguments: dict | None) -> dict:
    """Run one MCP tool call against the store; always returns a JSON result."""
    args = dict(arguments or {})
    try:
        if name in CONTROLS_BY_NAME:
            control = CONTROLS_BY_NAME[name]
            errors = schema_errors(control.parameters, args)
            if errors:
                raise ToolError("invalid_arguments", f"{name}: " + "; ".join(errors))
            return control.run(episodes, config, args)
        episode_id = args.pop("episode_id", None)
        if not isinstance(episode_id, str):
            if name not in TOOLS_BY_NAME:
                raise ToolError("unknown_tool", f"unknown tool {str(name)[:80]!r}")
            raise ToolError("invalid_arguments", f"{name}: 'episode_id' is a required string")
        return episodes.get(episode_id).call(name, args)
    except ToolError as e:
        return e.result()
    except KeyError as e:
        return error_result("not_found", str(e.args[0]) if e.args else "not found")
    except (RuntimeError, ValueError) as e:
        return error_result("invalid_arguments", str(e))


def build_server(episodes: Episodes | None = None, config: EpisodeConfig | None = None):
    """The low-level MCP `Server` over an `Episodes` store."""
    import mcp_types as types
    from mcp.server import Server

    episodes = episodes if episodes is not None else Episodes()
    config = config or EpisodeConfig()
    listing = [types.Tool.model_validate(t) for t in tool_listing()]

    async def on_list_tools(ctx, params) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listing)

    async def on_call_tool(ctx, params) -> types.CallToolResult:
        result = dispatch(episodes, config, params.name, params.arguments)
        return types.CallToolResult(
            content=[types.TextContent(text=json.dumps(result, ensure_ascii=False, sort_keys=True))],
            structured_content=result, is_error="error" in result)

    return Server("macaronic-substrate", version=__version__,
                  instructions="Personal-assistant tools (calendar, reminders, contacts, notes, "
                               "orders). Call start_episode first and pass its episode_id to every tool.",
                  on_list_tools=on_list_tools, on_call_tool=on_call_tool)


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
    from mcp.server.stdio import stdio_server

    config = EpisodeConfig(confirm=frozenset(args.confirm), confirm_all_writes=args.confirm_writes)
    server = build_server(Episodes(max_open=args.max_episodes, default_config=config), config)

    async def serve() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(serve)
    return 0
