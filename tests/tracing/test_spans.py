"""The span trees of research runs, as exported to Logfire (`capfire`), against the emulator."""

from __future__ import annotations

from pathlib import Path

import pytest
from inline_snapshot import snapshot
from logfire.testing import CaptureLogfire

from pydantic_ai_perplexity import AuthenticationError, Researcher
from pydantic_ai_perplexity.emulator import Emulator
from support.tracing import find_span, metric_points, span_tree

pytestmark = pytest.mark.anyio


def researcher_for(emu: Emulator, **kw: object) -> Researcher:
    return Researcher(api_key=emu.api_key, base_url=emu.base_url, **kw)  # type: ignore[arg-type]


async def test_a_fast_run_is_one_research_span_with_usage_cost_and_its_steps(
    emulator: Emulator, capfire: CaptureLogfire
):
    async with researcher_for(emulator, effort='fast') as r:
        result = await r.run('What is the EU AI Act?')
    assert result.done
    assert span_tree(capfire) == snapshot(
        [
            {
                'name': 'perplexity.research',
                'attributes': {
                    'gen_ai.operation.name': 'research',
                    'gen_ai.provider.name': 'perplexity',
                    'gen_ai.request.model': 'fast',
                    'gen_ai.response.id': '<response_id>',
                    'gen_ai.response.model': 'openai/gpt-6-luna',
                    'gen_ai.usage.input_tokens': 549,
                    'gen_ai.usage.output_tokens': 57,
                    'perplexity.answer.chars': 228,
                    'perplexity.answer.time_to_first_token_s': '<float>',
                    'perplexity.cited': 2,
                    'perplexity.cost.input_usd': 2e-05,
                    'perplexity.cost.output_usd': 3e-05,
                    'perplexity.cost.tool_calls_usd': 0.001,
                    'perplexity.cost_usd': 0.00105,
                    'perplexity.effort': 'fast',
                    'perplexity.query': 'What is the EU AI Act?',
                    'perplexity.ratelimit.limit': 50,
                    'perplexity.ratelimit.remaining': '<int>',
                    'perplexity.sources': 4,
                    'perplexity.status': 'completed',
                    'perplexity.steps': 1,
                },
                'events': [
                    {
                        'name': 'perplexity.search',
                        'attributes': {
                            'perplexity.duration_s': '<float>',
                            'perplexity.search.domains': [
                                'reuters.com',
                                'digital-strategy.ec.europa.eu',
                                'euractiv.com',
                                'artificialintelligenceact.eu',
                            ],
                            'perplexity.search.queries': ['What is the EU AI Act?'],
                            'perplexity.search.results': 4,
                        },
                    }
                ],
            }
        ]
    )


async def test_a_streamed_run_shows_each_search_fetch_and_remote_mcp_call(emulator: Emulator, capfire: CaptureLogfire):
    async with researcher_for(emulator) as r:
        result = await r.run('What is the EU AI Act? [[emulate: mcp]]', effort='low', fetch_pages=3)
    assert result.done and result.progress.mcp_calls == 1
    assert span_tree(capfire) == snapshot(
        [
            {
                'name': 'perplexity.research',
                'attributes': {
                    'gen_ai.operation.name': 'research',
                    'gen_ai.provider.name': 'perplexity',
                    'gen_ai.request.model': 'low',
                    'gen_ai.response.id': '<response_id>',
                    'gen_ai.response.model': 'openai/gpt-6-luna',
                    'gen_ai.usage.input_tokens': 729,
                    'gen_ai.usage.output_tokens': 199,
                    'perplexity.answer.chars': 412,
                    'perplexity.answer.time_to_first_token_s': '<float>',
                    'perplexity.cited': 3,
                    'perplexity.cost.input_usd': 4e-05,
                    'perplexity.cost.output_usd': 0.0001,
                    'perplexity.cost.tool_calls_usd': 0.00536,
                    'perplexity.cost_usd': 0.0055,
                    'perplexity.effort': 'low',
                    'perplexity.query': 'What is the EU AI Act? [[emulate: mcp]]',
                    'perplexity.ratelimit.limit': 50,
                    'perplexity.ratelimit.remaining': '<int>',
                    'perplexity.sources': 4,
                    'perplexity.status': 'completed',
                    'perplexity.steps': 4,
                },
                'events': [
                    {
                        'name': 'perplexity.search',
                        'attributes': {
                            'perplexity.duration_s': '<float>',
                            'perplexity.search.domains': [
                                'reuters.com',
                                'digital-strategy.ec.europa.eu',
                                'euractiv.com',
                                'artificialintelligenceact.eu',
                            ],
                            'perplexity.search.queries': ['What is the EU AI Act?'],
                            'perplexity.search.results': 4,
                        },
                    },
                    {
                        'name': 'perplexity.search',
                        'attributes': {
                            'perplexity.duration_s': '<float>',
                            'perplexity.search.domains': ['euractiv.com', 'artificialintelligenceact.eu'],
                            'perplexity.search.queries': ['What is the EU AI Act? latest developments'],
                            'perplexity.search.results': 2,
                        },
                    },
                    {
                        'name': 'perplexity.fetch',
                        'attributes': {
                            'perplexity.duration_s': '<float>',
                            'perplexity.fetch.pages': 1,
                            'perplexity.fetch.urls': [
                                'https://www.reuters.com/technology/eu-ai-act-timeline-2026-09-18/'
                            ],
                        },
                    },
                    {
                        'name': 'perplexity.mcp_call',
                        'attributes': {
                            'gen_ai.tool.name': 'search_documents',
                            'perplexity.duration_s': '<float>',
                            'perplexity.mcp.server_label': 'emulated',
                        },
                    },
                ],
            }
        ]
    )


