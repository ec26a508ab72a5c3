"""Spans, span events and metrics of research runs, written with the OpenTelemetry API; `configure_tracing()`.

The library only writes telemetry. With no OpenTelemetry SDK (or Logfire) configured every call here is a
cheap no-op and nothing warns. Spans join whatever trace is current: in an agent they nest under pydantic-ai's
`execute_tool` span, in the MCP server under the client's `tools/call` span. Only entry points (the CLI, the
MCP server) call `configure_tracing()`.

One research call is one `perplexity.research` span (`perplexity.collect` for a later collection, linked to the
span that started the run) holding the run's model, usage, cost and outcome, with a span event per research step:

    perplexity.search          queries, result count, domains, duration
    perplexity.fetch           urls, pages fetched, the urls that failed, duration
    perplexity.mcp_list_tools  a remote MCP server that failed to list its tools: label, error
    perplexity.mcp_call        a remote MCP tool call: server label, tool, error, duration
    perplexity.retry           a retried request (reported by the client, see `watch_wire`): attempt, reason, delay
    perplexity.handoff         the wait ended with the run still going

Steps are events rather than child spans because a span costs several times an event once a processor such as
Logfire's scrubber handles it, and a run has many steps. `PERPLEXITY_TRACE_STEPS=spans` makes them child spans
(plus a `perplexity.answer` span), for a timeline; `PERPLEXITY_TRACE_STEPS=off` leaves them out. `docs/tracing.md`
lists every attribute. `logfire.msg` (the title Logfire shows) never holds user text: Logfire does not scrub it on
OpenTelemetry spans.
"""

from __future__ import annotations

import functools
import os
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine, Generator, Mapping, Sequence
from contextlib import contextmanager, redirect_stdout
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, cast

from opentelemetry import trace
from opentelemetry.trace import Link, Span, SpanContext, SpanKind, Status, StatusCode, TraceFlags
from typing_extensions import TypedDict

from .._base.env import ENV
from .._base.version import __version__
from .._domain.settings import trace_steps

if TYPE_CHECKING:
    from opentelemetry.util.types import AttributeValue

    from .._domain.results import ResearchResult
    from .._domain.steps import Step
    from .._ledger import RunRecord
    from ..client._models import Response

__all__ = (
    'PROVIDER',
    'SCRUB_PATTERNS',
    'STEPS_ENV',
    'TRACER_NAME',
    'RunTrace',
    'cancel_span',
    'collect_span',
    'configure_tracing',
    'current_ids',
    'event',
    'rate_limits',
    'research_span',
    'retry_event',
    'search_span',
    'watch_wire',
)

#: Instrumentation scope of every span and metric the library writes.
TRACER_NAME = 'pydantic_ai_perplexity'
#: `gen_ai.provider.name` (a value the GenAI semantic conventions know).
PROVIDER = 'perplexity'
#: `gen_ai.operation.name` of research and collection spans and of their metrics.
OPERATION = 'research'
#: `spans` makes each research step a child span (a timeline) instead of a span event; `off` records no steps.
STEPS_ENV = ENV.TRACE_STEPS
#: Extra scrubbing patterns for Logfire: a bare `pplx-…` key is not caught by the default patterns.
SCRUB_PATTERNS = (r'\bpplx-',)

_MAX_TEXT = 1000
_MAX_LIST = 20
_OTLP_ENV = (
    'OTEL_EXPORTER_OTLP_ENDPOINT',
    'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT',
    'OTEL_EXPORTER_OTLP_METRICS_ENDPOINT',
    'OTEL_EXPORTER_OTLP_LOGS_ENDPOINT',
)

_tracer = trace.get_tracer(TRACER_NAME, __version__)

P = ParamSpec('P')
R = TypeVar('R')
Attributes = dict[str, 'AttributeValue']


def _text(value: str, limit: int = _MAX_TEXT) -> str:
    return value if len(value) <= limit else value[: limit - 1] + '…'


def _strings(values: Sequence[Any]) -> list[str]:
    return [_text(str(v), 300) for v in values[:_MAX_LIST]]


def _list(value: object) -> list[object]:
    return list(cast('Sequence[object]', value)) if isinstance(value, list | tuple) else []


