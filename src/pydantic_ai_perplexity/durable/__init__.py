"""Research that survives crashes, on DBOS: a research call in a workflow is two checkpointed steps.

Inside a DBOS workflow's code (an agent with pydantic-ai's `DBOSDurability` and a `PerplexityToolset`, run in your
`@DBOS.workflow`, or a pipeline of your own), a research call is:

1. **start**: creates the background run; its `response_id` is the step's checkpointed output;
2. **collect**: waits for the run and fetches it; safe to repeat.

A worker killed while the run goes on is recovered by DBOS (`DBOS.launch()` in any process with the same
executor id), which replays *start* from its checkpoint and runs *collect* again: the same run is collected, and
the question is never researched, or billed, twice. `Researcher.run` and `Researcher.collect` do this by themselves
when they are called from workflow code (see `active()`), so the toolset needs no wiring. For pipelines without an
agent, `durable_research()` is the workflow helper, and `ResearchQueue` spreads many questions over worker
processes that share one PostgreSQL (the team ledger's server), within the API tier's rate limits.

Needs the `dbos` extra. Outside a workflow everything here behaves as the plain call would.
"""

from __future__ import annotations

import hashlib
import json
import sys
import uuid
from collections.abc import AsyncGenerator, Callable, Coroutine, Generator, Iterable, Mapping
from contextlib import asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Any, TypedDict, Unpack, cast

from opentelemetry import context as otel_context
from opentelemetry import trace
from pydantic import BaseModel

from .._base import errors
from .._base.errors import AuthenticationError, ConfigurationError, PermissionDeniedError, PerplexityError
from .._core.batch import _not_started, _split  # pyright: ignore[reportPrivateUsage]
from .._core.researcher import DURABLE, Researcher
from .._domain.options import ResearchOptions, ResearchOptionsDict, response_format
from .._domain.results import ResearchResult
from .._ledger import RESERVED

if TYPE_CHECKING:
    from dbos import Queue, WorkflowHandleAsync

    from .._core.researcher import OnProgress, OnStarted

__all__ = (
    'COLLECT_STEP',
    'START_STEP',
    'TIER_LIMITS',
    'RateLimit',
    'ResearchQueue',
    'active',
    'collect',
    'durable_research',
    'rate_limit',
    'run',
)

#: Step names, persisted in every workflow's history: they must never change.
START_STEP = 'perplexity.research.start'
COLLECT_STEP = 'perplexity.research.collect'

#: The Agent API's limits per usage tier, `(requests per second, requests per minute)` (Perplexity's rate-limit table).
TIER_LIMITS: dict[int, tuple[int, int]] = {0: (1, 50), 1: (3, 150), 2: (8, 500), 3: (17, 1000), 4: (33, 2000)}
#: API requests one question makes when nothing goes wrong: the create and the streamed wait.
REQUESTS_PER_RUN = 2
#: The rate limiter's window, in seconds: short enough to keep bursts small, long enough for whole numbers.
LIMIT_WINDOW_S = 6.0

#: Errors that would repeat for every question: a queued batch raises them instead of answering each question.
_FATAL = (ConfigurationError, AuthenticationError, PermissionDeniedError)


def active() -> bool:
    """Whether the caller is DBOS workflow code (not a step), where a research call must be two steps.

    Cheap and import-free: False unless `dbos` is already imported, as it is in any process running workflows.
    """
    module = sys.modules.get('dbos')
    if module is None:
        return False
    dbos = cast('Any', module).DBOS
    return dbos.workflow_id is not None and dbos.step_id is None


# -- errors cross the checkpoint as data -----------------------------------------------------------------------


class _Failure(TypedDict):
    type: str
    args: list[Any]
    attrs: dict[str, Any]