async def test_a_handed_off_run_is_collected_in_a_span_linked_to_the_one_that_started_it(
    emulator: Emulator, capfire: CaptureLogfire, tmp_path: Path
):
    ledger = tmp_path / 'ledger.sqlite3'
    # A wait of 0 hands off before any step can arrive (one retrieve, whose snapshot has no output yet), so the
    # hand-off span's contents do not depend on how fast the machine is.
    async with researcher_for(emulator, ledger=ledger, wait_seconds=0) as first:
        handoff = await first.run('Survey of heat pumps in Europe [[emulate: duration=200]]', effort='high')
    assert not handoff.done
    async with researcher_for(emulator, ledger=ledger, wait_seconds=30) as second:
        result = await second.collect(handoff.response_id)
    assert result.done
    started = find_span(capfire, 'perplexity.research')
    [link] = find_span(capfire, 'perplexity.collect')['links']
    assert link['context']['trace_id'] == started['context']['trace_id']
    assert link['context']['span_id'] == started['context']['span_id']
    assert span_tree(capfire) == snapshot(
        [
            {
                'name': 'perplexity.research',
                'attributes': {
                    'gen_ai.operation.name': 'research',
                    'gen_ai.provider.name': 'perplexity',
                    'gen_ai.request.model': 'high',
                    'gen_ai.response.id': '<response_id>',
                    'gen_ai.response.model': 'high',
                    'perplexity.cited': 0,
                    'perplexity.effort': 'high',
                    'perplexity.query': 'Survey of heat pumps in Europe [[emulate: duration=200]]',
                    'perplexity.ratelimit.limit': 50,
                    'perplexity.ratelimit.remaining': '<int>',
                    'perplexity.sources': 0,
                    'perplexity.status': 'in_progress',
                    'perplexity.steps': 0,
                },
                'events': [
                    {
                        'name': 'perplexity.handoff',
                        'attributes': {
                            'perplexity.elapsed_s': '<float>',
                            'perplexity.progress': '0 searches, 0 results',
                            'perplexity.status': 'in_progress',
                        },
                    }
                ],
            },
            {
                'name': 'perplexity.collect',
                'attributes': {
                    'gen_ai.operation.name': 'research',
                    'gen_ai.provider.name': 'perplexity',
                    'gen_ai.request.model': 'high',
                    'gen_ai.response.id': '<response_id>',
                    'gen_ai.response.model': 'anthropic/claude-opus-4-7',
                    'gen_ai.usage.input_tokens': 515,
                    'gen_ai.usage.output_tokens': 833,
                    'perplexity.answer.chars': 260,
                    'perplexity.answer.time_to_first_token_s': '<float>',
                    'perplexity.cited': 1,
                    'perplexity.cost.input_usd': 0.0009,
                    'perplexity.cost.output_usd': 0.02082,
                    'perplexity.cost.tool_calls_usd': 0.00634,
                    'perplexity.cost_usd': 0.02806,
                    'perplexity.effort': 'high',
                    'perplexity.query': 'Survey of heat pumps in Europe [[emulate: duration=200]]',
                    'perplexity.ratelimit.limit': 50,
                    'perplexity.ratelimit.remaining': '<int>',
                    'perplexity.sources': 1,
                    'perplexity.status': 'completed',
                    'perplexity.steps': 4,
                },
                'events': [
                    {
                        'name': 'perplexity.search',
                        'attributes': {
                            'perplexity.duration_s': '<float>',
                            'perplexity.search.domains': ['carbonbrief.org'],
                            'perplexity.search.queries': ['Survey of heat pumps in Europe'],
                            'perplexity.search.results': 1,
                        },
                    },
                    {
                        'name': 'perplexity.search',
                        'attributes': {
                            'perplexity.duration_s': '<float>',
                            'perplexity.search.domains': [],
                            'perplexity.search.queries': ['Survey of heat pumps in Europe latest developments'],
                            'perplexity.search.results': 0,
                        },
                    },
                    {
                        'name': 'perplexity.search',
                        'attributes': {
                            'perplexity.duration_s': '<float>',
                            'perplexity.search.domains': [],
                            'perplexity.search.queries': ['Survey of heat pumps in Europe expert analysis'],
                            'perplexity.search.results': 0,
                        },
                    },
                    {
                        'name': 'perplexity.fetch',
                        'attributes': {
                            'perplexity.duration_s': '<float>',
                            'perplexity.fetch.pages': 1,
                            'perplexity.fetch.urls': ['https://www.carbonbrief.org/analysis-heat-pumps-europe/'],
                        },
                    },
                ],
                'links': [{'trace_id': 1, 'span_id': 1}],
            },
        ]
    )


