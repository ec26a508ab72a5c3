"""MCP tasks for `perplexity_research`, with clients we did not write, in both protocol eras.

- 2026-07-28 (the `io.modelcontextprotocol/tasks` extension): the MCP SDK's own `Client`, over stdio and Streamable
  HTTP, with a `ClientExtension` that claims the `task` result shape (the SDK's client has no tasks code of its own).
- 2025-11-25 (SEP-1686): the official TypeScript SDK client (`client.experimental.tasks`), over stdio and HTTP.
- Stateless: a task made through one HTTP instance is polled through another, collected after both restarted, and
  cancelled upstream through a third; another caller sees none of it.
"""

from __future__ import annotations

import json
import re
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any, TypeVar

import anyio
import pytest
from mcp.client import Client
from mcp.client.extension import ClientExtension
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CallToolResult,
)

from pydantic_ai_perplexity._ledger import Ledger
from pydantic_ai_perplexity.emulator import Emulator
from support.mcp_servers import DEADLINE, SERVER, HttpServer, server_env, ts_sdk_folder, upstream_status
from support.mcp_tasks import TaskHandle, Tasks, cancel_task, get_task, http_client

_T = TypeVar('_T')

ALICE, BOB = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
QUESTION = 'What does the EU AI Act regulate?'
#: Long enough to be polled, cancelled and restarted around (the module's emulator runs `duration=N` in N x 5 ms).
SLOW = f'{QUESTION} [[emulate: duration=1200]]'  # 6 s
LONG = f'{QUESTION} [[emulate: duration=12000]]'  # 60 s: far longer than any test waits
#: A research step as `tasks/get` says it: `searching: ... (1 search, 0 results)`, `writing the answer (...)`.
STEP = re.compile(r'^(searching|found|fetching|fetched|writing)\b.*\(\d+ search')


def until(check: Callable[[], _T | None], *, what: str) -> _T:
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        if (value := check()) is not None:
            return value
        time.sleep(0.05)
    raise AssertionError(f'timed out waiting for {what}')


# -- 2026-07-28: the MCP SDK's client -----------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.anyio
@pytest.mark.parametrize('transport', ['stdio', 'http'])
async def test_the_sdk_client_runs_research_as_a_task_and_gets_the_plain_calls_result(
    emu: Emulator, tmp_path: Path, transport: str
) -> None:
    env = server_env(emu, tmp_path, PERPLEXITY_WAIT_SECONDS='20', PERPLEXITY_MCP_TOKENS=f'alice:{ALICE}')
    server = HttpServer(env) if transport == 'http' else None
    tasks = Tasks()

    def connect(*extensions: ClientExtension) -> AbstractAsyncContextManager[Client]:
        if server is not None:
            return http_client(server, ALICE, *extensions)
        params = StdioServerParameters(command=SERVER[0], args=SERVER[1:], env=env)
        return Client(params, extensions=list(extensions))

    try:
        with anyio.fail_after(DEADLINE):
            async with connect(tasks) as client:
                assert client.protocol_version == '2026-07-28'
                as_task = await client.call_tool('perplexity_research', {'query': SLOW, 'effort': 'fast'})
                with pytest.raises(MCPError) as unknown:
                    await get_task(client, 'resp_never-was')
            async with connect() as client:  # no tasks extension declared: today's plain call
                plain = await client.call_tool('perplexity_research', {'query': QUESTION, 'effort': 'fast'})
                with pytest.raises(MCPError) as undeclared:
                    await get_task(client, tasks.handles[0].task_id)
    finally:
        if server is not None:
            server.stop()
    [handle] = tasks.handles
    assert handle.status == 'working' and handle.task_id.startswith('resp_')
    assert handle.ttl_ms and handle.ttl_ms > 0 and handle.poll_interval_ms and handle.poll_interval_ms > 0
    working = [p for p in tasks.polls if p['status'] == 'working']
    assert working and all(p['statusMessage'] for p in working)
    assert any(STEP.search(p['statusMessage']) for p in working)  # the latest step, as the run goes
    assert tasks.polls[-1]['status'] == 'completed' and tasks.polls[-1]['resultType'] == 'complete'
    for result in (as_task, plain):
        assert not result.is_error
        assert result.structured_content is not None and result.structured_content['status'] == 'completed'
        assert result.structured_content['sources'] and 'Sources:' in result.content[0].text  # type: ignore[union-attr]
    assert as_task.structured_content is not None and plain.structured_content is not None
    assert as_task.structured_content['response_id'] == handle.task_id
    assert set(as_task.structured_content) == set(plain.structured_content)
    assert unknown.value.error.code == -32602
    assert undeclared.value.error.code == -32021  # tasks/get without the extension declared


