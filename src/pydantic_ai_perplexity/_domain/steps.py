"""Research steps: a run's stream events (and polled snapshots) read once into typed steps with running counts.

The Agent API reports a run as events (`response.reasoning.search_queries`, `response.output_item.done`, …) or,
when a wait polls, as snapshots whose output grows. `StepReducer` is the one reading of both: it pairs each step's
start with its end (a search with its results, a fetch with its pages, a remote tool call), keeps the counts
(`Progress`) and hands out `Step`s. The progress displays (CLI, notebooks), the timeline, the toolset's
`ResearchProgress` events, the MCP progress notifications and the trace all consume those steps; none of them
reads the wire or a step's wording again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from typing_extensions import TypedDict, Unpack

from .._base.statuses import END_EVENTS
from .._base.words import plural
from ..client._models import (
    AgentEvent,
    FetchUrlResultsItem,
    FinanceResultsItem,
    FunctionCallItem,
    ImageSearchResultsItem,
    McpCallItem,
    McpListToolsItem,
    MessageItem,
    OutputItem,
    PeopleSearchResultsItem,
    Response,
    SandboxResultsItem,
    SearchResultsItem,
    ShareFileItem,
    ToolSearchOutputItem,
    UnknownItem,
    field_of,
)

__all__ = ('Progress', 'Step', 'StepKind', 'StepReducer')

StepKind = Literal['search', 'results', 'fetch', 'fetched', 'mcp', 'tool', 'function', 'answer', 'status', 'other']
"""What a step is: a search sent, its results, pages asked for, pages fetched, a remote MCP tool, an opt-in tool's
output (images, people, finance records, sandbox code, a shared file), a local function the run called, the answer,
the run's end, or another output item."""

_TERMINAL = {**END_EVENTS, 'error': 'failed'}


class Progress(BaseModel):
    """How far a run got: counts only, never page text, so it is safe to show a model mid-run."""

    model_config = ConfigDict(extra='forbid')

    queries: list[str] = Field(default_factory=list[str])
    searches: int = 0
    results_seen: int = 0
    pages_fetched: int = 0
    fetch_failures: int = 0
    mcp_calls: int = 0
    #: Outputs of the opt-in tools (`extra_tools`): image, people and finance searches, sandbox runs, shared files.
    tool_outputs: int = 0
    #: Local functions the run called (`functions=`), each run here and answered.
    function_calls: int = 0
    answer_chars: int = 0
    elapsed_s: float = 0.0
    last_step: str | None = None

    def summary(self) -> str:
        """One line, e.g. `3 searches, 24 results, 5 pages fetched`."""
        parts = [plural(self.searches, 'search', 'searches'), plural(self.results_seen, 'result')]
        if self.pages_fetched or self.fetch_failures:
            parts.append(f'{plural(self.pages_fetched, "page")} fetched')
        if self.mcp_calls:
            parts.append(plural(self.mcp_calls, 'remote tool call'))
        if self.tool_outputs:
            parts.append(plural(self.tool_outputs, 'tool output'))
        if self.function_calls:
            parts.append(plural(self.function_calls, 'function call'))
        if self.answer_chars:
            parts.append(plural(self.answer_chars, 'answer character'))
        return ', '.join(parts)


@dataclass(frozen=True, slots=True, kw_only=True)
class Step:
    """One research step of a run, typed: what happened, its specifics, the counts so far, and when.

    `shown` steps are the ones people see (progress displays, `on_progress`): a search sent, its results, pages asked
    for and fetched, a remote tool call's outcome, the answer's first token. The others are bookkeeping a trace
    needs (a tool call or the answer announced, a tool list, the answer's end, an unannounced output item, the
    run's end). A step that starts something and the step that ends it share `ref`; `end` marks the latter.
    """

    kind: StepKind
    #: One short line for people, e.g. `searching: eu ai act` or `fetched 2 pages` (empty for bookkeeping steps).
    detail: str = ''
    shown: bool = True
    ref: int | None = None
    end: bool = False
    #: Queries of a search (`None` when the results came without their queries).
    queries: tuple[str, ...] | None = None
    #: How many results a search returned (`results` steps).
    results: int | None = None
    #: The result URLs of a search, the pages asked for (`fetch`) or fetched (`fetched`).
    urls: tuple[str, ...] = ()
    #: Pages asked for that did not come back (`fetched` steps).
    failed_urls: tuple[str, ...] = ()
    #: Remote MCP server label and tool name (`mcp` steps), and how many tools a list or tool search offered.
    server: str | None = None
    tool: str | None = None
    tools: int | None = None
    #: Characters of the finished answer item (the `answer` step that ends it).
    chars: int | None = None
    #: The output item type the step comes from (`mcp_call`, `mcp_list_tools`, `tool_search_output`, …).
    item_type: str | None = None
    #: The run's status at its end (`status` steps).
    status: str | None = None
    error: str | None = None
    error_code: str | None = None
    #: The counts when the step happened (a copy: later steps do not change it).
    progress: Progress = field(default_factory=Progress)
    response_id: str | None = None
    #: Seconds since the wait started.
    elapsed_s: float = 0.0

    @property
    def ok(self) -> bool:
        """Whether the step did not fail."""
        return self.error is None


