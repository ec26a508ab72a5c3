"""A timeline of one research run: each step (search, fetch, remote tool call, answer) with when it happened.

A `Timeline` is an `on_progress` callback: pass it to `research(...)`, `Researcher.run(...)` or `collect(...)` and
it records every `Step` with when it happened. They are the same typed steps the tracing records on the
`perplexity.research` span (as events by default, as child spans with `PERPLEXITY_TRACE_STEPS=spans`), so the
picture and the trace agree. It renders itself as an inline SVG (`to_svg()`) and, in notebooks, as inline-styled HTML
that an untrusted notebook keeps (`to_html()`), with a Markdown table of its steps besides (`to_markdown()`).

```python
timeline = Timeline()
result = await research('How do solid-state batteries work?', on_progress=timeline)
timeline.finish(result)
timeline  # in a notebook: the picture
```
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .display_slot import DISPLAY
from .steps import StepKind

if TYPE_CHECKING:
    from .results import ResearchResult
    from .steps import Step

__all__ = ('Bar', 'StepKind', 'Timeline', 'TimelineStep')

#: Lanes of the picture, top to bottom, with the step kinds that open and close a bar in each.
LANES: tuple[tuple[str, str], ...] = (
    ('run', 'Run'),
    ('search', 'Search'),
    ('fetch', 'Fetch'),
    ('mcp', 'Remote tools'),
    ('tool', 'Tools and functions'),
    ('answer', 'Answer'),
)


@dataclass(frozen=True)
class TimelineStep:
    """One step of a run: seconds since the timeline started, its kind and description, and what the picture needs
    of its specifics (the queries of a search, whether a remote call failed, the `ref` pairing start and end)."""

    elapsed_s: float
    kind: StepKind
    detail: str
    queries: tuple[str, ...] = ()
    ok: bool = True
    ref: int | None = None


@dataclass(frozen=True)
class Bar:
    """A stretch of time in one lane of the picture (a search from query to results, the answer, …)."""

    lane: str
    start_s: float
    end_s: float
    label: str
    ok: bool = True


class Timeline:
    """Records a research run's steps as they stream; renders them as a picture.

    Use it as the `on_progress` callback (it is callable), then `finish(result)` to mark the end. Times are
    measured from the first call (or from `start()`), with this process's monotonic clock.
    """

    def __init__(self, title: str = '') -> None:
        self.title = title
        self.steps: list[TimelineStep] = []
        self.end_s: float | None = None
        self.status: str | None = None
        self._t0: float | None = None

    # -- recording --------------------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the clock now (otherwise it starts at the first step)."""
        if self._t0 is None:
            self._t0 = time.monotonic()

    @property
    def elapsed_s(self) -> float:
        """Seconds since the clock started (the run's length once finished)."""
        if self.end_s is not None:
            return self.end_s
        if self._t0 is None:
            return 0.0
        return round(time.monotonic() - self._t0, 3)

    def record(self, step: Step) -> TimelineStep:
        """Add a step at the current time."""
        self.start()
        recorded = TimelineStep(self.elapsed_s, step.kind, step.detail, step.queries or (), step.ok, step.ref)
        self.steps.append(recorded)
        return recorded

    def __call__(self, step: Step) -> None:
        """The `on_progress` callback: record the step (bookkeeping steps that are not shown are left out)."""
        if step.shown:
            self.record(step)

    def finish(self, result: ResearchResult | None = None) -> None:
        """Mark the end of the run (now); with the result, note how it ended."""
        self.start()
        if self.end_s is None:
            self.end_s = self.elapsed_s
        if result is not None:
            self.status = result.status

    # -- reading ----------------------------------------------------------------------------------------------

    def bars(self) -> list[Bar]:
        """The steps as stretches of time: the whole run, each search from its query to its results, each fetch
        batch from its URLs to its pages, the answer from its first words to the end; remote tool calls as instants."""
        end = self.elapsed_s
        bars: list[Bar] = [Bar('run', 0.0, end, self.status or 'running', ok=self.status in (None, 'completed'))]
        open_searches: list[TimelineStep] = []
        open_fetches: list[TimelineStep] = []
        answer: TimelineStep | None = None
        for step in self.steps:
            if step.kind == 'answer':
                answer = answer or step
            elif (bar := _step_bar(step, open_searches, open_fetches)) is not None:
                bars.append(bar)
        bars += _unfinished('search', open_searches, end) + _unfinished('fetch', open_fetches, end)
        if answer is not None:
            bars.append(
                Bar('answer', answer.elapsed_s, end, 'writing the answer', ok=self.status in (None, 'completed'))
            )
        return bars

    def to_svg(self, *, width: int = 720) -> str:
        """The picture: one lane per kind of step, a bar per step over a time axis (an SVG document fragment)."""
        return DISPLAY.need().timeline_to_svg(self.bars(), total_s=self.elapsed_s, title=self._title(), width=width)

    def _title(self) -> str:
        title = self.title or 'Research timeline'
        return f'{title} · {self.status}' if self.status else title

    def to_html(self) -> str:
        """The picture as inline-styled HTML (it survives an untrusted notebook's sanitizer), then the steps."""
        display = DISPLAY.need()
        return display.timeline_to_html(
            self.bars(), total_s=self.elapsed_s, title=self._title()
        ) + display.timeline_steps_html(self.steps)

    def to_markdown(self) -> str:
        """The steps as a Markdown table under a title line."""
        return DISPLAY.need().timeline_steps_markdown(self.steps, title=self._title(), total_s=self.elapsed_s)

    def _repr_html_(self) -> str:
        return self.to_html()

    def _repr_markdown_(self) -> str:
        return self.to_markdown()

    def __repr__(self) -> str:
        return f'Timeline({len(self.steps)} steps, {self.elapsed_s:.1f}s)'


def _step_bar(step: TimelineStep, open_searches: list[TimelineStep], open_fetches: list[TimelineStep]) -> Bar | None:
    """The bar a step closes (results close their search, pages their fetch; a remote tool call is an instant), or
    None for a step that opens one (kept in `open_searches` or `open_fetches`) or draws none."""
    match step.kind:
        case 'search':
            open_searches.append(step)
        case 'results':
            began = _began(open_searches, step)
            label = '; '.join(began.queries)
            return Bar('search', began.elapsed_s, step.elapsed_s, f'{label} → {step.detail}'.strip(' →'))
        case 'fetch':
            open_fetches.append(step)
        case 'fetched':
            began = _began(open_fetches, step)
            return Bar('fetch', began.elapsed_s, step.elapsed_s, step.detail)
        case 'mcp':
            return Bar('mcp', step.elapsed_s, step.elapsed_s, step.detail, ok=step.ok)
        case 'tool' | 'function':
            return Bar('tool', step.elapsed_s, step.elapsed_s, step.detail, ok=step.ok)
        case _:
            pass
    return None


def _unfinished(lane: str, steps: list[TimelineStep], end: float) -> list[Bar]:
    """Searches or fetches that never got their results, as failed bars running to `end`."""
    return [Bar(lane, s.elapsed_s, end, f'{s.detail} (unfinished)', ok=False) for s in steps]


def _began(opened: list[TimelineStep], end: TimelineStep) -> TimelineStep:
    """The step `end` closes: the open one with its `ref`, else the oldest open one, else `end` itself (an instant)."""
    index = next((i for i, s in enumerate(opened) if s.ref == end.ref), 0)
    return opened.pop(index) if opened else end
