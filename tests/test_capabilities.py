"""`PerplexityResearch` and `PerplexitySearch` inside real pydantic-ai agents, driven by scripted models, on the
emulator: the tools and instructions a model gets, structured sources, execution modes, budget refusals the
application hears of, and tool names that follow a prefix into every text the model reads."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic import TypeAdapter
from pydantic_ai import Agent
from pydantic_ai.capabilities import WebSearch
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.profiles import ModelProfile
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults

from pydantic_ai_perplexity import (
    BudgetExceededError,
    PerplexityResearch,
    PerplexitySearch,
    PerplexityToolset,
    ResearchResult,
    ResearchStepEvent,
    resolve_deferred,
)
from pydantic_ai_perplexity._pydantic_ai.toolset import RESPONSE_ID_KEY
from pydantic_ai_perplexity.emulator import Emulator
from pydantic_ai_perplexity.testing import scripted_research_model

pytestmark = pytest.mark.anyio

#: A tool name as the texts write one: `perplexity_...`, under any prefix.
_TOOL_NAME = re.compile(r'\b(?:\w+_)?perplexity_(?:research_result|research_cancel|research_list|research|search)\b')
#: What a hand-off tells the model to call, and with which id.
_HANDOFF = re.compile(r'call (\w+) with response_id="(resp_[^"]+)"')


def returns(messages: list[ModelMessage]) -> list[ToolReturnPart]:
    return [p for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ToolReturnPart)]


def follower(first: ToolCallPart, *, max_turns: int = 400) -> tuple[FunctionModel, list[AgentInfo]]:
    """A model that makes `first`, then does what each result's text says: calls the tool a hand-off names, with
    its id, or answers with the last result. It knows no tool name but those the texts give it."""
    seen: list[AgentInfo] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(info)
        rets = returns(messages)
        if not rets:
            return ModelResponse(parts=[first])
        text = rets[-1].model_response_str()
        if (handoff := _HANDOFF.search(text)) and len(rets) < max_turns:
            tool, response_id = handoff.groups()
            return ModelResponse(parts=[ToolCallPart(tool, {'response_id': response_id})])
        return ModelResponse(parts=[TextPart(text)])

    return FunctionModel(respond), seen


def named_tools(text: str) -> set[str]:
    return set(_TOOL_NAME.findall(text))


async def test_research_capability_answers_with_structured_sources_in_the_metadata(emulator_env: Emulator):
    research = PerplexityResearch(effort='fast', ledger=False)
    agent = Agent(scripted_research_model(), capabilities=[research])
    result = await agent.run('What is the EU AI Act?')
    [ret] = returns(result.all_messages())
    meta: dict[str, Any] = ret.metadata  # type: ignore[assignment]
    found = meta['research_result']
    assert isinstance(found, ResearchResult) and found.done and found.sources
    # Every source of the run, in [n] order, as {url, title} records an application renders without parsing text.
    assert meta['sources'] == [{'title': s.title, 'url': s.url} for s in found.sources]
    assert all(set(record) == {'url', 'title'} for record in meta['sources'])
    assert meta['untrusted'] is True
    assert found.cited_sources and all(s.url in result.output for s in found.cited_sources)


async def test_research_steps_stream_as_capability_events(emulator_env: Emulator):
    events: list[ResearchStepEvent] = []

    async def handler(ctx: Any, stream: Any) -> None:
        async for event in stream:
            if isinstance(event, ResearchStepEvent):
                events.append(event)

    agent = Agent(scripted_research_model(effort='low'), capabilities=[PerplexityResearch(ledger=False)])
    result = await agent.run('How do solid-state batteries work?', event_stream_handler=handler)
    assert any(e.step.startswith('searching') and e.step_kind == 'search' for e in events)
    assert events[-1].searches >= 1 and events[0].tool_name == 'perplexity_research'
    assert all(e.capability_id and e.kind == 'perplexity.research_step' for e in events)
    [ret] = returns(result.all_messages())
    assert {e.response_id for e in events} == {ret.metadata['research_result'].response_id}  # type: ignore[index]


async def test_research_capability_gives_the_tools_and_guidance_that_names_them(emulator_env: Emulator):
    seen: list[AgentInfo] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(info)
        return ModelResponse(parts=[TextPart('ok')])

    await Agent(FunctionModel(respond), capabilities=[PerplexityResearch(ledger=False)]).run('hi')
    [info] = seen
    names = {t.name for t in info.function_tools}
    assert names == {
        'perplexity_research',
        'perplexity_research_result',
        'perplexity_research_cancel',
        'perplexity_research_list',
        'perplexity_search',
    }
    instructions = info.instructions or ''
    # When to research vs search, collecting a hand-off, citing: each said, naming only tools the model has.
    assert 'perplexity_search for quick lookups' in instructions and 'perplexity_research for questions' in instructions
    assert 'response_id' in instructions and '[n] markers' in instructions
    assert named_tools(instructions) <= names


async def test_a_prefix_renames_every_tool_the_model_is_told_about(emulator_env: Emulator):
    """`PerplexityToolset(...).prefixed('web')`: instructions, descriptions and the hand-off name the tools the
    model has, so a model that follows the texts collects the run it started."""
    toolset = PerplexityToolset(wait_seconds=0.05, ledger=False).prefixed('web')
    model, seen = follower(
        ToolCallPart('web_perplexity_research', {'query': 'A survey [[emulate: duration=30]]', 'effort': 'high'})
    )
    result = await Agent(model, toolsets=[toolset]).run('go')
    info = seen[0]
    names = {t.name for t in info.function_tools}
    assert names == {
        'web_perplexity_research',
        'web_perplexity_research_result',
        'web_perplexity_research_cancel',
        'web_perplexity_research_list',
        'web_perplexity_search',
    }
    told = [info.instructions or '', *(t.description or '' for t in info.function_tools)]
    assert all(named_tools(text) <= names for text in told)
    assert 'web_perplexity_research_result' in (info.instructions or '')
    rets = returns(result.all_messages())
    assert 'call web_perplexity_research_result with response_id=' in rets[0].model_response_str()
    assert rets[-1].tool_name == 'web_perplexity_research_result' and rets[-1].outcome == 'success'
    assert rets[-1].metadata['research_result'].done  # type: ignore[index]
    assert all(named_tools(r.model_response_str()) <= names for r in rets)


async def test_a_prefixed_capability_names_its_tools_in_refusals_too(emulator_env: Emulator):
    research = PerplexityResearch(prefix='web', budget_usd=0.001)
    model, _ = follower(ToolCallPart('web_perplexity_research', {'query': 'q', 'effort': 'medium'}))
    result = await Agent(model, capabilities=[research]).run('go')
    [ret] = returns(result.all_messages())
    assert ret.outcome == 'failed' and 'Research refused' in ret.content
    assert named_tools(ret.content) == {'web_perplexity_research'}
    assert research.names.research == 'web_perplexity_research'


async def test_an_unknown_id_points_at_the_list_tool_by_its_prefixed_name(emulator_env: Emulator):
    research = PerplexityResearch(prefix='web', ledger=False)
    model, _ = follower(ToolCallPart('web_perplexity_research_result', {'response_id': 'resp_nonexistent'}))
    result = await Agent(model, capabilities=[research]).run('go')
    [ret] = returns(result.all_messages())
    assert ret.outcome == 'retried'  # an unknown id is the model's to fix
    text = ret.model_response_str()
    assert 'web_perplexity_research_list' in text and named_tools(text) == {'web_perplexity_research_list'}


async def test_on_refusal_tells_the_application_and_the_model_still_reads_the_refusal(emulator_env: Emulator):
    heard: list[BudgetExceededError] = []

    async def on_refusal(exc: BudgetExceededError) -> None:
        heard.append(exc)

    research = PerplexityResearch(budget_usd=0.001, on_refusal=on_refusal)
    model, _ = follower(ToolCallPart('perplexity_research', {'query': 'q', 'effort': 'medium'}))
    result = await Agent(model, capabilities=[research]).run('go')
    [ret] = returns(result.all_messages())
    assert ret.outcome == 'failed' and 'Research refused' in ret.content
    [exc] = heard
    assert exc.cap_usd == pytest.approx(0.001) and exc.estimate_usd > exc.cap_usd
    assert [r for r in emulator_env.requests if r.method == 'POST'] == []  # nothing started or billed


async def test_on_refusal_raise_ends_the_agent_run_with_the_refusal(emulator_env: Emulator):
    research = PerplexityResearch(budget_usd=0.001, on_refusal='raise')
    model, _ = follower(ToolCallPart('perplexity_research', {'query': 'q', 'effort': 'medium'}))
    with pytest.raises(BudgetExceededError) as caught:
        await Agent(model, capabilities=[research]).run('go')
    assert caught.value.cap_usd == pytest.approx(0.001)
    assert [r for r in emulator_env.requests if r.method == 'POST'] == []


async def test_external_execution_defers_and_any_process_resolves_the_run(emulator_env: Emulator):
    research = PerplexityResearch(execution='external', wait_seconds=0.05, ledger=False)
    agent = Agent(
        scripted_research_model(effort='high'), capabilities=[research], output_type=[str, DeferredToolRequests]
    )
    first = await agent.run('Deep question [[emulate: duration=200]]')
    requests = first.output
    assert isinstance(requests, DeferredToolRequests)
    [deferred] = requests.calls
    assert deferred.tool_name == 'perplexity_research'
    response_id = requests.metadata[deferred.tool_call_id][RESPONSE_ID_KEY]
    assert isinstance(response_id, str) and response_id.startswith('resp_')
    # No toolset, researcher or state of the first run: what another process would have (the environment).
    results = await resolve_deferred(requests, wait_seconds=30)
    [(call_id, ret)] = results.calls.items()
    assert call_id == deferred.tool_call_id
    collected = ret.metadata['research_result']  # type: ignore[union-attr]
    assert collected.response_id == response_id and collected.done
    assert ret.metadata['sources'] == [{'title': s.title, 'url': s.url} for s in collected.sources]  # type: ignore[union-attr]
    second = await agent.run(message_history=first.all_messages(), deferred_tool_results=results)
    assert isinstance(second.output, str) and 'Sources:' in second.output
    creates = [r for r in emulator_env.requests if r.method == 'POST' and r.path.endswith('/v1/agent')]
    assert len(creates) == 1  # resolving collects the run; it never starts another


async def test_the_capability_resolves_its_own_deferred_calls(emulator_env: Emulator):
    research = PerplexityResearch(execution='external', wait_seconds=0.05, ledger=False)
    agent = Agent(
        scripted_research_model(effort='high'), capabilities=[research], output_type=[str, DeferredToolRequests]
    )
    first = await agent.run('Deep question [[emulate: duration=200]]')
    assert isinstance(first.output, DeferredToolRequests)
    results = await research.resolve_deferred(first.output, wait_seconds=30)
    second = await agent.run(message_history=first.all_messages(), deferred_tool_results=results)
    assert isinstance(second.output, str) and 'Sources:' in second.output


async def test_inline_execution_hands_off_instead_of_deferring(emulator_env: Emulator):
    research = PerplexityResearch(wait_seconds=0.05, ledger=False)
    agent = Agent(scripted_research_model(effort='high', max_collects=400), capabilities=[research])
    result = await agent.run('A broad survey [[emulate: duration=30]]')
    rets = returns(result.all_messages())
    assert 'still going' in rets[0].content and rets[-1].metadata['research_result'].done  # type: ignore[index]


def test_an_unknown_execution_is_refused_in_words():
    with pytest.raises(ValueError, match="execution must be 'inline' or 'external'"):
        PerplexityResearch(execution='later', ledger=False)  # type: ignore[arg-type]


def search_model(seen: list[AgentInfo], tool: str = 'perplexity_search', *, native: bool = False) -> FunctionModel:
    """Searches once with `tool`, then answers; `native`: the model has its own web search (a FunctionModel
    claims every native tool unless its profile says otherwise)."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(info)
        if returns(messages):
            return ModelResponse(parts=[TextPart('found')])
        return ModelResponse(parts=[ToolCallPart(tool, {'query': 'EU AI Act', 'max_results': 3})])

    return (
        FunctionModel(respond)
        if native
        else FunctionModel(respond, profile=ModelProfile(supported_native_tools=frozenset()))
    )


