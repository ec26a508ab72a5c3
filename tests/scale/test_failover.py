"""Instances leaving a team deployment under load: one killed (SIGKILL) loses no run; one stopped (SIGTERM) hands
off its calls in flight. nginx passes new calls to the instances left, and never replays a call that reached one.

The tests run in order on one deployment: the kill leaves two instances, the SIGTERM one.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator

import anyio
import httpx2
import pytest

from pydantic_ai_perplexity.emulator import Emulator
from support.postgres import fresh_schema
from support.scale import LEGACY, MODERN, Instance, Outcome, Topology, call_tool, creates, ledger_rows

pytestmark = [pytest.mark.compat, pytest.mark.anyio]  # nginx in front of the instances

TOKEN = 'tok-fleet-3e8a'
LONG = 'Survey heat pump adoption in Europe [[emulate: duration=400]]'  # runs 4 s: calls are in flight for a while
DEADLINE = 60.0


@pytest.fixture(scope='module')
def fleet(tmp_path_factory: pytest.TempPathFactory, nginx_binary: str, emu: Emulator) -> Iterator[Topology]:
    with (
        fresh_schema() as url,
        Topology(
            tmp_path_factory.mktemp('fleet'),
            base_url=emu.base_url,
            api_key=emu.api_key,
            ledger_url=url,
            nginx=nginx_binary,
            PERPLEXITY_MCP_TOKEN=TOKEN,
            PERPLEXITY_WAIT_SECONDS='20',
        ) as topology,
    ):
        yield topology


def client() -> httpx2.AsyncClient:
    return httpx2.AsyncClient(timeout=DEADLINE, limits=httpx2.Limits(max_connections=300, max_keepalive_connections=0))


async def long_calls(
    http: httpx2.AsyncClient, url: str, count: int, results: list[Outcome], started: anyio.Event
) -> None:
    """`count` long research calls at once; `started` is set once every one reported its run started."""
    seen = 0

    async def on_progress(message: str) -> None:
        nonlocal seen
        if message.startswith('started research run '):
            seen += 1
            if seen == count:
                started.set()

    async def one(n: int) -> None:
        results.append(
            await call_tool(
                http,
                url,
                'perplexity_research',
                {'query': f'{LONG} ({n})'},
                token=TOKEN,
                era=MODERN if n % 2 else LEGACY,
                progress=f'long-{n}',
                on_progress=on_progress,
            )
        )

    async with anyio.create_task_group() as tg:
        for n in range(count):
            tg.start_soon(one, n)


async def quick_calls(http: httpx2.AsyncClient, url: str, count: int) -> list[Outcome]:
    results: list[Outcome] = []

    async def one(n: int) -> None:
        question = {'query': f'What is a heat pump? ({n})', 'effort': 'fast'}
        results.append(await call_tool(http, url, 'perplexity_research', question, token=TOKEN))

    async with anyio.create_task_group() as tg:
        for n in range(count):
            tg.start_soon(one, n)
    return results


async def collect(http: httpx2.AsyncClient, url: str, response_id: str) -> Outcome:
    args = {'response_id': response_id, 'wait_seconds': 20}
    return await call_tool(http, url, 'perplexity_research_result', args, token=TOKEN)


async def test_an_instance_killed_mid_load_loses_no_run(fleet: Topology, emu: Emulator) -> None:
    assert fleet.nginx is not None
    victim = fleet.instances[2]
    before = creates(emu.requests)
    in_flight: list[Outcome] = []
    all_started = anyio.Event()
    async with client() as http:
        with anyio.fail_after(DEADLINE):
            async with anyio.create_task_group() as tg:
                tg.start_soon(long_calls, http, fleet.url, 60, in_flight, all_started)
                await all_started.wait()
                # Every call is waiting on its run, each on some instance: kill one of them outright.
                victim.kill()
                after_kill = await quick_calls(http, fleet.url, 60)
        # New calls went to the instances left: nginx passed on only what the dead one never accepted.
        assert all(o.ok for o in after_kill), [o for o in after_kill if not o.ok][:3]
        cut_off = [o for o in in_flight if not o.ok]
        assert cut_off, 'no call was in flight on the killed instance'
        assert all(o.ok and o.structured['status'] == 'completed' for o in in_flight if o not in cut_off)
        # Every run started is in the ledger, and the runs of the calls cut off are collected through the others.
        started_ids = {o.started_id for o in in_flight}
        assert None not in started_ids and len(started_ids) == 60
        ids = started_ids | {o.structured['response_id'] for o in after_kill}
        assert creates(emu.requests) - before == len(ids) == 120  # one run per call: none replayed, none lost
        rows = {r['response_id']: r for r in ledger_rows(fleet.ledger_url)}
        assert ids <= set(rows)
        assert not [r for r in rows.values() if not r['response_id'].startswith('resp_')]  # no orphan reservation
        for outcome in cut_off:
            assert outcome.started_id is not None
            collected = await collect(http, fleet.url, outcome.started_id)
            assert collected.ok and collected.structured['status'] == 'completed', collected
    # No POST reached the killed instance and then went to another: nginx replays only failed connections.
    for method, _, _, ports in fleet.nginx.access():
        if method == 'POST' and len(ports) > 1:
            assert ports[:-1] == [victim.port] * (len(ports) - 1)


async def test_sigterm_hands_off_the_calls_in_flight_while_the_others_keep_serving(
    fleet: Topology, emu: Emulator
) -> None:
    leaving: Instance = fleet.instances[1]
    assert leaving.proc.poll() is None
    before = creates(emu.requests)
    in_flight: list[Outcome] = []
    all_started = anyio.Event()
    async with client() as http:
        with anyio.fail_after(DEADLINE):
            async with anyio.create_task_group() as tg:
                tg.start_soon(long_calls, http, fleet.url, 40, in_flight, all_started)
                await all_started.wait()
                signalled = time.monotonic()
                leaving.proc.send_signal(signal.SIGTERM)
                code = await anyio.to_thread.run_sync(lambda: leaving.proc.wait(DEADLINE))
                exited = time.monotonic() - signalled
        assert exited < 10.0 and code in (0, -signal.SIGTERM), (exited, code)
        # 0 errors: the calls on the leaving instance came back as hand-offs (before it exited); the others completed.
        assert all(o.ok for o in in_flight), [o for o in in_flight if not o.ok][:3]
        handed_off = [o for o in in_flight if o.structured['status'] != 'completed']
        assert handed_off, 'no call was in flight on the stopped instance'
        assert all(o.structured['response_id'] == o.started_id and 'next' in o.structured for o in handed_off)
        # The last instance serves new calls and collects the handed-off runs.
        later = await quick_calls(http, fleet.url, 20)
        assert all(o.ok for o in later), [o for o in later if not o.ok][:3]
        for outcome in handed_off:
            collected = await collect(http, fleet.url, outcome.structured['response_id'])
            assert collected.ok and collected.structured['status'] == 'completed', collected
    assert creates(emu.requests) - before == 60
    assert 'handing off the calls in flight' in ''.join(leaving.stderr)
