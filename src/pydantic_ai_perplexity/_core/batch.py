"""Many questions at once: research them concurrently (bounded), in order, within a budget; tabulate the results.

```python
results = await research_many(['What is the EU AI Act?', 'How do heat pumps work?'], concurrency=4, budget_usd=1)
results_table(results)  # a pandas DataFrame when pandas is installed, else a list of dicts
```

A question the budget refuses while the batch's own runs hold reservations waits for one of them to end and tries
again, so every question that fits the cap gets its turn (one after another if it must). A question that still does
not fit, or whose run cannot start, comes back as a `failed` result with `error` saying why
and an empty `response_id` (no run exists) instead of ending the batch; `results_table` shows a refusal as
`refused`. Problems no question can get past (a missing or rejected key, a bad base URL) still raise, once.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, Unpack, cast

import anyio

from .._base.errors import (
    AuthenticationError,
    BudgetExceededError,
    ConfigurationError,
    PermissionDeniedError,
    PerplexityError,
)
from .._domain.results import ResearchResult
from .._ledger import BudgetUnenforceableError

if TYPE_CHECKING:
    from .._ledger import Ledger
    from .researcher import BatchKeywords, Researcher

__all__ = ('research_many', 'results_table', 'spend_by_effort')

#: Errors that would repeat for every question: the batch stops and raises them.
_FATAL = (ConfigurationError, AuthenticationError, PermissionDeniedError)

Query = str | Mapping[str, Any]
OnResult = Callable[[int, ResearchResult], Awaitable[None] | None]


def _split(item: Query, options: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    if isinstance(item, str):
        return item, dict(options)
    fields = dict(item)
    query = fields.pop('query', None)
    if not isinstance(query, str):
        raise TypeError(f'a batch item needs a "query" string: {item!r}')
    return query, {**options, **fields}


#: How a budget refusal's `error` begins; `results_table` shows such a row as `refused`.
REFUSED = 'refused by the budget: '


_REFUSAL = re.compile(re.escape(REFUSED) + r'\$([\d.,]+) estimated \+ \$([\d.,]+) .*? > \$([\d.,]+) cap')


def _usd(value: float) -> str:
    return f'${value:.4f}' if 0 < abs(value) < 0.01 else f'${value:,.2f}'


def _not_started(query: str, effort: Any, exc: PerplexityError) -> ResearchResult:
    if isinstance(exc, BudgetExceededError):  # said once, with the numbers: the cap's own message is for one call
        error = (
            f'{REFUSED}${exc.estimate_usd:.4f} estimated + ${exc.spent_usd:.4f} spent or held by runs in flight > '
            f'{_usd(exc.cap_usd)} cap. The run was not started; raise the cap or choose a cheaper effort.'
        )
    else:
        error = f'not started: {exc}'
    return ResearchResult(
        response_id='', status='failed', query=query, effort=effort if isinstance(effort, str) else None, error=error
    )


class Queue(Protocol):
    """A queue whose workers research the questions (`durable.ResearchQueue`, on DBOS, is one)."""

    async def research_many(
        self, queries: Iterable[Query], *, batch_id: str | None = None, **options: Any
    ) -> list[ResearchResult]:
        """Research every question on the queue; the results in the order of `queries`."""
        ...


async def research_many(
    queries: Iterable[Query],
    *,
    concurrency: int = 4,
    researcher: Researcher | None = None,
    budget_usd: float | None = None,
    on_result: OnResult | None = None,
    queue: Queue | None = None,
    **options: Unpack[BatchKeywords],
) -> list[ResearchResult]:
    """Research every question, at most `concurrency` runs at a time; the results in the order of `queries`.

    Called from a DBOS workflow's code, each question is a durable call (see `durable/`). With `queue`, the
    questions go to a `durable.ResearchQueue` instead, researched by its worker processes within its limits.

    Args:
        queries: Questions, or mappings with a `query` and per-question options (e.g. `{'query': q, 'effort': 'low'}`).
        concurrency: How many runs may be going at once.
        researcher: The `Researcher` to use (its ledger and budget); by default one from the environment.
        budget_usd: A cap on recorded spend for the default researcher (or `PERPLEXITY_BUDGET_USD`). A run that
            would pass it while the batch's runs hold reservations waits for one to end; one that would pass it with
            none in flight is refused before it starts and comes back failed, with the reason in `error`.
        on_result: Called with `(index, result)` as each question finishes, e.g. to show progress.
        queue: A `durable.ResearchQueue` whose workers research the questions (their researcher, ledger and budget;
            the queue's concurrency and rate limits); `researcher` and `budget_usd` are then not for this call.
        options: Options for every run (`effort`, `domains`, `wait_seconds`, ...), as `Researcher.run` takes them
            (typed: a misspelt option or an unknown effort is a type error).
    """
    if concurrency < 1:
        raise ValueError(f'concurrency must be at least 1, not {concurrency}.')
    if queue is not None:
        if researcher is not None or budget_usd is not None:
            raise ValueError("With queue=, the queue's workers research with their own researcher and budget.")
        return await _on_queue(queue, queries, on_result, options)
    items = [_split(item, options) for item in queries]
    researcher = _researcher_for(researcher, budget_usd)
    results: list[ResearchResult | None] = [None] * len(items)
    limiter = anyio.CapacityLimiter(concurrency)
    fatal: list[PerplexityError] = []
    held = _InFlight(waits=not _in_workflow())

    async def one(index: int, query: str, run_options: dict[str, Any], scope: anyio.CancelScope) -> None:
        async with limiter:
            while True:
                seen = held.ended
                try:
                    async with held.running():
                        result = await researcher.run(query, **run_options)
                except _FATAL as exc:  # would fail every question the same way: stop the batch, raise it once
                    fatal.append(exc)
                    scope.cancel()
                    return
                except BudgetUnenforceableError as exc:  # the spend cannot be read: waiting would not help
                    result = _not_started(query, run_options.get('effort'), exc)
                except BudgetExceededError as exc:
                    if await held.ended_since(seen):  # the budget a run of this batch held is back: try again
                        continue
                    result = _not_started(query, run_options.get('effort'), exc)
                except PerplexityError as exc:  # a bad argument, a create that failed
                    result = _not_started(query, run_options.get('effort'), exc)
                break
        results[index] = result
        if on_result is not None:
            outcome = on_result(index, result)
            if outcome is not None:
                await outcome

    async with researcher:
        async with anyio.create_task_group() as group:
            for index, (query, run_options) in enumerate(items):
                group.start_soon(one, index, query, run_options, group.cancel_scope)
        await researcher.flush()
    if fatal:
        raise fatal[0]
    return [r for r in results if r is not None]


def _researcher_for(researcher: Researcher | None, budget_usd: float | None) -> Researcher:
    """The researcher a batch runs with: the one given, or a default one with `budget_usd`."""
    if researcher is None:
        from .researcher import Researcher

        return Researcher(budget_usd=budget_usd)
    if budget_usd is not None:
        raise ValueError('budget_usd is for the default researcher: give your Researcher(budget_usd=...) instead.')
    return researcher


async def _on_queue(
    queue: Queue, queries: Iterable[Query], on_result: OnResult | None, options: BatchKeywords
) -> list[ResearchResult]:
    """The questions researched by a durable queue's workers; `on_result` is called for each, in order, at the end."""
    queued = await queue.research_many(queries, **options)
    for index, result in enumerate(queued):
        outcome = on_result(index, result) if on_result is not None else None
        if outcome is not None:
            await outcome
    return queued


class _InFlight:
    """The batch's own runs in flight: a question the budget refuses while they hold reservations waits for one of
    them to end (an event, no polling) and tries again, so every question that fits the cap alone gets its turn."""

    def __init__(self, *, waits: bool) -> None:
        self.waits = waits
        self.count = 0
        #: Runs of the batch that have ended (their reservation settled by their actual cost, or handed off).
        self.ended = 0
        self._changed = anyio.Event()

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncGenerator[None]:
        self.count += 1
        ended = False
        try:
            yield
            ended = True
        finally:
            self.count -= 1
            self.ended += ended
            self._changed.set()
            self._changed = anyio.Event()

    async def ended_since(self, seen: int) -> bool:
        """Wait until a run of the batch ended after `seen` was read: True; False when none is left in flight."""
        if not self.waits:
            return False
        while self.ended == seen:
            if self.count == 0:
                return False
            await self._changed.wait()
        return True


def _in_workflow() -> bool:
    """DBOS workflow code replays its steps in order: a refused question does not wait and retry there."""
    from .researcher import durable_runner

    return durable_runner() is not None


def _row(result: ResearchResult) -> dict[str, Any]:
    latency = result.progress.elapsed_s if result.response_id and result.done else None
    status, error = result.status, result.error
    refused = _REFUSAL.match(error or '') if not result.response_id else None
    if refused:  # in a cell's width, and without `$` pairs that notebook front ends typeset as LaTeX
        status, error = 'refused', 'estimate {} + used {} > cap {} USD'.format(*refused.groups())
    return {
        'query': result.query,
        'effort': result.effort,
        'status': status,
        'cost_usd': result.cost_usd,
        'latency_s': latency,
        'sources': len(result.sources),
        'cited': len(result.cited_sources),
        'searches': result.progress.searches,
        'pages_fetched': result.progress.pages_fetched,
        'model': result.model,
        'response_id': result.response_id or None,
        'error': error,
    }


def results_table(results: Iterable[ResearchResult]) -> Any:
    """One row per result (query, effort, status, cost, latency, source counts, model, id, error).

    A budget refusal's row has the status `refused` and, as its error, the estimate, what is used (spent, or held by
    runs in flight) and the cap, in USD.

    A pandas `DataFrame` when pandas is installed, otherwise a list of dicts with the same columns.
    """
    rows = [_row(r) for r in results]
    try:
        import pandas as pd  # pyright: ignore[reportMissingTypeStubs]
    except ImportError:
        return rows
    return cast('Any', pd).DataFrame(rows, columns=list(_row(ResearchResult(response_id='', status='')).keys()))


def spend_by_effort(ledger: Ledger | None = None, *, limit: int = 10_000) -> dict[str, dict[str, float]]:
    """Recorded runs and spend per effort from the ledger: `{effort: {'runs', 'spent_usd', 'estimated_usd'}}`.

    `spent_usd` sums costs the API reported; `estimated_usd` sums the estimates still standing for runs whose cost is
    not known yet (still going, or ended without a bill). Together they are what the budget counts.
    """
    from .._ledger import Ledger

    own = ledger is None
    book = Ledger() if ledger is None else ledger
    try:
        records = book.list(limit=limit)
    finally:
        if own:
            book.close()
    summary: dict[str, dict[str, float]] = {}
    for record in records:
        entry = summary.setdefault(record.effort or 'unknown', {'runs': 0, 'spent_usd': 0.0, 'estimated_usd': 0.0})
        entry['runs'] += 1
        if record.cost_usd is not None:
            entry['spent_usd'] = round(entry['spent_usd'] + record.cost_usd, 6)
        else:
            entry['estimated_usd'] = round(entry['estimated_usd'] + record.estimate_usd, 6)
    return dict(sorted(summary.items()))