async def test_a_failed_run_is_an_error_span_with_the_apis_message(emulator: Emulator, capfire: CaptureLogfire):
    async with researcher_for(emulator, effort='fast') as r:
        result = await r.run('What is the EU AI Act? [[emulate: fail]]')
    assert result.status == 'failed'
    research = find_span(capfire, 'perplexity.research')
    assert research['attributes']['logfire.level_num'] == 17  # error
    assert span_tree(capfire) == snapshot(
        [
            {
                'name': 'perplexity.research',
                'attributes': {
                    'error.type': 'run_failed',
                    'gen_ai.operation.name': 'research',
                    'gen_ai.provider.name': 'perplexity',
                    'gen_ai.request.model': 'fast',
                    'gen_ai.response.id': '<response_id>',
                    'gen_ai.response.model': 'openai/gpt-6-luna',
                    'gen_ai.usage.input_tokens': 0,
                    'gen_ai.usage.output_tokens': 0,
                    'perplexity.cited': 0,
                    'perplexity.effort': 'fast',
                    'perplexity.error': 'The model provider returned an error while generating the response.',
                    'perplexity.query': 'What is the EU AI Act? [[emulate: fail]]',
                    'perplexity.ratelimit.limit': 50,
                    'perplexity.ratelimit.remaining': '<int>',
                    'perplexity.sources': 0,
                    'perplexity.status': 'failed',
                    'perplexity.steps': 1,
                },
                'events': [
                    {
                        'name': 'perplexity.search',
                        'attributes': {
                            'perplexity.duration_s': '<float>',
                            'perplexity.search.domains': [
                                'reuters.com',
                                'digital-strategy.ec.europa.eu',
                                'euractiv.com',
                                'artificialintelligenceact.eu',
                            ],
                            'perplexity.search.queries': ['What is the EU AI Act?'],
                            'perplexity.search.results': 4,
                        },
                    },
                    {
                        'name': 'perplexity.run_error',
                        'attributes': {
                            'perplexity.error': 'The model provider returned an error while generating the response.',
                            'perplexity.error.code': 'upstream_error',
                        },
                    },
                ],
            }
        ]
    )


