"""The step reducer: stream events and snapshots read once into typed steps with running counts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic_ai_perplexity._domain.steps import Progress, Step, StepReducer
from pydantic_ai_perplexity.client._models import AgentEvent, parse_event, parse_response
from support.live_shapes import fetch_item, running, search_item

FIXTURES = Path(__file__).parent / 'fixtures'


def _events(*payloads: dict[str, Any]) -> list[AgentEvent]:
    return [AgentEvent.model_validate({'sequence_number': i, **p}) for i, p in enumerate(payloads)]


def _steps(reducer: StepReducer, events: list[AgentEvent]) -> list[Step]:
    return [s for e in events if (s := reducer.observe(e)) is not None]


def test_the_fixture_stream_becomes_typed_steps_with_counts_and_the_run_id():
    events = [
        parse_event(json.loads(line.removeprefix('data: ')))
        for line in (FIXTURES / 'stream.txt').read_text(encoding='utf-8').splitlines()
        if line.startswith('data: ')
    ]
    reducer = StepReducer('resp_1')
    steps = _steps(reducer, events)
    shown = [s for s in steps if s.shown]
    assert [(s.kind, s.detail) for s in shown] == [
        ('search', 'searching: AI Act start'),
        ('results', 'found 1 result'),
        ('answer', 'writing the answer'),
    ]
    search, results, _ = shown
    assert search.queries == ('AI Act start',) and search.ref == results.ref and results.end
    assert results.results == 1 and results.urls and results.queries == ('AI Act start',)
    assert all(s.response_id == 'resp_1' for s in steps)
    assert search.progress.searches == 1 and search.progress.results_seen == 0  # a copy, as of that step
    assert results.progress.results_seen == 1
    assert [s.kind for s in steps if not s.shown] == ['answer', 'answer', 'status']  # announced, finished, run end
    final = events[-1].response_
    assert final is not None
    assert reducer.progress.answer_chars == len(final.output_text)
    assert reducer.snapshot(final) == []  # the stream reported every item already


def test_searches_pair_by_call_id_and_fetches_report_the_pages_that_did_not_come():
    reducer = StepReducer()
    steps = _steps(
        reducer,
        _events(
            {'type': 'response.reasoning.search_queries', 'queries': ['fusion'], 'call_id': 'a'},
            {'type': 'response.reasoning.search_queries', 'queries': ['tokamak'], 'call_id': 'b'},
            {'type': 'response.reasoning.search_results', 'results': [{'url': 'https://iter.org'}], 'call_id': 'b'},
            {'type': 'response.reasoning.fetch_url_queries', 'urls': ['https://a.example/x', 'https://b.example/y']},
            {'type': 'response.reasoning.fetch_url_results', 'contents': [{'url': 'https://a.example/x'}]},
        ),
    )
    fusion, tokamak, found, fetch, fetched = steps
    assert found.ref == tokamak.ref != fusion.ref and found.queries == ('tokamak',)
    assert (fetch.kind, fetch.detail, fetch.urls) == (
        'fetch',
        'fetching 2 pages',
        ('https://a.example/x', 'https://b.example/y'),
    )
    assert (fetched.kind, fetched.detail, fetched.ref) == ('fetched', 'fetched 1 page', fetch.ref)
    assert fetched.failed_urls == ('https://b.example/y',)
    assert reducer.progress.searches == 2 and reducer.progress.pages_fetched == 1


def test_remote_tools_the_answer_and_the_runs_end_are_typed_not_worded():
    reducer = StepReducer()
    added, done, listed, tool_search, sandbox, end = _steps(
        reducer,
        _events(
            {'type': 'response.output_item.added', 'item': {'type': 'mcp_call', 'id': 'c1', 'server_label': 'docs'}},
            {
                'type': 'response.output_item.done',
                'item': {'type': 'mcp_call', 'id': 'c1', 'server_label': 'docs', 'name': 'find', 'error': 'HTTP 500'},
            },
            {
                'type': 'response.output_item.done',
                'item': {'type': 'mcp_list_tools', 'server_label': 'docs', 'tools': [{'name': 'a'}]},
            },
            {'type': 'response.output_item.done', 'item': {'type': 'tool_search_output', 'tools': [{}, {}]}},
            {'type': 'response.output_item.done', 'item': {'type': 'sandbox_results'}},
            {'type': 'error', 'error': {'message': 'stream broke', 'code': 'server_error'}},
        ),
    )
    assert (added.kind, added.shown, added.end) == ('mcp', False, False)
    assert (done.kind, done.shown, done.ref, done.server, done.tool) == ('mcp', True, added.ref, 'docs', 'find')
    assert done.error == 'HTTP 500' and not done.ok and done.detail == 'remote tool docs.find: failed'
    assert (listed.item_type, listed.tools, listed.shown) == ('mcp_list_tools', 1, False)
    assert (tool_search.kind, tool_search.tools) == ('other', 2)
    # An opt-in tool's output is a `tool` step (it was `other` before the sandbox was modelled).
    assert (sandbox.kind, sandbox.item_type, sandbox.detail) == (
        'tool',
        'sandbox_results',
        'ran code in the sandbox: completed',
    )
    assert reducer.progress.tool_outputs == 1
    assert (end.kind, end.status, end.error, end.error_code) == ('status', 'failed', 'stream broke', 'server_error')
    assert reducer.progress.mcp_calls == 1


def test_items_no_event_announced_and_polled_snapshots_are_counted_once():
    search = {'type': 'search_results', 'queries': ['eu ai act'], 'results': [{'id': 1, 'url': 'https://europa.eu'}]}
    reducer = StepReducer()
    # A stream that only reports finished items: the item is the search.
    [step] = _steps(reducer, _events({'type': 'response.output_item.done', 'item': search}))
    assert (step.kind, step.queries, step.results, step.shown) == ('results', ('eu ai act',), 1, False)
    # The same item in a later snapshot is not counted again; a new one is.
    fetch = {'type': 'fetch_url_results', 'contents': [{'url': 'https://a.example/x'}]}
    snapshot = parse_response({'id': 'resp_1', 'status': 'in_progress', 'output': [search, fetch]})
    [fetched] = reducer.snapshot(snapshot)
    assert (fetched.kind, fetched.urls) == ('fetched', ('https://a.example/x',))
    assert reducer.snapshot(snapshot) == []
    p = reducer.progress
    assert (p.searches, p.results_seen, p.pages_fetched, p.queries) == (1, 1, 1, ['eu ai act'])
    # An announced search's item does not count twice either.
    announced = StepReducer()
    _steps(
        announced,
        _events(
            {'type': 'response.reasoning.search_queries', 'queries': ['eu ai act']},
            {'type': 'response.reasoning.search_results', 'results': search['results']},
            {'type': 'response.output_item.done', 'item': search},
        ),
    )
    assert announced.snapshot(parse_response({'id': 'r', 'output': [search]})) == []
    assert (announced.progress.searches, announced.progress.results_seen) == (1, 1)


def test_an_item_of_a_known_type_with_an_unexpected_shape_is_not_fatal():
    reducer = StepReducer()
    [step] = _steps(
        reducer,
        _events({'type': 'response.output_item.done', 'item': {'type': 'mcp_call', 'error': {'nested': True}}}),
    )
    assert (step.kind, step.item_type) == ('other', 'mcp_call')


def test_a_polled_running_snapshot_makes_shown_steps_of_what_it_found_so_far():
    """Live fact: cfdude/mcp-perplexity-pro tests/fixtures/agent_background_in_progress.json, captured 2026-10-09: a
    running retrieve carries the search and fetch items reached so far (so a poll can report them as they come)."""
    reducer = StepReducer('resp_1')
    first = parse_response(running([search_item(11, 'https://a.example/', 'https://b.example/')]))
    [found] = reducer.snapshot(first, live=True)
    assert (found.kind, found.detail, found.shown, found.results) == ('results', 'found 2 results', True, 2)
    assert reducer.progress.last_step == 'found 2 results'
    later = parse_response(
        running([search_item(11, 'https://a.example/', 'https://b.example/'), fetch_item('https://c.example/')])
    )
    [fetched] = reducer.snapshot(later, live=True)
    assert (fetched.kind, fetched.detail, fetched.shown, fetched.urls) == (
        'fetched',
        'fetched 1 page',
        True,
        ('https://c.example/',),
    )
    assert (fetched.progress.searches, fetched.progress.results_seen, fetched.progress.pages_fetched) == (1, 2, 1)
    assert reducer.snapshot(later, live=True) == []  # counted once
    quiet = StepReducer('resp_2').snapshot(later)  # a late snapshot: counted, not shown, not described
    assert [(s.shown, s.detail) for s in quiet] == [(False, ''), (False, '')]


def test_counts_read_right_for_one_and_for_many():
    """A person reads `1 result`, never `1 results`: every count the progress line shows agrees with its number."""
    one = Progress(searches=1, results_seen=1, pages_fetched=1, mcp_calls=1, answer_chars=1)
    assert one.summary() == '1 search, 1 result, 1 page fetched, 1 remote tool call, 1 answer character'
    many = Progress(searches=2, results_seen=0, pages_fetched=3, mcp_calls=2, answer_chars=40)
    assert many.summary() == '2 searches, 0 results, 3 pages fetched, 2 remote tool calls, 40 answer characters'
