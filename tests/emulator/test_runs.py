"""Runs: blocking and background lifecycles, content and citations, usage and cost, cancel, retention."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx2
import pytest
from pydantic import BaseModel

from pydantic_ai_perplexity.client._models import (
    FetchUrlResultsItem,
    McpCallItem,
    McpListToolsItem,
    MessageItem,
    SearchResultsItem,
    parse_response,
)
from pydantic_ai_perplexity.emulator import Emulator
from pydantic_ai_perplexity.emulator._corpus import EFFORT_MODELS, MODELS
from support.emulator import TERMINAL, poll, wait_terminal


def create(client: httpx2.Client, **body: Any) -> dict[str, Any]:
    response = client.post('/v1/agent', json=body)
    assert response.status_code == 200, response.text
    return response.json()


def result_ids(response: dict[str, Any]) -> list[int]:
    return [r['id'] for item in response['output'] if item['type'] == 'search_results' for r in item['results']]


def answer(response: dict[str, Any]) -> str:
    return parse_response(response).output_text


def test_a_blocking_run_answers_with_the_full_response(client: httpx2.Client):
    response = create(client, input='What changed in the EU AI Act timeline?', effort='medium')
    parsed = parse_response(response)
    assert parsed.status == 'completed' and parsed.done
    assert response['id'].startswith('resp_') and response['object'] == 'response'
    assert response['model'] == 'openai/gpt-6-luna' and response['effort'] == 'medium'  # live, 2026-10-09
    assert response['background'] is False and response['store'] is True
    assert response['completed_at'] >= response['created_at']
    assert 'output_text' not in response and 'citations' not in response
    kinds = [item['type'] for item in response['output']]
    assert kinds == ['search_results', 'search_results', 'fetch_url_results', 'message']
    assert 'function_call' not in kinds
    assert all('id' not in item for item in response['output'] if item['type'] == 'search_results')
    message = response['output'][-1]
    assert message['id'].startswith('msg_') and message['role'] == 'assistant'
    assert message['content'][0]['annotations'] == []
    assert parsed.items(SearchResultsItem) and parsed.items(FetchUrlResultsItem) and parsed.items(MessageItem)
    assert 'AI Act' in parsed.output_text


def test_result_ids_are_unique_across_searches_and_markers_point_at_them(client: httpx2.Client):
    response = create(
        client, input='quantum error correction and post-quantum cryptography', effort='high', max_output_tokens=4000
    )
    ids = result_ids(response)
    assert ids == list(range(1, len(ids) + 1))
    assert len([i for i in response['output'] if i['type'] == 'search_results']) == 3
    markers = {int(m) for m in __import__('re').findall(r'\[(\d+)\]', answer(response))}
    assert markers and markers <= set(ids)
    cited_urls = {
        r['url']
        for item in response['output']
        if item['type'] == 'search_results'
        for r in item['results']
        if r['id'] in markers
    }
    assert any('nist.gov' in u or 'nature.com' in u or 'ibm.com' in u for u in cited_urls)


def test_the_same_query_and_effort_give_the_same_answer(client: httpx2.Client):
    first = create(client, input='How do heat pumps work?', effort='low')
    second = create(client, input='How do heat pumps work?', effort='low')
    assert first['id'] != second['id']
    assert answer(first) == answer(second)
    assert result_ids(first) == result_ids(second)
    assert first['usage'] == second['usage']
    other = create(client, input='How do heat pumps work?', effort='fast')
    assert answer(other) != answer(first)


@pytest.mark.parametrize('effort', ['fast', 'low', 'medium'])
def test_usage_and_cost_add_up_exactly(client: httpx2.Client, effort: str):
    """Billed as the live API bills (cfdude/mcp-perplexity-pro tests/fixtures/agent_fast.json,
    agent_low_fetch_url.json, agent_background_completed.json, captured 2026-10-09): input spend as cache
    creation/read with `input_cost: 0`, five-decimal amounts that add up, $0.001 per search, and each fetch's fee
    plus its reader's tokens."""
    usage = create(client, input='Electric vehicle battery chemistry', effort=effort)['usage']
    cost = usage['cost']
    assert usage['total_tokens'] == usage['input_tokens'] + usage['output_tokens']
    assert cost['currency'] == 'USD' and cost['input_cost'] == 0
    details = cost['tool_calls_cost_details']
    assert cost['tool_calls_cost'] == round(sum(details.values()), 5)
    parts = cost['cache_creation_cost'] + cost.get('cache_read_cost', 0) + cost['output_cost'] + cost['tool_calls_cost']
    assert cost['total_cost'] == round(parts, 5)
    for key, value in details.items():
        assert usage['tool_calls_details'][key]['cost_usd'] == value
    searches = usage['tool_calls_details']['search_web']['invocation']
    assert details['search_web'] == round(searches * 0.001, 5)
    if effort == 'fast':
        assert 'fetch_url' not in details
    else:
        fetch = usage['tool_calls_details']['fetch_url']
        reader = MODELS['openai/gpt-5.6-luna']
        assert len(fetch['token_usage']) == fetch['invocation']
        expected = sum(
            0.0005
            + read['input_tokens'] * reader.cache_write_price / 1e6
            + read['output_tokens'] * reader.output_per_million / 1e6
            for read in fetch['token_usage']
        )
        assert details['fetch_url'] == round(expected, 5)
        assert 0.003 < details['fetch_url'] / fetch['invocation'] < 0.004  # "about $0.0035 per fetch", live
    model = MODELS[EFFORT_MODELS[effort]]
    cached = usage['input_tokens_details']
    assert cached['cached_tokens'] == cached['cache_read_input_tokens']
    assert cost['cache_creation_cost'] == round(
        cached['cache_creation_input_tokens'] * model.cache_write_price / 1e6, 5
    )
    assert cost.get('cache_read_cost', 0) == round(cached['cache_read_input_tokens'] * model.cache_read_price / 1e6, 5)
    assert cost['output_cost'] == round(usage['output_tokens'] * model.output_per_million / 1e6, 5)


