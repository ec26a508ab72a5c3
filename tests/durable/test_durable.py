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

from pydantic_ai_perplexity._ledger import Ledger
from pydantic_ai_perplexity.emulator import Emulator
from support.durable import DEADLINE, creates, log_of, spans, started_runs, wait_for, worker

pytest.importorskip('dbos')


@pytest.fixture
def emu() -> Iterator[Emulator]:
    # A `low` run lasts 20 emulated seconds: 4 s here, long enough to kill the worker while it waits.
    with Emulator(time_scale=0.2) as emulator:
        yield emulator


@pytest.mark.slow
@pytest.mark.parametrize('mode', ['agent', 'capability', 'pipeline'])
def test_a_worker_killed_while_research_is_in_flight_collects_the_same_run(
    mode: str, emu: Emulator, tmp_path: Path
) -> None:
    # The agent (with the toolset or the capability) researches two questions at once (parallel tool calls); the
    # pipeline one.
    expected = 1 if mode == 'pipeline' else 2
    first = worker(mode, tmp_path, emu)
    try:
        response_ids = wait_for(
            'the start steps to be checkpointed', lambda: len(started_runs(tmp_path)) == expected, proc=first
        ) and started_runs(tmp_path)
        for response_id in response_ids:
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
    assert creates(emu) == expected

    second = worker(mode, tmp_path, emu)
    try:
        assert second.wait(timeout=DEADLINE) == 0, log_of(second)
    finally:
        if second.poll() is None:
            second.kill()
    result = json.loads((tmp_path / 'result.json').read_text())
    assert result['pid'] == second.pid
    # Each call got its own run back (the agent's calls in call order), and nothing was researched again.
    assert result['output'].split() == response_ids
    assert creates(emu) == expected

    ledger = Ledger(tmp_path / 'ledger.sqlite3')
    try:
        rows = ledger.list(limit=10)
    finally:
        ledger.close()
    assert sorted((r.response_id, r.status) for r in rows) == sorted((i, 'completed') for i in response_ids)
    assert all(r.cost_usd for r in rows)

    # Tracing survives the restart: the ledger keeps the ids of the span that started each run, and the
    # collection in the new process continues that trace (as a child) or links to that span.
    seen = spans(tmp_path)
    research = {(s['trace_id'], s['span_id']) for s in seen if s['name'] == 'perplexity.research'}
    assert all(s['pid'] == first.pid for s in seen if s['name'] == 'perplexity.research')
    assert {(r.trace_id, r.span_id) for r in rows} == research
    collected = [s for s in seen if s['name'] == 'perplexity.collect' and s['pid'] == second.pid]
    assert len(collected) == expected, 'the restarted worker should collect each run once'
    for span in collected:
        assert any(span['trace_id'] == t or [t, s] in span['links'] for t, s in research)


def _connected(pid: int, port: int) -> bool:
    """Whether process `pid` holds a TCP connection to `port` on loopback (its create request is on the wire)."""
    import os

    inodes = set()
    for fd in Path(f'/proc/{pid}/fd').iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith('socket:['):
            inodes.add(target[8:-1])
    for line in Path(f'/proc/{pid}/net/tcp').read_text().splitlines()[1:]:
        fields = line.split()
        remote_port = int(fields[2].split(':')[1], 16)
        if remote_port == port and fields[3] == '01' and fields[9] in inodes:  # 01: ESTABLISHED
            return True
    return False


def _intent(target: str) -> bool:
    with Ledger(target) as ledger:
        return any(r.status == 'reserved' and (r.request_id or '').startswith('dbos:') for r in ledger.list())


@pytest.fixture
def target(ledger_target: str) -> str:
    """The ledger of the test, on each engine (`ledger_target`)."""
    return ledger_target


@pytest.mark.slow
def test_a_worker_killed_while_its_create_is_in_flight_never_creates_again_on_recovery(
    emu: Emulator, tmp_path: Path, target: str
) -> None:
    """Without a budget. Before, the row was written only once the create answered, so the whole round trip was a
    window in which a killed worker's retried start step created (and billed) the run again. Now the step's row is
    written before the create: the retry finds it and refuses rather than creating again."""
    env = {'DURABLE_QUESTION': 'How do heat pumps work in cold climates? [[emulate: slow=3]]', 'DURABLE_LEDGER': target}
    first = worker('pipeline', tmp_path, emu, env=env)
    try:
        wait_for("the start step's row in the ledger", lambda: _intent(target), proc=first)
        wait_for('the create on the wire', lambda: _connected(first.pid, emu.port), proc=first)
        first.send_signal(signal.SIGKILL)  # the create is answered 3 s late: it is in flight
        assert first.wait(timeout=DEADLINE) == -signal.SIGKILL
    finally:
        if first.poll() is None:
            first.kill()
    wait_for("the killed worker's create to be answered", lambda: creates(emu) == 1)

    second = worker('pipeline', tmp_path, emu, env=env)
    try:
        assert second.wait(timeout=DEADLINE) != 0  # the workflow fails: a run may have started
    finally:
        if second.poll() is None:
            second.kill()
    assert 'RunMayHaveStartedError' in log_of(second)
    posts = [r for r in emu.requests if r.method == 'POST' and r.path in ('/v1/agent', '/v1/responses')]
    assert len(posts) == 1  # the first worker's create only: recovery never created again
    assert not (tmp_path / 'result.json').exists()
