"""The ledger through the `Researcher`, across real processes: two processes researching at once into one ledger lose
no row, and a process killed with SIGKILL in the middle of its research leaves a ledger that is whole, readable and
writable, holding every run the process had reported. (`tests/test_ledger.py` proves the same of `Ledger` alone.)
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import anyio
import pytest

from pydantic_ai_perplexity import Researcher
from pydantic_ai_perplexity._ledger import Ledger
from pydantic_ai_perplexity.emulator import Emulator
from support.mcp_servers import DEADLINE, server_env
from support.reliability import logged_emulator, record, until

#: A process that researches `n` questions, `width` at a time, printing each run's id once it is recorded.
WORKER = """
import sys, anyio
from pydantic_ai_perplexity import Researcher

tag, n, width = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])

async def main():
    async with Researcher(effort='fast', wait_seconds=60) as r:
        limit = anyio.CapacityLimiter(width)

        async def one(i):
            async with limit:
                result = await r.run(f'What is the EU AI Act? ({tag}-{i})')
                await r.flush()
                print('recorded', result.response_id, result.status, flush=True)

        async with anyio.create_task_group() as tg:
            for i in range(n):
                tg.start_soon(one, i)

anyio.run(main)
"""


def worker(emu: Emulator, state: Path, tag: str, n: int, width: int) -> subprocess.Popen[bytes]:
    env = server_env(emu, state, PYDANTIC_DISABLE_PLUGINS='logfire-plugin')
    return subprocess.Popen(
        [sys.executable, '-c', WORKER, tag, str(n), str(width)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )


def ledger_rows(path: Path) -> dict[str, str]:
    with Ledger(path) as ledger:
        return {r.response_id: r.status for r in ledger.list(limit=10_000)}


def integrity(path: Path) -> str:
    db = sqlite3.connect(path)
    try:
        return db.execute('PRAGMA integrity_check').fetchone()[0]
    finally:
        db.close()


@pytest.mark.slow
def test_two_processes_researching_at_once_into_one_ledger_lose_no_row(tmp_path: Path) -> None:
    n = 25
    with logged_emulator(time_scale=0.0005) as (emu, log):
        processes = [worker(emu, tmp_path, tag, n, 5) for tag in ('first', 'second')]
        outputs = [p.communicate(timeout=DEADLINE * 2) for p in processes]
        assert [p.returncode for p in processes] == [0, 0], [err[-2000:] for _, err in outputs]
        started = {c.response_id for c in log.creates if c.response_id}
    reported = {line.split()[1] for out, _ in outputs for line in out.decode().splitlines()}
    rows = ledger_rows(tmp_path / 'ledger.sqlite3')
    assert len(reported) == len(started) == 2 * n
    assert set(rows) == started == reported  # every run both processes started, and nothing else
    assert set(rows.values()) == {'completed'}
    assert integrity(tmp_path / 'ledger.sqlite3') == 'ok'
    record(
        'ledger', 'researcher', f'2 processes x {n} research calls into one ledger',
        outcome=f'{len(rows)}/{2 * n} rows, all completed', rows=len(rows), expected=2 * n, lost=2 * n - len(rows),
    )  # fmt: skip


@pytest.mark.slow
def test_a_process_killed_mid_research_leaves_a_whole_ledger_with_every_reported_run(tmp_path: Path) -> None:
    path = tmp_path / 'ledger.sqlite3'
    with logged_emulator(time_scale=0.0005) as (emu, log):
        process = worker(emu, tmp_path, 'killed', 400, 8)
        lines: list[str] = []

        def read() -> None:
            assert process.stdout is not None
            for line in iter(process.stdout.readline, b''):
                lines.append(line.decode())

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        until(lambda: len(lines) >= 30 or process.poll() is not None, what='30 runs recorded')
        assert process.poll() is None, process.stderr.read() if process.stderr else b''
        os.kill(process.pid, signal.SIGKILL)  # in the middle of research: creates, waits and ledger writes in flight
        process.wait(timeout=DEADLINE)
        reader.join(DEADLINE)
        for pipe in (process.stdout, process.stderr):
            assert pipe is not None
            pipe.close()
        started = {c.response_id for c in log.creates if c.response_id}

        assert integrity(path) == 'ok'
        reported = {line.split()[1] for line in lines}
        rows = ledger_rows(path)
        assert reported <= set(rows)  # every run the process reported as recorded survived the kill
        assert set(rows) <= started | {r for r in rows if r.startswith('pending_')}
        assert all(rows[r] == 'completed' for r in reported)
        in_flight = started - set(rows)

        async def after() -> str:  # the file is not locked or half-written: a new process researches into it
            async with Researcher(api_key=emu.api_key, base_url=emu.base_url, ledger=path, effort='fast') as r:
                result = await r.run('What is the EU AI Act? (after the kill)')
            return result.response_id

        new_id = anyio.run(after)
    assert ledger_rows(path)[new_id] == 'completed'
    assert integrity(path) == 'ok'
    record(
        'ledger', 'researcher', 'SIGKILL in the middle of research (8 calls at once)',
        outcome=(
            f'integrity ok; {len(reported)}/{len(reported)} reported runs kept; {len(rows)} rows readable; '
            'writable after'
        ),
        rows=len(rows), reported=len(reported), started=len(started), in_flight_at_kill=len(in_flight), lost=0,
    )  # fmt: skip