async def test_a_rate_limited_create_shows_its_retries_as_events(emulator: Emulator, capfire: CaptureLogfire):
    async with researcher_for(emulator, effort='fast') as r:
        result = await r.run('What is the EU AI Act? [[emulate: 429x2, retry_after=0.01]]')
    assert result.done
    assert span_tree(capfire) == snapshot(
        [
            {
                'name': 'perplexity.research',
                'attributes': {
                    'gen_ai.operation.name': 'research',
                    'gen_ai.provider.name': 'perplexity',
                    'gen_ai.request.model': 'fast',
                    'gen_ai.response.id': '<response_id>',
                    'gen_ai.response.model': 'openai/gpt-6-luna',
                    'gen_ai.usage.input_tokens': 558,
                    'gen_ai.usage.output_tokens': 57,
                    'perplexity.answer.chars': 228,
                    'perplexity.answer.time_to_first_token_s': '<float>',
                    'perplexity.cited': 2,
                    'perplexity.cost.input_usd': 2e-05,
                    'perplexity.cost.output_usd': 3e-05,
                    'perplexity.cost.tool_calls_usd': 0.001,
                    'perplexity.cost_usd': 0.00105,
                    'perplexity.effort': 'fast',
                    'perplexity.query': 'What is the EU AI Act? [[emulate: 429x2, retry_after=0.01]]',
                    'perplexity.ratelimit.limit': 50,
                    'perplexity.ratelimit.remaining': '<int>',
                    'perplexity.sources': 4,
                    'perplexity.status': 'completed',
                    'perplexity.steps': 1,
                },
                'events': [
                    {
                        'name': 'perplexity.retry',
                        'attributes': {
                            'http.request.method': 'POST',
                            'perplexity.attempt': 1,
                            'perplexity.path': '/v1/agent',
                            'perplexity.retry.delay_s': '<float>',
                            'perplexity.retry.reason': '429',
                        },
                    },
                    {
                        'name': 'perplexity.retry',
                        'attributes': {
                            'http.request.method': 'POST',
                            'perplexity.attempt': 2,
                            'perplexity.path': '/v1/agent',
                            'perplexity.retry.delay_s': '<float>',
                            'perplexity.retry.reason': '429',
                        },
                    },
                    {
                        'name': 'perplexity.search',
                        'attributes': {
                            'perplexity.duration_s': '<float>',
                            'perplexity.search.domains': [
                                'reuters.com',
                                'digital-strategy.ec.europa.eu',
                                'euractiv.com',
                                'artificialintelligenceact.eu',
                            ],
                            'perplexity.search.queries': ['What is the EU AI Act?'],
                            'perplexity.search.results': 4,
                        },
                    },
                ],
            }
        ]
    )


async def test_a_refused_create_is_recorded_as_an_exception(emulator: Emulator, capfire: CaptureLogfire):
    async with Researcher(api_key='pplx-wrong', base_url=emulator.base_url, effort='fast') as r:
        with pytest.raises(AuthenticationError):
            await r.run('What is the EU AI Act?')
    assert span_tree(capfire) == snapshot(
        [
            {
                'name': 'perplexity.research',
                'attributes': {
                    'gen_ai.operation.name': 'research',
                    'gen_ai.provider.name': 'perplexity',
                    'perplexity.query': 'What is the EU AI Act?',
                    'perplexity.ratelimit.limit': 50,
                    'perplexity.ratelimit.remaining': '<int>',
                },
                'exceptions': ['pydantic_ai_perplexity.AuthenticationError'],
            }
        ]
    )


async def test_start_cancel_and_search_have_their_own_spans(emulator: Emulator, capfire: CaptureLogfire):
    async with researcher_for(emulator) as r:
        started = await r.start('Survey of heat pumps in Europe [[emulate: duration=200]]', effort='high')
        await r.cancel(started.response_id)
        await r.search('EU AI Act', max_results=3)
    tree = span_tree(capfire)
    # The cancel waits for the run to settle: on the resumed stream, or, when that stream ends before the run's
    # cancelled event (a race with the emulator), by polling, which the span records as an event. Either is right.
    cancel = next(span for span in tree if span['name'] == 'perplexity.cancel')
    fallback = cancel.pop('events', [])
    assert fallback in (
        [],
        [{'name': 'perplexity.wait.polling', 'attributes': {'perplexity.reason': 'APIConnectionError'}}],
    )
    assert tree == snapshot(
        [
            {
                'name': 'perplexity.research',
                'attributes': {
                    'gen_ai.operation.name': 'research',
                    'gen_ai.provider.name': 'perplexity',
                    'gen_ai.request.model': 'high',
                    'gen_ai.response.id': '<response_id>',
                    'gen_ai.response.model': 'high',
                    'perplexity.effort': 'high',
                    'perplexity.query': 'Survey of heat pumps in Europe [[emulate: duration=200]]',
                    'perplexity.ratelimit.limit': 50,
                    'perplexity.ratelimit.remaining': '<int>',
                },
            },
            {
                'name': 'perplexity.cancel',
                'attributes': {
                    'gen_ai.provider.name': 'perplexity',
                    'gen_ai.response.id': '<response_id>',
                    'perplexity.ratelimit.limit': 50,
                    'perplexity.ratelimit.remaining': '<int>',
                    'perplexity.status': 'cancelled',
                },
            },
            {
                'name': 'perplexity.search_api',
                'attributes': {
                    'gen_ai.provider.name': 'perplexity',
                    'perplexity.ratelimit.limit': 50,
                    'perplexity.ratelimit.remaining': '<int>',
                    'perplexity.search.domains': ['reuters.com', 'digital-strategy.ec.europa.eu', 'euractiv.com'],
                    'perplexity.search.queries': ['EU AI Act'],
                    'perplexity.search.results': 3,
                },
            },
        ]
    )