class _Specifics(TypedDict, total=False):
    """The typed specifics a `Step` may carry, as the reducer hands them over."""

    ref: int | None
    end: bool
    queries: tuple[str, ...] | None
    results: int
    urls: tuple[str, ...]
    failed_urls: tuple[str, ...]
    server: str
    tool: str
    tools: int
    chars: int
    item_type: str
    status: str
    error: str | None
    error_code: str | None


class _McpSpecifics(TypedDict, total=False):
    server: str
    tool: str
    tools: int
    error: str | None
    item_type: str


def _urls(entries: Sequence[object] | None) -> tuple[str, ...]:
    urls: list[str] = []
    for entry in entries or ():
        url = field_of(entry, 'url')
        if isinstance(url, str) and url:
            urls.append(url)
    return tuple(urls)


class StepReducer:
    """Folds one run's stream events and snapshots into `Step`s and running `Progress`; one per wait.

    `observe(event)` returns the step an event makes, if any (most text deltas make none); `snapshot(response)`
    returns the steps of output items no event accounted for yet (a polled run, or a stream that never reported
    them). `progress` is the live count; each step carries a copy.
    """

    def __init__(self, response_id: str | None = None, *, started: float | None = None) -> None:
        self.response_id = response_id
        self.progress = Progress()
        self._started = time.monotonic() if started is None else started
        self._refs = 0
        self._searches: list[tuple[object, int, tuple[str, ...]]] = []  # (call_id, ref, queries), open
        self._fetches: list[tuple[int, tuple[str, ...]]] = []  # (ref, urls asked for), open
        self._items: dict[str, int] = {}  # an announced remote MCP item's id -> ref
        self._answer: int | None = None  # ref of the answer while it is being written
        self._writing = False  # the first answer token was seen
        self._ended = {'search': 0, 'fetch': 0}  # searches and fetches whose end was reported
        self._done: dict[str, int] = {}  # finished output items accounted for, per type

    # -- input --------------------------------------------------------------------------------------------------

    def observe(self, event: AgentEvent) -> Step | None:
        """The step one stream event makes, or `None` (a text delta after the first, a lifecycle event, …)."""
        if event.type == 'response.output_text.delta':  # the most frequent event by far: its own fast path
            if self._writing:
                self.progress.answer_chars += len(event.delta or '')
                return None
            self._writing = True
            step = self._step('answer', 'writing the answer', ref=self._open_answer())  # the counts before it
            self.progress.answer_chars += len(event.delta or '')
            return step
        handler = _HANDLERS.get(event.type)
        return handler(self, event) if handler is not None else None

    def snapshot(self, response: Response, *, live: bool = False) -> list[Step]:
        """The steps of `response`'s finished output items that no event or earlier snapshot accounted for.

        `live`: the snapshot was just polled while the run goes (a running retrieve carries the search and fetch items
        reached so far), so its steps are shown and described as events' are; else they arrive late and are not shown.
        """
        self.progress.elapsed_s = self._elapsed()
        known = dict(self._done)
        seen: dict[str, int] = {}
        steps: list[Step] = []
        for item in response.output:
            kind = item.type
            index = seen.get(kind, 0)
            seen[kind] = index + 1
            if index < known.get(kind, 0):  # outputs only grow: the first n items of a type are the known ones
                continue
            step = self._item_done(item, live=live, polled=live)
            if step is not None:
                steps.append(step)
        return steps

    # -- events -------------------------------------------------------------------------------------------------

    def _on_search_queries(self, event: AgentEvent) -> Step:
        queries = tuple(event.queries or ())
        p = self.progress
        p.queries.extend(queries)
        p.searches += 1
        ref = self._ref()
        self._searches.append(((event.model_extra or {}).get('call_id'), ref, queries))
        detail = f'searching: {"; ".join(queries)}' if queries else 'searching'
        return self._step('search', detail, ref=ref, queries=queries)

    def _on_search_results(self, event: AgentEvent) -> Step:
        results = event.results or []
        self.progress.results_seen += len(results)
        call_id = (event.model_extra or {}).get('call_id')
        open_ = self._searches
        index = next((i for i, (cid, _, _) in enumerate(open_) if cid == call_id), 0 if open_ else -1)
        ref, queries = (open_.pop(index)[1:]) if index >= 0 else (self._ref(), None)
        self._ended['search'] += 1
        return self._step(
            'results',
            f'found {plural(len(results), "result")}',
            ref=ref,
            end=True,
            queries=queries,
            results=len(results),
            urls=_urls(results),
        )

    def _on_fetch_queries(self, event: AgentEvent) -> Step:
        urls = tuple(event.urls or ())
        ref = self._ref()
        self._fetches.append((ref, urls))
        return self._step('fetch', f'fetching {plural(len(urls), "page")}', ref=ref, urls=urls)

    def _on_fetch_results(self, event: AgentEvent) -> Step:
        contents = event.contents or []
        self.progress.pages_fetched += len(contents)
        ref, asked = self._fetches.pop(0) if self._fetches else (self._ref(), ())
        urls = _urls(contents)
        got = set(urls)
        self._ended['fetch'] += 1
        return self._step(
            'fetched',
            f'fetched {plural(len(contents), "page")}',
            ref=ref,
            end=True,
            urls=urls,
            failed_urls=tuple(url for url in asked if url not in got),
        )

    def _on_item_added(self, event: AgentEvent) -> Step | None:
        item = _item(event)
        if isinstance(item, McpCallItem | McpListToolsItem):
            ref = self._ref()
            self._items[item.id or item.type] = ref
            return self._step('mcp', shown=False, ref=ref, **_mcp_specifics(item))
        if isinstance(item, MessageItem) and self._answer is None:
            return self._step('answer', shown=False, ref=self._open_answer(), item_type='message')
        return None

    def _on_item_done(self, event: AgentEvent) -> Step | None:
        item = _item(event)
        return self._item_done(item, live=True) if item is not None else None

    def _on_terminal(self, event: AgentEvent) -> Step:
        status = _TERMINAL[event.type]
        error = event.error
        message = (error.message or 'error') if error is not None else None
        code = str(error.code or error.type or '') if error is not None else None
        self._searches.clear()
        self._fetches.clear()
        self._items.clear()
        self._answer = None
        detail = f'{status}: {message}' if message else status
        return self._step('status', detail, shown=False, status=status, error=message, error_code=code)

    # -- output items ---------------------------------------------------------------------------------------------

    def _item_done(self, item: OutputItem, *, live: bool, polled: bool = False) -> Step | None:
        """A finished output item, from an event (`live`) or a snapshot: counted once, a step when it says
        something new. A snapshot's steps are not shown unless it was just `polled`: else they arrive together, long
        after they happened."""
        kind = item.type
        done = self._done[kind] = self._done.get(kind, 0) + 1
        p = self.progress
        match item:
            case McpCallItem():
                p.mcp_calls += 1
                ref = self._items.pop(item.id or item.type, None) or self._ref()
                detail = f'remote tool {item.server_label}.{item.name}: {"failed" if item.error else "ok"}'
                return self._step('mcp', detail, shown=live, ref=ref, end=True, **_mcp_specifics(item))
            case McpListToolsItem():
                ref = self._items.pop(item.id or item.type, None) or self._ref()
                return self._step('mcp', shown=False, ref=ref, end=True, **_mcp_specifics(item))
            case SearchResultsItem():
                if done <= self._ended['search']:  # its results were reported as they came
                    return None
                self._ended['search'] += 1
                queries = tuple(item.queries or ())
                p.searches += 1
                p.queries.extend(queries)
                p.results_seen += len(item.results)
                return self._step(
                    'results',
                    f'found {plural(len(item.results), "result")}' if polled else '',
                    shown=polled,
                    ref=self._ref(),
                    end=True,
                    queries=queries,
                    results=len(item.results),
                    urls=_urls(item.results),
                    item_type=kind,
                )
            case FetchUrlResultsItem():
                if done <= self._ended['fetch']:
                    return None
                self._ended['fetch'] += 1
                p.pages_fetched += len(item.contents)
                detail = f'fetched {plural(len(item.contents), "page")}' if polled else ''
                return self._step('fetched', detail, shown=polled, ref=self._ref(), end=True,
                                  urls=_urls(item.contents), item_type=kind)  # fmt: skip
            case MessageItem():
                ref, self._answer = self._answer, None
                chars = sum(len(part.text) for part in item.content or ())
                return self._step('answer', shown=False, ref=ref, end=True, chars=chars, item_type=kind)
            case ToolSearchOutputItem():
                return self._step('other', shown=False, tools=len(item.tools), item_type=kind)
            case (
                ImageSearchResultsItem()
                | PeopleSearchResultsItem()
                | FinanceResultsItem()
                | SandboxResultsItem()
                | ShareFileItem()
            ):
                p.tool_outputs += 1
                detail, count, urls = _tool_output(item)
                return self._step(
                    'tool',
                    detail,
                    shown=live,
                    tool=_TOOL_OF[kind],
                    results=count,
                    urls=urls,
                    item_type=kind,
                    error=_failed(item),
                )
            case FunctionCallItem():
                return None  # a client tool call, or the announcement of an internal search: not a step
            case UnknownItem():
                if 'type' not in item.model_fields_set:
                    return None
                return self._step('other', shown=False, item_type=kind)

    # -- helpers ----------------------------------------------------------------------------------------------

    def _ref(self) -> int:
        self._refs += 1
        return self._refs

    def _open_answer(self) -> int:
        if self._answer is None:
            self._answer = self._ref()
        return self._answer

    def _elapsed(self) -> float:
        return round(time.monotonic() - self._started, 3)

    def _step(self, kind: StepKind, detail: str = '', *, shown: bool = True, **specifics: Unpack[_Specifics]) -> Step:
        p = self.progress
        p.elapsed_s = elapsed = self._elapsed()
        if shown:
            p.last_step = detail
        counts = p.model_copy(update={'queries': list(p.queries)})
        return Step(
            kind=kind,
            detail=detail,
            shown=shown,
            progress=counts,
            response_id=self.response_id,
            elapsed_s=elapsed,
            **specifics,
        )


