"""MCP tasks: the cost of a `tasks/get` round trip, against the API poll it wraps.

Run with `uv run --frozen python benchmarks/tasks.py [--polls 200]`.

One MCP HTTP server (a subprocess, SQLite ledger) against the emulator. The MCP SDK's client, on a 2026-07-28
session that declares the tasks extension, starts `perplexity_research` as a task on a run that lasts minutes, then
polls it with `tasks/get` (each answer reads the ledger and retrieves the run from the API, whose running snapshot
carries the search and fetch items reached so far, as the live API's does; the latest step is named from those.
With `--empty-snapshots` the snapshot shows none and the run's events are replayed up to the first 50 ms lull
instead: stateless either way). The baselines: a bare `GET /v1/responses/{id}` to the
emulator with httpx2, and the poll of today's convention, `perplexity_research_result` with `wait_seconds: 0`. All
are interleaved so they see the same load. Also reported: a `tasks/get` of a finished task (the result inlined,
rendered as a plain call's).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Literal

# This directory holds a file named like the MCP SDK's package (mcp.py): keep it off the import path.
sys.path[:] = [p for p in sys.path if Path(p or '.').resolve() != Path(__file__).resolve().parent]

import anyio  # noqa: E402
import httpx2  # noqa: E402
from mcp.client import Client  # noqa: E402
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp_types import CallToolResult, GetTaskRequestParams, Request, Result  # noqa: E402
from pydantic import TypeAdapter  # noqa: E402

from pydantic_ai_perplexity.emulator import Emulator  # noqa: E402

TOKEN = 'bench-' + os.urandom(18).hex()
_ANY = TypeAdapter(dict[str, Any])


class GetTask(Request[GetTaskRequestParams, Literal['tasks/get']]):
    method: Literal['tasks/get'] = 'tasks/get'
    params: GetTaskRequestParams
    name_param = 'taskId'


class TaskHandle(Result):
    result_type: Literal['task'] = 'task'
    task_id: str
    status: str


class Tasks(ClientExtension):
    """Declares the tasks extension and claims its handle (returned as is: the benchmark polls it itself)."""

    identifier = 'io.modelcontextprotocol/tasks'

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type='task', model=TaskHandle, resolve=self._resolve)]

    async def _resolve(self, handle: TaskHandle, ctx: ClaimContext) -> CallToolResult:
        raise NotImplementedError


def start_server(emu: Emulator, state: Path) -> tuple[subprocess.Popen[bytes], str]:
    env = {k: v for k, v in os.environ.items() if k in ('HOME', 'PATH', 'USER', 'LOGNAME')}
    env |= {
        'PERPLEXITY_API_KEY': emu.api_key,
        'PERPLEXITY_BASE_URL': emu.base_url,
        'PERPLEXITY_STATE_DIR': str(state),
        'PERPLEXITY_MCP_TOKEN': TOKEN,
    }
    command = [sys.executable, '-m', 'pydantic_ai_perplexity.mcp', '--transport', 'http', '--port', '0']
    proc = subprocess.Popen(
        command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env
    )
    assert proc.stderr is not None
    for line in iter(proc.stderr.readline, b''):
        if b'listening on ' in line:
            return proc, line.decode().split('listening on ', 1)[1].strip()
    raise RuntimeError('the MCP HTTP server did not start')


def median_ms(values: list[float]) -> float:
    return statistics.median(values) * 1000


async def measure(emu: Emulator, url: str, polls: int, partial: bool) -> dict[str, float]:
    headers = {'Authorization': f'Bearer {TOKEN}'}
    async with (
        httpx2.AsyncClient(headers=headers) as mcp_http,
        httpx2.AsyncClient(headers={'Authorization': f'Bearer {emu.api_key}'}) as api,
        Client(streamable_http_client(url, http_client=mcp_http), extensions=[Tasks()]) as client,
    ):
        long = 'What does the EU AI Act regulate? [[emulate: duration=12000]]'  # a minute: outlasts the polls
        quick = 'What does the EU AI Act regulate?'
        handle = await client.session.call_tool(
            'perplexity_research', {'query': long, 'effort': 'fast'}, allow_claimed=True
        )
        done = await client.session.call_tool(
            'perplexity_research', {'query': quick, 'effort': 'fast'}, allow_claimed=True
        )
        assert isinstance(handle, TaskHandle) and isinstance(done, TaskHandle)

        async def get(task_id: str) -> dict[str, Any]:
            return await client.session.send_request(GetTask(params=GetTaskRequestParams(task_id=task_id)), _ANY)

        while (await get(done.task_id))['status'] == 'working':
            await anyio.sleep(0.05)
        if partial:  # measure once the running snapshot shows a step (its first search's results)
            with anyio.fail_after(40):
                while not (await api.get(f'{emu.base_url}/v1/responses/{handle.task_id}')).json()['output']:
                    await anyio.sleep(0.2)
        for _ in range(10):  # warm-up
            await get(handle.task_id)
            await api.get(f'{emu.base_url}/v1/responses/{handle.task_id}')
        task_get: list[float] = []
        bare: list[float] = []
        finished: list[float] = []
        convention: list[float] = []
        collect = {'response_id': handle.task_id, 'wait_seconds': 0}
        for _ in range(polls):
            t = time.perf_counter()
            assert (await get(handle.task_id))['status'] == 'working'
            task_get.append(time.perf_counter() - t)
            t = time.perf_counter()
            (await api.get(f'{emu.base_url}/v1/responses/{handle.task_id}')).raise_for_status()
            bare.append(time.perf_counter() - t)
            t = time.perf_counter()
            assert (await get(done.task_id))['status'] == 'completed'
            finished.append(time.perf_counter() - t)
            t = time.perf_counter()
            assert not (await client.call_tool('perplexity_research_result', collect)).is_error
            convention.append(time.perf_counter() - t)
    return {
        'task_get': median_ms(task_get),
        'bare': median_ms(bare),
        'finished': median_ms(finished),
        'convention': median_ms(convention),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or '').splitlines()[0])
    parser.add_argument('--polls', type=int, default=200)
    parser.add_argument(
        '--empty-snapshots',
        action='store_true',
        help='running snapshots with no output (the replay fallback); by default they carry it, as live',
    )
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory() as state,
        Emulator(time_scale=0.005, partial_output=not args.empty_snapshots) as emu,
    ):
        proc, url = start_server(emu, Path(state))
        try:
            figures = anyio.run(measure, emu, url, args.polls, not args.empty_snapshots)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    ratio = figures['task_get'] / figures['bare']
    print(f'tasks/get of a running task over MCP HTTP: {figures["task_get"]:.1f} ms (median of {args.polls})')
    print(f'bare GET /v1/responses/{{id}} to the emulator: {figures["bare"]:.1f} ms')
    print(f'ratio: {ratio:.2f}x (+{figures["task_get"] - figures["bare"]:.1f} ms per poll)')
    print(f'tasks/get of a finished task (result inlined): {figures["finished"]:.1f} ms')
    convention = figures['task_get'] / figures['convention']
    print(
        f'the same poll the convention way, perplexity_research_result(wait_seconds=0): '
        f'{figures["convention"]:.1f} ms; tasks/get is {convention:.2f}x of it'
    )


if __name__ == '__main__':
    main()
