"""The run ledger and the budget on both engines: real SQLite files and a real PostgreSQL server, with real
processes where concurrency is the point.

Tests that take the `ledger` or `target` fixture run once per engine; PostgreSQL ones get a fresh schema each and
need `PERPLEXITY_TEST_POSTGRES_URL` (see `tests/support/postgres.py`). Tests of SQLite's file handling take `path`.
"""

from __future__ import annotations

import logging
import math
import os
import pickle
import signal
import socket
import sqlite3
import threading
import warnings
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from pydantic_ai_perplexity._base.errors import BudgetExceededError, ConfigurationError
from pydantic_ai_perplexity._ledger import (
    ESTIMATED_COST_USD,
    MIGRATIONS,
    RESERVED,
    SCHEMA_VERSION,
    BudgetUnenforceableError,
    Ledger,
    LedgerWarning,
    RunRecord,
    _postgres,
    _sqlite,
    budget_from_env,
    default_ledger_path,
    estimate_cost,
    is_provisional,
)
from pydantic_ai_perplexity._ledger import _ledger as _ledger_package
from support import ledger as shared
from support.ledger import JOIN_TIMEOUT, join_all
from support.postgres import execute, fresh_schema

# The ledger's fixtures: each test that takes `target` or `ledger` runs on SQLite and on PostgreSQL.
engine, path, target, ledger, spawn = shared.engine, shared.path, shared.target, shared.ledger, shared.spawn


@pytest.fixture(autouse=True)
def _clean_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv('PERPLEXITY_BUDGET_USD', raising=False)
    monkeypatch.delenv('PERPLEXITY_STATE_DIR', raising=False)
    monkeypatch.delenv('PERPLEXITY_LEDGER_URL', raising=False)


@pytest.fixture
def postgres_target() -> Iterator[str]:
    with fresh_schema() as url:
        yield url


def run(response_id: str, **fields: Any) -> RunRecord:
    fields.setdefault('query', f'query for {response_id}')
    fields.setdefault('origin', 'toolset')
    return RunRecord(response_id=response_id, **fields)


def raw_rows(path: Path | str, sql: str) -> list[Any]:
    """Rows of `sql` read past the ledger: from the SQLite file, or from the PostgreSQL schema of a target URL."""
    if isinstance(path, str) and path.startswith('postgresql://'):
        return [tuple(row) for row in execute(path, sql)]
    db = sqlite3.connect(path)
    try:
        return db.execute(sql).fetchall()
    finally:
        db.close()


# --- records --------------------------------------------------------------------------------------------------------


def test_every_field_round_trips(ledger: Ledger) -> None:
    created = datetime(2026, 3, 4, 5, 6, 7, 891011, tzinfo=UTC)
    record = RunRecord(
        response_id='resp_0b1c2d3e-0000-4000-8000-000000000001',
        created_at=created,
        updated_at=created + timedelta(seconds=90),
        query='What changed in SQLite 3.40?\nWith a newline, quotes \' " and ünïcode.',
        effort='high@2026-10-16.0',
        model='openai/gpt-5.2',
        status='completed',
        origin='mcp',
        sources=12,
        cited=7,
        input_tokens=123_456,
        output_tokens=7_890,
        cost_usd=0.4321,
        estimate_usd=1.0,
        error='upstream said: partial',
        trace_id='0af7651916cd43dd8448eb211c80319c',
        span_id='b7ad6b7169203331',
        caller='notebook-token',
        request_id='mcp-http:7',
        cancel_requested_at=created + timedelta(seconds=30),
        cancel_requested_by='mcp-client',
    )
    ledger.record_start(record)
    assert ledger.get(record.response_id) == record
    assert record.request_kind == 'call'  # set from the key's form
    assert ledger.get('resp_unknown') is None


def test_record_defaults_to_utc_times_and_an_estimate_from_its_effort() -> None:
    record = run('resp_a', effort='xhigh', created_at=datetime(2026, 1, 1, 12, tzinfo=timezone(timedelta(hours=2))))
    assert record.created_at == datetime(2026, 1, 1, 10, tzinfo=UTC)
    assert record.created_at.tzinfo is UTC
    assert record.updated_at == record.created_at
    assert record.estimate_usd == ESTIMATED_COST_USD['xhigh']
    assert run('resp_b', estimate_usd=0.0).estimate_usd == 0.0
    assert is_provisional(RunRecord(query='q', origin='cli').response_id)
    assert not is_provisional('resp_0b1c2d3e')


def test_times_from_other_zones_are_stored_and_read_in_utc(ledger: Ledger) -> None:
    local = datetime(2026, 6, 1, 9, 30, tzinfo=timezone(timedelta(hours=-7)))
    ledger.record_start(run('resp_tz', created_at=local))
    got = ledger.get('resp_tz')
    assert got is not None
    assert got.created_at == local
    assert got.created_at.tzinfo == UTC


def test_recording_a_run_twice_keeps_the_first_row(ledger: Ledger) -> None:
    ledger.record_start(run('resp_1', query='first'))
    ledger.record_start(run('resp_1', query='second'))
    got = ledger.get('resp_1')
    assert got is not None
    assert got.query == 'first'