async def test_search_capability_gives_one_tool_and_structured_sources(emulator_env: Emulator):
    seen: list[AgentInfo] = []
    result = await Agent(search_model(seen), capabilities=[PerplexitySearch()]).run('go')
    [tool] = seen[0].function_tools
    assert tool.name == 'perplexity_search' and named_tools(tool.description or '') == set()  # no research tool here
    instructions = seen[0].instructions or ''
    assert 'perplexity_search' in instructions and named_tools(instructions) == {'perplexity_search'}
    [ret] = returns(result.all_messages())
    meta: dict[str, Any] = ret.metadata  # type: ignore[assignment]
    pages = meta['search'].results
    assert pages and meta['sources'] == [{'title': p.title, 'url': p.url} for p in pages]
    assert [r.path for r in emulator_env.requests if r.method == 'POST'] == ['/search']


async def test_search_capability_is_a_local_fallback_for_web_search(emulator_env: Emulator):
    """pydantic-ai's `WebSearch(local=...)`: a model without native web search gets Perplexity's search tool."""
    seen: list[AgentInfo] = []
    agent = Agent(search_model(seen), capabilities=[WebSearch(local=PerplexitySearch().toolset)])
    result = await agent.run('go')
    assert [t.name for t in seen[0].function_tools] == ['perplexity_search']
    [ret] = returns(result.all_messages())
    assert ret.outcome == 'success' and ret.metadata['sources']  # type: ignore[index]


