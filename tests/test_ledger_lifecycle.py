"""The ledger's lifecycle and recovery, with real processes, a real emulator and a really full disk.

A script that never closes its `Researcher` exits cleanly with every row written (the shutdown order is flush, stop
the recorder, close); a forked child records through its own recorder; a full disk degrades the ledger without
switching it off, and what could not be stored is stored once space is free; text no store can hold is escaped at
the edge; the state directory and the ledger files are private to the user.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pydantic_ai_perplexity import Researcher
from pydantic_ai_perplexity._ledger import (
    BudgetUnenforceableError,
    Ledger,
    LedgerWarning,
    RunRecord,
    private_mode_problem,
    process_health,
)
from pydantic_ai_perplexity.emulator import Emulator
from support.disk import fill, mounted_small_disk
from support.postgres import fresh_schema

#: A script that researches three questions at once and never closes its researcher (nor the emulator).
UNCLOSED = """
import asyncio, sys
from pydantic_ai_perplexity import Researcher
from pydantic_ai_perplexity.emulator import Emulator

emu = Emulator(time_scale=0.001).__enter__()

async def main():
    r = Researcher(api_key=emu.api_key, base_url=emu.base_url, ledger=sys.argv[1], effort='fast', wait_seconds=30)
    results = await asyncio.gather(*(r.run(f'What is solar power? ({i})') for i in range(3)))
    print(' '.join(result.response_id for result in results), flush=True)

asyncio.run(main())
"""

#: A process that queues writes, forks, and both parent and child queue more and exit without closing anything.
FORKING = """
import functools, os, sys
from pydantic_ai_perplexity._ledger import Ledger, Recorder, RunRecord

ledger = Ledger(sys.argv[1])
recorder = Recorder()

def record(key):
    recorder.submit(functools.partial(ledger.record_start, RunRecord(response_id=key, query='q', origin='api')))

for i in range(40):
    record(f'resp_parent_{i}')
pid = os.fork()
for i in range(40):
    record(f'resp_{"child" if pid == 0 else "parent_late"}_{i}')
if pid:
    _, status = os.waitpid(pid, 0)
    sys.exit(os.waitstatus_to_exitcode(status))
