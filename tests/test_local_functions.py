"""Local functions (`functions=`): a run stops in `requires_action`, the `Researcher` runs the calls and continues it.

Against the emulator: a run offered client functions calls each once, with arguments made from its schema, and
stops in `requires_action`; a request continuing it (`previous_response_id`) with `function_call_output` items
answers, quoting what the functions said.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx2
import pytest
from pydantic import BaseModel
from pydantic_ai import Agent, FunctionToolset, ModelRetry, RunContext
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_perplexity import (
    InvalidArgumentError,
    PerplexityResearch,
    PerplexityToolset,
    Researcher,
    ResearchResult,
    research,
    toolset_functions,
)
from pydantic_ai_perplexity._core.functions import local_functions
from pydantic_ai_perplexity._domain.steps import Step
from pydantic_ai_perplexity._present.model_text import for_model
from pydantic_ai_perplexity.emulator import Emulator

pytestmark = pytest.mark.anyio

QUESTION = 'How do heat pumps work?'


def company_wiki(topic: str, max_pages: int = 3) -> str:
    """Search the company wiki for a topic."""
    return f'Wiki: our policy on {topic!r} is to prefer heat pumps ({max_pages} pages).'


async def sales_figures(region: str) -> dict[str, Any]:
    """Sales of heat pumps in a region, from the private database."""
    return {'region': region, 'units': 1200}


def broken(topic: str) -> str:
    """A function that fails."""
    raise RuntimeError(f'the wiki is down for {topic}')


def researcher_for(emu: Emulator, tmp_path: Path) -> Researcher:
    return Researcher(api_key=emu.api_key, base_url=emu.base_url, ledger=tmp_path / 'ledger.sqlite3')


# -- the schema and the checks -------------------------------------------------------------------------------------


def test_a_function_is_offered_with_the_schema_of_its_type_hints() -> None:
    tool = local_functions([company_wiki])['company_wiki'].tool()
    assert tool['type'] == 'function' and tool['name'] == 'company_wiki'
    assert tool['description'] == 'Search the company wiki for a topic.'
    assert tool['parameters']['required'] == ['topic']
    assert tool['parameters']['properties']['max_pages'] == {'default': 3, 'title': 'Max Pages', 'type': 'integer'}
    assert tool['parameters']['additionalProperties'] is False


async def test_bad_arguments_and_failures_become_the_output_the_run_reads() -> None:
    wiki = local_functions([company_wiki, broken])
    assert await wiki['company_wiki'].call('{"topic": "x", "max_pages": "2"}') == (
        "Wiki: our policy on 'x' is to prefer heat pumps (2 pages).",
        None,
    )
    for arguments, words in [
        ('{"max_pages": 2}', 'topic: Field required'),
        ('{"topic": "x", "max_pages": "many"}', 'max_pages: Input should be a valid integer'),
        ('{"topic": "x", "extra": 1}', 'extra: Extra inputs are not permitted'),
        ('not json', 'its arguments are not JSON'),
        ('[1, 2]', 'must be a JSON object'),
    ]:
        output, error = await wiki['company_wiki'].call(arguments)
        assert error is not None and words in output and output.startswith('Error: function company_wiki was not')
    output, error = await wiki['broken'].call('{"topic": "pumps"}')
    assert output == 'Error: function broken failed: RuntimeError: the wiki is down for pumps'
    assert error == 'RuntimeError: the wiki is down for pumps'


@pytest.mark.parametrize(
    ('functions', 'words'),
    [
        ([lambda topic: topic], 'cannot be offered'),
        ([company_wiki, company_wiki], 'two functions are named'),
        (['company_wiki'], 'must be Python callables'),
    ],
)
def test_a_function_the_api_would_refuse_is_refused_first(functions: list[Any], words: str) -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        local_functions(functions)
    assert caught.value.argument == 'functions' and words in str(caught.value)


def test_a_reserved_name_is_refused() -> None:
    def fetch_url(url: str) -> str:
        return url

    with pytest.raises(InvalidArgumentError, match='keeps for its own tools'):
        local_functions([fetch_url])


# -- the round trip ---------------------------------------------------------------------------------------------


async def test_a_run_calls_local_functions_and_answers_with_their_output(emulator: Emulator, tmp_path: Path):
    steps: list[Step] = []
    async with researcher_for(emulator, tmp_path) as r:
        result = await r.run(QUESTION, effort='low', functions=[company_wiki, sales_figures], on_progress=steps.append)
        await r.flush()
        legs = r.ledger.list() if r.ledger else []
    assert result.status == 'completed'
    assert [(c.name, c.error) for c in result.function_calls] == [('company_wiki', None), ('sales_figures', None)]
    assert result.function_calls[1].output == '{"region": "How do heat pumps work?", "units": 1200}'
    assert 'From your own tools:' in result.answer and "Wiki: our policy on 'How do heat pumps work?'" in result.answer
    shown = result._repr_html_()
    assert '<code>company_wiki({&quot;topic&quot;:' in shown and 'Local functions called' in shown
    assert [s.detail for s in steps if s.kind == 'function'] == [
        'called function company_wiki',
        'called function sales_figures',
    ]
    assert result.progress.function_calls == 2 and '2 function calls' in result.progress.summary()
    # Two runs in the ledger, each reserved before it was sent and billed after; the result costs both.
    assert sorted(leg.status for leg in legs) == ['completed', 'requires_action']
    assert all(leg.estimate_usd and leg.estimate_usd >= 0.05 for leg in legs)  # at least `low`'s floor, each
    billed = [leg.cost_usd for leg in legs]
    assert all(cost for cost in billed) and result.cost_usd == pytest.approx(sum(billed))  # type: ignore[arg-type]


async def test_a_failing_function_does_not_end_the_research(emulator: Emulator, tmp_path: Path):
    async with researcher_for(emulator, tmp_path) as r:
        result = await r.run(QUESTION, effort='fast', functions=[broken])
    assert result.status == 'completed'
    assert result.function_calls[0].error == f'RuntimeError: the wiki is down for {QUESTION}'
    assert 'broken: Error: function broken failed' in result.answer


async def test_calls_past_the_bound_are_not_run(emulator: Emulator, tmp_path: Path):
    async with researcher_for(emulator, tmp_path) as r:
        result = await r.run(QUESTION, effort='fast', functions=[company_wiki, sales_figures], max_function_calls=1)
    assert result.status == 'requires_action'
    assert [c.output for c in result.function_calls] == [None, None]
    assert 'max_function_calls=1' in result.notes[-1]


async def test_research_takes_functions_and_start_refuses_them(emulator_env: Emulator):
    result = await research(QUESTION, effort='fast', functions=[company_wiki])
    assert result.done and result.function_calls[0].output
    async with Researcher() as r:
        with pytest.raises(InvalidArgumentError, match='functions need run'):
            await r.start(QUESTION, functions=[company_wiki])
        with pytest.raises(InvalidArgumentError, match='max_function_calls=0'):
            await r.run(QUESTION, functions=[company_wiki], max_function_calls=0)


async def test_a_bad_function_is_refused_before_anything_is_sent(emulator: Emulator, tmp_path: Path):
    async with researcher_for(emulator, tmp_path) as r:
        with pytest.raises(InvalidArgumentError, match='two functions'):
            await r.run(QUESTION, functions=[company_wiki, company_wiki])
    assert not [req for req in emulator.requests if req.path.startswith('/v1/agent')]


class Query(BaseModel):
    topic: str
    limit: int = 2


def lookup(query: Query) -> str:
    """Look a topic up."""
    return f'{query.topic} x{query.limit}'


async def test_pydantic_models_as_arguments_are_validated(emulator: Emulator, tmp_path: Path):
    async with researcher_for(emulator, tmp_path) as r:
        result = await r.run(QUESTION, effort='fast', functions=[lookup])
    assert result.function_calls[0].output == f'{QUESTION} x2'


# -- the emulator's side ----------------------------------------------------------------------------------------


async def test_the_emulator_refuses_an_output_for_a_call_it_never_made(emulator: Emulator):
    tools = [{'type': 'function', 'name': 'company_wiki', 'parameters': {'type': 'object', 'properties': {}}}]
    headers = {'Authorization': f'Bearer {emulator.api_key}'}
    async with httpx2.AsyncClient(base_url=emulator.base_url, headers=headers, timeout=30) as http:
        first = (await http.post('/v1/agent', json={'input': QUESTION, 'effort': 'fast', 'tools': tools})).json()
        assert first['status'] == 'requires_action' and first['completed_at'] is None and first['usage']
        calls = [item for item in first['output'] if item['type'] == 'function_call']
        assert [c['name'] for c in calls] == ['company_wiki']
        wrong = {'type': 'function_call_output', 'call_id': 'call_other', 'output': 'x'}
        refused = await http.post(
            '/v1/agent', json={'input': [wrong], 'effort': 'fast', 'tools': tools, 'previous_response_id': first['id']}
        )
        right = {'type': 'function_call_output', 'call_id': calls[0]['call_id'], 'output': 'ok from the wiki'}
        answered = await http.post(
            '/v1/agent', json={'input': [right], 'effort': 'fast', 'tools': tools, 'previous_response_id': first['id']}
        )
    assert refused.status_code == 400 and 'answers no function call' in refused.text
    final = answered.json()
    assert final['status'] == 'completed' and not [i for i in final['output'] if i['type'] == 'function_call']
    assert 'company_wiki: ok from the wiki' in final['output'][-1]['content'][0]['text']


async def test_the_documented_example_runs(emulator_env: Emulator, capfd: pytest.CaptureFixture[str]):
    import ast
    import re

    doc = (Path(__file__).parents[1] / 'docs' / 'tools.md').read_text(encoding='utf-8')
    code = re.findall(r'```python\n(.*?)\n```', doc, flags=re.DOTALL)[0]
    namespace: dict[str, Any] = {'__name__': '__doc__'}
    outcome = eval(compile(code, 'docs/tools.md', 'exec', flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT), namespace)
    if outcome is not None:
        await outcome
    result = namespace['result']
    assert result.status == 'completed' and result.function_calls[0].name == 'company_wiki'
    assert 'we install heat pumps in every new office' in capfd.readouterr().out


# -- a pydantic-ai toolset as the source of functions ------------------------------------------------------------


def policy(ctx: RunContext[str], topic: str, max_pages: int = 3) -> str:
    """Read the company's policy on a topic."""
    if topic == 'retry':
        raise ModelRetry('name a real topic')
    return f'Policy of {ctx.deps or "nobody"} on {topic!r}: heat pumps ({max_pages} pages).'


