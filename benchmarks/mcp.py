"""MCP server benchmarks: stdio cold start against the stdlib peer server, and the cost of going through MCP.

Run with `uv run --frozen python benchmarks/mcp.py [--runs 10] [--calls 30]`.

1. **Cold start**: from spawning the server to the answer of its first `tools/list` (after `initialize` and
   `notifications/initialized`, protocol 2025-06-18), over stdio, for `python -m pydantic_ai_perplexity.mcp` and
   for `perplexity-agent-mcp` 0.4.0 (a standard-library-only server from PyPI, installed into a throwaway venv
   under the system temp dir; not a project dependency). Runs alternate between the two so both see the same
   machine load; each gets warm-up runs first, with bytecode compiled into a shared `PYTHONPYCACHEPREFIX` (as an
   installed package has). Also reported: spawn to the first answered tool call (`perplexity_search` against
   the emulator), i.e. when the MCP SDK has loaded behind the instant handshake.
2. **Round trip**: a `fast` research call against the emulator with `time_scale=0` (runs finish at once), in
   process through `Researcher.run`, and through the MCP server over stdio with the MCP SDK's client (one
   session kept open). Medians and the per-call overhead.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

# This file is named like the MCP SDK's package: keep its directory off the import path.
sys.path[:] = [p for p in sys.path if Path(p or '.').resolve() != Path(__file__).resolve().parent]

WORK = Path(tempfile.gettempdir()) / 'pydantic-ai-perplexity-bench'
PEER_VENV = WORK / 'peer-venv'
PEER = 'perplexity-agent-mcp==0.4.0'
OURS = [sys.executable, '-m', 'pydantic_ai_perplexity.mcp']

INITIALIZE = {
    'jsonrpc': '2.0',
    'id': 1,
    'method': 'initialize',
    'params': {'protocolVersion': '2025-06-18', 'capabilities': {}, 'clientInfo': {'name': 'bench', 'version': '1'}},
}
INITIALIZED = {'jsonrpc': '2.0', 'method': 'notifications/initialized'}
TOOLS_LIST = {'jsonrpc': '2.0', 'id': 2, 'method': 'tools/list'}
SEARCH = {
    'jsonrpc': '2.0',
    'id': 3,
    'method': 'tools/call',
    'params': {'name': 'perplexity_search', 'arguments': {'query': 'heat pumps'}},
}


def peer_command() -> list[str]:
    """The peer server's command, installing it into a throwaway venv on first use."""
    executable = PEER_VENV / ('Scripts' if os.name == 'nt' else 'bin') / 'perplexity-agent-mcp'
    if not executable.exists():
        uv = shutil.which('uv')
        if uv is None:
            raise SystemExit('uv is needed to install the peer server into a throwaway venv')
        subprocess.run([uv, 'venv', '-q', str(PEER_VENV)], check=True)
        python = PEER_VENV / ('Scripts' if os.name == 'nt' else 'bin') / 'python'
        subprocess.run([uv, 'pip', 'install', '-q', '--python', str(python), PEER], check=True)
    return [str(executable)]


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in ('HOME', 'LOGNAME', 'PATH', 'SHELL', 'TERM', 'USER')}
    env['PYTHONPYCACHEPREFIX'] = str(WORK / 'pycache')
    env['PERPLEXITY_API_KEY'] = 'pplx-benchmark-dummy'
    env['PERPLEXITY_STATE_DIR'] = str(WORK / 'state')
    env.update(extra or {})
    return env


def send(proc: subprocess.Popen[bytes], *messages: dict[str, Any]) -> None:
    assert proc.stdin is not None
    proc.stdin.write(b''.join(json.dumps(m).encode() + b'\n' for m in messages))
    proc.stdin.flush()


def answer(proc: subprocess.Popen[bytes], request_id: int) -> dict[str, Any]:
    assert proc.stdout is not None
    while True:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f'the server closed stdout before answering request {request_id}')
        message = json.loads(line)
        if message.get('id') == request_id:
            return message


def cold_start(command: list[str], env: dict[str, str], *, tool_call: bool = False) -> tuple[float, float | None]:
    """Seconds from spawn to the `tools/list` answer, and (optionally) to an answered tool call."""
    start = time.perf_counter()
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    try:
        send(proc, INITIALIZE)
        answer(proc, 1)
        send(proc, INITIALIZED, TOOLS_LIST)
        answer(proc, 2)
        listed = time.perf_counter() - start
        called = None
        if tool_call:
            send(proc, SEARCH)
            reply = answer(proc, 3)
            assert not reply['result'].get('isError'), reply
            called = time.perf_counter() - start
        return listed, called
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=60)
        assert proc.stdout is not None
        proc.stdout.close()