def test_list_is_newest_first_and_filters_by_status_and_origin(ledger: Ledger) -> None:
    start = datetime(2026, 5, 1, tzinfo=UTC)
    specs = [
        ('resp_1', 'completed', 'toolset'),
        ('resp_2', 'failed', 'mcp'),
        ('resp_3', 'completed', 'mcp'),
        ('resp_4', 'in_progress', 'cli'),
        ('resp_5', 'completed', 'mcp'),
    ]
    for minute, (response_id, status, origin) in enumerate(specs):
        ledger.record_start(
            run(response_id, status=status, origin=origin, created_at=start + timedelta(minutes=minute))
        )

    def ids(records: list[RunRecord]) -> list[str]:
        return [r.response_id for r in records]

    assert ids(ledger.list()) == ['resp_5', 'resp_4', 'resp_3', 'resp_2', 'resp_1']
    assert ids(ledger.list(limit=2)) == ['resp_5', 'resp_4']
    assert ids(ledger.list(status='completed')) == ['resp_5', 'resp_3', 'resp_1']
    assert ids(ledger.list(origin='mcp')) == ['resp_5', 'resp_3', 'resp_2']
    assert ids(ledger.list(status='completed', origin='mcp', limit=1)) == ['resp_5']
    assert ledger.list(status='cancelled') == []
    assert ledger.list(limit=0) == []


def test_runs_created_in_the_same_instant_list_in_reverse_insertion_order(ledger: Ledger) -> None:
    same = datetime(2026, 5, 1, tzinfo=UTC)
    for n in range(3):
        ledger.record_start(run(f'resp_{n}', created_at=same))
    assert [r.response_id for r in ledger.list()] == ['resp_2', 'resp_1', 'resp_0']


def test_update_sets_fields_and_moves_updated_at(ledger: Ledger) -> None:
    created = datetime(2026, 1, 1, tzinfo=UTC)
    ledger.record_start(run('resp_u', created_at=created, effort='medium'))
    ledger.update(
        'resp_u',
        status='completed',
        model='openai/gpt-5.2',
        sources=9,
        cited=4,
        input_tokens=1000,
        output_tokens=200,
        cost_usd=0.12,
        error=None,
    )
    got = ledger.get('resp_u')
    assert got is not None
    assert (got.status, got.model, got.sources, got.cited) == ('completed', 'openai/gpt-5.2', 9, 4)
    assert (got.input_tokens, got.output_tokens, got.cost_usd) == (1000, 200, 0.12)
    assert got.created_at == created
    assert got.updated_at > created
    ledger.update('resp_not_recorded', status='completed')  # nothing to update: no error, no row
    assert ledger.get('resp_not_recorded') is None


def test_update_rejects_unknown_or_fixed_fields_and_wrong_types(ledger: Ledger) -> None:
    ledger.record_start(run('resp_t'))
    with pytest.raises(TypeError, match='colour'):
        ledger.update('resp_t', colour='blue')
    with pytest.raises(TypeError, match='cannot be updated: response_id'):
        ledger.update('resp_t', response_id='resp_other')
    with pytest.raises(TypeError, match='created_at'):
        ledger.update('resp_t', created_at=datetime.now(UTC))
    with pytest.raises(TypeError, match='sources'):
        ledger.update('resp_t', sources='many')
    with pytest.raises(TypeError, match='origin'):
        ledger.update('resp_t', origin='carrier-pigeon')
    got = ledger.get('resp_t')
    assert got is not None
    assert got.status == 'queued'


# --- schema ---------------------------------------------------------------------------------------------------------


def test_migrations_run_once_and_the_schema_is_versioned(engine: str, target: str) -> None:
    for _ in range(2):
        with Ledger(target) as ledger:
            ledger.record_start(run('resp_m'))
    applied = raw_rows(target, 'SELECT name, applied_at FROM _migrations ORDER BY name')
    names = [fn.__name__ for fn in MIGRATIONS]
    assert (
        [name for name, _ in applied]
        == names
        == [
            'm001_initial',
            'm002_runs_caller',
            'm003_runs_api_emulated_request',
            'm004_money_in_micros_and_scope',
            'm005_runs_cost_details',
            'm006_prices',
            'm007_runs_fingerprint',
            'm008_request_kind_and_cancel_marks',
        ]
    )
    assert len(names) == SCHEMA_VERSION
    applied_at = applied[0][1]
    if isinstance(applied_at, str):
        applied_at = datetime.fromisoformat(applied_at)
    assert applied_at.utcoffset() == timedelta(0)
    if engine == 'sqlite':
        assert raw_rows(target, 'PRAGMA user_version') == [(SCHEMA_VERSION,)]
        indexes = {name for (name,) in raw_rows(target, "SELECT name FROM sqlite_master WHERE type = 'index'")}
    else:
        sql = 'SELECT indexname FROM pg_indexes WHERE schemaname = current_schema()'
        indexes = {name for (name,) in raw_rows(target, sql)}
    assert {'runs_created_at', 'runs_status', 'runs_caller', 'runs_scope'} <= indexes
    assert raw_rows(target, 'SELECT count(*) FROM runs') == [(1,)]


def test_a_database_from_a_newer_version_is_used_as_it_is(engine: str, target: str) -> None:
    with Ledger(target) as ledger:
        ledger.record_start(run('resp_old'))
    if engine == 'sqlite':
        db = sqlite3.connect(target)
        db.execute(f'PRAGMA user_version = {SCHEMA_VERSION + 5}')
        db.execute("ALTER TABLE runs ADD COLUMN added_later TEXT NOT NULL DEFAULT ''")
        db.execute("INSERT INTO _migrations VALUES ('m999_added_later', '2030-01-01T00:00:00.000000+00:00')")
        db.commit()
        db.close()
    else:
        raw_rows(target, "ALTER TABLE runs ADD COLUMN added_later text NOT NULL DEFAULT ''")
        raw_rows(target, "INSERT INTO _migrations VALUES ('m999_added_later', now())")
    with Ledger(target) as ledger:
        ledger.record_start(run('resp_new'))
        assert [r.response_id for r in ledger.list()] == ['resp_new', 'resp_old']
        assert ledger.healthy
    if engine == 'sqlite':
        assert raw_rows(target, 'PRAGMA user_version') == [(SCHEMA_VERSION + 5,)]
    assert len(raw_rows(target, 'SELECT name FROM _migrations')) == SCHEMA_VERSION + 1


