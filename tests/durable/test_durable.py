"""Durable research on DBOS: a worker SIGKILLed while a run goes on is restarted and collects the same run.

Real parts only: the emulator serves HTTP on loopback, each worker is a separate Python process running DBOS
(SQLite system database here; PostgreSQL in test_queue.py), the ledger is a real SQLite file.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from pydantic_ai_perplexity.durable import START_STEP
from pydantic_ai_perplexity.emulator import Emulator
from pydantic_ai_perplexity.ledger import Ledger

pytest.importorskip('dbos')

WORKER = Path(__file__).with_name('durable_worker.py')
DEADLINE = 60.0
CREATE_PATHS = ('/v1/agent', '/v1/responses')


def creates(emu: Emulator) -> int:
    return sum(1 for r in emu.requests if r.method == 'POST' and r.path in CREATE_PATHS and r.status == 200)


def wait_for(what: str, check: Callable[[], Any], *, deadline: float = DEADLINE, proc: Any = None) -> Any:
    """Poll `check` until it returns something truthy; fail naming `what` at the deadline or if `proc` exits."""
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        found = check()
        if found:
            return found
        if proc is not None and proc.poll() is not None:
            pytest.fail(f'the worker exited ({proc.returncode}) before {what}:\n{log_of(proc)}')
        time.sleep(0.05)
    pytest.fail(f'timed out after {deadline} s waiting for {what}')


def worker(mode: str, directory: Path, emu: Emulator, *extra: str, env: dict[str, str] | None = None) -> Any:
    environment = {
        **os.environ,
        'PERPLEXITY_API_KEY': emu.api_key,
        'PERPLEXITY_BASE_URL': emu.base_url,
        'PERPLEXITY_STATE_DIR': str(directory / 'state'),
        **(env or {}),
    }
    environment.pop('PERPLEXITY_BUDGET_USD', None)
    log = directory / f'worker-{time.monotonic_ns()}.log'
    with log.open('w') as out:
        proc = subprocess.Popen(
            [sys.executable, str(WORKER), mode, str(directory), *extra],
            env=environment,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    proc.log = log  # type: ignore[attr-defined]
    return proc


def log_of(proc: Any) -> str:
    return proc.log.read_text()[-3000:]


def started_run(directory: Path) -> str | None:
    """The response id the start step checkpointed, once DBOS has recorded it."""
    path = directory / 'dbos.sqlite3'
    if not path.exists():
        return None
    try:
        with sqlite3.connect(f'file:{path}?mode=ro', uri=True, timeout=5) as db:
            row = db.execute(
                'SELECT output FROM operation_outputs WHERE function_name = ? AND output IS NOT NULL', (START_STEP,)
            ).fetchone()
    except sqlite3.OperationalError:  # the schema is not there yet
        return None
    if row is None:
        return None
    import base64
    import pickle

    output = pickle.loads(base64.b64decode(row[0]))
    return output['response_id']


def spans(directory: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for path in directory.glob('spans-*.jsonl') for line in path.read_text().splitlines()]


@pytest.fixture
def emu() -> Iterator[Emulator]:
    # A `low` run lasts 20 emulated seconds: 4 s here, long enough to kill the worker while it waits.
    with Emulator(time_scale=0.2) as emulator:
        yield emulator


@pytest.mark.slow
@pytest.mark.parametrize('mode', ['pipeline'])
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
