"""A recorded session replays end to end through the toolset, MCP over stdio and the CLI.

For each way in: a recording proxy in front of an emulator (the "upstream") records a research call; the same
call against a replaying emulator gives the same answer, sources and cost, and a second recording proxy in front
of the replayer sees the same event sequence. The shipped recordings replay through each way in too.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from pydantic_ai_perplexity.emulator import Emulator
from support import live_recording
from support.live_recording import write_live_recording

SHIPPED = Path(__file__).parent / 'recordings'
QUESTION = 'What is the EU AI Act?'
EFFORT = 'fast'
TIMEOUT = 90

Outcome = dict[str, Any]
SPOTLIGHT = re.compile(r'<</?web-[0-9a-f]+>>')
WayIn = Callable[[str, str, Path], Outcome]


def _env(base_url: str, key: str, state: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(('PERPLEXITY_', 'OTEL_', 'LOGFIRE_'))}
    return env | {'PERPLEXITY_API_KEY': key, 'PERPLEXITY_BASE_URL': base_url, 'PERPLEXITY_STATE_DIR': str(state)}


def via_toolset(base_url: str, key: str, state: Path) -> Outcome:
    """`PerplexityToolset` in a pydantic-ai agent whose scripted model researches the question."""
    pytest.importorskip('pydantic_ai')
    import anyio
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelRequest, ToolReturnPart

    from pydantic_ai_perplexity import PerplexityToolset, ResearchResult
    from pydantic_ai_perplexity.testing import scripted_research_model

    async def main() -> Outcome:
        toolset = PerplexityToolset(api_key=key, base_url=base_url, ledger=state / 'ledger.sqlite3')
        agent = Agent(scripted_research_model(effort=EFFORT), toolsets=[toolset])
        result = await agent.run(QUESTION)
        returns = [
            p
            for m in result.all_messages()
            if isinstance(m, ModelRequest)
            for p in m.parts
            if isinstance(p, ToolReturnPart)
        ]
        research = returns[-1].metadata['research_result']  # type: ignore[index]
        assert isinstance(research, ResearchResult) and research.done
        return {
            'answer': research.answer,
            'sources': [s.url for s in research.sources],
            'cost_usd': research.cost_usd,
            'status': research.status,
        }

    return anyio.run(main)


def via_mcp_stdio(base_url: str, key: str, state: Path) -> Outcome:
    """The MCP server over stdio, spoken to in raw JSON-RPC lines."""
    pytest.importorskip('mcp')
    proc = subprocess.Popen(
        [sys.executable, '-m', 'pydantic_ai_perplexity.mcp'],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=_env(base_url, key, state),
    )
    assert proc.stdin is not None and proc.stdout is not None

    def send(message: dict[str, Any]) -> None:
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(message).encode() + b'\n')
        proc.stdin.flush()

    def answer(request_id: int) -> dict[str, Any]:
        assert proc.stdout is not None
        for line in iter(proc.stdout.readline, b''):
            message = json.loads(line)
            if message.get('id') == request_id and 'method' not in message:
                return message
        raise AssertionError(f'the MCP server closed its stdout before answering request {request_id}')

    try:
        info = {'name': 'replay-test', 'version': '1'}
        send(
            {
                'jsonrpc': '2.0',
                'id': 1,
                'method': 'initialize',
                'params': {'protocolVersion': '2025-06-18', 'capabilities': {}, 'clientInfo': info},
            }
        )
        answer(1)
        send({'jsonrpc': '2.0', 'method': 'notifications/initialized'})
        arguments = {'query': QUESTION, 'effort': EFFORT}
        send(
            {
                'jsonrpc': '2.0',
                'id': 2,
                'method': 'tools/call',
                'params': {'name': 'perplexity_research', 'arguments': arguments},
            }
        )
        structured = answer(2)['result']['structuredContent']
    finally:
        proc.stdin.close()
        proc.wait(timeout=TIMEOUT)
        proc.stdout.close()
    return {
        'answer': SPOTLIGHT.sub('<<web>>', structured['answer']),  # the delimiters are random per call
        'sources': [s['url'] for s in structured['sources']],
        'cost_usd': structured['cost_usd'],
        'status': structured['status'],
    }


def via_cli(base_url: str, key: str, state: Path) -> Outcome:
    """`pydantic-ai-perplexity research QUESTION --effort fast --json` in a subprocess."""
    done = subprocess.run(
        [sys.executable, '-m', 'pydantic_ai_perplexity.cli', 'research', QUESTION, '--effort', EFFORT, '--json'],
        env=_env(base_url, key, state),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    return {
        'answer': data['answer'],
        'sources': [s['url'] for s in data['sources']],
        'cost_usd': data['usage']['cost_usd'],
        'status': data['status'],
    }


WAYS: dict[str, WayIn] = {'toolset': via_toolset, 'mcp_stdio': via_mcp_stdio, 'cli': via_cli}


@contextmanager
def recording(upstream: Emulator, directory: Path) -> Iterator[Emulator]:
    with Emulator(record=directory, upstream=upstream.base_url) as proxy:
        yield proxy


def run_recordings(directory: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(directory.glob('run-*.json'))]


def event_types(data: dict[str, Any]) -> list[str]:
    return [e['event']['type'] for e in data['run']['events']]


@pytest.mark.slow
@pytest.mark.parametrize('way', list(WAYS))
def test_a_recorded_call_replays_with_the_same_answer_sources_cost_and_events(way: str, tmp_path: Path):
    call = WAYS[way]
    first, second = tmp_path / 'first', tmp_path / 'second'
    with Emulator(time_scale=0.002) as upstream, recording(upstream, first) as proxy:
        live = call(proxy.base_url, upstream.api_key, tmp_path / 'state-live')
    [recorded] = run_recordings(first)
    assert live['status'] == 'completed' and live['sources'] and live['cost_usd']
    # Replay, with a second recording proxy in front of the replayer to see the events it serves.
    with Emulator(replay=first, time_scale=0.002) as replayer, recording(replayer, second) as proxy:
        again = call(proxy.base_url, replayer.api_key, tmp_path / 'state-replay')
    [served] = run_recordings(second)
    assert again == live
    assert event_types(served) == event_types(recorded)
    assert served['run']['final']['usage'] == recorded['run']['final']['usage']


@pytest.mark.slow
@pytest.mark.parametrize('way', list(WAYS))
def test_the_shipped_recordings_replay_through_each_way_in(way: str, tmp_path: Path):
    [data] = [d for d in run_recordings(SHIPPED) if d['request']['body']['input'] == QUESTION]
    final = data['run']['final']
    recorded_urls = [r['url'] for i in final['output'] if i['type'] == 'search_results' for r in i['results']]
    with Emulator(replay=SHIPPED, time_scale=0.002) as replayer:
        outcome = WAYS[way](replayer.base_url, replayer.api_key, tmp_path)
    assert outcome['status'] == 'completed'
    assert outcome['cost_usd'] == final['usage']['cost']['total_cost']
    assert sorted(set(outcome['sources'])) == sorted(set(recorded_urls))


@pytest.mark.slow
@pytest.mark.parametrize('way', list(WAYS))
def test_a_recording_in_the_live_shape_replays_through_each_way_in(way: str, tmp_path: Path):
    """A run answered in the live API's shape (fetched pages, cache costs, tool-call details, live headers).

    Live facts: cfdude/mcp-perplexity-pro tests/fixtures/agent_low_fetch_url.json and agent_response_headers.json,
    captured 2026-10-09 (encoded in live_recording.py).
    """
    write_live_recording(tmp_path / 'live')
    with Emulator(replay=tmp_path / 'live', time_scale=0.002) as replayer:
        outcome = WAYS[way](replayer.base_url, replayer.api_key, tmp_path / 'state')
    assert outcome['status'] == 'completed'
    assert outcome['cost_usd'] == live_recording.USAGE['cost']['total_cost']
    assert {url for url, _ in live_recording.SEARCHED} <= set(outcome['sources'])
    # The fetched page is a source. The result and `--json` keep the API's answer whole; the model's text (MCP, with
    # its delimiters) resolves `[web:0]` to the page's number.
    page = outcome['sources'].index(live_recording.FETCHED[0]) + 1
    before, after = live_recording.ANSWER.split('[web:0]')
    if way.startswith('mcp'):
        assert f'{before}[{page}]{after}' in outcome['answer'] and '[web:' not in outcome['answer']
    else:
        assert live_recording.ANSWER in outcome['answer']
