"""Response bodies in the shape the live API answered on 2026-10-09, built here (our own values, not copies).

Each builder names the public capture whose shape it follows: cfdude/mcp-perplexity-pro `tests/fixtures/NAME`,
captured 2026-10-09. The facts they encode are listed in docs/emulator.md's table of live facts.
"""

from __future__ import annotations

from typing import Any

CAPTURED = '2026-10-09'


def search_item(first_id: int, *urls: str, query: str = 'q') -> dict[str, Any]:
    """A `search_results` item whose results carry ids from `first_id` on (ids run across batches, from 1)."""
    return {
        'type': 'search_results',
        'queries': [query],
        'results': [
            {'id': first_id + i, 'url': url, 'title': f'Result {first_id + i}', 'snippet': 'found', 'source': 'web'}
            for i, url in enumerate(urls)
        ],
    }


def fetch_item(url: str, title: str = 'Fetched page', snippet: str = '## The page as read') -> dict[str, Any]:
    """A `fetch_url_results` item: `{type, contents: [{url, title, snippet}]}`, no ids (agent_low_fetch_url.json)."""
    return {'type': 'fetch_url_results', 'contents': [{'url': url, 'title': title, 'snippet': snippet}]}


def message(text: str) -> dict[str, Any]:
    """The answer item, with the empty `annotations` live answers carry."""
    return {
        'type': 'message',
        'id': 'msg_1',
        'role': 'assistant',
        'status': 'completed',
        'content': [{'type': 'output_text', 'text': text, 'annotations': []}],
    }


def fetch_usage() -> dict[str, Any]:
    """`usage` of a run that fetched one page, billed as live (agent_low_fetch_url.json): input as cache writes and
    reads with `input_cost: 0`, and `fetch_url` with the tokens of the model that read the page."""
    return {
        'input_tokens': 3000,
        'output_tokens': 80,
        'total_tokens': 3080,
        'input_tokens_details': {
            'cache_creation_input_tokens': 1800,
            'cache_read_input_tokens': 1200,
            'cached_tokens': 1200,
        },
        'output_tokens_details': {'reasoning_tokens': 0},
        'tool_calls_details': {
            'fetch_url': {
                'invocation': 1,
                'cost_usd': 0.0035,
                'token_usage': [
                    {
                        'model': 'openai/gpt-5.6-luna',
                        'input_tokens': 11000,
                        'output_tokens': 200,
                        'input_tokens_details': {'cache_creation_input_tokens': 11000, 'cached_tokens': 0},
                        'output_tokens_details': {'reasoning_tokens': 0},
                    }
                ],
            }
        },
        'cost': {
            'currency': 'USD',
            'input_cost': 0,
            'cache_creation_cost': 0.0002,
            'cache_read_cost': 0.00001,
            'output_cost': 0.00004,
            'tool_calls_cost': 0.0035,
            'tool_calls_cost_details': {'fetch_url': 0.0035},
            'total_cost': 0.00375,
        },
    }


def search_usage(searches: int = 1) -> dict[str, Any]:
    """`usage` of a `fast` run with `searches` searches, billed as live (agent_fast.json): $0.001 per search."""
    return {
        'input_tokens': 3400,
        'output_tokens': 30,
        'total_tokens': 3430,
        'input_tokens_details': {'cache_creation_input_tokens': 1600, 'cache_read_input_tokens': 1800},
        'output_tokens_details': {'reasoning_tokens': 0},
        'tool_calls_details': {'search_web': {'invocation': searches, 'cost_usd': 0.001 * searches}},
        'cost': {
            'currency': 'USD',
            'input_cost': 0,
            'cache_creation_cost': 0.0002,
            'cache_read_cost': 0.00002,
            'output_cost': 0.00002,
            'tool_calls_cost': 0.001 * searches,
            'tool_calls_cost_details': {'search_web': 0.001 * searches},
            'total_cost': 0.00024 + 0.001 * searches,
        },
    }


