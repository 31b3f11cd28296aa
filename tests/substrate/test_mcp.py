"""`macaronic mcp`: a real stdio round trip with the official MCP client, and the dispatcher."""

import json
import subprocess
import sys

import anyio
import pytest

from macaronic.substrate.episode import EpisodeConfig, Episodes
from macaronic.commands.mcp import main
from macaronic.substrate.mcp_server import dispatch, tool_listing
from macaronic.substrate.tools import TOOLS


def test_help_exits_cleanly(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0 and "--confirm-writes" in capsys.readouterr().out


def test_list_tools_flag(capsys):
    assert main(["--list-tools"]) == 0
    names = [t["name"] for t in json.loads(capsys.readouterr().out)]
    assert "start_episode" in names and all(t.name in names for t in TOOLS)


def test_stdio_round_trip_with_the_sdk_client():
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(command=sys.executable, args=["-m", "macaronic.cli", "mcp", "--confirm", "refund_order"])

    async def session():
        async with Client(params, read_timeout_seconds=30) as client:
            listed = (await client.list_tools()).tools
            by_name = {t.name: t for t in listed}
            assert by_name["get_order"].annotations.read_only_hint is True
            assert by_name["delete_event"].annotations.destructive_hint is True
            assert "episode_id" in by_name["get_order"].input_schema["required"]

            started = await client.call_tool("start_episode", {"seed": 4})
            assert not started.is_error
            info = started.structured_content
            eid = info["episode_id"]
            assert info["confirm"] == ["refund_order"]

            orders = await client.call_tool("list_orders", {"episode_id": eid, "status": "delivered"})
            payload = json.loads(orders.content[0].text)
            assert payload == orders.structured_content and payload["orders"]
            fresh = next(o for o in payload["orders"] if o["refundable"])

            pending = await client.call_tool("refund_order", {"episode_id": eid, "order_id": fresh["id"]})
            pc = pending.structured_content["pending_confirmation"]
            same = await client.call_tool("state_hash", {"episode_id": eid})
            assert same.structured_content["state_hash"] == info["state_hash"]

            done = await client.call_tool("confirm_action", {"episode_id": eid, "confirmation_id": pc["id"]})
            assert done.structured_content["refunded"]["status"] == "refunded"

            bad = await client.call_tool("get_order", {"episode_id": eid, "order_id": "nope"})
            assert bad.is_error and bad.structured_content["error"]["type"] == "invalid_arguments"
            gone = await client.call_tool("get_today", {"episode_id": "ep-missing"})
            assert gone.is_error and gone.structured_content["error"]["type"] == "not_found"
            closed = await client.call_tool("close_episode", {"episode_id": eid})
            assert not closed.is_error

    anyio.run(session)


def test_dispatch_errors_are_results():
    store, cfg = Episodes(max_open=1), EpisodeConfig()
    assert dispatch(store, cfg, "no_such_tool", {})["error"]["type"] == "unknown_tool"
    assert dispatch(store, cfg, "get_today", {})["error"]["type"] == "invalid_arguments"
    assert dispatch(store, cfg, "start_episode", {"seed": "x"})["error"]["type"] == "invalid_arguments"
    eid = dispatch(store, cfg, "start_episode", {"seed": 1, "confirm_writes": True})["episode_id"]
    assert dispatch(store, cfg, "start_episode", {"seed": 2})["error"]["type"] == "invalid_arguments"  # store full
    r = dispatch(store, cfg, "add_reminder", {"episode_id": eid, "title": "x"})
    assert "pending_confirmation" in r
    assert dispatch(store, cfg, "undo", {"episode_id": eid})["error"]["type"] == "not_found"
    assert dispatch(store, cfg, "close_episode", {"episode_id": eid}) == {"closed": eid}
    assert dispatch(store, cfg, "close_episode", {"episode_id": eid})["error"]["type"] == "not_found"


def test_listing_schemas_require_episode_id():
    for t in tool_listing():
        if t["name"] != "start_episode":
            assert "episode_id" in t["inputSchema"]["required"], t["name"]


def test_cli_dispatcher_knows_the_command():
    out = subprocess.run([sys.executable, "-m", "macaronic.cli", "mcp", "--help"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "macaronic mcp" in out.stdout