async def test_a_model_with_native_web_search_uses_its_own_and_not_the_fallback(emulator_env: Emulator):
    seen: list[AgentInfo] = []
    agent = Agent(search_model(seen, native=True), capabilities=[WebSearch(local=PerplexitySearch().toolset)])
    await agent.run('go')
    assert [t.name for t in seen[0].function_tools] == []
    assert [type(t).__name__ for t in seen[0].model_request_parameters.native_tools] == ['WebSearchTool']
    assert 'perplexity' not in (seen[0].instructions or '')  # nothing points the model at a tool it was not given


async def test_a_prefixed_search_capability(emulator_env: Emulator):
    seen: list[AgentInfo] = []
    agent = Agent(search_model(seen, 'web_perplexity_search'), capabilities=[PerplexitySearch(prefix='web')])
    result = await agent.run('go')
    assert [t.name for t in seen[0].function_tools] == ['web_perplexity_search']
    assert named_tools(seen[0].instructions or '') == {'web_perplexity_search'}
    assert returns(result.all_messages())[0].outcome == 'success'


#: What another process runs: read deferred calls, resolve them from the environment alone, write the results.
_RESOLVER = """
import asyncio, sys
from pathlib import Path
from pydantic import TypeAdapter
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults
from pydantic_ai_perplexity import resolve_deferred

async def main():
    requests = TypeAdapter(DeferredToolRequests).validate_json(Path(sys.argv[1]).read_bytes())
    results = await resolve_deferred(requests, wait_seconds=30)
    Path(sys.argv[2]).write_bytes(TypeAdapter(DeferredToolResults).dump_json(results))

asyncio.run(main())
"""