def median_ms(values: list[float]) -> float:
    return statistics.median(values) * 1000


async def round_trip(base_url: str, api_key: str, calls: int) -> tuple[list[float], list[float]]:
    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters

    from pydantic_ai_perplexity import Researcher

    arguments = {'query': 'What is the EU AI Act?', 'effort': 'fast'}
    direct: list[float] = []
    async with Researcher(api_key=api_key, base_url=base_url, ledger=WORK / 'state' / 'bench.sqlite3') as researcher:
        for _ in range(calls + 2):
            start = time.perf_counter()
            result = await researcher.run(arguments['query'], effort='fast')
            assert result.status == 'completed', result.status
            direct.append(time.perf_counter() - start)
    params = StdioServerParameters(
        command=OURS[0], args=OURS[1:], env=child_env({'PERPLEXITY_API_KEY': api_key, 'PERPLEXITY_BASE_URL': base_url})
    )
    through_mcp: list[float] = []
    async with Client(params, mode='legacy') as client:
        for _ in range(calls + 2):
            start = time.perf_counter()
            reply = await client.call_tool('perplexity_research', arguments)
            assert reply.structured_content and reply.structured_content['status'] == 'completed', reply
            through_mcp.append(time.perf_counter() - start)
    return direct[2:], through_mcp[2:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--runs', type=int, default=10, help='timed cold starts per server (after 2 warm-ups)')
    parser.add_argument('--calls', type=int, default=30, help='timed research calls per path (after 2 warm-ups)')
    args = parser.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    peer = peer_command()

    from pydantic_ai_perplexity.emulator import Emulator

    with Emulator(time_scale=0) as emu:
        ours_env = child_env({'PERPLEXITY_API_KEY': emu.api_key, 'PERPLEXITY_BASE_URL': emu.base_url})
        peer_env = child_env()
        for _ in range(2):  # warm-ups: compile bytecode, fill the OS page cache
            cold_start(OURS, ours_env, tool_call=True)
            cold_start(peer, peer_env)
        # The serving process skips Logfire's idle pydantic plugin; an explicit (empty) setting loads every plugin.
        plugin_env = {**ours_env, 'PYDANTIC_DISABLE_PLUGINS': ''}
        ours_list: list[float] = []
        ours_call: list[float] = []
        plugin_call: list[float] = []
        peer_list: list[float] = []
        for _ in range(args.runs):
            listed, called = cold_start(OURS, ours_env, tool_call=True)
            ours_list.append(listed)
            ours_call.append(called or 0.0)
            peer_list.append(cold_start(peer, peer_env)[0])
            plugin_call.append(cold_start(OURS, plugin_env, tool_call=True)[1] or 0.0)
        direct, through_mcp = anyio.run(round_trip, emu.base_url, emu.api_key, args.calls)

    ratio = median_ms(ours_list) / median_ms(peer_list)
    load = ' '.join(f'{x:.2f}' for x in os.getloadavg()) if hasattr(os, 'getloadavg') else 'n/a'
    print(f'load average: {load} on {os.cpu_count()} CPUs')
    print(f'\nstdio cold start, spawn to first tools/list answer ({args.runs} runs each, medians):')
    print(f'  {"pydantic-ai-perplexity":27} {median_ms(ours_list):7.1f} ms   (min {min(ours_list) * 1000:.1f})')
    print(f'  {PEER:27} {median_ms(peer_list):7.1f} ms   (min {min(peer_list) * 1000:.1f})')
    print(f'  {"ratio":27} {ratio:7.2f}x   (target <= 8x, aim <= 5x)')
    print(f'  spawn to first answered tool call (MCP SDK loaded): {median_ms(ours_call):.1f} ms')
    print(f'    ... with every pydantic plugin loaded (Logfire): {median_ms(plugin_call):.1f} ms')
    overhead = median_ms(through_mcp) - median_ms(direct)
    print(f'\nresearch round trip against the emulator ({args.calls} calls each, medians):')
    print(f'  in process (Researcher.run)   {median_ms(direct):7.1f} ms')
    print(f'  through MCP over stdio        {median_ms(through_mcp):7.1f} ms')
    print(f'  overhead per call             {overhead:7.1f} ms ({median_ms(through_mcp) / median_ms(direct):.2f}x)')


if __name__ == '__main__':
    main()