def _domain(url: str) -> str:
    """The host of a URL without `www.` (a string split: `urlsplit` costs more than the rest of a step)."""
    rest = url.partition('://')[2] or url
    host = rest.split('/', 1)[0].split('?', 1)[0].rpartition('@')[2]
    host = host.partition(']')[0] + ']' if host.startswith('[') else host.split(':', 1)[0]
    return host.lower().removeprefix('www.')


def _domains(urls: Sequence[str]) -> str:
    """The distinct hosts of `urls`, comma-separated: one string costs a scrubber one pass, a list one per host."""
    seen: dict[str, None] = {}
    for url in urls:
        host = _domain(url)
        if host:
            seen.setdefault(host)
    return ', '.join(list(seen)[:_MAX_LIST])


def _field(value: object, key: str) -> object:
    if isinstance(value, dict):
        return cast('dict[str, object]', value).get(key)
    return getattr(value, key, None)


def _urls(entries: object) -> list[str]:
    urls: list[str] = []
    for entry in cast('Sequence[object]', entries) if isinstance(entries, list | tuple) else ():
        url = _field(entry, 'url')
        if isinstance(url, str) and url:
            urls.append(url)
    return urls


def _base_attributes() -> Attributes:
    return {'gen_ai.operation.name': OPERATION, 'gen_ai.provider.name': PROVIDER}


# ---------------------------------------------------------------------------------------------------------------
# Metrics


class _Instruments:
    """The library's metric instruments, made on first use (importing the metrics API costs start-up time)."""

    def __init__(self) -> None:
        from opentelemetry import metrics

        # Kept: a proxy provider (Logfire's) may hold meters weakly and re-point them when it is reconfigured.
        self.meter = meter = metrics.get_meter(TRACER_NAME, __version__)
        # The names and units pydantic-ai uses, so Logfire sums them into the agent run's span.
        self.tokens = meter.create_histogram(
            'gen_ai.client.token.usage', unit='{token}', description='Measures number of input and output tokens used'
        )
        self.cost = meter.create_histogram('operation.cost', unit='{USD}', description='Monetary cost')
        self.duration = meter.create_histogram(
            'perplexity.research.duration', unit='s', description='Time from the start of a research run to its end'
        )


@functools.cache
def _instruments() -> _Instruments:
    return _Instruments()


# ---------------------------------------------------------------------------------------------------------------
# One research call


class _Step:
    """A research step under way: what it started with, when, and its span in `spans` mode."""

    __slots__ = ('attributes', 'name', 'span', 'started')

    def __init__(self, name: str, attributes: Attributes, span: Span | None) -> None:
        self.name = name
        self.attributes = attributes
        self.span = span
        self.started = time.monotonic()


def _usage_attributes(result: ResearchResult) -> Attributes:
    """A finished call's served model and tokens (once the run ended), and its cost and cost parts where billed."""
    usage = result.usage
    attributes: Attributes = {}
    if result.done:
        if result.model:
            attributes['gen_ai.response.model'] = result.model
        attributes['gen_ai.usage.input_tokens'] = usage.input_tokens
        attributes['gen_ai.usage.output_tokens'] = usage.output_tokens
    if usage.cost_usd is not None:
        attributes['perplexity.cost_usd'] = usage.cost_usd
    for name, value in (
        ('input', usage.input_cost_usd),
        ('output', usage.output_cost_usd),
        ('tool_calls', usage.tool_calls_cost_usd),
    ):
        if value is not None:
            attributes[f'perplexity.cost.{name}_usd'] = value
    return attributes


def _mark_end(span: Span, result: ResearchResult) -> None:
    """A hand-off event on the span when the run is still going; an error status when it failed."""
    if not result.done:
        span.add_event(
            'perplexity.handoff',
            {
                'perplexity.status': result.status,
                'perplexity.elapsed_s': result.progress.elapsed_s,
                'perplexity.progress': result.progress.summary(),
            },
        )
    elif result.status == 'failed':
        span.set_attribute('error.type', 'run_failed')
        span.set_status(Status(StatusCode.ERROR, _text(result.error or 'the run failed', 200)))


