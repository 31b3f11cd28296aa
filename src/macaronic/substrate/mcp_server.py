"""The substrate's tools over MCP stdio, built on the official SDK's low-level `Server` (the
command, `macaronic mcp`, is commands/mcp.py).

State is addressed by episode id, as MCP calls are stateless: `start_episode` builds a seeded
state and returns its id, and every substrate tool takes an extra `episode_id` argument.
Episode controls (`confirm_action`, `reject_action`, `snapshot`, `undo`, `state_hash`,
`close_episode`) are tools too. Results are the substrate's JSON, as text and as structured
content; substrate errors are tool results with `isError` set, never protocol errors.

Every request line gets an answer: stdin is screened before the SDK sees it (`screen`), and a
line the SDK would drop silently (not JSON, not a JSON-RPC message, params of the wrong type,
nested deeper than `MAX_DEPTH`, an id that is not a string or an integer) gets its JSON-RPC
error (-32700 parse error, -32600 invalid request, -32601 method not found, -32602 invalid params),
with the request's id when one can be found (null when the id itself is invalid). No answer echoes
more than `MAX_ECHO` characters of what the client sent.

Knows nothing about models, prompts or grading.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

from macaronic import __version__
from macaronic.substrate.episode import Episode, EpisodeConfig, Episodes
from macaronic.substrate.state import StateSpec
from macaronic.substrate.toolbase import ToolError, error_result, obj, text
from macaronic.substrate.tools import TOOLS, TOOLS_BY_NAME, depth, schema_errors, write_tools

log = logging.getLogger("macaronic.mcp")
MAX_DEPTH = 64  # of one JSON-RPC message; tool arguments are capped lower (tools.MAX_ARGUMENT_DEPTH)
PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602
MAX_ECHO = 64  # characters of a client's method name (or id) quoted back in an error
MAX_METHOD = 128  # no MCP method name is longer; a longer one is answered here, never echoed whole

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
    except Exception as e:  # a bug must not become a protocol error or a dead session: log it, answer
        log.exception("tool %s failed", str(name)[:80])
        return error_result("internal_error", f"{name}: internal error ({type(e).__name__})")


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


# ---- the transport: every request answered ---------------------------------------------

_ID = re.compile(r'"id"\s*:\s*("(?:[^"\\]|\\.)*"|-?\d+)')


def screen(line: str) -> dict | None:
    """None when the SDK can take `line`, else the JSON-RPC error object to answer it with
    (`{"id": None, ...}` for a notification-like line, which gets no answer)."""
    import mcp_types as types

    if not line.strip():
        return None
    try:
        msg = json.loads(line)
    except RecursionError:
        return _error(_id_in_text(line), INVALID_REQUEST, f"message nested deeper than {MAX_DEPTH} levels")
    except ValueError as e:
        return _error(None, PARSE_ERROR, f"Parse error: {e}")
    if not isinstance(msg, dict):
        return _error(None, INVALID_REQUEST, "a message must be one JSON object (batches are not supported)")
    rid = msg.get("id") if _valid_id(msg.get("id")) else None
    if depth(msg, MAX_DEPTH) > MAX_DEPTH:
        return _error(rid, INVALID_REQUEST, f"message nested deeper than {MAX_DEPTH} levels")
    if "id" in msg and rid is None and "error" not in msg:  # 1.5, true, {...}, 1e400, null: JSON-RPC says null
        return _error(None, INVALID_REQUEST, "Invalid Request: id must be a string or an integer, got "
                      f"{_clip(json.dumps(msg['id'], default=str))}")
    method = msg.get("method")
    if isinstance(method, str) and len(method) > MAX_METHOD:
        return _error(rid, METHOD_NOT_FOUND, f"Method not found: {_clip(method)} ({len(method)} characters)",
                      notification="id" not in msg)
    try:
        types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        return None
    except Exception as e:  # pydantic's ValidationError, or its own recursion limit
        if rid is not None and isinstance(msg.get("method"), str) and msg.get("jsonrpc") == "2.0" \
                and "params" in msg and not isinstance(msg["params"], dict):
            return _error(rid, INVALID_PARAMS, "params must be an object")
        if msg.get("jsonrpc") != "2.0":
            reason = 'jsonrpc must be "2.0"'
        elif not isinstance(msg.get("method"), str) and "result" not in msg and "error" not in msg:
            reason = 'a request needs a "method" string'
        else:
            reason = str(e).splitlines()[0][:200]
        return _error(rid, INVALID_REQUEST, f"Invalid Request: {reason}", notification="id" not in msg
                      and isinstance(msg.get("method"), str))


def _valid_id(rid) -> bool:
    return isinstance(rid, str) or (isinstance(rid, int) and not isinstance(rid, bool))


def _clip(s: str) -> str:
    return s if len(s) <= MAX_ECHO else s[:MAX_ECHO] + "..."


def _id_in_text(line: str) -> str | int | None:
    """The top-level "id" of a message too deep to parse, found by scanning (best effort)."""
    level = 0
    i = 0
    while i < len(line):
        c = line[i]
        if c == '"':
            m = _ID.match(line, i) if level == 1 else None
            if m:
                return json.loads(m.group(1))
            j = i + 1
            while j < len(line) and line[j] != '"':
                j += 2 if line[j] == "\\" else 1
            i = j + 1
            continue
        level += c in "[{"
        level -= c in "]}"
        if level > 1 and i > 1 << 16:
            break  # the id comes first in practice; a megabyte of brackets is not worth scanning
        i += 1
    return None


def _error(rid, code: int, message: str, notification: bool = False) -> dict:
    return {"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}, "notification": notification}


class _Screened:
    """An async line source for the SDK's stdio transport that answers bad lines itself, through
    the transport's own write stream (so answers never interleave with the server's)."""

    def __init__(self, source):
        import anyio

        self.source, self.write, self.ready = source, None, anyio.Event()

    def __aiter__(self):
        return self._lines()

    async def _lines(self):
        import mcp_types as types
        from mcp.shared.message import SessionMessage

        async for line in self.source:
            err = screen(line)
            if err is None:
                yield line
                continue
            if err.pop("notification"):
                log.warning("dropped a malformed notification: %s", err["error"]["message"])
                continue
            await self.ready.wait()
            try:
                await self.write.send(SessionMessage(types.JSONRPCError.model_validate(err)))
            except Exception:  # the session is closing
                return


@asynccontextmanager
async def screened_stdio(stdin=None, stdout=None):
    """`mcp.server.stdio.stdio_server`, with every incoming line screened (see `screen`)."""
    import io

    import anyio
    from mcp.server.stdio import stdio_server

    if stdin is None:
        stdin = anyio.wrap_file(io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace"))
    lines = _Screened(stdin)
    async with stdio_server(stdin=lines, stdout=stdout) as (read, write):
        lines.write = write
        lines.ready.set()
        yield read, write