def _plain(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def _failure(exc: PerplexityError) -> _Failure:
    """A library error as checkpointable data (our errors take keyword arguments, which pickle cannot rebuild)."""
    attrs = {k: v for k, v in vars(exc).items() if _plain(v)}
    return {'type': type(exc).__name__, 'args': [str(a) for a in exc.args], 'attrs': attrs}


def _raise(failure: _Failure) -> None:
    cls = getattr(errors, failure['type'], None)
    if not (isinstance(cls, type) and issubclass(cls, PerplexityError)):
        cls = PerplexityError
    exc = cls.__new__(cls)
    Exception.__init__(exc, *failure['args'])
    vars(exc).update(failure['attrs'])
    raise exc


# -- the two steps ---------------------------------------------------------------------------------------------


class _Started(TypedDict, total=False):
    response_id: str
    status: str
    #: The span that started the run (else the caller's), so a collection after a restart rejoins its trace.
    trace_id: str
    span_id: str
    #: A digest of the question, to check that a replay hands this run back to the call that started it.
    query_digest: str
    failure: _Failure


#: The key under which each queued question's options carry its batch's fingerprint.
_BATCH_KEY = '_batch'


def _fingerprint(questions: list[tuple[str, dict[str, Any]]]) -> str:
    """A digest of a batch's questions and options, in order: the same batch always gives the same one."""
    text = json.dumps([[q, o] for q, o in questions], sort_keys=True, default=repr, ensure_ascii=True)
    return hashlib.sha256(text.encode('ascii')).hexdigest()[:32]


def _digest(query: str) -> str:
    return hashlib.sha256(query.encode('utf-8', 'surrogatepass')).hexdigest()[:16]


class _Collected(TypedDict, total=False):
    result: dict[str, Any]
    failure: _Failure


def _step_key() -> str:
    """The idempotency key of the running step: the same in every attempt of it, in any process."""
    from dbos import DBOS

    return f'dbos:{DBOS.workflow_id}:{DBOS.step_id}'


async def _start_step(researcher: Researcher, query: str, options: ResearchOptions, caller: str | None) -> _Started:
    """Create the run, unless an earlier attempt of this very step already did (found in the ledger by its key)."""
    from .._core import tracing

    key = _step_key()
    ledger = researcher.ledger
    if ledger is not None:
        earlier = await ledger.aio.list(request_id=key, limit=1)
        if earlier:
            record = earlier[0]
            if record.status == RESERVED:
                exc = errors.RunMayHaveStartedError(
                    f'An earlier attempt of this workflow step was stopped while creating a run, so a run may have '
                    f'started: its reservation is in the ledger under request id {key!r}. Check the runs listed by '
                    f'`pydantic-ai-perplexity jobs list`; nothing was created again.'
                )
                return {'failure': _failure(exc)}
            return {'response_id': record.response_id, 'status': record.status, 'query_digest': _digest(query)}
    ids = tracing.current_ids()
    try:
        result = await researcher.start(query, options=options, caller=caller, request_id=key)
    except PerplexityError as exc:
        return {'failure': _failure(exc)}
    started: _Started = {'response_id': result.response_id, 'status': result.status, 'query_digest': _digest(query)}
    if 'trace_id' in ids and 'span_id' in ids:
        started.update(trace_id=ids['trace_id'], span_id=ids['span_id'])
    if ledger is not None:
        record = await ledger.aio.get(result.response_id)
        if record is not None and record.trace_id and record.span_id:
            # The run's own span: a collection after a restart continues it as a child.
            started.update(trace_id=record.trace_id, span_id=record.span_id)
    return started


async def _collect_step(
    researcher: Researcher,
    response_id: str,
    wait_seconds: float | None,
    on_progress: OnProgress | None,
    until_done: bool,
) -> _Collected:
    """Wait for the run and fetch it (again after a restart: collecting is safe to repeat)."""
    try:
        result = await researcher.collect(response_id, wait_seconds=wait_seconds, on_progress=on_progress)
        while until_done and not result.done:
            result = await researcher.collect(response_id, wait_seconds=wait_seconds, on_progress=on_progress)
    except PerplexityError as exc:
        failure = _failure(exc)
        failure['attrs'].setdefault('response_id', response_id)  # the run exists: say which
        return {'failure': failure}
    return {'result': result.model_dump(mode='json')}


@contextmanager
def _rejoin(started: _Started) -> Generator[None]:
    """Parent what follows on the span that started the run when nothing is current (a recovered workflow)."""
    current = trace.get_current_span().get_span_context()
    trace_id, span_id = started.get('trace_id'), started.get('span_id')
    if current.is_valid or not trace_id or not span_id:
        yield
        return
    parent = trace.SpanContext(
        trace_id=int(trace_id, 16), span_id=int(span_id, 16), is_remote=True, trace_flags=trace.TraceFlags(1)
    )
    token = otel_context.attach(trace.set_span_in_context(trace.NonRecordingSpan(parent)))
    try:
        yield
    finally:
        otel_context.detach(token)


def _finished(collected: _Collected, output_type: type[BaseModel] | dict[str, Any] | None) -> ResearchResult:
    failure = collected.get('failure')
    if failure is not None:
        _raise(failure)
    result = ResearchResult.model_validate(collected.get('result'))
    adapter = response_format(output_type)[1] if output_type is not None else None
    if adapter is not None and result.data is not None:
        # The checkpoint holds JSON: the structured answer is validated into the requested type again.
        result.data = adapter.validate_python(result.data)
    return result


async def run(
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
    """`Researcher.run` as two DBOS steps, *start* then *collect*; call it from workflow code.

    Both step ids are drawn before anything awaits, so research calls made concurrently (an agent's parallel tool
    calls, `asyncio.gather`) get the same ids on recovery whatever order they finish in. With `until_done`, the
    collection waits until the run ends (in rounds of the wait budget) instead of handing off.
    """
    from dbos import DBOS

    parsed = ResearchOptions.parse(options, **given)  # a bad option fails here, before any step
    start_slot, collect_slot = DBOS.reserve_step(), DBOS.reserve_step()
    started: _Started = await start_slot.run_async({'name': START_STEP}, _start_step, researcher, query, parsed, caller)
    failure = started.get('failure')
    if failure is not None:
        _raise(failure)
    response_id = started.get('response_id', '')
    if started.get('query_digest', _digest(query)) != _digest(query):
        raise errors.PerplexityError(
            f'This workflow replayed the start of another research call ({response_id}) into this one: its calls '
            f'did not start in the same order as when it first ran. Start research calls from workflow code in a '
            f'fixed order; run {response_id} is not lost (collect it by id).'
        )
    if on_started is not None:
        outcome = on_started(response_id)
        if outcome is not None:
            await outcome
    with _rejoin(started):
        collected: _Collected = await collect_slot.run_async(
            {'name': COLLECT_STEP}, _collect_step, researcher, response_id, wait_seconds, on_progress, until_done
        )
    return _finished(collected, parsed.output_type)


async def collect(
    researcher: Researcher,
    response_id: str,
    *,
    wait_seconds: float | None = None,
    on_progress: OnProgress | None = None,
    until_done: bool = False,
) -> ResearchResult:
    """`Researcher.collect` as one DBOS step, so a recovered workflow replays what it collected instead of waiting."""
    from dbos import DBOS

    slot = DBOS.reserve_step()
    collected: _Collected = await slot.run_async(
        {'name': COLLECT_STEP}, _collect_step, researcher, response_id, wait_seconds, on_progress, until_done
    )
    return _finished(collected, None)


@asynccontextmanager
async def _using(researcher: Researcher | None) -> AsyncGenerator[Researcher]:
    if researcher is not None:
        async with researcher:
            yield researcher
        return
    async with Researcher(origin='api') as made:
        yield made


async def durable_research(
    query: str, *, researcher: Researcher | None = None, on_progress: OnProgress | None = None, **options: Any
) -> ResearchResult:
    """Research `query` to the end from a DBOS workflow: started once, collected however often the worker restarts.

    ```python
    @DBOS.workflow()
    async def brief(question: str) -> str:
        result = await durable_research(question, effort='medium')
        return result.answer
    ```
    Takes `Researcher.run`'s options; `researcher` defaults to one from the environment. Unlike a tool call it
    does not hand off at the wait budget: it waits in rounds until the run ends. Outside a workflow it is a
    plain research call that waits until the end.
    """
    async with _using(researcher) as used:
        if active():
            return await run(used, query, on_progress=on_progress, until_done=True, **options)
        result = await used.run(query, on_progress=on_progress, **options)
        while not result.done:
            result = await used.collect(result.response_id, on_progress=on_progress)
        return result


# -- many questions on a DBOS queue ----------------------------------------------------------------------------


def rate_limit(tier: int) -> RateLimit:
    """The queue's rate limit for an API usage tier: runs started per window, within both of the tier's limits.

    Each run makes about `REQUESTS_PER_RUN` requests; the limit keeps that under the tier's requests per second and
    per minute over a `LIMIT_WINDOW_S` window (the client retries the rare 429 a burst inside a window meets).
    """
    if tier not in TIER_LIMITS:
        raise ConfigurationError(f'Unknown API usage tier {tier!r}: use one of {sorted(TIER_LIMITS)}.')
    per_second, per_minute = TIER_LIMITS[tier]
    window = LIMIT_WINDOW_S
    runs = min(per_second * window, per_minute * window / 60) / REQUESTS_PER_RUN
    return {'limit': max(1, int(runs)), 'period': window}


class RateLimit(TypedDict):
    """A DBOS queue rate limit (`dbos.QueueRateLimit`): at most `limit` workflows start in any `period` seconds."""

    limit: int
    period: float


class ResearchQueue:
    """Questions researched as DBOS workflows on a queue, by every worker process sharing the system database.

    Build it in every worker **before** `DBOS.launch()` (that registers its workflow, so any worker can recover
    another's), then call `declare()` after launch. `research_many()` enqueues one workflow per question and
    waits for them all; a worker killed mid-run is recovered by DBOS and collects the same runs.

    ```python
    queue = ResearchQueue(tier=1)                                     # before launch, in every worker
    DBOS(config={'name': 'research', 'system_database_url': 'postgresql://...'})
    DBOS.launch()
    queue.declare()
    results = await queue.research_many(questions, effort='low')
    ```

    Args:
        name: The queue's name (also the prefix of its workflow's name).
        tier: The API usage tier whose limits set the queue's rate limit (`rate_limit`); None for no limit.
        concurrency: Runs going at once across all workers (None: no global cap).
        worker_concurrency: Runs going at once in one worker process.
        researcher: The `Researcher` workers research with, or a function making it; by default one from the
            environment (`PERPLEXITY_LEDGER_URL` names the shared ledger, `PERPLEXITY_BUDGET_USD` the budget that
            every worker enforces through it).
        polling_interval_sec: How often each worker looks for new questions.
    """

    def __init__(
        self,
        name: str = 'perplexity_research',
        *,
        tier: int | None = 0,
        concurrency: int | None = None,
        worker_concurrency: int | None = 8,
        researcher: Researcher | Callable[[], Researcher] | None = None,
        polling_interval_sec: float = 1.0,
    ) -> None:
        from dbos import DBOS

        self.name = name
        self.limiter: RateLimit | None = rate_limit(tier) if tier is not None else None
        self.concurrency = concurrency
        self.worker_concurrency = worker_concurrency
        self.polling_interval_sec = polling_interval_sec
        self._researcher_source = researcher
        self._researcher: Researcher | None = researcher if isinstance(researcher, Researcher) else None
        self._queue: Queue | None = None

        async def research_question(query: str, options: dict[str, Any]) -> dict[str, Any]:
            return await self._research(query, options)

        #: The registered workflow that researches one question (its name: `<name>.research`).
        self.workflow: Callable[[str, dict[str, Any]], Coroutine[Any, Any, dict[str, Any]]] = DBOS.workflow(
            name=f'{name}.research'
        )(research_question)

    def declare(self) -> Queue:
        """Record the queue and its limits in the system database (after `DBOS.launch()`; idempotent)."""
        from dbos import DBOS

        if self._queue is None:
            self._queue = DBOS.register_queue(self.name, **self._settings())
        return self._queue

    async def declare_async(self) -> Queue:
        """`declare()` from async code."""
        from dbos import DBOS

        if self._queue is None:
            self._queue = await DBOS.register_queue_async(self.name, **self._settings())
        return self._queue

    def _settings(self) -> dict[str, Any]:
        return {
            'global_concurrency': self.concurrency,
            'worker_concurrency': self.worker_concurrency,
            'limiter': self.limiter,
            'polling_interval_sec': self.polling_interval_sec,
            'on_conflict': 'always_update',
        }

    @property
    def researcher(self) -> Researcher:
        """This worker's researcher, made on first use."""
        if self._researcher is None:
            source = self._researcher_source
            self._researcher = source() if callable(source) else Researcher(origin='api')
        return self._researcher

    async def _research(self, query: str, options: dict[str, Any]) -> dict[str, Any]:
        """The workflow: research one question to the end; a question that cannot start comes back failed.

        An error every question would meet (a bad key, a bad configuration) is returned as data, for `result()` to
        raise: DBOS would store a raised one with pickle, which cannot rebuild our errors.
        """
        researcher = self.researcher
        options = {k: v for k, v in options.items() if k != _BATCH_KEY}  # the batch's fingerprint, not an option
        async with researcher:
            try:
                result = await run(researcher, query, until_done=True, **options)
            except _FATAL as exc:
                return {'failure': _failure(exc)}
            except PerplexityError as exc:
                response_id = getattr(exc, 'response_id', None)
                if isinstance(response_id, str) and response_id:  # started, then collecting it failed
                    result = ResearchResult(response_id=response_id, status='failed', query=query, error=str(exc))
                else:  # refused by the budget, a bad option, a create that failed: no run
                    result = _not_started(query, options.get('effort'), exc)
        return result.model_dump(mode='json')

    async def enqueue(self, query: str, *, workflow_id: str | None = None, **options: Any) -> str:
        """Queue one question; its workflow id (give one to make resubmitting the same question a no-op)."""
        from dbos import SetWorkflowID

        queue = await self.declare_async()
        chosen = workflow_id or f'{self.name}-{uuid.uuid4().hex}'
        with SetWorkflowID(chosen):
            await queue.enqueue_async(self.workflow, query, options)
        return chosen

    async def result(self, workflow_id: str) -> ResearchResult:
        """Wait for a queued question's result, by its workflow id."""
        from dbos import DBOS

        handle: WorkflowHandleAsync[dict[str, Any]] = await DBOS.retrieve_workflow_async(workflow_id)
        outcome = await handle.get_result()
        failure = outcome.get('failure')
        if failure is not None:
            _raise(cast('_Failure', failure))
        return ResearchResult.model_validate(outcome)

    async def research_many(
        self, queries: Iterable[str | Mapping[str, Any]], *, batch_id: str | None = None, **options: Any
    ) -> list[ResearchResult]:
        """Research every question on the queue; the results in the order of `queries`.

        `batch_id` names the workflows (`<batch_id>-<index>`), so submitting the same batch again (after this
        process restarted, say) waits for the same runs instead of starting new ones. Each workflow carries the
        batch's fingerprint (a digest of every question and its options): a `batch_id` already used for other
        questions raises `InvalidArgumentError` before anything is queued, never handing back another question's answer.
        """
        questions = [_split(item, options) for item in queries]  # the same items as research_many takes
        batch = batch_id or uuid.uuid4().hex
        fingerprint = _fingerprint(questions)
        if batch_id is not None:
            await self._check_batch(batch, fingerprint, len(questions))
        ids = [
            await self.enqueue(query, workflow_id=f'{self.name}-{batch}-{i}', **given, **{_BATCH_KEY: fingerprint})
            for i, (query, given) in enumerate(questions)
        ]
        return [await self.result(workflow_id) for workflow_id in ids]

    async def _check_batch(self, batch: str, fingerprint: str, count: int) -> None:
        """Refuse a `batch_id` whose queued workflows were submitted with other questions (or another number)."""
        from dbos import DBOS

        prefix = f'{self.name}-{batch}-'
        found = await DBOS.list_workflows_async(workflow_id_prefix=prefix, load_input=True, load_output=False)
        for status in found:
            index = status.workflow_id.removeprefix(prefix)
            if not index.isdigit():  # another batch whose id merely starts with this one
                continue
            inputs = status.input or {'args': (), 'kwargs': {}}
            args = [*inputs['args'], *inputs['kwargs'].values()]
            stored = cast('dict[str, Any]', args[1]) if len(args) > 1 and isinstance(args[1], dict) else {}
            if int(index) >= count or stored.get(_BATCH_KEY) != fingerprint:
                raise errors.InvalidArgumentError(
                    f'batch_id {batch!r} was already used for other questions: its queued workflows hold another '
                    f'batch. Give this batch another batch_id (or none), or submit the same questions with the same '
                    f'options to wait for that batch again.',
                    argument='batch_id',
                )


class _Runner:
    """What the core calls from workflow code (`Researcher.run` and `collect`): this module's `run` and `collect`."""

    active = staticmethod(active)
    run = staticmethod(run)
    collect = staticmethod(collect)


DURABLE.fill(_Runner())
