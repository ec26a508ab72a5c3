"""The MCP server under hostile callers, each attack through the way in where it was found (issue 22).

- Another caller's run through every way to a run (tools, resources, tasks) is "not found", as an unknown id.
- A flood of bogus `notifications/cancelled` from one caller never drops another caller's real cancel.
"""

from __future__ import annotations

import json
import secrets
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp_support import DEADLINE, RawServer, server_env, text_of, upstream_status
from reliability_support import MCP_HEADERS, HttpServer, final_reply, record, rpc_messages, until
from scale_support import LEGACY

from pydantic_ai_perplexity.emulator import Emulator
from pydantic_ai_perplexity.ledger import Ledger

ALICE = secrets.token_urlsafe(24)
BOB = secrets.token_urlsafe(24)
QUESTION = 'Which heat pumps suit an old stone house? (asked by alice)'
LONG = 'What does the EU AI Act regulate? [[emulate: duration=3000]]'  # 30 s: far longer than any test waits


@pytest.fixture(scope='module')
def emu() -> Iterator[Emulator]:
    """`duration=N` runs N x 10 ms."""
    with Emulator(time_scale=0.01) as emulator:
        yield emulator


@pytest.fixture(scope='module')
def server(emu: Emulator, module_state: Path) -> Iterator[HttpServer]:
    env = server_env(emu, module_state, PERPLEXITY_MCP_TOKENS=f'alice:{ALICE},bob:{BOB}', PERPLEXITY_WAIT_SECONDS='20')
    http = HttpServer(env)
    yield http
    http.stop()


def rpc(server: HttpServer, token: str, method: str, params: dict[str, Any], request_id: Any = 1) -> dict[str, Any]:
    """One JSON-RPC request as a stateless POST (2025-11-25 era); its answer (a result or an error)."""
    body = {'jsonrpc': '2.0', 'id': request_id, 'method': method, 'params': params}
    headers = {**MCP_HEADERS, 'Authorization': f'Bearer {token}', 'MCP-Protocol-Version': LEGACY}
    reply = httpx2.post(server.url, content=json.dumps(body), headers=headers, timeout=DEADLINE)
    assert reply.status_code == 200, reply.text
    answer = final_reply(rpc_messages(reply))
    assert answer['id'] == request_id, answer
    return answer


def call(server: HttpServer, token: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return rpc(server, token, 'tools/call', {'name': name, 'arguments': arguments})['result']


def test_another_callers_run_is_not_found_through_every_way_to_a_run(
    server: HttpServer, emu: Emulator, module_state: Path
) -> None:
    """Bob holds Alice's run ids (guessed, leaked, or read off a shared list): no way to a run lets him use them."""
    done = call(server, ALICE, 'perplexity_research', {'query': QUESTION, 'effort': 'fast'})
    finished = done['structuredContent']['response_id']
    assert done['structuredContent']['status'] == 'completed'
    running = call(server, ALICE, 'perplexity_research', {'query': LONG, 'effort': 'fast', 'wait_seconds': 0})
    in_flight = running['structuredContent']['response_id']
    task = rpc(server, ALICE, 'tools/call', {'name': 'perplexity_research', 'arguments': {'query': LONG}, 'task': {}})[
        'result'
    ]['task']['taskId']
    never = f'resp_{uuid.uuid4()}'  # an id that names no run at all: what Bob must see for each of Alice's

    def unknown_text(name: str, response_id: str) -> str:
        result = call(server, BOB, name, {'response_id': response_id})
        assert result['isError'] is True, result
        return text_of(result)

    for name in ('perplexity_research_result', 'perplexity_research_cancel'):
        expected = unknown_text(name, never)
        assert 'No research run has that response_id' in expected
        for theirs in (finished, in_flight, task):
            assert unknown_text(name, theirs) == expected, (name, theirs)

    def read_error(response_id: str) -> tuple[int, str]:
        uri = f'perplexity://runs/{response_id}'
        error = rpc(server, BOB, 'resources/read', {'uri': uri})['error']
        assert error.get('data', {}).get('uri', uri) == uri
        return error['code'], error['message']

    expected_error = read_error(never)
    assert expected_error[0] == -32602 and 'No research run has that response_id' in expected_error[1]
    for theirs in (finished, in_flight, task):
        assert read_error(theirs) == expected_error
    listed = json.dumps(rpc(server, BOB, 'resources/list', {})['result'])
    for method in ('tasks/get', 'tasks/result', 'tasks/cancel'):
        error = rpc(server, BOB, method, {'taskId': task})['error']
        assert error == rpc(server, BOB, method, {'taskId': never})['error'], method
        assert 'not found' in error['message'].lower()
    bobs_tasks = json.dumps(rpc(server, BOB, 'tasks/list', {})['result'])
    bobs_list = text_of(call(server, BOB, 'perplexity_research_list', {'limit': 50}))
    for theirs in (finished, in_flight, task):
        assert theirs not in listed and theirs not in bobs_tasks and theirs not in bobs_list
    assert 'stone house' not in listed + bobs_tasks + bobs_list

    # Nothing Bob did touched her runs; every way still works for Alice herself.
    assert upstream_status(emu, in_flight) in ('queued', 'in_progress')
    assert upstream_status(emu, task) in ('queued', 'in_progress')
    mine = call(server, ALICE, 'perplexity_research_result', {'response_id': finished})
    assert mine.get('isError') is not True and mine['structuredContent']['status'] == 'completed'
    resource = rpc(server, ALICE, 'resources/read', {'uri': f'perplexity://runs/{finished}'})['result']
    assert 'stone house' in resource['contents'][0]['text']
    assert rpc(server, ALICE, 'tasks/get', {'taskId': task})['result']['taskId'] == task
    assert task in json.dumps(rpc(server, ALICE, 'tasks/list', {})['result'])
    for run in (in_flight, task):
        cancelled = call(server, ALICE, 'perplexity_research_cancel', {'response_id': run})
        assert cancelled.get('isError') is not True, cancelled
        assert until(lambda run=run: upstream_status(emu, run) == 'cancelled', what=f'{run} cancelled')
    record('callers', 'mcp-http', "another caller's run ids through result, cancel, resources and tasks/*",
           runs=3, ways=8, outcome='"not found", as an unknown id; her runs untouched', lost=0)  # fmt: skip


def test_a_server_without_callers_still_reaches_every_run(
    server: HttpServer, emu: Emulator, module_state: Path
) -> None:
    """Single-user servers are unchanged: stdio (no caller) collects and reads a run a named caller started."""
    done = call(server, ALICE, 'perplexity_research', {'query': QUESTION, 'effort': 'fast'})
    theirs = done['structuredContent']['response_id']
    process = RawServer(server_env(emu, module_state))
    try:
        process.initialize()
        collected = process.call('perplexity_research_result', {'response_id': theirs})
        assert collected.get('isError') is not True and collected['structuredContent']['status'] == 'completed'
        read = process.request('resources/read', {'uri': f'perplexity://runs/{theirs}'})['result']
        assert 'stone house' in read['contents'][0]['text']
        assert process.close() == 0
    finally:
        process.kill()
    with Ledger(module_state / 'ledger.sqlite3') as ledger:
        row = ledger.get(theirs)
    assert row is not None and row.caller == 'alice'
