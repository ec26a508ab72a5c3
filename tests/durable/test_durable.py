"""Durable research on DBOS: a worker SIGKILLed while a run goes on is restarted and collects the same run.

Real parts only: the emulator serves HTTP on loopback, each worker is a separate Python process running DBOS
(SQLite system database here; PostgreSQL in test_queue.py), the ledger is a real SQLite file.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from durable_support import DEADLINE, creates, log_of, spans, started_run, wait_for, worker

from pydantic_ai_perplexity.emulator import Emulator
from pydantic_ai_perplexity.ledger import Ledger

pytest.importorskip('dbos')


@pytest.fixture
def emu() -> Iterator[Emulator]:
    # A `low` run lasts 20 emulated seconds: 4 s here, long enough to kill the worker while it waits.
    with Emulator(time_scale=0.2) as emulator:
        yield emulator


@pytest.mark.slow
@pytest.mark.parametrize('mode', ['agent', 'pipeline'])
def test_a_worker_killed_while_research_is_in_flight_collects_the_same_run(
    mode: str, emu: Emulator, tmp_path: Path
) -> None:
    first = worker(mode, tmp_path, emu)
    try:
        response_id = wait_for('the start step to be checkpointed', lambda: started_run(tmp_path), proc=first)
        status = httpx2.get(
            f'{emu.base_url}/v1/agent/{response_id}', headers={'Authorization': f'Bearer {emu.api_key}'}
        ).json()['status']
        assert status in ('queued', 'in_progress')  # the run is still going: the worker is waiting on it
        first.send_signal(signal.SIGKILL)
        assert first.wait(timeout=DEADLINE) == -signal.SIGKILL
    finally:
        if first.poll() is None:
            first.kill()
    assert not (tmp_path / 'result.json').exists()
    assert creates(emu) == 1

    second = worker(mode, tmp_path, emu)
    try:
        assert second.wait(timeout=DEADLINE) == 0, log_of(second)
    finally:
        if second.poll() is None:
            second.kill()
    result = json.loads((tmp_path / 'result.json').read_text())
    assert result['output'] == response_id
    assert result['pid'] == second.pid
    assert creates(emu) == 1  # collected, not researched again

    ledger = Ledger(tmp_path / 'ledger.sqlite3')
    try:
        rows = ledger.list(limit=10)
    finally:
        ledger.close()
    assert [(r.response_id, r.status) for r in rows] == [(response_id, 'completed')]
    assert rows[0].cost_usd is not None and rows[0].cost_usd > 0

    # Tracing survives the restart: the ledger keeps the ids of the span that started the run, and the
    # collection in the new process continues that trace (as a child) or links to that span.
    seen = spans(tmp_path)
    research = [s for s in seen if s['name'] == 'perplexity.research']
    assert len(research) == 1 and research[0]['pid'] == first.pid
    assert (rows[0].trace_id, rows[0].span_id) == (research[0]['trace_id'], research[0]['span_id'])
    collected = [s for s in seen if s['name'] == 'perplexity.collect' and s['pid'] == second.pid]
    assert collected, 'the restarted worker made no collect span'
    started = [research[0]['trace_id'], research[0]['span_id']]
    assert all(c['trace_id'] == started[0] or started in c['links'] for c in collected)
