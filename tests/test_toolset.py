"""PerplexityToolset inside real pydantic-ai and pydantic-deep agents, driven by scripted models, on the emulator."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent, ModelRetry
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import DeferredToolRequests

from pydantic_ai_perplexity import (
    PerplexityToolset,
    ResearchProgress,
    ResearchResult,
    collect_deferred,
    resolve_deferred,
)
from pydantic_ai_perplexity.emulator import Emulator
from pydantic_ai_perplexity.testing import scripted_research_model

pytestmark = pytest.mark.anyio

Script = list[list[ToolCallPart] | str]
EMULATED_NOTE = 'answered by an emulator, not Perplexity; not a real answer'


def toolset_for(emu: Emulator, **kw: Any) -> PerplexityToolset:
    return PerplexityToolset(api_key=emu.api_key, base_url=emu.base_url, **kw)


def scripted(steps: Script) -> FunctionModel:
    """A model that plays `steps` in order: a list of tool calls, or a final text."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        turn = sum(isinstance(m, ModelResponse) for m in messages)
        step = steps[min(turn, len(steps) - 1)]
        if isinstance(step, str):
            return ModelResponse(parts=[TextPart(step)])
        return ModelResponse(parts=list(step))

    return FunctionModel(respond)


def returns(messages: list[ModelMessage]) -> list[ToolReturnPart]:
    return [p for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ToolReturnPart)]


def call(name: str, **args: Any) -> ToolCallPart:
    return ToolCallPart(name, args)


async def test_an_agent_researches_and_answers_with_cited_sources(emulator: Emulator):
    toolset = toolset_for(emulator, effort='fast')
    agent = Agent(scripted_research_model(), toolsets=[toolset])
    result = await agent.run('What is the EU AI Act?')
    [ret] = returns(result.all_messages())
    research = ret.metadata['research_result']  # type: ignore[index]
    assert isinstance(research, ResearchResult) and research.done and research.cited_sources
    assert ret.metadata['untrusted'] is True  # type: ignore[index]
    assert '<<web-' in ret.content and 'response_id: resp_' in ret.content
    assert research.emulated and ret.content.splitlines()[-1].endswith('| emulated: ' + EMULATED_NOTE)
    for source in research.cited_sources:
        assert source.url in result.output


async def test_tools_and_descriptions_as_the_model_sees_them(emulator: Emulator):
    seen: dict[str, Any] = {}

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.update({t.name: t for t in info.function_tools})
        seen['instructions'] = info.instructions
        return ModelResponse(parts=[TextPart('ok')])

    await Agent(FunctionModel(respond), toolsets=[toolset_for(emulator)]).run('hi')
    assert sorted(k for k in seen if k.startswith('perplexity_')) == [
        'perplexity_research',
        'perplexity_research_cancel',
        'perplexity_research_list',
        'perplexity_research_result',
        'perplexity_search',
    ]
    research = seen['perplexity_research']
    assert 'perplexity_research_result' in research.description
    props = research.parameters_json_schema['properties']
    assert props['effort']['anyOf'][0]['enum'] == ['fast', 'low', 'medium', 'high', 'xhigh']
    assert 'domains' in props and 'description' in props['recency']
    assert 'response_id' in seen['instructions']


@pytest.mark.slow
async def test_a_run_past_the_wait_budget_hands_off_then_is_collected(emulator: Emulator):
    toolset = toolset_for(emulator, wait_seconds=0.05)
    # The model asks to wait 30 s; a call never waits past the toolset's budget, so it collects a few times.
    agent = Agent(scripted_research_model(effort='high', collect_wait_seconds=30, max_collects=400), toolsets=[toolset])
    result = await agent.run('A broad survey [[emulate: duration=300]]')
    rets = returns(result.all_messages())
    assert len(rets) >= 3
    assert 'still going' in rets[0].content and 'perplexity_research_result' in rets[0].content
    assert rets[0].tool_name == 'perplexity_research'
    assert 'still going' in rets[1].content  # capped at the 0.05 s budget, not the 30 s asked for
    assert rets[-1].tool_name == 'perplexity_research_result'
    assert rets[-1].metadata['research_result'].done  # type: ignore[index]
    creates = [r for r in emulator.requests if r.method == 'POST' and r.path.endswith('/v1/agent')]
    assert len(creates) == 1  # collecting never starts (or bills) a second run


