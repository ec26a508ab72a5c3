"""A recording in the live API's shape, authored here from the facts of the live captures (nothing copied).

Live facts: cfdude/mcp-perplexity-pro tests/fixtures/agent_low_fetch_url.json (a `fetch_url_results` item
`{type, contents: [{url, title, snippet}]}`, a page cited as `[web:0]`, `usage.cost` with `cache_creation_cost` /
`cache_read_cost` and `input_cost: 0`, `usage.tool_calls_details.fetch_url = {invocation, cost_usd, token_usage}`,
`model: "openai/gpt-6-luna"`) and tests/fixtures/agent_response_headers.json (`x-ratelimit-limit`, `-remaining`,
`-reset`, `-used`, and `x-request-id`: the run id without `resp_`), captured 2026-10-09.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

QUESTION = 'What is the EU AI Act?'
EFFORT = 'fast'
RUN_ID = 'resp_5b0f3c1e-7d2a-4e8b-9c61-2f4a8d0e6b37'
MODEL = 'openai/gpt-6-luna'
SEARCHED = [
    ('https://eur-lex.europa.eu/eli/reg/2024/1689/oj', 'Regulation (EU) 2024/1689 (Artificial Intelligence Act)'),
    ('https://artificialintelligenceact.eu/high-level-summary/', 'High-level summary of the AI Act'),
]
FETCHED = ('https://digital-strategy.ec.europa.eu/en/policies/regulatory-framework-ai', 'AI Act | Digital Strategy')
ANSWER = (
    "The EU AI Act is the European Union's regulation on artificial intelligence, adopted in 2024 [1]. "
    'It sorts AI systems by risk and phases in obligations from 2025 on [2][web:0].'
)
HEADERS = {
    'x-ratelimit-limit': '50',
    'x-ratelimit-remaining': '48',
    'x-ratelimit-reset': '1796122400',
    'x-ratelimit-used': '2',
    'x-request-id': RUN_ID.removeprefix('resp_'),
}
USAGE: dict[str, Any] = {
    'input_tokens': 2210,
    'output_tokens': 64,
    'total_tokens': 2274,
    'input_tokens_details': {
        'cache_creation_input_tokens': 1210,
        'cache_read_input_tokens': 1000,
        'cached_tokens': 1000,
    },
    'output_tokens_details': {'reasoning_tokens': 0},
    'tool_calls_details': {
        'search_web': {'invocation': 1, 'cost_usd': 0.001},
        'fetch_url': {
            'invocation': 1,
            'cost_usd': 0.0031,
            'token_usage': [
                {
                    'model': 'openai/gpt-5.6-luna',
                    'input_tokens': 9800,
                    'input_tokens_details': {'cache_creation_input_tokens': 9790, 'cached_tokens': 0},
                    'output_tokens': 150,
                    'output_tokens_details': {'reasoning_tokens': 0},
                }
            ],
        },
    },
    'cost': {
        'currency': 'USD',
        'input_cost': 0,
        'cache_creation_cost': 0.00015,
        'cache_read_cost': 1e-05,
        'output_cost': 3e-05,
        'tool_calls_cost': 0.0041,
        'tool_calls_cost_details': {'search_web': 0.001, 'fetch_url': 0.0031},
        'total_cost': 0.00429,
    },
}


def _final() -> dict[str, Any]:
    results = [
        {'id': i, 'url': url, 'title': title, 'snippet': f'{title}.', 'date': '2024-07-12', 'source': 'web'}
        for i, (url, title) in enumerate(SEARCHED, start=1)
    ]
    return {
        'id': RUN_ID,
        'object': 'response',
        'created_at': 1796122340,
        'completed_at': 1796122346,
        'status': 'completed',
        'background': True,
        'store': True,
        'model': MODEL,
        'error': None,
        'incomplete_details': None,
        'output': [
            {'type': 'search_results', 'queries': [QUESTION], 'results': results},
            {
                'type': 'fetch_url_results',
                'contents': [{'url': FETCHED[0], 'title': FETCHED[1], 'snippet': 'The AI Act is a legal framework.'}],
            },
            {
                'type': 'message',
                'id': 'msg_0c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f',
                'role': 'assistant',
                'status': 'completed',
                'content': [{'type': 'output_text', 'text': ANSWER, 'annotations': []}],
            },
        ],
        'usage': USAGE,
    }


def _events(final: dict[str, Any]) -> list[dict[str, Any]]:
    running = {**final, 'status': 'in_progress', 'model': EFFORT, 'output': [], 'usage': None, 'completed_at': None}
    search, fetched, message = final['output']
    half = len(ANSWER) // 2
    where = {'item_id': message['id'], 'output_index': 2, 'content_index': 0}
    timed: list[tuple[float, dict[str, Any]]] = [
        (0.0, {'type': 'response.created', 'response': running}),
        (0.0, {'type': 'response.in_progress', 'response': running}),
        (0.4, {'type': 'response.reasoning.search_queries', 'queries': [QUESTION], 'thought': 'Searching the web...'}),
        (1.5, {'type': 'response.output_item.done', 'output_index': 0, 'item': search}),
        (2.0, {'type': 'response.reasoning.fetch_url_queries', 'urls': [FETCHED[0]]}),
        (4.0, {'type': 'response.output_item.done', 'output_index': 1, 'item': fetched}),
        (4.5, {'type': 'response.output_item.added', 'output_index': 2, 'item': {**message, 'content': None}}),
        (5.0, {'type': 'response.output_text.delta', **where, 'delta': ANSWER[:half]}),
        (5.5, {'type': 'response.output_text.delta', **where, 'delta': ANSWER[half:]}),
        (5.5, {'type': 'response.output_text.done', **where, 'text': ANSWER}),
        (5.5, {'type': 'response.output_item.done', 'output_index': 2, 'item': message}),
        (6.0, {'type': 'response.completed', 'response': final}),
    ]
    # Sequence numbers are monotonic, not contiguous (the live capture skips some): 2 is skipped here too.
    numbers = [0, 1, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]
    return [{'at': at, 'event': {**event, 'sequence_number': n}} for (at, event), n in zip(timed, numbers, strict=True)]


def as_sent(body: dict[str, Any]) -> dict[str, Any]:
    """`body` as every way in sends it: with the limits of its effort's profile (`pricing.limit_request`)."""
    from pydantic_ai_perplexity._domain.pricing import limit_request

    return limit_request(body)


def live_recording() -> dict[str, Any]:
    """The recording file's content: a `fast` research call as every way in sends it, answered in the live shape."""
    final = _final()
    return {
        'format': 'pydantic-ai-perplexity/recording',
        'version': 1,
        'kind': 'run',
        'recorded_at': '2026-10-09T19:07:20+00:00',
        'request': {
            'body': as_sent({'input': QUESTION, 'effort': EFFORT, 'background': True, 'store': True, 'stream': True})
        },
        'run': {'headers': HEADERS, 'events': _events(final), 'final': final},
    }


def write_live_recording(directory: Path, data: dict[str, Any] | None = None) -> Path:
    """Write `data` (default: `live_recording()`) as `run-live-shape.json` in `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / 'run-live-shape.json'
    path.write_text(json.dumps(data if data is not None else live_recording(), indent=1), encoding='utf-8')
    return path