def test_explicit_models_win_over_the_effort_bundle(client: httpx2.Client):
    assert create(client, input='q', effort='fast', model='perplexity/sonar')['model'] == 'perplexity/sonar'
    chain = create(client, input='q', effort='fast', models=['google/gemini-3.1-pro-preview', 'perplexity/sonar'])
    assert chain['model'] == 'google/gemini-3.1-pro-preview'


def test_a_model_without_search_tools_does_not_search(client: httpx2.Client):
    bare = create(client, input='EU AI Act', model='perplexity/sonar')
    assert [i['type'] for i in bare['output']] == ['message']
    assert 'search_web' not in bare['usage']['tool_calls_details']
    offered = create(client, input='EU AI Act', model='perplexity/sonar', tools=[{'type': 'web_search'}])
    assert [i['type'] for i in offered['output']] == ['search_results', 'message']
    off = create(client, input='EU AI Act', effort='medium', tool_choice='none')
    assert [i['type'] for i in off['output']] == ['message']


def test_max_steps_and_tool_options_bound_the_work(client: httpx2.Client):
    one = create(client, input='Mars rover samples', effort='high', max_steps=1, max_output_tokens=3000)
    assert [i['type'] for i in one['output']] == ['search_results', 'message']
    capped = create(client, input='Mars rover samples', effort='medium', tools=[{'type': 'fetch_url', 'max_urls': 1}])
    fetched = [c for i in capped['output'] if i['type'] == 'fetch_url_results' for c in i['contents']]
    assert len(fetched) == 1
    # A question with four matching pages, so that max_results is what bounds the results.
    few = create(client, input='AI Act obligations', effort='fast', tools=[{'type': 'web_search', 'max_results': 2}])
    assert len(result_ids(few)) == 2
    assert 'fetch_url_results' not in [i['type'] for i in few['output']]
    fetching = create(client, input='Mars rover samples', effort='fast', tools=[{'type': 'fetch_url'}])
    assert [i['type'] for i in fetching['output']] == ['search_results', 'fetch_url_results', 'message']


