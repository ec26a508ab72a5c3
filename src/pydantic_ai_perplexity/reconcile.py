"""Bring the ledger's unfinished runs up to date from the API, so that a run abandoned by Ctrl-C, a client that left
or a cancel that never came back ends as the API has it, with its actual cost in place of its reservation.

`reconcile(ledger, client)` asks the API about the ledger's runs that are still `queued`, `in_progress`, `starting`
or `cancelling` (bounded: at most `limit` runs, `concurrency` requests at once, `timeout` seconds in all; a run
refreshed in the last `fresh_for` seconds is not asked again). A run that has ended gets its status, tokens, counts,
model, error and actual `usage.cost`; one still going gets its current status. Runs of another API (an emulator that
is gone) and reservations without an id are left alone. It never raises for a run it could not refresh.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from .errors import PerplexityError
from .ledger import Ledger, RunRecord, is_provisional

if TYPE_CHECKING:
    from .client import PerplexityClient
    from .results import ResearchResult

__all__ = ('UNFINISHED', 'finished_fields', 'learn_from', 'reconcile')

logger = logging.getLogger('pydantic_ai_perplexity')

#: Statuses of a row whose run may still change at the API.
UNFINISHED: tuple[str, ...] = ('queued', 'in_progress', 'starting', 'cancelling', 'requires_action')
_TERMINAL = frozenset({'completed', 'incomplete', 'failed', 'cancelled'})
_refreshed: dict[str, float] = {}  # response_id -> monotonic time of its last refresh, across calls
_refreshed_lock = threading.Lock()


async def reconcile(
    ledger: Ledger,
    client: PerplexityClient,
    records: Iterable[RunRecord] | None = None,
    *,
    limit: int = 50,
    concurrency: int = 4,
    timeout: float = 10.0,
    fresh_for: float = 10.0,
) -> dict[str, RunRecord]:
    """Refresh the unfinished runs among `records` (default: the ledger's newest `limit` unfinished ones).

    Returns the rows as they are after the refresh, by `response_id` (only those that were asked about).
    """
    if records is None:
        records = await anyio.to_thread.run_sync(lambda: ledger.list(status=UNFINISHED, limit=limit))
    now = time.monotonic()
    with _refreshed_lock:
        due = [
            r
            for r in records
            if r.status in UNFINISHED
            and not is_provisional(r.response_id)
            and (r.api is None or r.api == client.api)
            and now - _refreshed.get(r.response_id, -fresh_for - 1) > fresh_for
        ][:limit]
        for r in due:
            _refreshed[r.response_id] = now
    updated: dict[str, RunRecord] = {}
    if not due:
        return updated
    gate = anyio.Semaphore(max(1, concurrency))

    async def one(record: RunRecord) -> None:
        async with gate:
            fields = await _fields(client, record, ledger)
        if fields is None:
            return
        await anyio.to_thread.run_sync(lambda: ledger.update(record.response_id, **fields))
        updated[record.response_id] = record.model_copy(update=fields)

    with anyio.move_on_after(timeout):
        async with anyio.create_task_group() as tg:
            for record in due:
                tg.start_soon(one, record)
    return updated


async def _fields(client: PerplexityClient, record: RunRecord, ledger: Ledger) -> dict[str, Any] | None:
    """The ledger fields for `record` as the API has the run now; None if it could not be asked or nothing changed."""
    from .results import ResearchResult

    try:
        response = await client.retrieve(record.response_id)
    except PerplexityError as exc:
        logger.debug('could not refresh run %s from the API: %s', record.response_id, exc)
        return None
    if response.status not in _TERMINAL:
        return {'status': response.status} if response.status != record.status else None
    result = ResearchResult.from_response(response)
    await anyio.to_thread.run_sync(learn_from, ledger, result)
    fields = finished_fields(result)
    if client.emulated:
        fields['emulated'] = True
    return fields


def learn_from(ledger: Ledger, result: ResearchResult) -> None:
    """When a finished run was billed above the price table for its tokens, raise its model's price at once: in this
    process (`pricing.observe_usage`) and in the ledger, for every process that shares it."""
    from .pricing import default_prices, observe_usage

    usage = result.usage
    if not result.model or usage.cost_usd is None:
        return
    billed = {
        'input_tokens': usage.input_tokens,
        'output_tokens': usage.output_tokens,
        'cost': {'total_cost': usage.cost_usd, 'tool_calls_cost': usage.tool_calls_cost_usd or 0.0},
    }
    try:
        table = default_prices().with_learned(ledger.learned_prices())
    except PerplexityError:  # a broken price table is reported where runs are priced, not here
        return
    raised = observe_usage(result.model, billed, table)
    if raised is not None:
        logger.info(
            '%s was billed above its price: later reservations price it at %s.', result.model, raised.describe()
        )
        ledger.learn_price(result.model, raised)


def finished_fields(result: ResearchResult) -> dict[str, Any]:
    """The ledger fields a finished run's result sets on its row: written by `Researcher` and by `reconcile` alike."""
    fields: dict[str, Any] = {
        'status': result.status,
        'sources': len(result.sources),
        'cited': len(result.cited_sources),
        'input_tokens': result.usage.input_tokens,
        'output_tokens': result.usage.output_tokens,
        'error': result.error,
    }
    if result.model:
        fields['model'] = result.model
    if result.cost_usd is not None:
        fields['cost_usd'] = result.cost_usd  # the actual cost replaces the reservation in the spend
    return fields
