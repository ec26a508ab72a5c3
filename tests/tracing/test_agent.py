"""In an instrumented pydantic-ai agent, research spans nest under the tool call that asked for them."""

from __future__ import annotations

import pytest
from inline_snapshot import snapshot
from logfire.testing import CaptureLogfire
from pydantic_ai import Agent

from pydantic_ai_perplexity import PerplexityToolset
from pydantic_ai_perplexity.emulator import Emulator
from pydantic_ai_perplexity.testing import scripted_research_model
from support.tracing import span_tree

pytestmark = pytest.mark.anyio


def _names(tree: list[dict[str, object]]) -> list[object]:
    """Names only, nested: `[name, [children...]]`."""
    return [
        [node['name'], _names(node['children'])] if 'children' in node else node['name']  # type: ignore[arg-type]
        for node in tree
    ]


async def test_research_nests_under_invoke_agent_and_execute_tool(emulator: Emulator, capfire: CaptureLogfire):
    toolset = PerplexityToolset(api_key=emulator.api_key, base_url=emulator.base_url, effort='fast')
    agent = Agent(scripted_research_model(), toolsets=[toolset], name='researcher')
    agent.instrument = True
    async with agent:
        result = await agent.run('What is the EU AI Act?')
    assert 'Sources:' in result.output
    assert _names(span_tree(capfire)) == snapshot(
        [
            [
                'invoke_agent researcher',
                [
                    'chat scripted-researcher',
                    [
                        'execute_tool perplexity_research',
                        ['perplexity.research'],
                    ],
                    'chat scripted-researcher',
                ],
            ]
        ]
    )


async def test_a_handoff_and_its_collection_are_two_tool_calls_linked_in_one_agent_trace(
    emulator: Emulator, capfire: CaptureLogfire
):
    toolset = PerplexityToolset(api_key=emulator.api_key, base_url=emulator.base_url, effort='high', wait_seconds=0.05)
    agent = Agent(scripted_research_model(max_collects=200), toolsets=[toolset], name='researcher')
    agent.instrument = True
    async with agent:
        await agent.run('Survey of fusion pilot plants [[emulate: duration=60]]')
    spans = capfire.exporter.exported_spans_as_dict()
    [research] = [s for s in spans if s['name'] == 'perplexity.research']
    collects = [s for s in spans if s['name'] == 'perplexity.collect']
    assert collects, 'the hand-off was collected'
    for collect in collects:
        [link] = collect['links']
        assert link['context']['span_id'] == research['context']['span_id']
        assert collect['context']['trace_id'] == research['context']['trace_id']
    assert collects[-1]['attributes']['perplexity.status'] == 'completed'
    # Logfire sums our token and cost metrics into the agent run's span.
    [invoke] = [s for s in spans if s['name'].startswith('invoke_agent')]
    metrics = invoke['attributes']['logfire.metrics']
    assert 'operation.cost' in metrics and 'gen_ai.client.token.usage' in metrics
