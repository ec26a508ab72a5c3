"""The one implementation of research that every way in uses: start, wait with progress, collect, cancel, list.

A research call is always a *background* run (`background: true, store: true`): the create returns at once
with the run's id, which is recorded in the ledger before anything else can go wrong, and the run then goes
on server-side whatever happens to this process. Waiting streams the run's events (resuming after drops) and
stops at the wait budget; a run still going then comes back as a hand-off, a `ResearchResult` whose `done`
is false, to be collected later by `response_id` from any process.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import json
import logging
import math
import os
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar, Unpack, cast

import anyio
import anyio.to_thread
from pydantic import TypeAdapter, ValidationError

from .._base.errors import (
    BadRequestError,
    ConfigurationError,
    InternalServerError,
    InvalidArgumentError,
    MalformedResponseError,
    NotFoundError,
    PerplexityError,
    ResearchTimeoutError,
    RunMayHaveStartedError,
)
from .._base.slot import Slot
from .._base.statuses import STARTING
from .._domain.budget import Budget, BudgetWarning, SpendLine
from .._domain.calls import BatchKeywords, OnProgress, OnStarted, RunKeywords
from .._domain.options import (
    DEFAULT_FUNCTION_CALLS,
    EFFORTS,
    FunctionTool,
    ResearchOptions,
    ResearchOptionsDict,
    check_wait,
    response_format,
)
from .._domain.pricing import default_prices, limit_request, refresh_api_prices
from .._domain.results import FunctionCall, ResearchResult, Usage
from .._domain.search_filters import SEARCH_MODEL, SearchFilters, search_fee, search_request
from .._domain.settings import Settings
from .._domain.steps import Step, StepReducer
from .._ledger import Ledger, OnBudget, Origin, RunRecord, default_ledger_path, estimate_cost
from ..client import PerplexityClient
from ..client._models import AgentEvent, Response, SearchResponse, field_of
from ..client._params import AgentRequest, InputItem
from . import tracing
from .functions import local_functions, waiting_note
from .reconcile import learn_from, reconcile, record_finished

if TYPE_CHECKING:
    import httpx2

__all__ = (
    'DURABLE',
    'EFFORTS',
    'BatchKeywords',
    'DurableRunner',
    'OnBudgetWarning',
    'OnProgress',
    'OnStarted',
    'ResearchKeywords',
    'Researcher',
    'RunKeywords',
    'durable_runner',
    'research',
    'research_sync',
)

logger = logging.getLogger('pydantic_ai_perplexity')

_T = TypeVar('_T')

OnBudgetWarning = Callable[[BudgetWarning], Awaitable[None] | None]
"""Called when a run's reservation carries a budget window across its `warn_at` (once per window)."""


class ResearchKeywords(RunKeywords, total=False):
    """What `research()` / `research_sync()` take: `Researcher.run`'s keywords and the researcher's settings."""

    api_key: str | None
    base_url: str | None
    budget_usd: float | None
    budget: Budget | None
    ledger: Ledger | str | os.PathLike[str] | Literal[False] | None
    scope: str | None
    on_budget: OnBudget | None
    on_budget_warning: OnBudgetWarning | None


#: The keywords of `research()` that make its `Researcher`; the rest go to `Researcher.run`.
_SETTINGS = ('api_key', 'base_url', 'budget_usd', 'budget', 'ledger', 'scope', 'on_budget', 'on_budget_warning')


@dataclass
class _Run:
    query: str
    effort: str
    started: float
    adapter: TypeAdapter[Any] | None
    structured: bool
    trace: tracing.RunTrace = tracing.NO_TRACE
    model: str | None = None
    #: The limits lowered to fit the budget (`ResearchResult.tightened`).
    tightened: dict[str, tuple[int, int]] | None = None
    #: What the result must say of how it came about (`ResearchResult.notes`).
    notes: tuple[str, ...] = ()