def test_the_connection_uses_wal_full_sync_busy_timeout_and_foreign_keys(path: Path) -> None:
    with Ledger(path) as ledger:
        assert ledger.check()
        assert raw_rows(path, 'PRAGMA journal_mode') == [('wal',)]  # persistent: stored in the file
        engine = ledger._engine
        assert isinstance(engine, _sqlite.SQLiteEngine)
        db = engine._db  # per-connection settings can only be read on the ledger's own connection
        assert db is not None
        assert db.execute('PRAGMA synchronous').fetchone() == (2,)  # FULL
        assert db.execute('PRAGMA busy_timeout').fetchone() == (5000,)
        assert db.execute('PRAGMA foreign_keys').fetchone() == (1,)
        assert db.isolation_level is None


def test_postgres_sessions_have_timeouts_and_a_name(postgres_target: str) -> None:
    with Ledger(postgres_target) as ledger:
        assert ledger.check()
        engine = ledger._engine
        assert isinstance(engine, _postgres.PostgresEngine)
        conn, _, pool = engine._acquire()
        try:
            row = conn.execute(
                "SELECT current_setting('statement_timeout'), current_setting('lock_timeout'), "
                "current_setting('idle_in_transaction_session_timeout')"
            ).fetchone()
            assert row == ('15s', '10s', '30s')
            assert conn.autocommit
        finally:
            pool.release(conn)


def test_nothing_is_created_before_first_use_and_close_allows_reopening(engine: str, target: str) -> None:
    ledger = Ledger(target)
    if engine == 'sqlite':
        assert not Path(target).parent.exists()
    else:
        assert raw_rows(target, "SELECT to_regclass('runs') IS NULL") == [(True,)]
    ledger.record_start(run('resp_lazy'))
    if engine == 'sqlite':
        assert Path(target).exists()
    else:
        assert raw_rows(target, "SELECT to_regclass('runs') IS NULL") == [(False,)]
    ledger.close()
    ledger.close()
    assert ledger.get('resp_lazy') is not None  # opened again
    ledger.close()


def test_a_ledger_pickles_as_its_path_or_url(ledger: Ledger, target: str) -> None:
    ledger.record_start(run('resp_p'))
    with pickle.loads(pickle.dumps(ledger)) as copy:
        assert copy.describe() == ledger.describe()
        assert copy.path == ledger.path
        assert copy.get('resp_p') is not None


# --- location -------------------------------------------------------------------------------------------------------


def test_default_path_honours_perplexity_state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv('PERPLEXITY_STATE_DIR', str(tmp_path / 'custom'))
    assert default_ledger_path() == tmp_path / 'custom' / 'ledger.sqlite3'
    with Ledger() as ledger:
        assert ledger.path == tmp_path / 'custom' / 'ledger.sqlite3'
        ledger.record_start(run('resp_env'))
    assert (tmp_path / 'custom' / 'ledger.sqlite3').exists()


def test_default_path_without_state_dir_is_the_user_state_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv('PERPLEXITY_STATE_DIR', '  ')
    path = default_ledger_path()
    assert path.name == 'ledger.sqlite3'
    assert 'pydantic-ai-perplexity' in path.parts


def test_the_filesystem_of_a_directory_is_read_from_the_mount_table() -> None:
    mounts = '\n'.join(
        [
            '/dev/vda / ext4 rw,relatime 0 0',
            'server:/export /mnt/shared nfs4 rw 0 0',
            'tmpfs /mnt/shared/tmp tmpfs rw 0 0',
            '//host/share /mnt/with\\040space cifs rw 0 0',
        ]
    )
    filesystem_type = _sqlite._filesystem_type
    assert filesystem_type('/home/me/.local/state', mounts) == 'ext4'
    assert filesystem_type('/mnt/shared/ledger', mounts) == 'nfs4'
    assert filesystem_type('/mnt/shared', mounts) == 'nfs4'
    assert filesystem_type('/mnt/shared/tmp/x', mounts) == 'tmpfs'
    assert filesystem_type('/mnt/sharedother', mounts) == 'ext4'
    assert filesystem_type('/mnt/with space/x', mounts) == 'cifs'


def test_the_engine_is_chosen_by_the_argument_or_perplexity_ledger_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv('PERPLEXITY_STATE_DIR', str(tmp_path / 'default'))
    for url in ('postgresql://me@db.example:5432/runs', 'postgres://me@db.example/runs', 'POSTGRESQL://me@h/db'):
        ledger = Ledger(url)
        assert (ledger.engine, ledger.path, ledger.url, ledger.describe()) == ('postgres', None, url, url)
    assert Ledger(f'sqlite:///{tmp_path}/a.sqlite3').path == tmp_path / 'a.sqlite3'  # sqlite:////absolute
    assert Ledger('sqlite:///relative.sqlite3').path == Path('relative.sqlite3')
    assert Ledger('sqlite://').path == tmp_path / 'default' / 'ledger.sqlite3'
    assert Ledger(str(tmp_path / 'b.sqlite3')).path == tmp_path / 'b.sqlite3'
    assert Ledger(tmp_path / 'c.sqlite3').path == tmp_path / 'c.sqlite3'
    sqlite_ledger = Ledger(tmp_path / 'c.sqlite3')
    assert (sqlite_ledger.engine, sqlite_ledger.url, sqlite_ledger.describe()) == (
        'sqlite',
        None,
        str(tmp_path / 'c.sqlite3'),
    )
    assert Ledger().path == tmp_path / 'default' / 'ledger.sqlite3'

    monkeypatch.setenv('PERPLEXITY_LEDGER_URL', ' postgresql://team@db.example/runs ')
    assert (Ledger().engine, Ledger().url) == ('postgres', 'postgresql://team@db.example/runs')
    assert Ledger(tmp_path / 'c.sqlite3').engine == 'sqlite'  # the argument wins
    monkeypatch.setenv('PERPLEXITY_LEDGER_URL', f'sqlite:///{tmp_path}/d.sqlite3')
    assert Ledger().path == tmp_path / 'd.sqlite3'
    monkeypatch.setenv('PERPLEXITY_LEDGER_URL', '')
    assert Ledger().path == tmp_path / 'default' / 'ledger.sqlite3'

    monkeypatch.setenv('PERPLEXITY_LEDGER_URL', 'mysql://me:hunter2pw@db.example/runs')
    with pytest.raises(ConfigurationError, match="PERPLEXITY_LEDGER_URL is a URL with the scheme 'mysql'") as caught:
        Ledger()
    assert 'hunter2pw' not in str(caught.value)


