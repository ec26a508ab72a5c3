"""Toolset overhead and concurrency, against the emulator on loopback.

    uv run --frozen python benchmarks/toolset.py [--calls 60] [--concurrent 200]

1. Per-call overhead of a `perplexity_research` tool call through `PerplexityToolset` (Researcher: ledger
   reservation, background start, streamed wait, rendering) versus the same agent calling a plain tool that does
   `PerplexityClient.start` + `wait` directly. Both go through the same pydantic-ai agent loop, interleaved, so
   the ratio isolates what the toolset adds. Target: <= 1.2x median. The emulator runs in a child process (runs
   finish at once), so the measured process does only the client side.
2. 200 research calls at once through one toolset (one agent, one HTTP client, one ledger): wall time, peak RSS
   of the process, errors (target 0, peak RSS < 250 MB).
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_perplexity import PerplexityClient, PerplexityToolset

sys.path.insert(0, str(Path(__file__).parent))
from client import KEY, free_port, start_emulator_process


class Endpoint:
    """Where the emulator child listens."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.api_key = KEY


def one_call_model(tool: str, n: int = 1) -> FunctionModel:
    """Calls `tool` n times in one response, then ends with the number of successful returns."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        if isinstance(last, ModelRequest) and any(isinstance(p, ToolReturnPart) for p in last.parts):
            ok = sum(1 for p in last.parts if isinstance(p, ToolReturnPart) and p.outcome == 'success')
            return ModelResponse(parts=[TextPart(str(ok))])
        return ModelResponse(parts=[ToolCallPart(tool, {'query': f'EU AI Act question {i}'}) for i in range(n)])

    return FunctionModel(respond)


async def overhead(emu: Endpoint, calls: int, state: Path) -> tuple[float, float]:
    client = PerplexityClient(api_key=emu.api_key, base_url=emu.base_url)
    direct_agent = Agent(one_call_model('direct_research'))

    @direct_agent.tool_plain
    async def direct_research(query: str) -> str:  # pyright: ignore[reportUnusedFunction]
        run = await client.start(query, effort='fast')
        done = await client.wait(run.id, timeout=60)
        return done.output_text

    toolset = PerplexityToolset(
        api_key=emu.api_key, base_url=emu.base_url, effort='fast', ledger=state / 'overhead.sqlite3'
    )
    toolset_agent = Agent(one_call_model('perplexity_research'), toolsets=[toolset])
    direct: list[float] = []
    via_toolset: list[float] = []
    async with client, toolset_agent:
        for i in range(calls + 5):
            for agent, sink in ((direct_agent, direct), (toolset_agent, via_toolset)):
                t0 = time.perf_counter()
                result = await agent.run('go')
                elapsed = time.perf_counter() - t0
                assert result.output == '1', result.output
                if i >= 5:  # warm-up
                    sink.append(elapsed)
    return statistics.median(direct), statistics.median(via_toolset)


async def concurrent(emu: Endpoint, n: int, state: Path) -> tuple[float, int, int]:
    toolset = PerplexityToolset(
        api_key=emu.api_key, base_url=emu.base_url, effort='fast', ledger=state / 'concurrent.sqlite3'
    )
    agent = Agent(one_call_model('perplexity_research', n), toolsets=[toolset])
    async with agent:
        t0 = time.perf_counter()
        result = await agent.run('go')
        wall = time.perf_counter() - t0
    ok = int(result.output)
    return wall, ok, n - ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--calls', type=int, default=60)
    parser.add_argument('--concurrent', type=int, default=200)
    args = parser.parse_args()
    port = free_port()
    child = start_emulator_process(port)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            emu, state = Endpoint(f'http://127.0.0.1:{port}'), Path(tmp)
            direct, via = asyncio.run(overhead(emu, args.calls, state))
            wall, ok, errors = asyncio.run(concurrent(emu, args.concurrent, state))
    finally:
        child.terminate()
        child.wait(10)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    rows: list[tuple[str, Any]] = [
        ('median agent run, direct client tool (ms)', f'{direct * 1000:.1f}'),
        ('median agent run, PerplexityToolset (ms)', f'{via * 1000:.1f}'),
        ('toolset / direct (target <= 1.2x)', f'{via / direct:.2f}x'),
        (f'{args.concurrent} concurrent research calls, wall (s)', f'{wall:.2f}'),
        ('  completed / errors (target 0)', f'{ok} / {errors}'),
        ('peak RSS of this process (MB; target < 250)', f'{peak_mb:.0f}'),
    ]
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f'{key:<{width}}  {value}')
    if errors:
        sys.exit(1)


if __name__ == '__main__':
    main()
