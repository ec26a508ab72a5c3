"""Step events from streams the emulator does not produce: failures, missing announcements, polled snapshots."""

from __future__ import annotations

from typing import Any

from inline_snapshot import snapshot
from logfire.testing import CaptureLogfire

from pydantic_ai_perplexity._core import tracing
from pydantic_ai_perplexity._domain.results import ResearchResult
from pydantic_ai_perplexity._domain.steps import Step, StepReducer
from pydantic_ai_perplexity.client._models import AgentEvent, Response
from support.tracing import span_tree


def _events(*payloads: dict[str, Any]) -> list[AgentEvent]:
    return [AgentEvent.model_validate({'sequence_number': i, **p}) for i, p in enumerate(payloads)]


def _run(events: list[AgentEvent], final: dict[str, Any]) -> None:
    response = Response.model_validate(final)
    reducer = StepReducer('resp_1')
    with tracing.research_span('q') as trace:
        trace.started(Response(id='resp_1', status='queued', effort='low'), effort='low')
        for event in events:
            if (step := reducer.observe(event)) is not None:
                trace.step(step)
        for step in reducer.snapshot(response):  # the final snapshot: items no event reported
            trace.step(step)
        trace.finish(ResearchResult.from_response(response, effort='low'))


def test_failed_fetches_and_remote_mcp_errors_are_marked(capfire: CaptureLogfire):
    _run(
        _events(
            {
                'type': 'response.output_item.added',
                'item': {'type': 'mcp_list_tools', 'id': 'l1', 'server_label': 'docs'},
            },
            {
                'type': 'response.output_item.done',
                'item': {'type': 'mcp_list_tools', 'id': 'l1', 'server_label': 'docs', 'error': 'connection refused'},
            },
            {'type': 'response.reasoning.fetch_url_queries', 'urls': ['https://a.example/x', 'https://b.example/y']},
            {'type': 'response.reasoning.fetch_url_results', 'contents': [{'url': 'https://a.example/x'}]},
            {'type': 'response.output_item.added', 'item': {'type': 'mcp_call', 'id': 'c1', 'server_label': 'docs'}},
            {
                'type': 'response.output_item.done',
                'item': {'type': 'mcp_call', 'id': 'c1', 'server_label': 'docs', 'name': 'find', 'error': 'HTTP 500'},
            },
            {'type': 'response.output_item.done', 'item': {'type': 'tool_search_output', 'tools': [{}, {}]}},
            {'type': 'response.output_item.done', 'item': {'type': 'sandbox_results'}},
            {'type': 'error', 'error': {'message': 'stream broke', 'code': 'server_error'}},
        ),
        {'id': 'resp_1', 'status': 'failed', 'error': {'message': 'stream broke'}},
    )
    assert span_tree(capfire) == snapshot(
        [
            {
                'name': 'perplexity.research',
                'attributes': {
                    'error.type': 'run_failed',
                    'gen_ai.operation.name': 'research',
                    'gen_ai.provider.name': 'perplexity',
                    'gen_ai.request.model': 'low',
                    'gen_ai.response.id': '<response_id>',
                    'gen_ai.response.model': 'low',
                    'gen_ai.usage.input_tokens': 0,
                    'gen_ai.usage.output_tokens': 0,
                    'perplexity.cited': 0,
                    'perplexity.effort': 'low',
                    'perplexity.error': 'stream broke',
                    'perplexity.query': 'q',
                    'perplexity.sources': 0,
                    'perplexity.status': 'failed',
                    'perplexity.steps': 4,
                },
                'events': [
                    {
                        'name': 'perplexity.mcp_list_tools',
                        'attributes': {
                            'perplexity.duration_s': '<float>',
                            'perplexity.error': 'connection refused',
                            'perplexity.mcp.server_label': 'docs',
                            'perplexity.mcp.tools': 0,
                        },
                    },
                    {
                        'name': 'perplexity.fetch',
                        'attributes': {
                            'perplexity.duration_s': '<float>',
                            'perplexity.fetch.failed_urls': ['https://b.example/y'],
                            'perplexity.fetch.pages': 1,
                            'perplexity.fetch.urls': ['https://a.example/x', 'https://b.example/y'],
                        },
                    },
                    {
                        'name': 'perplexity.mcp_call',
                        'attributes': {
                            'gen_ai.tool.name': 'find',
                            'perplexity.duration_s': '<float>',
                            'perplexity.error': 'HTTP 500',
                            'perplexity.mcp.server_label': 'docs',
                        },
                    },
                    {'name': 'perplexity.tool_search', 'attributes': {'perplexity.mcp.tools': 2}},
                    {  # an opt-in tool's output: a step of its own (it was an unknown output item before)
                        'name': 'perplexity.tool',
                        'attributes': {
                            'gen_ai.tool.name': 'sandbox',
                            'perplexity.duration_s': '<float>',
                            'perplexity.tool.results': 0,
                        },
                    },
                    {
                        'name': 'perplexity.run_error',
                        'attributes': {'perplexity.error': 'stream broke', 'perplexity.error.code': 'server_error'},
                    },
                ],
            }
        ]
    )


