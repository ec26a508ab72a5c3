"""The tools are declared once (`_core/tool_spec.py`); the toolset and the MCP server expose exactly that
declaration."""

from __future__ import annotations

from typing import Any

import pytest

from pydantic_ai_perplexity import PerplexityToolset
from pydantic_ai_perplexity._core.tool_spec import INSTRUCTIONS, TOOLS
from pydantic_ai_perplexity._domain.options import option_fields
from pydantic_ai_perplexity.emulator import Emulator
from pydantic_ai_perplexity.mcp.server import _tools
from support.reliability import call_tools, outcome_of, text_of_part

pytestmark = pytest.mark.anyio


async def _toolset_definitions(toolset: PerplexityToolset) -> tuple[dict[str, Any], Any]:
    from pydantic_ai import RunContext
    from pydantic_ai.models.test import TestModel
    from pydantic_ai.usage import RunUsage

    ctx = RunContext(deps=None, model=TestModel(), usage=RunUsage())
    tools = {name: tool.tool_def for name, tool in (await toolset.get_tools(ctx)).items()}
    return tools, await toolset.get_instructions(ctx)


async def test_both_renderers_expose_exactly_the_spec() -> None:
    toolset = PerplexityToolset(api_key='unused', ledger=False)
    in_process, instructions = await _toolset_definitions(toolset)
    served = {tool.name: tool for tool in await _tools.build_server().list_tools()}
    assert list(in_process) == list(served) == [spec.name for spec in TOOLS]
    for spec in TOOLS:
        definition, tool = in_process[spec.name], served[spec.name]
        assert definition.description == tool.description == spec.description
        assert definition.parameters_json_schema == tool.input_schema == spec.schema
        hints = tool.annotations
        assert hints is not None and hints.title == spec.hints.title
        assert (hints.read_only_hint, hints.destructive_hint, hints.idempotent_hint, hints.open_world_hint) == (
            spec.hints.read_only,
            spec.hints.destructive,
            spec.hints.idempotent,
            spec.hints.open_world,
        )
        assert (tool.output_schema is not None) == spec.structured
    assert INSTRUCTIONS in str(instructions) and _tools.INSTRUCTIONS == INSTRUCTIONS


def test_the_research_arguments_are_the_options_offered_to_models() -> None:
    [research] = [spec for spec in TOOLS if spec.name == 'perplexity_research']
    offered = [name for name, (_, opt) in option_fields().items() if opt.tool]
    assert list(research.schema['properties']) == ['query', *offered]
    assert research.schema['required'] == ['query']
    for name in offered:
        assert research.schema['properties'][name]['description'] == option_fields()[name][0].description
    effort = research.schema['properties']['effort']['anyOf'][0]
    assert effort == {'enum': ['fast', 'low', 'medium', 'high', 'xhigh'], 'type': 'string'}


@pytest.mark.parametrize(
    ('args', 'words'),
    [
        ({'query': 'q', 'effort': 'deepest'}, "effort must be one of fast, low, medium, high, xhigh; got 'deepest'."),
        ({'query': 5}, 'query must be the question, as text; got 5.'),
        ({}, 'query is required: give the question, as text.'),
        ({'query': 'q', 'efort': 'fast'}, "Unknown argument 'efort': the arguments are query, effort,"),
        ('not json at all', 'The arguments of perplexity_research must be a JSON object, e.g. {"query": "..."}.'),
        ('[1, 2]', 'The arguments of perplexity_research must be a JSON object'),
    ],
)
async def test_a_schema_level_mistake_reads_in_project_words_in_process(args: Any, words: str) -> None:
    toolset = PerplexityToolset(api_key='unused', ledger=False)
    [part] = await call_tools(toolset, [('perplexity_research', args)])
    text = text_of_part(part)
    assert outcome_of(part) == 'retry' and words in text, text
    assert 'pydantic' not in text and 'type=' not in text and 'Input should' not in text


async def test_a_schema_level_mistake_reads_in_project_words_over_mcp(emulator_env: Emulator) -> None:
    from mcp.client import Client

    async with Client(_tools.build_server()) as client:
        for args, words in [
            (
                {'query': 'q', 'effort': 'deepest'},
                "effort must be one of fast, low, medium, high, xhigh; got 'deepest'.",
            ),
            ({'query': 5}, 'query must be the question, as text; got 5.'),
            ({}, 'query is required: give the question, as text.'),
            ({'response_id': 'r' * 100_000}, 'response_id is 100000 characters long'),
        ]:
            name = 'perplexity_research_result' if 'response_id' in args else 'perplexity_research'
            result = await client.call_tool(name, args)
            text = result.content[0].text  # type: ignore[union-attr]
            assert result.is_error and words in text, text
            assert 'pydantic' not in text and 'Input should' not in text


@pytest.mark.parametrize('wait', ['NaN', 'Infinity', '-Infinity', '1e400', -1])
async def test_a_bad_wait_over_mcp_is_refused_before_any_request(emulator_env: Emulator, wait: Any) -> None:
    from mcp.client import Client

    async with Client(_tools.build_server()) as client:
        result = await client.call_tool('perplexity_research_result', {'response_id': 'resp_x', 'wait_seconds': wait})
    text = result.content[0].text  # type: ignore[union-attr]
    assert result.is_error and 'wait_seconds=' in text and 'finite' in text, text
    assert not [r for r in emulator_env.requests if '/v1/agent/' in r.path]


async def test_over_mcp_the_runs_id_is_in_the_ledger_when_the_call_says_it_started(emulator_env: Emulator) -> None:
    from mcp.client import Client

    from pydantic_ai_perplexity._ledger import Ledger

    seen: list[tuple[str, list[str]]] = []

    async def progress(_: float, __: float | None, message: str | None) -> None:
        if message and message.startswith('started research run ') and not seen:
            other = Ledger()  # another connection to the same ledger, as another process would open it
            try:
                seen.append(
                    (message.removeprefix('started research run '), [r.response_id or '' for r in other.list()])
                )
            finally:
                other.close()

    async with Client(_tools.build_server()) as client:
        result = await client.call_tool(
            'perplexity_research', {'query': 'What is the EU AI Act?', 'effort': 'fast'}, progress_callback=progress
        )
    assert not result.is_error
    [(response_id, listed)] = seen
    assert listed == [response_id] and result.structured_content['response_id'] == response_id  # type: ignore[index]
