"""What a budget's windows cost an admission: a capped `reserve` with one limit against six, on SQLite and PostgreSQL.

Run with `uv run --frozen python benchmarks/budget_windows.py [--history 500] [--calls 300]`. PostgreSQL is measured
when `PERPLEXITY_TEST_POSTGRES_URL` is set (`export PERPLEXITY_TEST_POSTGRES_URL="$(bash scripts/start-postgres.sh)"`),
in a temporary schema; SQLite in a temporary directory. One process; the ledger first holds `--history` runs of two
callers, then each call reserves one run of caller `alice` under limits that never run out:

- 1 limit: the total (`Budget(total=...)`, what `budget_usd` checks);
- 6 limits: total, day and month for everyone and for `alice` (`per_caller`), all checked in the one transaction.

Prints the median and 95th percentile of each, and the load average before and after (the machine is shared).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from pydantic_ai_perplexity._domain.budget import Budget, Limit, Limits, applicable_limits
from pydantic_ai_perplexity._ledger import Ledger, RunRecord

_LOTS = 1_000_000.0  # limits that never refuse: the check is measured, not a refusal


def measure(target: str, limits: tuple[Limit, ...], history: int, calls: int) -> tuple[float, float]:
    """Median and 95th percentile in ms of `calls` capped reservations after `history` recorded runs."""
    with Ledger(target) as ledger:
        for n in range(history):
            ledger.record_start(RunRecord(query='q', origin='api', caller=('alice', 'bob')[n % 2], estimate_usd=0.01))
        times: list[float] = []
        for _ in range(calls):
            record = RunRecord(query='q', origin='api', caller='alice', estimate_usd=0.001)
            started = time.perf_counter()
            ledger.reserve(record, cap_usd=None, limits=limits)
            times.append((time.perf_counter() - started) * 1000)
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.95)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--history', type=int, default=500)
    parser.add_argument('--calls', type=int, default=300)
    args = parser.parse_args()
    at = datetime.now(UTC)
    one, _ = applicable_limits(Budget(total=_LOTS), at=at)
    per_alice = Limits(total=_LOTS, day=_LOTS, month=_LOTS)
    six, _ = applicable_limits(
        Budget(total=_LOTS, day=_LOTS, month=_LOTS, per_caller={'alice': per_alice}), caller='alice', at=at
    )
    print(f'load average before: {" ".join(f"{x:.2f}" for x in os.getloadavg())}')
    url = os.environ.get('PERPLEXITY_TEST_POSTGRES_URL', '').strip()
    engines = ['sqlite', 'postgres'] if url else ['sqlite']
    for engine in engines:
        for name, limits in (('1 limit', one), ('6 limits', six)):
            if engine == 'sqlite':
                with tempfile.TemporaryDirectory() as directory:
                    median, p95 = measure(str(Path(directory) / 'ledger.sqlite3'), limits, args.history, args.calls)
            else:
                sys.path.insert(0, str(Path(__file__).parent.parent / 'tests'))
                from support.postgres import fresh_schema

                with fresh_schema() as schema_url:
                    median, p95 = measure(schema_url, limits, args.history, args.calls)
            print(f'{engine:<9} {name:<9} reserve median {median:6.2f} ms   p95 {p95:6.2f} ms')
    print(f'load average after: {" ".join(f"{x:.2f}" for x in os.getloadavg())}')


if __name__ == '__main__':
    main()