@pytest.fixture
def instances(emu: Emulator, tmp_path: Path) -> Iterator[Callable[[], HttpServer]]:
    """HTTP instances sharing one ledger (one state dir), as behind a load balancer; all stopped at the end."""
    started: list[HttpServer] = []
    env = server_env(emu, tmp_path, PERPLEXITY_WAIT_SECONDS='20', PERPLEXITY_MCP_TOKENS=f'alice:{ALICE},bob:{BOB}')

    def start() -> HttpServer:
        started.append(HttpServer(env))
        return started[-1]

    yield start
    for server in started:
        if server.proc.poll() is None:
            server.stop()


@pytest.mark.slow
@pytest.mark.anyio
async def test_a_task_is_answered_by_any_instance_outlives_restarts_and_is_the_callers_own(
    emu: Emulator, tmp_path: Path, instances: Callable[[], HttpServer]
) -> None:
    first, second, third = instances(), instances(), instances()
    with anyio.fail_after(DEADLINE):
        async with http_client(first, ALICE, Tasks()) as client:
            handle = await client.session.call_tool(
                'perplexity_research', {'query': SLOW, 'effort': 'fast'}, allow_claimed=True
            )
            long = await client.session.call_tool(
                'perplexity_research', {'query': LONG, 'effort': 'fast'}, allow_claimed=True
            )
        assert isinstance(handle, TaskHandle) and isinstance(long, TaskHandle)
        async with http_client(second, ALICE, Tasks()) as client:
            polled = await get_task(client, handle.task_id)
        assert polled['status'] == 'working' and polled['taskId'] == handle.task_id
        async with http_client(second, BOB, Tasks()) as client:  # another caller: no such task, whatever the id
            for call in (get_task, cancel_task):
                with pytest.raises(MCPError) as refused:
                    await call(client, long.task_id)
                assert refused.value.error.code == -32602 and 'not found' in refused.value.error.message
    assert upstream_status(emu, long.task_id) == 'in_progress'  # bob's cancel did nothing

    first.stop()
    second.stop()
    again = instances()
    with anyio.fail_after(DEADLINE):
        async with http_client(again, ALICE, Tasks()) as client:
            while (done := await get_task(client, handle.task_id))['status'] == 'working':
                await anyio.sleep(0.1)
        async with http_client(third, ALICE, Tasks()) as client:
            assert (await cancel_task(client, long.task_id))['resultType'] == 'complete'
    assert done['status'] == 'completed' and done['result']['structuredContent']['status'] == 'completed'
    assert done['result']['structuredContent']['response_id'] == handle.task_id
    until(lambda: upstream_status(emu, long.task_id) == 'cancelled' or None, what='the run cancelled upstream')
    with anyio.fail_after(DEADLINE):
        async with http_client(again, ALICE, Tasks()) as client:
            assert (await get_task(client, long.task_id))['status'] == 'cancelled'
    with Ledger(tmp_path / 'ledger.sqlite3') as ledger:
        rows = {r.response_id: r for r in ledger.list(limit=50)}
    assert rows[handle.task_id].caller == 'alice' and rows[long.task_id].status == 'cancelled'


# -- 2025-11-25: the TypeScript SDK's client ------------------------------------------------------------------------

