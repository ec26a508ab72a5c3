"""What a research run found, read once from the wire: answer, sources, verified citations, progress, cost.

The Agent API sends no `output_text` and no top-level citations: the answer is the text of the `message`
items, sources are the results of every `search_results` item, and the answer's `[n]` / `[web:n]` markers
point at those results' ids. `ResearchResult.from_response` does that reading once, so every way in (toolset,
MCP server, CLI, notebooks) shows the same thing. A marker that points at no source is reported in
`orphan_markers`, never guessed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field

from .client._models import TERMINAL_STATUSES, Response, SearchResultsItem, field_of
from .steps import Progress, StepReducer

__all__ = (
    'MARKER',
    'Citation',
    'Progress',
    'ResearchResult',
    'Source',
    'Usage',
    'marker_refs',
    'normalize_url',
)

#: A citation marker in an answer: `[7]`, `[web:7]`, or a group such as `[7, 9]` or `[web:7, web:9]`.
MARKER = re.compile(r'\[(?:web:)?\d+(?:\s*,\s*(?:web:)?\d+)*\]')
_MARKER_REF = re.compile(r'(?:web:)?(\d+)')
_TRACKING_PARAMS = ('utm_', 'fbclid', 'gclid', 'mc_cid', 'mc_eid', 'ref_src')


def normalize_url(url: str) -> str:
    """A URL reduced to what identifies the page: lower-case host without `www.`, no fragment, no tracking params."""
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return url.strip()
    try:
        host = (parts.hostname or '').lower().removeprefix('www.')
        port = parts.port
    except ValueError:  # a page's URL with a broken host or port: keep it as it is
        return url.strip()
    if port and port not in (80, 443):
        host = f'{host}:{port}'
    query = urlencode(
        sorted((k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if not k.startswith(_TRACKING_PARAMS))
    )
    path = parts.path.rstrip('/') or ''
    scheme = parts.scheme.lower() if parts.scheme.lower() not in ('http', 'https') else 'https'
    return urlunsplit((scheme, host, path, query, ''))


def marker_refs(marker: str) -> list[tuple[str, int]]:
    """Each source reference of a marker as (as written, result id): `[web:7, 9]` -> `[('web:7', 7), ('9', 9)]`."""
    return [(m.group(0), int(m.group(1))) for m in _MARKER_REF.finditer(marker)]


class _Model(BaseModel):
    model_config = ConfigDict(extra='forbid')


class Source(_Model):
    """A web page the run found; `n` is its number in rendered text, `ids` the API's result ids for it."""

    n: int
    url: str
    title: str = ''
    snippet: str = ''
    date: str | None = None
    last_updated: str | None = None
    ids: list[int] = Field(default_factory=list[int])
    cited: bool = False

    @property
    def domain(self) -> str:
        """The page's host without `www.`."""
        try:
            return (urlsplit(self.url).hostname or '').removeprefix('www.')
        except ValueError:  # a page's URL with a broken host, e.g. an unclosed IPv6 bracket
            return ''


class Citation(_Model):
    """One marker in the answer resolved to a source: `answer[start:end] == marker`."""

    marker: str
    source_id: int
    source_n: int | None
    start: int
    end: int


class Usage(_Model):
    """Tokens and cost as the API billed them (`usage.cost`); `cost_usd` is `None` until the API reports it."""

    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    reasoning_tokens: int = 0
    cost_usd: float | None = None
    input_cost_usd: float | None = None
    output_cost_usd: float | None = None
    tool_calls_cost_usd: float | None = None
    tool_costs_usd: dict[str, float] = Field(default_factory=dict[str, float])
    tool_calls: dict[str, int] = Field(default_factory=dict[str, int])


def _invocations(detail: Any) -> int:
    count = field_of(detail, 'invocation')
    return count if isinstance(count, int) else 0


def _usage_from(response: Response) -> Usage:
    wire = response.usage
    if wire is None:
        return Usage()
    cost = wire.cost
    tool_calls = {k: _invocations(v) for k, v in (wire.tool_calls_details or {}).items()}
    return Usage(
        input_tokens=wire.input_tokens,
        output_tokens=wire.output_tokens,
        total_tokens=wire.total_tokens or wire.input_tokens + wire.output_tokens,
        reasoning_tokens=int((wire.output_tokens_details or {}).get('reasoning_tokens') or 0),
        cost_usd=cost.total_cost if cost else None,
        input_cost_usd=cost.input_cost if cost else None,
        output_cost_usd=cost.output_cost if cost else None,
        tool_calls_cost_usd=cost.tool_calls_cost if cost else None,
        tool_costs_usd=dict(cost.tool_calls_cost_details or {}) if cost else {},
        tool_calls=tool_calls,
    )


