"""Load: 500 research calls at once, against the emulator on loopback, three ways.

    uv run --frozen python benchmarks/load.py [--calls 500] [--time-scale 0.01] [--effort fast] [--rounds 1]

1. **Direct** `Researcher.run` calls on one `Researcher` (one HTTP client, one SQLite ledger): the baseline.
2. **Toolset**: as many pydantic-ai agent runs at once, each making one `perplexity_research` call through one
   shared `PerplexityToolset`.
3. **MCP over HTTP**: as many `tools/call perplexity_research` requests at once to one MCP server process
   (`python -m pydantic_ai_perplexity.mcp --transport http`), one connection each.

The emulator runs in its own process (`pydantic-ai-perplexity emulator`); at the default time scale a `fast` run
takes 50 ms, so every call is in flight at once. Direct and toolset loads each run in a fresh process, so their
peak RSS is their own; the MCP figure is the server process's peak (`VmHWM`). The load is bounded (`--calls`
calls, then it stops) and a stuck call fails the run after `--deadline` seconds.

Reported per way in: errors (the target is 0: every call returns its completed run), latency p50 and p99 per call,
their overhead over the direct baseline of the same run, wall time and peak RSS. Also written to
`benchmarks/results/load.json`, which `benchmarks/reliability_report.py` adds to the README's reliability section.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / 'tests'))

from support import load  # noqa: E402

API_KEY = 'pplx-benchmark-load-0123456789abcdef'
RESULTS = ROOT / 'benchmarks' / 'results' / 'load.json'


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def wait_for_port(port: int, deadline: float) -> None:
    while True:
        try:
            with socket.create_connection(('127.0.0.1', port), timeout=1):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(f'nothing listens on port {port}') from None
            time.sleep(0.05)


def child_env(base_url: str, state: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in ('HOME', 'LOGNAME', 'PATH', 'SHELL', 'TERM', 'USER', 'LANG')}
    env.update(
        PERPLEXITY_API_KEY=API_KEY,
        PERPLEXITY_BASE_URL=base_url,
        PERPLEXITY_STATE_DIR=str(state),
        PYDANTIC_DISABLE_PLUGINS='logfire-plugin',
        **extra,
    )
    return env


@contextmanager
def emulator(time_scale: float) -> Iterator[str]:
    """The emulator in its own process (not sharing an interpreter with the load); yields its base URL."""
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
def mcp_server(base_url: str, state: Path) -> Iterator[tuple[str, int]]:
    """One MCP server over HTTP; yields its URL and pid."""
    command = [sys.executable, '-m', 'pydantic_ai_perplexity.mcp', '--transport', 'http', '--port', '0']
    env = child_env(base_url, state, PERPLEXITY_WAIT_SECONDS='300')
    proc = subprocess.Popen(
        command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env
    )
    assert proc.stderr is not None
    url = ''
    for line in iter(proc.stderr.readline, b''):
        if b'listening on ' in line:
            url = line.decode().split('listening on ', 1)[1].strip()
            break
    if not url:
        proc.kill()
        raise RuntimeError('the MCP server did not start')
    try:
        yield url, proc.pid
    finally:
        proc.terminate()
        proc.wait(30)
        proc.stderr.close()


def in_child(phase: str, base_url: str, calls: int, effort: str, deadline: float, state: Path) -> dict[str, Any]:
    """Run one in-process load in a fresh interpreter; its summary, with that process's own peak RSS."""
    command = [sys.executable, __file__, '--phase', phase, '--calls', str(calls), '--effort', effort]
    command += ['--deadline', str(deadline)]
    done = subprocess.run(
        command, env=child_env(base_url, state), capture_output=True, timeout=deadline + 60, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f'{phase} load failed:\n{done.stderr.decode()[-3000:]}')
    return json.loads(done.stdout)


