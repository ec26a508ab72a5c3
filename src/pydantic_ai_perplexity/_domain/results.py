"""What a research run found, read once from the wire: answer, sources, verified citations, progress, cost.

The Agent API sends no `output_text` and no top-level citations: the answer is the text of the `message`
items, sources are the results of every `search_results` item and the pages of every `fetch_url_results` item, and
the answer's `[n]` / `[web:n]` markers point at those results' ids (a fetched page: its place among the fetched
pages, from 0). `ResearchResult.from_response` does that reading once, so every way in (toolset,
MCP server, CLI, notebooks) shows the same thing. A marker that points at no source is reported in
`orphan_markers`, never guessed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Unpack
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field

from .._base.efforts import EFFORTS
from .._base.errors import InvalidArgumentError
from ..client._models import (
    RESERVED_TOOL_NAMES,
    TERMINAL_STATUSES,
    FetchUrlResultsItem,
    FinanceResultsItem,
    FunctionCallItem,
    ImageSearchResultsItem,
    PeopleSearchResultsItem,
    Response,
    ResponseCost,
    SandboxResultsItem,
    SearchResultsItem,
    ShareFileItem,
    ToolCallDetail,
)
from .display_slot import DISPLAY
from .steps import Progress, StepReducer

if TYPE_CHECKING:
    from .calls import RunKeywords, RunsResearch

__all__ = (
    'MARKER',
    'Citation',
    'FinanceRecord',
    'FunctionCall',
    'Image',
    'Person',
    'Progress',
    'ResearchResult',
    'SandboxRun',
    'SharedFile',
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
    """A web page the run found or read; `n` is its number in rendered text, `ids` the numbers the answer's markers use
    for it (search result ids; for a fetched page, its place among the fetched pages), `fetched` whether the run read
    the page itself (`fetch_url`)."""

    n: int
    url: str
    title: str = ''
    snippet: str = ''
    date: str | None = None
    last_updated: str | None = None
    ids: list[int] = Field(default_factory=list[int])
    cited: bool = False
    fetched: bool = False

    @property
    def domain(self) -> str:
        """The page's host without `www.`."""
        try:
            return (urlsplit(self.url).hostname or '').removeprefix('www.')
        except ValueError:  # a page's URL with a broken host, e.g. an unclosed IPv6 bracket
            return ''


class Image(_Model):
    """An image the run's `image_search` found: the image's address and the page it is on (both from the web)."""

    url: str
    origin_url: str | None = None
    title: str | None = None
    width: int | None = None
    height: int | None = None


class Person(_Model):
    """A person the run's `people_search` found: a profile page (also among the sources, so markers resolve)."""

    name: str
    url: str
    summary: str = ''


class FinanceRecord(_Model):
    """A record the run's `finance_search` found: its category, tickers, the pages it came from, and every other field
    as the API sent it (`data`)."""

    category: str = ''
    tickers: list[str] = Field(default_factory=list[str])
    sources: list[str] = Field(default_factory=list[str])
    data: dict[str, Any] = Field(default_factory=dict[str, Any])


class SandboxRun(_Model):
    """Code the run executed in its sandbox and what it printed (`stdout`/`stderr` of every execution, joined)."""

    code: str
    language: str | None = None
    status: str | None = None
    stdout: str = ''
    stderr: str = ''
    exit_code: int | None = None


class SharedFile(_Model):
    """A file the sandbox shared. `url` is the API's path to its content (it needs the API key to download)."""

    filename: str = ''
    url: str | None = None
    size_bytes: int | None = None
    file_id: str | None = None
    error: str | None = None


class FunctionCall(_Model):
    """A call the run made of a local function (`functions=`): its arguments as sent (JSON text), and once run here,
    the output sent back (`error` when the call failed or its arguments did not fit)."""

    name: str
    call_id: str
    arguments: str = ''
    output: str | None = None
    error: str | None = None


class Citation(_Model):
    """One marker in the answer resolved to a source: `answer[start:end] == marker`."""

    marker: str
    source_id: int
    source_n: int | None
    start: int
    end: int


