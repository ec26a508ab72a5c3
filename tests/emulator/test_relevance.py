"""Offline answers are honest: retrieval ranks by relevance (BM25), cites only what matches, and says so when
the corpus has nothing on a question, in the same answer shape."""

from __future__ import annotations

import re
from typing import Any

import httpx2
import pytest

from pydantic_ai_perplexity.client._models import parse_response

OFF_TOPIC = ['Does melatonin help with jet lag?', 'Byzantine coinage under Justinian']


def create(client: httpx2.Client, **body: Any) -> dict[str, Any]:
    response = client.post('/v1/agent', json=body)
    assert response.status_code == 200, response.text
    return response.json()


def results(response: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for item in response['output'] if item['type'] == 'search_results' for r in item['results']]


def markers(text: str) -> set[int]:
    return {int(n) for n in re.findall(r'\[(\d+)\]', text)}


@pytest.mark.parametrize('question', OFF_TOPIC)
@pytest.mark.parametrize('effort', ['fast', 'medium'])
def test_a_question_the_corpus_knows_nothing_about_gets_a_plain_no(client: httpx2.Client, question: str, effort: str):
    response = create(client, input=question, effort=effort)
    parsed = parse_response(response)
    assert parsed.status == 'completed'
    text = parsed.output_text
    assert text.startswith(f'I found no sources on "{question.rstrip("?")}"')
    assert 'cannot answer it from sources' in text
    assert markers(text) == set()
    for boilerplate in ('asyncio', 'Research is systematic', 'sources agree', 'Here is what the sources say'):
        assert boilerplate not in text
    # Same shape: the searches ran (and are billed) but found nothing, so no page is listed or fetched.
    kinds = [item['type'] for item in response['output']]
    assert kinds[-1] == 'message' and 'search_results' in kinds and 'fetch_url_results' not in kinds
    assert results(response) == []
    assert response['usage']['tool_calls_details']['search_web']['invocation'] >= 1


@pytest.mark.parametrize(
    ('question', 'expected'),
    [
        ('What is the EU AI Act?', 'AI Act'),
        ('How much sleep do adults need?', 'Sleep'),
        ('How do heat pumps work?', 'heat pump'),
        ('latest developments in quantum computing', 'Quantum'),
    ],
)
def test_an_on_topic_question_cites_only_matching_pages(client: httpx2.Client, question: str, expected: str):
    response = create(client, input=question, effort='low')
    text = parse_response(response).output_text
    found = results(response)
    assert found, 'an on-topic question finds pages'
    # Every listed page is on the question's topic (its title or snippet names it): no unrelated filler.
    for page in found:
        assert expected.casefold() in (page['title'] + ' ' + page['snippet']).casefold(), page['title']
    cited = markers(text)
    assert cited and cited <= {page['id'] for page in found}  # markers point at real search_results ids
    assert text.startswith('Here is what the sources say') and 'sources agree' not in text


def test_the_search_api_lists_only_matching_pages(client: httpx2.Client):
    off = client.post('/search', json={'query': 'Byzantine coinage under Justinian'})
    assert off.status_code == 200 and off.json()['results'] == []
    on = client.post('/search', json={'query': 'EU AI Act', 'max_results': 10})
    titles = [r['title'] for r in on.json()['results']]
    assert titles and all('AI Act' in t for t in titles)


def test_ranking_puts_the_best_page_first():
    from pydantic_ai_perplexity.emulator._corpus import search_corpus

    assert search_corpus('How much sleep do adults need?')[0].title == 'How Much Sleep Do You Need?'
    assert search_corpus('heat pumps')[0].title.startswith('Analysis: how heat pumps')
    assert search_corpus('Does melatonin help with jet lag?') == []