def _item(event: AgentEvent) -> OutputItem | None:
    """The event's `item`, parsed; an item whose known type has fields of unexpected shape reads as unknown."""
    try:
        return event.item_
    except ValidationError:
        raw = field_of(event.item, 'type')
        return UnknownItem(type=raw) if isinstance(raw, str) else None


#: The opt-in tool each output item type comes from.
_TOOL_OF = {
    'image_search_results': 'image_search',
    'people_search_results': 'people_search',
    'finance_results': 'finance_search',
    'sandbox_results': 'sandbox',
    'share_file': 'sandbox',
}


def _tool_output(
    item: ImageSearchResultsItem | PeopleSearchResultsItem | FinanceResultsItem | SandboxResultsItem | ShareFileItem,
) -> tuple[str, int, tuple[str, ...]]:
    """An opt-in tool's output as a step: its line for people, how many things it holds, the addresses in it."""
    match item:
        case ImageSearchResultsItem():
            urls = tuple(r.image_url for r in item.results if r.image_url)
            return f'found {plural(len(item.results), "image")}', len(item.results), urls
        case PeopleSearchResultsItem():
            return f'found {plural(len(item.results), "person", "people")}', len(item.results), _urls(item.results)
        case FinanceResultsItem():
            sources = tuple(url for r in item.results for url in r.sources or ())
            return f'found {plural(len(item.results), "finance record")}', len(item.results), sources
        case SandboxResultsItem():
            code = next((out.exit_code for out in reversed(item.results) if out.exit_code is not None), None)
            ended = item.status or 'completed'
            detail = f'ran {item.language or "code"} in the sandbox: {ended}' + (f' (exit {code})' if code else '')
            return detail, len(item.results), ()
        case ShareFileItem():
            return f'shared a file: {item.filename or item.file_id or "unnamed"}', 1, ()


