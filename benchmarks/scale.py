"""Scale benchmark: research calls through nginx to 1 and to 3 MCP server instances on one PostgreSQL ledger.

Run with `uv run --frozen python benchmarks/scale.py [--calls 300] [--concurrency 50] [--rounds 3] [--ledger]`.
Needs nginx (Debian's package: `apt-get install -y nginx`) and PostgreSQL: `--postgres URL`, else
`PERPLEXITY_TEST_POSTGRES_URL` (`export PERPLEXITY_TEST_POSTGRES_URL="$(bash scripts/start-postgres.sh)"`).

The topology is the one the scale tests run (`tests/support/scale.py`): server instances as plain processes
(`python -m pydantic_ai_perplexity.mcp --transport http`) sharing a fresh PostgreSQL schema, behind nginx with
`deploy/nginx.conf`. The emulator runs in its own process (`pydantic-ai-perplexity emulator`) with `--time-scale 0`
by default, so every run is finished when created: the figures are the cost of the service (MCP over HTTP, the
balancer, the ledger writes, the API round trips), not of research. Each instance answers one call first (loading
the research stack), then each round sends `--calls` `fast` research calls, at most `--concurrency` in flight
(closed loop), half in each protocol era. Reported per setup: throughput (median round) and latency p50/p99 over
all rounds.

Everything runs on this one machine: the client, nginx, PostgreSQL, the emulator and the instances share its CPUs,
so three instances can only help as far as there are cores to run them. `--ledger` also runs
`benchmarks/ledger.py` (ledger writes per second on SQLite and PostgreSQL) and prints its table.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import httpx2

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / 'tests'))

from support.scale import LEGACY, MODERN, Topology, call_tool, find_nginx, free_port, wait_for_port  # noqa: E402

TOKEN = 'bench-token-0123456789abcdef'
API_KEY = 'pplx-benchmark-scale-0123456789abcdef'


@contextmanager
def emulator(time_scale: float) -> Iterator[str]:
    """The emulator in its own process (not sharing the client's interpreter); yields its base URL."""
    port = free_port()
    command = [sys.executable, '-m', 'pydantic_ai_perplexity.cli', 'emulator', '--port', str(port)]
    command += ['--api-key', API_KEY, '--time-scale', str(time_scale)]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port, time.monotonic() + 60)
        yield f'http://127.0.0.1:{port}'
    finally:
        proc.terminate()
        proc.wait(10)


@contextmanager
def schema(base: str) -> Iterator[str]:
    import psycopg

    name = f'bench_{uuid.uuid4().hex[:12]}'
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA {name}')
    try:
        yield f'{base}{"&" if "?" in base else "?"}options=-csearch_path%3D{name}'
    finally:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA {name} CASCADE')


async def one_round(url: str, calls: int, concurrency: int) -> tuple[float, list[float], int]:
    """Wall time, per-call latencies and failures of `calls` research calls, `concurrency` at a time."""
    latencies: list[float] = []
    failures = 0
    next_call = 0
    limits = httpx2.Limits(max_connections=concurrency + 10, max_keepalive_connections=concurrency + 10)
    async with httpx2.AsyncClient(timeout=120, limits=limits) as http:

        async def worker() -> None:
            nonlocal next_call, failures
            while next_call < calls:
                n = next_call
                next_call += 1
                question = {'query': f'What is a heat pump? ({n})', 'effort': 'fast'}
                began = time.perf_counter()
                outcome = await call_tool(
                    http, url, 'perplexity_research', question, token=TOKEN, era=MODERN if n % 2 else LEGACY
                )
                latencies.append(time.perf_counter() - began)
                failures += not outcome.ok

        began = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for _ in range(concurrency):
                tg.start_soon(worker)
        return time.perf_counter() - began, latencies, failures


async def warm_up(topology: Topology) -> None:
    async with httpx2.AsyncClient(timeout=120) as http:
        for instance in topology.instances:
            await call_tool(http, instance.url, 'perplexity_research_list', {}, token=TOKEN)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--calls', type=int, default=300, help='calls per round')
    parser.add_argument('--concurrency', type=int, default=50, help='calls in flight at once')
    parser.add_argument('--rounds', type=int, default=3)
    parser.add_argument('--instances', type=int, nargs='+', default=[1, 3])
    parser.add_argument('--time-scale', type=float, default=0.0, help="the emulator's (0: runs finish at once)")
    parser.add_argument('--postgres', default=os.environ.get('PERPLEXITY_TEST_POSTGRES_URL'))
    parser.add_argument('--ledger', action='store_true', help='also run benchmarks/ledger.py')
    args = parser.parse_args()
    if not args.postgres:
        raise SystemExit('Needs PostgreSQL: pass --postgres URL or set PERPLEXITY_TEST_POSTGRES_URL.')
    nginx = find_nginx(install=False)
    if nginx is None:
        raise SystemExit('Needs nginx: apt-get install -y nginx')

    print(f'command: uv run --frozen python benchmarks/scale.py {" ".join(sys.argv[1:])}'.rstrip())
    system = f'{platform.system()} {platform.release()}, Python {platform.python_version()}'
    print(f'machine: {os.cpu_count()} CPUs, {system}')
    print(f'load average before: {" ".join(f"{x:.2f}" for x in os.getloadavg())}')
    print(
        f'{args.calls} fast research calls per round, {args.concurrency} in flight, {args.rounds} rounds; '
        f'emulator time scale {args.time_scale:g}\n'
    )
    print(f'{"instances":>9} {"calls/s":>9} {"range":>13} {"p50 ms":>8} {"p99 ms":>8} {"failed":>7}')
    with emulator(args.time_scale) as base_url:
        for count in args.instances:
            with schema(args.postgres) as ledger_url, tempfile.TemporaryDirectory(prefix='scale-bench-') as work:
                with Topology(
                    Path(work),
                    base_url=base_url,
                    api_key=API_KEY,
                    ledger_url=ledger_url,
                    count=count,
                    nginx=nginx,
                    PERPLEXITY_MCP_TOKEN=TOKEN,
                    PERPLEXITY_WAIT_SECONDS='60',
                ) as topology:
                    anyio.run(warm_up, topology)
                    rates: list[float] = []
                    latencies: list[float] = []
                    failed = 0
                    for _ in range(args.rounds):
                        wall, times, failures = anyio.run(one_round, topology.url, args.calls, args.concurrency)
                        rates.append(args.calls / wall)
                        latencies.extend(times)
                        failed += failures
            spread = f'{min(rates):,.0f}-{max(rates):,.0f}'
            print(
                f'{count:>9} {statistics.median(rates):>9,.1f} {spread:>13} '
                f'{percentile(latencies, 0.5) * 1000:>8,.0f} {percentile(latencies, 0.99) * 1000:>8,.0f} {failed:>7}'
            )
    print(f'\nload average after: {" ".join(f"{x:.2f}" for x in os.getloadavg())}')
    if args.ledger:
        print('\nLedger writes per second (benchmarks/ledger.py):\n', flush=True)
        subprocess.run(
            [sys.executable, str(ROOT / 'benchmarks' / 'ledger.py'), '--postgres', args.postgres], check=True
        )


if __name__ == '__main__':
    main()
