"""Cancels over Streamable HTTP, shared by the reliability and scale suites: Alice's and Bob's tokens, a module's
emulator, server and ledger (fixtures), a `notifications/cancelled` POST, and real clients (the TypeScript SDK's
`AbortSignal`, pydantic-ai's MCP client) that cancel a call once its run has started."""

from __future__ import annotations

import json
import secrets
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from pydantic_ai_perplexity._ledger import Ledger, RunRecord
from pydantic_ai_perplexity.emulator import Emulator
from pydantic_ai_perplexity.mcp.server._cancels import CANCELLED_BY_CLIENT
from support.mcp_servers import DEADLINE, HttpServer, server_env, ts_sdk_folder, upstream_status
from support.reliability import until
from support.scale import LEGACY, Outcome, call_tool

ALICE = secrets.token_urlsafe(24)
BOB = secrets.token_urlsafe(24)
LONG = 'What does the EU AI Act regulate? [[emulate: duration=3000]]'  # 30 s: far longer than any test waits
SHORT = 'What does the EU AI Act regulate? [[emulate: duration=200]]'  # 2 s


@pytest.fixture(scope='module')
def emu() -> Iterator[Emulator]:
    """`duration=N` runs N x 10 ms."""
    with Emulator(time_scale=0.01) as emulator:
        yield emulator


@pytest.fixture(scope='module')
def server(emu: Emulator, module_state: Path) -> Iterator[HttpServer]:
    env = server_env(emu, module_state, PERPLEXITY_MCP_TOKENS=f'alice:{ALICE},bob:{BOB}', PERPLEXITY_WAIT_SECONDS='40')
    http = HttpServer(env)
    yield http
    http.stop()


@pytest.fixture(scope='module')
def ledger(module_state: Path) -> Iterator[Ledger]:
    with Ledger(module_state / 'ledger.sqlite3') as opened:
        yield opened


async def post_cancel(url: str, token: str, request_id: Any, *, era: str = LEGACY) -> int:
    """A `notifications/cancelled` POSTed on its own, as a client sends it; the HTTP status of the answer."""
    body = {'jsonrpc': '2.0', 'method': 'notifications/cancelled', 'params': {'requestId': request_id}}
    headers = {
        'Content-Type': 'application/json',
        'Accept': 'application/json, text/event-stream',
        'Authorization': f'Bearer {token}',
        'MCP-Protocol-Version': era,
    }
    async with httpx2.AsyncClient(timeout=DEADLINE) as client:
        reply = await client.post(url, content=json.dumps(body), headers=headers)
    return reply.status_code


async def research_cancelled_once_started(url: str, query: str = LONG, *, era: str = LEGACY) -> Outcome:
    """Alice's research call (request id 1), whose client sends `notifications/cancelled` for it on a POST of its
    own as soon as the run has started; the call's outcome."""

    async def on_progress(message: str) -> None:
        if message.startswith('started research run '):
            assert await post_cancel(url, ALICE, 1, era=era) == 202

    with anyio.fail_after(DEADLINE):
        async with httpx2.AsyncClient(timeout=DEADLINE) as client:
            arguments = {'query': query, 'effort': 'fast'}
            return await call_tool(
                client,
                url,
                'perplexity_research',
                arguments,
                token=ALICE,
                era=era,
                progress='p1',
                on_progress=on_progress,
            )


async def ended(emu: Emulator, ledger: Ledger, response_id: str) -> tuple[str, RunRecord]:
    """Wait (in a thread: the client's last POSTs may still be going out) until the run has ended upstream and the
    ledger has its end; both."""

    def wait() -> tuple[str, RunRecord]:
        status = until(lambda: (s := upstream_status(emu, response_id)) in ('completed', 'cancelled') and s, what='end')
        # Cancelled: the reason lands after the run's end (the serving instance's record of it, then the reason).
        reason = CANCELLED_BY_CLIENT if status == 'cancelled' else None

        def landed() -> RunRecord | None:
            row = ledger.get(response_id)
            return row if row is not None and row.status == status and row.error == reason else None

        return status, until(landed, what=f'the ledger row {status} with error {reason!r}')

    return await anyio.to_thread.run_sync(wait)


# -- real clients ------------------------------------------------------------------------------------------------


TS_CANCEL = r"""
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const [url, token, query] = process.argv.slice(2);
const client = new Client({ name: 'ts-cancel-client', version: '1.0.0' });
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
await client.connect(transport);
const controller = new AbortController();
let started = null;
let error = null;
try {
  await client.callTool({ name: 'perplexity_research', arguments: { query, effort: 'fast' } }, undefined, {
    signal: controller.signal,
    timeout: 60000,
    onprogress: (p) => {
      if (!started && (p.message ?? '').startsWith('started research run ')) {
        started = p.message.slice('started research run '.length);
        controller.abort('the user stopped it');
      }
    },
  });
} catch (e) {
  error = String(e?.message ?? e);
}
// notifications/cancelled goes out as its own POST; a tools/list after it shows the client went on working.
const tools = (await client.listTools()).tools.length;
console.log(JSON.stringify({ started, error, tools }));
await client.close();
"""


def ts_sdk() -> Path:
    """The TypeScript SDK's cached install (`support.mcp_servers.ts_sdk_folder`), with the cancel script in it."""
    folder = ts_sdk_folder()
    (folder / 'cancel.mjs').write_text(TS_CANCEL, encoding='utf-8')
    return folder


def ts_cancel(url: str, token: str, query: str = LONG) -> dict[str, Any]:
    """Run the TypeScript client: a research call aborted once it reports its run started."""
    folder = ts_sdk()
    node = shutil.which('node')
    assert node is not None
    done = subprocess.run(
        [node, str(folder / 'cancel.mjs'), url, token, query], cwd=folder, capture_output=True, timeout=DEADLINE
    )
    assert done.returncode == 0, done.stderr.decode(errors='replace')[-3000:]
    return json.loads(done.stdout.decode().strip().splitlines()[-1])


async def pydantic_ai_cancel(url: str, token: str, source: Ledger) -> str:
    """pydantic-ai's MCP client: `direct_call_tool` in a task, cancelled once the run is in the ledger; its id.

    The client speaks the handshake era (`mode='legacy'`): there, cancelling the task POSTs `notifications/cancelled`.
    In the 2026-07-28 era (its default against this server) it cancels by closing the response stream instead, which
    the server cannot tell from a client that went away (a run is never cancelled by a disconnect).
    """
    from fastmcp.client import Client
    from fastmcp.client.transports import StreamableHttpTransport
    from pydantic_ai.mcp import MCPToolset

    query = f'{LONG} ({secrets.token_hex(4)})'
    toolset = MCPToolset(Client(StreamableHttpTransport(url, auth=token), mode='legacy', timeout=DEADLINE))

    def started() -> str | None:
        rows = [r for r in source.list(limit=50) if r.query == query and r.status in ('queued', 'in_progress')]
        return rows[0].response_id if rows else None

    with anyio.fail_after(DEADLINE):
        async with toolset, anyio.create_task_group() as tg:
            tg.start_soon(toolset.direct_call_tool, 'perplexity_research', {'query': query, 'effort': 'fast'})
            response_id = await anyio.to_thread.run_sync(lambda: until(started, what='run started'))
            tg.cancel_scope.cancel()  # the person stops the agent: the task running the call is cancelled
    return response_id