async def test_token_cost_and_duration_metrics_are_recorded_per_effort(emulator: Emulator, capfire: CaptureLogfire):
    async with researcher_for(emulator) as r:
        await r.run('What is the EU AI Act?', effort='fast')
        await r.run('How do solid-state batteries work?', effort='low')
    assert metric_points(capfire) == snapshot(
        {
            'gen_ai.client.token.usage': {
                'unit': '{token}',
                'points': [
                    {
                        'attributes': {
                            'gen_ai.operation.name': 'research',
                            'gen_ai.provider.name': 'perplexity',
                            'gen_ai.request.model': 'fast',
                            'gen_ai.response.model': 'openai/gpt-6-luna',
                            'gen_ai.token.type': 'input',
                        },
                        'count': 1,
                        'sum': 549,
                    },
                    {
                        'attributes': {
                            'gen_ai.operation.name': 'research',
                            'gen_ai.provider.name': 'perplexity',
                            'gen_ai.request.model': 'fast',
                            'gen_ai.response.model': 'openai/gpt-6-luna',
                            'gen_ai.token.type': 'output',
                        },
                        'count': 1,
                        'sum': 57,
                    },
                    {
                        'attributes': {
                            'gen_ai.operation.name': 'research',
                            'gen_ai.provider.name': 'perplexity',
                            'gen_ai.request.model': 'low',
                            'gen_ai.response.model': 'openai/gpt-6-luna',
                            'gen_ai.token.type': 'input',
                        },
                        'count': 1,
                        'sum': 578,
                    },
                    {
                        'attributes': {
                            'gen_ai.operation.name': 'research',
                            'gen_ai.provider.name': 'perplexity',
                            'gen_ai.request.model': 'low',
                            'gen_ai.response.model': 'openai/gpt-6-luna',
                            'gen_ai.token.type': 'output',
                        },
                        'count': 1,
                        'sum': 218,
                    },
                ],
            },
            'operation.cost': {
                'unit': '{USD}',
                'points': [
                    {
                        'attributes': {
                            'gen_ai.operation.name': 'research',
                            'gen_ai.provider.name': 'perplexity',
                            'gen_ai.request.model': 'fast',
                            'gen_ai.response.model': 'openai/gpt-6-luna',
                        },
                        'count': 1,
                        'sum': 0.00105,
                    },
                    {
                        'attributes': {
                            'gen_ai.operation.name': 'research',
                            'gen_ai.provider.name': 'perplexity',
                            'gen_ai.request.model': 'low',
                            'gen_ai.response.model': 'openai/gpt-6-luna',
                        },
                        'count': 1,
                        'sum': 0.00553,
                    },
                ],
            },
            'perplexity.research.duration': {
                'unit': 's',
                'points': [
                    {
                        'attributes': {
                            'gen_ai.provider.name': 'perplexity',
                            'perplexity.effort': 'fast',
                            'perplexity.status': 'completed',
                        },
                        'count': 1,
                    },
                    {
                        'attributes': {
                            'gen_ai.provider.name': 'perplexity',
                            'perplexity.effort': 'low',
                            'perplexity.status': 'completed',
                        },
                        'count': 1,
                    },
                ],
            },
        }
    )