TASKS_CLIENT = r"""
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';

const [mode, target, token, query, long, peek] = process.argv.slice(2);
const client = new Client({ name: 'ts-tasks-client', version: '1.0.0' });
const headers = { Authorization: `Bearer ${token}` };
const transport = mode === 'stdio'
  ? new StdioClientTransport({ ...JSON.parse(target), stderr: 'ignore' })
  : new StreamableHTTPClientTransport(new URL(target), { requestInit: { headers } });
await client.connect(transport);
const out = { protocol: transport.protocolVersion ?? null, capabilities: client.getServerCapabilities() };
out.tools = (await client.listTools()).tools.map((t) => ({ name: t.name, execution: t.execution ?? null }));
const refused = async (call) => {
  try {
    return { answered: await call() };
  } catch (error) {
    return { code: error.code, message: error.message };
  }
};
if (peek) {  // another caller: what can it see of a task it did not make?
  out.list = await client.experimental.tasks.listTasks();
  out.get = await refused(() => client.experimental.tasks.getTask(peek));
  out.result = await refused(() => client.experimental.tasks.getTaskResult(peek, CallToolResultSchema));
  out.cancel = await refused(() => client.experimental.tasks.cancelTask(peek));
  console.log(JSON.stringify(out));
  await client.close();
  process.exit(0);
}
out.messages = [];
const stream = client.experimental.tasks.callToolStream(
  { name: 'perplexity_research', arguments: { query, effort: 'fast' } },
  CallToolResultSchema,
  { task: { ttl: 600000 } },
);
for await (const message of stream) {
  out.messages.push(message.type === 'error' ? { type: 'error', error: String(message.error) } : message);
}
const taskId = out.messages.find((m) => m.type === 'taskCreated')?.task.taskId;
out.get = await client.experimental.tasks.getTask(taskId);
out.result = await client.experimental.tasks.getTaskResult(taskId, CallToolResultSchema);
out.list = await client.experimental.tasks.listTasks();
try {
  await client.experimental.tasks.getTask('resp_never-was');
} catch (error) {
  out.unknown = { code: error.code, message: error.message };
}
out.plain = await client.callTool({ name: 'perplexity_research', arguments: { query, effort: 'fast' } });
const longCall = { name: 'perplexity_research', arguments: { query: long, effort: 'fast' } };
for await (const message of client.experimental.tasks.callToolStream(longCall, CallToolResultSchema, { task: {} })) {
  if (message.type === 'taskCreated') {
    out.long = message.task.taskId;
    break;
  }
}
out.cancelled = await client.experimental.tasks.cancelTask(out.long);
console.log(JSON.stringify(out));
await client.close();
"""


@pytest.fixture(scope='module')
def tasks_client() -> Path:
    """The task client script, in the folder with the TypeScript SDK installed."""
    sdk = ts_sdk_folder()
    (sdk / 'tasks.mjs').write_text(TASKS_CLIENT, encoding='utf-8')
    return sdk / 'tasks.mjs'


def run_ts(script: Path, *args: str) -> dict[str, Any]:
    node = shutil.which('node')
    assert node is not None
    done = subprocess.run([node, str(script), *args], cwd=script.parent, capture_output=True, timeout=DEADLINE * 2)
    assert done.returncode == 0, done.stderr.decode(errors='replace')[-3000:]
    return json.loads(done.stdout.decode().strip().splitlines()[-1])


@pytest.mark.compat  # the TypeScript SDK, installed with npm (Node.js)
@pytest.mark.parametrize('transport', ['stdio', 'http'])
def test_the_typescript_sdk_client_runs_research_as_a_task(
    tasks_client: Path, emu: Emulator, tmp_path: Path, transport: str
) -> None:
    env = server_env(emu, tmp_path, PERPLEXITY_WAIT_SECONDS='20', PERPLEXITY_MCP_TOKENS=f'alice:{ALICE},bob:{BOB}')
    peeked: dict[str, Any] | None = None
    if transport == 'stdio':
        target = json.dumps({'command': sys.executable, 'args': SERVER[1:], 'env': env})
        out = run_ts(tasks_client, 'stdio', target, '', SLOW, LONG)
    else:
        server = HttpServer(env)
        try:
            out = run_ts(tasks_client, 'http', server.url, ALICE, SLOW, LONG)
            peeked = run_ts(tasks_client, 'http', server.url, BOB, '', '', out['long'])
        finally:
            server.stop()
    assert out['capabilities']['tasks'] == {'list': {}, 'cancel': {}, 'requests': {'tools': {'call': {}}}}
    execution = {t['name']: t['execution'] for t in out['tools']}
    assert execution['perplexity_research'] == {'taskSupport': 'optional'}
    assert all(value is None for name, value in execution.items() if name != 'perplexity_research')
    kinds = [m['type'] for m in out['messages']]
    assert kinds[0] == 'taskCreated' and kinds[-1] == 'result' and 'error' not in kinds, out['messages']
    created = out['messages'][0]['task']
    assert created['status'] == 'working' and created['ttl'] > 0 and created['pollInterval'] > 0
    task_id = created['taskId']
    statuses = [m['task'] for m in out['messages'] if m['type'] == 'taskStatus']
    assert any(s['status'] == 'working' and STEP.search(s.get('statusMessage', '')) for s in statuses)
    assert out['get']['status'] == 'completed'
    for result in (out['messages'][-1]['result'], out['result'], out['plain']):
        assert result.get('isError') is not True
        assert result['structuredContent']['status'] == 'completed' and result['structuredContent']['sources']
        assert 'Sources:' in result['content'][0]['text']
    assert out['result']['structuredContent']['response_id'] == task_id
    assert out['result']['_meta']['io.modelcontextprotocol/related-task'] == {'taskId': task_id}
    assert [t['taskId'] for t in out['list']['tasks']] == [task_id]  # the plain call is not a task
    assert out['unknown']['code'] == -32602
    assert out['cancelled']['taskId'] == out['long'] and out['cancelled']['status'] == 'cancelled'
    assert upstream_status(emu, out['long']) == 'cancelled'  # stopped upstream: no more billing
    if peeked is not None:  # bob sees none of alice's tasks, and cannot touch them
        assert peeked['list']['tasks'] == []
        for answer in (peeked['get'], peeked['result'], peeked['cancel']):
            assert answer.get('code') == -32602 and 'not found' in answer['message'], answer


