"""The stateful action substrate: a personal-assistant world (calendar, reminders, contacts,
notes, orders) in SQLite that the agent specialist acts on through tools, offline and
deterministically.

Modules, one idea each:
- `state`: schema, seeded initial states (`make_state`, `StateSpec`), canonical `state_hash`;
- `toolbase`, `tools_calendar`, `tools_personal`, `tools_commerce`: tools and their handlers;
- `tools`: the tool list, argument parsing, size cap and schema validation;
- `episode`: an actor on a state: savepoints, confirmation, snapshots/undo, action log, `Episodes`;
- `replay`: rebuild a state from a log, run gold actions;
- `toolcalls`: the text format of tool calls, the parser, the tool prompt;
- `tasks`: agent-suite task families, splits, `grade`, `pass_hat_k`;
- `mcp_server`: the tools over MCP stdio (`macaronic mcp`).

This package knows nothing about models, adapters or routing.
"""

from macaronic.substrate.episode import Episode, EpisodeConfig, Episodes, LogEntry
from macaronic.substrate.replay import ReplayMismatch, expected_hash, replay, run_actions
from macaronic.substrate.state import StateSpec, make_state, state_hash
from macaronic.substrate.tasks import AgentTask, FAMILIES, generate_tasks, grade, make_task, pass_hat_k
from macaronic.substrate.toolbase import Tool, ToolError
from macaronic.substrate.toolcalls import (
    ParseResult, format_tool_call, format_tool_prompt, format_tool_result, parse_tool_calls,
)
from macaronic.substrate.tools import TOOLS, TOOLS_BY_NAME, openai_tools, validate_call

__all__ = [
    "AgentTask", "Episode", "EpisodeConfig", "Episodes", "FAMILIES", "LogEntry", "ParseResult",
    "ReplayMismatch", "StateSpec", "TOOLS", "TOOLS_BY_NAME", "Tool", "ToolError", "expected_hash",
    "format_tool_call", "format_tool_prompt", "format_tool_result", "generate_tasks", "grade",
    "make_state", "make_task", "openai_tools", "parse_tool_calls", "pass_hat_k", "replay",
    "run_actions", "state_hash", "validate_call",
]
