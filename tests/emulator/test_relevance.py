"""Offline answers are honest: retrieval ranks by relevance (BM25), cites only what matches, and says so when
the corpus has nothing on a question, in the same answer shape."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx2
import pytest

from pydantic_ai_perplexity.client._models import parse_response

OFF_TOPIC = ['How do octopuses change colour?', 'Byzantine coinage under Justinian']


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
    assert search_corpus('How do octopuses change colour?') == []
    # The notice of a question it has nothing on says the corpus covers sleep: a sleep question on travel is answered.
    assert search_corpus('Does melatonin help with jet lag?')[0].title.startswith('Jet lag')


ROOT = Path(__file__).parents[2]


def asked_questions() -> list[str]:
    """Every question a person meets first: quoted after `research` in the README and in the CLI's help texts, and
    each quoted question (a capitalised sentence ending in `?`) in the notebooks' code."""
    found: list[str] = []
    for path in (ROOT / 'README.md', *sorted((ROOT / 'src' / 'pydantic_ai_perplexity' / 'cli').rglob('*.py'))):
        found += re.findall(r'research "([^"]{8,})"', path.read_text(encoding='utf-8'))
    for notebook in sorted((ROOT / 'notebooks').glob('*.ipynb')):
        for cell in json.loads(notebook.read_text(encoding='utf-8'))['cells']:
            if cell['cell_type'] == 'code':
                found += re.findall(r"""['"]([A-Z][^'"\n]{10,}\?)['"]""", ''.join(cell['source']))
    return sorted(set(found))


def _word(word: str) -> str:
    """A word's crude root, so `pumps` is `pump` and `battery` is `batteries`: a plural's `s` off, then 5 letters."""
    return (word[:-1] if word.endswith('s') and len(word) > 3 else word)[:5]


def key_terms(text: str) -> set[str]:
    """The words of `text` that say its topic (stop words dropped), as roots."""
    from pydantic_ai_perplexity.emulator._corpus import terms

    return {_word(t) for t in terms(text)}


def test_the_collector_finds_the_questions_people_are_shown():
    asked = asked_questions()
    assert len(asked) >= 12, asked  # README, --help examples and the three notebooks
    for question in ('How do solid-state batteries work?', 'How do heat pumps work in cold climates?'):
        assert question in asked


@pytest.mark.parametrize('question', asked_questions())
def test_every_question_the_docs_ask_is_answered_on_its_topic(client: httpx2.Client, question: str):
    """The Quickstart's question, the --help examples and the notebooks' questions get answers about what they ask:
    at least half the question's key terms in the answer's own sentences, each marker a page that names the topic."""
    response = create(client, input=question, effort='low')
    text = parse_response(response).output_text
    found = {page['id']: page for page in results(response)}
    assert text.startswith('Here is what the sources say'), text
    cited = markers(text)
    assert cited and cited <= set(found), text
    keys = key_terms(question)
    sentences = key_terms(text.split('\n', 1)[1])  # the bullets, not the lead line that repeats the question
    assert len(keys & sentences) * 2 >= len(keys), (keys, text)
    for n in cited:
        page = found[n]
        assert keys & key_terms(f'{page["title"]} {page["snippet"]}'), (question, page['title'])