# -- what a task says when the run cannot start, fails, or there is no ledger (in process) --------------------------


@pytest.mark.anyio
async def test_a_run_that_cannot_start_or_fails_reads_as_the_plain_call_and_no_ledger_means_no_task(
    emu: Emulator, tmp_path: Path
) -> None:
    from pydantic_ai_perplexity._core.researcher import Researcher
    from pydantic_ai_perplexity.mcp.server._tools import build_server

    async def call(researcher: Researcher, query: str, effort: str = 'fast') -> tuple[Tasks, CallToolResult]:
        tasks = Tasks()
        async with Client(build_server(researcher=researcher), extensions=[tasks]) as client:
            result = await client.call_tool('perplexity_research', {'query': query, 'effort': effort})
        return tasks, result

    keys = {'api_key': emu.api_key, 'base_url': emu.base_url}
    with anyio.fail_after(DEADLINE):
        async with Researcher(**keys, ledger=tmp_path / 'l.sqlite3', budget_usd=0.001) as capped:
            refused_tasks, refused = await call(capped, QUESTION, 'high')
        async with Researcher(**keys, ledger=tmp_path / 'l.sqlite3', wait_seconds=20) as r:
            failed_tasks, failed = await call(r, f'{QUESTION} [[emulate: fail]]')
            plain_failed = await r.run(f'{QUESTION} [[emulate: fail]]', effort='fast')
        async with Researcher(**keys, ledger=False, wait_seconds=20) as unrecorded:
            untracked_tasks, untracked = await call(unrecorded, QUESTION)
    assert not refused_tasks.handles and refused.is_error  # the budget's refusal, as a plain call reads it
    assert 'budget' in refused.content[0].text.lower()  # type: ignore[union-attr]
    [handle] = failed_tasks.handles  # a failed run is a task that completed with the plain call's result
    assert failed_tasks.polls[-1]['status'] == 'completed'
    assert failed.structured_content is not None and failed.structured_content['status'] == plain_failed.status
    assert plain_failed.status == 'failed' and failed.structured_content['response_id'] == handle.task_id
    assert not untracked_tasks.handles and not untracked.is_error  # no ledger, no task: the plain call answers


@pytest.mark.slow
@pytest.mark.anyio
async def test_tasks_get_names_the_latest_step_from_the_running_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Live fact: cfdude/mcp-perplexity-pro tests/fixtures/agent_background_in_progress.json, captured 2026-10-09: a
    running retrieve carries the search and fetch items reached so far, so `tasks/get` names the latest step from it
    without replaying the event stream (the replay is stubbed out here: every step below came from a snapshot)."""
    from pydantic_ai_perplexity._core.researcher import Researcher
    from pydantic_ai_perplexity.mcp.server import _tasks
    from pydantic_ai_perplexity.mcp.server._tools import build_server

    replays: list[str] = []

    async def no_replay(r: Researcher, task_id: str) -> None:
        replays.append(task_id)

    monkeypatch.setattr(_tasks, '_latest_step', no_replay)
    tasks = Tasks()
    with Emulator(time_scale=0.005, partial_output=True) as partial:
        with anyio.fail_after(DEADLINE):
            async with Researcher(
                api_key=partial.api_key, base_url=partial.base_url, ledger=tmp_path / 'l.sqlite3'
            ) as r:
                async with Client(build_server(researcher=r), extensions=[tasks]) as client:
                    result = await client.call_tool('perplexity_research', {'query': SLOW, 'effort': 'medium'})
    assert not result.is_error
    working = [p['statusMessage'] for p in tasks.polls if p['status'] == 'working']
    from_snapshots = [m for m in working if STEP.search(m)]
    assert from_snapshots and all(m.startswith(('found ', 'fetched ')) for m in from_snapshots), working
    assert len(replays) == len(working) - len(from_snapshots)  # replayed only while the snapshot showed nothing
