"""Every fault the emulator can inject, through the MCP server over stdio and over Streamable HTTP.

All faults go through one server process at once (as one client's concurrent calls would). Each call ends in a
result with the right status or an `isError` result with clear text; every run the API started is named in the
answer or in the ledger; every research step is notified exactly once (the stream resumed after drops); and no
retry starts a second billed run.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from pydantic_ai_perplexity._ledger import Ledger
from pydantic_ai_perplexity.emulator import Emulator
from support.mcp_servers import DEADLINE, MCP_HEADERS, HttpServer, RawServer, server_env, text_of
from support.reliability import (
    FAULTS,
    CreateLog,
    Fault,
    assert_attempt_kept,
    check_outcome,
    describe,
    mcp_progress_messages,
    query_for,
    record,
    rpc_messages,
    stream_gets,
    tool_call,
    upstream_runs,
)


@pytest.fixture(scope='module')
def http_server(logged: tuple[Emulator, CreateLog], module_state: Path) -> Iterator[HttpServer]:
    server = HttpServer(server_env(logged[0], module_state, PERPLEXITY_WAIT_SECONDS='30'))
    yield server
    server.stop()


@pytest.mark.slow
def test_every_fault_through_mcp_stdio(logged: tuple[Emulator, CreateLog], module_state: Path) -> None:
    emu, _ = logged
    server = RawServer(server_env(emu, module_state, PERPLEXITY_WAIT_SECONDS='30'))
    try:
        server.initialize()
        for i, fault in enumerate(FAULTS):
            args = {'query': query_for(f'stdio-{i}', fault), 'effort': 'fast'}
            server.send(tool_call('perplexity_research', args, f'fault-{i}', progressToken=f'p-{i}'))
        replies = [server.wait_for(lambda m, i=i: m.get('id') == f'fault-{i}')['result'] for i in range(len(FAULTS))]
        notes = [m['params'] for m in server._seen if m.get('method') == 'notifications/progress']
    finally:
        server.kill()
    for i, (fault, result) in enumerate(zip(FAULTS, replies, strict=True)):
        progress = [n['message'] for n in notes if n['progressToken'] == f'p-{i}']
        check_mcp_answer(logged, module_state, 'mcp-stdio', f'stdio-{i}', fault, result, progress)


@pytest.mark.slow
def test_every_fault_through_mcp_http(
    logged: tuple[Emulator, CreateLog], module_state: Path, http_server: HttpServer
) -> None:
    async def call(client: httpx2.AsyncClient, i: int, fault: Fault, into: dict[int, list[dict[str, Any]]]) -> None:
        args = {'query': query_for(f'http-{i}', fault), 'effort': 'fast'}
        body = json.dumps(tool_call('perplexity_research', args, f'fault-{i}', progressToken=f'p-{i}'))
        reply = await client.post(http_server.url, content=body, headers=MCP_HEADERS)
        assert reply.status_code == 200, reply.text
        into[i] = rpc_messages(reply)

    async def main() -> dict[int, list[dict[str, Any]]]:
        answers: dict[int, list[dict[str, Any]]] = {}
        with anyio.fail_after(DEADLINE):
            async with httpx2.AsyncClient(timeout=DEADLINE) as client, anyio.create_task_group() as tg:
                for i, fault in enumerate(FAULTS):
                    tg.start_soon(call, client, i, fault, answers)
        return answers

    answers = anyio.run(main)
    for i, fault in enumerate(FAULTS):
        messages = answers[i]
        [reply] = [m for m in messages if 'method' not in m]
        assert reply['id'] == f'fault-{i}'
        progress = [m['params']['message'] for m in messages if m.get('method') == 'notifications/progress']
        check_mcp_answer(logged, module_state, 'mcp-http', f'http-{i}', fault, reply['result'], progress)


def check_mcp_answer(
    logged: tuple[Emulator, CreateLog],
    state: Path,
    surface: str,
    tag: str,
    fault: Fault,
    result: dict[str, Any],
    progress: list[str],
) -> None:
    emu, log = logged
    text = text_of(result)
    check_outcome(fault, 'failed' if result.get('isError') else 'success', text)
    creates, billed = log.matching(tag), log.billed(tag)
    assert len(creates) == fault.attempts, (fault, creates)
    assert len(billed) == fault.billed, (fault, creates)  # never a second billed run
    steps = 0
    for create in billed:
        response_id = create.response_id
        assert response_id is not None and response_id in upstream_runs(emu)
        structured = result['structuredContent']
        assert structured['response_id'] == response_id and structured['status'] == fault.outcome
        assert progress[0] == f'started research run {response_id}'  # the id reached the client at once
        with Ledger(state / 'ledger.sqlite3') as ledger:
            row = ledger.get(response_id)
        assert row is not None and row.origin == 'mcp'  # and it is in the ledger
        # Every research step notified exactly once, in order, even where the stream was cut and resumed.
        assert progress[1:] == mcp_progress_messages(emu, response_id), fault
        steps = len(progress) - 1
        if fault.drops:
            assert stream_gets(emu, response_id) >= 2
    if not billed:
        assert 'structuredContent' not in result or result['structuredContent'] is None
    if fault.outcome == 'error':
        with Ledger(state / 'ledger.sqlite3') as ledger:
            assert assert_attempt_kept(ledger.list(limit=500), tag).origin == 'mcp'
    record(
        'faults', surface, fault.name,
        outcome=describe(fault, text), attempts=len(creates), billed=len(billed), events_once=steps, lost=0,
    )  # fmt: skip