class RunTrace:
    """The telemetry of one research call: its span, a span event (or child span) per step, metrics at the end.

    `step` is fed every research step (from `steps.StepReducer`, the one reading of the stream); it does nothing
    when the span is not recording (no SDK configured), so a run without tracing pays one attribute check per
    step. Steps are span events by default: a span costs several times an event once a processor such as
    Logfire's scrubber handles it. `PERPLEXITY_TRACE_STEPS=spans`
    makes them child spans, for a timeline; `off` leaves them out (the run's span and metrics only).
    """

    def __init__(self, span: Span | None = None) -> None:
        self.span = span
        self.recording = span is not None and span.is_recording()
        steps = trace_steps() if self.recording else 'events'
        self._step_spans = steps == 'spans'
        self._handlers = _ANSWER_HANDLERS if steps == 'off' else _HANDLERS
        self._context = trace.set_span_in_context(span) if span is not None and self._step_spans else None
        self._started = time.monotonic()
        #: When the run began, if before this call (a collection): the duration metric counts from there.
        self.run_started_at: datetime | None = None
        self.effort: str | None = None
        self.request_model: str | None = None
        self._result: ResearchResult | None = None
        #: Attributes known before the end, set with the others in one call (each call has a cost of its own).
        self._pending: Attributes = {}
        # Steps begun and not ended yet, by the `ref` the reducer gave them.
        self._searches: dict[int | None, _Step] = {}
        self._fetches: dict[int | None, _Step] = {}
        self._items: dict[int | None, _Step] = {}
        self._answer: _Step | None = None
        self._answer_chars = 0
        self._ttft: float | None = None
        self._steps = 0

    # -- what the caller reports --------------------------------------------------------------------------------

    def started(self, response: Response, *, effort: str | None, model: str | None = None) -> RunTrace:
        """The create answered: note the run's id, effort and requested model."""
        if self.span is None:
            return self
        self.effort = effort or response.effort or None
        self.request_model = model or self.effort
        if self.recording:
            attributes: Attributes = {'gen_ai.response.id': response.id}
            if self.effort:
                attributes['perplexity.effort'] = self.effort
                attributes['logfire.msg'] = f'perplexity research ({self.effort})'
            if self.request_model:
                attributes['gen_ai.request.model'] = self.request_model
            self._pending.update(attributes)
        return self

    def step(self, step: Step) -> None:
        """Account for one research step: begin or finish a step event (or span), note the answer's first token."""
        if self.recording:
            handler = self._handlers.get(step.kind)
            if handler is not None:
                handler(self, step)

    def finish(self, result: ResearchResult) -> None:
        """The call's outcome: status, model, usage, cost, counts; a hand-off when the run is still going."""
        span = self.span
        if span is None:
            return
        self._result = result
        if not self.recording:
            return
        self._close_steps()
        attributes: Attributes = {
            **self._pending,
            'perplexity.status': result.status,
            'perplexity.sources': len(result.sources),
            'perplexity.cited': len(result.cited_sources),
            'perplexity.steps': self._steps,
        }
        if result.effort and not self.effort:
            self.effort = result.effort
            self.request_model = self.request_model or result.effort
            attributes['perplexity.effort'] = result.effort
        attributes.update(_usage_attributes(result))
        chars = result.progress.answer_chars or self._answer_chars
        if chars:
            attributes['perplexity.answer.chars'] = chars
        if self._ttft is not None:
            attributes['perplexity.answer.time_to_first_token_s'] = round(self._ttft, 3)
        if result.error:
            attributes['perplexity.error'] = _text(result.error)
        self._pending = {}
        span.set_attributes(attributes)
        _mark_end(span, result)

    def _metric_attributes(self, response_model: str | None) -> Attributes:
        """The dimensions of the run's token and cost metrics: the models asked for and served, and the effort."""
        attributes: Attributes = _base_attributes()
        if self.request_model:
            attributes['gen_ai.request.model'] = self.request_model
        if response_model:
            attributes['gen_ai.response.model'] = response_model
        if self.effort and self.effort != self.request_model:  # else the model dimension already says it
            attributes['perplexity.effort'] = self.effort
        return attributes

    def record_metrics(self) -> None:
        """Tokens, cost and duration of a run that ended; recorded after the span ends, as pydantic-ai does."""
        result = self._result
        if result is None or not result.done:
            return
        instruments = _instruments()
        attributes = self._metric_attributes(result.model)
        usage = result.usage
        for kind, tokens in (('input', usage.input_tokens), ('output', usage.output_tokens)):
            if tokens:
                instruments.tokens.record(tokens, {**attributes, 'gen_ai.token.type': kind})
        if usage.cost_usd is not None:
            instruments.cost.record(usage.cost_usd, attributes)
        if self.run_started_at is not None:
            seconds = (datetime.now(UTC) - self.run_started_at).total_seconds()
        else:
            seconds = time.monotonic() - self._started
        instruments.duration.record(
            max(seconds, 0.0),
            {
                'gen_ai.provider.name': PROVIDER,
                'perplexity.effort': self.effort or 'unknown',
                'perplexity.status': result.status,
            },
        )

    # -- steps --------------------------------------------------------------------------------------------------

    def _begin(self, name: str, attributes: Attributes) -> _Step:
        span = _tracer.start_span(name, context=self._context, attributes=attributes) if self._step_spans else None
        return _Step(name, attributes, span)

    def _end(self, step: _Step, attributes: Attributes, *, error: str | None = None) -> None:
        """A step finished: one span event with its duration, or the end of its child span."""
        self._steps += 1
        if error:
            attributes['perplexity.error'] = _text(error, 500)
        if step.span is not None:
            step.span.set_attributes(attributes)
            if error:
                step.span.set_status(Status(StatusCode.ERROR, _text(error, 200)))
            step.span.end()
        elif self.span is not None:
            attributes = {**step.attributes, **attributes}
            attributes['perplexity.duration_s'] = round(time.monotonic() - step.started, 3)
            self.span.add_event(step.name, attributes)

    def _flush(self) -> None:
        """At the end of the span: what is known and not set yet (a call that ended without a result)."""
        self._close_steps()
        if self._pending and self.span is not None:
            self.span.set_attributes(self._pending)
            self._pending = {}

    def _close_steps(self) -> None:
        """Finish steps left open (a hand-off, a failure, a step the stream never closed), marked unfinished."""
        if self._answer is not None:
            self._end_answer()
        open_steps = [*self._searches.values(), *self._fetches.values(), *self._items.values()]
        self._searches.clear()
        self._fetches.clear()
        self._items.clear()
        for step in open_steps:
            self._end(step, {'perplexity.unfinished': True})

    def _on_search(self, step: Step) -> None:
        self._searches[step.ref] = self._begin(
            'perplexity.search', {'perplexity.search.queries': _strings(step.queries or ())}
        )

    def _on_results(self, step: Step) -> None:
        begun = self._searches.pop(step.ref, None)
        if begun is None:  # results reported without their search (or from an output item only)
            queries = step.queries
            begun = self._begin(
                'perplexity.search', {} if queries is None else {'perplexity.search.queries': _strings(queries)}
            )
        urls = step.urls
        self._end(begun, {'perplexity.search.results': len(urls), 'perplexity.search.domains': _domains(urls)})

    def _on_fetch(self, step: Step) -> None:
        self._fetches[step.ref] = self._begin('perplexity.fetch', {'perplexity.fetch.urls': _strings(step.urls)})

    def _on_fetched(self, step: Step) -> None:
        begun = self._fetches.pop(step.ref, None) or self._begin('perplexity.fetch', {})
        attributes: Attributes = {'perplexity.fetch.pages': len(step.urls)}
        if 'perplexity.fetch.urls' not in begun.attributes:
            attributes['perplexity.fetch.urls'] = _strings(step.urls)
        if step.failed_urls:
            attributes['perplexity.fetch.failed_urls'] = _strings(step.failed_urls)
        self._end(begun, attributes)

    def _on_mcp(self, step: Step) -> None:
        name = f'perplexity.{step.item_type}'
        if not step.end:
            self._items[step.ref] = self._begin(name, _mcp_attributes(step))
            return
        begun = self._items.pop(step.ref, None) or self._begin(name, {})
        if step.item_type == 'mcp_list_tools' and step.ok and begun.span is None:
            return  # as an event, a tool list is only worth its cost when it failed
        self._end(begun, _mcp_attributes(step), error=step.error)

    def _on_tool(self, step: Step) -> None:
        """An opt-in tool's output (images, people, finance, sandbox, a shared file) or a local function's call."""
        name = 'perplexity.function' if step.kind == 'function' else 'perplexity.tool'
        attributes: Attributes = {'gen_ai.tool.name': step.tool or '', 'perplexity.tool.results': step.results or 0}
        if step.urls:
            attributes['perplexity.tool.domains'] = _domains(step.urls)
        self._end(self._begin(name, {}), attributes, error=step.error)

    def _on_answer(self, step: Step) -> None:
        if step.end:  # the answer's item is finished
            self._answer_chars = step.progress.answer_chars or step.chars or 0
            if self._answer is not None:
                self._end_answer()
            return
        if step.shown and self._ttft is None:  # the first token
            self._ttft = time.monotonic() - self._started
        if self._answer is None:
            self._answer = self._begin('perplexity.answer', {})

    def _on_other(self, step: Step) -> None:
        if self.span is None:
            return
        if step.item_type == 'tool_search_output':
            self.span.add_event('perplexity.tool_search', {'perplexity.mcp.tools': step.tools or 0})
        else:
            self.span.add_event('perplexity.output_item', {'perplexity.item.type': str(step.item_type)})

    def _end_answer(self) -> None:
        """The answer phase, only in `spans` mode (its figures are attributes of the run's span)."""
        step, self._answer = self._answer, None
        if step is not None and step.span is not None:
            attributes: Attributes = {'perplexity.answer.chars': self._answer_chars}
            if self._ttft is not None:
                attributes['perplexity.answer.time_to_first_token_s'] = round(self._ttft, 3)
            step.span.set_attributes(attributes)
            step.span.end()

    def _on_status(self, step: Step) -> None:
        """The run ended (its terminal event): a run error, if any, and steps left open marked unfinished."""
        if step.error is not None and self.span is not None:
            self.span.add_event(
                'perplexity.run_error',
                {'perplexity.error': _text(step.error, 500), 'perplexity.error.code': step.error_code or ''},
            )
        self._close_steps()


