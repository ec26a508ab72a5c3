"""The server over Streamable HTTP: a pydantic-ai agent through it, and the refusals that keep it safe."""

from __future__ import annotations

import json
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp_support import DEADLINE, SERVER, eventually, mcp_research_model, server_env, upstream_status
from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.messages import ModelRequest, ToolReturnPart

from pydantic_ai_perplexity.emulator import Emulator
from pydantic_ai_perplexity.ledger import Ledger

TOKEN = secrets.token_urlsafe(24)
INITIALIZE = {
    'jsonrpc': '2.0',
    'id': 1,
    'method': 'initialize',
    'params': {
        'protocolVersion': '2025-06-18',
        'capabilities': {},
        'clientInfo': {'name': 'http-test', 'version': '1'},
    },
}
MCP_HEADERS = {'Content-Type': 'application/json', 'Accept': 'application/json, text/event-stream'}


class HttpServer:
    def __init__(self, env: dict[str, str], *args: str) -> None:
        self.proc = subprocess.Popen(
            [*SERVER, '--transport', 'http', '--port', '0', *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=env,
        )
        assert self.proc.stderr is not None
        self.url = ''
        for line in iter(self.proc.stderr.readline, b''):
            if b'listening on ' in line:
                self.url = line.decode().split('listening on ', 1)[1].strip()
                break
        assert self.url, 'the HTTP server did not start'

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=DEADLINE)
        assert self.proc.stderr is not None
        self.proc.stderr.close()


@pytest.fixture(scope='module')
def http_server(emu: Emulator, state_dir: Path) -> Iterator[HttpServer]:
    server = HttpServer(server_env(emu, state_dir, PERPLEXITY_WAIT_SECONDS='1', PERPLEXITY_MCP_TOKEN=TOKEN))
    yield server
    server.stop()


def post(server: HttpServer, body: bytes | dict[str, Any], **headers: str) -> httpx2.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx2.post(server.url, content=content, headers={**MCP_HEADERS, **headers}, timeout=DEADLINE)


def returns(messages: list[Any]) -> list[ToolReturnPart]:
    return [p for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ToolReturnPart)]


def test_the_bearer_token_is_required(http_server: HttpServer) -> None:
    missing = post(http_server, INITIALIZE)
    assert missing.status_code == 401 and missing.headers['www-authenticate'] == 'Bearer'
    assert post(http_server, INITIALIZE, Authorization='Bearer not-the-token').status_code == 401
    assert post(http_server, INITIALIZE, Authorization=f'Basic {TOKEN}').status_code == 401
    ok = post(http_server, INITIALIZE, Authorization=f'Bearer {TOKEN}')
    assert ok.status_code == 200 and 'perplexity' in ok.text


def test_a_foreign_origin_is_refused(http_server: HttpServer) -> None:
    reply = post(http_server, INITIALIZE, Authorization=f'Bearer {TOKEN}', Origin='https://evil.example')
    assert reply.status_code == 403


def test_a_foreign_host_is_refused(http_server: HttpServer) -> None:
    reply = post(http_server, INITIALIZE, Authorization=f'Bearer {TOKEN}', Host='evil.example')
    assert reply.status_code == 421


def test_an_oversized_body_is_refused(http_server: HttpServer) -> None:
    big = dict(INITIALIZE, params={**INITIALIZE['params'], 'padding': 'x' * (2 * 1024 * 1024)})
    assert post(http_server, big, Authorization=f'Bearer {TOKEN}').status_code == 413


@pytest.mark.anyio
async def test_a_pydantic_ai_agent_researches_over_http_and_collects_a_handed_off_run(
    http_server: HttpServer,
) -> None:
    toolset = MCPToolset(http_server.url, auth=TOKEN, tool_error_behavior='failed', read_timeout=DEADLINE)
    agent = Agent(mcp_research_model(), toolsets=[toolset])
    with anyio.fail_after(DEADLINE):
        async with agent:
            quick = await agent.run('What does the EU AI Act regulate? [[emulate: duration=1]]')
            slow = await agent.run('What does the EU AI Act regulate? [[emulate: duration=600]]')
    first = next(r for r in returns(quick.all_messages()) if r.tool_name == 'perplexity_research')
    assert first.content['status'] == 'completed' and first.content['sources']  # type: ignore[index]
    handed_off = next(r for r in returns(slow.all_messages()) if r.tool_name == 'perplexity_research')
    assert 'next' in handed_off.content  # the 1 s budget ran out: a hand-off, not a timeout
    collected = [r for r in returns(slow.all_messages()) if r.tool_name == 'perplexity_research_result']
    assert collected and collected[-1].content['status'] == 'completed'  # type: ignore[index]


def test_a_non_loopback_bind_without_a_token_is_refused(tmp_path: Path) -> None:
    done = subprocess.run(
        [*SERVER, '--transport', 'http', '--host', '0.0.0.0', '--port', '0'],
        env=server_env(None, tmp_path),
        capture_output=True,
        timeout=DEADLINE,
    )
    assert done.returncode == 2
    assert b'needs a bearer token' in done.stderr and b'PERPLEXITY_MCP_TOKEN' in done.stderr
    assert done.stdout == b''


def test_a_non_loopback_bind_with_a_token_serves(emu: Emulator, tmp_path: Path) -> None:
    server = HttpServer(server_env(emu, tmp_path, PERPLEXITY_MCP_TOKEN=TOKEN), '--host', '0.0.0.0')
    try:
        url = server.url.replace('0.0.0.0', '127.0.0.1')
        headers = {**MCP_HEADERS, 'Authorization': f'Bearer {TOKEN}'}
        reply = httpx2.post(url, content=json.dumps(INITIALIZE), headers=headers, timeout=DEADLINE)
        assert reply.status_code == 200
    finally:
        server.stop()


def test_a_client_that_disconnects_mid_call_leaves_the_run_going_and_in_the_ledger(
    http_server: HttpServer, emu: Emulator, state_dir: Path
) -> None:
    call = {
        'jsonrpc': '2.0',
        'id': 9,
        'method': 'tools/call',
        'params': {
            'name': 'perplexity_research',
            'arguments': {'query': 'Long question [[emulate: duration=300]]'},
            '_meta': {'progressToken': 'disconnect'},
        },
    }
    headers = {**MCP_HEADERS, 'Authorization': f'Bearer {TOKEN}'}
    with httpx2.stream('POST', http_server.url, content=json.dumps(call), headers=headers, timeout=DEADLINE) as reply:
        assert reply.status_code == 200
        for line in reply.iter_lines():
            if line.startswith('data:') and 'started research run' in line:
                response_id = json.loads(line[5:])['params']['message'].removeprefix('started research run ')
                break
    # The connection is gone; the run goes on upstream and stays in the ledger.
    assert eventually(lambda: upstream_status(emu, response_id) == 'completed')
    with Ledger(state_dir / 'ledger.sqlite3') as ledger:
        record = ledger.get(response_id)
    assert record is not None and record.origin == 'mcp' and record.status != 'cancelled'
