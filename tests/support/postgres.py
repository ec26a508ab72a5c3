"""A fresh PostgreSQL schema per test, on the server named by PERPLEXITY_TEST_POSTGRES_URL.

`scripts/start-postgres.sh` starts one on loopback and prints its URL; `.ci/run` exports it. Without it the
PostgreSQL tests are skipped, and fail in CI (where every skip does: `support.skips`), so that they can never
silently not run.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

POSTGRES_URL_ENV = 'PERPLEXITY_TEST_POSTGRES_URL'


def postgres_url() -> str:
    """The test server's URL; skips the test (a failure in CI) when there is none."""
    url = os.environ.get(POSTGRES_URL_ENV, '').strip()
    if not url:
        how = f'start one with `export {POSTGRES_URL_ENV}="$(bash scripts/start-postgres.sh)"`'
        pytest.skip(f'PostgreSQL tests need a server: {POSTGRES_URL_ENV} is not set; {how}')
    return url


def with_search_path(url: str, schema: str) -> str:
    """`url` with the session's search_path set to `schema` (a libpq `options` parameter)."""
    return f'{url}{"&" if "?" in url else "?"}options=-csearch_path%3D{schema}'


def execute(url: str, sql: str, params: Any = None) -> list[Any]:
    """Run one statement on its own autocommit connection; the rows it returns, if any."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        cursor = conn.execute(sql, params)
        return cursor.fetchall() if cursor.description else []


@contextmanager
def fresh_schema() -> Iterator[str]:
    """A URL whose sessions use a new, empty schema; the schema is dropped afterwards."""
    base = postgres_url()
    schema = f'test_{uuid.uuid4().hex[:16]}'
    execute(base, f'CREATE SCHEMA {schema}')
    try:
        yield with_search_path(base, schema)
    finally:
        execute(base, f'DROP SCHEMA {schema} CASCADE')


@contextmanager
def ledger_target(engine: str, directory: Path) -> Iterator[str]:
    """What `Ledger(...)` is given for `engine`: a SQLite file under `directory`, or a URL on a fresh schema."""
    if engine == 'sqlite':
        yield str(directory / 'state' / 'ledger.sqlite3')
    else:
        with fresh_schema() as url:
            yield url