def run(
    output: list[dict[str, Any]],
    *,
    run_id: str = 'resp_5e0c1f2a-0000-4000-8000-000000000001',
    status: str = 'completed',
    model: str = 'openai/gpt-6-luna',
    usage: dict[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A Response object with the live fields around `output`."""
    return {
        'id': run_id,
        'object': 'response',
        'created_at': 1791572000,
        'completed_at': 1791572010 if status in ('completed', 'failed', 'incomplete') else None,
        'status': status,
        'model': model,
        'background': True,
        'store': True,
        'error': None,
        'incomplete_details': None,
        'previous_response_id': None,
        'service_tier': 'default',
        'output': output,
        'usage': usage,
        **extra,
    }


def running(
    output: list[dict[str, Any]], *, run_id: str = 'resp_5e0c1f2a-0000-4000-8000-000000000002'
) -> dict[str, Any]:
    """An `in_progress` snapshot as a live retrieve shows it: the search and fetch items reached so far, `model` the
    effort's name, no usage (agent_background_in_progress.json)."""
    return run(output, run_id=run_id, status='in_progress', model='medium')


def cancelled(
    output: list[dict[str, Any]], *, run_id: str = 'resp_5e0c1f2a-0000-4000-8000-000000000003'
) -> dict[str, Any]:
    """A cancelled run as live: its output kept, `error {code: cancelled}`, `incomplete_details {reason: cancelled}`,
    `usage: null`, `model` still the effort's name (agent_background_cancelled.json)."""
    return run(
        output,
        run_id=run_id,
        status='cancelled',
        model='medium',
        error={'code': 'cancelled', 'message': 'cancelled', 'type': 'cancelled'},
        incomplete_details={'reason': 'cancelled'},
    )


#: The 400 a live cancel of an unknown, malformed or finished id answers (agent_cancel_unknown_400.json,
#: agent_cancel_malformed_400.meta.json, agent_cancel_terminal_400.meta.json).
CANCEL_TERMINAL_400 = {
    'error': {'message': 'the run is already terminal and cannot be cancelled', 'type': 'invalid_request', 'code': 400}
}
#: The 400 a live GET of a malformed id answers (agent_get_malformed_400.json).
GET_MALFORMED_400 = {'error': {'message': 'invalid response id', 'type': 'invalid_request', 'code': 400}}
#: The 401 of `/v1/models` without a key (models_unauthenticated.json).
MODELS_NO_KEY_401 = {
    'error': {
        'message': 'Invalid API key provided. Ensure your API key is correct and active.',
        'type': 'invalid_api_key',
        'code': 401,
    }
}


def models_listing() -> dict[str, Any]:
    """`/v1/models` as live: each entry with `pricing {input, output, cache_read, cache_write?, unit}` (models.json)."""
    return {
        'object': 'list',
        'data': [
            {
                'id': 'openai/gpt-6-luna',
                'object': 'model',
                'created': 0,
                'owned_by': 'openai',
                'pricing': {
                    'input': 0.1,
                    'output': 0.5,
                    'cache_write': 0.125,
                    'cache_read': 0.01,
                    'unit': 'usd_per_1m_tokens',
                },
            },
            {
                'id': 'openai/gpt-5.4',
                'object': 'model',
                'created': 0,
                'owned_by': 'openai',
                'pricing': {'input': 2.5, 'output': 15, 'cache_read': 0.25, 'unit': 'usd_per_1m_tokens'},
            },
        ],
    }


def rate_limit_headers(
    *, limit: int = 50, remaining: int = 49, reset: int = 1791572841, run_id: str = ''
) -> dict[str, str]:
    """The rate-limit headers of a live answer: counts as decimal strings, `reset` a unix time in seconds, and
    `x-request-id` the run's id without `resp_` (agent_response_headers.json)."""
    headers = {
        'x-ratelimit-limit': str(limit),
        'x-ratelimit-remaining': str(remaining),
        'x-ratelimit-reset': str(reset),
        'x-ratelimit-used': str(limit - remaining),
    }
    if run_id:
        headers['x-request-id'] = run_id.removeprefix('resp_')
    return headers