def test_domain_filters_allow_and_deny(client: httpx2.Client):
    allow = create(
        client,
        input='AI Act obligations',
        effort='low',
        tools=[{'type': 'web_search', 'filters': {'search_domain_filter': ['europa.eu']}}],
    )
    urls = [r['url'] for i in allow['output'] if i['type'] == 'search_results' for r in i['results']]
    assert urls and all('europa.eu' in u for u in urls)
    deny = create(
        client,
        input='AI Act obligations',
        effort='low',
        tools=[{'type': 'web_search', 'filters': {'search_domain_filter': ['-europa.eu', '-reuters.com']}}],
    )
    urls = [r['url'] for i in deny['output'] if i['type'] == 'search_results' for r in i['results']]
    assert urls and not any('europa.eu' in u or 'reuters.com' in u for u in urls)


def test_structured_output_validates_against_the_schema(client: httpx2.Client):
    class Source(BaseModel):
        url: str
        title: str

    class Report(BaseModel):
        title: str
        confidence: float
        rating: int
        tags: list[str]
        kind: str = 'x'
        sources: list[Source]
        verdict: bool | None

    schema = Report.model_json_schema()
    schema['properties']['kind'] = {'enum': ['survey', 'news']}
    schema['required'] = [*schema['required'], 'kind']
    schema['properties']['rating'] = {'type': 'integer', 'minimum': 3, 'maximum': 5}
    body = {'type': 'json_schema', 'json_schema': {'name': 'report', 'schema': schema, 'strict': True}}
    response = create(client, input='EU AI Act summary', effort='fast', response_format=body)
    data = json.loads(answer(response))
    report = Report.model_validate(data)
    assert report.sources and report.sources[0].url.startswith('https://')
    assert data['kind'] == 'survey' and 3 <= data['rating'] <= 5
    assert response['text']['format']['type'] == 'json_schema'
    import jsonschema

    jsonschema.validate(data, schema)


def test_a_small_max_output_tokens_makes_the_run_incomplete(client: httpx2.Client):
    response = create(client, input='Artemis program goals', effort='low', max_output_tokens=20)
    assert response['status'] == 'incomplete'
    assert response['incomplete_details'] == {'reason': 'max_output_tokens'}
    message = response['output'][-1]
    assert message['status'] == 'incomplete' and 0 < len(answer(response)) <= 20 * 4
    assert response['usage'] is not None


def test_mcp_tools_are_listed_once_and_called(client: httpx2.Client):
    tools = [
        {
            'type': 'mcp',
            'server_label': 'docs',
            'server_url': 'https://mcp.example.com/mcp',
            'authorization': 'sekrit-token-123',
        },
        {'type': 'mcp', 'server_label': 'wiki', 'server_url': 'http://127.0.0.1:9/mcp', 'allowed_tools': ['lookup']},
    ]
    response = create(client, input='EU AI Act', effort='fast', tools=tools)
    parsed = parse_response(response)
    listed = parsed.items(McpListToolsItem)
    calls = parsed.items(McpCallItem)
    assert [i.server_label for i in listed] == ['docs', 'wiki'] and [c.server_label for c in calls] == ['docs', 'wiki']
    assert [t.name for t in listed[1].tools] == ['lookup'] and listed[0].tools and listed[0].id.startswith('mcpl_')
    assert all(json.loads(c.arguments) and c.output and c.error is None for c in calls)
    assert 'sekrit-token-123' not in json.dumps(response) and all('authorization' not in t for t in response['tools'])
    assert 'mcp' not in response['usage']['tool_calls_details']


def test_an_unreachable_mcp_server_fails_the_create_with_424(client: httpx2.Client, emu: Emulator):
    tools = [{'type': 'mcp', 'server_label': 'github', 'server_url': 'https://mcp.github.invalid/mcp'}]
    response = client.post('/v1/agent', json={'input': 'q', 'effort': 'fast', 'tools': tools})
    assert response.status_code == 424
    assert response.json()['error'] == {
        'message': 'MCP server "github" could not be initialized',
        'type': 'external_connector_error',
        'code': 424,
    }


