"""Ledger benchmark: writes per second on SQLite and PostgreSQL, with one writer and with four processes at once.

Run with `uv run --frozen python benchmarks/ledger.py [--rows 500] [--repeat 3] [--postgres URL]`. The PostgreSQL
URL defaults to `PERPLEXITY_TEST_POSTGRES_URL` (start a local server with `export PERPLEXITY_TEST_POSTGRES_URL="$(bash
scripts/start-postgres.sh)"`); without one only SQLite is measured. Prints a table; writes no files that outlive it
(a temporary directory for SQLite, a temporary schema for PostgreSQL).

Each writer opens its own `Ledger` and connects before the clock starts. Measured:

- `record_start`: one row per call, each its own committed transaction (SQLite `synchronous=FULL`, PostgreSQL with
  its defaults: `fsync` and `synchronous_commit` on), so the figure is durable writes per second.
- `reserve + bind` under a cap that never runs out: the two transactions that admit one research run, with the
  budget check serialized across writers (SQLite's write lock, PostgreSQL's advisory lock).

Writers are processes (forked from a clean server process), started together; the time is from the start signal
to the last writer's end. Each figure is the median of `--repeat` measurements, each on a fresh file or schema, with
their range: on a shared machine fsync times vary a lot.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import platform
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pydantic_ai_perplexity._ledger import Ledger, RunRecord


def write(target: str, kind: str, worker: int, rows: int, ready: Any, start: Any, results: Any) -> None:
    """One writer: open the ledger, wait for the signal, write `rows` runs, report when it finished."""
    with Ledger(target) as ledger:
        assert ledger.check(), ledger.describe()
        ready.put(worker)
        start.wait(120)
        for n in range(rows):
            if kind == 'record_start':
                ledger.record_start(RunRecord(response_id=f'resp_{worker}_{n}', query='benchmark', origin='cli'))
            else:
                token = ledger.reserve(RunRecord(query='benchmark', origin='cli', estimate_usd=0.01), cap_usd=1e9)
                ledger.bind(token, f'resp_{worker}_{n}', status='in_progress')
        finished = time.monotonic()
        assert ledger.healthy
    results.put(finished)


def measure(context: Any, target: str, kind: str, writers: int, rows: int) -> float:
    """Writes per second (rows, or admitted runs) of `writers` processes writing `rows` each at once."""
    ready, start, results = context.Queue(), context.Event(), context.Queue()
    processes = [
        context.Process(target=write, args=(target, kind, w, rows, ready, start, results)) for w in range(writers)
    ]
    for process in processes:
        process.start()
    for _ in processes:
        ready.get(timeout=120)
    began = time.monotonic()
    start.set()
    ended = max(results.get(timeout=600) for _ in processes)
    for process in processes:
        process.join(60)
        if process.exitcode != 0:
            raise SystemExit(f'a writer failed (exit code {process.exitcode})')
    return writers * rows / (ended - began)


@contextmanager
def sqlite_target() -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix='ledger-bench-') as directory:
        yield str(Path(directory) / 'ledger.sqlite3')


@contextmanager
def postgres_target(url: str) -> Iterator[str]:
    import psycopg

    schema = f'bench_{uuid.uuid4().hex[:12]}'
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA {schema}')  # pyright: ignore[reportArgumentType]
    try:
        yield f'{url}{"&" if "?" in url else "?"}options=-csearch_path%3D{schema}'
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA {schema} CASCADE')  # pyright: ignore[reportArgumentType]


def postgres_version(url: str) -> str:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT current_setting('server_version'), current_setting('fsync')").fetchone()
    assert row is not None
    return f'PostgreSQL {row[0]} (fsync {row[1]})'


def main(rows: int, repeat: int, postgres_url: str | None) -> None:
    os.environ.setdefault('PYDANTIC_DISABLE_PLUGINS', '__all__')  # children import faster; nothing measured needs them
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context('forkserver' if 'forkserver' in methods else 'spawn')
    engines: list[tuple[str, Any]] = [('sqlite', sqlite_target)]
    if postgres_url:
        engines.append(('postgres', lambda: postgres_target(postgres_url)))
    args = ' '.join(sys.argv[1:]).replace(postgres_url or '\0', '$PERPLEXITY_TEST_POSTGRES_URL')
    print(f'command: uv run --frozen python benchmarks/ledger.py {args}'.rstrip())
    versions = [f'SQLite {sqlite3.sqlite_version} (synchronous=FULL, WAL)']
    if postgres_url:
        versions.append(postgres_version(postgres_url) + ' on loopback')
    print(f'machine: {os.cpu_count()} CPUs, {platform.system()} {platform.release()}; {"; ".join(versions)}')
    if hasattr(os, 'getloadavg'):
        print(f'load average before: {" ".join(f"{x:.2f}" for x in os.getloadavg())}')
    if not postgres_url:
        print('PostgreSQL: skipped (no --postgres URL and PERPLEXITY_TEST_POSTGRES_URL unset)')
    print(f'\n{"engine":10} {"operation":16} {"writers":>7} {"rows each":>9} {"writes/s":>10} {"range":>15}')
    for name, make_target in engines:
        for kind in ('record_start', 'reserve + bind'):
            for writers in (1, 4):
                rates: list[float] = []
                for _ in range(repeat):
                    with make_target() as target:
                        rates.append(measure(context, target, kind, writers, rows))
                spread = f'{min(rates):,.0f}-{max(rates):,.0f}'
                print(f'{name:10} {kind:16} {writers:7d} {rows:9d} {statistics.median(rates):10,.0f} {spread:>15}')
    if hasattr(os, 'getloadavg'):
        print(f'load average after: {" ".join(f"{x:.2f}" for x in os.getloadavg())}')
    print('(reserve + bind: runs admitted per second, two transactions each)\n')


if __name__ == '__main__':
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument('--rows', type=int, default=500, help='rows per writer (default 500)')
    parser.add_argument('--repeat', type=int, default=3, help='measurements of each figure; the median is shown')
    parser.add_argument(
        '--postgres',
        default=os.environ.get('PERPLEXITY_TEST_POSTGRES_URL') or None,
        help='PostgreSQL URL (default: $PERPLEXITY_TEST_POSTGRES_URL)',
    )
    options = parser.parse_args()
    main(options.rows, options.repeat, options.postgres)
