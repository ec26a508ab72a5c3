"""The emulator answers as the live API did on 2026-10-09.

Each test holds one fact read off the public captures of the live API published with the test fixtures of the
open-source `cfdude/mcp-perplexity-pro` server (`tests/fixtures/`, captured 2026-10-09); the test names its source.
docs/emulator.md lists every fact with its source and test.
"""

from __future__ import annotations

from typing import Any

import httpx2
import pytest

from pydantic_ai_perplexity._base.prices import LIVE_MODELS
from pydantic_ai_perplexity.emulator import Emulator
from support.emulator import TERMINAL, poll, wait_terminal

UNKNOWN_ID = 'resp_00000000-0000-0000-0000-000000000000'


def create(client: httpx2.Client, **body: Any) -> httpx2.Response:
    return client.post('/v1/agent', json={'input': 'What is the current stable version of Python?', **body})


def error(response: httpx2.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {'error'}, body
    return body['error']


# --- 1. validation failures -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ('body', 'message'),
    [
        # Live fact: cfdude/mcp-perplexity-pro tests/fixtures/agent_bad_recency_400.json, captured 2026-10-09.
        (
            {'effort': 'fast', 'tools': [{'type': 'web_search', 'filters': {'search_recency_filter': 'decade'}}]},
            'validation failed: tools[0]: search recency filter must be one of: hour day week month year',
        ),
        # Live fact: cfdude/mcp-perplexity-pro tests/fixtures/agent_max_steps_zero_400.json, captured 2026-10-09.
        ({'effort': 'fast', 'max_steps': 0}, 'validation failed: max steps must be at least 1'),
        # Live fact: cfdude/mcp-perplexity-pro tests/fixtures/agent_anthropic_no_max_output_tokens_400.json,
        # captured 2026-10-09.
        (
            {'model': 'anthropic/claude-sonnet-4-6'},
            'validation failed: max_output_tokens is required when using Anthropic models',
        ),
        # Live fact: cfdude/mcp-perplexity-pro tests/fixtures/agent_empty_input_400.json, captured 2026-10-09.
        ({'effort': 'fast', 'input': ''}, 'validation failed: input cannot be empty'),
        # Live fact: cfdude/mcp-perplexity-pro tests/fixtures/agent_structured_missing_schema_400.json, captured
        # 2026-10-09.
        (
            {'effort': 'fast', 'response_format': {'type': 'json_schema'}},
            'validation failed: response_format.json_schema is required when type is "json_schema"',
        ),
    ],
)
def test_validation_failures_are_invalid_request_with_the_live_message(
    client: httpx2.Client, body: dict[str, Any], message: str
):
    assert error(create(client, **body), 400) == {'message': message, 'type': 'invalid_request', 'code': 400}


def test_a_model_the_live_list_dropped_is_refused(client: httpx2.Client):
    """Live fact: cfdude/mcp-perplexity-pro tests/fixtures/models.json, captured 2026-10-09, no longer lists
    `xai/grok-4-1-fast-non-reasoning`. No unknown-model answer was captured: it is typed as the other validation
    failures are."""
    found = error(create(client, model='xai/grok-4-1-fast-non-reasoning'), 400)
    assert found['type'] == 'invalid_request'
    assert found['message'].startswith('validation failed: model "xai/grok-4-1-fast-non-reasoning" is not supported')


# --- 2. ids, conversations, structured output -------------------------------------------------------------------


def test_an_unknown_previous_response_id_is_a_400(client: httpx2.Client):
    """Live fact: cfdude/mcp-perplexity-pro tests/fixtures/agent_chat_bad_previous_response_400.json, captured
    2026-10-09."""
    found = error(create(client, effort='fast', previous_response_id=UNKNOWN_ID), 400)
    assert (found['message'], found['type'], found['code']) == ('invalid request', 'invalid_request', 400)


def test_a_continued_run_shows_previous_response_id_null_and_store_false_runs_continue(client: httpx2.Client):
    """Live facts: cfdude/mcp-perplexity-pro tests/fixtures/agent_chat_turn_b.json (`previous_response_id` is null
    in the answer even when sent) and agent_continue_store_false.meta.json (a `store: false` run still continues),
    captured 2026-10-09."""
    first = create(client, effort='fast', store=False).json()
    assert client.get(f'/v1/agent/{first["id"]}').status_code == 404  # not retrievable ...
    second = create(client, effort='fast', previous_response_id=first['id'])
    assert second.status_code == 200, second.text  # ... but it can be continued
    assert second.json()['previous_response_id'] is None