def _wiki_toolset() -> FunctionToolset[str]:
    return FunctionToolset([policy, sales_figures])


async def test_a_toolsets_tools_become_functions_checked_and_called_through_it() -> None:
    wiki = {f.name: f for f in await toolset_functions(_wiki_toolset(), deps='Acme')}
    assert sorted(wiki) == ['policy', 'sales_figures']
    tool = wiki['policy'].tool()
    assert tool['type'] == 'function' and tool['description'] == "Read the company's policy on a topic."
    assert tool['parameters']['required'] == ['topic'] and 'ctx' not in tool['parameters']['properties']
    assert await wiki['policy'].call('{"topic": "pumps"}') == ("Policy of Acme on 'pumps': heat pumps (3 pages).", None)
    assert await wiki['sales_figures'].call('{"region": "north"}') == ('{"region": "north", "units": 1200}', None)
    output, error = await wiki['policy'].call('{"max_pages": 2}')  # checked by the tool's own validator
    assert error and output.startswith('Error: function policy was not called') and 'topic: Field required' in output
    output, error = await wiki['policy'].call('{"topic": "retry"}')
    assert error == 'name a real topic' and 'asks to be called again' in output


async def test_a_run_calls_a_toolsets_tools(emulator: Emulator, tmp_path: Path) -> None:
    async with researcher_for(emulator, tmp_path) as r:
        functions = await toolset_functions(_wiki_toolset(), deps='Acme')
        result = await r.run(QUESTION, effort='fast', functions=[*functions, company_wiki])
    assert result.status == 'completed'
    assert [(c.name, c.error) for c in result.function_calls] == [
        ('policy', None),
        ('sales_figures', None),
        ('company_wiki', None),
    ]
    assert f"Policy of Acme on '{QUESTION}'" in result.answer
    offered = [t['name'] for t in r.build_request(functions=functions).get('tools', []) if t['type'] == 'function']
    assert offered == ['policy', 'sales_figures']


