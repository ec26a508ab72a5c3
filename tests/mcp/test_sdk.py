"""The shim to the MCP SDK's internals (`mcp/server/_sdk.py`) works with the installed SDK, and degrades when they move.

If an SDK upgrade fails here, update `_sdk.py` (and regenerate the handshake snapshot); at runtime the server would
have degraded instead: no handshake front, runs never cancelled by a client's cancel, the SDK's own error codes.
"""

from __future__ import annotations

import importlib.metadata
from typing import Any

import anyio
import pytest
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError

from mcp import Client
from pydantic_ai_perplexity.mcp.server import _sdk
from pydantic_ai_perplexity.mcp.server._tools import build_server

pytestmark = pytest.mark.anyio


def test_every_internal_the_shim_reaches_is_where_it_expects() -> None:
    assert _sdk.problems(build_server()) == []
    assert _sdk.installed_sdk() == {name: importlib.metadata.version(name) for _, name in _sdk.SDK_DISTRIBUTIONS}


async def test_the_request_cancel_event_is_reachable_from_a_tool_call() -> None:
    server = MCPServer('probe')
    seen: list[Any] = []

    @server.tool()
    async def probe(ctx: Context[Any, Any]) -> str:
        seen.append(_sdk.cancel_event(ctx.request_context.session))
        seen.append(_sdk.cancel_requested(ctx.request_context.session))
        return 'ok'

    with anyio.fail_after(30):
        async with Client(server) as client:
            await client.call_tool('probe', {})
    event, requested = seen
    assert isinstance(event, anyio.Event) and requested is False


async def test_unexpected_handler_failures_become_proper_json_rpc_errors() -> None:
    server = build_server()
    assert _sdk.answer_errors_cleanly(server) and _sdk.answer_errors_cleanly(server)  # installed once
    runner = _sdk.lowlevel(server)
    assert runner is not None and sum(type(m).__name__ == '_CleanErrors' for m in runner.middleware) == 1
    with anyio.fail_after(30):
        async with Client(server) as client:
            with pytest.raises(MCPError) as caught:
                await client.get_prompt('no-such-prompt')
    assert caught.value.error.code == -32602 and 'no-such-prompt' in caught.value.error.message


def test_the_shim_degrades_when_the_internals_are_missing() -> None:
    class Elsewhere:
        pass

    moved: Any = Elsewhere()
    assert _sdk.lowlevel(moved) is None
    assert _sdk.cancel_requested(moved) is False
    assert _sdk.answer_errors_cleanly(moved) is False
    assert _sdk.problems(moved) == ['MCPServer._lowlevel_server (with run and create_initialization_options)']