def _mcp_attributes(step: Step) -> Attributes:
    attributes: Attributes = {'perplexity.mcp.server_label': step.server or ''}
    if step.item_type == 'mcp_call':
        attributes['gen_ai.tool.name'] = step.tool or ''
    else:
        attributes['perplexity.mcp.tools'] = step.tools or 0
    return attributes


_HANDLERS: dict[str, Callable[[RunTrace, Step], None]] = {
    'search': RunTrace._on_search,  # pyright: ignore[reportPrivateUsage]
    'results': RunTrace._on_results,  # pyright: ignore[reportPrivateUsage]
    'fetch': RunTrace._on_fetch,  # pyright: ignore[reportPrivateUsage]
    'fetched': RunTrace._on_fetched,  # pyright: ignore[reportPrivateUsage]
    'mcp': RunTrace._on_mcp,  # pyright: ignore[reportPrivateUsage]
    'tool': RunTrace._on_tool,  # pyright: ignore[reportPrivateUsage]
    'function': RunTrace._on_tool,  # pyright: ignore[reportPrivateUsage]
    'answer': RunTrace._on_answer,  # pyright: ignore[reportPrivateUsage]
    'other': RunTrace._on_other,  # pyright: ignore[reportPrivateUsage]
    'status': RunTrace._on_status,  # pyright: ignore[reportPrivateUsage]
}

