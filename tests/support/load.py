"""Concurrent research calls against the emulator, three ways: direct `Researcher` calls (the baseline), one
`PerplexityToolset` behind a pydantic-ai agent, and one MCP server over Streamable HTTP. Used by
`tests/reliability/test_load.py` (a small load in CI) and `benchmarks/load.py` (500 at once).

Every call must come back with its completed run; anything else (an exception, a failed tool call, a hand-off, a
JSON-RPC error) counts as an error. Latency is per call, from its start to its answer.
"""

from __future__ import annotations

import json
import resource
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2

QUESTIONS = (
    'What does the EU AI Act regulate?',
    'How do solid-state batteries work?',
    'What is the state of fusion energy?',
    'How do heat pumps work?',
    'What are AI agents?',
)


@dataclass
class LoadResult:
    """What one load run did: per-call latencies (seconds), errors, wall time, and the peak RSS when measured."""

    surface: str
    calls: int
    latencies: list[float] = field(default_factory=list[float])
    errors: list[str] = field(default_factory=list[str])
    wall_s: float = 0.0
    peak_rss_mb: float | None = None
    outcomes: Counter[str] = field(default_factory=Counter[str])

    def quantile(self, q: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))] if ordered else float('nan')

    def summary(self) -> dict[str, Any]:
        return {
            'calls': self.calls,
            'errors': len(self.errors),
            'p50_ms': round(self.quantile(0.5) * 1000, 1),
            'p99_ms': round(self.quantile(0.99) * 1000, 1),
            'max_ms': round(max(self.latencies, default=0.0) * 1000, 1),
            'wall_s': round(self.wall_s, 2),
            'peak_rss_mb': self.peak_rss_mb,
            'first_errors': self.errors[:3],
        }


def own_peak_rss_mb() -> float:
    """This process's peak resident set size so far, in MB."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(peak / (1024 * 1024) if sys.platform == 'darwin' else peak / 1024, 1)


def process_peak_rss_mb(pid: int) -> float | None:
    """Another process's peak resident set size (Linux `VmHWM`), in MB; None where it cannot be read."""
    try:
        status = Path(f'/proc/{pid}/status').read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith('VmHWM:'):
            return round(int(line.split()[1]) / 1024, 1)
    return None


async def _measure(result: LoadResult, n: int, one: Any) -> LoadResult:
    async def timed(i: int) -> None:
        started = time.perf_counter()
        try:
            outcome = await one(i)
        except Exception as exc:  # counted, never raised: a load run reports every failure
            outcome = f'{type(exc).__name__}: {exc}'[:300]
        result.latencies.append(time.perf_counter() - started)
        result.outcomes[outcome if outcome == 'completed' else 'error'] += 1
        if outcome != 'completed':
            result.errors.append(outcome)

    started = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for i in range(n):
            tg.start_soon(timed, i)
    result.wall_s = time.perf_counter() - started
    return result


async def direct(base_url: str, api_key: str, n: int, *, ledger: Path, tag: str, effort: str = 'fast') -> LoadResult:
    """`n` research calls at once on one `Researcher` (one HTTP client, one ledger): the baseline."""
    from pydantic_ai_perplexity import Researcher

    async with Researcher(api_key=api_key, base_url=base_url, ledger=ledger, effort=effort, wait_seconds=300) as r:

        async def one(i: int) -> str:
            result = await r.run(f'{QUESTIONS[i % len(QUESTIONS)]} ({tag}-{i})')
            return result.status

        return await _measure(LoadResult('direct Researcher', n), n, one)


async def toolset(base_url: str, api_key: str, n: int, *, ledger: Path, tag: str, effort: str = 'fast') -> LoadResult:
    """`n` agent runs at once, each making one `perplexity_research` call through one shared `PerplexityToolset`."""
    from pydantic_ai import Agent
    from pydantic_ai.messages import (
        ModelMessage,
        ModelRequest,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from pydantic_ai_perplexity import PerplexityToolset

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        parts = [p for m in messages if isinstance(m, ModelRequest) for p in m.parts]
        returned = [p for p in parts if isinstance(p, ToolReturnPart)]
        if not returned:
            prompt = next(p.content for p in parts if isinstance(p, UserPromptPart))
            return ModelResponse(parts=[ToolCallPart('perplexity_research', {'query': str(prompt)})])
        research = returned[-1].metadata.get('research_result') if isinstance(returned[-1].metadata, dict) else None
        status = research.status if research is not None else f'tool {returned[-1].outcome}: {returned[-1].content}'
        return ModelResponse(parts=[TextPart(str(status))])

    tools = PerplexityToolset(api_key=api_key, base_url=base_url, ledger=ledger, effort=effort, wait_seconds=300)
    agent = Agent(FunctionModel(respond), toolsets=[tools])
    async with agent:

        async def one(i: int) -> str:
            return (await agent.run(f'{QUESTIONS[i % len(QUESTIONS)]} ({tag}-{i})')).output

        return await _measure(LoadResult('PerplexityToolset', n), n, one)


async def mcp_http(url: str, n: int, *, tag: str, token: str | None = None, effort: str = 'fast') -> LoadResult:
    """`n` `tools/call perplexity_research` at once to one MCP server over Streamable HTTP (one connection each)."""
    headers = {'Content-Type': 'application/json', 'Accept': 'application/json, text/event-stream'}
    if token:
        headers['Authorization'] = f'Bearer {token}'
    limits = httpx2.Limits(max_connections=n + 10, max_keepalive_connections=n + 10)
    async with httpx2.AsyncClient(timeout=300, headers=headers, limits=limits) as client:

        async def one(i: int) -> str:
            arguments = {'query': f'{QUESTIONS[i % len(QUESTIONS)]} ({tag}-{i})', 'effort': effort}
            call = {'jsonrpc': '2.0', 'id': i, 'method': 'tools/call',
                    'params': {'name': 'perplexity_research', 'arguments': arguments}}  # fmt: skip
            reply = await client.post(url, content=json.dumps(call))
            if reply.status_code != 200:
                return f'HTTP {reply.status_code}: {reply.text[:200]}'
            lines = reply.text.replace('\r\n', '\n').split('\n')
            messages = [json.loads(line[5:]) for line in lines if line.startswith('data:')]
            [answer] = [m for m in messages if 'method' not in m]
            if 'error' in answer:
                return f'JSON-RPC error: {answer["error"]}'
            result = answer['result']
            if result.get('isError'):
                return f'isError: {result["content"][0]["text"][:200]}'
            return str(result['structuredContent']['status'])

        return await _measure(LoadResult('MCP over HTTP', n), n, one)
