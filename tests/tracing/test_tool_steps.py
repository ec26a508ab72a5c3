"""Opt-in tools' outputs and local function calls are steps of the research span, as searches and fetches are."""

from __future__ import annotations

from typing import Any

import pytest
from logfire.testing import CaptureLogfire

from pydantic_ai_perplexity import Researcher
from pydantic_ai_perplexity.emulator import Emulator
from support.tracing import span_tree

pytestmark = pytest.mark.anyio


def company_wiki(topic: str) -> str:
    """Search the company wiki for a topic."""
    return f'Wiki on {topic}.'


async def test_tool_outputs_and_function_calls_are_events_of_the_one_research_span(
    emulator: Emulator, capfire: CaptureLogfire
) -> None:
    async with Researcher(api_key=emulator.api_key, base_url=emulator.base_url, ledger=False) as r:
        result = await r.run(
            'How do heat pumps work?', effort='fast', extra_tools=['image_search'], functions=[company_wiki]
        )
    assert result.status == 'completed'
    spans = [s for s in span_tree(capfire) if s['name'] == 'perplexity.research']
    assert len(spans) == 1  # both legs of the round trip are one research call
    events: list[dict[str, Any]] = spans[0]['events']
    tools = [e['attributes'] for e in events if e['name'] == 'perplexity.tool']
    functions = [e['attributes'] for e in events if e['name'] == 'perplexity.function']
    # The first leg searches images, calls the function; its continuation searches images again.
    assert [t['gen_ai.tool.name'] for t in tools] == ['image_search', 'image_search']
    assert all(t['perplexity.tool.results'] >= 1 for t in tools)
    assert [(f['gen_ai.tool.name'], 'perplexity.error' in f) for f in functions] == [('company_wiki', False)]
