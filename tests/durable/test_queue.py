"""`ResearchQueue` on PostgreSQL: three worker processes drain a queue of questions while one is SIGKILLed.

The DBOS system database and the ledger share the test PostgreSQL server (each in a fresh database or schema);
the emulator counts the creates. Every question gets an answer, each from exactly one run, billed once.
"""

from __future__ import annotations

import asyncio
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pydantic_ai_perplexity import Researcher
from pydantic_ai_perplexity._ledger import Ledger
from pydantic_ai_perplexity.durable import COLLECT_STEP, START_STEP
from pydantic_ai_perplexity.emulator import Emulator
from support.durable import DEADLINE, creates, log_of, wait_for, worker
from support.postgres import execute, fresh_schema, postgres_url

pytest.importorskip('dbos')

#: Questions in the batch. 60 takes about 15 s of CPU time here (most of it starting four worker processes).
QUESTIONS = 60
#: Questions on the queue whose workers share a budget that fits only a couple of runs at once.
CAPPED = 12
WORKERS = ('w1', 'w2', 'w3')


@pytest.fixture
def system_db() -> Iterator[str]:
    """A fresh database on the test server for DBOS's system tables; dropped afterwards."""
    base = postgres_url()
    name = f'dbos_{uuid.uuid4().hex[:12]}'
    execute(base, f'CREATE DATABASE {name}')
    url = base.rsplit('/', 1)[0] + '/' + name
    try:
        yield url
    finally:
        execute(base, f'DROP DATABASE IF EXISTS {name} WITH (FORCE)')


def in_flight(url: str, executor: str) -> int:
    """Workflows of `executor` that checkpointed their start step and are still waiting on their run."""
    rows = execute(
        url,
        """
        SELECT count(*) FROM dbos.workflow_status w
        WHERE w.executor_id = %s AND w.status = 'PENDING'
          AND EXISTS (SELECT 1 FROM dbos.operation_outputs o
                      WHERE o.workflow_uuid = w.workflow_uuid AND o.function_name = %s)
          AND NOT EXISTS (SELECT 1 FROM dbos.operation_outputs o
                          WHERE o.workflow_uuid = w.workflow_uuid AND o.function_name = %s)
        """,
        (executor, START_STEP, COLLECT_STEP),
    )
    return rows[0][0]


async def reservation_of_a_low_run(emu: Emulator, state: Path) -> float:
    """What the budget holds for one `low` run before it starts (read from a scratch ledger's row)."""
    ledger = Ledger(state / 'probe.sqlite3')
    async with Researcher(api_key=emu.api_key, base_url=emu.base_url, ledger=ledger, budget_usd=1000) as researcher:
        started = await researcher.start('How do heat pumps work? (probe)', effort='low')
        await researcher.flush()
        record = ledger.get(started.response_id)
    assert record is not None
    return record.estimate_usd