def test_a_structured_output_schema_with_a_bad_root_is_a_400(client: httpx2.Client):
    """Live fact: cfdude/mcp-perplexity-pro tests/fixtures/agent_structured_bad_root_400.json (and its .meta.json
    for the request), captured 2026-10-09: typed `invalid_parameter`, unlike the validation failures."""
    schema = {'type': 'bogus', 'properties': 42}
    body = {'type': 'json_schema', 'json_schema': {'name': 'x', 'schema': schema}}
    assert error(create(client, effort='fast', response_format=body), 400) == {
        'message': 'json_schema.schema must have a root type of \'object\' (got type="bogus"). Wrap your data in an '
        "object property (e.g. {'type': 'object', 'properties': {'items': {'type': 'array', 'items': ...}}}).",
        'type': 'invalid_parameter',
        'code': 400,
    }


@pytest.mark.parametrize(
    'schema',
    [
        {'type': 'object', 'properties': {'a': {'type': 'bogus'}}},
        {'type': 'object', 'properties': {'a': {'type': 'array', 'items': {'type': 'text'}}}},
        {'type': 'object', 'properties': {'a': {'anyOf': [{'type': 'string'}, {'type': 'str'}]}}},
        {'type': 'object', '$defs': {'A': {'type': ['string', 'date']}}},
    ],
)
def test_a_structured_output_schema_with_a_bad_inner_type_is_a_400(client: httpx2.Client, schema: dict[str, Any]):
    """Live fact: cfdude/mcp-perplexity-pro tests/fixtures/agent_structured_bad_inner_400.meta.json, captured
    2026-10-09: "invalid inner schema: generic invalid request"."""
    body = {'type': 'json_schema', 'json_schema': {'name': 'x', 'schema': schema}}
    found = error(create(client, effort='fast', response_format=body), 400)
    assert found == {'message': 'invalid request', 'type': 'invalid_request', 'code': 400}


def test_a_property_named_type_is_not_a_bad_type(client: httpx2.Client):
    """Only schema positions are checked: a property may be called `type`."""
    schema = {'type': 'object', 'properties': {'type': {'type': 'string'}, 'n': {'type': ['integer', 'null']}}}
    body = {'type': 'json_schema', 'json_schema': {'name': 'x', 'schema': schema}}
    assert create(client, effort='fast', response_format=body).status_code == 200


def test_get_of_a_malformed_id_is_a_400_and_of_an_unknown_id_a_404(client: httpx2.Client):
    """Live facts: cfdude/mcp-perplexity-pro tests/fixtures/agent_get_malformed_400.json,
    agent_get_unknown_404.meta.json and agent_get_store_false_404.json, captured 2026-10-09."""
    assert error(client.get('/v1/agent/not-an-id'), 400) == {
        'message': 'invalid response id',
        'type': 'invalid_request',
        'code': 400,
    }
    assert error(client.get('/v1/agent/resp_12345'), 400)['message'] == 'invalid response id'
    missing = {'message': 'resource not found', 'type': 'not_found', 'code': 404}
    assert error(client.get(f'/v1/agent/{UNKNOWN_ID}'), 404) == missing
    unstored = create(client, effort='fast', store=False).json()['id']
    assert error(client.get(f'/v1/agent/{unstored}'), 404) == missing


@pytest.mark.parametrize('response_id', [UNKNOWN_ID, 'not-an-id', 'finished'])
def test_cancel_of_an_unknown_malformed_or_finished_id_is_the_same_400(client: httpx2.Client, response_id: str):
    """Live facts: cfdude/mcp-perplexity-pro tests/fixtures/agent_cancel_unknown_400.json,
    agent_cancel_malformed_400.meta.json and agent_cancel_terminal_400.meta.json, captured 2026-10-09: one
    (misleading) answer for all three."""
    if response_id == 'finished':
        response_id = create(client, effort='fast').json()['id']
    assert error(client.post(f'/v1/agent/{response_id}/cancel'), 400) == {
        'message': 'the run is already terminal and cannot be cancelled',
        'type': 'invalid_request',
        'code': 400,
    }


# --- 3. the model list ----------------------------------------------------------------------------------------------


