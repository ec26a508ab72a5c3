"""Bring the ledger's unfinished runs up to date from the API, so that a run abandoned by Ctrl-C, a client that left
or a cancel that never came back ends as the API has it, with its actual cost in place of its reservation.

`reconcile(ledger, client)` asks the API about the ledger's runs that are still `queued`, `in_progress`, `starting`
or `cancelling` (bounded: at most `limit` runs, `concurrency` requests at once, `timeout` seconds in all; a run
refreshed in the last `fresh_for` seconds is not asked again). A run that has ended gets its status, tokens, counts,
model, error and actual `usage.cost` (a cancelled run the API reports without usage is charged its reservation:
`record_finished`); one still going gets its current status. Runs of another API and reservations without an id are
left alone, except those of an emulator on this machine that no longer listens: they can never end by themselves nor
cost anything, so they are ended `cancelled` at no cost (`end_emulated_runs`). It never raises for a run it could
not refresh.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import anyio

from .._base.errors import PerplexityError
from .._base.statuses import TERMINAL_STATUSES, UNFINISHED_ROWS
from .._ledger import Ledger, RunRecord, is_provisional

if TYPE_CHECKING:
    from .._domain.results import ResearchResult
    from ..client import PerplexityClient

__all__ = (
    'ABANDONED_EMULATED',
    'CANCELLED_UNBILLED',
    'end_emulated_runs',
    'finished_fields',
    'learn_from',
    'reconcile',
    'record_finished',
)

logger = logging.getLogger('pydantic_ai_perplexity')

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
    """Refresh the unfinished runs among `records` (default: the newest `limit` unfinished rows and reservations).

    Returns the rows as they are after the refresh, by `response_id` (only those that were asked about).
    """
    if records is None:
        records = await ledger.aio.list(status=UNFINISHED_ROWS, limit=limit)
    records = list(records)  # read twice: for emulators that are gone, then for the runs due
    now = time.monotonic()
    with _refreshed_lock:
        due = [
            r
            for r in records
            if r.status in UNFINISHED_ROWS
            and not is_provisional(r.response_id)
            and (r.api is None or r.api == client.api)
            and now - _refreshed.get(r.response_id, -fresh_for - 1) > fresh_for
        ][:limit]
        for r in due:
            _refreshed[r.response_id] = now
    updated: dict[str, RunRecord] = {}
    for api in {r.api for r in records if r.emulated and r.api and r.api != client.api}:
        if not await _answers(api):  # an emulator that is gone: its runs can never be asked about, nor cost anything
            ended = await ledger.aio.run(end_emulated_runs, ledger, api)
            updated.update((r.response_id, r) for r in ended)
    if not due:
        return updated
    gate = anyio.Semaphore(max(1, concurrency))

    async def one(record: RunRecord) -> None:
        async with gate:
            found = await _fields(client, record, ledger)
        if found is None:
            return
        written = await ledger.aio.run(_settled, ledger, record.response_id, found)
        updated[record.response_id] = record.model_copy(update=written)

    with anyio.move_on_after(timeout):
        async with anyio.create_task_group() as tg:
            for record in due:
                tg.start_soon(one, record)
    return updated


async def _fields(client: PerplexityClient, record: RunRecord, ledger: Ledger) -> dict[str, Any] | None:
    """The ledger fields for `record` as the API has the run now; None if it could not be asked or nothing changed."""
    from .._domain.results import ResearchResult

    try:
        response = await client.retrieve(record.response_id)
    except PerplexityError as exc:
        logger.debug('could not refresh run %s from the API: %s', record.response_id, exc)
        return None
    if response.status not in TERMINAL_STATUSES:
        return {'status': response.status} if response.status != record.status else None
    result = ResearchResult.from_response(response)
    await ledger.aio.run(learn_from, ledger, result)
    fields = finished_fields(result)
    if client.emulated:
        fields['emulated'] = True
    return fields


#: The `error` note of a cancelled run the API reported no usage for, charged by the rule in docs/ledger.md.
CANCELLED_UNBILLED = (
    'cancelled with no usage reported: charged its reservation, the most it can have spent before the cancel'
)


def record_finished(ledger: Ledger, result: ResearchResult) -> None:
    """Record how a run ended on its row (the `Researcher` and `reconcile` alike), settling a cancelled run's cost."""
    _settled(ledger, result.response_id, {**finished_fields(result), **({'emulated': True} if result.emulated else {})})


def _settled(ledger: Ledger, response_id: str, fields: dict[str, Any]) -> dict[str, Any]:
    """Write `fields`, the end of a run; returns them as written.

    A run that ended `cancelled` with `usage: null` (what the API reports for a cancelled run) is settled rather than
    left estimated: charged its reservation, the most it can have spent before the cancel (the API bills the steps it
    ran and says nothing of them); an emulated one 0, as the emulator bills nothing for it.
    """
    if fields.get('status') == 'cancelled' and fields.get('cost_usd') is None:
        record = ledger.get(response_id)
        emulated = bool(fields.get('emulated')) or (record is not None and record.emulated)
        if record is not None and emulated:
            fields = {**fields, 'cost_usd': 0.0}
        elif record is not None:
            error = f'{fields["error"]}; {CANCELLED_UNBILLED}' if fields.get('error') else CANCELLED_UNBILLED
            fields = {**fields, 'cost_usd': record.estimate_usd, 'error': error}
    ledger.update(response_id, **fields)
    return fields


def learn_from(ledger: Ledger, result: ResearchResult) -> None:
    """When a finished run was billed above the price table for its tokens, raise its model's price at once: in this
    process (`pricing.observe_usage`) and in the ledger, for every process that shares it."""
    from .._domain.pricing import default_prices, observe_usage

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
        fields['cost_details'] = result.usage.cost_details()
    return fields


#: The `error` of an emulated run whose emulator stopped before it ended (it is recorded as cancelled, at no cost).
ABANDONED_EMULATED = (
    'abandoned: the emulator that served this run stopped before it ended; an emulated run costs nothing'
)


def end_emulated_runs(ledger: Ledger, api: str, *, limit: int = 1000) -> list[RunRecord]:
    """End the unfinished runs (and reservations) sent to the emulator at `api`, which has stopped: `cancelled` at a
    cost of 0, so that abandoned emulated runs never hold budget. Only for an API known to be an emulator.

    Returns the rows as they are now.
    """
    fields: dict[str, Any] = {'status': 'cancelled', 'cost_usd': 0.0, 'emulated': True, 'error': ABANDONED_EMULATED}
    ended: list[RunRecord] = []
    for record in ledger.list(status=UNFINISHED_ROWS, limit=limit):
        if record.api == api:
            ledger.update(record.response_id, **fields)
            ended.append(record.model_copy(update=fields))
    return ended


async def _answers(api: str) -> bool:
    """Whether something listens at `api` (`host:port`) on this machine; a remote API is always taken as there."""
    host, _, port = api.rpartition(':')
    host = host.strip('[]')
    if not port.isdigit() or not (host in ('localhost', '::1') or host.startswith('127.')):
        return True
    try:
        with anyio.fail_after(2.0):
            stream = await anyio.connect_tcp(host, int(port))
    except (OSError, TimeoutError):
        return False
    await stream.aclose()
    return True