def _sources_from(items: Iterable[SearchResultsItem]) -> tuple[list[Source], dict[int, Source]]:
    by_url: dict[str, Source] = {}
    by_id: dict[int, Source] = {}
    for item in items:
        for r in item.results:
            if not r.url:
                continue
            key = normalize_url(r.url)
            source = by_url.get(key)
            if source is None:
                source = Source(
                    n=len(by_url) + 1,
                    url=r.url,
                    title=r.title,
                    snippet=r.snippet,
                    date=r.date,
                    last_updated=r.last_updated,
                )
                by_url[key] = source
            if r.id is not None and r.id not in by_id:
                by_id[r.id] = source
                source.ids.append(r.id)
    return list(by_url.values()), by_id


def _citations_from(answer: str, by_id: dict[int, Source]) -> tuple[list[Citation], list[str]]:
    citations: list[Citation] = []
    orphans: list[str] = []
    for match in MARKER.finditer(answer):
        for _, number in marker_refs(match.group(0)):
            source = by_id.get(number)
            if source is None:
                marker = f'[{number}]'
                if marker not in orphans:
                    orphans.append(marker)
                continue
            source.cited = True
            citations.append(
                Citation(
                    marker=match.group(0), source_id=number, source_n=source.n, start=match.start(), end=match.end()
                )
            )
    return citations, orphans


def _ts(value: int | None) -> datetime | None:
    return datetime.fromtimestamp(value, UTC) if value else None


class ResearchResult(_Model):
    """The outcome of a research run, complete or still going.

    `status` is the API's: `queued`, `in_progress`, `completed`, `incomplete`, `failed` or `cancelled`. A run
    still going (`done` false) is a hand-off: collect it later by `response_id`. Failed, incomplete and
    cancelled runs are results too, with `error` saying why. `emulated` is true when an emulator (the built-in
    one, or a replay of a recording) answered, not Perplexity: such a result is never a real answer.
    """

    response_id: str
    status: str
    answer: str = ''
    sources: list[Source] = Field(default_factory=list[Source])
    citations: list[Citation] = Field(default_factory=list[Citation])
    orphan_markers: list[str] = Field(default_factory=list[str])
    progress: Progress = Field(default_factory=Progress)
    usage: Usage = Field(default_factory=Usage)
    model: str | None = None
    effort: str | None = None
    query: str | None = None
    error: str | None = None
    data: Any = None
    created_at: datetime | None = None
    completed_at: datetime | None = None
    emulated: bool = False
    #: The limits lowered to fit the budget (only with `on_budget="tighten"`), as (what the request would have sent,
    #: what it sent): e.g. `{"max_steps": (8, 3), "max_output_tokens": (8192, 2048)}`. Empty: nothing was lowered.
    tightened: dict[str, tuple[int, int]] = Field(default_factory=dict[str, tuple[int, int]])

    @property
    def done(self) -> bool:
        """Whether the run reached a terminal status."""
        return self.status in TERMINAL_STATUSES

    @property
    def cost_usd(self) -> float | None:
        """What the run cost as billed, when the API reported it."""
        return self.usage.cost_usd

    @property
    def cited_sources(self) -> list[Source]:
        """The sources the answer's markers point at."""
        return [s for s in self.sources if s.cited]

    @classmethod
    def from_response(
        cls,
        response: Response,
        *,
        progress: Progress | None = None,
        effort: str | None = None,
        query: str | None = None,
        structured: bool = False,
    ) -> ResearchResult:
        """Read a wire `Response`. With `structured`, the answer is parsed as JSON into `data` when it is JSON."""
        answer = response.output_text
        sources, by_id = _sources_from(response.items(SearchResultsItem))
        citations, orphans = _citations_from(answer, by_id)
        if progress is None:
            reducer = StepReducer(response.id)
            reducer.snapshot(response)
            progress = reducer.progress
            progress.elapsed_s = 0.0
            progress.answer_chars = len(answer)
        data: Any = None
        if structured and answer:
            try:
                data = json.loads(answer)
            except ValueError:
                data = None
        error = None
        if response.error is not None:
            error = response.error.message or str(response.error.code or response.error.type or 'error')
        elif response.status == 'incomplete':
            reason = (response.incomplete_details or {}).get('reason')
            error = f'incomplete: {reason}' if reason else 'incomplete'
        return cls(
            response_id=response.id,
            status=response.status,
            answer=answer,
            sources=sources,
            citations=citations,
            orphan_markers=orphans,
            progress=progress,
            usage=_usage_from(response),
            model=response.model if response.done else None,
            effort=effort or response.effort or response.preset,
            query=query,
            error=error,
            data=data,
            created_at=_ts(response.created_at),
            completed_at=_ts(response.completed_at),
        )

    def to_markdown(self) -> str:
        """The answer with numbered sources and a status line, as Markdown (for people, not models)."""
        from .display import result_to_markdown  # presentation, imported when used: no import-time cycle

        return result_to_markdown(self)

    def _repr_markdown_(self) -> str:
        return self.to_markdown()

    def _repr_html_(self) -> str:
        from .display import result_to_html  # presentation, imported when used: no import-time cycle

        return result_to_html(self)