def test_a_toolset_given_as_it_is_says_how_to_offer_it() -> None:
    with pytest.raises(InvalidArgumentError, match='toolset_functions'):
        local_functions([_wiki_toolset()])


# -- the toolset and the capability: the research tool's runs call local functions -----------------------------------


def _research_then_answer(seen: list[list[str]]) -> FunctionModel:
    """A scripted model that calls perplexity_research once, then answers with what it returned; it notes the tools
    it was offered each turn (local functions must not be among them)."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append([t.name for t in info.function_tools])
        returned = [
            p for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ToolReturnPart)
        ]
        if not returned:
            return ModelResponse(parts=[ToolCallPart('perplexity_research', {'query': QUESTION, 'effort': 'fast'})])
        return ModelResponse(parts=[TextPart(returned[0].model_response_str())])

    return FunctionModel(respond)


async def test_the_toolsets_research_runs_call_local_functions(emulator: Emulator, tmp_path: Path) -> None:
    seen: list[list[str]] = []
    toolset = PerplexityToolset(
        api_key=emulator.api_key,
        base_url=emulator.base_url,
        ledger=tmp_path / 'ledger.sqlite3',
        functions=[company_wiki, _wiki_toolset()],
    )
    agent = Agent(_research_then_answer(seen), toolsets=[toolset], deps_type=str)
    run = await agent.run('heat pumps?', deps='Acme')
    assert seen and all('company_wiki' not in names and 'policy' not in names for names in seen)
    assert 'perplexity_research' in seen[0]
    [ret] = [
        p for m in run.all_messages() if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ToolReturnPart)
    ]
    result = ret.metadata['research_result']  # type: ignore[index]
    assert isinstance(result, ResearchResult) and result.status == 'completed'
    assert [c.name for c in result.function_calls] == ['company_wiki', 'policy', 'sales_figures']
    # The toolset's tools ran with the agent run's own context: its deps.
    assert f"Policy of Acme on '{QUESTION}'" in result.answer and 'Policy of Acme' in run.output


def test_the_toolset_refuses_a_bad_function_when_built() -> None:
    with pytest.raises(InvalidArgumentError, match='two functions'):
        PerplexityToolset(api_key='pplx-test', ledger=False, functions=[company_wiki, company_wiki])


async def test_the_capabilitys_research_runs_call_local_functions(emulator_env: Emulator) -> None:
    seen: list[list[str]] = []
    capability = PerplexityResearch(ledger=False, functions=[company_wiki], options=None)
    run = await Agent(_research_then_answer(seen), capabilities=[capability]).run('heat pumps?')
    assert all('company_wiki' not in names for names in seen)
    [ret] = [
        p for m in run.all_messages() if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ToolReturnPart)
    ]
    result = ret.metadata['research_result']  # type: ignore[index]
    assert [(c.name, c.error) for c in result.function_calls] == [('company_wiki', None)]
    assert "Wiki: our policy on 'How do heat pumps work?'" in run.output


# -- a run left in requires_action, collected later ----------------------------------------------------------------


@pytest.mark.slow
async def test_a_handed_off_run_waiting_for_functions_is_collected_and_answered(emulator: Emulator, tmp_path: Path):
    slow = f'{QUESTION} [[emulate: duration=300]]'
    async with researcher_for(emulator, tmp_path) as r:
        handed = await r.run(slow, effort='fast', functions=[company_wiki], wait_seconds=0.05)
        assert handed.status == 'in_progress' and 'Researcher.collect(response_id, functions=' in handed.notes[-1]
    # Another researcher (another process) collects it: without the functions it says what the run waits for, and
    # returns at once (requires_action is settled: waiting longer changes nothing).
    async with researcher_for(emulator, tmp_path) as other:
        waiting = await other.collect(handed.response_id, wait_seconds=30)
        assert waiting.status == 'requires_action' and not waiting.done
        assert [(c.name, c.output) for c in waiting.function_calls] == [('company_wiki', None)]
        assert waiting.notes[-1].startswith('The run waits for local functions it called: company_wiki({')
        assert 'Only a Python caller holding them can answer' in waiting.notes[-1]
        assert 'Note: The run waits for local functions it called: company_wiki(' in for_model(waiting)  # the model too
        # With the functions, the collect answers them and the run goes on to its end.
        answered = await other.collect(handed.response_id, wait_seconds=30, functions=[company_wiki])
        await other.flush()
        legs = other.ledger.list() if other.ledger else []
    assert answered.status == 'completed' and answered.function_calls[0].error is None
    assert "Wiki: our policy on 'How do heat pumps work?" in answered.answer
    assert answered.cost_usd and waiting.cost_usd and answered.cost_usd > waiting.cost_usd  # both legs billed
    assert sorted(leg.status for leg in legs) == ['completed', 'requires_action']
    assert all(leg.query == slow for leg in legs)  # the continuation is recorded under the run's own question


async def test_collect_refuses_a_bad_function_before_waiting(emulator: Emulator, tmp_path: Path):
    async with researcher_for(emulator, tmp_path) as r:
        with pytest.raises(InvalidArgumentError, match='two functions'):
            await r.collect('resp_unknown', functions=[company_wiki, company_wiki])
    assert not [req for req in emulator.requests if req.path.startswith('/v1/agent')]


@pytest.mark.slow
async def test_the_toolsets_collect_answers_a_handed_off_run_waiting_for_functions(emulator: Emulator, tmp_path: Path):
    from pydantic_ai_perplexity.testing import scripted_research_model

    toolset = PerplexityToolset(
        api_key=emulator.api_key,
        base_url=emulator.base_url,
        ledger=tmp_path / 'ledger.sqlite3',
        wait_seconds=0.05,
        functions=[company_wiki],
    )
    model = scripted_research_model(effort='fast', collect_wait_seconds=30, max_collects=400)
    agent = Agent(model, toolsets=[toolset])
    run = await agent.run(f'{QUESTION} [[emulate: duration=300]]')
    rets = [
        p for m in run.all_messages() if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ToolReturnPart)
    ]
    assert rets[0].tool_name == 'perplexity_research' and 'still going' in rets[0].content
    last = rets[-1].metadata['research_result']  # type: ignore[index]
    assert rets[-1].tool_name == 'perplexity_research_result' and last.status == 'completed'
    assert [(c.name, c.error) for c in last.function_calls] == [('company_wiki', None)]
    assert "Wiki: our policy on 'How do heat pumps work?" in last.answer