def test_a_postgres_url_without_its_driver_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    real_find_spec = _ledger_package.importlib.util.find_spec
    monkeypatch.setattr(
        _ledger_package.importlib.util,
        'find_spec',
        lambda name, *args: None if name == 'psycopg' else real_find_spec(name, *args),
    )
    with pytest.raises(ConfigurationError) as caught:
        Ledger('postgresql://me:hunter2pw@db.example/runs')
    message = str(caught.value)
    assert 'pip install "pydantic-ai-perplexity[postgres]"' in message
    assert 'postgresql://me:***@db.example/runs' in message
    assert 'hunter2pw' not in message


@pytest.mark.parametrize(
    ('url', 'shown', 'secrets'),
    [
        ('postgresql://me:pw1234@h:5432/db', 'postgresql://me:***@h:5432/db', {'pw1234'}),
        ('postgresql://me@h/db', 'postgresql://me@h/db', set()),
        ('postgresql://me:p%40ss%3Aw0rd@h/db', 'postgresql://me:***@h/db', {'p%40ss%3Aw0rd', 'p@ss:w0rd'}),
        (
            'postgres://h1:5432,h2:5433/db?password=qwerty&sslmode=require&sslpassword=keypw',
            'postgres://h1:5432,h2:5433/db?password=***&sslmode=require&sslpassword=***',
            {'qwerty', 'keypw'},
        ),
        ('postgresql:///db?host=/run/postgresql', 'postgresql:///db?host=/run/postgresql', set()),
    ],
)
def test_the_password_is_taken_out_of_the_url(url: str, shown: str, secrets: set[str]) -> None:
    assert _postgres.redact_url(url) == (shown, frozenset(secrets))


# --- budget ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ('effort', 'expected'),
    [
        ('fast', 0.01),
        ('low', 0.05),
        ('medium', 0.25),
        ('high', 1.00),
        ('xhigh', 3.00),
        ('HIGH', 1.00),
        ('fast@2026-10-16.0', 0.01),
        ('deep-research', 0.25),
        ('advanced-deep-research', 1.00),
        ('no-such-effort', 0.25),
        (None, 0.25),
    ],
)
def test_estimate_cost_per_effort(effort: str | None, expected: float) -> None:
    assert estimate_cost(effort) == expected


@pytest.mark.parametrize(('value', 'expected'), [(None, None), ('', None), ('5', 5.0), (' 12.50 ', 12.5), ('$3', 3.0)])
def test_budget_from_env(monkeypatch: pytest.MonkeyPatch, value: str | None, expected: float | None) -> None:
    if value is not None:
        monkeypatch.setenv('PERPLEXITY_BUDGET_USD', value)
    assert budget_from_env() == expected