#: With `PERPLEXITY_TRACE_STEPS=off`: only the answer phase, for the run span's attributes.
_ANSWER_HANDLERS = {'answer': _HANDLERS['answer']}

#: The trace of code paths that have no span (e.g. a `_Run` made outside a traced call): does nothing.
NO_TRACE = RunTrace()


# ---------------------------------------------------------------------------------------------------------------
# Spans for the Researcher's calls


@contextmanager
def research_span(query: str) -> Generator[RunTrace]:
    """The `perplexity.research` span of one call that starts a run (and maybe waits for it)."""
    attributes: Attributes = {
        **_base_attributes(),
        'perplexity.query': _text(query),
    }
    with _tracer.start_as_current_span('perplexity.research', kind=SpanKind.CLIENT, attributes=attributes) as span:
        run = RunTrace(span)
        try:
            yield run
        finally:
            run._flush()  # pyright: ignore[reportPrivateUsage]
    run.record_metrics()


@contextmanager
def collect_span(response_id: str, record: RunRecord | None) -> Generator[RunTrace]:
    """The `perplexity.collect` span of a later wait for a run, linked to the span that started it."""
    attributes: Attributes = {
        **_base_attributes(),
        'gen_ai.response.id': response_id,
        'logfire.msg': f'perplexity collect {response_id}',
    }
    links: list[Link] = []
    if record is not None:
        if record.query:
            attributes['perplexity.query'] = _text(record.query)
        if record.effort:
            attributes['perplexity.effort'] = record.effort
        if record.model or record.effort:
            attributes['gen_ai.request.model'] = str(record.model or record.effort)
        link = _link(record.trace_id, record.span_id)
        if link is not None:
            links.append(link)
    with _tracer.start_as_current_span(
        'perplexity.collect', kind=SpanKind.CLIENT, attributes=attributes, links=links
    ) as span:
        run = RunTrace(span)
        if record is not None:
            run.effort = record.effort
            run.request_model = record.model or record.effort
            run.run_started_at = record.created_at
        try:
            yield run
        finally:
            run._flush()  # pyright: ignore[reportPrivateUsage]
    run.record_metrics()


