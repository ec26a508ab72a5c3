"""The MCP server under hostile callers, each attack through the way in where it was found (issue 22).

- Another caller's run through every way to a run (tools, resources, tasks) is "not found", as an unknown id.
- A flood of bogus `notifications/cancelled` from one caller never drops another caller's real cancel.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import httpx2
import pytest

from pydantic_ai_perplexity._ledger import Ledger
from pydantic_ai_perplexity.emulator import Emulator
from pydantic_ai_perplexity.mcp.server._cancels import CANCELLED_BY_CLIENT, MAX_WATCHES_PER_CALLER

# The module's emulator (`duration=N` runs N x 10 ms), its server with Alice's and Bob's tokens, and its ledger.
from support.cancels import (  # noqa: F401
    ALICE,
    BOB,
    LONG,
    emu,
    ended,
    ledger,
    post_cancel,
    research_cancelled_once_started,
    server,
)
from support.mcp_servers import DEADLINE, MCP_HEADERS, HttpServer, RawServer, server_env, text_of, upstream_status
from support.reliability import final_reply, record, rpc_messages, until
from support.scale import LEGACY

QUESTION = 'Which heat pumps suit an old stone house? (asked by alice)'
#: Alice's run that must still be going once Bob has tried every way: 300 s, far longer than the test takes.
LONGER = 'What does the EU AI Act regulate? [[emulate: duration=30000]]'


def rpc(http: HttpServer, token: str, method: str, params: dict[str, Any], request_id: Any = 1) -> dict[str, Any]:
    """One JSON-RPC request as a stateless POST (2025-11-25 era); its answer (a result or an error)."""
    body = {'jsonrpc': '2.0', 'id': request_id, 'method': method, 'params': params}
    headers = {**MCP_HEADERS, 'Authorization': f'Bearer {token}', 'MCP-Protocol-Version': LEGACY}
    reply = httpx2.post(http.url, content=json.dumps(body), headers=headers, timeout=DEADLINE)
    assert reply.status_code == 200, reply.text
    answer = final_reply(rpc_messages(reply))
    assert answer['id'] == request_id, answer
    return answer


def call(http: HttpServer, token: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return rpc(http, token, 'tools/call', {'name': name, 'arguments': arguments})['result']


@pytest.mark.slow
def test_another_callers_run_is_not_found_through_every_way_to_a_run(
    server: HttpServer,  # noqa: F811
    emu: Emulator,  # noqa: F811
) -> None:
    """Bob holds Alice's run ids (guessed, leaked, or read off a shared list): no way to a run lets him use them."""
    done = call(server, ALICE, 'perplexity_research', {'query': QUESTION, 'effort': 'fast'})
    finished = done['structuredContent']['response_id']
    assert done['structuredContent']['status'] == 'completed'
    task = rpc(
        server, ALICE, 'tools/call', {'name': 'perplexity_research', 'arguments': {'query': LONGER}, 'task': {}}
    )['result']['task']['taskId']
    never = f'resp_{uuid.uuid4()}'  # an id that names no run at all: what Bob must see for each of Alice's

    def unknown_text(name: str, response_id: str) -> str:
        result = call(server, BOB, name, {'response_id': response_id})
        assert result['isError'] is True, result
        return text_of(result)

    for name in ('perplexity_research_result', 'perplexity_research_cancel'):
        expected = unknown_text(name, never)
        assert 'No research run has that response_id' in expected
        for theirs in (finished, task):
            assert unknown_text(name, theirs) == expected, (name, theirs)

    def read_error(response_id: str) -> tuple[int, str]:
        uri = f'perplexity://runs/{response_id}'
        error = rpc(server, BOB, 'resources/read', {'uri': uri})['error']
        assert error.get('data', {}).get('uri', uri) == uri
        return error['code'], error['message']

    expected_error = read_error(never)
    assert expected_error[0] == -32602 and 'No research run has that response_id' in expected_error[1]
    for theirs in (finished, task):
        assert read_error(theirs) == expected_error
    listed = json.dumps(rpc(server, BOB, 'resources/list', {})['result'])
    assert rpc(server, BOB, 'prompts/list', {})['result']['prompts'] == []  # no prompts: no way to a run there
    for method in ('tasks/get', 'tasks/result', 'tasks/cancel'):
        error = rpc(server, BOB, method, {'taskId': task})['error']
        assert error == rpc(server, BOB, method, {'taskId': never})['error'], method
        assert 'not found' in error['message'].lower()
    bobs_tasks = json.dumps(rpc(server, BOB, 'tasks/list', {})['result'])
    bobs_list = text_of(call(server, BOB, 'perplexity_research_list', {'limit': 50}))
    for theirs in (finished, task):
        assert theirs not in listed and theirs not in bobs_tasks and theirs not in bobs_list
    assert 'stone house' not in listed + bobs_tasks + bobs_list

    # Nothing Bob did touched her runs; every way still works for Alice herself.
    assert upstream_status(emu, task) in ('queued', 'in_progress')
    mine = call(server, ALICE, 'perplexity_research_result', {'response_id': finished})
    assert mine.get('isError') is not True and mine['structuredContent']['status'] == 'completed'
    resource = rpc(server, ALICE, 'resources/read', {'uri': f'perplexity://runs/{finished}'})['result']
    assert 'stone house' in resource['contents'][0]['text']
    assert rpc(server, ALICE, 'tasks/get', {'taskId': task})['result']['taskId'] == task
    assert task in json.dumps(rpc(server, ALICE, 'tasks/list', {})['result'])
    cancelled = call(server, ALICE, 'perplexity_research_cancel', {'response_id': task})
    assert cancelled.get('isError') is not True, cancelled
    assert until(lambda: upstream_status(emu, task) == 'cancelled', what='her task cancelled')
    record('callers', 'mcp-http', "another caller's run ids: result, cancel, resources, prompts, list, tasks/*",
           runs=2, ways=10, outcome='"not found", as an unknown id; her runs untouched', lost=0)  # fmt: skip


