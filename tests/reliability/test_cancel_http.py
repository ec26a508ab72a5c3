"""Cancel over Streamable HTTP: a client's `notifications/cancelled` stops the run upstream and the ledger says why.

The server is stateless, so the notification arrives on a POST of its own and is applied through the ledger (the
call records its caller and JSON-RPC id with the run). Proved with raw JSON-RPC in both protocol eras, with the
official TypeScript SDK client (an `AbortSignal`) and with pydantic-ai's MCP client (the task cancelled), against
one instance on SQLite; `tests/scale/test_cancel.py` does it across two instances behind nginx on PostgreSQL. A
cancel never stops a run another caller started, and one that comes before the run has its id still stops it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import httpx2
import pytest

from pydantic_ai_perplexity._core.researcher import Researcher
from pydantic_ai_perplexity._ledger import Ledger, RunRecord
from pydantic_ai_perplexity.emulator import Emulator
from pydantic_ai_perplexity.mcp.server._cancels import CANCELLED_BY_CLIENT, RemoteCancels, request_key
from support import cancels
from support.cancels import (
    ALICE,
    BOB,
    LONG,
    SHORT,
    ended,
    post_cancel,
    pydantic_ai_cancel,
    research_cancelled_once_started,
    ts_cancel,
)
from support.mcp_servers import DEADLINE, HttpServer, upstream_status
from support.reliability import record, until
from support.scale import LEGACY, MODERN, call_tool

pytestmark = pytest.mark.anyio

# The module's emulator (`duration=N` runs N x 10 ms), its server with Alice's and Bob's tokens, and its ledger.
emu, server, ledger = cancels.emu, cancels.server, cancels.ledger


@pytest.mark.slow
@pytest.mark.parametrize('era', [LEGACY, MODERN])
async def test_a_cancel_notification_stops_the_run_upstream(
    server: HttpServer, emu: Emulator, ledger: Ledger, era: str
) -> None:
    outcome = await research_cancelled_once_started(server.url, era=era)
    response_id = outcome.started_id
    assert response_id is not None, outcome
    status, row = await ended(emu, ledger, response_id)
    assert status == 'cancelled' and row.caller == 'alice'
    assert row.error == CANCELLED_BY_CLIENT
    assert row.request_id is None  # the call answered: a late cancel or a reused id can no longer reach the run
    record('cancel', 'mcp-http', f'notifications/cancelled on its own POST ({era} era)', runs=1, cancels=1,
           outcome='cancelled upstream and in the ledger', lost=0)  # fmt: skip


@pytest.mark.slow
async def test_a_cancel_from_another_caller_with_the_same_id_changes_nothing(
    server: HttpServer, emu: Emulator, ledger: Ledger
) -> None:
    accepted: list[int] = []

    async def on_progress(message: str) -> None:
        if message.startswith('started research run '):
            accepted.append(await post_cancel(server.url, BOB, 1))  # Bob's client also used id 1, for its own call

    with anyio.fail_after(DEADLINE):
        async with httpx2.AsyncClient(timeout=DEADLINE) as client:
            outcome = await call_tool(
                client,
                server.url,
                'perplexity_research',
                {'query': SHORT, 'effort': 'fast'},
                token=ALICE,
                progress='p2',
                on_progress=on_progress,
            )
    assert accepted == [202]
    assert outcome.ok and outcome.structured['status'] == 'completed', outcome
    assert outcome.started_id is not None
    status, row = await ended(emu, ledger, outcome.started_id)
    assert status == 'completed' and row.error is None
    record('cancel', 'mcp-http', "another caller's cancel with the same request id", runs=1, cancels=1,
           outcome='ignored: the run completed', lost=0)  # fmt: skip


@asynccontextmanager
async def cancels_on(emu: Emulator, tmp_path: Path) -> AsyncIterator[tuple[Researcher, Ledger, RemoteCancels]]:
    """A researcher on the emulator with its ledger, and the `RemoteCancels` an MCP HTTP instance would hold."""
    async with Researcher(api_key=emu.api_key, base_url=emu.base_url, ledger=tmp_path / 'l.sqlite3') as r:
        assert r.ledger is not None

        async def researcher() -> Researcher:
            return r

        yield r, r.ledger, RemoteCancels(researcher)


async def test_a_cancel_before_the_run_has_its_id_still_stops_it(emu: Emulator, tmp_path: Path) -> None:
    """The notification reaches one instance while the create is in flight on another: both orders end cancelled."""
    key = request_key(7)
    async with cancels_on(emu, tmp_path) as (r, ledger, cancels):
        # 1. The cancel marks the reservation; the starting instance finds the mark once it has bound the id.
        record_ = RunRecord(query='q', effort='fast', status='starting', origin='mcp', caller='alice', request_id=key)
        token = ledger.reserve(record_, cap_usd=100.0)
        assert await cancels.apply('alice', key, watch_seconds=0) == 'marked'
        assert await cancels.apply('bob', key, watch_seconds=0) == 'none'  # never another caller's run
        started = await r.client.start(LONG, effort='fast')
        ledger.bind(token, started.id, status=started.status)
        assert await cancels.check_mark(r, started.id)
        assert until(lambda: upstream_status(emu, started.id) == 'cancelled')
        assert ledger.get(started.id).error == CANCELLED_BY_CLIENT  # type: ignore[union-attr]

        # 2. The instance that got the cancel watches until the id is bound, then cancels itself.
        key2 = request_key('req-8')
        token2 = ledger.reserve(record_.model_copy(update={'request_id': key2}), cap_usd=100.0)
        async with anyio.create_task_group() as tg:
            outcome: list[str] = []

            async def watch() -> None:
                outcome.append(await cancels.apply('alice', key2, watch_seconds=DEADLINE))

            tg.start_soon(watch)
            second = await r.client.start(LONG, effort='fast')
            ledger.bind(token2, second.id, status=second.status)
        assert outcome == ['cancelled']
        assert until(lambda: upstream_status(emu, second.id) == 'cancelled')
    record('cancel', 'researcher', 'cancel before the run has its id (create in flight elsewhere), both orders',
           runs=2, cancels=2, outcome='cancelled upstream and in the ledger', lost=0)  # fmt: skip


async def test_two_calls_in_flight_with_the_same_id_and_caller_cancel_nothing(emu: Emulator, tmp_path: Path) -> None:
    """Without tokens every client is the same anonymous caller: an id two calls share in flight names neither."""
    key = request_key(1)
    async with cancels_on(emu, tmp_path) as (r, ledger, cancels):
        runs = [await r.client.start(f'{LONG} ({n})', effort='fast') for n in range(2)]
        for run in runs:
            ledger.record_start(RunRecord(response_id=run.id, query='q', status='queued', origin='mcp', request_id=key))
        assert await cancels.apply(None, key, watch_seconds=0) == 'ambiguous'
        assert 'cancelled' not in [upstream_status(emu, run.id) for run in runs]  # neither was cancelled
        # Once one call has answered (its key cleared), the other is the only one: the cancel is its.
        await cancels.answered(r, runs[0].id)
        assert await cancels.apply(None, key, watch_seconds=0) == 'cancelled'
        assert await anyio.to_thread.run_sync(lambda: until(lambda: upstream_status(emu, runs[1].id) == 'cancelled'))
        assert upstream_status(emu, runs[0].id) != 'cancelled'
        for run in runs:
            await r.cancel(run.id)
    record('cancel', 'researcher', 'two anonymous calls in flight with the same request id', runs=2, cancels=2,
           outcome='ambiguous: none cancelled; then only the call still in flight', lost=0)  # fmt: skip


async def test_a_collect_call_is_cancelled_only_for_the_runs_own_caller(emu: Emulator, tmp_path: Path) -> None:
    """`perplexity_research_result` over HTTP claims the run for its call while it waits, if the run is the caller's
    and carries no other key (a durable workflow's); a cancel of that call then stops it."""
    async with cancels_on(emu, tmp_path) as (r, ledger, cancels):
        mine, durable = [await r.client.start(f'{LONG} ({n})', effort='fast') for n in range(2)]
        ledger.record_start(RunRecord(response_id=mine.id, query='q', status='queued', origin='mcp', caller='alice'))
        row = RunRecord(response_id=durable.id, query='q', status='queued', origin='api', caller='alice')
        ledger.record_start(row.model_copy(update={'request_id': 'dbos:wf:1'}))
        assert not await cancels.claim(r, mine.id, 'bob', request_key(4))  # not Bob's run
        assert not await cancels.claim(r, durable.id, 'alice', request_key(4))  # its key is not ours to replace
        assert ledger.get(durable.id).request_id == 'dbos:wf:1'  # type: ignore[union-attr]
        assert await cancels.claim(r, mine.id, 'alice', request_key(4))
        assert await cancels.apply('bob', request_key(4), watch_seconds=0) == 'none'
        assert await cancels.apply('alice', request_key(4), watch_seconds=0) == 'cancelled'
        assert await anyio.to_thread.run_sync(lambda: until(lambda: upstream_status(emu, mine.id) == 'cancelled'))
        assert ledger.get(mine.id).error == CANCELLED_BY_CLIENT  # type: ignore[union-attr]
        assert upstream_status(emu, durable.id) != 'cancelled'
        await r.cancel(durable.id)
    record('cancel', 'researcher', 'a collect call of the run\'s own caller (other callers and keys left alone)',
           runs=2, cancels=3, outcome='only the claimed run cancelled', lost=0)  # fmt: skip


# -- real clients ------------------------------------------------------------------------------------------------


@pytest.mark.compat  # the TypeScript SDK, installed with npm (Node.js)
async def test_the_typescript_sdk_client_cancels_with_an_abort_signal(
    server: HttpServer, emu: Emulator, ledger: Ledger
) -> None:
    outcome = await anyio.to_thread.run_sync(lambda: ts_cancel(server.url, ALICE))
    assert outcome['started'] and outcome['error'] and outcome['tools'] == 5, outcome
    status, row = await ended(emu, ledger, outcome['started'])
    assert status == 'cancelled' and row.error == CANCELLED_BY_CLIENT and row.caller == 'alice'
    record('cancel', 'mcp-http', 'TypeScript SDK client aborts the call (AbortSignal)', runs=1, cancels=1,
           outcome='cancelled upstream and in the ledger', lost=0)  # fmt: skip


async def test_pydantic_ais_mcp_client_cancels_when_its_task_is_cancelled(
    server: HttpServer, emu: Emulator, ledger: Ledger
) -> None:
    response_id = await pydantic_ai_cancel(server.url, ALICE, ledger)
    status, row = await ended(emu, ledger, response_id)
    assert status == 'cancelled' and row.error == CANCELLED_BY_CLIENT
    record('cancel', 'mcp-http', "pydantic-ai's MCP client (handshake era): the task running the call is cancelled",
           runs=1, cancels=1, outcome='cancelled upstream and in the ledger', lost=0)  # fmt: skip