async def test_steps_become_child_spans_on_a_timeline_when_asked(
    emulator: Emulator, capfire: CaptureLogfire, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv('PERPLEXITY_TRACE_STEPS', 'spans')
    async with researcher_for(emulator) as r:
        result = await r.run('What is the EU AI Act? [[emulate: mcp]]', effort='low', fetch_pages=3)
    assert result.done
    assert span_tree(capfire) == snapshot(
        [
            {
                'name': 'perplexity.research',
                'attributes': {
                    'gen_ai.operation.name': 'research',
                    'gen_ai.provider.name': 'perplexity',
                    'gen_ai.request.model': 'low',
                    'gen_ai.response.id': '<response_id>',
                    'gen_ai.response.model': 'openai/gpt-6-luna',
                    'gen_ai.usage.input_tokens': 729,
                    'gen_ai.usage.output_tokens': 199,
                    'perplexity.answer.chars': 412,
                    'perplexity.answer.time_to_first_token_s': '<float>',
                    'perplexity.cited': 3,
                    'perplexity.cost.input_usd': 4e-05,
                    'perplexity.cost.output_usd': 0.0001,
                    'perplexity.cost.tool_calls_usd': 0.00536,
                    'perplexity.cost_usd': 0.0055,
                    'perplexity.effort': 'low',
                    'perplexity.query': 'What is the EU AI Act? [[emulate: mcp]]',
                    'perplexity.ratelimit.limit': 50,
                    'perplexity.ratelimit.remaining': '<int>',
                    'perplexity.sources': 4,
                    'perplexity.status': 'completed',
                    'perplexity.steps': 5,
                },
                'children': [
                    {
                        'name': 'perplexity.mcp_list_tools',
                        'attributes': {'perplexity.mcp.server_label': 'emulated', 'perplexity.mcp.tools': 2},
                    },
                    {
                        'name': 'perplexity.search',
                        'attributes': {
                            'perplexity.search.domains': [
                                'reuters.com',
                                'digital-strategy.ec.europa.eu',
                                'euractiv.com',
                                'artificialintelligenceact.eu',
                            ],
                            'perplexity.search.queries': ['What is the EU AI Act?'],
                            'perplexity.search.results': 4,
                        },
                    },
                    {
                        'name': 'perplexity.search',
                        'attributes': {
                            'perplexity.search.domains': ['euractiv.com', 'artificialintelligenceact.eu'],
                            'perplexity.search.queries': ['What is the EU AI Act? latest developments'],
                            'perplexity.search.results': 2,
                        },
                    },
                    {
                        'name': 'perplexity.fetch',
                        'attributes': {
                            'perplexity.fetch.pages': 1,
                            'perplexity.fetch.urls': [
                                'https://www.reuters.com/technology/eu-ai-act-timeline-2026-09-18/'
                            ],
                        },
                    },
                    {
                        'name': 'perplexity.mcp_call',
                        'attributes': {
                            'gen_ai.tool.name': 'search_documents',
                            'perplexity.mcp.server_label': 'emulated',
                        },
                    },
                    {
                        'name': 'perplexity.answer',
                        'attributes': {
                            'perplexity.answer.chars': 412,
                            'perplexity.answer.time_to_first_token_s': '<float>',
                        },
                    },
                ],
            }
        ]
    )


async def test_a_dropped_stream_shows_its_resumption(emulator: Emulator, capfire: CaptureLogfire):
    async with researcher_for(emulator, effort='fast') as r:
        result = await r.run('What is the EU AI Act? [[emulate: drop@5]]')
    assert result.done
    research = find_span(capfire, 'perplexity.research')
    resumes = [e for e in research['events'] if e['name'] == 'perplexity.stream.resume']
    assert [e['attributes'] for e in resumes] == [{'perplexity.after_sequence': 5}]


async def test_steps_can_be_left_out(emulator: Emulator, capfire: CaptureLogfire, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv('PERPLEXITY_TRACE_STEPS', 'off')
    async with researcher_for(emulator) as r:
        result = await r.run('What is the EU AI Act? [[emulate: mcp]]', effort='low', fetch_pages=3)
    assert result.done
    research = find_span(capfire, 'perplexity.research')
    assert research.get('events', []) == []
    assert research['attributes']['perplexity.steps'] == 0
    assert research['attributes']['perplexity.answer.chars'] == len(result.answer)
    assert research['attributes']['gen_ai.usage.output_tokens'] > 0
