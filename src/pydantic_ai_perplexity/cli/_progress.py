"""Research progress on stderr: a live display on a terminal, one plain line per step otherwise."""

from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import TYPE_CHECKING, Any

from ._outcome import found_nothing
from ._shared import err

if TYPE_CHECKING:
    from .._domain.results import ResearchResult
    from .._domain.steps import Step


#: A resumed stream first replays the run's earlier events in one burst: steps closer together than this, from the
#: start of the wait on, are that burst (their real times are unknown: the events carry none).
BURST_GAP_S = 0.5


class StepDisplay:
    """Research progress on stderr: a live rich display on a terminal, one plain line per step otherwise.

    The live line is the spinner, the timer (first, so a narrow terminal never cuts it), the current step and the
    counts, fitted to the width; the question is not repeated (the first step, `searching: ...`, says it).

    For a run started earlier (`run_created_at`, the API's `created_at`, as `jobs wait` gives it), steps are timed
    from the run's start, in whole seconds (the API's clock has no finer grain), and the steps its stream replays in
    one burst when it opens are marked `earlier`, with no time: nothing says when they happened.
    """

    def __init__(self, *, run_created_at: float | None = None) -> None:
        self.live = sys.stderr.isatty()
        self.started = time.monotonic()
        self.run_created_at = run_created_at
        self._replaying = run_created_at is not None  # until the stream's first pause: the replayed burst
        self._last = self.started
        self._bar: Any = None
        self._task: Any = None

    def __enter__(self) -> StepDisplay:
        if self.live:
            from rich.console import Console
            from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

            self._bar = Progress(
                SpinnerColumn(),
                TimeElapsedColumn(),
                TextColumn('{task.description}'),
                console=Console(stderr=True),
                transient=True,
            )
            self._bar.start()
            self._task = self._bar.add_task(self._describe('starting', ''), total=None)
        return self

    def _describe(self, step: str, counts: str) -> str:
        """The step and the counts in the room the spinner and the timer leave: the step gives way first, then the
        counts; each cut ends in `…`."""
        from rich.cells import cell_len
        from rich.markup import escape
        from rich.text import Text

        room = self._bar.console.width - 12  # spinner, timer (0:00:00) and the spaces between the columns
        if counts and cell_len(counts) + 17 > room:
            counts = ''  # too narrow for both: the step alone
        if counts:
            room -= cell_len(counts) + 2

        def fit(text: str, width: int) -> str:
            cut = Text(text)
            cut.truncate(max(width, 1), overflow='ellipsis')
            return cut.plain

        return f'{escape(fit(step, room))}  [dim]{escape(counts)}[/]' if counts else escape(fit(step, room))

    def _when(self, step: Step) -> str:
        """When the step happened, 7 characters: seconds since the wait (or the run) started, or `earlier`."""
        if self.run_created_at is None:
            return f'{step.progress.elapsed_s:6.1f}s'
        now = time.monotonic()
        gap, self._last = now - self._last, now
        if self._replaying and gap <= BURST_GAP_S:
            return 'earlier'
        self._replaying = False
        return f'{max(0.0, time.time() - self.run_created_at):6.0f}s'

    def __call__(self, step: Step) -> None:
        """The `on_progress` callback."""
        from .._present.terminal import line_for_terminal

        progress = step.progress
        detail = line_for_terminal(step.detail)  # search queries and page titles come from the model and the web
        when = self._when(step)
        if self._bar is not None:
            from rich.text import Text

            self._bar.console.print(Text.assemble((f'{when} ', 'dim'), detail))
            self._bar.update(self._task, description=self._describe(detail, progress.summary()))
        else:
            err(f'  [{when}] {detail}')

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._bar is not None:
            self._bar.stop()

    def summary(self, result: ResearchResult) -> None:
        """One closing line on stderr: how the run ended, how long it took, what it did."""
        elapsed = time.monotonic() - self.started
        line = f'{result.status} in {elapsed:.1f}s: {result.progress.summary()}'
        if self.run_created_at is not None and result.created_at and result.completed_at:
            took = (result.completed_at - result.created_at).total_seconds()
            line = f'{result.status} in {took:.0f}s (waited {elapsed:.1f}s here): {result.progress.summary()}'
        if self._bar is not None:
            mark = (
                '[red]✗[/]'
                if result.status != 'completed'
                else '[yellow]![/]'
                if found_nothing(result)
                else '[green]✓[/]'
            )
            self._bar.console.print(f'{mark} {line}')
        else:
            err(line)