def test_a_background_run_is_queued_then_in_progress_then_completed(client: httpx2.Client):
    created = create(
        client, input='Webb telescope discoveries [[emulate: duration=100]]', effort='medium', background=True
    )
    assert created['status'] == 'queued' and created['output'] == [] and created['usage'] is None
    assert created['background'] is True and created['model'] == 'medium'
    running = poll(lambda: client.get(f'/v1/agent/{created["id"]}').json(), lambda r: r['status'] == 'in_progress')
    assert running['usage'] is None and running['model'] == 'medium'
    assert {i['type'] for i in running['output']} <= {'search_results', 'fetch_url_results'}
    assert running['completed_at'] is None
    done = wait_terminal(client, created['id'])
    assert done['status'] == 'completed' and done['model'] == 'openai/gpt-6-luna' and done['usage']
    assert client.get(f'/v1/responses/{created["id"]}').json() == done  # both paths, same run


def test_running_snapshots_show_the_items_reached_so_far():
    """Live fact: cfdude/mcp-perplexity-pro tests/fixtures/agent_background_in_progress.json, captured 2026-10-09:
    a running retrieve carries the search and fetch items found so far (the default)."""
    with (
        Emulator(time_scale=0.002) as emu,
        httpx2.Client(base_url=emu.base_url, headers={'Authorization': f'Bearer {emu.api_key}'}) as client,
    ):
        created = create(
            client,
            input='Euclid dark matter [[emulate: duration=200]]',
            effort='high',
            max_output_tokens=2000,
            background=True,
        )
        seen = poll(
            lambda: client.get(f'/v1/agent/{created["id"]}').json(),
            lambda r: r['status'] in TERMINAL or any(i['type'] == 'search_results' for i in r['output']),
        )
        assert seen['status'] == 'in_progress' and seen['usage'] is None
        assert {i['type'] for i in seen['output']} <= {'search_results', 'fetch_url_results'}
        done = wait_terminal(client, created['id'])
        assert done['output'][: len(seen['output'])] == seen['output']


def test_partial_output_can_be_turned_off():
    """`partial_output=False` keeps the documented `output: []` until the run ends."""
    with (
        Emulator(time_scale=0.002, partial_output=False) as emu,
        httpx2.Client(base_url=emu.base_url, headers={'Authorization': f'Bearer {emu.api_key}'}) as client,
    ):
        created = create(client, input='Euclid dark matter [[emulate: duration=200]]', effort='medium', background=True)
        rid = created['id']
        snapshots: list[dict[str, Any]] = []

        def look() -> dict[str, Any]:
            snapshots.append(client.get(f'/v1/agent/{rid}').json())
            return snapshots[-1]

        poll(look, lambda r: r['status'] in TERMINAL)
        running = [r for r in snapshots if r['status'] == 'in_progress']
        assert running and all(r['output'] == [] for r in running)
        assert any(i['type'] == 'search_results' for i in snapshots[-1]['output'])


def test_store_false_runs_cannot_be_retrieved(client: httpx2.Client):
    response = create(client, input='q', effort='fast', store=False)
    assert response['store'] is False and response['status'] == 'completed'
    missing = client.get(f'/v1/agent/{response["id"]}')
    assert missing.status_code == 404 and missing.json()['error']['type'] == 'not_found'
    # Live facts: cfdude/mcp-perplexity-pro tests/fixtures/agent_get_store_false_404.json and
    # agent_get_unknown_404.meta.json, captured 2026-10-09: unknown and store:false ids are both 404.
    assert missing.json()['error'] == {'message': 'resource not found', 'type': 'not_found', 'code': 404}
    assert client.get('/v1/agent/resp_00000000-0000-0000-0000-000000000000').status_code == 404


def test_finished_runs_expire_after_the_retention_time():
    with (
        Emulator(time_scale=0, retention_seconds=0.05) as emu,
        httpx2.Client(base_url=emu.base_url, headers={'Authorization': f'Bearer {emu.api_key}'}) as client,
    ):
        response = create(client, input='q', effort='xhigh', max_output_tokens=900)
        assert client.get(f'/v1/agent/{response["id"]}').status_code == 200
        poll(lambda: {'status': client.get(f'/v1/agent/{response["id"]}').status_code}, lambda r: r['status'] == 404)
        assert client.post(f'/v1/agent/{response["id"]}/cancel').status_code == 400  # as any unknown id, live


