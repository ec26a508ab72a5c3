"""Strict validation, limits, authentication and the endpoints that only answer errors."""

from __future__ import annotations

import uuid
from typing import Any

import httpx2
import pytest

from pydantic_ai_perplexity.emulator import Emulator

OK: dict[str, Any] = {'input': 'What is the EU AI Act?', 'effort': 'fast'}


def error_of(response: httpx2.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers['content-type'].startswith('application/json')
    uuid.UUID(response.headers['x-request-id'])  # a bare UUID, as the live API sends
    body = response.json()
    assert set(body) == {'error'}
    error = body['error']
    assert error['code'] == status and isinstance(error['message'], str) and error['type']
    return error


@pytest.mark.parametrize(
    ('body', 'field'),
    [
        ({**OK, 'search_mode': 'web'}, 'search_mode'),
        ({**OK, 'tools': [{'type': 'web_search', 'filters': {'search_domain_filter': ['a.com'], 'foo': 1}}]}, 'foo'),
        ({**OK, 'tools': [{'type': 'web_search', 'user_location': {'country': 'DE', 'zip': '10115'}}]}, 'zip'),
        ({**OK, 'tools': [{'type': 'web_search', 'max_result': 3}]}, 'max_result'),
        ({**OK, 'tools': [{'type': 'fetch_url', 'max_url': 3}]}, 'max_url'),
        ({**OK, 'tools': [{'type': 'function', 'name': 'f', 'function': {}}]}, 'function'),
        (
            {**OK, 'tools': [{'type': 'mcp', 'server_label': 's', 'server_url': 'https://x.example', 'token': 't'}]},
            'token',
        ),
        ({**OK, 'response_format': {'type': 'json_schema', 'json_schema': {'name': 'n', 'schema': {}, 'x': 1}}}, 'x'),
        ({**OK, 'reasoning': {'effort': 'low', 'summary': 'auto'}}, 'summary'),
        ({**OK, 'text': {'format': {'type': 'text'}}}, 'format'),
        ({**OK, 'input': [{'role': 'user', 'content': 'hi', 'name': 'me'}]}, 'name'),
        ({**OK, 'input': [{'role': 'user', 'content': [{'type': 'input_text', 'text': 'hi', 'lang': 'en'}]}]}, 'lang'),
        ({**OK, 'input': [{'type': 'function_call_output', 'call_id': 'c', 'output': 'x', 'extra': 1}]}, 'extra'),
        (
            {**OK, 'input': [{'type': 'function_call', 'call_id': 'c', 'name': 'f', 'arguments': '{}', 'id': 'fc_1'}]},
            'id',
        ),
        (
            {
                **OK,
                'input': [
                    {
                        'role': 'user',
                        'content': [{'type': 'input_image', 'image_url': 'https://x/y.png', 'detail': 'low'}],
                    }
                ],
            },
            'detail',
        ),
        ({**OK, 'stream_options': {'include_usage': True, 'chunk': 1}}, 'chunk'),
        ({**OK, 'profile': {'type': 'custom', 'id': 'p', 'owner': 'me'}}, 'owner'),
    ],
)
def test_unknown_fields_anywhere_are_rejected_with_their_name(client: httpx2.Client, body: dict[str, Any], field: str):
    error = error_of(client.post('/v1/agent', json=body), 400)
    assert error == {
        'message': f'invalid request body: json: unknown field "{field}"',
        'type': 'invalid_request',
        'code': 400,
        'param': field,
    }


def test_every_documented_field_is_accepted(client: httpx2.Client, emu: Emulator):
    body = {
        'input': [
            {'role': 'system', 'content': 'Be brief.'},
            {'type': 'message', 'role': 'user', 'content': [{'type': 'input_text', 'text': 'EU AI Act timeline'}]},
            {'type': 'function_call', 'call_id': 'c1', 'name': 'lookup', 'arguments': '{}'},
            {'type': 'function_call_output', 'call_id': 'c1', 'output': [{'type': 'input_text', 'text': 'ok'}]},
            {'type': 'reasoning', 'summary': [{'type': 'summary_text', 'text': 'thinking'}]},
            {'type': 'mcp_list_tools', 'server_label': 'docs', 'tools': [{'name': 't', 'input_schema': {}}]},
            {'type': 'mcp_call', 'id': 'call_1', 'server_label': 'docs', 'name': 't', 'arguments': '{}', 'output': 'x'},
            {'role': 'user', 'content': [{'type': 'input_file', 'file_url': 'https://x/a.pdf', 'filename': 'a.pdf'}]},
            {'role': 'user', 'content': [{'type': 'input_image', 'image_url': 'data:image/png;base64,AAAA'}]},
            {'role': 'user', 'content': 'And the codes of practice?'},
        ],
        'effort': 'low',
        'preset': 'pro-search',
        'instructions': 'Cite every claim.',
        'max_steps': 5,
        'max_output_tokens': 2048,
        'reasoning': {'effort': 'low'},
        'response_format': {
            'type': 'json_schema',
            'json_schema': {'name': 'answer_v1', 'schema': {'type': 'object'}, 'strict': True},
        },
        'tools': [
            {
                'type': 'web_search',
                'filters': {'search_domain_filter': ['europa.eu', '-reddit.com'], 'search_recency_filter': 'month'},
                'search_context_size': 'medium',
                'user_location': {'country': 'DE', 'city': 'Berlin'},
            },
            {'type': 'fetch_url', 'max_urls': 3},
            {'type': 'function', 'name': 'lookup', 'parameters': {'type': 'object'}, 'strict': False},
            {'type': 'mcp', 'server_label': 'docs', 'server_url': 'https://mcp.example.com/mcp', 'headers': {'a': 'b'}},
        ],
        'tool_choice': {'type': 'web_search'},
        'store': True,
        'prompt_cache_key': 'k',
        'language_preference': 'en',
        'temperature': 0.2,
        'top_p': 0.9,
        'service_tier': 'auto',
        'step_budget_reminder': False,
        'max_tool_calls': 10,
        'metadata': {'ticket': '42'},
        'parallel_tool_calls': True,
        'truncation': 'auto',
        'stream_options': {'include_usage': True},
    }
    response = client.post('/v1/agent', json=body)
    assert response.status_code == 200, response.text
    data = response.json()
    assert data['status'] == 'completed' and data['metadata'] == {'ticket': '42'}
    assert all('headers' not in t and 'authorization' not in t for t in data['tools'])


@pytest.mark.parametrize(
    ('body', 'status', 'type_', 'param'),
    [
        ({'effort': 'fast'}, 400, 'invalid_request', 'input'),
        ({'input': 'q'}, 400, 'invalid_request', 'model'),
        ({**OK, 'max_steps': '5'}, 400, 'invalid_request', 'max_steps'),
        ({**OK, 'tools': [{'type': 'hammer'}]}, 400, 'invalid_request', 'type'),
        ({**OK, 'tools': [{'name': 'f'}]}, 400, 'invalid_request', 'type'),
        ({**OK, 'metadata': {'k': 1}}, 400, 'invalid_request', 'k'),
        ({**OK, 'input': [{'type': 'image', 'url': 'x'}]}, 400, 'invalid_request', 'type'),
    ],
)
def test_bad_values_are_rejected_with_type_and_param(
    client: httpx2.Client, body: dict[str, Any], status: int, type_: str, param: str
):
    error = error_of(client.post('/v1/agent', json=body), status)
    assert (error['type'], error.get('param')) == (type_, param), error


@pytest.mark.parametrize(
    ('body', 'message'),
    [
        ({'input': '   ', 'effort': 'fast'}, 'input cannot be empty'),
        ({**OK, 'models': []}, 'models: List should have at least 1 item'),
        ({**OK, 'models': ['openai/gpt-5.4'] * 6}, 'models: List should have at most 5 items'),
        ({**OK, 'max_steps': 0}, 'max steps must be at least 1'),
        ({**OK, 'max_steps': 101}, 'max steps must be at most 100'),
        ({**OK, 'max_output_tokens': 0}, 'max output tokens must be at least 1'),
        ({**OK, 'temperature': 3}, 'temperature must be at most 2'),
        ({**OK, 'effort': 'ultra'}, 'invalid effort "ultra"'),
        ({**OK, 'effort': 'fast-search'}, 'invalid effort "fast-search"'),
        ({'input': 'q', 'preset': 'turbo'}, 'invalid preset "turbo"'),
        ({'input': 'q', 'model': 'sonar'}, 'model "sonar" is not supported'),
        ({'input': 'q', 'model': 'openai/gpt-99'}, 'model "openai/gpt-99" is not supported'),
        ({'input': 'q', 'models': ['openai/gpt-5.4', 'nope/x']}, 'model "nope/x" is not supported'),
        ({'input': 'q', 'model': 'anthropic/claude-opus-4-7'}, 'max_output_tokens is required'),
        ({**OK, 'tools': [{'type': 'function', 'name': 'web_search'}]}, 'function name "web_search" is reserved'),
        ({**OK, 'tools': [{'type': 'function', 'name': 'sandbox'}]}, 'function name "sandbox" is reserved'),
        ({**OK, 'response_format': {'type': 'regex'}}, 'type must be one of: json_schema'),
        ({**OK, 'response_format': {'type': 'json_schema'}}, 'response_format.json_schema is required'),
        (
            {**OK, 'response_format': {'type': 'json_schema', 'json_schema': {'name': 'a b', 'schema': {}}}},
            'response_format.json_schema.name: String should match pattern',
        ),
        ({**OK, 'metadata': {f'k{i}': 'v' for i in range(17)}}, 'metadata can have at most 16 keys'),
        ({**OK, 'metadata': {'k' * 65: 'v'}}, 'metadata keys can be at most 64 characters'),
        ({**OK, 'metadata': {'k': 'v' * 513}}, 'metadata values can be at most 512 characters'),
        ({**OK, 'tool_choice': 'always'}, 'tool choice must be one of: none auto required'),
    ],
)
def test_bad_values_are_validation_failures(client: httpx2.Client, body: dict[str, Any], message: str):
    """Live fact: cfdude/mcp-perplexity-pro tests/fixtures/agent_max_steps_zero_400.json (and the other
    `validation failed` captures), captured 2026-10-09: a bad value is 400 `invalid_request`, "validation failed:
    <what>", with no `param`."""
    error = error_of(client.post('/v1/agent', json=body), 400)
    assert error['type'] == 'invalid_request' and 'param' not in error, error
    assert error['message'].startswith(f'validation failed: {message}'), error


def test_anthropic_models_require_max_output_tokens_with_the_live_message(client: httpx2.Client):
    """Live fact: cfdude/mcp-perplexity-pro tests/fixtures/agent_anthropic_no_max_output_tokens_400.json, captured
    2026-10-09."""
    error = error_of(client.post('/v1/agent', json={'input': 'q', 'model': 'anthropic/claude-sonnet-4-6'}), 400)
    assert error == {
        'message': 'validation failed: max_output_tokens is required when using Anthropic models',
        'type': 'invalid_request',
        'code': 400,
    }
    ok = client.post('/v1/agent', json={'input': 'q', 'model': 'anthropic/claude-sonnet-4-6', 'max_output_tokens': 500})
    assert ok.status_code == 200


@pytest.mark.parametrize('effort', ['fast', 'low', 'medium@2026-10-16.0', 'xhigh@2026-01-01.3'])
def test_efforts_and_pins_are_accepted(client: httpx2.Client, effort: str):
    response = client.post('/v1/agent', json={'input': 'q', 'effort': effort, 'background': True})
    assert response.status_code == 200 and response.json()['effort'] == effort
    client.post(f'/v1/agent/{response.json()["id"]}/cancel')


@pytest.mark.parametrize(
    ('preset', 'effort'),
    [('fast-search', 'fast'), ('pro-search', 'low'), ('deep-research', 'medium'), ('advanced-deep-research', 'high')],
)
def test_legacy_presets_map_to_efforts_and_effort_wins(client: httpx2.Client, preset: str, effort: str):
    body = {'input': 'q', 'preset': preset, 'background': True}
    if effort in ('high',):
        body['max_output_tokens'] = 1000
    response = client.post('/v1/agent', json=body).json()
    assert response['effort'] == effort and response['model'] == effort
    client.post(f'/v1/agent/{response["id"]}/cancel')
    both = client.post('/v1/agent', json={'input': 'q', 'preset': preset, 'effort': 'fast'}).json()
    assert both['effort'] == 'fast' and both['model'] == 'openai/gpt-6-luna'  # per the newest live capture


@pytest.mark.parametrize(
    ('filters', 'type_', 'param'),
    [
        (
            {'search_domain_filter': [f'd{i}.com' for i in range(21)]},
            'invalid_search_domain_filter',
            'search_domain_filter',
        ),
        ({'search_domain_filter': ['https://a.com/x']}, 'invalid_search_domain_filter', 'search_domain_filter'),
        ({'search_recency_filter': 'decade'}, 'invalid_request', None),
        ({'search_after_date_filter': '2026-01-31'}, 'invalid_date_format', 'search_after_date_filter'),
        ({'last_updated_before_filter': '13/01/2026'}, 'invalid_date_format', 'last_updated_before_filter'),
        (
            {'search_recency_filter': 'week', 'search_after_date_filter': '1/31/2026'},
            'invalid_request',
            'search_recency_filter',
        ),
    ],
)
def test_web_search_filters_are_checked(client: httpx2.Client, filters: dict[str, Any], type_: str, param: str | None):
    body = {**OK, 'tools': [{'type': 'web_search', 'filters': filters}]}
    error = error_of(client.post('/v1/agent', json=body), 400)
    assert (error['type'], error.get('param')) == (type_, param)


def test_twenty_domains_and_short_dates_are_fine(client: httpx2.Client):
    filters = {'search_domain_filter': [f'd{i}.com' for i in range(20)], 'search_after_date_filter': '3/1/2025'}
    response = client.post('/v1/agent', json={**OK, 'tools': [{'type': 'web_search', 'filters': filters}]})
    assert response.status_code == 200


def mcp(label: str = 's', url: str = 'https://mcp.example.com/mcp') -> dict[str, Any]:
    return {'type': 'mcp', 'server_label': label, 'server_url': url}


@pytest.mark.parametrize(
    ('tools', 'message'),
    [
        ([mcp(f's{i}') for i in range(17)], 'at most 16 mcp tools are allowed, got 17'),
        ([mcp('bad label')], 'invalid server_label "bad label"'),
        ([mcp('x' * 65)], f'invalid server_label "{"x" * 65}"'),
        ([mcp('a'), mcp('a')], 'duplicate server_label "a"'),
        ([mcp(url='http://mcp.example.com/mcp')], 'invalid server_url for mcp server "s"'),
        ([mcp(url='ftp://mcp.example.com')], 'invalid server_url for mcp server "s"'),
    ],
)
def test_mcp_tools_are_checked(client: httpx2.Client, tools: list[dict[str, Any]], message: str):
    error = error_of(client.post('/v1/agent', json={**OK, 'tools': tools}), 400)
    assert error['type'] == 'invalid_request' and error['message'].startswith(f'validation failed: {message}')


@pytest.mark.parametrize('url', ['http://127.0.0.1:9/mcp', 'http://localhost/mcp', 'http://[::1]:8000/mcp'])
def test_plain_http_mcp_servers_are_allowed_on_loopback_only(client: httpx2.Client, url: str):
    assert client.post('/v1/agent', json={**OK, 'tools': [mcp(url=url)]}).status_code == 200


def test_invalid_json_and_non_object_bodies(client: httpx2.Client):
    error = error_of(client.post('/v1/agent', content=b'{"input": ', headers={'content-type': 'application/json'}), 400)
    assert error['type'] == 'invalid_request' and error['message'].startswith('invalid request body')
    error = error_of(client.post('/v1/agent', json=['input']), 400)
    assert error['type'] == 'invalid_request'


def test_bodies_over_32_mib_are_refused_with_413(client: httpx2.Client, emu: Emulator):
    big = b'{"input": "' + b'a' * (32 * 1024 * 1024) + b'", "effort": "fast"}'
    error = error_of(client.post('/v1/agent', content=big, headers={'content-type': 'application/json'}), 413)
    assert error['type'] == 'payload_too_large'
    error = error_of(client.post('/search', content=big, headers={'content-type': 'application/json'}), 413)
    # chunked (no Content-Length): refused while reading, without holding more than the limit
    error = error_of(
        client.post('/v1/agent', content=iter([big[:1024], big[1024:]]), headers={'content-type': 'application/json'}),
        413,
    )
    assert error['type'] == 'payload_too_large'
    assert client.post('/v1/agent', json=OK).status_code == 200  # and the server keeps serving


def test_a_key_is_required_everywhere(emu: Emulator):
    """Live fact: cfdude/mcp-perplexity-pro tests/fixtures/models_unauthenticated.json, captured 2026-10-09: even
    `/v1/models` needs a key, and a missing key is 401 `invalid_api_key`."""
    live = {
        'message': 'Invalid API key provided. Ensure your API key is correct and active.',
        'type': 'invalid_api_key',
    }
    with httpx2.Client(base_url=emu.base_url) as anonymous:
        for method, path in [
            ('POST', '/v1/agent'),
            ('GET', '/v1/responses/resp_x'),
            ('POST', '/search'),
            ('GET', '/x'),
            ('GET', '/v1/models'),
        ]:
            error = error_of(anonymous.request(method, path, json=OK), 401)
            assert error == {**live, 'code': 401}
        wrong = anonymous.post('/v1/agent', json=OK, headers={'Authorization': 'Bearer pplx-wrong'})
        assert error_of(wrong, 401) == {**live, 'code': 401}
        basic = anonymous.post('/v1/agent', json=OK, headers={'Authorization': f'Basic {emu.api_key}'})
        error_of(basic, 401)
        models = anonymous.get('/v1/models', headers={'Authorization': f'Bearer {emu.api_key}'})
        assert models.status_code == 200 and models.json()['object'] == 'list'
    assert emu.requests[-1].path == '/v1/models' and emu.requests[-1].status == 200


def test_the_key_is_never_echoed_or_recorded(emu: Emulator, caplog: pytest.LogCaptureFixture):
    caplog.set_level('DEBUG')
    with httpx2.Client(base_url=emu.base_url) as c:
        c.post('/v1/agent', json=OK, headers={'Authorization': f'Bearer {emu.api_key}x'})
        good = c.post(
            '/v1/agent',
            json={**OK, 'input': f'my key is {emu.api_key}'},
            headers={'Authorization': f'Bearer {emu.api_key}'},
        )
    assert good.status_code == 200
    assert emu.api_key not in good.text
    assert emu.api_key not in repr(emu) and emu.api_key not in caplog.text
    assert all(emu.api_key not in repr(r) for r in emu.requests)


def test_retired_sonar_endpoints_answer_403(client: httpx2.Client):
    """Live fact: cfdude/mcp-perplexity-pro tests/fixtures/async_chat_completions_403.json and
    chat_completions_403.meta.json, captured 2026-10-09: 403 `chat_completions_not_available`."""
    live = {
        'message': 'Sonar is now the Agent API. Use /v1/responses instead of /v1/sonar. '
        'Migrate here: https://docs.perplexity.ai/docs/agent-api/migrate-from-sonar/overview',
        'type': 'chat_completions_not_available',
        'code': 403,
    }
    for method, path in [
        ('POST', '/chat/completions'),
        ('POST', '/v1/chat/completions'),
        ('POST', '/v1/sonar'),
        ('POST', '/async/chat/completions'),
        ('POST', '/v1/async/sonar'),
        ('GET', '/async/chat/completions'),
        ('GET', '/async/chat/completions/abc'),
    ]:
        assert error_of(client.request(method, path, json={'model': 'sonar', 'messages': []}), 403) == live


def test_unknown_paths_and_methods(client: httpx2.Client):
    assert error_of(client.get('/v2/agent'), 404)['type'] == 'not_found'
    assert error_of(client.get('/v1/agent'), 405)['type'] == 'method_not_allowed'
    assert error_of(client.delete('/v1/responses/resp_x'), 405)['type'] == 'method_not_allowed'


@pytest.mark.parametrize(
    ('body', 'param'),
    [
        ({}, 'query'),
        ({'query': 'q', 'max_results': 0}, 'max_results'),
        ({'query': 'q', 'search_domain_filter': [f'd{i}.com' for i in range(21)]}, 'search_domain_filter'),
        ({'query': 'q', 'search_recency_filter': 'decade'}, 'search_recency_filter'),
        ({'query': 'q', 'search_before_date_filter': '2026/01/01'}, 'search_before_date_filter'),
        (
            {'query': 'q', 'search_recency_filter': 'day', 'search_after_date_filter': '1/1/2026'},
            'search_recency_filter',
        ),
        ({'query': 'q', 'country': 'Germany'}, 'country'),
        ({'query': 'q', 'search_language_filter': ['english']}, 'search_language_filter'),
        ({'query': 'q', 'search_mode': 'news'}, 'search_mode'),
        ({'query': 'q', 'effort': 'fast'}, 'effort'),
        ({'query': ''}, 'query'),
        ({'query': ['a'] * 11}, 'query'),
        ({'query': 5}, 'query'),
    ],
)
def test_search_validation_is_a_fastapi_422(client: httpx2.Client, body: dict[str, Any], param: str):
    """The Search API is a FastAPI service: its OpenAPI (api-evangelist/perplexity, `/search`) answers 422 with
    `HTTPValidationError` = `{"detail": [{"loc", "msg", "type"}]}`, not the Agent API's 400 envelope."""
    response = client.post('/search', json=body)
    assert response.status_code == 422, response.text
    detail = response.json()['detail']
    assert detail and all({'loc', 'msg', 'type'} <= set(entry) for entry in detail)
    assert detail[0]['loc'][0] == 'body' and param in detail[0]['loc'], detail


def test_search_coerces_numbers_clamps_limits_and_takes_ten_rewordings(client: httpx2.Client):
    """The search SDK guide (perplexityai/api-platform-developers, skills/pplx-search-sdk/references/search.md):
    "the server silently clamps oversized values instead of rejecting them", "up to 10 reformulation variants";
    FastAPI's lax integers take `5.0`."""
    coerced = client.post('/search', json={'query': 'EU AI Act', 'max_results': 2.0})
    assert coerced.status_code == 200 and len(coerced.json()['results']) == 2
    clamped = client.post('/search', json={'query': 'EU AI Act', 'max_results': 500, 'max_tokens': 5_000_000})
    assert clamped.status_code == 200 and 1 <= len(clamped.json()['results']) <= 20
    ten = client.post('/search', json={'query': ['EU AI Act'] + [f'AI Act rules {i}' for i in range(9)]})
    assert ten.status_code == 200 and ten.json()['results']
    half = client.post('/search', json={'query': 'EU AI Act', 'max_results': 2.5})
    assert half.status_code == 422  # a fraction is not an integer, even for FastAPI


def test_recency_combines_with_last_updated_filters_but_not_publication_dates(client: httpx2.Client):
    """The search SDK guide: recency "can combine with the last-updated range but NOT with" publication dates."""
    ok = {'search_recency_filter': 'month', 'last_updated_after_filter': '1/1/2026'}
    assert client.post('/search', json={'query': 'EU AI Act', **ok}).status_code == 200
    tools = [{'type': 'web_search', 'filters': ok}]
    assert client.post('/v1/agent', json={**OK, 'tools': tools}).status_code == 200
    bad = {'search_recency_filter': 'month', 'search_before_date_filter': '1/1/2026'}
    error = error_of(client.post('/v1/agent', json={**OK, 'tools': [{'type': 'web_search', 'filters': bad}]}), 400)
    assert error['param'] == 'search_recency_filter' and 'search_before_date_filter' in error['message']


def test_documented_model_ids_are_served_and_a_user_can_add_more(client: httpx2.Client):
    """Ids used by Perplexity's own migration guide and guides that the live `/v1/models` still lists (2026-10-09);
    `Emulator(models=...)` extends the table, a user's model billed at its own prices."""
    ids = {m['id'] for m in client.get('/v1/models').json()['data']}
    documented = {
        'openai/gpt-5.1',
        'openai/gpt-5.2',
        'anthropic/claude-opus-4-6',
        'anthropic/claude-sonnet-4-5',
        'google/gemini-3.1-flash-lite',
        'openai/gpt-6-luna',
    }
    assert documented <= ids
    for model in documented - {'anthropic/claude-opus-4-6', 'anthropic/claude-sonnet-4-5'}:
        assert client.post('/v1/agent', json={'input': 'q', 'model': model}).status_code == 200, model
    with (
        Emulator(time_scale=0, models={'acme/research-1': (1.0, 2.0), 'acme/cached-1': (1.0, 2.0, 0.5, 1.5)}) as emu,
        httpx2.Client(base_url=emu.base_url, headers={'Authorization': f'Bearer {emu.api_key}'}) as c,
    ):
        listed = {m['id']: m['pricing'] for m in c.get('/v1/models').json()['data']}
        assert listed['acme/research-1'] == {
            'input': 1.0,
            'output': 2.0,
            'cache_read': 1.0,
            'unit': 'usd_per_1m_tokens',
        }
        assert listed['acme/cached-1'] == {
            'input': 1.0,
            'output': 2.0,
            'cache_read': 0.5,
            'cache_write': 1.5,
            'unit': 'usd_per_1m_tokens',
        }
        question = 'What does the EU AI Act require of providers of general-purpose models? ' * 10
        run = c.post('/v1/agent', json={'input': question, 'model': 'acme/research-1'}).json()
        usage = run['usage']
        written = usage['input_tokens_details']['cache_creation_input_tokens']
        assert run['model'] == 'acme/research-1' and written > 0
        assert usage['cost']['cache_creation_cost'] == round(written * 1.0 / 1e6, 5)  # no cache_write: input price
    with pytest.raises(ValueError, match='provider/model'):
        Emulator(models={'nameless': (1.0, 1.0)})
    with pytest.raises(ValueError, match='prices'):
        Emulator(models={'acme/x': (1.0,)})


def test_a_blocked_key_is_a_403_forbidden():
    """The migration guide maps both 401 and 403 to `forbidden`; a blocked key is the 403."""
    with (
        Emulator(time_scale=0, api_key='pplx-ok', blocked_keys=['pplx-blocked']) as emu,
        httpx2.Client(base_url=emu.base_url) as c,
    ):
        blocked = c.post('/v1/agent', json=OK, headers={'Authorization': 'Bearer pplx-blocked'})
        assert error_of(blocked, 403)['type'] == 'forbidden'
        assert c.post('/v1/agent', json=OK, headers={'Authorization': 'Bearer pplx-ok'}).status_code == 200


def test_a_405_names_the_allowed_methods(client: httpx2.Client):
    """RFC 9110: a 405 carries `Allow`."""
    response = client.get('/v1/agent')
    assert error_of(response, 405)['type'] == 'method_not_allowed'
    assert response.headers['allow'] == 'POST'
    retrieve = client.delete('/v1/responses/resp_x')
    assert set(retrieve.headers['allow'].replace(' ', '').split(',')) >= {'GET'}


def test_top_logprobs_is_accepted_with_no_effect(client: httpx2.Client):
    """The migration guide: `logprobs`, `top_logprobs`: "Some such fields are accepted but have no effect"."""
    response = client.post('/v1/agent', json={**OK, 'top_logprobs': 5})
    assert response.status_code == 200 and response.json()['top_logprobs'] == 0


def _with(*parts: dict[str, Any]) -> dict[str, Any]:
    content = [{'type': 'input_text', 'text': 'What does this say?'}, *parts]
    return {**OK, 'input': [{'type': 'message', 'role': 'user', 'content': content}]}


@pytest.mark.parametrize(
    ('part', 'message'),
    [
        ({'type': 'input_file'}, 'input_file needs exactly one of file_url and file_data'),
        (
            {'type': 'input_file', 'file_url': 'https://a.example/x.pdf', 'file_data': 'aGk='},
            'input_file needs exactly one of file_url and file_data',
        ),
        ({'type': 'input_file', 'file_url': 'http://a.example/x.pdf'}, 'input_file.file_url must be an https URL'),
        ({'type': 'input_file', 'file_data': 'not base64!'}, 'input_file.file_data must be base64-encoded'),
        ({'type': 'input_image', 'image_url': 'http://a.example/x.png'}, 'input_image.image_url must be an https'),
        ({'type': 'input_image', 'image_url': 'data:text/plain,hi'}, 'input_image.image_url must be an https'),
    ],
)
def test_files_and_images_in_the_input_are_checked(client: httpx2.Client, part: dict[str, Any], message: str):
    """Not captured live: the SDK's `input_file` (`file_url` | `file_data`, `filename`?) and `input_image`
    (`image_url`: https or a data URI) shapes, refused in the words of the captured validation failures."""
    error = error_of(client.post('/v1/agent', json=_with(part)), 400)
    assert error['type'] == 'invalid_request' and error['message'].startswith(f'validation failed: {message}')


@pytest.mark.parametrize(
    ('body', 'words'),
    [
        ({**OK, 'service_tier': 'cheap'}, 'service tier must be one of: auto default flex priority fast'),
        ({**OK, 'reasoning': {'effort': 'huge'}}, 'effort must be one of: none minimal low medium high xhigh max'),
        ({**OK, 'profile': {'type': 'saved', 'id': 'p'}}, 'type must be one of: custom'),
        ({**OK, 'models': ['openai/gpt-5.4'] * 6}, 'models: List should have at most 5 items'),
        ({**OK, 'models': []}, 'models: List should have at least 1 item'),
    ],
)
def test_the_request_options_are_typed_as_the_sdk_types_them(client: httpx2.Client, body: dict[str, Any], words: str):
    """SDK 0.46.1 `ResponsesRequestInput`: `service_tier` and `reasoning.effort` are enums, `profile.type` is
    `custom`, `models` holds 1 to 5 ids; refused as the captured validation failures are."""
    error = error_of(client.post('/v1/agent', json=body), 400)
    assert error['message'] == f'validation failed: {words}' or error['message'].startswith(
        f'validation failed: {words}'
    )


def test_good_files_and_request_options_are_accepted(client: httpx2.Client):
    body = _with(
        {'type': 'input_file', 'file_url': 'https://a.example/report.pdf'},
        {'type': 'input_file', 'file_data': 'aGVsbG8=', 'filename': 'hello.txt'},
        {'type': 'input_image', 'image_url': 'data:image/png;base64,iVBORw0KGgo='},
    )
    body |= {
        'models': ['openai/gpt-5.4', 'openai/gpt-5.5'],
        'service_tier': 'flex',
        'profile': {'type': 'custom', 'id': 'prof_1', 'version': '2'},
        'reasoning': {'effort': 'low'},
        'prompt_cache_key': 'weekly',
    }
    response = client.post('/v1/agent', json=body)
    assert response.status_code == 200, response.text
    data = response.json()
    assert data['service_tier'] == 'flex' and data['model'] == 'openai/gpt-5.4'
    assert data['prompt_cache_key'] == 'weekly' and data['reasoning'] == {'effort': 'low'}