def test_models_need_a_key(emu: Emulator):
    """Live fact: cfdude/mcp-perplexity-pro tests/fixtures/models_unauthenticated.json, captured 2026-10-09."""
    with httpx2.Client(base_url=emu.base_url) as anonymous:
        assert error(anonymous.get('/v1/models'), 401) == {
            'message': 'Invalid API key provided. Ensure your API key is correct and active.',
            'type': 'invalid_api_key',
            'code': 401,
        }


def test_models_are_the_live_list_with_live_prices(client: httpx2.Client):
    """Live fact: cfdude/mcp-perplexity-pro tests/fixtures/models.json, captured 2026-10-09 (the 52 models and their
    prices are kept as facts in `pydantic_ai_perplexity._base.prices`)."""
    data = client.get('/v1/models').json()['data']
    assert len(data) == 52 == len(LIVE_MODELS)
    assert [m['id'] for m in data] == [m.id for m in LIVE_MODELS]
    by_id = {m['id']: m for m in data}
    assert by_id['openai/gpt-5.5']['pricing'] == {
        'input': 5,
        'output': 30,
        'cache_read': 0.5,
        'unit': 'usd_per_1m_tokens',
    }
    assert by_id['openai/gpt-6-luna']['pricing'] == {
        'input': 0.1,
        'output': 0.5,
        'cache_read': 0.01,
        'cache_write': 0.125,
        'unit': 'usd_per_1m_tokens',
    }
    assert all(m['object'] == 'model' and m['owned_by'] == m['id'].split('/')[0] for m in data)
    assert 'xai/grok-4-1-fast-non-reasoning' not in by_id


@pytest.mark.parametrize('effort', ['fast', 'low', 'medium'])
def test_fast_low_and_medium_are_answered_by_gpt_6_luna(client: httpx2.Client, effort: str):
    """Live facts: cfdude/mcp-perplexity-pro tests/fixtures/agent_fast.json, agent_low_fetch_url.json and
    agent_background_completed.json (a `medium` run), captured 2026-10-09: each final `model` is
    `openai/gpt-6-luna`."""
    assert create(client, effort=effort).json()['model'] == 'openai/gpt-6-luna'


# --- 5. and 6. running and cancelled runs ---------------------------------------------------------------------------


def test_a_running_retrieve_shows_the_effort_and_the_items_found_so_far(client: httpx2.Client):
    """Live facts: cfdude/mcp-perplexity-pro tests/fixtures/agent_background_submit_medium.json and
    agent_background_poll_pending.json (queued: `output: []`, `model` the effort's name) and
    agent_background_in_progress.json (running: the search and fetch items so far), captured 2026-10-09."""
    queued = create(
        client, effort='medium', background=True, input='Vector database pricing [[emulate: duration=3000]]'
    )
    run = queued.json()
    assert (run['status'], run['model'], run['output'], run['usage']) == ('queued', 'medium', [], None)
    rid = run['id']
    seen = poll(
        lambda: client.get(f'/v1/agent/{rid}').json(),
        lambda r: r['status'] in TERMINAL or any(i['type'] == 'search_results' for i in r['output']),
    )
    assert seen['status'] == 'in_progress' and seen['model'] == 'medium' and seen['usage'] is None
    assert {i['type'] for i in seen['output']} <= {'search_results', 'fetch_url_results'}
    client.post(f'/v1/agent/{rid}/cancel')


def test_a_cancelled_run_keeps_what_it_found(client: httpx2.Client):
    """Live facts: cfdude/mcp-perplexity-pro tests/fixtures/agent_cancel_accepted.json (the cancel's answer) and
    agent_background_cancelled.json (the cancelled run), captured 2026-10-09."""
    run = create(client, effort='medium', background=True, input='Rust crates statistics [[emulate: duration=3000]]')
    rid = run.json()['id']
    seen = poll(
        lambda: client.get(f'/v1/agent/{rid}').json(),
        lambda r: r['status'] in TERMINAL or any(i['type'] == 'search_results' for i in r['output']),
    )
    assert seen['status'] == 'in_progress'
    ack = client.post(f'/v1/agent/{rid}/cancel')
    assert ack.status_code == 200 and ack.json() == {'response_id': rid, 'status': 'cancelling'}
    done = wait_terminal(client, rid)
    assert done['status'] == 'cancelled'
    assert done['error'] == {'code': 'cancelled', 'message': 'cancelled', 'type': 'cancelled'}
    assert done['incomplete_details'] == {'reason': 'cancelled'}
    assert done['usage'] is None and done['completed_at'] is None and done['model'] == 'medium'
    assert done['output'][: len(seen['output'])] == seen['output']
    assert done['output'] and {i['type'] for i in done['output']} <= {'search_results', 'fetch_url_results'}