def wait_all(client: Any, ids: list[str], procs: dict[str, Any]) -> list[dict[str, Any]]:
    """Each workflow's result, in order, failing if a worker dies or the deadline passes."""
    end = time.monotonic() + 150
    results: list[dict[str, Any]] = []
    for workflow_id in ids:
        handle = client.retrieve_workflow(workflow_id)
        while handle.get_status().status not in ('SUCCESS', 'ERROR'):
            assert time.monotonic() < end, f'{workflow_id} did not finish in time'
            assert all(p.poll() is None for p in procs.values()), [log_of(p) for p in procs.values()]
            time.sleep(0.1)
        results.append(handle.get_result())
    return results


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_three_workers_drain_the_queue_while_one_is_killed(tmp_path: Path, system_db: str) -> None:
    from dbos import DBOSClient

    # A `low` run lasts 20 emulated seconds: 1 s here, so each worker has runs in flight most of the time.
    with Emulator(time_scale=0.05) as emu, fresh_schema() as ledger_url, fresh_schema() as capped_url:
        reserved = asyncio.run(reservation_of_a_low_run(emu, tmp_path))
        probe_creates = creates(emu)
        cap = 2.5 * reserved  # two runs at once fit, a third does not
        env = {
            'DURABLE_SYSTEM_DB': system_db,
            'PERPLEXITY_LEDGER_URL': ledger_url,
            'DURABLE_CAPPED_LEDGER': capped_url,
            'DURABLE_CAP': repr(cap),
        }
        procs: dict[str, Any] = {w: worker('queue', tmp_path, emu, w, env=env) for w in WORKERS}
        client = DBOSClient(system_database_url=system_db, application_name='durable-queue')
        try:
            for w, proc in procs.items():
                wait_for(f'worker {w} to start', lambda w=w: list(tmp_path.glob(f'ready-{w}-*')), proc=proc)
            questions = [f'How do heat pumps work in cold climates? (question {i})' for i in range(QUESTIONS)]
            ids = [f'q-{i}' for i in range(QUESTIONS)]
            for workflow_id, question in zip(ids, questions, strict=True):
                options: Any = {'queue_name': 'questions', 'workflow_name': 'questions.research'}
                client.enqueue({**options, 'workflow_id': workflow_id}, question, {'effort': 'low'})

            # Kill w2 while it waits on runs it started, then start it again: DBOS recovers its workflows.
            killed = wait_for('w2 to have runs in flight', lambda: in_flight(system_db, 'w2'), proc=procs['w2'])
            procs['w2'].send_signal(signal.SIGKILL)
            assert procs['w2'].wait(timeout=DEADLINE) == -signal.SIGKILL
            procs['w2'] = worker('queue', tmp_path, emu, 'w2', env=env)

            results = wait_all(client, ids, procs)
            batch_creates = creates(emu) - probe_creates

            # The budget holds across the workers: the ledger they share admits runs while they fit under the cap.
            capped_ids = [f'c-{i}' for i in range(CAPPED)]
            for i, workflow_id in enumerate(capped_ids):
                options = {'queue_name': 'capped', 'workflow_name': 'capped.research', 'workflow_id': workflow_id}
                client.enqueue(options, f'What is the EU AI Act? (capped {i})', {'effort': 'low'})
            capped = wait_all(client, capped_ids, procs)
            capped_creates = creates(emu) - probe_creates - batch_creates
        finally:
            client.destroy()
            for proc in procs.values():
                proc.kill()
                proc.wait(timeout=DEADLINE)

        assert killed >= 1
        assert [r['status'] for r in results] == ['completed'] * QUESTIONS
        assert [r['query'] for r in results] == questions
        response_ids = [r['response_id'] for r in results]
        assert len(set(response_ids)) == QUESTIONS
        assert batch_creates == QUESTIONS  # one create per question, the killed worker's included

        ledger = Ledger(ledger_url)
        try:
            rows = ledger.list(limit=10 * QUESTIONS)
        finally:
            ledger.close()
        # Nothing billed twice: one row per question, each the run its workflow answered with, each with its cost.
        assert sorted(r.response_id for r in rows) == sorted(response_ids)
        assert sorted(r.query for r in rows) == sorted(questions)
        assert all(r.status == 'completed' and r.cost_usd for r in rows)

        # A run the budget admits may be tightened to fit what is left (and end `incomplete`); one it cannot fit is
        # refused before it starts: no run, no create.
        ran = [r for r in capped if r['response_id']]
        refused = [r for r in capped if not r['response_id']]
        summary = [(r['status'], r['error']) for r in capped]
        assert ran and refused, summary
        assert all(r['status'] == 'failed' and 'refused by the budget' in (r['error'] or '') for r in refused), summary
        assert capped_creates == len(ran)  # a refused question never reached the API
        ledger = Ledger(capped_url)
        try:
            capped_rows = ledger.list(limit=10 * CAPPED)
            spent = ledger.spent_usd()
        finally:
            ledger.close()
        assert sorted(r.response_id for r in capped_rows) == sorted(r['response_id'] for r in ran)
        assert spent <= cap
