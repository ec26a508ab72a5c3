"""Reading runs: answer text, deduplicated sources, citations resolved to sources, orphan markers, usage."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pydantic_ai_perplexity._domain.results import ResearchResult, normalize_url
from pydantic_ai_perplexity._domain.steps import StepReducer
from pydantic_ai_perplexity.client._models import (
    AgentEvent,
    MessageItem,
    Response,
    SearchResultsItem,
    UnknownItem,
    parse_event,
    parse_response,
)
from support.live_shapes import cancelled, fetch_item, fetch_usage, message, run, running, search_item, search_usage

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
                {'type': 'sandbox_grep', 'call_id': 'c1', 'pattern': 'print'},  # a type this version does not model
                {'type': 'message', 'content': [{'type': 'output_text', 'text': 'hi'}], 'extra': True},
            ],
        }
    )
    assert isinstance(response.output[0], UnknownItem)
    assert response.output[0].type == 'sandbox_grep'
    assert response.output[0].model_extra == {'call_id': 'c1', 'pattern': 'print'}
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
    assert steps == ['searching: AI Act start', 'found 1 result', 'writing the answer']
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


# -- live facts (cfdude/mcp-perplexity-pro tests/fixtures, captured 2026-10-09; shapes in support/live_shapes.py) ----


def test_a_fetched_page_is_a_source_and_web_0_resolves_to_it():
    """Live fact: cfdude/mcp-perplexity-pro tests/fixtures/agent_low_fetch_url.json, captured 2026-10-09: a run that
    only fetched cites its page as `[web:0]`, and the page comes as `fetch_url_results {contents: [...]}`."""

    url = 'https://peps.python.org/pep-0008/'
    response = parse_response(run([fetch_item(url, 'PEP 8'), message('Lines stop at 79 characters. [web:0]')],
                                  usage=fetch_usage()))  # fmt: skip
    result = ResearchResult.from_response(response)
    assert [(s.url, s.title, s.ids, s.fetched, s.cited) for s in result.sources] == [(url, 'PEP 8', [0], True, True)]
    assert [(c.marker, c.source_id, c.source_n) for c in result.citations] == [('[web:0]', 0, 1)]
    assert result.orphan_markers == []
    assert result.progress.pages_fetched == 1


def test_web_markers_use_search_ids_first_and_a_fetched_page_of_a_searched_url_is_one_source():
    """Live fact: cfdude/mcp-perplexity-pro tests/fixtures/agent_background_completed.json, captured 2026-10-09: with
    search results (ids from 1, across batches in any order) and fetched pages, `[web:11]` / `[web:1]` are search
    result ids, and the pages fetched are the searched URLs (one source each, read by the run)."""

    output = [
        search_item(11, 'https://www.pinecone.io/pricing/', 'https://docs.pinecone.io/cost'),
        search_item(1, 'https://qdrant.tech/pricing/'),
        fetch_item('https://www.pinecone.io/pricing/'),
        fetch_item('https://qdrant.tech/pricing/'),
        fetch_item('https://weaviate.io/pricing'),
        message('Pinecone [web:11]. Qdrant [web:1]. Weaviate [web:2]. Nothing [web:40].'),
    ]
    result = ResearchResult.from_response(parse_response(run(output)))
    by_url = {s.url: s for s in result.sources}
    assert len(result.sources) == 4
    assert by_url['https://www.pinecone.io/pricing/'].ids == [11, 0]  # fetched first: place 0 is no search id
    assert by_url['https://www.pinecone.io/pricing/'].fetched
    assert by_url['https://qdrant.tech/pricing/'].ids == [1]  # place 1 is search id 1: the search result wins
    assert by_url['https://weaviate.io/pricing'].ids == [2] and by_url['https://weaviate.io/pricing'].fetched
    assert not by_url['https://docs.pinecone.io/cost'].fetched
    cited = [(c.marker, by_url_of(result, c.source_n)) for c in result.citations]
    assert cited == [
        ('[web:11]', 'https://www.pinecone.io/pricing/'),
        ('[web:1]', 'https://qdrant.tech/pricing/'),
        ('[web:2]', 'https://weaviate.io/pricing'),
    ]
    assert result.orphan_markers == ['[40]']


def by_url_of(result: ResearchResult, n: int | None) -> str:
    return next(s.url for s in result.sources if s.n == n)


def test_usage_reads_input_spend_from_the_cache_costs_and_each_tools_breakdown():
    """Live fact: cfdude/mcp-perplexity-pro tests/fixtures/agent_low_fetch_url.json, captured 2026-10-09: input is
    billed as cache_creation_cost + cache_read_cost with input_cost 0; fetch_url carries invocation, cost_usd and the
    token_usage of the model that read the page."""

    response = parse_response(run([fetch_item('https://a.example/'), message('x')], usage=fetch_usage()))
    assert response.usage is not None and response.usage.cost is not None
    assert response.usage.cost.input_cost == 0
    assert response.usage.input_spend == pytest.approx(0.00021)
    detail = (response.usage.tool_calls_details or {})['fetch_url']
    assert (detail.invocation, detail.cost_usd) == (1, 0.0035)
    assert [(t.model, t.input_tokens, t.output_tokens) for t in detail.token_usage or []] == [
        ('openai/gpt-5.6-luna', 11000, 200)
    ]
    usage = ResearchResult.from_response(response).usage
    assert usage.input_cost_usd == pytest.approx(0.00021)
    assert (usage.cache_creation_cost_usd, usage.cache_read_cost_usd) == (0.0002, 0.00001)
    assert (usage.cache_creation_tokens, usage.cache_read_tokens) == (1800, 1200)
    assert usage.output_cost_usd == 0.00004
    assert usage.tool_calls == {'fetch_url': 1}
    assert usage.tool_costs_usd == {'fetch_url': 0.0035}
    assert usage.tool_tokens == {'fetch_url': 11200}
    assert usage.breakdown() == (
        'input $0.0002 (cache write $0.0002, cache read $0.0000), output $0.0000, fetch_url 1 call $0.0035'
    )


def test_search_web_is_billed_per_search_as_the_api_reports_it():
    """Live fact: cfdude/mcp-perplexity-pro tests/fixtures/agent_fast.json, captured 2026-10-09: search_web is billed
    $0.001 per search (invocation and cost_usd, and tool_calls_cost_details)."""

    usage = ResearchResult.from_response(
        parse_response(run([search_item(1, 'https://a.example/'), message('A [1]')], usage=search_usage(3)))
    ).usage
    assert usage.tool_calls == {'search_web': 3}
    assert usage.tool_costs_usd == {'search_web': pytest.approx(0.003)}
    assert usage.input_cost_usd == pytest.approx(0.00022)


def test_a_tool_detail_that_is_not_an_object_is_dropped_not_fatal():
    response = parse_response(
        {
            'id': 'resp_x',
            'status': 'completed',
            'usage': {'tool_calls_details': {'odd': 3, 'search_web': {'invocation': 2}}},
        }
    )
    assert response.usage is not None
    assert list(response.usage.tool_calls_details or {}) == ['search_web']


def test_a_cancelled_run_keeps_what_it_found_and_names_no_model():
    """Live fact: cfdude/mcp-perplexity-pro tests/fixtures/agent_background_cancelled.json, captured 2026-10-09: a
    cancelled run keeps its output items, with error {code: cancelled}, incomplete_details {reason: cancelled},
    usage null, and model still the effort's name."""

    result = ResearchResult.from_response(
        parse_response(cancelled([search_item(1, 'https://a.example/', 'https://b.example/')]))
    )
    assert result.status == 'cancelled' and result.done
    assert [s.url for s in result.sources] == ['https://a.example/', 'https://b.example/']
    assert result.error == 'cancelled'
    assert result.model is None  # 'medium' is the effort, not a model
    assert result.usage.cost_usd is None and result.usage.breakdown() == ''
    assert result.progress.searches == 1 and result.progress.results_seen == 2


def test_a_running_snapshot_names_no_model_and_counts_its_partial_output():
    """Live fact: cfdude/mcp-perplexity-pro tests/fixtures/agent_background_in_progress.json, captured 2026-10-09:
    an in_progress retrieve carries the search and fetch items reached so far, and model is the effort's name."""

    response = parse_response(running([search_item(11, 'https://a.example/'), fetch_item('https://b.example/')]))
    result = ResearchResult.from_response(response)
    assert not result.done and result.model is None
    assert (result.progress.searches, result.progress.results_seen, result.progress.pages_fetched) == (1, 1, 1)
    assert [s.url for s in result.sources] == ['https://a.example/', 'https://b.example/']
