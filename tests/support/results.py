"""Results to render, and a reader of the HTML they render to: shared by the rendering and display tests."""

from __future__ import annotations

from html.parser import HTMLParser
from typing import Any

from pydantic_ai_perplexity._domain.results import ResearchResult
from pydantic_ai_perplexity.client._models import parse_response


def make_result(answer: str = 'Fact one [1]. Fact two [2].', **kw: Any) -> ResearchResult:
    """A completed result with three sources (two cited by the default answer); `kw` overrides response fields."""
    results = [
        {'id': 1, 'url': 'https://a.example/1', 'title': 'Page A', 'snippet': 'aaa'},
        {'id': 2, 'url': 'https://b.example/2', 'title': 'Page B', 'snippet': 'bbb'},
        {'id': 3, 'url': 'https://c.example/3', 'title': 'Page C', 'snippet': 'ccc'},
    ]
    response = parse_response(
        {
            'id': 'resp_r',
            'status': kw.pop('status', 'completed'),
            'model': 'openai/gpt-5.5',
            'output': [
                {'type': 'search_results', 'results': kw.pop('results', results)},
                {'type': 'message', 'content': [{'type': 'output_text', 'text': answer}]},
            ],
            'usage': {'input_tokens': 10, 'output_tokens': 5, 'cost': {'total_cost': 0.0123}},
            **kw,
        }
    )
    return ResearchResult.from_response(response, effort='medium')


class TagCollector(HTMLParser):
    """The tags left open (`stack`), closed out of order (`errors`) and the links of an HTML page."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.links: list[str] = []
        self.errors: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag != 'br':
            self.stack.append(tag)
        if tag == 'a':
            self.links.append(dict(attrs)['href'] or '')

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack.pop() != tag:
            self.errors.append(tag)
