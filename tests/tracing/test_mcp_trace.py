"""One trace from a pydantic-ai agent, through the MCP server over stdio, to each step of the research run."""

from __future__ import annotations

import time

import pytest
from logfire.testing import CaptureLogfire
from pydantic_ai import Agent

from pydantic_ai_perplexity.emulator import Emulator
from pydantic_ai_perplexity.mcp import perplexity_mcp_toolset
from pydantic_ai_perplexity.testing import scripted_research_model
from support.otlp_collector import otlp_collector

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


async def test_the_servers_research_span_joins_the_agents_trace_over_stdio(emulator: Emulator, capfire: CaptureLogfire):
    with otlp_collector() as (collector, endpoint):
        toolset = perplexity_mcp_toolset(
            api_key=emulator.api_key,
            env={
                'PERPLEXITY_BASE_URL': emulator.base_url,
                'OTEL_EXPORTER_OTLP_ENDPOINT': endpoint,
                'OTEL_SERVICE_NAME': 'perplexity-mcp-test',
            },
        )
        agent = Agent(scripted_research_model(effort='fast'), toolsets=[toolset], name='researcher')
        agent.instrument = True
        async with agent:
            result = await agent.run('What is the EU AI Act?')
        assert 'EU AI Act' in result.output
        # The server exits when the toolset closes; its batch processor flushes on the way out.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (
            collector.named('perplexity.research') and 'operation.cost' in collector.metric_names()
        ):
            time.sleep(0.05)

    [research] = collector.named('perplexity.research')
    client_spans = capfire.exporter.exported_spans_as_dict()
    [execute_tool] = [s for s in client_spans if s['name'] == 'execute_tool perplexity_research']
    client_trace = format(execute_tool['context']['trace_id'], '032x')
    assert research.trace_id == client_trace
    assert research.service == 'perplexity-mcp-test'

    # The server span's parent chain reaches a span of the client (the MCP SDK's `MCP send tools/call`).
    server = {s.span_id: s for s in collector.spans}
    client_ids = {format(s['context']['span_id'], '016x'): s['name'] for s in client_spans}
    chain: list[str] = []
    span = research
    while span.parent_span_id in server:
        span = server[span.parent_span_id]
        chain.append(span.name)
    assert chain == ['tools/call perplexity_research']
    assert client_ids[span.parent_span_id].startswith(('MCP send tools/call', 'tools/call'))

    # The server's tool starts the run and waits for it in one `Researcher.run`, as in process: one research span
    # carrying the steps and the outcome, and no collection span.
    assert collector.named('perplexity.collect') == []
    assert [name for name, _ in research.events] == ['perplexity.search']
    assert research.attributes['perplexity.status'] == 'completed'
    assert research.attributes['gen_ai.usage.output_tokens'] > 0
    # The server's metrics were exported too.
    assert {'gen_ai.client.token.usage', 'operation.cost', 'perplexity.research.duration'} <= collector.metric_names()