def _link(trace_id: str | None, span_id: str | None) -> Link | None:
    if not trace_id or not span_id:
        return None
    try:
        context = SpanContext(
            trace_id=int(trace_id, 16), span_id=int(span_id, 16), is_remote=True, trace_flags=TraceFlags(1)
        )
    except ValueError:
        return None
    return Link(context, {'perplexity.link': 'started_by'}) if context.is_valid else None


class SpanIds(TypedDict, total=False):
    """The `trace_id` and `span_id` columns of a ledger row."""

    trace_id: str
    span_id: str


def current_ids() -> SpanIds:
    """Trace and span id (hex) of the current recording span, for the ledger row of a run it starts."""
    span = trace.get_current_span()
    if not span.is_recording():
        return {}
    context = span.get_span_context()
    return {'trace_id': format(context.trace_id, '032x'), 'span_id': format(context.span_id, '016x')}


def cancel_span(fn: Callable[P, Awaitable[R]]) -> Callable[P, Coroutine[Any, Any, R]]:
    """Decorate `Researcher.cancel`: a `perplexity.cancel` span with the run's id and the status it ended in."""

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        response_id = kwargs.get('response_id', args[1] if len(args) > 1 else '')
        attributes: Attributes = {'gen_ai.provider.name': PROVIDER, 'gen_ai.response.id': str(response_id)}
        with _tracer.start_as_current_span('perplexity.cancel', kind=SpanKind.CLIENT, attributes=attributes) as span:
            result = await fn(*args, **kwargs)
            status = getattr(result, 'status', None)
            if isinstance(status, str):
                span.set_attribute('perplexity.status', status)
            return result

    return wrapper


def search_span(fn: Callable[P, Awaitable[R]]) -> Callable[P, Coroutine[Any, Any, R]]:
    """Decorate `Researcher.search`: a `perplexity.search_api` span with the queries, result count and domains."""

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        query = kwargs.get('query', args[1] if len(args) > 1 else '')
        queries = _strings(_list(query) or [query])
        attributes: Attributes = {
            'gen_ai.provider.name': PROVIDER,
            'perplexity.search.queries': queries,
            'logfire.msg': 'perplexity search',
        }
        with _tracer.start_as_current_span('perplexity.search_api', kind=SpanKind.CLIENT, attributes=attributes) as s:
            result = await fn(*args, **kwargs)
            if s.is_recording():
                urls = _urls(getattr(result, 'results', None))
                s.set_attributes({'perplexity.search.results': len(urls), 'perplexity.search.domains': _domains(urls)})
            return result

    return wrapper


# ---------------------------------------------------------------------------------------------------------------
# Events from the client


def event(name: str, attributes: Mapping[str, AttributeValue] | None = None) -> None:
    """Add an event to the current span, if it is recording."""
    span = trace.get_current_span()
    if span.is_recording():
        span.add_event(name, attributes)


def retry_event(method: str, path: str, attempt: int, delay: float, reason: str | int) -> None:
    """A retry the client is about to make: after which attempt, why, and how long it sleeps first."""
    event(
        'perplexity.retry',
        {
            'http.request.method': method,
            'perplexity.path': path,
            'perplexity.attempt': attempt + 1,
            'perplexity.retry.reason': str(reason),
            'perplexity.retry.delay_s': round(delay, 3),
        },
    )


