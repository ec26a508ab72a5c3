"""Cancel races through the toolset's tools and the MCP server: cancel as the run finishes, twice at once, then
collect. Every cancel answers cleanly (cancelled, or already ended), and the run's end is the same upstream, in what
collecting returns, and in the ledger.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import httpx2
import pytest

from pydantic_ai_perplexity import PerplexityToolset
from pydantic_ai_perplexity._ledger import Ledger
from pydantic_ai_perplexity.emulator import Emulator
from support.mcp_servers import RawServer, server_env, text_of
from support.reliability import CreateLog, call_tools, outcome_of, record, tool_call, upstream_runs

RUN_EMULATED = 500
RUN_SECONDS = RUN_EMULATED * 0.002  # the emulator's time scale


def upstream_status(emu: Emulator, response_id: str) -> str:
    reply = httpx2.get(
        f'{emu.base_url}/v1/agent/{response_id}', headers={'Authorization': f'Bearer {emu.api_key}'}, timeout=10
    )
    return reply.json()['status']


@pytest.mark.slow
@pytest.mark.anyio
async def test_cancel_races_through_the_toolset(logged: tuple[Emulator, CreateLog], tmp_path: Path) -> None:
    emu, log = logged
    ledger_path = tmp_path / 'ledger.sqlite3'
    toolset = PerplexityToolset(
        api_key=emu.api_key, base_url=emu.base_url, ledger=ledger_path, effort='fast', wait_seconds=10
    )
    replies: dict[str, list[str]] = {}
    async with toolset:
        researcher = toolset.researcher
        runs: list[str] = [''] * 12

        async def race(i: int) -> None:
            started = await researcher.start(f'Cancel race {i} (race-{i}) [[emulate: duration={RUN_EMULATED}]]')
            runs[i] = started.response_id
            # From at once to past the end (the moment of the race, not a wait for something).
            await anyio.sleep(RUN_SECONDS * i * 0.12)
            async with anyio.create_task_group() as tg:  # every third run is cancelled twice at once
                for _ in range(2 if i % 3 == 0 else 1):
                    tg.start_soon(cancel_once, runs[i])

        async def cancel_once(response_id: str) -> None:
            replies.setdefault(response_id, []).append(await toolset.perplexity_research_cancel(response_id))

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                for i in range(len(runs)):
                    tg.start_soon(race, i)
            # Then collect each run, as a model would after cancelling.
            parts = await call_tools(toolset, [('perplexity_research_result', {'response_id': rid}) for rid in runs])
            collected = dict(zip(runs, parts, strict=True))
        await researcher.flush()
    outcomes: dict[str, int] = {}
    with Ledger(ledger_path) as ledger:
        for response_id in runs:
            final = upstream_status(emu, response_id)
            assert final in ('cancelled', 'completed')
            for reply in replies[response_id]:
                assert reply in (
                    f'Cancelled research run {response_id}.',
                    f'Research run {response_id} had already ended ({final}); nothing to cancel.',
                ), reply
            assert outcome_of(collected[response_id]) == 'success'
            result = collected[response_id].metadata['research_result']
            assert result.status == final  # collecting after a cancel returns how the run ended
            row = ledger.get(response_id)
            assert row is not None and row.status == final  # and the ledger agrees
            outcomes[final] = outcomes.get(final, 0) + 1
            assert len(log.billed(f'race-{runs.index(response_id)}')) == 1
    assert outcomes.get('cancelled') and outcomes.get('completed'), outcomes  # both sides of the race were hit
    record(
        'cancel', 'toolset', 'cancel as the run ends, twice at once, then collect',
        outcome=f'{outcomes["cancelled"]} cancelled, {outcomes["completed"]} had ended; ledger agrees',
        runs=len(runs), cancels=sum(len(r) for r in replies.values()), lost=0,
    )  # fmt: skip


@pytest.mark.slow
def test_cancel_twice_then_collect_over_mcp(logged: tuple[Emulator, CreateLog], tmp_path: Path) -> None:
    emu, _ = logged
    server = RawServer(server_env(emu, tmp_path, PERPLEXITY_WAIT_SECONDS='0.05'))
    try:
        server.initialize()
        handoff = server.call('perplexity_research', {'query': 'A long survey (mcp-race) [[emulate: duration=20000]]'})
        response_id = handoff['structuredContent']['response_id']
        assert 'next' in handoff['structuredContent']
        for n in (1, 2):  # two cancels on one pipe, at once
            server.send(tool_call('perplexity_research_cancel', {'response_id': response_id}, f'cancel-{n}'))
        cancels = [server.wait_for(lambda m, n=n: m.get('id') == f'cancel-{n}')['result'] for n in (1, 2)]
        collected = server.call('perplexity_research_result', {'response_id': response_id, 'wait_seconds': 5})
        again = server.call('perplexity_research_cancel', {'response_id': response_id})
        assert server.request('ping')['result'] == {}
    finally:
        server.kill()
    texts = [text_of(c) for c in cancels]
    assert all(c.get('isError') is not True for c in cancels), texts
    assert f'Cancelled research run {response_id}.' in texts
    assert all(
        t
        in (
            f'Cancelled research run {response_id}.',
            f'Cancellation of {response_id} was accepted (status: cancelling).',
        )
        or t == f'Research run {response_id} had already ended (cancelled); nothing to cancel.'
        for t in texts
    ), texts
    assert collected['structuredContent']['status'] == 'cancelled' and 'ended cancelled' in text_of(collected)
    # Cancelling a cancelled run is idempotent: it says the run is cancelled.
    assert text_of(again) == f'Cancelled research run {response_id}.'
    assert upstream_runs(emu)[response_id].cancel_requested
    with Ledger(tmp_path / 'ledger.sqlite3') as ledger:
        row = ledger.get(response_id)
    assert row is not None and row.status == 'cancelled'
    record(
        'cancel', 'mcp-stdio', 'cancel twice at once, collect, cancel again',
        outcome='cancelled; collect returns it; a late cancel is idempotent; ledger agrees', runs=1, cancels=3,
        lost=0,
    )  # fmt: skip