def test_searches_without_announcements_and_polled_runs_still_show_their_steps(capfire: CaptureLogfire):
    search_item = {
        'type': 'search_results',
        'queries': ['eu ai act'],
        'results': [{'id': 1, 'url': 'https://www.europa.eu/ai'}, {'id': 2, 'url': 'https://reuters.com/x'}],
    }
    # A stream that only reports finished output items (no reasoning events).
    _run(
        _events({'type': 'response.output_item.done', 'item': search_item}),
        {'id': 'resp_1', 'status': 'completed', 'output': [search_item]},
    )
    # A run whose wait polled: no events at all, the final snapshot's items become the steps.
    fetch_item = {'type': 'fetch_url_results', 'contents': [{'url': 'https://a.example/x'}]}
    message = {'type': 'message', 'content': [{'type': 'output_text', 'text': 'An answer [1].'}]}
    _run([], {'id': 'resp_1', 'status': 'completed', 'output': [search_item, fetch_item, message]})
    assert span_tree(capfire) == snapshot(
        [
            {
                'name': 'perplexity.research',
                'attributes': {
                    'gen_ai.operation.name': 'research',
                    'gen_ai.provider.name': 'perplexity',
                    'gen_ai.request.model': 'low',
                    'gen_ai.response.id': '<response_id>',
                    'gen_ai.response.model': 'low',
                    'gen_ai.usage.input_tokens': 0,
                    'gen_ai.usage.output_tokens': 0,
                    'perplexity.cited': 0,
                    'perplexity.effort': 'low',
                    'perplexity.query': 'q',
                    'perplexity.sources': 2,
                    'perplexity.status': 'completed',
                    'perplexity.steps': 1,
                },
                'events': [
                    {
                        'name': 'perplexity.search',
                        'attributes': {
                            'perplexity.duration_s': '<float>',
                            'perplexity.search.domains': ['europa.eu', 'reuters.com'],
                            'perplexity.search.queries': ['eu ai act'],
                            'perplexity.search.results': 2,
                        },
                    }
                ],
            },
            {
                'name': 'perplexity.research',
                'attributes': {
                    'gen_ai.operation.name': 'research',
                    'gen_ai.provider.name': 'perplexity',
                    'gen_ai.request.model': 'low',
                    'gen_ai.response.id': '<response_id>',
                    'gen_ai.response.model': 'low',
                    'gen_ai.usage.input_tokens': 0,
                    'gen_ai.usage.output_tokens': 0,
                    'perplexity.answer.chars': 14,
                    'perplexity.cited': 1,
                    'perplexity.effort': 'low',
                    'perplexity.query': 'q',
                    'perplexity.sources': 3,  # the fetched page is a source too
                    'perplexity.status': 'completed',
                    'perplexity.steps': 2,
                },
                'events': [
                    {
                        'name': 'perplexity.search',
                        'attributes': {
                            'perplexity.duration_s': '<float>',
                            'perplexity.search.domains': ['europa.eu', 'reuters.com'],
                            'perplexity.search.queries': ['eu ai act'],
                            'perplexity.search.results': 2,
                        },
                    },
                    {
                        'name': 'perplexity.fetch',
                        'attributes': {
                            'perplexity.duration_s': '<float>',
                            'perplexity.fetch.pages': 1,
                            'perplexity.fetch.urls': ['https://a.example/x'],
                        },
                    },
                ],
            },
        ]
    )


def test_steps_left_open_at_a_handoff_are_reported_unfinished(capfire: CaptureLogfire):
    reducer = StepReducer('resp_1')
    with tracing.research_span('q') as trace:
        trace.started(Response(id='resp_1', status='queued', effort='high'), effort='high')
        for event in _events(
            {'type': 'response.reasoning.search_queries', 'queries': ['fusion'], 'call_id': 'a'},
            {'type': 'response.reasoning.search_queries', 'queries': ['tokamak'], 'call_id': 'b'},
            {'type': 'response.reasoning.search_results', 'results': [{'url': 'https://iter.org'}], 'call_id': 'b'},
        ):
            if (step := reducer.observe(event)) is not None:
                trace.step(step)
        trace.finish(ResearchResult(response_id='resp_1', status='in_progress'))
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
                    'perplexity.query': 'q',
                    'perplexity.sources': 0,
                    'perplexity.status': 'in_progress',
                    'perplexity.steps': 2,
                },
                'events': [
                    {
                        'name': 'perplexity.search',
                        'attributes': {
                            'perplexity.duration_s': '<float>',
                            'perplexity.search.domains': ['iter.org'],
                            'perplexity.search.queries': ['tokamak'],
                            'perplexity.search.results': 1,
                        },
                    },
                    {
                        'name': 'perplexity.search',
                        'attributes': {
                            'perplexity.duration_s': '<float>',
                            'perplexity.search.queries': ['fusion'],
                            'perplexity.unfinished': True,
                        },
                    },
                    {
                        'name': 'perplexity.handoff',
                        'attributes': {
                            'perplexity.elapsed_s': '<float>',
                            'perplexity.progress': '0 searches, 0 results',
                            'perplexity.status': 'in_progress',
                        },
                    },
                ],
            }
        ]
    )


def test_nothing_is_recorded_for_a_run_without_a_span():
    trace = tracing.NO_TRACE
    trace.step(Step(kind='answer', detail='writing the answer'))
    trace.finish(ResearchResult(response_id='resp_1', status='completed'))
    trace.record_metrics()
    assert trace.effort is None and not trace.recording