# --- 7. headers -----------------------------------------------------------------------------------------------------


def test_answers_carry_the_live_rate_limit_headers_and_the_run_id_as_request_id(client: httpx2.Client):
    """Live fact: cfdude/mcp-perplexity-pro tests/fixtures/agent_response_headers.json (and its .meta.json: "only
    x-request-id ... (response id minus the resp_ prefix)"), captured 2026-10-09."""
    created = create(client, effort='fast')
    run_id = created.json()['id']
    retrieved = client.get(f'/v1/agent/{run_id}')
    for response in (created, retrieved):
        headers = response.headers
        assert headers['x-request-id'] == run_id.removeprefix('resp_')
        assert 'request-id' not in headers
        limit, remaining, used = (int(headers[f'x-ratelimit-{k}']) for k in ('limit', 'remaining', 'used'))
        assert limit == 50 and used >= 1 and remaining == limit - used
        assert int(headers['x-ratelimit-reset']) > 1_700_000_000  # Unix seconds
    other = client.get('/v1/models')
    assert {f'x-ratelimit-{k}' for k in ('limit', 'remaining', 'reset', 'used')} <= set(other.headers)


def test_the_bucket_fills_in_emulated_time():
    """With a slow clock the bucket shows each request used; the emulator still serves them (only the 429 fault
    refuses)."""
    with (
        Emulator(time_scale=10) as emu,
        httpx2.Client(base_url=emu.base_url, headers={'Authorization': f'Bearer {emu.api_key}'}) as c,
    ):
        used = [int(c.get('/v1/models').headers['x-ratelimit-used']) for _ in range(3)]
        assert used == [1, 2, 3]
        assert c.get('/v1/models').headers['x-ratelimit-remaining'] == '46'


# --- 8. billing -----------------------------------------------------------------------------------------------------


def test_a_fetch_is_billed_with_the_tokens_of_the_model_that_read_the_page(client: httpx2.Client):
    """Live fact: cfdude/mcp-perplexity-pro tests/fixtures/agent_low_fetch_url.json, captured 2026-10-09:
    `tool_calls_details.fetch_url = {invocation, cost_usd, token_usage: [...]}`, read by `openai/gpt-5.6-luna`,
    about $0.0035 a page; the input spend is cache creation/read with `input_cost: 0`."""
    tools = [{'type': 'fetch_url', 'max_urls': 2}, {'type': 'web_search'}]
    usage = create(client, effort='low', tools=tools, input='How do heat pumps work?').json()['usage']
    fetch = usage['tool_calls_details']['fetch_url']
    assert set(fetch) == {'invocation', 'cost_usd', 'token_usage'} and fetch['invocation'] >= 1
    for read in fetch['token_usage']:
        assert read['model'] == 'openai/gpt-5.6-luna'
        assert set(read) == {'model', 'input_tokens', 'input_tokens_details', 'output_tokens', 'output_tokens_details'}
        assert read['input_tokens_details']['cache_creation_input_tokens'] == read['input_tokens'] - 3
    assert 0.003 < fetch['cost_usd'] / fetch['invocation'] < 0.004
    cost = usage['cost']
    assert cost['input_cost'] == 0 and cost['cache_creation_cost'] > 0
    assert cost['tool_calls_cost_details']['fetch_url'] == fetch['cost_usd']
    assert usage['input_tokens_details']['cached_tokens'] == usage['input_tokens_details']['cache_read_input_tokens']


@pytest.mark.parametrize('effort', ['fast', 'medium'])
def test_a_search_is_billed_a_tenth_of_a_cent(client: httpx2.Client, effort: str):
    """Live facts: cfdude/mcp-perplexity-pro tests/fixtures/agent_fast.json (one search, $0.001) and
    agent_background_completed.json (a `medium` run, three searches, $0.003), captured 2026-10-09."""
    usage = create(client, effort=effort).json()['usage']
    search = usage['tool_calls_details']['search_web']
    assert set(search) == {'invocation', 'cost_usd'}
    assert search['cost_usd'] == round(search['invocation'] * 0.001, 5)
    assert usage['cost']['tool_calls_cost_details']['search_web'] == search['cost_usd']