class Researcher:
    """Runs research on Perplexity's Agent API and keeps the ledger and budget; one per process is typical.

    Use it as an async context manager (re-entrant: it is reference-counted, so one HTTP client serves every
    user inside it), or call `aclose()` when done. Settings not given come from the environment at
    construction: `PERPLEXITY_API_KEY`, `PERPLEXITY_BASE_URL`, `PERPLEXITY_EFFORT`, `PERPLEXITY_WAIT_SECONDS`,
    `PERPLEXITY_BUDGET_USD`, `PERPLEXITY_ON_BUDGET`, `PERPLEXITY_STATE_DIR`. Under a budget, a run that does not fit
    what is left is refused (`BudgetExceededError`), or with `on_budget='tighten'` run with lower limits (said in
    `ResearchResult.tightened`).
    """

    def __init__(
        self,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        effort: str | None = None,
        wait_seconds: float | None = None,
        budget_usd: float | None = None,
        ledger: Ledger | str | os.PathLike[str] | Literal[False] | None = None,
        on_budget: OnBudget | None = None,
        origin: Origin = 'api',
        client: PerplexityClient | None = None,
        http_client: httpx2.AsyncClient | None = None,
        max_retries: int = 2,
        budget: Budget | None = None,
        scope: str | None = None,
        on_budget_warning: OnBudgetWarning | None = None,
        clock: Callable[[], datetime] | None = None,
        reuse_within: float | None = None,
    ) -> None:
        """`budget` adds windows, a per-run ceiling, per-caller and per-scope limits and `warn_at` to the total cap
        (`budget_usd`); `scope` labels this researcher's runs for `budget.per_scope`; `on_budget_warning` is called
        when a run crosses `warn_at`; `clock` (UTC now) decides the runs' times and so their budget windows;
        `reuse_within` (seconds) serves a question asked again with the same options inside that window from the
        finished run in the ledger (`run(reuse_within=...)` per call)."""
        #: The checked settings: the arguments given, the rest from the environment (see `Settings.load`).
        self.settings = Settings.load(
            api_key=api_key,
            base_url=base_url,
            effort=effort,
            wait_seconds=wait_seconds,
            budget_usd=budget_usd,
            budget=budget,
            on_budget=on_budget,
        )
        self.effort = self.settings.effort
        self.wait_seconds = self.settings.wait_seconds
        self.budget_usd = self.settings.budget_usd
        #: Every limit that applies (the total is `budget_usd`), or None.
        self.budget = self.settings.budget
        self.scope = scope
        self.on_budget_warning = on_budget_warning
        #: Seconds within which the same question with the same options is served from the ledger's finished run
        #: (`ResearchResult.reused`) instead of researched and billed again; None: never.
        self.reuse_within = _check_reuse(reuse_within)
        self._clock = clock or _utc_now
        self._warned: set[tuple[str, str | None, str | None, str]] = set()
        on_budget = self.settings.on_budget
        if on_budget not in ('refuse', 'tighten'):
            raise ConfigurationError(f'on_budget={on_budget!r}: use "refuse" (the default) or "tighten".')
        #: A run that does not fit what is left of the budget is refused (`'refuse'`), or run with lower limits
        #: (`'tighten'`; the result's `tightened` says which).
        self.on_budget: OnBudget = on_budget
        self.origin: Origin = origin
        if ledger is False:
            self.ledger: Ledger | None = None
        elif isinstance(ledger, Ledger):
            self.ledger = ledger
        else:
            self.ledger = Ledger(ledger)
        if self.budget is not None and self.ledger is None:
            raise ConfigurationError('A budget needs the ledger to record spend: drop ledger=False or the budget.')
        self._owns_client = client is None
        self._client = client
        # The key and URL Settings read and checked, so the client does not read the environment again ('' for no key).
        self._client_settings: dict[str, Any] = {
            'api_key': self.settings.api_key or '',
            'base_url': self.settings.base_url,
            'http_client': http_client,
            'max_retries': max_retries,
        }
        if client is None:
            # Fail fast on a bad base URL (construction reads and checks the environment).
            self._client = PerplexityClient(**self._client_settings)
        self._users = 0
        self._lock = anyio.Lock()

    # -- lifecycle ---------------------------------------------------------------------------------------------

    async def __aenter__(self) -> Researcher:
        async with self._lock:
            self._users += 1
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        async with self._lock:
            self._users -= 1
            last = self._users == 0
        if last:
            await self.aclose()

    @property
    def client(self) -> PerplexityClient:
        """The HTTP client; made again on first use after `aclose()`, so a researcher can be re-entered."""
        if self._client is None:
            self._client = PerplexityClient(**self._client_settings)
        return self._client

    async def aclose(self) -> None:
        """Close the HTTP client (if this researcher made it) and the ledger; both reopen on next use."""
        if self._owns_client and self._client is not None:
            client, self._client = self._client, None
            await client.aclose()
        if self.ledger is not None:
            await self.ledger.aio.aclose()

    async def flush(self) -> None:
        """Wait until every queued ledger write has landed (closing the researcher does this too)."""
        await self._flush()

    def __repr__(self) -> str:
        return f'Researcher(effort={self.effort!r}, wait_seconds={self.wait_seconds!r}, client={self._client!r})'

    # -- research ----------------------------------------------------------------------------------------------

    def build_request(
        self, options: ResearchOptions | None = None, /, **given: Unpack[ResearchOptionsDict]
    ) -> AgentRequest:
        """The create request for these options, checked; raises `InvalidArgumentError` naming what to fix."""
        return self._request(ResearchOptions.parse(options, **given))

    def _request(self, options: ResearchOptions) -> AgentRequest:
        """The create request of `options` as sent: their local functions as `function` tools, the effort's limits."""
        request = options.to_request(self.effort)
        if options.functions:
            tools = [*request.get('tools', ()), *(f.tool() for f in local_functions(options.functions).values())]
            request['tools'] = tools
        return _limited(request)

    async def start(
        self,
        query: str,
        *,
        options: ResearchOptions | None = None,
        caller: str | None = None,
        request_id: str | None = None,
        **given: Unpack[ResearchOptionsDict],
    ) -> ResearchResult:
        """Start a background run and return at once (status `queued`); collect it later by `response_id`.

        Takes the options of `run`; the run's id is in the ledger when this returns. `request_id` is recorded on the
        run's ledger row from its reservation on, so that a caller can find a run it may have started (see `durable/`).
        """
        parsed = ResearchOptions.parse(options, **given)
        if parsed.functions:
            raise InvalidArgumentError(
                'functions need run() (or research()), which waits and answers their calls: a background run started '
                'with start() would stop in requires_action with no one to run them.',
                argument='functions',
            )
        with tracing.research_span(query) as trace:
            response, run = await self._begin(query, parsed, caller, request_id)
            trace.started(response, effort=run.effort, model=run.model)
            result = self._marked(ResearchResult.from_response(response, effort=response.effort, query=query))
            result.notes = list(run.notes)
            return result

    async def run(
        self,
        query: str,
        *,
        options: ResearchOptions | None = None,
        on_progress: OnProgress | None = None,
        on_started: OnStarted | None = None,
        wait_seconds: float | None = None,
        caller: str | None = None,
        request_id: str | None = None,
        reuse_within: float | None = None,
        **given: Unpack[ResearchOptionsDict],
    ) -> ResearchResult:
        """Start a run and wait up to the wait budget: the finished result, or a hand-off if it is still going.

        The options are `ResearchOptions`' fields, as keywords or `options=` (keywords win). The run's id is in the
        ledger before any waiting (`on_started` is then called with it), whatever cancels the call. `caller` (who
        asked, e.g. an MCP token's name) is recorded on the run in the ledger, for spend per caller; `request_id` too
        (e.g. the MCP call's JSON-RPC id, so that a cancel reaching another instance finds the run), as in `start`.
        With `reuse_within` (seconds; default the researcher's), a run of the same question with the same options that
        finished inside the window, in any process sharing the ledger, is served again (`reused`, nothing billed).
        """
        durable = durable_runner()
        if durable is not None:  # DBOS workflow code: a start step and a collect step (durable/)
            return await durable.run(
                self,
                query,
                options=options,
                on_progress=on_progress,
                on_started=on_started,
                wait_seconds=wait_seconds,
                caller=caller,
                **given,
            )
        parsed = ResearchOptions.parse(options, **given)
        functions = local_functions(parsed.functions) if parsed.functions else {}  # refused before anything starts
        window = self.reuse_within if reuse_within is None else _check_reuse(reuse_within)
        notes: tuple[str, ...] = ()
        if window:
            reused, notes = await self._reused(query, parsed, window, caller)
            if reused is not None:
                return reused
        with tracing.research_span(query) as trace:
            response, run = await self._begin(query, parsed, caller, request_id)
            run.notes = (*notes, *run.notes)
            run.trace = trace.started(response, effort=run.effort, model=run.model)
            if on_started is not None:
                outcome = on_started(response.id)
                if outcome is not None:
                    await outcome
            result = await self._wait(response.id, run, on_progress=on_progress, wait_seconds=wait_seconds)
            if functions and result.status == 'requires_action':
                result = await self._answer_functions(
                    query, parsed, functions, result, run, caller=caller, on_progress=on_progress, wait=wait_seconds
                )
            elif functions and not result.done:  # handed off: whoever collects it answers its calls
                result.notes.append(
                    'The run may call local functions: collect it with Researcher.collect(response_id, '
                    'functions=[...]) to answer them.'
                )
            trace.finish(result)
            return result

    async def _answer_functions(
        self,
        query: str,
        options: ResearchOptions,
        functions: Mapping[str, FunctionTool],
        result: ResearchResult,
        run: _Run,
        *,
        caller: str | None,
        on_progress: OnProgress | None,
        wait: float | None,
    ) -> ResearchResult:
        """Answer a run's local function calls until it ends: run each call here, send the outputs on a request that
        continues the run (`previous_response_id`), wait again; at most `max_function_calls` calls in all.

        Each continuation is a run of its own in the ledger (reserved and billed as such); the result is the last
        one's, with every call made (`function_calls`) and the cost of all of them.
        """
        limit = options.max_function_calls or DEFAULT_FUNCTION_CALLS
        answered: list[FunctionCall] = []
        earlier: list[ResearchResult] = []
        while result.status == 'requires_action':
            result = result.model_copy(deep=True)  # the one the ledger was given stays as it was billed
            pending = [call for call in result.function_calls if call.output is None]
            if not pending:
                break
            if len(answered) + len(pending) > limit:
                result.notes.append(
                    f'The run asked for {len(pending)} more local function calls after {len(answered)}, past '
                    f'max_function_calls={limit}: they were not run and it stopped in requires_action.'
                )
                break
            items: list[InputItem] = []
            for call in pending:
                function = functions.get(call.name)
                if function is None:
                    call.error = f'there is no function named {call.name!r} (offered: {", ".join(functions)})'
                    call.output = f'Error: {call.error}.'
                else:
                    call.output, call.error = await function.call(call.arguments)
                answered.append(call)
                result.progress.function_calls = len(answered)
                await self._function_step(call, result, run, on_progress)
                items.append(
                    {'type': 'function_call_output', 'call_id': call.call_id, 'output': call.output, 'name': call.name}
                )
            earlier.append(result)
            follow = options.model_copy(update={'previous_response_id': result.response_id})
            response, leg = await self._begin(query, follow, caller, items=items)
            run.notes = (*run.notes, *leg.notes)
            result = await self._wait(response.id, run, on_progress=on_progress, wait_seconds=wait)
        result = result.model_copy(deep=True)
        result.function_calls = [*answered, *(call for call in result.function_calls if call.output is None)]
        result.progress.function_calls = len(answered)
        _add_usage(result, earlier)
        return result

    async def _function_step(
        self, call: FunctionCall, result: ResearchResult, run: _Run, on_progress: OnProgress | None
    ) -> None:
        """A local function call as a research step: traced, and shown to `on_progress`."""
        detail = f'called function {call.name}' + (': failed' if call.error else '')
        step = Step(
            kind='function',
            detail=detail,
            tool=call.name,
            results=1,
            error=call.error,
            item_type='function_call',
            progress=result.progress.model_copy(update={'queries': list(result.progress.queries)}),
            response_id=result.response_id,
            elapsed_s=round(time.monotonic() - run.started, 3),
        )
        run.trace.step(step)
        if on_progress is not None:
            outcome = on_progress(step)
            if outcome is not None:
                await outcome

    def run_sync(self, query: str, **keywords: Unpack[RunKeywords]) -> ResearchResult:
        """`run` for scripts: on an event loop of its own, inside this researcher (its HTTP client closed after).

        Raises `RuntimeError` where an event loop is running (async code, Jupyter): `await researcher.run(...)` there.
        """

        async def entered() -> ResearchResult:
            async with self:
                return await self.run(query, **keywords)

        return _run_sync(entered, 'Researcher.run_sync', 'await researcher.run(...)')

    async def collect(
        self,
        response_id: str,
        *,
        wait_seconds: float | None = None,
        on_progress: OnProgress | None = None,
        functions: Sequence[Callable[..., Any] | FunctionTool] | None = None,
        max_function_calls: int | None = None,
    ) -> ResearchResult:
        """Wait again (up to the wait budget) for a run started earlier, by this or any other process.

        A run that stopped in `requires_action` (it called local functions, e.g. after `run` handed it off) waits for
        their outputs: given `functions` (and `max_function_calls`, as `run` takes them), they are answered here and
        the run goes on; without them the result says which calls it waits for (`function_calls` without an output).
        """
        durable = durable_runner()
        if durable is not None:  # DBOS workflow code: one checkpointed step (durable/)
            if functions:
                raise InvalidArgumentError(
                    'functions cannot be answered by a durable collect: collect outside the workflow.',
                    argument='functions',
                )
            return await durable.collect(self, response_id, wait_seconds=wait_seconds, on_progress=on_progress)
        options = ResearchOptions.parse(None, functions=functions, max_function_calls=max_function_calls)
        answering = local_functions(options.functions) if options.functions else {}  # refused before any wait
        record = await self._ledger_call(self.ledger.get, response_id) if self.ledger else None
        run = _Run(
            query=record.query if record else '',
            effort=(record.effort if record else None) or '',
            started=time.monotonic(),
            adapter=None,
            structured=False,
        )
        with tracing.collect_span(response_id, record) as trace:
            run.trace = trace
            result = await self._wait(response_id, run, on_progress=on_progress, wait_seconds=wait_seconds)
            if result.status == 'requires_action' and answering:
                if run.effort:
                    options = options.model_copy(update={'effort': run.effort})
                result = await self._answer_functions(
                    run.query or f'Continue run {response_id}',
                    options,
                    answering,
                    result,
                    run,
                    caller=record.caller if record else None,
                    on_progress=on_progress,
                    wait=wait_seconds,
                )
            elif result.status == 'requires_action':
                result.notes.append(waiting_note(result.function_calls))
            run.trace.finish(result)
            return result

    @tracing.cancel_span
    async def cancel(self, response_id: str) -> ResearchResult:
        """Ask the API to cancel a run (it stops billing); returns the run's state after the acknowledgement.

        A run that had already ended comes back as it ended (nothing is cancelled). The live API refuses a cancel of an
        unknown, malformed or finished id alike (400 "already terminal"), so a refusal is checked with a retrieve.

        Raises:
            NotFoundError: no such run; `reason` says whether the id is not a run id at all, or no run of that id was
                started here (the ledger does not know it) and the API has none.
        """
        try:
            ack = await self.client.cancel(response_id)
        except (BadRequestError, NotFoundError) as refused:
            try:
                response = await self.client.retrieve(response_id)
            except NotFoundError as missing:
                raise await self._no_such_run(response_id, missing) from None
            if not response.done:
                raise refused
            # Already finished: nothing to cancel; report how it ended.
            result = self._marked(ResearchResult.from_response(response))
            await self._record_end(result)
            return result
        if self.ledger:
            self._record(self.ledger.update, response_id, status=ack.status)
        try:
            response = await self.client.wait(
                response_id, timeout=min(5.0, self.wait_seconds or 5.0), poll_interval=0.2
            )
        except ResearchTimeoutError as exc:
            last = cast('Response | None', exc.last)
            return self._marked(ResearchResult(response_id=response_id, status=last.status if last else ack.status))
        result = self._marked(ResearchResult.from_response(response))
        await self._record_end(result)
        return result

    async def _no_such_run(self, response_id: str, missing: NotFoundError) -> NotFoundError:
        """The error for a cancel of a run the API does not have, in our words (never the API's "already terminal")."""
        if missing.reason is not None:  # not a run id at all
            reason = missing.reason
        elif self.ledger is not None and await self._ledger_call(self.ledger.get, response_id) is None:
            reason = f'no run {response_id!r} was started here (the ledger does not know it) and the API has none'
        else:
            reason = f'the API has no run {response_id!r} (it expired, or was created with store=False)'
        return NotFoundError.because(reason, f'Nothing was cancelled: {reason}.', missing)

    async def list(self, *, status: str | None = None, limit: int = 20, caller: str | None = None) -> list[RunRecord]:
        """Recent runs from the ledger, newest first (only those `caller` started, when given).

        Runs the ledger still shows as unfinished are refreshed from the API first (bounded, cached: `reconcile`).
        """
        if self.ledger is None:
            return []
        records: list[RunRecord] = await self._ledger_call(self.ledger.list, status=status, limit=limit, caller=caller)
        updated = await reconcile(self.ledger, self.client, records, timeout=5.0)
        return [updated.get(r.response_id, r) for r in records]

    @tracing.search_span
    async def search(self, query: str | list[str], **filters: Unpack[SearchFilters]) -> SearchResponse:
        """The Search API: ranked pages (title, url, date, snippet), no synthesis. Fast and cheap.

        Filters (`SearchFilters`): `max_results` (1-20, default 10), `domains` (a leading "-" excludes one), `recency`
        or published `after`/`before`, last `updated_after`/`updated_before`, `country` (ISO 3166-1 alpha-2),
        `search_mode` (`web`, `academic`, `sec`), `languages` (ISO 639-1), `max_tokens_per_page`;
        `search_type='fast'` costs $1 per 1,000 requests instead of $5 (`search_fee`).
        """
        request = search_request(**filters)
        if self.ledger is None:
            return await self.client.search(query, **request)
        fee = search_fee(request, len(query) if isinstance(query, list) else 1)
        token = await self._reserve_search(query, fee)
        try:
            response = await self.client.search(query, **request)
        except PerplexityError:
            self._record(self.ledger.release, token)  # refused or not answered: nothing billed, the fee given back
            raise
        emulated = self.client.emulated is True
        search_id = response.id if response.id.startswith('search_') else f'search_{response.id or uuid.uuid4().hex}'
        self._record(self.ledger.bind, token, search_id, status='completed', cost_usd=fee, emulated=emulated)
        return response

    async def _reserve_search(self, query: str | list[str], fee: float) -> str:
        """Hold a Search API request's fee against the budget before it is sent (refused like a run that does not
        fit); the row is a completed run of model `SEARCH_MODEL` once the call answered."""
        ledger = cast('Ledger', self.ledger)
        self.client.require_key()
        await self._probe_emulator()  # an emulator's searches never count against the real API's budget
        at = self._clock()
        text = query if isinstance(query, str) else ' | '.join(query)
        record = RunRecord(
            created_at=at,
            updated_at=at,
            scope=self.scope,
            query=self.client.redact(text),
            model=SEARCH_MODEL,
            status=STARTING,
            origin=self.origin,
            estimate_usd=fee,
            api=self.client.api,
            emulated=self.client.emulated is True,
            **tracing.current_ids(),
        )
        return await self._ledger_call(ledger.admit_fee, record, budget=self.budget)

    # -- internals ---------------------------------------------------------------------------------------------

    async def _begin(
        self,
        query: str,
        options: ResearchOptions,
        caller: str | None,
        request_id: str | None = None,
        *,
        items: list[InputItem] | None = None,
    ) -> tuple[Response, _Run]:
        """Create the run and record its id in the ledger (the write flushed), whatever cancels the caller.

        Input that cannot be sent is refused first, before anything is reserved. From the reservation on, the
        reservation, the create and the record of its id run to their end even if the caller is cancelled (anyio
        scopes, `task.cancel()`, `asyncio.wait_for`, Ctrl-C): a run the API created is always in the ledger with its
        id, so any process can list and collect it, and the cancellation is delivered once that write has landed.
        """
        if not query or not query.strip():
            raise InvalidArgumentError('The query is empty: say what to research.', argument='query')
        _check_sendable(query, options.to_request(self.effort))
        try:
            return await _to_the_end(functools.partial(self._start_recorded, query, options, caller, request_id, items))
        except BadRequestError as exc:
            previous = options.previous_response_id
            if previous is None or items is not None or not _unknown_previous(exc):
                raise
        # The API does not know the earlier run (expired, or started with another key or API): its question and
        # answer go along as context instead, and the result says so.
        options, note = await self._as_context(previous, options)
        response, run = await _to_the_end(functools.partial(self._start_recorded, query, options, caller, request_id))
        run.notes = (*run.notes, note)
        return response, run

    async def _as_context(self, previous: str, options: ResearchOptions) -> tuple[ResearchOptions, str]:
        """`options` with the earlier run's question and answer as instructions in place of `previous_response_id`,
        and the note that says so; the question from the ledger, the answer from a retrieve when the API still has it.

        Raises:
            InvalidArgumentError: neither the ledger nor the API knows the earlier run: there is nothing to continue.
        """
        record = await self._ledger_call(self.ledger.get, previous) if self.ledger else None
        question = record.query if record is not None else ''
        answer = ''
        with contextlib.suppress(PerplexityError):
            answer = (await self.client.retrieve(previous)).output_text
        if not question and not answer:
            raise InvalidArgumentError(
                f'previous_response_id={previous!r} names a run neither the API nor the ledger knows (expired, or '
                'started elsewhere), so there is nothing to continue: ask the question in full instead.',
                argument='previous_response_id',
            )
        context = ['This question follows up an earlier one; take its context into account.']
        if question:
            context.append(f'The earlier question: {question}')
        if answer:
            context.append(f'The earlier answer: {_clipped(answer, _MAX_CONTEXT_CHARS)}')
        if options.instructions:
            context.append(options.instructions)
        given = {(True, True): 'question and answer were', (True, False): 'question was', (False, True): 'answer was'}
        missing = '' if answer else ' (its answer is no longer available from the API)'
        note = (
            f'The earlier run {previous} could not be continued: the API no longer knows it (expired, or started with '
            f'another key or API). Its {given[bool(question), bool(answer)]} given as context instead{missing}.'
        )
        update = {'previous_response_id': None, 'instructions': '\n\n'.join(context)}
        return options.model_copy(update=update), note

    async def _start_recorded(
        self,
        query: str,
        options: ResearchOptions,
        caller: str | None,
        request_id: str | None,
        items: list[InputItem] | None = None,
    ) -> tuple[Response, _Run]:
        started = await self._start(query, options, caller, request_id, items)
        await self._flush()
        return started

    async def _start(
        self,
        query: str,
        options: ResearchOptions,
        caller: str | None,
        request_id: str | None = None,
        items: list[InputItem] | None = None,
    ) -> tuple[Response, _Run]:
        """Reserve, record and create the run: `query` is its input (with the files it reads), or `items` (function
        outputs) when given; the ledger keeps `query` either way."""
        request = self._request(options)
        sent = items or options.to_input(query)
        effort = request.get('effort') or self.effort
        adapter = response_format(options.output_type)[1] if options.output_type is not None else None
        token: str | None = None
        record: RunRecord | None = None
        tightened: dict[str, tuple[int, int]] | None = None
        if self.ledger is not None:
            at = self._clock()
            record = RunRecord(
                created_at=at,
                updated_at=at,
                scope=self.scope,
                query=self.client.redact(query),  # a key pasted into a question is never stored
                effort=effort,
                model=request.get('model'),
                status=STARTING,
                origin=self.origin,
                caller=caller,
                request_id=request_id,
                estimate_usd=estimate_cost(effort),
                api=self.client.api,
                emulated=self.client.emulated is True,  # known once the API has answered once
                fingerprint=self._fingerprint(query, options),
                **tracing.current_ids(),
            )
            token, record, request, tightened = await self._reserve(record, request, sent)
            if token is None:
                # No cap: the row is written anyway before the create (a run's intent, keyed by `request_id` when
                # given), so that a process killed while the create is in flight leaves a row to find, never nothing;
                # marked emulated when it is, so that one left by an emulator never counts as real spend.
                await self._probe_emulator()
                intent = record.model_copy(update={'emulated': self.client.emulated is True})
                token = await self._ledger_call(self.ledger.reserve, intent, cap_usd=None)
        try:
            response = await self.client.start(sent, **request)
        except (RunMayHaveStartedError, InternalServerError, MalformedResponseError) as exc:
            # A billed run may exist, but its id never came back: the attempt stays in the ledger as a reservation
            # (counting its estimate against the budget) with the reason, so that it can be listed and checked.
            if self.ledger is not None and token is not None:
                self._record(self.ledger.update, token, error=str(exc))
            raise
        except PerplexityError:
            # The API refused the create (4xx, refused connection, ...): no run, give the estimate back.
            if token is not None and self.ledger is not None:
                self._record(self.ledger.release, token)
            raise
        if self.ledger is not None and token is not None:
            emulated = self.client.emulated is True  # an emulated run never counts against the real API's budget
            self._record(self.ledger.bind, token, response.id, status=response.status, emulated=emulated)
        run = _Run(query, effort, time.monotonic(), adapter, options.output_type is not None, model=options.model)
        run.tightened = tightened
        return response, run

    def _fingerprint(self, query: str, options: ResearchOptions) -> str:
        """What makes two runs the same for reuse: the question (as the ledger keeps it), the request its options
        make with this researcher's defaults, and the API it goes to (an emulator's answer never stands in for one)."""
        request = self._request(options)
        files = [f.identity() for f in options.files or ()]  # what the run reads besides the web
        text = json.dumps(
            [self.client.redact(query.strip()), request, self.client.api, *([files] if files else [])],
            sort_keys=True,
            default=repr,
            ensure_ascii=True,
        )
        return hashlib.sha256(text.encode('ascii')).hexdigest()

    async def _reused(
        self, query: str, options: ResearchOptions, window: float, caller: str | None
    ) -> tuple[ResearchResult | None, tuple[str, ...]]:
        """The result of the same question with the same options, finished within `window` seconds, served again
        (retrieved from the API, which keeps stored runs: free, nothing billed); or None and what the caller must know.

        A run the API no longer has (expired) is researched again, and the new result says so.
        """
        if self.ledger is None or not query.strip():
            return None, ()
        fingerprint = self._fingerprint(query, options)
        record: RunRecord | None = await self._ledger_call(self.ledger.find_reusable, fingerprint, caller=caller)
        age = (self._clock() - record.created_at).total_seconds() if record is not None else math.inf
        if record is None or age > window:
            return None, ()
        try:
            response = await self.client.retrieve(record.response_id)
        except NotFoundError:
            return None, (
                f'The same question was answered {_ago(age)} ago (run {record.response_id}), but the API no longer '
                'keeps that run (expired): it was researched again.',
            )
        if response.status != 'completed':
            return None, ()
        adapter = response_format(options.output_type)[1] if options.output_type is not None else None
        result = self._marked(
            ResearchResult.from_response(
                response, effort=record.effort, query=query, structured=options.output_type is not None
            )
        )
        self._typed(result, adapter)
        result.usage = Usage(cost_usd=0.0)  # this call cost nothing: the earlier run's cost is in the ledger, once
        result.reused = True
        result.notes = [
            f'Reused: the same question with the same options was answered {_ago(age)} ago (run '
            f'{record.response_id}); served from that run, not researched or billed again.'
        ]
        return result, ()

    @staticmethod
    def _typed(result: ResearchResult, adapter: TypeAdapter[Any] | None) -> None:
        """A structured answer's data validated as the requested type; `error` says when it does not match."""
        if adapter is not None and result.data is not None:
            try:
                result.data = adapter.validate_python(result.data)
            except ValidationError as exc:
                result.error = f'structured output did not match the requested type: {exc.error_count()} errors'

    async def _probe_emulator(self) -> None:
        """Ask a local base URL once (a free `GET /v1/models`) whether it is an emulator, if no answer said so yet."""
        if self.client.emulated is None and _on_loopback(self.client.api):
            with contextlib.suppress(PerplexityError):
                await self.client.models()

    async def _reserve(
        self, record: RunRecord, request: AgentRequest, query: str | list[InputItem]
    ) -> tuple[str | None, RunRecord, AgentRequest, dict[str, tuple[int, int]] | None]:
        """Hold the most the run can cost (`pricing.reservation`) against the budget before anything is spent.

        Returns the reservation's key (None without a cap), the record carrying the reservation as its estimate, the
        request to send (with `on_budget='tighten'` it may be tightened to fit), and what was lowered.
        """
        if self.ledger is None:
            return None, record, request, None
        if self.budget is not None and self.client.emulated is None and _on_loopback(self.client.api):
            # Which budget applies (the real API's, or the emulator's) must be known before the check: a local base
            # URL is asked once (a free GET) whether it is an emulator.
            with contextlib.suppress(PerplexityError):
                await self.client.models()
            record = record.model_copy(update={'emulated': bool(self.client.emulated)})
        self.client.require_key()  # no key: said before any request (the prices below are read with it)
        # The API's own prices, cached in the state directory for a day.
        prices = default_prices(await refresh_api_prices(self.client, default_ledger_path().parent))
        # The budget check must finish before anything is spent: this one call waits. The total cap is
        # `budget.total`; every limit is checked in the one transaction. Without a budget nothing is stored here
        # (priced, and the limits the price assumes added to the request); the prices learned by every process are
        # read from the ledger either way.
        admission = await self._ledger_call(
            self.ledger.admit,
            record,
            query,
            request,
            cap_usd=None,
            budget=self.budget,
            prices=prices,
            on_budget=self.on_budget,
        )
        await self._budget_warnings(admission.warnings)
        request = cast('AgentRequest', admission.request)
        return admission.token, admission.record, request, dict(admission.changes) or None

    async def _budget_warnings(self, warnings: Sequence[BudgetWarning]) -> None:
        """Say that a window crossed its `warn_at`: a span event, a logged warning and the callback, once per window."""
        for warning in warnings:
            key = warning.limit.key()
            if key in self._warned:
                continue
            self._warned.add(key)
            tracing.event('perplexity.budget.warning', warning.attributes())
            logger.warning('%s', warning.message)
            if self.on_budget_warning is None:
                continue
            try:  # the run is admitted: a failing callback must not leave its reservation unbound
                outcome = self.on_budget_warning(warning)
                if outcome is not None:
                    await outcome
            except Exception:
                logger.exception('on_budget_warning raised; the run goes on')

    async def spend(self, *, caller: str | None = None) -> list[SpendLine]:
        """Spent, held and left in each window (day, month, total), for everyone, each caller and each scope.

        Counts what an admission of this researcher counts: real runs only, or every run against an emulator.
        """
        if self.ledger is None:
            return []
        emulated = None if self.client.emulated is True else False
        return await self._ledger_call(
            self.ledger.spend, self.budget, caller=caller, at=self._clock(), emulated=emulated
        )

    async def _wait(
        self, response_id: str, run: _Run, *, on_progress: OnProgress | None, wait_seconds: float | None
    ) -> ResearchResult:
        steps = StepReducer(response_id, started=run.started)
        given = check_wait(wait_seconds)
        budget = self.wait_seconds if given is None else given

        async def shown(step: Step) -> None:
            run.trace.step(step)
            if step.shown and on_progress is not None:
                outcome = on_progress(step)
                if outcome is not None:
                    await outcome

        async def on_event(event: AgentEvent) -> None:
            step = steps.observe(event)
            if step is not None:
                await shown(step)

        async def on_snapshot(snapshot: Response) -> None:
            # Polled (no stream): a running run's snapshot carries the search and fetch items reached so far.
            for step in steps.snapshot(snapshot, live=True):
                await shown(step)

        try:
            response = await self.client.wait(response_id, timeout=budget, on_event=on_event, on_snapshot=on_snapshot)
        except ResearchTimeoutError as exc:
            last = cast('Response | None', exc.last)
            if last is not None:
                steps.snapshot(last)  # counted; not shown nor traced: they arrive together, late
            steps.progress.elapsed_s = round(time.monotonic() - run.started, 3)
            status = last.status if last is not None and last.status != 'queued' else 'in_progress'
            if self.ledger:
                self._record(self.ledger.update, response_id, status=status)
            return self._marked(
                ResearchResult(
                    response_id=response_id,
                    status=status,
                    progress=steps.progress,
                    effort=run.effort or None,
                    query=run.query or None,
                    notes=list(run.notes),
                )
            )
        for step in steps.snapshot(response):  # items of the final snapshot no event reported (a polled run)
            run.trace.step(step)
        steps.progress.elapsed_s = round(time.monotonic() - run.started, 3)
        steps.progress.answer_chars = len(response.output_text)
        result = self._marked(
            ResearchResult.from_response(
                response,
                progress=steps.progress,
                effort=run.effort or None,
                query=run.query or None,
                structured=run.structured,
            )
        )
        if run.tightened:
            result.tightened = dict(run.tightened)
        result.notes = list(run.notes)
        self._typed(result, run.adapter)
        await self._record_end(result)
        return result

    def _marked(self, result: ResearchResult) -> ResearchResult:
        """The result marked `emulated` when the API's last answer came from an emulator (`x-pplx-emulator`)."""
        result.emulated = self.client.emulated is True
        return result

    async def _record_end(self, result: ResearchResult) -> None:
        if self.ledger is None:
            return
        self._record(record_finished, self.ledger, result)
        self._record(learn_from, self.ledger, result)  # billed above the table: later reservations price it higher

    def _record(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        """Queue a ledger write; it runs in order on the ledger's recorder thread, never delaying the research call."""
        if self.ledger is not None:
            self.ledger.aio.later(fn, *args, **kwargs)

    async def _flush(self) -> None:
        if self.ledger is not None:
            await self.ledger.aio.flush()

    async def _ledger_call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """A ledger read (or the budget reservation): earlier queued writes land first, so it sees them. It runs in a
        worker thread, not on the recorder: an admission waiting for the budget lock must not hold up other writes."""
        await self._flush()
        return await anyio.to_thread.run_sync(lambda: fn(*args, **kwargs))


def _add_usage(result: ResearchResult, earlier: Sequence[ResearchResult]) -> None:
    """`result`'s usage with that of the runs it continued added: what the whole question cost, every leg billed."""
    usage = result.usage
    for leg in earlier:
        spent = leg.usage
        usage.input_tokens += spent.input_tokens
        usage.output_tokens += spent.output_tokens
        usage.total_tokens += spent.total_tokens
        usage.reasoning_tokens += spent.reasoning_tokens
        if spent.cost_usd is not None:
            usage.cost_usd = round((usage.cost_usd or 0.0) + spent.cost_usd, 6)
        for name, calls in spent.tool_calls.items():
            usage.tool_calls[name] = usage.tool_calls.get(name, 0) + calls
        for name, cost in spent.tool_costs_usd.items():
            usage.tool_costs_usd[name] = round(usage.tool_costs_usd.get(name, 0.0) + cost, 6)


def _check_reuse(seconds: object) -> float | None:
    """A reuse window: None (never), or finite seconds >= 0."""
    if seconds is None:
        return None
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not math.isfinite(seconds) or seconds < 0:
        raise InvalidArgumentError(
            f'reuse_within={seconds!r} is not a number of seconds: give a finite number, 0 or more (0 or None: never).',
            argument='reuse_within',
        )
    return float(seconds)


def _ago(seconds: float) -> str:
    """An age in words: "42 s", "5 min", "3 h"."""
    seconds = max(seconds, 0.0)
    if seconds < 120:
        return f'{seconds:.0f} s'
    if seconds < 7200:
        return f'{seconds / 60:.0f} min'
    return f'{seconds / 3600:.0f} h'


#: The most of an earlier answer a follow-up carries as context when the API no longer knows the earlier run.
_MAX_CONTEXT_CHARS = 6000


def _clipped(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit].rstrip() + ' [...]'


def _unknown_previous(exc: BadRequestError) -> bool:
    """Whether a create was refused for its `previous_response_id`: live, a bare 400 `invalid request` (no `param`);
    the emulator names the param too."""
    if exc.param == 'previous_response_id':
        return True
    body: object = exc.body
    message = field_of(field_of(body, 'error'), 'message') if body is not None else None
    return exc.param is None and exc.type == 'invalid_request' and message == 'invalid request'


def _limited(request: AgentRequest) -> AgentRequest:
    """`request` with the limits of its effort's profile that it does not set (`pricing.limit_request`): sent, so that
    the API enforces what the budget's reservation assumes."""
    return cast('AgentRequest', limit_request(request))


class DurableRunner(Protocol):
    """Research calls as checkpointed steps of a durable workflow: `durable/` provides one (on DBOS); `Researcher.run`
    and `collect` hand over to it when called from workflow code, so the core never imports `durable` or DBOS."""

    def active(self) -> bool:
        """Whether the caller is workflow code (not a step), where a research call must be checkpointed steps."""
        ...

    async def run(
        self,
        researcher: Researcher,
        query: str,
        *,
        options: ResearchOptions | None = None,
        on_progress: OnProgress | None = None,
        on_started: OnStarted | None = None,
        wait_seconds: float | None = None,
        caller: str | None = None,
        until_done: bool = False,
        **given: Unpack[ResearchOptionsDict],
    ) -> ResearchResult:
        """`Researcher.run` as a start step and a collect step (`until_done`: collect until the run ends)."""
        ...

    async def collect(
        self,
        researcher: Researcher,
        response_id: str,
        *,
        wait_seconds: float | None = None,
        on_progress: OnProgress | None = None,
    ) -> ResearchResult:
        """`Researcher.collect` as one step."""
        ...


#: The durable runner: `durable/` fills it when imported (the package root imports it once DBOS is loaded).
DURABLE: Slot[DurableRunner] = Slot('durable runner')


def durable_runner() -> DurableRunner | None:
    """The durable runner if this is DBOS workflow code (not a step), else None; free when DBOS is not in use."""
    runner = DURABLE.get()
    return runner if runner is not None and runner.active() else None


async def research(query: str, **keywords: Unpack[ResearchKeywords]) -> ResearchResult:
    """Research one question with settings from the environment: the one-liner for notebooks and scripts.

    Takes the options of `Researcher.run` (typed: a misspelt option or an unknown effort is a type error), plus the
    researcher's `api_key`, `base_url`, `budget_usd`, `budget`, `ledger`, `scope`, `on_budget` and
    `on_budget_warning`.
    """
    given = cast('dict[str, Any]', dict(keywords))
    settings = {k: given.pop(k) for k in _SETTINGS if k in given}
    async with Researcher(origin='api', **settings) as researcher:
        return await researcher.run(query, **given)


def research_sync(query: str, **keywords: Unpack[ResearchKeywords]) -> ResearchResult:
    """`research()` for scripts: runs on an event loop of its own and returns the result.

    Raises `RuntimeError` when called where an event loop is running (async code, Jupyter): `await research(...)`
    there instead.
    """
    return _run_sync(lambda: research(query, **keywords), 'research_sync', 'await research(...)')


def _run_sync(work: Callable[[], Coroutine[Any, Any, _T]], name: str, instead: str) -> _T:
    """Run `work` to its end on a new event loop (as `asyncio.run`); refused, clearly, inside a running one."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(work())
    raise RuntimeError(
        f'{name}() cannot run where an event loop is already running (async code, or a Jupyter notebook): '
        f'use `{instead}` there instead.'
    )


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _on_loopback(api: str) -> bool:
    """Whether the API's host (`host:port`) is this machine, where an emulator may answer."""
    host = api.rsplit(':', 1)[0] if not api.endswith(']') else api
    return host.strip('[]') in ('127.0.0.1', 'localhost', '::1') or host.startswith('127.')


def _check_sendable(query: str, request: Mapping[str, Any]) -> None:
    """Refuse text that is not valid Unicode (a lone surrogate, e.g. from undecodable bytes) before anything is
    reserved or sent: the request could never be encoded as UTF-8, so no run could start.

    Raises:
        InvalidArgumentError: naming the argument that holds it (`query`, or the request field) and the character.
    """
    for argument, value in (('query', query), *request.items()):
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
        try:
            text.encode('utf-8')
        except UnicodeEncodeError as exc:
            bad = f'U+{ord(text[exc.start]):04X}'
            raise InvalidArgumentError(
                f'The {argument} holds a lone surrogate ({bad}), which is not valid Unicode text and cannot be sent. '
                f"Remove it, or decode the text with errors='replace'. Nothing was started or reserved.",
                argument=argument,
            ) from None


async def _to_the_end(work: Callable[[], Awaitable[_T]]) -> _T:
    """Run `work` to its end whatever cancels the caller, then deliver the cancellation.

    An anyio shield holds off anyio cancellation (scopes, timeouts, a toolset's deadline); on asyncio, `work` also
    runs as its own task that the caller keeps waiting for when it is cancelled natively (`task.cancel()`,
    `asyncio.wait_for`, `asyncio.timeout`, Ctrl-C under `asyncio.run`), re-raising `CancelledError` once it is done.
    """
    cancelled = False
    task: asyncio.Future[_T] | None = None
    with anyio.CancelScope(shield=True):
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # not asyncio (trio): the shield is all it takes
            return await work()
        task = asyncio.ensure_future(work())
        while not task.done():
            try:
                await asyncio.shield(task)
            except asyncio.CancelledError:
                if task.cancelled():  # the work itself was cancelled (its event loop is closing)
                    raise
                cancelled = True  # ours to deliver, once the work has landed
    assert task is not None
    if cancelled:
        if not task.cancelled():
            task.exception()  # retrieved: its failure is recorded in the ledger; the cancellation wins
        raise asyncio.CancelledError
    return task.result()
