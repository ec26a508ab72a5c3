"""Reading runs: answer text, deduplicated sources, citations resolved to sources, orphan markers, usage."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pydantic_ai_perplexity.client._models import (
    AgentEvent,
    MessageItem,
    Response,
    SearchResultsItem,
    UnknownItem,
    parse_event,
    parse_response,
)
from pydantic_ai_perplexity.results import ResearchResult, normalize_url
from pydantic_ai_perplexity.steps import StepReducer

FIXTURES = Path(__file__).parent / 'fixtures'


def load(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text(encoding='utf-8'))


def run_with(answer: str, *batches: list[dict[str, Any]], status: str = 'completed') -> Response:
    output: list[dict[str, Any]] = [{'type': 'search_results', 'queries': ['q'], 'results': b} for b in batches]
    output.append({'type': 'message', 'content': [{'type': 'output_text', 'text': answer, 'annotations': []}]})
    return parse_response({'id': 'resp_x', 'status': status, 'output': output})


def test_completed_fixture_reads_answer_sources_citations_and_cost():
    result = ResearchResult.from_response(parse_response(load('response-completed.json')))
    assert result.done and result.status == 'completed'
    assert result.answer.startswith('- The AI Act has applied in stages')
    assert [(s.n, s.ids, s.cited) for s in result.sources] == [(1, [1], True), (2, [2], True)]
    assert [(c.marker, c.source_id, c.source_n) for c in result.citations] == [('[1]', 1, 1), ('[2]', 2, 2)]
    for c in result.citations:
        assert result.answer[c.start : c.end] == c.marker
    assert result.orphan_markers == []
    assert result.usage.cost_usd == pytest.approx(0.0224)
    assert result.usage.tool_costs_usd == {'search_web': 0.005}
    assert result.usage.tool_calls == {'search_web': 1}
    assert result.usage.reasoning_tokens == 64
    assert result.model == 'openai/gpt-5.5'
    assert result.progress.searches == 1 and result.progress.results_seen == 2


def test_output_text_is_rebuilt_from_message_items_not_read_from_the_wire():
    data = load('response-completed.json')
    assert 'output_text' not in data
    response = parse_response(data)
    assert response.output_text == ResearchResult.from_response(response).answer != ''


def test_failed_run_is_a_result_with_its_error_not_an_exception():
    result = ResearchResult.from_response(parse_response(load('response-failed.json')))
    assert result.done and result.status == 'failed'
    assert result.error == 'The model provider returned an error while generating the response.'
    assert result.answer == '' and result.sources == []


def test_incomplete_run_reports_its_reason():
    response = parse_response(
        {'id': 'resp_i', 'status': 'incomplete', 'incomplete_details': {'reason': 'max_output_tokens'}, 'output': []}
    )
    assert ResearchResult.from_response(response).error == 'incomplete: max_output_tokens'


def test_sources_are_deduplicated_by_normalised_url_across_batches_keeping_every_api_id():
    response = run_with(
        'A [1]. B [3]. C [web:2].',
        [{'id': 1, 'url': 'https://www.Example.com/a/?utm_source=x', 'title': 'A'}],
        [
            {'id': 2, 'url': 'https://other.org/b', 'title': 'B'},
            {'id': 3, 'url': 'http://example.com/a#section', 'title': 'A again'},
        ],
    )
    result = ResearchResult.from_response(response)
    assert [(s.n, s.url, s.ids) for s in result.sources] == [
        (1, 'https://www.Example.com/a/?utm_source=x', [1, 3]),
        (2, 'https://other.org/b', [2]),
    ]
    assert [(c.marker, c.source_n) for c in result.citations] == [('[1]', 1), ('[3]', 1), ('[web:2]', 2)]
    assert all(s.cited for s in result.sources)


def test_markers_without_a_source_are_flagged_never_invented():
    result = ResearchResult.from_response(
        run_with('Fact [1]. Made up [7]. Also [7] and [9, 1].', [{'id': 1, 'url': 'https://a.example/x'}])
    )
    assert result.orphan_markers == ['[7]', '[9]']
    assert [c.source_id for c in result.citations] == [1, 1]


def test_uncited_sources_are_kept_and_marked():
    result = ResearchResult.from_response(
        run_with('Only [2].', [{'id': 1, 'url': 'https://a.example/1'}, {'id': 2, 'url': 'https://b.example/2'}])
    )
    assert [(s.n, s.cited) for s in result.sources] == [(1, False), (2, True)]
    assert [s.n for s in result.cited_sources] == [2]


def test_structured_answer_is_parsed_into_data():
    response = run_with('{"title": "x", "points": [1, 2]}')
    assert ResearchResult.from_response(response, structured=True).data == {'title': 'x', 'points': [1, 2]}
    assert ResearchResult.from_response(run_with('not json'), structured=True).data is None


def test_unknown_item_types_and_fields_are_kept():
    response = parse_response(
        {
            'id': 'resp_u',
            'status': 'completed',
            'brand_new_field': {'a': 1},
            'output': [
                {'type': 'sandbox_results', 'call_id': 'c1', 'code': 'print(1)'},
                {'type': 'message', 'content': [{'type': 'output_text', 'text': 'hi'}], 'extra': True},
            ],
        }
    )
    assert isinstance(response.output[0], UnknownItem)
    assert response.output[0].type == 'sandbox_results'
    assert response.output[0].model_extra == {'call_id': 'c1', 'code': 'print(1)'}
    assert isinstance(response.output[1], MessageItem)
    assert response.model_extra == {'brand_new_field': {'a': 1}}
    assert response.output_text == 'hi'


def test_stream_fixture_events_parse_and_track_progress():
    events = [
        parse_event(json.loads(line.removeprefix('data: ')))
        for line in (FIXTURES / 'stream.txt').read_text(encoding='utf-8').splitlines()
        if line.startswith('data: ')
    ]
    assert [e.sequence_number for e in events] == list(range(15))
    added, done = events[3], events[6]
    assert added.type == 'response.output_item.added' and added.item_ is not None
    assert added.item_.type == 'function_call'
    assert isinstance(done.item_, SearchResultsItem)
    assert events[8].item == {**(events[8].item or {}), 'content': None}
    reducer = StepReducer()
    steps = [s.detail for e in events if (s := reducer.observe(e)) is not None and s.shown]
    assert steps == ['searching: AI Act start', 'found 1 results', 'writing the answer']
    assert reducer.progress.searches == 1 and reducer.progress.results_seen == 1
    final = events[-1].response_
    assert final is not None and final.done
    assert ResearchResult.from_response(final).citations[0].source_id == 1
    assert reducer.progress.answer_chars == len(final.output_text)


def test_unknown_event_types_parse():
    event = parse_event({'type': 'response.sandbox.results', 'sequence_number': 41, 'whatever': [1]})
    assert isinstance(event, AgentEvent) and not event.is_terminal
    assert event.model_extra == {'whatever': [1]}
    assert parse_event({'type': 'error', 'sequence_number': 3, 'error': {'message': 'x'}}).is_terminal


@pytest.mark.parametrize(
    ('url', 'expected'),
    [
        ('https://www.Example.com/a/', 'https://example.com/a'),
        ('http://example.com/a?utm_medium=x&b=2&a=1#frag', 'https://example.com/a?a=1&b=2'),
        ('https://example.com:8443/x', 'https://example.com:8443/x'),
    ],
)
def test_normalize_url(url: str, expected: str):
    assert normalize_url(url) == expected