def _failed(item: OutputItem) -> str | None:
    """The error an opt-in tool's output reports, if any (a failed or timed-out sandbox run, a refused file)."""
    error = getattr(item, 'error', None)
    if isinstance(error, str) and error:
        return error
    if isinstance(item, SandboxResultsItem) and item.status in ('failed', 'timed_out'):
        return f'sandbox {item.status}'
    return None


def _mcp_specifics(item: McpCallItem | McpListToolsItem) -> _McpSpecifics:
    if isinstance(item, McpCallItem):
        return {'server': item.server_label, 'tool': item.name, 'error': item.error or None, 'item_type': item.type}
    return {'server': item.server_label, 'tools': len(item.tools), 'error': item.error or None, 'item_type': item.type}


_HANDLERS: dict[str, Callable[[StepReducer, AgentEvent], Step | None]] = {
    'response.reasoning.search_queries': StepReducer._on_search_queries,  # pyright: ignore[reportPrivateUsage]
    'response.reasoning.search_results': StepReducer._on_search_results,  # pyright: ignore[reportPrivateUsage]
    'response.reasoning.fetch_url_queries': StepReducer._on_fetch_queries,  # pyright: ignore[reportPrivateUsage]
    'response.reasoning.fetch_url_results': StepReducer._on_fetch_results,  # pyright: ignore[reportPrivateUsage]
    'response.output_item.added': StepReducer._on_item_added,  # pyright: ignore[reportPrivateUsage]
    'response.output_item.done': StepReducer._on_item_done,  # pyright: ignore[reportPrivateUsage]
    **dict.fromkeys(_TERMINAL, StepReducer._on_terminal),  # pyright: ignore[reportPrivateUsage]
}
