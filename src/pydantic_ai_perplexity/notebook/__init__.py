"""Research from Jupyter: live progress, the run's timeline, batches, and traces to look at side by side.

```python
from pydantic_ai_perplexity import research, use_emulator_if_no_key
from pydantic_ai_perplexity.notebook import LiveProgress

use_emulator_if_no_key()              # offline when PERPLEXITY_API_KEY is unset
async with LiveProgress('Batteries') as live:
    result = await research('How do solid-state batteries work?', on_progress=live)
result                                # the answer with linked [n] markers, a sources table, the cost
live.timeline                         # when each search, fetch and the answer happened
```

Every display degrades: without IPython, `LiveProgress` prints one line per step. Trace capture (`SpanCapture`)
needs the OpenTelemetry SDK (the `logfire` extra brings it: `pip install ".[logfire]"` from a checkout).
"""

from __future__ import annotations

import gzip
import html
import sys
import threading
import time
import zlib
from collections.abc import Generator, Iterable, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import IO, TYPE_CHECKING, Any

import anyio

from .._core.batch import research_many, results_table, spend_by_effort
from .._domain.timeline import Timeline
from ..emulator._offline import (
    use_emulator_if_no_key,
)  # kept here too: notebooks written before it moved import it from here

if TYPE_CHECKING:
    from types import TracebackType

    from opentelemetry.sdk.trace import ReadableSpan

    from .._domain.budget import BudgetWarning
    from .._domain.results import Progress, ResearchResult
    from .._domain.steps import Step

__all__ = (
    'LiveProgress',
    'SpanCapture',
    'SpanRecord',
    'SpanTree',
    'compare_traces',
    'research_many',
    'results_table',
    'spend_by_effort',
    'use_emulator_if_no_key',
)


def _kernel_display() -> bool:
    """Whether rich output reaches a notebook front end (an IPython kernel), not a terminal."""
    ipython = sys.modules.get('IPython')
    if ipython is None:
        return False
    shell = ipython.get_ipython()
    return shell is not None and getattr(shell, 'kernel', None) is not None


# ---------------------------------------------------------------------------------------------------------------
# Live progress