def rate_limits(remaining: int | None, limit: int | None) -> None:
    """The API's rate-limit counts after a request (`x-ratelimit-remaining` / `-limit`), on the current span."""
    span = trace.get_current_span()
    if not span.is_recording():
        return
    if remaining is not None:
        span.set_attribute('perplexity.ratelimit.remaining', remaining)
    if limit is not None:
        span.set_attribute('perplexity.ratelimit.limit', limit)


class _WireSpans:
    """The wire's reports (`client/_events.py`) as span events and attributes on the current span."""

    def retrying(self, method: str, path: str, attempt: int, delay: float, reason: str | int) -> None:
        retry_event(method, path, attempt, delay, reason)

    def rate_limits(self, remaining: int | None, limit: int | None) -> None:
        rate_limits(remaining, limit)

    def polling(self, reason: str) -> None:
        event('perplexity.wait.polling', {'perplexity.reason': reason})

    def resuming(self, after_sequence: int) -> None:
        event('perplexity.stream.resume', {'perplexity.after_sequence': after_sequence})


def watch_wire() -> None:
    """Make the wire report to this module (the package root calls it the first time the wire reports anything)."""
    from ..client._events import OBSERVER

    OBSERVER.fill(_WireSpans())


# ---------------------------------------------------------------------------------------------------------------
# Configuration, for entry points only


def configure_tracing(*, service_name: str = 'pydantic-ai-perplexity', console: bool = False, **options: Any) -> bool:
    """Set up Logfire for an application entry point (the CLI, the MCP server); the library never calls it.

    Spans and metrics go to Logfire when a token is present (`LOGFIRE_TOKEN`, or `.logfire/` credentials) and to
    any OpenTelemetry backend named by the standard `OTEL_EXPORTER_OTLP_*` variables, no account needed. Console
    output only when asked (`console=True` or `LOGFIRE_CONSOLE=true`), and then on stderr: stdout may be a
    protocol stream. Incoming trace context (MCP `_meta`) is joined without warnings. Perplexity keys (`pplx-…`)
    are scrubbed in addition to Logfire's defaults. `options` go to `logfire.configure` as they are.

    Returns whether tracing was configured: not when Logfire is not installed, nor when there is nowhere to send
    spans (then nothing is imported, so start-up stays fast).
    """
    console = console or os.environ.get('LOGFIRE_CONSOLE', '').strip().lower() in ('1', 'true', 'yes')
    if not (options or console or _has_destination()):
        return False
    try:
        import logfire
    except ImportError:
        return False
    scrubbing = options.pop('scrubbing', None)
    if scrubbing is None:
        scrubbing = logfire.ScrubbingOptions(extra_patterns=list(SCRUB_PATTERNS))
    elif isinstance(scrubbing, logfire.ScrubbingOptions):  # the caller's own, plus ours
        patterns = [*(scrubbing.extra_patterns or ()), *SCRUB_PATTERNS]
        scrubbing = logfire.ScrubbingOptions(callback=scrubbing.callback, extra_patterns=patterns)
    settings: dict[str, Any] = {
        'service_name': os.environ.get('LOGFIRE_SERVICE_NAME') or os.environ.get('OTEL_SERVICE_NAME') or service_name,
        'service_version': __version__,
        'send_to_logfire': 'if-token-present',
        'console': logfire.ConsoleOptions(output=sys.stderr) if console else False,
        'distributed_tracing': True,
        'inspect_arguments': False,
        'scrubbing': scrubbing,
        **options,
    }
    with redirect_stdout(sys.stderr):  # nothing configure might print may reach a protocol stream
        logfire.configure(**settings)
    return True


def _has_destination() -> bool:
    env = os.environ
    if env.get('LOGFIRE_TOKEN') or any(env.get(name) for name in _OTLP_ENV):
        return True
    if env.get('LOGFIRE_SEND_TO_LOGFIRE', '').strip().lower() in ('1', 'true'):
        return True
    return (Path(env.get('LOGFIRE_CREDENTIALS_DIR') or '.logfire') / 'logfire_credentials.json').is_file()
