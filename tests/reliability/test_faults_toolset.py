"""Every fault the emulator can inject, through `PerplexityToolset` in a real pydantic-ai agent.

Each research call ends in a correct result or a clear failure the model reads; every run the API started is
recoverable (its id was returned, or it is in the ledger); a resumed stream hands on every event exactly once;
and no retry ever starts a second billed run.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from reliability_support import (
    FAULTS,
    EventSpy,
    call_tools,
    check_outcome,
    describe,
    logged_emulator,
    outcome_of,
    query_for,
    record,
    stream_gets,
    text_of_part,
    upstream_runs,
)

from pydantic_ai_perplexity import PerplexityClient, PerplexityToolset, Researcher
from pydantic_ai_perplexity.ledger import Ledger

pytestmark = pytest.mark.anyio


def toolset_on(emu, ledger: Path, **settings) -> tuple[PerplexityToolset, EventSpy]:
    client = PerplexityClient(api_key=emu.api_key, base_url=emu.base_url)
    spy = EventSpy(client)
    researcher = Researcher(client=client, ledger=ledger, origin='toolset', effort='fast', **settings)
    return PerplexityToolset(researcher=researcher), spy


async def test_every_fault_through_the_toolset(tmp_path: Path) -> None:
    ledger_path = tmp_path / 'ledger.sqlite3'
    with logged_emulator() as (emu, log):
        toolset, spy = toolset_on(emu, ledger_path, wait_seconds=30)
        async with toolset.researcher.client:
            await faults_through(toolset, spy, emu, log, ledger_path)


async def faults_through(toolset, spy, emu, log, ledger_path: Path) -> None:
    if True:
        calls = [('perplexity_research', {'query': query_for(f'toolset-{i}', f)}) for i, f in enumerate(FAULTS)]
        with anyio.fail_after(60):
            parts = await call_tools(toolset, calls)
            await toolset.researcher.flush()
        with Ledger(ledger_path) as ledger:
            recorded = {r.response_id: r for r in ledger.list(limit=500)}
        for i, (fault, part) in enumerate(zip(FAULTS, parts, strict=True)):
            check_outcome(fault, outcome_of(part), text_of_part(part))
            creates, billed = log.matching(f'toolset-{i}'), log.billed(f'toolset-{i}')
            assert len(creates) == fault.attempts, (fault, creates)
            assert len(billed) == fault.billed, (fault, creates)  # never a second billed run
            events = 0
            for create in billed:
                assert create.response_id in upstream_runs(emu)
                returned = create.response_id in text_of_part(part)
                assert returned or create.response_id in recorded  # recoverable
                assert recorded[create.response_id].status == fault.outcome  # and the ledger agrees
                events = spy.assert_exactly_once(emu, create.response_id)
                if fault.drops:
                    assert stream_gets(emu, create.response_id) >= 2  # the stream was cut and resumed
            record(
                'faults', 'toolset', fault.name,
                outcome=describe(fault, text_of_part(part)), attempts=len(creates), billed=len(billed),
                events_once=events, lost=0,
            )  # fmt: skip