@pytest.mark.slow
def test_a_server_without_callers_still_reaches_every_run(
    server: HttpServer,  # noqa: F811
    emu: Emulator,  # noqa: F811
    ledger: Ledger,  # noqa: F811
    module_state: Path,
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
    row = ledger.get(theirs)
    assert row is not None and row.caller == 'alice'


@pytest.mark.slow
@pytest.mark.anyio
async def test_a_cancel_flood_from_one_caller_never_drops_another_callers_cancel(
    server: HttpServer,  # noqa: F811
    emu: Emulator,  # noqa: F811
    ledger: Ledger,  # noqa: F811
) -> None:
    """70 bogus cancels from Bob (each watched for 20 s) once filled every watch slot; Alice's real one still lands."""
    flood = 70
    assert flood > MAX_WATCHES_PER_CALLER
    for n in range(flood):  # request ids no call of Bob's has: each is watched until its deadline
        assert await post_cancel(server.url, BOB, f'bogus-{n}') == 202

    outcome = await research_cancelled_once_started(server.url, f'{LONG} (flood)')
    assert outcome.started_id is not None, outcome
    status, row = await ended(emu, ledger, outcome.started_id)
    assert status == 'cancelled' and row.caller == 'alice' and row.error == CANCELLED_BY_CLIENT
    log = b''.join(server.stderr)
    assert b'cancel notifications at once from caller bob' in log and b'Traceback' not in log
    assert log.count(b'cancel notifications at once') <= 2  # said, with a count, not once per dropped watch
    record('callers', 'mcp-http', f'{flood} bogus cancel notifications from one caller, then another caller cancels',
           runs=1, cancels=flood + 1, outcome="the flooder's oldest watches dropped; the real cancel applied",
           lost=0)  # fmt: skip