class Usage(_Model):
    """Tokens and cost as the API billed them (`usage.cost`); the costs are `None` until the API reports them.

    `input_cost_usd` is the whole input spend: live runs bill input as cache writes and reads (`cache_creation_cost`,
    `cache_read_cost`) with `input_cost: 0`, so it adds the three. Each tool's calls, cost and the tokens of the model
    it ran (a fetched page is read by a model: `fetch_url` tokens) are per tool name.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    reasoning_tokens: int = 0
    cache_creation_tokens: int = 0
    cache_read_tokens: int = 0
    cost_usd: float | None = None
    input_cost_usd: float | None = None
    cache_creation_cost_usd: float | None = None
    cache_read_cost_usd: float | None = None
    output_cost_usd: float | None = None
    tool_calls_cost_usd: float | None = None
    tool_costs_usd: dict[str, float] = Field(default_factory=dict[str, float])
    tool_calls: dict[str, int] = Field(default_factory=dict[str, int])
    tool_tokens: dict[str, int] = Field(default_factory=dict[str, int])

    def breakdown(self) -> str:
        """The cost in parts, e.g. `input $0.0002 (cache write $0.0002, cache read $0.0000), output $0.0000, fetch_url
        1 call $0.0036` (empty when the API reported no cost)."""
        if self.cost_usd is None:
            return ''
        parts: list[str] = []
        if self.input_cost_usd is not None:
            parts.append(self._input_part(self.input_cost_usd))
        if self.output_cost_usd is not None:
            parts.append(f'output ${self.output_cost_usd:.4f}')
        parts += [self._tool_part(tool) for tool in sorted(set(self.tool_costs_usd) | set(self.tool_calls))]
        return ', '.join(parts)

    def _input_part(self, input_cost: float) -> str:
        """`input $x`, with what writing and reading the cache cost of it when either did."""
        cache = [
            f'{label} ${value:.4f}'
            for label, value in (
                ('cache write', self.cache_creation_cost_usd),
                ('cache read', self.cache_read_cost_usd),
            )
            if value
        ]
        return f'input ${input_cost:.4f}' + (f' ({", ".join(cache)})' if cache else '')

    def _tool_part(self, tool: str) -> str:
        """`tool N calls $x`: a tool's calls and cost, each where the API reported it."""
        calls = self.tool_calls.get(tool)
        counted = f' {calls} call{"s" if calls != 1 else ""}' if calls is not None else ''
        cost = self.tool_costs_usd.get(tool)
        return f'{tool}{counted}' + (f' ${cost:.4f}' if cost is not None else '')

    def cost_details(self) -> str | None:
        """The billed cost's parts as compact JSON, as the ledger stores them (None when no cost was reported)."""
        if self.cost_usd is None:
            return None
        return self.model_dump_json(
            include={
                'cost_usd', 'input_cost_usd', 'cache_creation_cost_usd', 'cache_read_cost_usd', 'output_cost_usd',
                'tool_calls_cost_usd', 'tool_costs_usd', 'tool_calls', 'tool_tokens', 'cache_creation_tokens',
                'cache_read_tokens',
            },
            exclude_defaults=True,
        )  # fmt: skip

    @classmethod
    def from_cost_details(cls, text: str | None) -> Usage | None:
        """The `Usage` a ledger row's `cost_details` holds; None if it holds none or cannot be read."""
        if not text:
            return None
        try:
            return cls.model_validate_json(text)
        except ValueError:
            return None


def _usage_from(response: Response) -> Usage:
    """The response's usage and billed cost, in parts (empty when it reports none)."""
    wire = response.usage
    if wire is None:
        return Usage()
    tools = wire.tool_calls_details or {}
    cost = wire.cost or ResponseCost()  # no cost reported: every part None
    return Usage(
        input_tokens=wire.input_tokens,
        output_tokens=wire.output_tokens,
        total_tokens=wire.total_tokens or wire.input_tokens + wire.output_tokens,
        reasoning_tokens=int((wire.output_tokens_details or {}).get('reasoning_tokens') or 0),
        cache_creation_tokens=wire.cache_creation_input_tokens,
        cache_read_tokens=wire.cache_read_input_tokens,
        cost_usd=cost.total_cost,
        input_cost_usd=wire.input_spend,
        cache_creation_cost_usd=cost.cache_creation_cost,
        cache_read_cost_usd=cost.cache_read_cost,
        output_cost_usd=cost.output_cost,
        tool_calls_cost_usd=cost.tool_calls_cost,
        tool_costs_usd=_tool_costs(cost, tools),
        tool_calls={name: detail.invocation for name, detail in tools.items()},
        tool_tokens=_tool_tokens(tools),
    )


def _error_of(response: Response) -> str | None:
    """What went wrong in a run: the API's error message, or why it ended incomplete; None for a run that did not."""
    if response.error is not None:
        return response.error.message or str(response.error.code or response.error.type or 'error')
    if response.status == 'incomplete':
        reason = (response.incomplete_details or {}).get('reason')
        return f'incomplete: {reason}' if reason else 'incomplete'
    return None


def _json_or_none(answer: str) -> Any:
    """A structured answer parsed from JSON; None when it is empty or not JSON."""
    if not answer:
        return None
    try:
        return json.loads(answer)
    except ValueError:
        return None


