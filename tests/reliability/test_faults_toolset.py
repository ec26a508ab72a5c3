"""Every fault the emulator can inject, through `PerplexityToolset` in a real pydantic-ai agent.

Each research call ends in a correct result or a clear failure the model reads; every run the API started is
recoverable (its id was returned, or it is in the ledger); a resumed stream hands on every event exactly once;
and no retry ever starts a second billed run.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import httpx2
import pytest

from pydantic_ai_perplexity import PerplexityClient, PerplexityToolset, Researcher
from pydantic_ai_perplexity._ledger import Ledger
from support.reliability import (
    FAULTS,
    EventSpy,
    Fault,
    assert_attempt_kept,
    call_tools,
    check_outcome,
    describe,
    logged_emulator,
    outcome_of,
    query_for,
    record,
    stream_gets,
    text_of_part,
    until,
    upstream_runs,
)

pytestmark = pytest.mark.anyio


def toolset_on(emu, ledger: Path, **settings) -> tuple[PerplexityToolset, EventSpy]:
    client = PerplexityClient(api_key=emu.api_key, base_url=emu.base_url)
    spy = EventSpy(client)
    researcher = Researcher(client=client, ledger=ledger, origin='toolset', effort='fast', **settings)
    return PerplexityToolset(researcher=researcher), spy


@pytest.mark.slow
async def test_every_fault_through_the_toolset(tmp_path: Path) -> None:
    ledger_path = tmp_path / 'ledger.sqlite3'
    with logged_emulator() as (emu, log):
        toolset, spy = toolset_on(emu, ledger_path, wait_seconds=30)
        async with toolset.researcher.client:
            calls = [('perplexity_research', {'query': query_for(f'toolset-{i}', f)}) for i, f in enumerate(FAULTS)]
            with anyio.fail_after(60):
                parts = await call_tools(toolset, calls)
                await toolset.researcher.flush()
        with Ledger(ledger_path) as ledger:
            rows = ledger.list(limit=500)
        recorded = {r.response_id: r for r in rows}
        for i, (fault, part) in enumerate(zip(FAULTS, parts, strict=True)):
            text = text_of_part(part)
            check_outcome(fault, outcome_of(part), text)
            creates, billed = log.matching(f'toolset-{i}'), log.billed(f'toolset-{i}')
            assert len(creates) == fault.attempts, (fault, creates)
            assert len(billed) == fault.billed, (fault, creates)  # never a second billed run
            events = 0
            for create in billed:
                assert create.response_id in upstream_runs(emu)
                assert create.response_id in text or create.response_id in recorded  # recoverable
                assert recorded[create.response_id].status == fault.outcome  # and the ledger agrees
                events = spy.assert_exactly_once(emu, create.response_id)
                if fault.drops:
                    assert stream_gets(emu, create.response_id) >= 2  # the stream was cut and resumed
            if fault.outcome == 'error':
                assert_attempt_kept(rows, f'toolset-{i}')
            record(
                'faults', 'toolset', fault.name,
                outcome=describe(fault, text), attempts=len(creates), billed=len(billed), events_once=events, lost=0,
            )  # fmt: skip


async def test_a_create_that_times_out_after_reaching_the_api_is_never_re_sent_and_stays_in_the_ledger(
    tmp_path: Path,
) -> None:
    """The run starts, but its id never comes back: the call fails clearly, and the attempt is in the ledger."""
    ledger_path = tmp_path / 'ledger.sqlite3'
    fault = Fault('slow=0.6', 'error', label='read timeout on the create (client gives up at 0.2 s)')
    with logged_emulator() as (emu, log):
        async with httpx2.AsyncClient(timeout=0.2) as http:
            toolset = PerplexityToolset(
                api_key=emu.api_key, base_url=emu.base_url, http_client=http, ledger=ledger_path, effort='fast'
            )
            [part] = await call_tools(toolset, [('perplexity_research', {'query': query_for('timeout', fault)})])
            await toolset.researcher.flush()
        until(lambda: log.billed('timeout'), what='the run the API started after the client gave up')
    text = text_of_part(part)
    assert outcome_of(part) == 'failed' and 'may have started' in text and 'not re-sent' in text, text
    assert len(log.matching('timeout')) == 1  # never re-sent
    with Ledger(ledger_path) as ledger:
        row = assert_attempt_kept(ledger.list(limit=10), 'timeout')
    assert 'ReadTimeout' in (row.error or '')
    record(
        'faults', 'toolset', fault.name,
        outcome='clear error: "a run may have started", not re-sent; attempt kept in the ledger',
        attempts=1, billed=1, events_once=0, lost=0,
    )  # fmt: skip


async def test_a_run_past_the_wait_budget_is_handed_off_then_collected(tmp_path: Path) -> None:
    ledger_path = tmp_path / 'ledger.sqlite3'
    with logged_emulator() as (emu, log):
        toolset, _ = toolset_on(emu, ledger_path, wait_seconds=0.05)
        async with toolset.researcher.client:
            questions = [f'A broad survey of the EU AI Act (handoff-{i}) [[emulate: duration=400]]' for i in range(5)]
            handoffs = await call_tools(toolset, [('perplexity_research', {'query': q}) for q in questions])
            ids = [h.metadata['research_result'].response_id for h in handoffs]
            for part, response_id in zip(handoffs, ids, strict=True):
                assert outcome_of(part) == 'success' and 'still going' in text_of_part(part)
                assert f'response_id="{response_id}"' in text_of_part(part)  # the id reached the model
            await toolset.researcher.flush()
            with Ledger(ledger_path) as ledger:
                assert {r.response_id for r in ledger.list(limit=10)} == set(ids)  # and the ledger
            collects = [('perplexity_research_result', {'response_id': rid, 'wait_seconds': 30}) for rid in ids]
            # A call never waits past its toolset's budget (0.05 s here): the runs are collected later by a toolset
            # with a longer one, as another process would collect them from the shared ledger.
            later, _ = toolset_on(emu, ledger_path, wait_seconds=30)
            async with later.researcher.client:
                collected = await call_tools(later, collects)
    for part in collected:
        assert part.metadata['research_result'].status == 'completed' and 'Sources:' in text_of_part(part)
    assert all(len(log.billed(f'handoff-{i}')) == len(log.matching(f'handoff-{i}')) == 1 for i in range(5))
    record(
        'faults', 'toolset', 'wait budget runs out (5 runs at once)',
        outcome='hand-off with the id, then collected: completed', attempts=1, billed=1, events_once=0, lost=0,
    )  # fmt: skip
