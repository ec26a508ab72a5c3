"""The handshake snapshot the stdio front answers from while the MCP SDK loads (`_handshake.json`).

Regenerate it after changing a tool, the instructions, the version or the MCP SDK:
`uv run --frozen python -m pydantic_ai_perplexity.mcp.server._snapshot`. It records the SDK versions it was made with
(`"sdk"`); the stdio server uses it only when the installed versions are the same, and otherwise lets the SDK
answer the handshake itself. `tests/mcp/test_stdio.py` checks the shipped file against `handshake_snapshot()`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio

from ._sdk import installed_sdk, lowlevel

__all__ = ('SNAPSHOT_FILE', 'handshake_snapshot', 'write_handshake_snapshot')

SNAPSHOT_FILE = Path(__file__).with_name('_handshake.json')


async def handshake_snapshot() -> dict[str, Any]:
    """What this server answers to `initialize` and the first `tools/list`, per handshake protocol version.

    The stdio entry point answers those two requests from this snapshot (shipped as `_handshake.json`) while
    the MCP SDK is still importing, so a client gets the tool list in tens of milliseconds; the SDK serves
    everything after. `tests/mcp` checks the shipped file against this function.
    """
    from mcp.shared.message import SessionMessage
    from mcp_types import JSONRPCNotification, JSONRPCRequest, JSONRPCResponse
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION

    from ._tools import build_server

    server = build_server()
    runner = lowlevel(server)
    if runner is None:
        raise RuntimeError('This MCP SDK keeps the server runner elsewhere: see mcp/server/_sdk.py.')
    versions: dict[str, Any] = {}
    for version in HANDSHAKE_PROTOCOL_VERSIONS:
        to_server, server_in = anyio.create_memory_object_stream[SessionMessage | Exception](8)
        server_out, from_server = anyio.create_memory_object_stream[SessionMessage](8)
        answers: dict[str, Any] = {}
        async with anyio.create_task_group() as tg:
            tg.start_soon(runner.run, server_in, server_out, runner.create_initialization_options())
            client = {'name': 'snapshot', 'version': '0'}
            init_params = {'protocolVersion': version, 'capabilities': {}, 'clientInfo': client}
            requests = [
                JSONRPCRequest(jsonrpc='2.0', id=1, method='initialize', params=init_params),
                JSONRPCNotification(jsonrpc='2.0', method='notifications/initialized'),
                JSONRPCRequest(jsonrpc='2.0', id=2, method='tools/list'),
            ]
            for message in requests:
                await to_server.send(SessionMessage(message))
                if isinstance(message, JSONRPCRequest):
                    reply = (await from_server.receive()).message
                    assert isinstance(reply, JSONRPCResponse), reply
                    answers[message.method] = json.loads(reply.model_dump_json(by_alias=True, exclude_unset=True))[
                        'result'
                    ]
            await to_server.aclose()
        await from_server.aclose()
        versions[version] = answers
    return {'sdk': installed_sdk(), 'latest': LATEST_HANDSHAKE_VERSION, 'versions': versions}


def write_handshake_snapshot(path: Path | None = None) -> Path:
    """Regenerate `_handshake.json` after changing a tool, the instructions, the version or the MCP SDK."""
    target = path or SNAPSHOT_FILE
    snapshot = anyio.run(handshake_snapshot)
    target.write_text(json.dumps(snapshot, indent=1, ensure_ascii=False) + '\n', encoding='utf-8')
    return target


if __name__ == '__main__':
    print(f'Wrote {write_handshake_snapshot()}')
