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

import html
import sys
import threading
from collections.abc import Generator
from contextlib import contextmanager
from typing import IO, TYPE_CHECKING, Any

import anyio

from .._core.batch import research_many, results_table, spend_by_effort
from .._domain.timeline import Timeline
from ..emulator._offline import (
    use_emulator_if_no_key,
)  # kept here too: notebooks written before it moved import it from here
from ._receiver import OtlpReceiver
from ._records import SpanRecord, from_sdk
from ._tree import SpanTree, compare_traces

if TYPE_CHECKING:
    from types import TracebackType

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
# Traces (the records, the OTLP receiver and the tree live in _records, _receiver and _tree)


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
        self._receiver = OtlpReceiver(self._received) if receive_otlp else None
        self.endpoint: str | None = self._receiver.endpoint if self._receiver is not None else None

    # -- collecting -----------------------------------------------------------------------------------------

    @contextmanager
    def trace(self, name: str) -> Generator[str]:
        """A root span around a block; yields its trace id, to pick the trace out later."""
        with self._tracer.start_as_current_span(name) as span:
            yield format(span.get_span_context().trace_id, '032x')

    def spans(self, trace_id: str | None = None) -> list[SpanRecord]:
        """Finished spans (this process's and received ones), in start order; only one trace's if given."""
        local = [from_sdk(s) for s in self._exporter.get_finished_spans()]
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
        with self._changed:
            return self._changed.wait_for(lambda: self._answered(trace_id), timeout)

    def _answered(self, trace_id: str) -> bool:
        """Whether each MCP call this process made in the trace has its server-side span (called holding the lock)."""
        calls = {
            s.span_id
            for s in map(from_sdk, self._exporter.get_finished_spans())
            if s.trace_id == trace_id and s.kind == 'CLIENT' and s.name.startswith('MCP send tools/call')
        }
        answered = {s.parent_id for s in self._remote if s.trace_id == trace_id and s.kind == 'SERVER'}
        return calls <= answered

    def tree(self, trace_id: str, *, title: str | None = None) -> SpanTree:
        """One trace as a tree, to display or print."""
        return SpanTree(self.spans(trace_id), title=title)

    def close(self) -> None:
        """Stop receiving spans from other processes."""
        if self._receiver is not None:
            self._receiver.close()
            self._receiver = None

    def _received(self, spans: list[SpanRecord]) -> None:
        """What the receiver got from another process, kept; a waiting `wait_for_remote` looks again."""
        with self._changed:
            self._remote.extend(spans)
            self._changed.notify_all()
