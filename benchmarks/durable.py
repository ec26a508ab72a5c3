"""The cost of durability: a research call checkpointed by DBOS against the same call without it.

    uv run --frozen python benchmarks/durable.py [--calls 40] [--system-db sqlite:///... | postgresql://...]

1. **Research call**: `Researcher.run` against the same call inside a DBOS workflow (`durable.run`: a workflow,
   a *start* and a *collect* step, each checkpointed to the system database).
2. **Agent**: an agent with `PerplexityToolset` making one `perplexity_research` call, against the same agent with
   `DBOSDurability` run inside a `@DBOS.workflow` (its two model requests become steps too, and the tool's
   research call splits into its two steps by itself).

Pairs are interleaved, medians after a warm-up. The emulator runs in a child process with runs that finish at
once, so the ratio shows the whole overhead against the shortest possible research call: against a real run of
seconds to minutes it is noise. The system database is a SQLite file in a temporary directory by default.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from dbos import DBOS, DBOSConfig
from pydantic_ai import Agent
from pydantic_ai.durable_exec.dbos import DBOSDurability

from pydantic_ai_perplexity import PerplexityToolset, Researcher, durable

sys.path.insert(0, str(Path(__file__).parent))
from toolset import one_call_model

from client import KEY, free_port, start_emulator_process

QUESTION = 'What is the EU AI Act?'


async def timed(call: Callable[[], Awaitable[Any]]) -> float:
    start = time.perf_counter()
    await call()
    return time.perf_counter() - start


async def measure(base_url: str, state: Path, calls: int, system_db: str) -> dict[str, tuple[float, float, int]]:
    researcher = Researcher(api_key=KEY, base_url=base_url, effort='fast', ledger=state / 'research.sqlite3')
    plain_agent = Agent(
        one_call_model('perplexity_research'),
        toolsets=[PerplexityToolset(api_key=KEY, base_url=base_url, effort='fast', ledger=state / 'plain.sqlite3')],
    )
    durable_agent = Agent(
        one_call_model('perplexity_research'),
        name='benchmark_agent',
        toolsets=[PerplexityToolset(api_key=KEY, base_url=base_url, effort='fast', ledger=state / 'dbos.sqlite3')],
        capabilities=[DBOSDurability()],
    )

    @DBOS.workflow(name='benchmark.research')
    async def research_workflow(query: str) -> str:
        return (await durable.run(researcher, query)).status

    @DBOS.workflow(name='benchmark.agent')
    async def agent_workflow(prompt: str) -> str:
        return (await durable_agent.run(prompt)).output

    config: DBOSConfig = {'name': 'benchmark-durable', 'system_database_url': system_db, 'log_level': 'WARNING'}
    DBOS(config=config)
    DBOS.launch()
    pairs: dict[str, tuple[list[float], list[float]]] = {'research': ([], []), 'agent': ([], [])}
    try:
        async with researcher, plain_agent, durable_agent:
            for i in range(calls + 5):
                plain = await timed(lambda: researcher.run(QUESTION))
                durable_call = await timed(lambda: research_workflow(QUESTION))
                plain_run = await timed(lambda: plain_agent.run('go'))
                durable_run = await timed(lambda: agent_workflow('go'))
                if i >= 5:  # warm-up
                    pairs['research'][0].append(plain)
                    pairs['research'][1].append(durable_call)
                    pairs['agent'][0].append(plain_run)
                    pairs['agent'][1].append(durable_run)
        workflows = await DBOS.list_workflows_async(name='benchmark.agent', limit=1)
        steps = await DBOS.list_workflow_steps_async(workflows[0].workflow_id) if workflows else []
        research_steps = sum(1 for s in steps if s['function_name'].startswith('perplexity.research.'))
    finally:
        DBOS.destroy()
    return {
        name: (statistics.median(base), statistics.median(dur), research_steps if name == 'agent' else 2)
        for name, (base, dur) in pairs.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--calls', type=int, default=40)
    parser.add_argument('--system-db', help='DBOS system database URL (default: a SQLite file in a temporary dir)')
    args = parser.parse_args()
    port = free_port()
    child = start_emulator_process(port)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            system_db = args.system_db or f'sqlite:///{Path(tmp) / "dbos.sqlite3"}'
            found = asyncio.run(measure(f'http://127.0.0.1:{port}', Path(tmp), args.calls, system_db))
    finally:
        child.terminate()
        child.wait(10)
    rows: list[tuple[str, str]] = []
    for name, label in (('research', 'research call'), ('agent', 'agent run with one research call')):
        plain, durable_s, steps = found[name]
        rows += [
            (f'median {label}, plain (ms)', f'{plain * 1000:.1f}'),
            (f'median {label}, in a DBOS workflow (ms)', f'{durable_s * 1000:.1f}'),
            (f'  DBOS / plain ({steps} research steps per call)', f'{durable_s / plain:.2f}x'),
        ]
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f'{key:<{width}}  {value}')


if __name__ == '__main__':
    main()