@pytest.mark.parametrize('value', ['five dollars', '-1', 'nan', 'inf'])
def test_an_invalid_budget_in_the_environment_names_the_variable(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv('PERPLEXITY_BUDGET_USD', value)
    with pytest.raises(ConfigurationError, match='PERPLEXITY_BUDGET_USD'):
        budget_from_env()


def test_spend_counts_actual_cost_when_known_else_the_estimate(ledger: Ledger) -> None:
    assert ledger.spent_usd() == 0.0
    old = datetime(2026, 1, 1, tzinfo=UTC)
    new = datetime(2026, 2, 1, tzinfo=UTC)
    ledger.record_start(run('resp_done', estimate_usd=1.0, created_at=old))
    ledger.update('resp_done', status='completed', cost_usd=0.25)
    ledger.record_start(run('resp_going', estimate_usd=0.5, created_at=new))
    ledger.record_start(run('resp_cancelled', estimate_usd=2.0, status='cancelled', created_at=new))
    ledger.record_start(run('resp_failed_free', estimate_usd=3.0, status='failed', cost_usd=0.0, created_at=new))
    assert ledger.spent_usd() == 0.25 + 0.5 + 2.0
    assert ledger.spent_usd(since=new) == 0.5 + 2.0
    assert ledger.spent_usd(since=datetime(2026, 2, 1)) == 0.5 + 2.0  # noqa: DTZ001 (naive: taken as UTC)


def test_reserve_refuses_a_run_over_the_cap_and_records_nothing(ledger: Ledger) -> None:
    ledger.record_start(run('resp_spent', estimate_usd=4.0))
    with pytest.raises(BudgetExceededError) as caught:
        ledger.reserve(run('resp_next', effort='high', estimate_usd=1.5), cap_usd=5.0)
    error = caught.value
    assert (error.spent_usd, error.cap_usd, error.estimate_usd) == (4.0, 5.0, 1.5)
    assert not isinstance(error, BudgetUnenforceableError)
    message = str(error)
    for part in (
        '$4.00 already spent',
        '$5.00 cap',
        'needs $1.50',
        '$1.00 is left',
        "'high'",
        'budget_usd=',
        'PERPLEXITY_BUDGET_USD',
    ):
        assert part in message
    assert ledger.get('resp_next') is None
    assert [r.response_id for r in ledger.list()] == ['resp_spent']


def test_reserve_admits_a_run_that_fits_the_cap_exactly(ledger: Ledger) -> None:
    for n in range(10):
        ledger.reserve(run(f'resp_{n}', estimate_usd=0.1), cap_usd=1.0)
    with pytest.raises(BudgetExceededError):
        ledger.reserve(run('resp_11', estimate_usd=0.01), cap_usd=1.0)
    assert len(ledger.list(limit=100)) == 10


def test_reserve_without_a_cap_always_records(ledger: Ledger) -> None:
    ledger.record_start(run('resp_big', estimate_usd=1000.0))
    token = ledger.reserve(run('resp_x'), cap_usd=None)
    assert ledger.get(token) is not None


def test_a_reservation_is_bound_to_the_real_id_or_released(ledger: Ledger) -> None:
    token = ledger.reserve(RunRecord(query='q', origin='mcp', effort='low', caller='alice'), cap_usd=10.0)
    assert is_provisional(token)
    reserved = ledger.get(token)
    assert reserved is not None
    assert reserved.status == RESERVED
    assert ledger.spent_usd() == ESTIMATED_COST_USD['low']

    ledger.bind(token, 'resp_real', model='openai/gpt-5.1')
    assert ledger.get(token) is None
    bound = ledger.get('resp_real')
    assert bound is not None
    assert (bound.status, bound.model, bound.caller, bound.created_at) == (
        'queued',
        'openai/gpt-5.1',
        'alice',
        reserved.created_at,
    )
    ledger.release('resp_real')  # a bound run is not a reservation any more: kept
    assert ledger.get('resp_real') is not None

    failed = ledger.reserve(RunRecord(query='rejected', origin='mcp', effort='high'), cap_usd=10.0)
    assert ledger.spent_usd() == ESTIMATED_COST_USD['low'] + ESTIMATED_COST_USD['high']
    ledger.release(failed)
    assert ledger.get(failed) is None
    assert ledger.spent_usd() == ESTIMATED_COST_USD['low']


def test_reserving_the_same_key_again_stores_one_row(ledger: Ledger) -> None:
    # What a retried reservation does when its first commit went through but the acknowledgement was lost.
    record = RunRecord(query='q', origin='mcp', estimate_usd=1.0)
    assert ledger.reserve(record, cap_usd=10.0) == ledger.reserve(record, cap_usd=10.0) == record.response_id
    assert len(ledger.list()) == 1
    assert ledger.spent_usd() == 1.0


def test_binding_to_an_id_already_recorded_keeps_that_row(ledger: Ledger) -> None:
    token = ledger.reserve(RunRecord(query='q', origin='cli', estimate_usd=1.0), cap_usd=None)
    ledger.record_start(run('resp_seen', query='seen elsewhere', estimate_usd=1.0))
    ledger.bind(token, 'resp_seen', status='in_progress')
    assert [(r.response_id, r.status, r.query) for r in ledger.list()] == [
        ('resp_seen', 'in_progress', 'seen elsewhere')
    ]
    assert ledger.spent_usd() == 1.0


def test_spend_and_history_can_be_attributed_to_a_caller(ledger: Ledger) -> None:
    ledger.record_start(run('resp_a1', caller='alice', estimate_usd=1.0))
    ledger.record_start(run('resp_a2', caller='alice', estimate_usd=3.0, created_at=datetime(2026, 1, 1, tzinfo=UTC)))
    ledger.record_start(run('resp_b1', caller='bob', estimate_usd=0.5))
    ledger.record_start(run('resp_anonymous', estimate_usd=0.25))
    token = ledger.reserve(RunRecord(query='q', origin='mcp', caller='bob', estimate_usd=2.0), cap_usd=100.0)
    ledger.update('resp_b1', cost_usd=0.125)
    assert ledger.spent_usd() == 1.0 + 3.0 + 0.125 + 0.25 + 2.0
    assert ledger.spent_usd(caller='alice') == 4.0
    assert ledger.spent_usd(caller='alice', since=datetime(2026, 2, 1, tzinfo=UTC)) == 1.0
    assert ledger.spent_usd(caller='bob') == 2.125
    assert ledger.spent_usd(caller='nobody') == 0.0
    assert {r.response_id for r in ledger.list(caller='bob')} == {'resp_b1', token}
    assert [r.response_id for r in ledger.list(caller='alice', origin='toolset', limit=1)] == ['resp_a1']


def test_text_with_a_nul_character_is_recorded(ledger: Ledger, engine: str) -> None:
    ledger.record_start(run('resp_nul', query='before\x00after'))
    ledger.update('resp_nul', error='bad\x00byte')
    got = ledger.get('resp_nul')
    assert got is not None
    # PostgreSQL text cannot hold NUL: it is stored as U+FFFD rather than losing the row.
    nul = '\x00' if engine == 'sqlite' else '\ufffd'
    assert (got.query, got.error) == (f'before{nul}after', f'bad{nul}byte')
    assert ledger.healthy


def test_bind_rejects_unknown_fields(ledger: Ledger) -> None:
    token = ledger.reserve(RunRecord(query='q', origin='cli'), cap_usd=None)
    with pytest.raises(TypeError, match='colour'):
        ledger.bind(token, 'resp_x', colour='red')


# --- concurrency ----------------------------------------------------------------------------------------------------


def test_threads_sharing_one_ledger_lose_no_row(ledger: Ledger) -> None:
    def write(thread: int) -> None:
        for n in range(50):
            ledger.record_start(run(f'resp_{thread}_{n}', origin='mcp'))
            ledger.update(f'resp_{thread}_{n}', status='completed')

    threads = [threading.Thread(target=write, args=(t,)) for t in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(JOIN_TIMEOUT)
    assert not any(thread.is_alive() for thread in threads)
    rows = ledger.list(limit=1000)
    assert len(rows) == 400
    assert {r.status for r in rows} == {'completed'}


def insert_many(target: str, worker: int, count: int, start: Any) -> None:
    start.wait(JOIN_TIMEOUT)
    with Ledger(target) as ledger:
        for n in range(count):
            ledger.record_start(run(f'resp_{worker}_{n}', origin='cli'))
        assert ledger.healthy


def reserve_many(target: str, attempts: int, start: Any, results: Any) -> None:
    start.wait(JOIN_TIMEOUT)
    admitted = refused = 0
    with Ledger(target) as ledger:
        for _ in range(attempts):
            try:
                token = ledger.reserve(RunRecord(query='q', origin='mcp', estimate_usd=0.25), cap_usd=20.0)
            except BudgetUnenforceableError:
                raise
            except BudgetExceededError:
                refused += 1
            else:
                ledger.bind(token, f'resp_{token}')
                admitted += 1
    results.put((admitted, refused))


def insert_until_killed(target: str, committed: Any, started: Any) -> None:
    with Ledger(target) as ledger:
        for n in range(1_000_000):
            ledger.record_start(run(f'resp_{n:07d}', origin='cli'))
            committed.value = n + 1
            if n == 49:
                started.set()


def assert_intact(engine: str, target: str) -> None:
    if engine == 'sqlite':
        assert raw_rows(target, 'PRAGMA integrity_check') == [('ok',)]


@pytest.mark.slow
def test_processes_writing_at_once_lose_no_row(engine: str, target: str, spawn: Any) -> None:
    # On PostgreSQL the four also migrate the empty schema at once: the advisory lock keeps them from racing.
    context = spawn
    start = context.Event()
    processes = [context.Process(target=insert_many, args=(target, w, 200, start)) for w in range(4)]
    for process in processes:
        process.start()
    start.set()
    join_all(processes)
    with Ledger(target) as ledger:
        assert len(ledger.list(limit=10_000)) == 800
        assert ledger.healthy
    assert_intact(engine, target)


@pytest.mark.slow
def test_processes_racing_for_the_last_of_the_budget_never_overspend(target: str, spawn: Any) -> None:
    # A $20 cap admits exactly 80 runs at $0.25; four processes try 40 each, all at once.
    context = spawn
    start = context.Event()
    results = context.Queue()
    processes = [context.Process(target=reserve_many, args=(target, 40, start, results)) for _ in range(4)]
    for process in processes:
        process.start()
    start.set()
    outcomes = [results.get(timeout=JOIN_TIMEOUT) for _ in processes]
    join_all(processes)
    results.close()
    results.join_thread()
    assert sum(admitted for admitted, _ in outcomes) == 80
    assert sum(refused for _, refused in outcomes) == 80
    with Ledger(target) as ledger:
        assert ledger.spent_usd() == 20.0
        rows = ledger.list(limit=1000)
    assert len(rows) == 80
    assert all(r.status == 'queued' and r.response_id.startswith('resp_pending_') for r in rows)


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(signal, 'SIGKILL'), reason='needs SIGKILL')
def test_a_process_killed_in_the_middle_of_writing_leaves_every_committed_row(
    engine: str, target: str, spawn: Any
) -> None:
    context = spawn
    committed = context.RawValue('q', 0)  # no lock: the child dies at any point
    started = context.Event()
    child = context.Process(target=insert_until_killed, args=(target, committed, started))
    child.start()
    assert started.wait(JOIN_TIMEOUT)
    os.kill(child.pid, signal.SIGKILL)
    child.join(JOIN_TIMEOUT)
    assert child.exitcode == -signal.SIGKILL
    reported = committed.value
    assert 50 <= reported < 1_000_000
    assert_intact(engine, target)
    with Ledger(target) as ledger:
        ids = {r.response_id for r in ledger.list(limit=2_000_000)}
        assert ledger.healthy
    # Every commit the child reported is there; at most the one it was reporting when killed is extra.
    assert {f'resp_{n:07d}' for n in range(reported)} <= ids <= {f'resp_{n:07d}' for n in range(reported + 1)}


@pytest.mark.skipif(not hasattr(os, 'fork'), reason='needs fork')
def test_a_forked_child_opens_its_own_connection(engine: str, ledger: Ledger, target: str) -> None:
    ledger.record_start(run('resp_parent'))
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', DeprecationWarning)  # fork with threads elsewhere in the test process
        pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            ledger.record_start(run('resp_child'))
            code = 0 if ledger.get('resp_child') is not None and ledger.healthy else 1
            ledger.close()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    ledger.record_start(run('resp_parent_again'))
    assert {r.response_id for r in ledger.list()} == {'resp_parent', 'resp_child', 'resp_parent_again'}
    assert_intact(engine, target)
    if engine == 'postgres':  # the parent's session outlived the child: it never had to reconnect
        engine_ = ledger._engine
        assert isinstance(engine_, _postgres.PostgresEngine)
        assert engine_.connects == 1


def test_a_run_started_through_one_instance_is_seen_and_changed_through_another(target: str) -> None:
    with Ledger(target) as first, Ledger(target) as second:
        token = first.reserve(RunRecord(query='shared', origin='mcp', effort='high', caller='alice'), cap_usd=1.5)
        assert second.get(token) is not None
        first.bind(token, 'resp_shared', status='in_progress')
        assert [r.response_id for r in second.list(status='in_progress')] == ['resp_shared']
        with pytest.raises(BudgetExceededError):  # the other instance's reservation counts here too
            second.reserve(RunRecord(query='too much', origin='mcp', effort='high'), cap_usd=1.5)
        second.update('resp_shared', status='completed', cost_usd=0.5, sources=3)
        got = first.get('resp_shared')
        assert got is not None
        assert (got.status, got.cost_usd, got.sources, got.caller) == ('completed', 0.5, 3, 'alice')
        assert first.spent_usd() == second.spent_usd() == 0.5
        held = second.reserve(RunRecord(query='fits now', origin='cli', effort='high'), cap_usd=1.5)
        first.release(held)
        assert second.get(held) is None
        assert first.spent_usd(caller='alice') == 0.5


# --- failure policy -------------------------------------------------------------------------------------------------


def use_every_method(ledger: Ledger) -> str:
    """Call every research-facing method; none may raise."""
    ledger.record_start(run('resp_1'))
    ledger.update('resp_1', status='completed', cost_usd=0.1)
    assert ledger.get('resp_1') is None
    assert ledger.list() == []
    assert ledger.spent_usd() == 0.0
    token = ledger.reserve(RunRecord(query='q', origin='toolset'), cap_usd=None)
    ledger.bind(token, 'resp_2', status='in_progress')
    ledger.release(ledger.reserve(RunRecord(query='q', origin='toolset'), cap_usd=None))
    assert not ledger.check()
    return token


def test_a_corrupt_file_warns_once_and_research_goes_on(path: Path) -> None:
    path.parent.mkdir(parents=True)
    garbage = b'this is not a database, it is garbage ' * 200
    path.write_bytes(garbage)
    with Ledger(path) as ledger:
        with pytest.warns(LedgerWarning) as caught:
            use_every_method(ledger)
        assert len(caught) == 1
        message = str(caught[0].message)
        for part in (str(path), 'not a database', 'history', 'budget', 'PERPLEXITY_STATE_DIR', 'Move the file aside'):
            assert part in message
        assert not ledger.healthy
    assert path.read_bytes() == garbage  # never overwritten


def test_an_uncreatable_directory_warns_once_and_research_goes_on(tmp_path: Path) -> None:
    (tmp_path / 'afile').write_text('a file where a directory should be', encoding='utf-8')
    path = tmp_path / 'afile' / 'ledger.sqlite3'
    with Ledger(path) as ledger:
        with pytest.warns(LedgerWarning) as caught:
            use_every_method(ledger)
        assert len(caught) == 1
        message = str(caught[0].message)
        for part in (str(path), str(path.parent), 'PERPLEXITY_STATE_DIR'):
            assert part in message
        assert not ledger.healthy


def test_a_cap_cannot_be_enforced_without_a_working_ledger(tmp_path: Path) -> None:
    (tmp_path / 'afile').write_text('', encoding='utf-8')
    ledger = Ledger(tmp_path / 'afile' / 'ledger.sqlite3')
    with pytest.warns(LedgerWarning):
        assert not ledger.check()
    with pytest.raises(BudgetUnenforceableError) as caught:
        ledger.reserve(RunRecord(query='q', origin='mcp', effort='fast'), cap_usd=5.0)
    assert isinstance(caught.value, BudgetExceededError)
    assert (caught.value.cap_usd, caught.value.estimate_usd) == (5.0, 0.01)
    assert math.isnan(caught.value.spent_usd)
    for part in ('$5.00', 'cannot be enforced', 'PERPLEXITY_STATE_DIR', 'PERPLEXITY_BUDGET_USD', 'budget_usd=None'):
        assert part in str(caught.value)
    ledger.close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def unreachable_url() -> str:
    """A PostgreSQL URL with a password, to a loopback port where nothing listens."""
    return f'postgresql://team:{SECRET}@127.0.0.1:{free_port()}/runs?sslpassword={SECRET}x'


SECRET = 'hunter2-S3cret'


@pytest.mark.parametrize('broken', ['sqlite', 'postgres'])
def test_warnings_turned_into_errors_still_never_reach_the_caller(
    broken: str, tmp_path: Path, unreachable_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / 'afile').write_text('', encoding='utf-8')
    target = str(tmp_path / 'afile' / 'ledger.sqlite3') if broken == 'sqlite' else unreachable_url
    with Ledger(target) as ledger, caplog.at_level(logging.WARNING):
        ledger.record_start(run('resp_1'))  # pytest runs with filterwarnings=error
    assert 'run ledger' in caplog.text
    assert SECRET not in caplog.text


@pytest.mark.slow
def test_a_write_lock_held_too_long_keeps_the_entry_and_stores_it_once_the_lock_is_free(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_sqlite, '_BUSY_TIMEOUT_MS', 20)
    with Ledger(path) as ledger:
        ledger.record_start(run('resp_before'))
        holder = sqlite3.connect(path, isolation_level=None)
        try:
            holder.execute('BEGIN IMMEDIATE')
            with pytest.warns(LedgerWarning, match='write lock'):
                ledger.record_start(run('resp_lost'))
            with pytest.raises(BudgetUnenforceableError):
                ledger.reserve(run('resp_capped'), cap_usd=100.0)
            assert ledger.healthy  # contention is not a lasting failure
            assert ledger.get('resp_before') is not None  # readers are not blocked by the writer in WAL
            health = ledger.health()
            assert (health.status, health.waiting) == ('degraded', 1)
            holder.execute('COMMIT')
        finally:
            holder.close()
        ledger.record_start(run('resp_after'))  # the kept entry is stored first, then this one
        assert [r.response_id for r in ledger.list()] == ['resp_after', 'resp_lost', 'resp_before']
        assert ledger.health().status == 'ok'


# --- failure policy on PostgreSQL -----------------------------------------------------------------------------------


def test_an_unreachable_server_warns_once_never_shows_the_password_and_later_calls_try_again(
    unreachable_url: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_postgres, '_DOWN_FOR_S', 0.0)  # every call tries the network again
    shown = f'postgresql://team:***@127.0.0.1:{unreachable_url.split(":")[3].split("/")[0]}/runs?sslpassword=***'
    with Ledger(unreachable_url) as ledger, caplog.at_level(logging.DEBUG):
        assert (repr(ledger), ledger.url, ledger.describe()) == (f'Ledger({shown!r}, healthy=True)', shown, shown)
        with pytest.warns(LedgerWarning) as caught:
            use_every_method(ledger)
            with pytest.raises(BudgetUnenforceableError) as refused:
                ledger.reserve(RunRecord(query='q', origin='mcp', effort='fast'), cap_usd=5.0)
        assert len(caught) == 1
        message = str(caught[0].message)
        for part in (shown, 'Connection refused', 'is running and reachable', 'PERPLEXITY_LEDGER_URL', 'try again'):
            assert part in message
        assert ledger.healthy  # an outage is not a lasting failure: later calls try again
        error = str(refused.value)
        for part in ('$5.00', 'cannot be enforced', shown, 'Connection refused', 'budget_usd=None'):
            assert part in error
        everything = '\n'.join([message, error, repr(ledger), caplog.text, *(str(r.args) for r in caplog.records)])
        assert SECRET not in everything
        assert 'hunter2' not in everything


def test_a_session_killed_under_the_ledger_costs_no_call(postgres_target: str) -> None:
    with Ledger(postgres_target) as ledger:
        ledger.record_start(run('resp_before'))
        engine = ledger._engine
        assert isinstance(engine, _postgres.PostgresEngine)
        assert engine.connects == 1
        killed = raw_rows(
            postgres_target,
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'pydantic-ai-perplexity' "
            'AND datname = current_database() AND pid <> pg_backend_pid()',
        )
        assert killed and all(ok for (ok,) in killed)
        ledger.record_start(run('resp_after'))  # the pooled connection is dead: retried on a fresh one, no warning
        assert {r.response_id for r in ledger.list()} == {'resp_before', 'resp_after'}
        assert engine.connects == 2
        assert ledger.healthy


def test_the_budget_lock_held_too_long_refuses_capped_runs_only_and_later_calls_recover(
    postgres_target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import psycopg

    monkeypatch.setattr(_postgres, '_LOCK_TIMEOUT_MS', 200)
    with Ledger(postgres_target) as ledger:
        ledger.record_start(run('resp_before'))
        with psycopg.connect(postgres_target) as holder:  # a transaction that holds the lock and does not end
            holder.execute('SELECT pg_advisory_xact_lock(%s)', (_postgres._BUDGET_LOCK,))
            with pytest.warns(LedgerWarning, match='lock timeout'):
                with pytest.raises(BudgetUnenforceableError, match='lock timeout'):
                    ledger.reserve(run('resp_capped'), cap_usd=100.0)
            ledger.record_start(run('resp_uncapped'))  # writes without a cap do not queue on the budget lock
            ledger.reserve(run('resp_no_cap'), cap_usd=None)
            assert ledger.healthy
            holder.rollback()
        token = ledger.reserve(run('resp_capped'), cap_usd=100.0)
        assert token == 'resp_capped'
        assert {r.response_id for r in ledger.list()} == {'resp_before', 'resp_uncapped', 'resp_no_cap', 'resp_capped'}


def test_a_user_who_may_not_create_the_schema_stops_the_ledger_for_good(postgres_target: str) -> None:
    raw_rows(
        postgres_target,
        "DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'pplx_no_rights') THEN "
        'CREATE ROLE pplx_no_rights LOGIN; END IF; END $$',
    )
    (schema,) = raw_rows(postgres_target, 'SELECT current_schema()')[0]
    raw_rows(postgres_target, f'GRANT USAGE ON SCHEMA {schema} TO pplx_no_rights')  # may look, may not create
    target = postgres_target.replace('postgresql://postgres@', 'postgresql://pplx_no_rights:not-a-secret@', 1)
    assert target != postgres_target
    with Ledger(target) as ledger:
        with pytest.warns(LedgerWarning) as caught:
            use_every_method(ledger)
        assert len(caught) == 1
        message = str(caught[0].message)
        for part in ('permission denied', 'may create tables', 'until the process restarts'):
            assert part in message
        assert 'not-a-secret' not in message
        assert not ledger.healthy
        with pytest.raises(BudgetUnenforceableError, match='permission denied'):
            ledger.reserve(RunRecord(query='q', origin='mcp'), cap_usd=5.0)


def test_the_billed_cost_is_stored_in_parts(ledger: Ledger) -> None:
    """Live fact: cfdude/mcp-perplexity-pro tests/fixtures/agent_low_fetch_url.json, captured 2026-10-09: input billed
    as cache writes and reads (input_cost 0), and fetch_url's calls, cost and the tokens of the model that read the
    page. The ledger keeps those parts beside the total, on both engines."""
    from pydantic_ai_perplexity._core.reconcile import finished_fields
    from pydantic_ai_perplexity._domain.results import ResearchResult, Usage
    from pydantic_ai_perplexity.client._models import parse_response
    from support.live_shapes import fetch_item, fetch_usage, message
    from support.live_shapes import run as live_run

    result = ResearchResult.from_response(
        parse_response(live_run([fetch_item('https://a.example/'), message('A [web:0]')], usage=fetch_usage()))
    )
    ledger.record_start(run('resp_parts'))
    ledger.update('resp_parts', **finished_fields(result))
    record = ledger.get('resp_parts')
    assert record is not None and record.cost_usd == pytest.approx(0.00375)
    stored = Usage.from_cost_details(record.cost_details)
    assert stored is not None
    assert stored.input_cost_usd == pytest.approx(0.00021)
    assert (stored.cache_creation_cost_usd, stored.cache_read_cost_usd) == (0.0002, 0.00001)
    assert stored.tool_calls == {'fetch_url': 1} and stored.tool_costs_usd == {'fetch_url': 0.0035}
    assert stored.tool_tokens == {'fetch_url': 11200}
    assert stored.breakdown() == result.usage.breakdown()
    assert Usage.from_cost_details('not json') is None and Usage.from_cost_details(None) is None