async def test_cancel_and_list_tools(emulator: Emulator, tmp_path: Path):
    ledger = tmp_path / 'ledger.sqlite3'
    starter = toolset_for(emulator, ledger=ledger, wait_seconds=0.05)
    first = await Agent(
        scripted([[call('perplexity_research', query='Long one [[emulate: duration=9000]]', effort='xhigh')], 'ok']),
        toolsets=[starter],
    ).run('go')
    handoff = returns(first.all_messages())[0].metadata['research_result']  # type: ignore[index]
    rid = handoff.response_id

    other = toolset_for(emulator, ledger=ledger)  # a second toolset sharing the ledger
    result = await Agent(
        scripted(
            [
                [call('perplexity_research_list')],
                [call('perplexity_research_cancel', response_id=rid)],
                [call('perplexity_research_list', status='cancelled')],
                'done',
            ]
        ),
        toolsets=[other],
    ).run('go')
    listed, cancelled, listed_after = (r.content for r in returns(result.all_messages()))
    assert rid in listed and 'Long one' in listed
    assert cancelled == f'Cancelled research run {rid}.'
    assert rid in listed_after and '| cancelled |' in listed_after


async def test_budget_refusal_fails_the_tool_once_without_retrying(emulator: Emulator):
    toolset = toolset_for(emulator, budget_usd=0.001)
    result = await Agent(
        scripted([[call('perplexity_research', query='q', effort='medium')], 'gave up']), toolsets=[toolset]
    ).run('go')
    [ret] = returns(result.all_messages())
    assert ret.outcome == 'failed'
    assert 'budget' in ret.content.lower() and 'PERPLEXITY_BUDGET_USD' in ret.content
    assert [r for r in emulator.requests if r.method == 'POST'] == []


async def test_missing_key_is_a_clear_terminal_failure(emulator: Emulator):
    toolset = PerplexityToolset(base_url=emulator.base_url)
    result = await Agent(scripted([[call('perplexity_research', query='q')], 'ok']), toolsets=[toolset]).run('go')
    [ret] = returns(result.all_messages())
    assert ret.outcome == 'failed' and 'PERPLEXITY_API_KEY' in ret.content


async def test_a_fixable_argument_becomes_a_retry_prompt(emulator: Emulator):
    toolset = toolset_for(emulator, effort='fast')
    result = await Agent(
        scripted(
            [
                [call('perplexity_research', query='q', domains=['not a domain!'])],
                [call('perplexity_research', query='q', domains=['europa.eu'])],
                'ok',
            ]
        ),
        toolsets=[toolset],
    ).run('go')
    first, second = returns(result.all_messages())
    assert first.outcome == 'retried' and 'is not a domain' in first.content
    assert second.outcome == 'success'


async def test_unknown_response_id_asks_the_model_to_check_the_id(emulator: Emulator):
    result = await Agent(
        # A well-formed id the API does not know: the live API answers a malformed one with a 400 instead.
        scripted([[call('perplexity_research_result', response_id='resp_00000000-0000-0000-0000-000000000000')], 'ok']),
        toolsets=[toolset_for(emulator)],
    ).run('go')
    [ret] = returns(result.all_messages())
    assert ret.outcome == 'retried' and 'perplexity_research_list' in ret.content


async def test_spotlighting_can_be_turned_off(emulator: Emulator):
    on = await Agent(scripted_research_model(effort='fast'), toolsets=[toolset_for(emulator)]).run('EU AI Act')
    off = await Agent(scripted_research_model(effort='fast'), toolsets=[toolset_for(emulator, spotlight=False)]).run(
        'EU AI Act'
    )
    text_on, text_off = returns(on.all_messages())[0].content, returns(off.all_messages())[0].content
    assert '<<web-' in text_on and '<<web-' not in text_off

    def strip(text: str) -> str:
        text = re.sub(r'<</?web-[0-9a-f]+>>|Text between.*instructions, whatever it says\.\n', '', text)
        return re.sub(r'resp_[0-9a-f-]+', 'resp_ID', text)

    assert strip(text_on) == strip(text_off)


async def test_a_hostile_page_stays_inside_the_wrapper(emulator: Emulator):
    result = await Agent(scripted_research_model(effort='fast'), toolsets=[toolset_for(emulator)]).run(
        'EU AI Act [[emulate: inject]]'
    )
    text = returns(result.all_messages())[0].content
    nonce = re.findall(r'<<web-([0-9a-f]{6})>>', text)[0]
    body = text[text.rindex(f'<<web-{nonce}>>') + 14 : text.rindex(f'<</web-{nonce}>>')]
    assert '<<' not in body and '>>' not in body
    assert '\u200b' not in text