"""


def rows(path: Path, sql: str = 'SELECT response_id, status FROM runs') -> dict[str, str]:
    db = sqlite3.connect(path)
    try:
        return {str(k): str(v) for k, v in db.execute(sql).fetchall()}
    finally:
        db.close()


def python(*args: str) -> subprocess.Popen[str]:
    env = {**os.environ, 'PYDANTIC_DISABLE_PLUGINS': 'logfire-plugin'}
    env.pop('PERPLEXITY_API_KEY', None)
    return subprocess.Popen(
        [sys.executable, '-c', *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )


# --- lifecycle ------------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_script_that_never_closes_its_researcher_exits_0_with_every_row_written(tmp_path: Path) -> None:
    attempts, width = 20, 4
    for batch in range(attempts // width):
        procs = {n: python(UNCLOSED, str(tmp_path / f'l{batch}-{n}.sqlite3')) for n in range(width)}
        for n, proc in procs.items():
            out, err = proc.communicate(timeout=90)
            assert proc.returncode == 0, (proc.returncode, err[-2000:])  # was 139 (SIGSEGV) in 2 of 3 runs
            ids = out.split()
            assert len(ids) == 3
            recorded = rows(tmp_path / f'l{batch}-{n}.sqlite3')
            assert {i: recorded.get(i) for i in ids} == dict.fromkeys(ids, 'completed'), err[-2000:]


@pytest.mark.slow
def test_a_forked_child_records_through_its_own_recorder_and_both_exit_with_every_row(tmp_path: Path) -> None:
    path = tmp_path / 'ledger.sqlite3'
    proc = python(FORKING, str(path))
    _, err = proc.communicate(timeout=90)
    assert proc.returncode == 0, err[-2000:]
    recorded = rows(path)
    expected = {f'resp_{who}_{i}' for who in ('parent', 'child', 'parent_late') for i in range(40)}
    assert set(recorded) == expected
    assert rows(path, "SELECT 'integrity', * FROM pragma_integrity_check") == {'integrity': 'ok'}


# --- recovery -------------------------------------------------------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    with mounted_small_disk(tmp_path) as mount:
        yield mount


@pytest.mark.compat  # mounts a small filesystem: root
@pytest.mark.anyio
async def test_a_full_disk_degrades_the_ledger_and_every_run_is_on_disk_once_space_is_free(small_disk: Path) -> None:
    path = small_disk / 'state' / 'ledger.sqlite3'
    with Emulator(time_scale=0.001) as emu:
        async with Researcher(
            api_key=emu.api_key, base_url=emu.base_url, ledger=str(path), effort='fast', wait_seconds=30
        ) as researcher:
            assert researcher.ledger is not None
            first = await researcher.run('What is solar power? (before)')
            await researcher.flush()
            filler = fill(small_disk)
            with pytest.warns(LedgerWarning, match='full'):
                second = await researcher.run('What is solar power? (disk full)')
                await researcher.flush()
            health = researcher.ledger.health()
            assert health.status == 'degraded' and health.waiting >= 1, health
            assert process_health().status == 'degraded'
            with pytest.raises(BudgetUnenforceableError, match='waiting to be stored'):  # a cap cannot be enforced now
                researcher.ledger.reserve(RunRecord(query='q', origin='api', effort='fast'), cap_usd=5.0)
            filler.unlink()
            third = await researcher.run('What is solar power? (space freed)')
            await researcher.flush()
            assert researcher.ledger.health().status == 'ok'
            listed = {r.response_id: r.status for r in await researcher.list()}
    ids = [first.response_id, second.response_id, third.response_id]
    assert {i: listed.get(i) for i in ids} == dict.fromkeys(ids, 'completed')
    on_disk = rows(path, 'SELECT response_id, cost_usd FROM runs')
    assert all(on_disk.get(i) not in (None, 'None') for i in ids)  # the actual cost of each billed run


@pytest.fixture(params=['sqlite', 'postgres'])
def any_ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Ledger]:
    if request.param == 'sqlite':
        with Ledger(tmp_path / 'state' / 'ledger.sqlite3') as ledger:
            yield ledger
    else:
        with fresh_schema() as url, Ledger(url) as ledger:
            yield ledger


def test_text_no_store_can_hold_is_escaped_and_the_ledger_goes_on(any_ledger: Ledger) -> None:
    ledger = any_ledger  # pytest turns any warning into an error here: none may be emitted
    assert ledger.get('resp_\udcff') is None  # `jobs show $'resp_\\xff'`: once switched the ledger off for good
    ledger.record_start(RunRecord(response_id='resp_\udcff', query='caf\udce9 \ud800', origin='cli'))
    ledger.update('resp_\udcff', status='completed', error='bad \udcff byte', cost_usd=0.01)
    found = ledger.get('resp_\udcff')
    assert found is not None
    assert (found.response_id, found.query, found.error) == ('resp_\\udcff', 'caf\\udce9 \\ud800', 'bad \\udcff byte')
    assert [r.response_id for r in ledger.list(caller=None, status='completed')] == ['resp_\\udcff']
    assert ledger.health().status == 'ok' and ledger.healthy
    token = ledger.reserve(RunRecord(query='next', origin='cli', estimate_usd=0.01), cap_usd=1.0)  # a cap still holds
    assert ledger.spent_usd() == pytest.approx(0.02)
    ledger.release(token)


# --- privacy --------------------------------------------------------------------------------------------------------


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_state_directory_and_the_ledger_files_are_private(tmp_path: Path) -> None:
    path = tmp_path / 'state' / 'ledger.sqlite3'
    old = os.umask(0o022)  # the usual umask, under which files were 0644 in a 0755 directory
    try:
        with Ledger(path) as ledger:
            ledger.record_start(RunRecord(response_id='resp_1', query='a private question', origin='api'))
            files = [path, path.with_name('ledger.sqlite3-wal'), path.with_name('ledger.sqlite3-shm')]
            assert {p.name: mode(p) for p in files} == {p.name: 0o600 for p in files}
            assert mode(path.parent) == 0o700
    finally:
        os.umask(old)
    assert private_mode_problem(path) is None
    os.chmod(path, 0o644)
    os.chmod(path.parent, 0o755)
    problem = private_mode_problem(path)
    assert problem is not None and f'{path} is 0644' in problem and f'{path.parent} is 0755' in problem


def test_doctor_warns_about_a_world_readable_ledger_with_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pydantic_ai_perplexity._core import doctor

    state = tmp_path / 'state'
    monkeypatch.setenv('PERPLEXITY_STATE_DIR', str(state))
    monkeypatch.delenv('PERPLEXITY_LEDGER_URL', raising=False)
    with Ledger() as ledger:
        ledger.record_start(RunRecord(response_id='resp_1', query='q', origin='api'))
    os.chmod(state / 'ledger.sqlite3', 0o644)
    checks: list[Any] = [doctor._ledger_privacy_check()]  # pyright: ignore[reportPrivateUsage]
    (check,) = checks
    assert not check.ok
    assert 'chmod 600' in check.fix and 'chmod 700' in check.fix and str(state) in check.fix and '0644' in check.detail
    os.chmod(state / 'ledger.sqlite3', 0o600)
    os.chmod(state, 0o700)
    with contextlib.suppress(FileNotFoundError):
        for extra in ('ledger.sqlite3-wal', 'ledger.sqlite3-shm'):
            os.chmod(state / extra, 0o600)
    assert doctor._ledger_privacy_check().ok  # pyright: ignore[reportPrivateUsage]


@pytest.mark.compat  # mounts a small filesystem: root
@pytest.mark.anyio
async def test_over_mcp_http_a_full_disk_shows_in_healthz_and_every_run_is_listed_once_space_is_free(
    small_disk: Path,
) -> None:
    import httpx2

    from support.mcp_servers import server_env
    from support.scale import Instance, call_tool

    state = small_disk / 'state'
    with Emulator(time_scale=0.001) as emu:
        instance = Instance(server_env(emu, state, PERPLEXITY_WAIT_SECONDS='30'))
        try:
            instance.wait_listening()
            async with httpx2.AsyncClient(timeout=60) as http:

                async def research(n: int) -> str:
                    outcome = await call_tool(
                        http,
                        instance.url,
                        'perplexity_research',
                        {'query': f'What is solar power? ({n})', 'effort': 'fast'},
                    )
                    assert outcome.ok, outcome
                    return str(outcome.structured['response_id'])

                async def health() -> dict[str, Any]:
                    return (await http.get(instance.health_url)).json()

                ids = [await research(1)]
                assert await health() == {'status': 'ok', 'ledger': 'ok'}
                filler = fill(small_disk)
                ids.append(await research(2))  # research goes on; its ledger writes are kept in memory
                degraded = await health()
                assert degraded['status'] == 'degraded' and degraded['ledger'] == 'degraded' and degraded['waiting'] > 0
                filler.unlink()
                ids.append(await research(3))
                assert await health() == {'status': 'ok', 'ledger': 'ok'}
                listed = await call_tool(http, instance.url, 'perplexity_research_list', {'limit': 10})
                assert listed.ok, listed
        finally:
            instance.stop()
    assert all(i in listed.text for i in ids), listed.text  # once: "No research runs recorded yet", 1 of 3 on disk
    on_disk = rows(state / 'ledger.sqlite3', 'SELECT response_id, status FROM runs')
    assert {i: on_disk.get(i) for i in ids} == dict.fromkeys(ids, 'completed')


@pytest.mark.slow
def test_kept_writes_are_bounded_with_a_warning_and_the_newest_are_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from pydantic_ai_perplexity._ledger import _ledger as ledger_package
    from pydantic_ai_perplexity._ledger import _sqlite

    monkeypatch.setattr(_sqlite, '_BUSY_TIMEOUT_MS', 10)
    monkeypatch.setattr(ledger_package, 'BACKLOG_LIMIT', 3)
    path = tmp_path / 'ledger.sqlite3'
    with Ledger(path) as ledger:
        ledger.record_start(RunRecord(response_id='resp_0', query='q', origin='api'))
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute('BEGIN IMMEDIATE')  # another process holds the write lock: every write fails for now
        try:
            with pytest.warns(LedgerWarning, match='kept in memory'):
                for n in range(1, 6):
                    ledger.record_start(RunRecord(response_id=f'resp_{n}', query='q', origin='api'))
            assert ledger.health().waiting == 3
        finally:
            holder.execute('COMMIT')
            holder.close()
        assert 'the oldest are being dropped' in caplog.text
        assert ledger.health().status == 'ok'
        assert sorted(r.response_id for r in ledger.list()) == ['resp_0', 'resp_3', 'resp_4', 'resp_5']


def test_a_run_on_the_built_in_emulator_leaves_no_charge_against_the_real_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from pydantic_ai_perplexity.cli import cli

    monkeypatch.delenv('PERPLEXITY_API_KEY', raising=False)
    monkeypatch.delenv('PERPLEXITY_BASE_URL', raising=False)
    monkeypatch.setenv('PERPLEXITY_STATE_DIR', str(tmp_path))
    done = CliRunner().invoke(cli, ['research', '--no-wait', '--effort', 'high', 'What is solar power?'])
    assert done.exit_code == 0, done.output
    with Ledger() as ledger:
        (record,) = ledger.list()
        assert record.emulated and record.api is not None and record.api.startswith('127.0.0.1:')
        assert ledger.spent_usd(emulated=False) == 0.0  # once: a `queued ~$1.00` row that blocked real budgets
        token = ledger.reserve(RunRecord(query='real', origin='cli', estimate_usd=0.10), cap_usd=0.10)
        ledger.release(token)
