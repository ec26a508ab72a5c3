"""Client benchmarks against the emulator: per-call overhead, and HTTP requests spent waiting on a long run.

Run with `uv run --frozen python benchmarks/client.py [--calls N]`. Prints a table; writes no files.

1. Overhead: `PerplexityClient.retrieve` / `create` against a bare `httpx2.AsyncClient` GET / POST of the same
   request (same URL, headers and body; the bare side decodes the JSON, the client also validates it into
   models). Calls are interleaved and the medians compared. Target: ≤ 1.3x. The emulator runs in its own
   process so that its work does not share our interpreter.
2. Waiting: HTTP requests issued while waiting on a background run of 60 emulated seconds, by `wait()`
   (stream, resumed after drops) and by polling `retrieve` every 2 emulated seconds. Target: ≤ 1/10.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import httpx2

from pydantic_ai_perplexity.client import PerplexityClient
from pydantic_ai_perplexity.emulator import Emulator

KEY = 'pplx-benchmark-0123456789abcdef'
TIME_SCALE = 0.01  # real seconds per emulated second, for the waiting benchmark


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return int(sock.getsockname()[1])


def start_emulator_process(port: int, time_scale: float = 0.0) -> subprocess.Popen[bytes]:
    """The emulator in a child process; by default its runs finish at once (time_scale 0)."""
    code = (
        'from pydantic_ai_perplexity.emulator import serve; '
        f'serve(host="127.0.0.1", port={port}, api_key={KEY!r}, time_scale={time_scale!r}, on_ready=lambda *a: None)'
    )
    env = {**os.environ, 'PYTHONWARNINGS': 'ignore'}
    child = subprocess.Popen(
        [sys.executable, '-c', code], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            headers = {'Authorization': f'Bearer {KEY}'}  # the models list answers 401 without a key, as live
            if httpx2.get(f'http://127.0.0.1:{port}/v1/models', headers=headers, timeout=1).status_code == 200:
                return child
        except httpx2.TransportError:
            time.sleep(0.05)
    child.kill()
    raise SystemExit('the emulator did not start')


async def timed(call: Callable[[], Awaitable[Any]]) -> float:
    start = time.perf_counter()
    await call()
    return time.perf_counter() - start


async def overhead(base_url: str, calls: int) -> list[tuple[str, float, float]]:
    headers = {'Authorization': f'Bearer {KEY}', 'Accept': 'application/json'}
    body = {'input': 'When did the EU AI Act enter into force?', 'effort': 'fast'}
    async with (
        httpx2.AsyncClient(timeout=60) as bare,
        PerplexityClient(api_key=KEY, base_url=base_url) as client,
    ):
        run = await client.create(body['input'], effort='fast', store=True)
        run_url = f'{base_url}/v1/agent/{run.id}'

        async def bare_get() -> Any:
            response = await bare.get(run_url, headers=headers)
            response.raise_for_status()
            return response.json()

        async def bare_post() -> Any:
            response = await bare.post(f'{base_url}/v1/agent', json=body, headers=headers)
            response.raise_for_status()
            return response.json()

        pairs: dict[str, tuple[Callable[[], Awaitable[Any]], Callable[[], Awaitable[Any]]]] = {
            'retrieve (GET /v1/agent/{id})': (bare_get, lambda: client.retrieve(run.id)),
            'create (POST /v1/agent, blocking)': (bare_post, lambda: client.create(body['input'], effort='fast')),
        }
        for bare_call, client_call in pairs.values():  # warm up connections and code paths
            for _ in range(20):
                await bare_call()
                await client_call()
        rows: list[tuple[str, float, float]] = []
        for name, (bare_call, client_call) in pairs.items():
            bare_times: list[float] = []
            client_times: list[float] = []
            for i in range(calls):
                order = (bare_call, client_call) if i % 2 == 0 else (client_call, bare_call)
                for call in order:
                    (bare_times if call is bare_call else client_times).append(await timed(call))
            rows.append((name, statistics.median(bare_times), statistics.median(client_times)))
        return rows


async def waiting() -> tuple[int, int, float, float]:
    """(requests by wait(), requests by 2 s polling, real seconds each) for a 60-emulated-second run."""
    async with Emulator(api_key=KEY, time_scale=TIME_SCALE) as emu:
        async with PerplexityClient(api_key=KEY, base_url=emu.base_url) as client:
            run = await client.start('A survey of heat pump adoption [[emulate: duration=60]]', effort='medium')
            emu.requests.clear()
            started = time.perf_counter()
            final = await client.wait(run.id, timeout=60)
            streamed_seconds = time.perf_counter() - started
            assert final.status == 'completed', final.status
            streamed = len(emu.requests)

            run = await client.start('A survey of heat pump adoption, again [[emulate: duration=60]]', effort='medium')
            emu.requests.clear()
            started = time.perf_counter()
            tick = started
            while not (await client.retrieve(run.id)).done:
                tick += 2 * TIME_SCALE  # on a fixed schedule, so request latency does not stretch the interval
                await anyio.sleep(max(0.0, tick - time.perf_counter()))
            polled_seconds = time.perf_counter() - started
            polled = len(emu.requests)
    return streamed, polled, streamed_seconds, polled_seconds


async def main(calls: int) -> None:
    port = free_port()
    child = start_emulator_process(port)
    try:
        rows = await overhead(f'http://127.0.0.1:{port}', calls)
    finally:
        child.terminate()
        child.wait(10)
    streamed, polled, streamed_s, polled_s = await waiting()

    print(f'\n1. Per-call overhead: median of {calls} interleaved calls each, emulator in a separate process')
    print(f'   {"call":36} {"bare httpx2":>12} {"client":>10} {"ratio":>7}  target')
    for name, bare_s, client_s in rows:
        ratio = client_s / bare_s
        verdict = 'ok' if ratio <= 1.3 else 'MISSED'
        print(f'   {name:36} {bare_s * 1000:9.3f} ms {client_s * 1000:7.3f} ms {ratio:6.2f}x  <= 1.3x {verdict}')
    ratio = streamed / polled
    print('\n2. HTTP requests while waiting on a 60 s (emulated) background run')
    print(f'   {"method":36} {"requests":>9} {"real time":>10}')
    print(f'   {"wait() (stream, resumed on drops)":36} {streamed:9d} {streamed_s:8.2f} s')
    print(f'   {"polling every 2 emulated seconds":36} {polled:9d} {polled_s:8.2f} s')
    print(f'   ratio {streamed}/{polled} = {ratio:.3f}  target <= 0.100 {"ok" if ratio <= 0.1 else "MISSED"}\n')


if __name__ == '__main__':
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument('--calls', type=int, default=300, help='calls per side and operation (default 300)')
    anyio.run(main, parser.parse_args().calls)