class LiveProgress:
    """A live view of one research run: each step as it streams and the elapsed time, updated in place.

    Pass it as `on_progress`. In a notebook it is one output area updated in place (an IPython display handle);
    used as `async with`, the elapsed time also ticks between steps. Elsewhere it prints one line per step. The
    steps are kept as a `Timeline` (`live.timeline`), to draw once the run is over. Pass `live.budget_warning` as
    `on_budget_warning` to show a budget window crossing its `warn_at` above the steps.
    """

    def __init__(self, title: str = '', *, refresh_s: float = 0.5, show_steps: int = 8, file: IO[str] | None = None):
        self.timeline = Timeline(title)
        self.progress: Progress | None = None
        self.refresh_s = refresh_s
        self.show_steps = show_steps
        self._file = file
        self._rich = _kernel_display()
        self._handle: Any = None
        self._printed = 0
        self._done = False
        self._ticker: anyio.CancelScope | None = None
        self._group: Any = None
        #: Budget warnings given while this view was live (see `budget_warning`).
        self.warnings: list[BudgetWarning] = []
        self._warnings_printed = 0

    # -- as a callback --------------------------------------------------------------------------------------

    def __call__(self, step: Step) -> None:
        """The `on_progress` callback."""
        self.progress = step.progress
        self.timeline(step)
        self._show()

    def budget_warning(self, warning: BudgetWarning) -> None:
        """The `on_budget_warning` callback: show that a budget window crossed its `warn_at`."""
        self.warnings.append(warning)
        self._show()

    def finish(self, result: ResearchResult | None = None) -> None:
        """Mark the run over (the result, when given, says how it ended) and show the final state."""
        self.timeline.finish(result)
        if result is not None:
            self.progress = result.progress
        self._done = True
        self._show()

    # -- as a context manager -------------------------------------------------------------------------------

    def __enter__(self) -> LiveProgress:
        self.timeline.start()
        self._show()
        return self

    def __exit__(self, *exc_info: object) -> None:
        if not self._done:
            self.finish()

    async def __aenter__(self) -> LiveProgress:
        self.__enter__()
        if self._rich and self.refresh_s > 0:
            self._group = anyio.create_task_group()
            await self._group.__aenter__()
            self._group.start_soon(self._tick)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._group is not None:
            self._group.cancel_scope.cancel()
            await self._group.__aexit__(None, None, None)
            self._group = None
        self.__exit__(exc_type, exc, tb)

    async def _tick(self) -> None:
        while not self._done:
            await anyio.sleep(self.refresh_s)
            self._show()

    # -- display --------------------------------------------------------------------------------------------

    def _summary(self) -> str:
        elapsed = f'{self.timeline.elapsed_s:.1f} s'
        counts = self.progress.summary() if self.progress is not None else 'starting'
        if self._done:
            status = self.timeline.status or 'done'
            return f'{status} in {elapsed} · {counts}'
        return f'researching… {elapsed} · {counts}'

    def _repr_html_(self) -> str:
        esc = html.escape
        title = f'<strong>{esc(self.timeline.title)}</strong> · ' if self.timeline.title else ''
        steps = self.timeline.steps[-self.show_steps :]
        hidden = len(self.timeline.steps) - len(steps)
        items = ''.join(f'<li><code>{s.elapsed_s:6.1f} s</code> {esc(s.detail)}</li>' for s in steps)
        more = f'<li>… {hidden} earlier steps</li>' if hidden else ''
        warned = ''.join(
            f'<div class="pplx-budget-warning" style="color:#b45309">⚠ {esc(w.message)}</div>' for w in self.warnings
        )
        return (
            f'<div class="pplx-live tex2jax_ignore mathjax_ignore">{warned}{title}{esc(self._summary())}'
            f'<ul style="margin:.2em 0;list-style:none;padding-left:.5em">{more}{items}</ul></div>'
        )

    def _repr_markdown_(self) -> str:
        steps = self.timeline.steps[-self.show_steps :]
        lines = [f'⚠ {w.message}' for w in self.warnings] + [self._summary(), '']
        return '\n'.join(lines + [f'- `{s.elapsed_s:6.1f} s` {s.detail}' for s in steps])

    def __str__(self) -> str:
        return self._summary()

    def _show(self) -> None:
        if self._rich:
            from IPython.display import HTML, display  # pyright: ignore[reportUnknownVariableType]

            content = HTML(self._repr_html_())
            if self._handle is None:
                self._handle = display(content, display_id=True)
            else:
                self._handle.update(content)
            return
        out = self._file or sys.stdout
        for warning in self.warnings[self._warnings_printed :]:
            print(f'  ⚠ {warning.message}', file=out)
        self._warnings_printed = len(self.warnings)
        for step in self.timeline.steps[self._printed :]:
            print(f'  [{step.elapsed_s:6.1f}s] {step.detail}', file=out)
        self._printed = len(self.timeline.steps)
        if self._done:
            print(self._summary(), file=out)
        out.flush()


# ---------------------------------------------------------------------------------------------------------------
# Traces


@dataclass
class SpanRecord:
    """One finished span, from this process or another: names, ids (hex), times (ns), service, attributes."""

    name: str
    trace_id: str
    span_id: str
    parent_id: str | None
    start_ns: int
    end_ns: int
    service: str
    kind: str
    attributes: dict[str, Any] = field(default_factory=dict[str, Any])
    remote: bool = False
    #: Span events as `(name, time_ns)`: the research steps, when steps are recorded as events.
    events: list[tuple[str, int]] = field(default_factory=list[tuple[str, int]])

    @property
    def duration_s(self) -> float:
        """How long the span lasted."""
        return max(self.end_ns - self.start_ns, 0) / 1e9