def test_cancel_acknowledges_then_the_run_is_cancelled(client: httpx2.Client):
    started = create(
        client, input='A long survey [[emulate: duration=5000]]', effort='xhigh', max_output_tokens=500, background=True
    )
    ack = client.post(f'/v1/responses/{started["id"]}/cancel')
    assert ack.status_code == 200 and ack.json() == {'response_id': started['id'], 'status': 'cancelling'}
    done = wait_terminal(client, started['id'])
    # Live fact: cfdude/mcp-perplexity-pro tests/fixtures/agent_background_cancelled.json, captured 2026-10-09.
    assert done['status'] == 'cancelled' and done['usage'] is None
    assert done['error'] == {'code': 'cancelled', 'type': 'cancelled', 'message': 'cancelled'}
    assert done['incomplete_details'] == {'reason': 'cancelled'}
    assert done['model'] == 'xhigh' and done['completed_at'] is None
    again = client.post(f'/v1/agent/{started["id"]}/cancel')
    assert again.status_code == 400 and again.json()['error']['type'] == 'invalid_request'
    assert client.post('/v1/agent/resp_nope/cancel').status_code == 400


def test_cancel_of_a_completed_run_is_400(client: httpx2.Client):
    """Live fact: cfdude/mcp-perplexity-pro tests/fixtures/agent_cancel_terminal_400.meta.json, captured
    2026-10-09."""
    finished = create(client, input='q', effort='fast')
    response = client.post(f'/v1/agent/{finished["id"]}/cancel')
    assert response.status_code == 400
    assert response.json()['error'] == {
        'message': 'the run is already terminal and cannot be cancelled',
        'type': 'invalid_request',
        'code': 400,
    }


def test_retrieve_query_parameters_are_checked(client: httpx2.Client):
    rid = create(client, input='q', effort='fast')['id']
    assert client.get(f'/v1/agent/{rid}', params={'format': 'short'}).status_code == 200
    for params in ({'format': 'long'}, {'stream': 'maybe'}, {'stream': 'false', 'starting_after': '-1'}):
        assert client.get(f'/v1/agent/{rid}', params=params).status_code == 400


def test_the_api_key_never_reaches_the_answer(client: httpx2.Client, emu: Emulator):
    response = client.post('/v1/agent', json={'input': f'Repeat this: {emu.api_key}', 'effort': 'low'})
    assert emu.api_key not in response.text
    assert '[redacted]' in answer(response.json())


@pytest.mark.anyio
async def test_concurrent_runs_do_not_interfere(emu: Emulator):
    topics = ['EU AI Act', 'heat pumps', 'Mars rover', 'quantum computing', 'EV charging', 'sleep'] * 5
    results: dict[int, dict[str, Any]] = {}
    async with httpx2.AsyncClient(base_url=emu.base_url, headers={'Authorization': f'Bearer {emu.api_key}'}) as c:

        async def one(i: int) -> None:
            r = await c.post('/v1/agent', json={'input': topics[i], 'effort': 'low'}, timeout=30)
            results[i] = r.json()

        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                for i in range(len(topics)):
                    tg.start_soon(one, i)
    assert len({r['id'] for r in results.values()}) == len(topics)
    assert all(r['status'] in TERMINAL for r in results.values())
    by_topic: dict[str, set[str]] = {}
    for i, r in results.items():
        by_topic.setdefault(topics[i], set()).add(answer(r))
    assert all(len(texts) == 1 for texts in by_topic.values())  # same question, same answer, even concurrently


def _user(text: str, *parts: dict[str, Any]) -> list[dict[str, Any]]:
    return [{'type': 'message', 'role': 'user', 'content': [{'type': 'input_text', 'text': text}, *parts]}]