@pytest.mark.slow
async def test_another_process_resolves_the_deferred_calls_and_the_agent_resumes(
    emulator_env: Emulator, tmp_path: Path
):
    research = PerplexityResearch(execution='external', wait_seconds=0.05, prefix='web')
    agent = Agent(
        scripted_research_model(effort='high', tool_prefix='web_'),
        capabilities=[research],
        output_type=[str, DeferredToolRequests],
    )
    first = await agent.run('How do solid-state batteries work? [[emulate: duration=60]]')
    assert isinstance(first.output, DeferredToolRequests)
    asked, answered = tmp_path / 'requests.json', tmp_path / 'results.json'
    asked.write_bytes(TypeAdapter(DeferredToolRequests).dump_json(first.output))
    with anyio.fail_after(120):
        done = await anyio.run_process([sys.executable, '-c', _RESOLVER, str(asked), str(answered)], check=False)
    assert done.returncode == 0, done.stderr.decode()
    results = TypeAdapter(DeferredToolResults).validate_json(answered.read_bytes())
    second = await agent.run(message_history=first.all_messages(), deferred_tool_results=results)
    assert isinstance(second.output, str) and 'Sources:' in second.output and 'https://' in second.output
    creates = [r for r in emulator_env.requests if r.method == 'POST' and r.path.endswith('/v1/agent')]
    assert len(creates) == 1  # the other process collected the run; nothing was researched twice


async def test_the_capabilitys_default_options_reach_every_run(emulator_env: Emulator):
    """`options=` (here fallback models, whose first is unavailable, and a file) applies to each research call."""
    from pydantic_ai_perplexity import ResearchOptions

    defaults = ResearchOptions(
        models=['openai/gpt-5.4', 'openai/gpt-5.5'], files=(b'Attached: heat pumps are quiet.',), service_tier='flex'
    )
    research = PerplexityResearch(effort='fast', ledger=False, options=defaults)
    agent = Agent(scripted_research_model(), capabilities=[research])
    result = await agent.run('What does it say about heat pumps? [[emulate: unavailable]]')
    [ret] = returns(result.all_messages())
    found = ret.metadata['research_result']  # type: ignore[index]
    assert isinstance(found, ResearchResult) and found.done and found.model == 'openai/gpt-5.5'
    assert 'From the attached file file.txt: Attached: heat pumps are quiet.' in (found.answer or '')