def _from_sdk(span: ReadableSpan) -> SpanRecord:
    context = span.get_span_context()
    parent = span.parent
    resource = span.resource.attributes
    return SpanRecord(
        name=span.name,
        trace_id=format(context.trace_id if context else 0, '032x'),
        span_id=format(context.span_id if context else 0, '016x'),
        parent_id=format(parent.span_id, '016x') if parent is not None else None,
        start_ns=span.start_time or 0,
        end_ns=span.end_time or 0,
        service=str(resource.get('service.name', '')),
        kind=span.kind.name,
        attributes=dict(span.attributes or {}),
        events=[(e.name, e.timestamp) for e in span.events],
    )


def _any_value(value: Any) -> Any:
    kind = value.WhichOneof('value')
    if kind == 'array_value':
        return [_any_value(v) for v in value.array_value.values]
    if kind == 'kvlist_value':
        return {kv.key: _any_value(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, kind) if kind else None


_OTLP_KINDS = {0: 'UNSPECIFIED', 1: 'INTERNAL', 2: 'SERVER', 3: 'CLIENT', 4: 'PRODUCER', 5: 'CONSUMER'}


class SpanCapture:
    """Captures spans to look at in the notebook: this process's and, optionally, child processes'.

    This process: an OpenTelemetry SDK span processor with an in-memory exporter, added to the global tracer
    provider (one is installed if there is none). Other processes (an MCP server started over stdio): an OTLP/HTTP
    receiver on loopback; give the child `capture.child_env(...)` so it exports there.

    ```python
    capture = SpanCapture(receive_otlp=True)
    with capture.trace('in-process') as run_a:
        await agent.run(question)
    capture.tree(run_a)
    ```
    """

    def __init__(self, *, receive_otlp: bool = False, service_name: str = 'notebook') -> None:
        try:
            from opentelemetry import trace
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import SimpleSpanProcessor
            from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        except ImportError as exc:  # pragma: no cover - depends on the environment
            from .._base.errors import install_hint

            raise ImportError(
                f'SpanCapture needs the OpenTelemetry SDK: install it ({install_hint("logfire")})'
            ) from exc
        self._exporter = InMemorySpanExporter()
        processor = SimpleSpanProcessor(self._exporter)
        provider: Any = trace.get_tracer_provider()
        if not hasattr(provider, 'add_span_processor'):
            provider = TracerProvider(resource=Resource.create({'service.name': service_name}))
            trace.set_tracer_provider(provider)
        provider.add_span_processor(processor)
        self._tracer = trace.get_tracer('pydantic_ai_perplexity.notebook')
        self._remote: list[SpanRecord] = []
        self._changed = threading.Condition()
        self._server: ThreadingHTTPServer | None = None
        self.endpoint: str | None = None
        if receive_otlp:
            self._serve()

    # -- collecting -----------------------------------------------------------------------------------------

    @contextmanager
    def trace(self, name: str) -> Generator[str]:
        """A root span around a block; yields its trace id, to pick the trace out later."""
        with self._tracer.start_as_current_span(name) as span:
            yield format(span.get_span_context().trace_id, '032x')

    def spans(self, trace_id: str | None = None) -> list[SpanRecord]:
        """Finished spans (this process's and received ones), in start order; only one trace's if given."""
        local = [_from_sdk(s) for s in self._exporter.get_finished_spans()]
        with self._changed:
            remote = list(self._remote)
        every = sorted(local + remote, key=lambda s: s.start_ns)
        return [s for s in every if trace_id is None or s.trace_id == trace_id]

    def child_env(self, service_name: str) -> dict[str, str]:
        """Environment for a child process so its spans come here quickly (OTLP endpoint, short export delay)."""
        if self.endpoint is None:
            raise RuntimeError('This capture receives no spans from other processes: make it with receive_otlp=True.')
        return {
            'OTEL_EXPORTER_OTLP_ENDPOINT': self.endpoint,
            'OTEL_SERVICE_NAME': service_name,
            'OTEL_BSP_SCHEDULE_DELAY': '100',
        }

    def wait_for_remote(self, trace_id: str, *, timeout: float = 30.0) -> bool:
        """Wait until every MCP call this process made in the trace has its server-side span; whether they came."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                local = [_from_sdk(s) for s in self._exporter.get_finished_spans()]
                calls = {
                    s.span_id
                    for s in local
                    if s.trace_id == trace_id and s.kind == 'CLIENT' and s.name.startswith('MCP send tools/call')
                }
                answered = {s.parent_id for s in self._remote if s.trace_id == trace_id and s.kind == 'SERVER'}
                if calls <= answered:
                    return True
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(left)

    def tree(self, trace_id: str, *, title: str | None = None) -> SpanTree:
        """One trace as a tree, to display or print."""
        return SpanTree(self.spans(trace_id), title=title)

    def close(self) -> None:
        """Stop receiving spans from other processes."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    # -- the OTLP receiver ----------------------------------------------------------------------------------

    def _receive(self, path: str, body: bytes) -> None:
        if not path.endswith('/v1/traces'):
            return
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        request = ExportTraceServiceRequest.FromString(body)
        received: list[SpanRecord] = []
        for resource_spans in request.resource_spans:
            resource = {kv.key: _any_value(kv.value) for kv in resource_spans.resource.attributes}
            received.extend(
                SpanRecord(
                    name=span.name,
                    trace_id=span.trace_id.hex(),
                    span_id=span.span_id.hex(),
                    parent_id=span.parent_span_id.hex() or None,
                    start_ns=span.start_time_unix_nano,
                    end_ns=span.end_time_unix_nano,
                    service=str(resource.get('service.name', '')),
                    kind=_OTLP_KINDS.get(span.kind, 'UNSPECIFIED'),
                    attributes={kv.key: _any_value(kv.value) for kv in span.attributes},
                    remote=True,
                    events=[(e.name, e.time_unix_nano) for e in span.events],
                )
                for scope_spans in resource_spans.scope_spans
                for span in scope_spans.spans
            )
        with self._changed:
            self._remote.extend(received)
            self._changed.notify_all()

    def _serve(self) -> None:
        capture = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get('content-length') or 0))
                encoding = (self.headers.get('content-encoding') or '').lower()
                if encoding == 'gzip':
                    body = gzip.decompress(body)
                elif encoding == 'deflate':
                    body = zlib.decompress(body)
                capture._receive(self.path, body)
                self.send_response(200)
                self.send_header('content-type', 'application/x-protobuf')
                self.send_header('content-length', '0')
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(('127.0.0.1', 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, name='pplx-otlp-receiver', daemon=True).start()
        self.endpoint = f'http://127.0.0.1:{self._server.server_address[1]}'


class SpanTree:
    """A trace drawn as an indented tree: each span with its duration, other processes' spans marked."""

    def __init__(self, spans: Iterable[SpanRecord], *, title: str | None = None) -> None:
        self.spans = list(spans)
        roots = [s for s in self.spans if s.parent_id is None]
        self.title = title or (roots[0].name if roots else 'trace')

    def names(self) -> list[str]:
        """Span names in tree order (events not included)."""
        return [span.name for _, span, event in self._walk() if event is None]

    def _walk(self) -> list[tuple[str, SpanRecord, tuple[str, int] | None]]:
        ids = {s.span_id for s in self.spans}
        children: dict[str | None, list[SpanRecord]] = {}
        for span in self.spans:
            parent = span.parent_id if span.parent_id in ids else None
            children.setdefault(parent, []).append(span)
        rows: list[tuple[str, SpanRecord, tuple[str, int] | None]] = []

        def visit(span: SpanRecord, prefix: str, last: bool, top: bool) -> None:
            rows.append((prefix + ('' if top else '└─ ' if last else '├─ '), span, None))
            inner = prefix + ('' if top else '   ' if last else '│  ')
            kids = children.get(span.span_id, [])
            branch = inner + ('│  ' if kids else '   ') + '· '
            rows.extend((branch, span, event) for event in span.events if event[0] != 'exception')
            for i, kid in enumerate(kids):
                visit(kid, inner, i == len(kids) - 1, False)

        for root in children.get(None, []):
            visit(root, '', True, True)
        return rows

    def lines(self) -> list[str]:
        """The tree as text lines: branch, name, duration (an event: when, after its span began), and
        `[service]` for another process's spans."""
        rows = self._walk()
        width = max((len(p) + len(e[0] if e else s.name) for p, s, e in rows), default=0)
        lines: list[str] = []
        for prefix, span, event in rows:
            if event is None:
                text = f'{(prefix + span.name).ljust(width)}  {span.duration_s:7.3f} s'
            else:
                at = max(event[1] - span.start_ns, 0) / 1e9
                text = f'{(prefix + event[0]).ljust(width)} @{at:7.3f} s'
            lines.append(text + (f'  [{span.service}]' if span.remote and span.service else ''))
        return lines

    def __str__(self) -> str:
        return '\n'.join([self.title, *self.lines()])

    __repr__ = __str__

    def _repr_html_(self) -> str:
        return self.to_html()

    def _repr_markdown_(self) -> str:
        return self.to_markdown()

    def to_markdown(self) -> str:
        """The tree as Markdown: its title, then its lines in a code block (monospace, aligned, never wrapped)."""
        fence = '````' if any('```' in line for line in self.lines()) else '```'
        return f'**{self.title}** ({len(self.spans)} spans)\n\n{fence}\n' + '\n'.join(self.lines()) + f'\n{fence}'

    def to_html(self) -> str:
        """The tree as an HTML fragment (a titled `<pre>` block, monospace and left-aligned in any front end)."""
        esc = html.escape
        return (
            f'<div class="pplx-trace-tree" style="text-align:left"><strong>{esc(self.title)}</strong> '
            f'({len(self.spans)} spans)<pre class="pplx-trace" style="{_PRE_STYLE}">'
            f'{esc(chr(10).join(self.lines()))}</pre></div>'
        )


#: A trace tree's lines are aligned by character: monospace, never wrapped (scrolls when too wide), left-aligned.
_PRE_STYLE = (
    "font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,'DejaVu Sans Mono','Liberation Mono',monospace;"
    'font-size:12px;line-height:1.35;white-space:pre;overflow-x:auto;text-align:left;margin:.3em 0;padding:0'
)


class _Comparison:
    def __init__(self, trees: Mapping[str, SpanTree]) -> None:
        self.trees = dict(trees)

    def __str__(self) -> str:
        return '\n\n'.join(f'== {name} ==\n{tree}' for name, tree in self.trees.items())

    __repr__ = __str__

    def _repr_markdown_(self) -> str:
        return '\n\n'.join(
            tree.to_markdown().replace(f'**{tree.title}**', f'**{name}**: {tree.title}', 1)
            for name, tree in self.trees.items()
        )

    def _repr_html_(self) -> str:
        # Side by side in flex boxes, not table cells (which front ends right-align); one under the other when narrow.
        boxes = ''.join(
            f'<div style="flex:0 1 auto;min-width:0;text-align:left"><h4 style="margin:.2em 0">{html.escape(name)}</h4>'
            f'{tree.to_html()}</div>'
            for name, tree in self.trees.items()
        )
        return (
            '<div class="pplx-trace-comparison tex2jax_ignore mathjax_ignore" style="display:flex;flex-wrap:wrap;'
            f'gap:.5em 2.5em;align-items:flex-start;text-align:left">{boxes}</div>'
        )


def compare_traces(trees: Mapping[str, SpanTree]) -> Any:
    """Trees side by side in a notebook (one after the other as text): `compare_traces({'in-process': t1, ...})`."""
    return _Comparison(trees)