def test_an_attached_text_file_is_read_cited_by_name_and_billed(client: httpx2.Client):
    import base64

    notes = 'Quarterly notes. The pilot heat pumps cut household emissions by forty percent. Unrelated closing line.'
    part = {'type': 'input_file', 'file_data': base64.b64encode(notes.encode()).decode(), 'filename': 'notes.md'}
    question = 'What do the notes say about heat pumps?'
    plain = create(client, input=question, effort='fast')
    attached = create(client, input=_user(question, part), effort='fast')
    text = answer(attached)
    assert 'From the attached file notes.md: ' in text and 'cut household emissions by forty percent' in text
    assert 'notes.md' not in answer(plain)
    # The file's text is read: its tokens (4 characters each) are billed on top of the question's.
    extra = attached['usage']['input_tokens'] - plain['usage']['input_tokens']
    assert extra == -(-len(notes) // 4)


def test_a_pdf_a_file_by_url_and_an_image_are_cited_by_name_without_being_read(client: httpx2.Client):
    parts = [
        {'type': 'input_file', 'file_data': 'JVBERi0xLjQK', 'filename': 'report.pdf'},
        {'type': 'input_file', 'file_url': 'https://files.example/survey.pdf'},
        {'type': 'input_image', 'image_url': 'https://img.example/chart.png'},
    ]
    text = answer(create(client, input=_user('Summarise these.', *parts), effort='fast'))
    assert '- The attached file report.pdf: its text is not extracted offline' in text
    assert '- The attached file https://files.example/survey.pdf: its text is not extracted offline' in text
    assert '- The attached image https://img.example/chart.png: its text is not extracted offline' in text


def test_fallback_models_answer_in_order_and_the_unavailable_directive_skips_the_first(client: httpx2.Client):
    models = ['openai/gpt-5.4', 'openai/gpt-5.5']
    assert create(client, input='What is solar power?', models=models)['model'] == 'openai/gpt-5.4'
    skipped = create(client, input='What is solar power? [[emulate: unavailable]]', models=models)
    assert skipped['model'] == 'openai/gpt-5.5'
    alone = create(client, input='What is solar power? [[emulate: unavailable]]', models=models[:1])
    assert alone['model'] == 'openai/gpt-5.4'  # no fallback left: the only model answers


def test_the_service_tier_is_echoed_and_billed_at_its_terms(client: httpx2.Client):
    runs = {
        tier: create(client, input='What is solar power?', effort='fast', **({'service_tier': tier} if tier else {}))
        for tier in (None, 'flex', 'priority', 'auto')
    }
    assert [r['service_tier'] for r in runs.values()] == ['default', 'flex', 'priority', 'default']

    def tokens_cost(run: dict[str, Any]) -> float:
        cost = run['usage']['cost']
        return cost['total_cost'] - cost['tool_calls_cost']

    base = tokens_cost(runs[None])
    assert tokens_cost(runs['flex']) == pytest.approx(base / 2, abs=3e-5)
    assert tokens_cost(runs['priority']) == pytest.approx(base * 2, abs=3e-5)
    assert tokens_cost(runs['auto']) == pytest.approx(base, abs=1e-9)
    assert len({r['usage']['cost']['tool_calls_cost'] for r in runs.values()}) == 1  # tool fees do not change


def test_a_repeated_prompt_cache_key_reads_the_prompt_from_the_cache(client: httpx2.Client):
    import uuid

    key = f'k-{uuid.uuid4()}'
    body: dict[str, Any] = {'input': 'What is solar power?', 'effort': 'fast', 'instructions': 'Be brief. ' * 100}
    first = create(client, **body, prompt_cache_key=key)
    second = create(client, **body, prompt_cache_key=key)
    other = create(client, **body, prompt_cache_key=f'{key}-other')
    read = [r['usage']['input_tokens_details']['cache_read_input_tokens'] for r in (first, second, other)]
    assert read[0] == read[2] and read[1] > read[0] + 200  # the instructions (250 tokens) came from the cache
    assert second['usage']['cost']['total_cost'] < first['usage']['cost']['total_cost']
    assert first['prompt_cache_key'] == key
