"""Cancel across instances: two MCP server instances on one PostgreSQL ledger behind nginx. A client's
`notifications/cancelled` arrives on a POST of its own, which may reach the instance that is not running the call;
that instance finds the run through the ledger and cancels it upstream.

Raw JSON-RPC with the call sent to one instance and the cancel to the other (both protocol eras), then the official
TypeScript SDK client (an `AbortSignal`) and pydantic-ai's MCP client (its task cancelled) through nginx. The
emulator shows each run's end: `cancelled`, in the ledger too, with the reason.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import httpx2
import pytest

from pydantic_ai_perplexity._ledger import Ledger, RunRecord
from pydantic_ai_perplexity.emulator import Emulator
from pydantic_ai_perplexity.mcp.server._cancels import CANCELLED_BY_CLIENT
from support.cancels import LONG, post_cancel, pydantic_ai_cancel, ts_cancel
from support.postgres import fresh_schema
from support.scale import LEGACY, MODERN, Topology, call_tool

pytestmark = [pytest.mark.compat, pytest.mark.anyio]  # nginx in front of the instances

ALICE = 'tok-alice-cancel-7f3e91'
DEADLINE = 60.0


@pytest.fixture(scope='module')
def pair(tmp_path_factory: pytest.TempPathFactory, nginx_binary: str, emu: Emulator) -> Iterator[Topology]:
    with (
        fresh_schema() as url,
        Topology(
            tmp_path_factory.mktemp('cancel'),
            base_url=emu.base_url,
            api_key=emu.api_key,
            ledger_url=url,
            nginx=nginx_binary,
            count=2,
            PERPLEXITY_MCP_TOKENS=f'alice:{ALICE}',
            PERPLEXITY_WAIT_SECONDS='40',
        ) as topology,
    ):
        yield topology


@pytest.fixture(scope='module')
def ledger(pair: Topology) -> Iterator[Ledger]:
    with Ledger(pair.ledger_url) as opened:
        yield opened


def upstream(emu: Emulator, response_id: str) -> str:
    reply = httpx2.get(
        f'{emu.base_url}/v1/responses/{response_id}', headers={'Authorization': f'Bearer {emu.api_key}'}, timeout=10
    )
    return reply.json()['status']


async def cancelled(emu: Emulator, ledger: Ledger, response_id: str) -> RunRecord:
    """Wait (with a deadline, polling) until the run is cancelled upstream and in the ledger; its row."""
    with anyio.fail_after(DEADLINE):
        while upstream(emu, response_id) not in ('cancelled', 'completed'):
            await anyio.sleep(0.05)
        assert upstream(emu, response_id) == 'cancelled'
        # The reason lands after the run's end (the serving instance's record of it, then the reason).
        while (row := ledger.get(response_id)) is None or (row.status, row.error) != ('cancelled', CANCELLED_BY_CLIENT):
            await anyio.sleep(0.05)
    return row


@pytest.mark.parametrize('era', [LEGACY, MODERN])
async def test_a_cancel_sent_to_the_other_instance_stops_the_run(
    pair: Topology, emu: Emulator, ledger: Ledger, era: str
) -> None:
    first, second = pair.instances

    async def on_progress(message: str) -> None:
        if message.startswith('started research run '):
            assert await post_cancel(second.url, ALICE, 1, era=era) == 202  # not the instance serving the call

    with anyio.fail_after(DEADLINE):
        async with httpx2.AsyncClient(timeout=DEADLINE) as client:
            outcome = await call_tool(
                client,
                first.url,
                'perplexity_research',
                {'query': LONG, 'effort': 'fast'},
                token=ALICE,
                era=era,
                progress='x',
                on_progress=on_progress,
            )
    assert outcome.started_id is not None, outcome
    row = await cancelled(emu, ledger, outcome.started_id)
    assert row.error == CANCELLED_BY_CLIENT and row.caller == 'alice' and row.request_id is None


def served(pair: Topology) -> list[tuple[str, int, list[int]]]:
    assert pair.nginx is not None
    return [(method, status, ports) for method, _, status, ports in pair.nginx.access() if method == 'POST']


async def test_the_typescript_sdk_client_cancels_through_nginx(pair: Topology, emu: Emulator, ledger: Ledger) -> None:
    outcome: dict[str, Any] = await anyio.to_thread.run_sync(lambda: ts_cancel(pair.url, ALICE))
    assert outcome['started'] and outcome['error'] and outcome['tools'] == 5, outcome
    row = await cancelled(emu, ledger, outcome['started'])
    assert row.error == CANCELLED_BY_CLIENT
    assert any(status == 202 for _, status, _ in served(pair))  # the notification went through nginx


async def test_pydantic_ais_mcp_client_cancels_through_nginx(pair: Topology, emu: Emulator, ledger: Ledger) -> None:
    response_id = await pydantic_ai_cancel(pair.url, ALICE, ledger)
    row = await cancelled(emu, ledger, response_id)
    assert row.error == CANCELLED_BY_CLIENT