def _tool_costs(cost: ResponseCost, tools: Mapping[str, ToolCallDetail]) -> dict[str, float]:
    """Each tool's cost: from the cost's breakdown, else from the tool's own details."""
    tool_costs = dict(cost.tool_calls_cost_details or {})
    for name, detail in tools.items():
        if name not in tool_costs and detail.cost_usd is not None:
            tool_costs[name] = detail.cost_usd
    return tool_costs


def _tool_tokens(tools: Mapping[str, ToolCallDetail]) -> dict[str, int]:
    """The tokens each tool that reported them used (input and output)."""
    return {
        name: sum(t.input_tokens + t.output_tokens for t in detail.token_usage)
        for name, detail in tools.items()
        if detail.token_usage
    }


def _sources_from(response: Response) -> tuple[list[Source], dict[int, Source]]:
    """Every page the run found or read, one `Source` per URL, and what each marker number points at.

    A marker's number is a search result's `id` (`[3]`, `[web:3]`). Fetched pages carry no id: a run that only fetched
    answers `[web:0]` for its first page, so a fetched page is numbered by its place among the run's fetched pages
    (from 0) wherever no search result has that id. Live fact: cfdude/mcp-perplexity-pro
    tests/fixtures/agent_low_fetch_url.json and agent_background_completed.json, captured 2026-10-09.
    """
    by_url: dict[str, Source] = {}
    by_id: dict[int, Source] = {}

    def source_for(url: str, title: str, snippet: str, date: str | None, last_updated: str | None) -> Source:
        key = normalize_url(url)
        source = by_url.get(key)
        if source is None:
            source = by_url[key] = Source(
                n=len(by_url) + 1, url=url, title=title, snippet=snippet, date=date, last_updated=last_updated
            )
        return source

    # A people search's profile pages are cited like search results (same shape, same ids).
    for item in [*response.items(SearchResultsItem), *response.items(PeopleSearchResultsItem)]:
        for r in item.results:
            if not r.url:
                continue
            source = source_for(r.url, r.title, r.snippet, r.date, r.last_updated)
            if r.id is not None and r.id not in by_id:
                by_id[r.id] = source
                source.ids.append(r.id)
    pages = [page for item in response.items(FetchUrlResultsItem) for page in item.contents]
    for place, page in enumerate(pages):
        if not page.url:
            continue
        source = source_for(page.url, page.title or '', page.snippet or '', None, None)
        source.fetched = True
        if place not in by_id:
            by_id[place] = source
            source.ids.append(place)
    return list(by_url.values()), by_id


def _tool_data(response: Response) -> dict[str, Any]:
    """What the opt-in tools found, as data: images, people, finance records, sandbox runs and shared files."""
    images = [
        Image(url=r.image_url, origin_url=r.origin_url, title=r.title, width=r.width, height=r.height)
        for item in response.items(ImageSearchResultsItem)
        for r in item.results
        if r.image_url
    ]
    people = [
        Person(name=r.title or r.url, url=r.url, summary=r.snippet)
        for item in response.items(PeopleSearchResultsItem)
        for r in item.results
        if r.url
    ]
    finance = [
        FinanceRecord(
            category=r.category,
            tickers=list(r.tickers or ()),
            sources=list(r.sources or ()),
            data=dict(r.model_extra or {}),
        )
        for item in response.items(FinanceResultsItem)
        for r in item.results
    ]
    sandbox = [
        SandboxRun(
            code=item.code,
            language=item.language,
            status=item.status,
            stdout=''.join(out.stdout for out in item.results),
            stderr=''.join(out.stderr for out in item.results),
            exit_code=next((out.exit_code for out in reversed(item.results) if out.exit_code is not None), None),
        )
        for item in response.items(SandboxResultsItem)
    ]
    files = [
        SharedFile(
            filename=item.filename or '',
            url=item.url,
            size_bytes=item.size_bytes,
            file_id=item.file_id,
            error=item.error,
        )
        for item in response.items(ShareFileItem)
    ]
    calls = [
        FunctionCall(name=item.name, call_id=item.call_id, arguments=item.arguments)
        for item in response.items(FunctionCallItem)
        if item.call_id and item.name not in RESERVED_TOOL_NAMES
    ]
    return {
        'images': images, 'people': people, 'finance': finance, 'sandbox': sandbox, 'files': files,
        'function_calls': calls,
    }  # fmt: skip


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