async def test_several_research_calls_in_one_response_run_concurrently_on_one_client(emulator: Emulator):
    toolset = toolset_for(emulator, effort='fast')
    questions = ['EU AI Act', 'solid-state batteries', 'fusion energy']
    async with Agent(
        scripted([[call('perplexity_research', query=q) for q in questions], 'ok']), toolsets=[toolset]
    ) as agent:
        client = toolset.researcher.client
        result = await agent.run('go')
        assert toolset.researcher.client is client
    rets = returns(result.all_messages())
    assert len(rets) == 3 and all(r.metadata['research_result'].done for r in rets)  # type: ignore[index]


async def test_the_http_client_is_shared_across_runs_and_closed_after(emulator: Emulator):
    toolset = toolset_for(emulator, effort='fast')
    agent = Agent(scripted_research_model(), toolsets=[toolset])
    async with agent:
        await agent.run('EU AI Act')
        client = toolset.researcher.client
        await agent.run('fusion energy')
        assert toolset.researcher.client is client
    assert toolset.researcher._client is None  # closed when the last user left


async def test_progress_streams_as_custom_events(emulator: Emulator):
    events: list[ResearchProgress] = []

    async def handler(ctx: Any, stream: Any) -> None:
        async for event in stream:
            if isinstance(event, ResearchProgress):
                events.append(event)

    agent = Agent(scripted_research_model(effort='low'), toolsets=[toolset_for(emulator)])
    result = await agent.run('How do solid-state batteries work?', event_stream_handler=handler)
    assert any(e.step.startswith('searching') and e.kind == 'search' for e in events)
    assert events[-1].searches >= 1 and events[0].tool_name == 'perplexity_research'
    [ret] = returns(result.all_messages())
    research = ret.metadata['research_result']  # type: ignore[index]
    assert {e.response_id for e in events} == {research.response_id}  # every event names the run it reports


async def test_deferred_mode_pauses_the_agent_and_resumes_with_the_collected_result(emulator: Emulator):
    toolset = toolset_for(emulator, wait_seconds=0.05, defer=True)
    agent = Agent(scripted_research_model(effort='high'), toolsets=[toolset], output_type=[str, DeferredToolRequests])
    first = await agent.run('Deep question [[emulate: duration=200]]')
    assert isinstance(first.output, DeferredToolRequests)
    results = await collect_deferred(toolset, first.output, wait_seconds=30)
    second = await agent.run(message_history=first.all_messages(), deferred_tool_results=results)
    assert isinstance(second.output, str) and 'Sources:' in second.output


async def test_structured_research_results(emulator: Emulator):
    schema = {
        'title': 'Brief',
        'type': 'object',
        'properties': {'headline': {'type': 'string'}, 'points': {'type': 'array', 'items': {'type': 'string'}}},
        'required': ['headline', 'points'],
    }
    toolset = toolset_for(emulator, effort='fast', output_type=schema)
    result = await Agent(scripted_research_model(), toolsets=[toolset]).run('EU AI Act')
    research = returns(result.all_messages())[0].metadata['research_result']  # type: ignore[index]
    assert isinstance(research.data, dict) and isinstance(research.data['points'], list)
    assert json.loads(research.answer) == research.data


async def test_a_model_output_type_is_turned_into_its_response_format_once(emulator: Emulator):
    """Its JSON schema is built once for every run of the toolset, not for each use within each run."""
    from pydantic import BaseModel

    built: list[str] = []

    class Brief(BaseModel):
        headline: str
        points: list[str]

        @classmethod
        def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
            built.append(cls.__name__)
            return super().model_json_schema(*args, **kwargs)

    toolset = toolset_for(emulator, effort='fast', output_type=Brief)
    agent = Agent(
        scripted([[call('perplexity_research', query='EU AI Act'), call('perplexity_research', query='GDPR')], 'ok']),
        toolsets=[toolset],
    )
    result = await agent.run('go')
    first, second = returns(result.all_messages())
    for ret in (first, second):
        assert isinstance(ret.metadata['research_result'].data, Brief)  # type: ignore[index]
    assert built == ['Brief']


async def test_a_deep_agent_uses_the_toolset(emulator: Emulator):
    from pydantic_deep import DeepAgentDeps, create_deep_agent

    toolset = toolset_for(emulator, effort='fast')
    agent = create_deep_agent(
        model=scripted_research_model(),
        toolsets=[toolset],
        include_execute=False,
        include_skills=False,
        web_search=False,
        web_fetch=False,
    )
    result = await agent.run('What is the EU AI Act?', deps=DeepAgentDeps())
    rets = [r for r in returns(result.all_messages()) if r.tool_name == 'perplexity_research']
    assert rets and rets[0].metadata['research_result'].done  # type: ignore[index]
    assert 'Sources:' in str(result.output)


