"""The ledger's written protocol, on both engines: what a run's `request_id` is (`request_kind`), a client's cancel
request (`cancel_requested_at` / `cancel_requested_by`), the MCP call's claim and its one conditional update when it
answers (`Ledger.claim_call`, `Ledger.answered`), the migration that moved the values older versions encoded in
`request_id` and `error` into those columns, and `Ledger.aio`: named operations applied in order on one recorder.

The cancel flows that use them end to end (a notification reaching any instance) are in
tests/reliability/test_cancel_http.py and tests/scale/test_cancel.py.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import pytest

from pydantic_ai_perplexity._ledger import RESERVED, Ledger, RunRecord
from support import ledger as shared
from support.ledger import raw

# The ledger's fixtures: each test that takes `target` or `ledger` runs on SQLite and on PostgreSQL.
engine, path, target, ledger = shared.engine, shared.path, shared.target, shared.ledger

UNFINISHED = ('starting', 'reserved', 'queued', 'in_progress', 'requires_action')
REASON = 'cancelled: the MCP client cancelled the call'
#: What versions before m008 wrote into `error` of a reservation whose create was in flight when the cancel came.
OLD_CANCEL_MARK = 'cancel requested: the MCP client cancelled the call before the run had its id'


def run(response_id: str, **fields: Any) -> RunRecord:
    fields.setdefault('query', 'q')
    fields.setdefault('origin', 'mcp')
    return RunRecord(response_id=response_id, **fields)


# --- the columns ----------------------------------------------------------------------------------------------------


def test_the_kind_of_request_id_is_read_from_its_form_when_not_given(ledger: Ledger) -> None:
    ledger.record_start(run('resp_call', request_id='mcp-http:"7"'))
    ledger.record_start(run('resp_task', request_id='mcp:task'))
    ledger.record_start(run('resp_step', request_id='dbos:wf-1:2'))
    ledger.record_start(run('resp_cli', request_id='cli:0123abcd'))
    ledger.record_start(run('resp_none'))
    kinds = {r.response_id: r.request_kind for r in ledger.list()}
    assert kinds == {
        'resp_call': 'call',
        'resp_task': 'task',
        'resp_step': 'key',
        'resp_cli': 'key',
        'resp_none': None,
    }
    ledger.update('resp_cli', request_id='mcp-http:8')  # a key set later gets its kind too
    ledger.update('resp_step', request_id=None)
    assert (ledger.get('resp_cli') or run('x')).request_kind == 'call'
    assert (ledger.get('resp_step') or run('x')).request_kind is None


def test_a_row_an_older_version_wrote_without_a_kind_is_read_with_one(ledger: Ledger, target: str) -> None:
    ledger.record_start(run('resp_task', request_id='mcp:task'))
    raw(target, "UPDATE runs SET request_kind = NULL WHERE response_id = 'resp_task'")
    found = ledger.get('resp_task')
    assert found is not None and found.request_kind == 'task'


def test_a_cancel_request_on_a_reservation_is_kept_when_it_is_bound(ledger: Ledger) -> None:
    token = ledger.reserve(run('pending_1', caller='alice', request_id='mcp-http:1'), cap_usd=None)
    ledger.mark_cancel_requested(token, by='mcp-client')
    ledger.bind(token, 'resp_1', status='queued')
    found = ledger.get('resp_1')
    assert found is not None
    assert found.cancel_requested_by == 'mcp-client' and found.cancel_requested_at is not None
    assert found.request_id == 'mcp-http:1' and found.request_kind == 'call' and found.error is None
    assert abs(found.cancel_requested_at - datetime.now(UTC)) < timedelta(minutes=1)


def test_a_cancel_applied_releases_the_call_key(ledger: Ledger) -> None:
    ledger.record_start(run('resp_1', caller='alice', status='in_progress', request_id='mcp-http:1'))
    ledger.mark_cancel_requested('resp_1', by='mcp-client', release_call=True)
    found = ledger.get('resp_1')
    assert found is not None and found.cancel_requested_at is not None
    assert found.request_id is None and found.request_kind is None
    assert ledger.list(caller='alice', request_id='mcp-http:1') == []  # a late notification finds nothing


# --- claim and answer -----------------------------------------------------------------------------------------------


def test_a_claim_needs_the_callers_own_unfinished_run_without_another_key(ledger: Ledger) -> None:
    ledger.record_start(run('resp_mine', caller='alice', status='in_progress'))
    ledger.record_start(run('resp_anon', status='queued'))
    ledger.record_start(run('resp_done', caller='alice', status='completed'))
    ledger.record_start(run('resp_step', caller='alice', status='in_progress', request_id='dbos:wf:1'))
    ledger.record_start(run('resp_task', caller='alice', status='in_progress', request_id='mcp:task'))
    ledger.record_start(run('resp_old', caller='alice', status='in_progress', request_id='mcp-http:1'))

    def claim(response_id: str, caller: str | None) -> bool:
        return ledger.claim_call(response_id, caller=caller, key='mcp-http:9', statuses=UNFINISHED)

    assert not claim('resp_mine', 'bob')  # another caller's run
    assert not claim('resp_mine', None)  # a named caller's run is not the anonymous caller's
    assert not claim('resp_anon', 'alice')
    assert not claim('resp_done', 'alice')  # finished
    assert not claim('resp_step', 'alice')  # a durable workflow's key stays
    assert not claim('resp_task', 'alice')
    assert not claim('resp_unknown', 'alice')
    assert claim('resp_mine', 'alice')
    assert claim('resp_anon', None)
    assert claim('resp_old', 'alice')  # an earlier call's key is replaced
    keys = {r.response_id: (r.request_id, r.request_kind) for r in ledger.list()}
    assert keys == {
        'resp_mine': ('mcp-http:9', 'call'),
        'resp_anon': ('mcp-http:9', 'call'),
        'resp_done': (None, None),
        'resp_step': ('dbos:wf:1', 'key'),
        'resp_task': ('mcp:task', 'task'),
        'resp_old': ('mcp-http:9', 'call'),
    }


def test_answered_clears_the_call_key_and_writes_the_reason_only_after_a_cancel_request(ledger: Ledger) -> None:
    ledger.record_start(run('resp_plain', status='completed', request_id='mcp-http:1', error='upstream: partial'))
    ledger.record_start(run('resp_cancelled', status='in_progress', request_id='mcp-http:2'))
    ledger.mark_cancel_requested('resp_cancelled', by='mcp-client', release_call=True)
    ledger.update('resp_cancelled', status='cancelled', error='the API said: cancelled')  # its end, recorded after
    ledger.record_start(run('resp_finished_first', status='in_progress', request_id='mcp-http:3'))
    ledger.mark_cancel_requested('resp_finished_first', by='mcp-client')
    ledger.update('resp_finished_first', status='completed')
    ledger.record_start(run('resp_step', status='completed', request_id='dbos:wf:1'))
    before = {r.response_id: r.updated_at for r in ledger.list()}

    assert ledger.answered('resp_plain', reason=REASON) is False
    assert ledger.answered('resp_cancelled', reason=REASON) is True
    assert ledger.answered('resp_finished_first', reason=REASON) is True
    assert ledger.answered('resp_step', reason=REASON) is False
    assert ledger.answered('resp_unknown', reason=REASON) is False
    rows = {r.response_id: r for r in ledger.list()}
    assert {i: (r.request_id, r.request_kind, r.error) for i, r in rows.items()} == {
        'resp_plain': (None, None, 'upstream: partial'),
        'resp_cancelled': (None, None, REASON),
        'resp_finished_first': (None, None, None),  # completed before the cancel took: no reason to give
        'resp_step': ('dbos:wf:1', 'key', None),
    }
    assert rows['resp_step'].updated_at == before['resp_step']  # nothing to do: not written
    assert rows['resp_plain'].updated_at > before['resp_plain']


# --- the migration --------------------------------------------------------------------------------------------------


def test_the_migration_moves_encoded_marks_into_their_columns(engine: str, target: str) -> None:
    # A ledger as the version before made it (schema version 7), with each value it encoded.
    with Ledger(target) as ledger:
        ledger.record_start(run('pending_a', status=RESERVED, caller='alice'))
        ledger.record_start(run('resp_b', status='cancelled', caller='alice'))
        ledger.record_start(run('resp_c', status='in_progress'))
        ledger.record_start(run('resp_d', status='in_progress', caller='bob'))
        ledger.record_start(run('resp_e', status='completed'))
        ledger.record_start(run('resp_f', status='failed', error='upstream said: partial'))
        ledger.record_start(run('resp_g', status='completed', request_id='Cancelled:not-a-mark'))
    for column in ('request_kind', 'cancel_requested_at', 'cancel_requested_by'):
        raw(target, f'ALTER TABLE runs DROP COLUMN {column}')
    raw(target, "DELETE FROM _migrations WHERE name = 'm008_request_kind_and_cancel_marks'")
    if engine == 'sqlite':
        raw(target, 'PRAGMA user_version = 7')
    for response_id, column, value in (
        ('pending_a', 'request_id', 'mcp-http:1'),
        ('pending_a', 'error', OLD_CANCEL_MARK),
        ('resp_b', 'request_id', 'cancelled:mcp-http:"2"'),
        ('resp_c', 'request_id', 'mcp:task'),
        ('resp_d', 'request_id', 'mcp-http:3'),
        ('resp_e', 'request_id', 'dbos:wf:1'),
    ):
        raw(target, f"UPDATE runs SET {column} = '{value}' WHERE response_id = '{response_id}'")
    updated = dict(raw(target, 'SELECT response_id, updated_at FROM runs'))

    with Ledger(target) as ledger:
        rows = {r.response_id: r for r in ledger.list()}
    marks = {
        i: (r.request_id, r.request_kind, r.cancel_requested_by, r.cancel_requested_at is not None, r.error)
        for i, r in rows.items()
    }
    assert marks == {
        'pending_a': ('mcp-http:1', 'call', 'mcp-client', True, None),
        'resp_b': ('mcp-http:"2"', 'call', 'mcp-client', True, None),
        'resp_c': ('mcp:task', 'task', None, False, None),
        'resp_d': ('mcp-http:3', 'call', None, False, None),
        'resp_e': ('dbos:wf:1', 'key', None, False, None),
        'resp_f': (None, None, None, False, 'upstream said: partial'),
        'resp_g': ('Cancelled:not-a-mark', 'key', None, False, None),  # the prefix is matched exactly
    }
    # The request is dated when the row last changed: the best the old encoding can say.
    stamped = raw(target, "SELECT cancel_requested_at FROM runs WHERE response_id = 'pending_a'")[0][0]
    assert stamped == updated['pending_a']
    # Stored in the column (not only derived on reading): the cancel flows select on it.
    assert raw(target, "SELECT request_kind FROM runs WHERE response_id = 'resp_c'") == [('task',)]


# --- Ledger.aio -----------------------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_async_operations_are_applied_in_order_after_the_writes_queued_before_them(ledger: Ledger) -> None:
    ledger.record_start(run('resp_1', status='queued'))
    for n in range(50):
        ledger.aio.later(ledger.update, 'resp_1', sources=n)
    found = await ledger.aio.get('resp_1')
    assert found is not None and found.sources == 49
    ledger.aio.later(ledger.update, 'resp_1', status='completed')
    assert [r.response_id for r in await ledger.aio.list(status='completed')] == ['resp_1']
    await ledger.aio.aclose()
    assert (await ledger.aio.get('resp_1')) is not None  # usable again after closing


@pytest.mark.anyio
async def test_an_async_operation_raises_what_the_ledger_raises(ledger: Ledger) -> None:
    ledger.record_start(run('resp_1'))
    with pytest.raises(TypeError, match='cannot be updated: no_such_field'):
        await ledger.aio.update('resp_1', no_such_field=1)
    await ledger.aio.update('resp_1', status='completed')  # the recorder goes on
    assert (ledger.get('resp_1') or run('x')).status == 'completed'


@pytest.mark.anyio
async def test_an_operation_lands_even_when_its_caller_stops_waiting(ledger: Ledger) -> None:
    ledger.record_start(run('resp_1', status='in_progress', request_id='mcp-http:1'))
    gate, holding = threading.Event(), threading.Event()

    def hold() -> None:  # an earlier write that takes its time
        holding.set()
        gate.wait(30)

    ledger.aio.later(hold)
    await anyio.to_thread.run_sync(holding.wait, 30)
    with anyio.CancelScope() as scope:
        scope.cancel()
        await ledger.aio.answered('resp_1', reason=REASON)
    assert scope.cancelled_caught
    gate.set()
    await ledger.aio.flush()
    found = ledger.get('resp_1')
    assert found is not None and found.request_id is None
