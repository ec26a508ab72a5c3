"""The ledger's fixtures on both engines (`engine`, `path`, `target`, `ledger`) and fresh processes (`spawn`) for
the tests where concurrency between processes is the point."""

from __future__ import annotations

import multiprocessing
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pydantic_ai_perplexity._ledger import Ledger
from support.postgres import execute, fresh_schema

JOIN_TIMEOUT = 120


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / 'state' / 'ledger.sqlite3'


@pytest.fixture(params=['sqlite', 'postgres'])
def engine(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def target(engine: str, path: Path) -> Iterator[str]:
    """What `Ledger(...)` is given: a fresh SQLite path, or a URL whose sessions use a fresh PostgreSQL schema."""
    if engine == 'sqlite':
        yield str(path)
    else:
        with fresh_schema() as url:
            yield url


@pytest.fixture
def ledger(target: str) -> Iterator[Ledger]:
    with Ledger(target) as ledger:
        yield ledger


@pytest.fixture
def spawn(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> Any:
    """Fresh processes, forked from a clean server that imported the ledger and psycopg once (not from pytest).

    Each child is a new process with its own connections, as with spawn, without paying a second of imports each
    (the server preloads the requesting test module, whose functions the children run); they skip pydantic plugins
    (logfire's alone costs seconds per import).
    """
    monkeypatch.setenv('PYDANTIC_DISABLE_PLUGINS', '__all__')
    if 'forkserver' not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context('spawn')
    context = multiprocessing.get_context('forkserver')
    context.set_forkserver_preload([request.module.__name__, 'psycopg'])
    return context


def join_all(processes: list[Any]) -> None:
    for process in processes:
        process.join(JOIN_TIMEOUT)
    assert [p.exitcode for p in processes] == [0] * len(processes)


def raw(target: str, sql: str) -> list[tuple[Any, ...]]:
    """SQL past the ledger, committed: on the SQLite file or the PostgreSQL schema `target` names."""
    if target.startswith('postgresql://'):
        return [tuple(row) for row in execute(target, sql)]
    db = sqlite3.connect(target)
    try:
        return db.execute(sql).fetchall()
    finally:
        db.commit()
        db.close()