def phase_main(phase: str, calls: int, effort: str, deadline: float) -> None:
    """The child: one load in this process, a JSON summary on stdout."""
    base_url, key, state = (
        os.environ['PERPLEXITY_BASE_URL'],
        os.environ['PERPLEXITY_API_KEY'],
        Path(os.environ['PERPLEXITY_STATE_DIR']),
    )
    run = load.direct if phase == 'direct' else load.toolset

    async def main() -> load.LoadResult:
        with anyio.fail_after(deadline):
            await run(base_url, key, 5, ledger=state / f'{phase}-warm.sqlite3', tag=f'{phase}-warm', effort=effort)
            return await run(base_url, key, calls, ledger=state / f'{phase}.sqlite3', tag=phase, effort=effort)

    result = anyio.run(main)
    summary = result.summary()
    summary['peak_rss_mb'] = load.own_peak_rss_mb()
    print(json.dumps(summary))


def mcp_phase(url: str, pid: int, calls: int, effort: str, deadline: float) -> dict[str, Any]:
    async def main() -> load.LoadResult:
        with anyio.fail_after(deadline):
            await load.mcp_http(url, 5, tag='mcp-warm', effort=effort)
            return await load.mcp_http(url, calls, tag='mcp', effort=effort)

    summary = anyio.run(main).summary()
    summary['peak_rss_mb'] = load.process_peak_rss_mb(pid)
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--calls', type=int, default=500)
    parser.add_argument('--time-scale', type=float, default=0.01, help="the emulator's real seconds per emulated one")
    parser.add_argument('--effort', default='fast')
    parser.add_argument('--deadline', type=float, default=300.0, help='seconds before a load counts as stuck')
    parser.add_argument('--phase', choices=('direct', 'toolset'), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:
        phase_main(args.phase, args.calls, args.effort, args.deadline)
        return

    print(
        f'{args.calls} concurrent `{args.effort}` research calls per way in; emulator time scale {args.time_scale:g}; '
        f'Python {platform.python_version()}, {platform.system()} {platform.machine()}, {os.cpu_count()} CPUs'
        + (f', load average {os.getloadavg()[0]:.1f}' if hasattr(os, 'getloadavg') else ''),
        flush=True,
    )
    rows: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp, emulator(args.time_scale) as base_url:
        state = Path(tmp)
        rows['direct Researcher'] = in_child('direct', base_url, args.calls, args.effort, args.deadline, state)
        rows['PerplexityToolset'] = in_child('toolset', base_url, args.calls, args.effort, args.deadline, state)
        with mcp_server(base_url, state / 'mcp') as (url, pid):
            rows['MCP over HTTP'] = mcp_phase(url, pid, args.calls, args.effort, args.deadline)
    base = rows['direct Researcher']
    print()
    print('| way in | calls | errors | p50 | p99 | p50 overhead | p99 overhead | wall | peak RSS |')
    print('|---|---|---|---|---|---|---|---|---|')
    for name, row in rows.items():
        row['p50_overhead_ms'] = round(row['p50_ms'] - base['p50_ms'], 1)
        row['p99_overhead_ms'] = round(row['p99_ms'] - base['p99_ms'], 1)
        overhead = (
            '(baseline)' if row is base else f'+{row["p50_overhead_ms"]:.0f} ms ({row["p50_ms"] / base["p50_ms"]:.2f}x)'
        )
        overhead99 = (
            '(baseline)' if row is base else f'+{row["p99_overhead_ms"]:.0f} ms ({row["p99_ms"] / base["p99_ms"]:.2f}x)'
        )
        print(
            f'| {name} | {row["calls"]} | {row["errors"]} | {row["p50_ms"]:.0f} ms | {row["p99_ms"]:.0f} ms '
            f'| {overhead} | {overhead99} | {row["wall_s"]:.1f} s | {row["peak_rss_mb"]} MB |'
        )
        for error in row['first_errors']:
            print(f'    error: {error}')
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    report = {
        'calls': args.calls,
        'effort': args.effort,
        'time_scale': args.time_scale,
        'python': platform.python_version(),
        'platform': f'{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs',
        'load_average': round(os.getloadavg()[0], 1) if hasattr(os, 'getloadavg') else None,
        'rows': rows,
    }
    RESULTS.write_text(json.dumps(report, indent=1) + '\n', encoding='utf-8')
    print(f'\nwritten to {RESULTS.relative_to(ROOT)}')
    if any(row['errors'] for row in rows.values()):
        raise SystemExit(1)


if __name__ == '__main__':
    main()