def _served_by(response: Response) -> str | None:
    """The model that served a run that has ended; `None` while it goes, or when `model` still names the effort.

    Live fact: `model` is the effort's name (`"medium"`) until the run ends, and stays so on a cancelled run
    (cfdude/mcp-perplexity-pro tests/fixtures/agent_background_cancelled.json, captured 2026-10-09).
    """
    model = response.model
    if not response.done or not model or model.split('@', 1)[0] in EFFORTS:
        return None
    return model


def _ts(value: int | None) -> datetime | None:
    return datetime.fromtimestamp(value, UTC) if value else None


class ResearchResult(_Model):
    """The outcome of a research run, complete or still going.

    `status` is the API's: `queued`, `in_progress`, `requires_action`, `completed`, `incomplete`, `failed` or
    `cancelled`. A run still going (`done` false) is a hand-off: collect it later by `response_id`. Failed, incomplete
    and cancelled runs are results too, with `error` saying why; a cancelled run keeps what it found before the cancel
    (its sources, any answer), with no usage. `emulated` is true when an emulator (the built-in
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
    #: What a caller (and a model) must know about how this result came about, in a sentence each: e.g. that a
    #: follow-up could not continue its earlier run and was given that run's question and answer as context instead.
    notes: list[str] = Field(default_factory=list[str])
    #: Served from an earlier run of the same question with the same options (`reuse_within`): nothing was researched
    #: or billed for it; `notes` says which run and how long ago.
    reused: bool = False
    #: What the opt-in tools (`extra_tools=`) found: images (`image_search`), people (`people_search`), finance
    #: records (`finance_search`), code the sandbox ran and the files it shared (`sandbox`). All of it is web data.
    images: list[Image] = Field(default_factory=list[Image])
    people: list[Person] = Field(default_factory=list[Person])
    finance: list[FinanceRecord] = Field(default_factory=list[FinanceRecord])
    sandbox: list[SandboxRun] = Field(default_factory=list[SandboxRun])
    files: list[SharedFile] = Field(default_factory=list[SharedFile])
    #: Local functions (`functions=`) the run called, in order, with what each answered: every round of a run that
    #: went through `requires_action`. Calls not answered yet (a run left in `requires_action`) have no `output`.
    function_calls: list[FunctionCall] = Field(default_factory=list[FunctionCall])
    #: For a hand-off from a tool: the `poll` number its next `perplexity_research_result` call passes (one more each
    #: time), so that consecutive collects of a long run differ. None outside the tools.
    poll: int | None = None

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

    async def follow_up(
        self, question: str, *, researcher: RunsResearch, **keywords: Unpack[RunKeywords]
    ) -> ResearchResult:
        """Ask `question` as a follow-up of this run: the new run continues this one's context (`previous_response_id`).

        When the API no longer knows this run, the new run gets its question and answer as context instead, and its
        `notes` say so. Takes `Researcher.run`'s keywords.
        """
        return await researcher.run(question, **self._follow_up_keywords(keywords))

    def follow_up_sync(
        self, question: str, *, researcher: RunsResearch, **keywords: Unpack[RunKeywords]
    ) -> ResearchResult:
        """`follow_up` for scripts (`Researcher.run_sync`); where an event loop runs (Jupyter), await `follow_up`."""
        return researcher.run_sync(question, **self._follow_up_keywords(keywords))

    def _follow_up_keywords(self, keywords: RunKeywords) -> RunKeywords:
        if not self.response_id:
            raise InvalidArgumentError(
                'This result has no run to follow up (it was never started): ask the question in full instead.',
                argument='previous_response_id',
            )
        return {**keywords, 'previous_response_id': self.response_id}

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
        sources, by_id = _sources_from(response)
        citations, orphans = _citations_from(answer, by_id)
        if progress is None:
            reducer = StepReducer(response.id)
            reducer.snapshot(response)
            progress = reducer.progress
            progress.elapsed_s = 0.0
            progress.answer_chars = len(answer)
        return cls(
            response_id=response.id,
            status=response.status,
            answer=answer,
            sources=sources,
            citations=citations,
            orphan_markers=orphans,
            progress=progress,
            usage=_usage_from(response),
            model=_served_by(response),
            effort=effort or response.effort or response.preset,
            query=query,
            error=_error_of(response),
            data=_json_or_none(answer) if structured else None,
            created_at=_ts(response.created_at),
            completed_at=_ts(response.completed_at),
            **_tool_data(response),
        )

    def to_markdown(self) -> str:
        """The answer with numbered sources and a status line, as Markdown (for people, not models)."""
        return DISPLAY.need().result_to_markdown(self)

    def _repr_markdown_(self) -> str:
        return self.to_markdown()

    def _repr_html_(self) -> str:
        return DISPLAY.need().result_to_html(self)