def _run_example(module: str, *args: str) -> Callable[[], Any]:
    import importlib.util
    import sys

    path = Path(__file__).parents[1] / 'agents' / f'{module}.py'
    spec = importlib.util.spec_from_file_location(module, path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[module] = mod
    spec.loader.exec_module(mod)
    return mod.main


async def test_example_agents_run_offline(tmp_path: Path):
    deep_main = _run_example('deep_research')
    text = await deep_main('What is the EU AI Act?', None, 'fast', str(tmp_path))
    assert 'Sources:' in text and 'http' in text
    assistant_main = _run_example('research_assistant')
    report = await assistant_main('What is the EU AI Act?', None, 'fast')
    assert report.sources and report.response_id and report.summary
    assert all(f'[{s.n}]' in report.summary for s in report.sources)


async def test_grouped_citation_markers_reach_the_model_renumbered(tmp_path: Path):
    from support.recordings import EFFORT, QUESTION, RENUMBERED_LINE, grouped_marker_recordings

    with Emulator(replay=grouped_marker_recordings(tmp_path / 'recordings'), time_scale=0.005) as emu:
        agent = Agent(scripted_research_model(effort=EFFORT), toolsets=[toolset_for(emu, ledger=tmp_path / 'l.db')])
        result = await agent.run(QUESTION)
    [ret] = returns(result.all_messages())
    research = ret.metadata['research_result']  # type: ignore[index]
    assert [s.ids for s in research.cited_sources] == [[11], [12], [14]]
    assert RENUMBERED_LINE in ret.content  # not [11, 12] under a source list numbered [1] to [4]
    assert '[11' not in ret.content and '[web:' not in ret.content
    assert research.emulated and 'emulated: ' + EMULATED_NOTE in ret.content  # a replayed recording is no real answer


async def test_a_tightened_run_tells_the_model_which_limits_were_lowered(emulator: Emulator, tmp_path: Path):
    toolset = toolset_for(emulator, budget_usd=1.0, on_budget='tighten', ledger=tmp_path / 'l.sqlite3')
    result = await Agent(
        scripted([[call('perplexity_research', query='How do heat pumps work?', effort='medium')], 'done']),
        toolsets=[toolset],
    ).run('go')
    [ret] = returns(result.all_messages())
    assert ret.outcome != 'failed', ret.content
    note = re.search(r'tightened to fit the budget \((.+?)\)', ret.content)
    assert note and 'max_output_tokens 6,144 ->' in note.group(1)


async def test_a_refusal_points_the_model_at_an_effort_that_fits_and_never_retries_the_same_call(emulator: Emulator):
    toolset = toolset_for(emulator, budget_usd=1.0)  # medium does not fit $1; fast and low do
    result = await Agent(
        scripted([[call('perplexity_research', query='q', effort='medium')], 'gave up']), toolsets=[toolset]
    ).run('go')
    [ret] = returns(result.all_messages())
    assert ret.outcome == 'failed' and 'effort="low"' in ret.content
    assert 'Do not call perplexity_research again' not in ret.content and 'on_budget="tighten"' in ret.content
    assert [r for r in emulator.requests if r.method == 'POST'] == []


async def test_results_carry_their_sources_as_url_and_title_records(emulator: Emulator):
    toolset = toolset_for(emulator, effort='fast')
    script = [
        [call('perplexity_search', query='EU AI Act', max_results=3)],
        [call('perplexity_research', query='EU AI Act')],
        'ok',
    ]
    result = await Agent(scripted(script), toolsets=[toolset]).run('go')
    search, research = returns(result.all_messages())
    pages = search.metadata['search'].results  # type: ignore[index]
    assert pages and search.metadata['sources'] == [{'title': p.title, 'url': p.url} for p in pages]  # type: ignore[index]
    run = research.metadata['research_result']  # type: ignore[index]
    assert run.sources and research.metadata['sources'] == [{'title': s.title, 'url': s.url} for s in run.sources]  # type: ignore[index]


async def test_source_records_hold_only_clean_values(emulator: Emulator):
    """A record carries what the model reads: a title on one line, an http(s) link or ''."""
    from pydantic_ai_perplexity.client._models import SearchResponse

    response = SearchResponse.model_validate(
        {
            'id': 's',
            'results': [
                {'title': 'A\nB <b>c</b>', 'url': 'javascript:alert(1)', 'snippet': ''},
                {'title': 'ok', 'url': 'https://example.org/x', 'snippet': ''},
            ],
        }
    )
    from pydantic_ai_perplexity._present.model_text import source_refs

    assert source_refs(response) == [
        {'title': 'A B \u2039b\u203ac\u2039/b\u203a', 'url': ''},
        {'title': 'ok', 'url': 'https://example.org/x'},
    ]


async def test_a_toolset_of_some_tools_never_names_the_others(emulator: Emulator):
    seen: list[AgentInfo] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(info)
        return ModelResponse(parts=[TextPart('ok')])

    toolset = toolset_for(emulator, include=['perplexity_research', 'perplexity_search'])
    await Agent(FunctionModel(respond), toolsets=[toolset]).run('hi')
    [info] = seen
    assert sorted(t.name for t in info.function_tools) == ['perplexity_research', 'perplexity_search']
    for text in [info.instructions or '', *(t.description or '' for t in info.function_tools)]:
        assert 'perplexity_research_result' not in text and 'perplexity_research_list' not in text
    assert 'perplexity_search for quick lookups' in (info.instructions or '')


def test_include_names_only_tools_that_exist(emulator: Emulator):
    assert list(toolset_for(emulator, include=['perplexity_search']).tools) == ['perplexity_search']
    with pytest.raises(ValueError, match='include names no tool: perplexity_fetch'):
        toolset_for(emulator, include=['perplexity_fetch'])


async def test_a_prefixed_toolset_hands_off_and_defers_under_its_names(emulator: Emulator):
    toolset = toolset_for(emulator, wait_seconds=0.05, defer=True)
    agent = Agent(
        scripted_research_model(effort='high', tool_prefix='web_'),
        toolsets=[toolset.prefixed('web')],
        output_type=[str, DeferredToolRequests],
    )
    first = await agent.run('Deep question [[emulate: duration=200]]')
    assert isinstance(first.output, DeferredToolRequests)
    [deferred] = first.output.calls
    assert deferred.tool_name == 'web_perplexity_research'
    # Collected while still going: the hand-off names the collect tool as the model has it, whoever resolves it.
    for resolved in (
        await collect_deferred(toolset, first.output, wait_seconds=0),
        await resolve_deferred(first.output, researcher=toolset.researcher, wait_seconds=0),
    ):
        [ret] = resolved.calls.values()
        text = ret.return_value  # type: ignore[union-attr]
        assert 'still going' in text and 'call web_perplexity_research_result with' in text


async def test_arguments_are_checked_once_before_the_tool_runs_in_the_projects_words(emulator: Emulator):
    """The spec's check is the tool's `args_validator` (pydantic-ai's public hook): a refused call is invalid at
    validation (`args_valid` False, the tool never runs), and the model reads the project's words, never pydantic's."""
    from pydantic_ai.messages import FunctionToolCallEvent

    agent = Agent(
        scripted(
            [
                [ToolCallPart('web_perplexity_research', '["not an object"]')],
                [call('web_perplexity_research', query='q', colour='blue')],
                [call('web_perplexity_research', query='EU AI Act', effort='fast')],
                'ok',
            ]
        ),
        toolsets=[toolset_for(emulator).prefixed('web')],
    )
    valid: list[bool | None] = []
    async with agent.iter('go') as run:
        async for node in run:
            if Agent.is_call_tools_node(node):
                async with node.stream(run.ctx) as events:
                    async for event in events:
                        if isinstance(event, FunctionToolCallEvent):
                            valid.append(event.args_valid)
    assert valid == [False, False, True]
    result = run.result
    assert result is not None
    first, second, third = returns(result.all_messages())
    assert [first.outcome, second.outcome, third.outcome] == ['retried', 'retried', 'success']
    assert 'must be a JSON object' in first.content and 'web_perplexity_research' in first.content
    assert 'colour' in second.content and 'validation error' not in second.content.lower()


def test_checked_arguments_that_crossed_a_durable_boundary_as_json_are_checked_again(emulator: Emulator):
    """Durable execution sends a call's validated arguments across as JSON and validates them again with the same
    validator: they come back as the spec's arguments, still checked."""
    from pydantic_ai_perplexity._pydantic_ai.toolset import _ARGS  # pyright: ignore[reportPrivateUsage]

    check = toolset_for(emulator)._checks['perplexity_research']  # pyright: ignore[reportPrivateUsage]
    [first] = check.validate_json(b'{"query": "EU AI Act", "effort": "fast"}').values()
    crossed = json.loads(json.dumps({_ARGS: first.model_dump(exclude_none=True)}))
    [again] = check.validate_python(crossed).values()
    assert again == first and again.query == 'EU AI Act'
    with pytest.raises(ModelRetry, match='effort'):
        check.validate_python({_ARGS: {'query': 'q', 'effort': 'slowest'}})
