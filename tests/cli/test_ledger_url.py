"""PERPLEXITY_LEDGER_URL in each form libpq accepts, through the command (`research`, `jobs list`, `doctor`) and the
Python API, against the PostgreSQL test server: a keyword/value string is a PostgreSQL ledger (never a file named
after it), a URL whose password libpq would misread is refused by name, and no password or secret setting is shown.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import subprocess
from pathlib import Path

import pytest

from pydantic_ai_perplexity._base.errors import ConfigurationError
from pydantic_ai_perplexity._ledger import Ledger
from pydantic_ai_perplexity.emulator import Emulator
from support.cli import COMMAND, TIMEOUT, cli_env
from support.postgres import execute, fresh_schema, postgres_url

SECRET = 'SENTINEL-pw'


def _keywords(url: str, **extra: str) -> str:
    """`url` as a libpq keyword/value string, with `extra` settings (values quoted as libpq reads them)."""
    from psycopg.conninfo import conninfo_to_dict

    settings = {k: str(v) for k, v in conninfo_to_dict(url).items()} | extra
    quoted = {k: "'" + v.replace('\\', '\\\\').replace("'", "\\'") + "'" for k, v in settings.items()}
    return ' '.join(f'{k} = {v}' if k == 'host' else f'{k}={v}' for k, v in quoted.items())


def _cli(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """The command run in `cwd`, where a SQLite path given as the ledger would be made."""
    return subprocess.run(
        [*COMMAND, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT, check=False
    )


def _checks(stdout: str) -> dict[str, str]:
    return {re.sub(r'^\[\w+\] ([^:]+).*$', r'\1', line): line for line in stdout.splitlines() if line.startswith('[')}


def _files(*roots: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for root in roots for p in root.rglob('*'))


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    state, work = tmp_path / 'state', tmp_path / 'work'
    state.mkdir()
    work.mkdir()
    return state, work


@pytest.mark.slow
def test_a_keyword_string_is_a_postgresql_ledger_shown_without_its_password(
    emulator: Emulator, dirs: tuple[Path, Path]
) -> None:
    state, work = dirs
    with fresh_schema() as url:
        # Live fact of libpq: keyword strings take quoted values with spaces and `\'` (the password has both).
        keywords = _keywords(url, password=f"{SECRET} it's")
        env = cli_env(
            state,
            PERPLEXITY_LEDGER_URL=keywords,
            PERPLEXITY_API_KEY=emulator.api_key,
            PERPLEXITY_BASE_URL=emulator.base_url,
        )
        research = _cli('research', 'What does the EU AI Act regulate?', '--effort', 'fast', env=env, cwd=work)
        listed = _cli('jobs', 'list', env=env, cwd=work)
        doctor = _cli('doctor', env=env, cwd=work)
        [(rows,)] = execute(url, 'SELECT count(*) FROM runs')
    assert research.returncode == 0, research.stderr
    assert rows == 1  # the run went to PostgreSQL
    assert listed.returncode == 0 and 'resp_' in listed.stdout, listed.stderr
    checks = _checks(doctor.stdout)
    assert checks['ledger writable'].startswith('[pass]'), doctor.stdout
    assert 'host=127.0.0.1' in checks['ledger writable'] and 'password=***' in checks['ledger writable']
    assert checks['ledger private'] == '[pass] ledger private: on a PostgreSQL server (its own access rules)'
    for done in (research, listed, doctor):
        assert SECRET not in done.stdout + done.stderr and 'Traceback' not in done.stderr
    assert _files(work) == []  # no SQLite file named after the string (with the password in its name)
    assert not [name for name in _files(state) if 'password' in name or SECRET in name]


@pytest.mark.slow
def test_a_url_whose_password_libpq_would_misread_is_refused_by_name(dirs: tuple[Path, Path]) -> None:
    state, work = dirs
    # libpq ends the user info at the first `@`: `SENTINEL-pw@127.0.0.1` would be the host, in its error messages.
    where = postgres_url().split('@', 1)[1]
    misread = f'postgresql://postgres:p@{SECRET}@{where}'
    env = cli_env(state, PERPLEXITY_LEDGER_URL=misread, PERPLEXITY_BASE_URL=f'http://127.0.0.1:{_closed_port()}')
    doctor = _cli('doctor', env=env, cwd=work)
    listed = _cli('jobs', 'list', env=env, cwd=work)
    checks = _checks(doctor.stdout)
    assert doctor.returncode == 1
    line = checks['ledger writable']
    assert line.startswith('[FAIL] ledger writable: PERPLEXITY_LEDGER_URL names a PostgreSQL ledger'), line
    assert (
        'postgresql://postgres:***@' in line and '"@" as %40' in line and 'fix or unset PERPLEXITY_LEDGER_URL' in line
    )
    assert listed.returncode == 1 and listed.stderr.startswith('Error: PERPLEXITY_LEDGER_URL names'), listed.stderr
    for done in (doctor, listed):
        assert SECRET not in done.stdout + done.stderr and 'Traceback' not in done.stderr
    with pytest.raises(ConfigurationError, match=r'^the ledger argument names a PostgreSQL ledger') as caught:
        Ledger(misread)
    assert SECRET not in str(caught.value)


@pytest.mark.slow
def test_a_secret_in_libpq_options_is_not_shown_nor_copied(dirs: tuple[Path, Path]) -> None:
    state, work = dirs
    with fresh_schema() as url:
        # A custom server setting holding a secret, sent in `options` next to the schema's search_path.
        with_secret = url.replace('options=', f'options=-capp.password%3D{SECRET}%20', 1)
        env = cli_env(
            state, PERPLEXITY_LEDGER_URL=with_secret, PERPLEXITY_BASE_URL=f'http://127.0.0.1:{_closed_port()}'
        )
        doctor = _cli('doctor', env=env, cwd=work)
        snippet = _cli('config', 'claude-code', env=env, cwd=work)
    checks = _checks(doctor.stdout)
    assert checks['ledger writable'].startswith('[pass]') and 'options=***' in checks['ledger writable']
    assert snippet.returncode == 0 and '"PERPLEXITY_LEDGER_URL": "${PERPLEXITY_LEDGER_URL}"' in snippet.stdout
    for done in (doctor, snippet):
        assert SECRET not in done.stdout + done.stderr


def test_a_driver_error_for_a_keyword_string_shows_no_password(caplog: pytest.LogCaptureFixture) -> None:
    port = _closed_port()
    keywords = f"host=127.0.0.1 port={port} dbname=runs user=bob password='{SECRET}' connect_timeout=2"
    caplog.set_level(logging.INFO, logger='pydantic_ai_perplexity')
    ledger = Ledger(keywords)
    try:
        assert ledger.engine == 'postgres' and ledger.path is None
        assert ledger.describe() == f'host=127.0.0.1 port={port} dbname=runs user=bob password=*** connect_timeout=2'
        assert ledger.check() is False
        health = ledger.health()
    finally:
        ledger.close()
    assert health.status != 'ok' and health.problem
    for text in (health.problem, repr(ledger), caplog.text, str(health.as_dict())):
        assert SECRET not in text
    assert not [p for p in os.listdir('.') if SECRET in p]
