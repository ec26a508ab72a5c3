"""`Ledger`: the one store of runs and the budget's admission, over either engine, with its failure policy.

See the package docstring (`_ledger/__init__.py`) for the engines, the budget and the failure policy.
"""

from __future__ import annotations

import importlib.util
import logging
import math
import os
import re
import threading
import warnings
import weakref
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Self, TypeVar, cast

from .._base.errors import BudgetExceededError, ConfigurationError
from .._base.statuses import UNFINISHED_ROWS
from .._domain.budget import (
    ANY_CALLER,
    Budget,
    BudgetWarning,
    Limit,
    SpendLine,
    Window,
    applicable_limits,
    dollars,
    micros,
    per_run_refusal,
    window_refusal,
    window_start,
)
from .._domain.pricing import (
    PRICES_ENV,
    Fit,
    ModelPrice,
    PriceTable,
    Reservation,
    default_prices,
    efforts_that_fit,
    fit,
    limit_request,
    reservation,
)
from .._domain.settings import OnBudget, variable
from ._aio import AsyncLedger
from ._engine import Engine, EngineName, Failure, Reserved
from ._postgres import INSTALL_HINT, PostgresEngine, is_postgres_url, redact_url, target_problem
from ._recorder import track
from ._records import (
    BUDGET_ENV,
    LEDGER_URL_ENV,
    RESERVED,
    BudgetUnenforceableError,
    LedgerWarning,
    RunRecord,
    now,
    refusal,
    storable_text,
    usd,
    validated_fields,
)
from ._sqlite import SQLiteEngine, default_ledger_path

_log = logging.getLogger('pydantic_ai_perplexity.ledger')
#: Statuses of runs that hold their reservation until they report a cost (`requires_action` too: it goes on).
_IN_FLIGHT = UNFINISHED_ROWS
_T = TypeVar('_T')
#: Writes kept in memory, in order, while the store fails; beyond this the oldest are dropped (with a warning).
BACKLOG_LIMIT = 1000
_URL_SCHEME = re.compile(r'^([A-Za-z][A-Za-z0-9+.-]*)://')


def _postgres_engine(target: str, source: str) -> PostgresEngine:
    """The engine of a PostgreSQL ledger URL, or a clear error when the URL is unusable or psycopg is missing."""
    problem = target_problem(target, source)
    if problem is not None:
        raise ConfigurationError(problem)
    if importlib.util.find_spec('psycopg') is None:
        raise ConfigurationError(
            f'{source} names a PostgreSQL ledger ({redact_url(target)[0]}), but its driver psycopg is not '
            f'installed. Install it ({INSTALL_HINT}), or unset {LEDGER_URL_ENV} to use the SQLite ledger.'
        )
    return PostgresEngine(target)


def _engine_for(target: str | os.PathLike[str] | None) -> Engine:
    """The engine a `Ledger` argument (or, for None, `PERPLEXITY_LEDGER_URL` or the default file) selects."""
    source = 'the ledger argument'
    if target is None:
        target = variable(LEDGER_URL_ENV) or None
        source = LEDGER_URL_ENV
        if target is None:
            return SQLiteEngine(default_ledger_path())
    if not isinstance(target, str):
        return SQLiteEngine(Path(target).expanduser())
    if is_postgres_url(target):
        return _postgres_engine(target, source)
    if target.lower().startswith('sqlite://'):
        path = target[len('sqlite://') :].removeprefix('/')  # sqlite:///relative, sqlite:////absolute
        return SQLiteEngine(Path(path).expanduser() if path else default_ledger_path())
    scheme = _URL_SCHEME.match(target)
    if scheme is not None:
        raise ConfigurationError(
            f'{source} is a URL with the scheme {scheme.group(1)!r}, which the ledger does not support. Use '
            f'postgresql://user@host:5432/database for PostgreSQL, or a file path or sqlite:///path for SQLite.'
        )
    return SQLiteEngine(Path(target).expanduser())


@dataclass(frozen=True)
class Admission:
    """A run admitted under the budget: its reservation key, its record, the request to send and its reservation."""

    #: The reservation's key (for `bind`/`release`), or None when no cap applied and nothing was stored yet.
    token: str | None
    #: The run's record, its `estimate_usd` set to the reservation.
    record: RunRecord
    #: The request to send: tightened where `changes` says, else as given.
    request: dict[str, Any]
    reservation: Reservation
    #: Each limit lowered to fit the cap, as (what it would have been, what is sent), e.g. `{"max_steps": (8, 3)}`;
    #: empty if nothing was (only with `on_budget="tighten"`).
    changes: dict[str, tuple[int, int]]
    #: The windows whose spend this run's reservation carried across their `warn_at` (each crossed once).
    warnings: tuple[BudgetWarning, ...] = ()


@dataclass(frozen=True)
class LedgerHealth:
    """Whether a ledger is storing what it is given: for `/healthz`, `doctor` and logs (never holds a password)."""

    #: `ok`; `degraded` while writes fail (they are kept in memory and stored once the ledger works again);
    #: `failed` after a lasting failure (nothing is recorded until the process restarts).
    status: Literal['ok', 'degraded', 'failed']
    #: Where the ledger is (a path, or a URL without its password).
    where: str
    #: Writes kept in memory, waiting for the store to work again.
    waiting: int = 0
    #: What failed last, while not `ok`.
    problem: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The health as JSON-ready data."""
        return {'status': self.status, 'where': self.where, 'waiting': self.waiting, 'problem': self.problem}


_LEDGERS: weakref.WeakSet[Ledger] = weakref.WeakSet()
_SEVERITY = {'ok': 0, 'degraded': 1, 'failed': 2}


def process_health() -> LedgerHealth:
    """The worst health among the ledgers of this process that have been used (`ok` if none is in trouble)."""
    worst = LedgerHealth('ok', '')
    for ledger in list(_LEDGERS):
        health = ledger.health()
        if _SEVERITY[health.status] > _SEVERITY[worst.status]:
            worst = health
    return worst


class Ledger:
    """The run ledger: SQLite shared by the processes of a machine, or PostgreSQL shared by a team; and the budget.

    Cheap to construct: nothing is opened or created until first use. Safe to use from several threads, and after
    `fork()`. Methods never raise for a broken ledger (see the module docstring): they warn and degrade, keep the
    writes they could not store, in order, and store them as soon as the ledger works again.
    """

    #: The SQLite file, or None for a PostgreSQL ledger.
    path: Path | None

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        """Use the ledger at `path`: a file path, `sqlite:///path`, a `postgresql://` URL or a libpq keyword/value
        string.

        None reads `PERPLEXITY_LEDGER_URL` now, else uses `default_ledger_path()` (which reads `PERPLEXITY_STATE_DIR`).

        Raises:
            ConfigurationError: a URL of another scheme; a PostgreSQL target libpq would misread (an unencoded `@`
                or `/` in the password, an unclosed quote); a PostgreSQL target without the driver installed.
        """
        self._engine = _engine_for(path)
        self.path = self._engine.path if isinstance(self._engine, SQLiteEngine) else None
        self._state = threading.Lock()
        self._writes = threading.RLock()  # orders the backlog and the writes that must come after it
        self._pid = os.getpid()
        self._problem: str | None = None  # a lasting failure
        self._failing: str | None = None  # the last failure, until a call succeeds with nothing waiting
        self._warned = False  # warned in this episode of failures
        self._dropped = 0
        self._pending: dict[str, RunRecord] = {}
        self._backlog: deque[tuple[str, Callable[[Engine], object]]] = deque()
        self._aio: AsyncLedger | None = None
        track(self)  # closed at interpreter exit, after every recorder has flushed
        _LEDGERS.add(self)

    def __repr__(self) -> str:
        return f'Ledger({self.describe()!r}, healthy={self.healthy})'

    def __reduce__(self) -> tuple[type[Ledger], tuple[str | Path]]:
        # A PostgreSQL ledger pickles with its full URL: the copy must be able to connect.
        return (Ledger, (self._engine.reduce_arg(),))

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    @property
    def aio(self) -> AsyncLedger:
        """The ledger for code on an event loop: named operations, applied in order on this ledger's one recorder
        thread (`_aio.py`)."""
        with self._state:
            if self._aio is None:
                self._aio = AsyncLedger(self)
            return self._aio

    @property
    def engine(self) -> EngineName:
        """`'sqlite'` or `'postgres'`."""
        return self._engine.name

    @property
    def url(self) -> str | None:
        """The PostgreSQL URL with its password shown as `***`, or None for a SQLite ledger."""
        return self._engine.describe() if isinstance(self._engine, PostgresEngine) else None

    def describe(self) -> str:
        """Where the ledger is, for people: the SQLite file's path, or the PostgreSQL URL without its password."""
        return self._engine.describe()

    @property
    def healthy(self) -> bool:
        """False once a lasting failure (a corrupt file, refused rights...) stopped the ledger (it stays so)."""
        return self._problem is None

    def health(self) -> LedgerHealth:
        """`ok`, `degraded` (writes are failing and kept in memory) or `failed`; first tries to store what waits."""
        self._check_fork()
        if self._backlog and self._problem is None:
            with self._writes:
                self._drain()
        if self._problem is not None:
            return LedgerHealth('failed', self.describe(), len(self._backlog), self._problem)
        if self._backlog or self._failing is not None:
            return LedgerHealth('degraded', self.describe(), len(self._backlog), self._failing)
        return LedgerHealth('ok', self.describe())

    # --- public operations ------------------------------------------------------------------------------------------

    def check(self) -> bool:
        """Open the ledger now, if not yet, and say whether it works; for diagnostics such as `doctor`."""
        opened = self._read('opening the ledger', lambda engine: engine.open() or True, False)
        return opened and self.health().status == 'ok'

    def record_start(self, record: RunRecord) -> None:
        """Record a run that has started; a row with the same `response_id` already there is kept as it is."""
        self._write('recording a run', lambda engine: engine.insert(record))

    def update(self, response_id: str, /, **fields: Any) -> None:
        """Set fields of a recorded run (status, model, counts, tokens, cost, error…) and its `updated_at`.

        Raises:
            TypeError: a field `RunRecord` does not have, or one that is not updatable, or a value of the wrong type.
        """
        values = validated_fields(fields)
        key = storable_text(response_id)
        at = now()
        self._write('updating a run', lambda engine: engine.update(key, values, at))

    def mark_cancel_requested(self, response_id: str, /, *, by: str, release_call: bool = False) -> None:
        """Record that `by` asked for the run to be cancelled (`cancel_requested_at`, `cancel_requested_by`), for
        whichever instance binds its id or serves its call to read. `release_call`: the cancel was applied, so the run
        also leaves its MCP call's key (a late notification, or the client's next use of the id, no longer finds it).
        """
        at = now()
        values: dict[str, Any] = {'cancel_requested_at': at, 'cancel_requested_by': storable_text(by)}
        if release_call:
            values |= {'request_id': None, 'request_kind': None}
        key = storable_text(response_id)
        self._write('marking a cancel request', lambda engine: engine.update(key, values, at))

    def claim_call(self, response_id: str, /, *, caller: str | None, key: str, statuses: tuple[str, ...]) -> bool:
        """Record the MCP call `key` on the run while the call waits for it, so a cancel reaching any instance finds
        it: only if `caller` started the run, its status is one of `statuses` and it carries no key of another kind
        (a durable workflow's, say). One conditional update; whether it claimed the run."""
        run_id, caller, key = storable_text(response_id), _clean(caller), storable_text(key)
        return self._write_returning(
            'claiming a run for an MCP call',
            lambda engine: engine.claim_call(run_id, caller, key, statuses, now()),
            False,
        )

    def answered(self, response_id: str, /, *, reason: str) -> bool:
        """The MCP call serving the run has answered: its call key leaves the run and, if a cancel was requested and
        the run ended `cancelled`, `error` says `reason`. One conditional update (none when the run holds neither a
        call key nor a cancel request); whether a cancel was requested."""
        run_id, reason = storable_text(response_id), storable_text(reason)
        return self._write_returning(
            'clearing an answered call from its run', lambda engine: engine.answered(run_id, reason, now()), False
        )

    def get(self, response_id: str) -> RunRecord | None:
        """The recorded run with this `response_id` (or reservation key), or None."""
        key = storable_text(response_id)
        return self._read('reading a run', lambda engine: engine.get(key), None)

    def list(
        self,
        *,
        status: str | tuple[str, ...] | None = None,
        origin: str | None = None,
        caller: str | None = None,
        request_id: str | None = None,
        limit: int = 20,
    ) -> list[RunRecord]:
        """Recorded runs, newest first, optionally only those with this status (or any of a tuple of them), origin,
        caller or JSON-RPC request id."""
        status = tuple(map(storable_text, status)) if isinstance(status, tuple) else _clean(status)
        origin, caller, request_id = _clean(origin), _clean(caller), _clean(request_id)
        return self._read(
            'listing runs',
            lambda engine: engine.list(status=status, origin=origin, caller=caller, request_id=request_id, limit=limit),
            [],
        )

    def find_reusable(self, fingerprint: str, *, caller: str | None = None) -> RunRecord | None:
        """The newest completed run with this fingerprint (`RunRecord.fingerprint`), that `caller` started when one
        is named, or None: what a run asked with `reuse_within` may be served from (the window is the caller's)."""
        caller = _clean(caller)
        found = self._read(
            'finding a run to reuse',
            lambda engine: engine.list(
                status='completed', origin=None, caller=caller, request_id=None, limit=1, fingerprint=fingerprint
            ),
            [],
        )
        return found[0] if found else None

    def find_by_request(self, caller: str | None, request_id: str | int) -> RunRecord | None:
        """The newest run that `caller` started with this JSON-RPC request id (e.g. to cancel it), or None."""
        found = self.list(caller=caller, request_id=str(request_id), limit=1)
        return found[0] if found and found[0].caller == caller else None

    def spent_usd(
        self,
        *,
        since: datetime | None = None,
        caller: str | None = None,
        emulated: bool | None = None,
        api: str | None = None,
        scope: str | None = None,
    ) -> float:
        """Recorded spend in USD: each run's actual cost when known, else its estimate (failed and cancelled too).

        `since` counts only runs created at or after it (a naive datetime is taken as UTC); `caller` only the runs
        that caller started; `emulated` only emulated (True) or only real (False) runs; `api` only runs sent to that
        API (host and port); `scope` only runs of that scope. Summed in integer micro-dollars.
        """
        caller, api, scope = _clean(caller), _clean(api), _clean(scope)
        spent = self._read(
            'reading the spend',
            lambda engine: engine.spent(since=since, caller=caller, emulated=emulated, api=api, scope=scope),
            0,
        )
        return dollars(spent)

    def spend(
        self,
        budget: Budget | None = None,
        *,
        caller: str | None = None,
        at: datetime | None = None,
        emulated: bool | None = None,
    ) -> list[SpendLine]:
        """Spent, held and left per window (day, month, total), for everyone, each caller and each scope of `budget`.

        The callers shown are those `budget` names, every caller with runs when it has a `'*'` entry, and `caller`;
        given `caller`, only its lines (and everyone's) are shown. `emulated=False` counts real runs only (what a
        real run's admission counts). Windows are UTC calendar windows holding `at` (default now).
        """
        at = at or datetime.now(UTC)
        budget = budget or Budget()
        caller = _clean(caller)

        def op(engine: Engine) -> list[SpendLine]:
            subjects: list[tuple[str | None, str | None, Mapping[Window, float]]] = [(None, None, budget.windows())]
            if caller is not None:
                names = [caller]
            else:
                names = [n for n in budget.per_caller if n != ANY_CALLER]
                if ANY_CALLER in budget.per_caller:
                    names += [n for n in engine.callers() if n not in names]
            for name in names:
                limits = budget.for_caller(name)
                subjects.append((name, None, limits.windows() if limits else {}))
            if caller is None:
                subjects += [(None, scope, limits.windows()) for scope, limits in budget.per_scope.items()]
            lines: list[SpendLine] = []
            for who, scope, caps in subjects:
                for window in ('day', 'month', 'total'):
                    since = window_start(window, at)
                    spent, held = engine.totals(since=since, caller=who, scope=scope, emulated=emulated)
                    cap = caps.get(window)
                    lines.append(SpendLine(window, since, who, scope, dollars(spent), dollars(held), cap))
            return lines

        return self._read('reading the spend', op, [])

    def reserve(
        self,
        record: RunRecord,
        *,
        cap_usd: float | None,
        since: datetime | None = None,
        limits: Sequence[Limit] = (),
    ) -> str:
        """Check the budget and record the run in one transaction; return the key the row is stored under.

        The row is stored under `record.response_id` (by default a provisional key) with status `'reserved'`,
        only if the spend (since `since`, if given) plus `record.estimate_usd` fits `cap_usd`, and the spend each of
        `limits` counts (its window, caller, scope) plus the estimate fits that limit; all compared in integer
        micro-dollars. For a real run the spend counted is that of real runs only (emulated runs never use up the real
        API's budget); for an emulated run, that of every run. No cap and no limits: always stored. Follow with
        `bind()` once the API gave the run its id, or `release()` if no run was started.

        Raises:
            BudgetExceededError: the run does not fit the cap or a limit; nothing was recorded.
            BudgetUnenforceableError: a cap is set and the ledger is not working, so the spend is unknown.
        """
        checks = _with_cap(cap_usd, since, limits)
        token, reserved = self._reserve_within(record, checks)
        if token is None:
            raise self._refusal(record, checks, reserved.spent)
        return token

    def admit(
        self,
        record: RunRecord,
        query: Any,
        request: Mapping[str, Any],
        *,
        cap_usd: float | None,
        prices: PriceTable | None = None,
        since: datetime | None = None,
        budget: Budget | None = None,
        on_budget: OnBudget = 'refuse',
    ) -> Admission:
        """Reserve the most `request` can cost (`pricing.reservation`, with the prices learned by every process that
        shares this ledger); the returned `request` carries the limits the reservation assumed, for the API to enforce.

        Under a cap, a run whose reservation does not fit what is left is refused (`on_budget='refuse'`, the default),
        or, with `on_budget='tighten'`, tightened (`pricing.fit`: fewer pages per fetch, output tokens, tool calls,
        steps) and reserved at that; `Admission.changes` then says what was lowered. Without a cap nothing is stored:
        `record` with its estimate is in `Admission.record`, for `record_start` once the run has an id.

        `budget` adds its limits (`budget.applicable_limits`: the windows holding `record.created_at`, for everyone,
        for `record.caller` and for `record.scope`, and the per-run ceiling), all checked in the same transaction as
        the cap; `Admission.warnings` says which windows this run carried across their `warn_at`.

        Raises:
            BudgetExceededError: the run does not fit (tightened too, if asked); its message and fields give what is
                used and held, what is left, what this run needs and the efforts that fit. Nothing was recorded.
            BudgetUnenforceableError: a cap is set and the ledger is not working.
        """
        if on_budget not in ('refuse', 'tighten'):
            raise ConfigurationError(f'on_budget={on_budget!r}: use "refuse" (the default) or "tighten".')
        table = (prices or default_prices()).with_learned(self.learned_prices())
        sent = limit_request(request, table)
        bound = reservation(query, sent, table)
        limits, ceiling = applicable_limits(
            budget, cap_usd=cap_usd, since=since, caller=record.caller, scope=record.scope, at=record.created_at
        )
        held, changes = bound, {}
        if ceiling is not None and micros(bound.usd) > ceiling:  # over the per-run ceiling: tightened to it if asked
            fitted = _fit_ceiling(record, query, sent, table, bound, ceiling, on_budget)
            sent, held, changes = fitted.request, fitted.reservation, fitted.changes
        priced = record.model_copy(update={'estimate_usd': held.usd, 'price_source': table.source})
        if not limits:  # nothing to check against spend: priced here, recorded once the run has its id
            return Admission(None, priced, sent, held, changes)
        token, reserved = self._reserve_within(priced, limits)
        if token is not None:
            return Admission(token, priced, sent, held, changes, _crossings(limits, reserved.spent, micros(held.usd)))
        room = _room(limits, reserved.spent, ceiling)
        fitted = fit(query, sent, dollars(max(room, 0)), table)
        if on_budget == 'tighten' and fitted.fits:
            return self._admit_tightened(record, fitted, table, limits, room)
        advice = _refusal_advice(fitted, sent, table, on_budget)
        raise self._refusal(
            priced, limits, reserved.spent, bound.describe(), fit_with=(query, sent, table), advice=advice
        )

    def _admit_tightened(
        self, record: RunRecord, fitted: Fit, table: PriceTable, limits: Sequence[Limit], room: int
    ) -> Admission:
        """Reserve the tightened run `fitted` (its limits lowered to fit `room`, micro-USD), or refuse it if the
        spend grew meanwhile."""
        tightened = record.model_copy(update={'estimate_usd': fitted.reservation.usd, 'price_source': table.source})
        token, reserved = self._reserve_within(tightened, limits)
        if token is None:  # the spend grew meanwhile
            raise self._refusal(tightened, limits, reserved.spent, fitted.reservation.describe())
        _log.info(
            'A run was tightened to fit the budget (%s left): %s.',
            usd(dollars(room)),
            ', '.join(f'{k} {a} -> {b}' for k, (a, b) in fitted.changes.items()),
        )
        warnings = _crossings(limits, reserved.spent, micros(fitted.reservation.usd))
        return Admission(token, tightened, fitted.request, fitted.reservation, fitted.changes, warnings)

    def admit_fee(self, record: RunRecord, *, budget: Budget | None, cap_usd: float | None = None) -> str:
        """Reserve a known fee (`record.estimate_usd`, e.g. a Search API request's) against the budget's limits, as
        `admit` does a run's reservation; return the key the row is stored under (`bind` it once the call is made).

        Raises:
            BudgetExceededError: the fee does not fit a limit or the per-run ceiling; nothing was recorded.
            BudgetUnenforceableError: a cap is set and the ledger is not working.
        """
        limits, ceiling = applicable_limits(
            budget, cap_usd=cap_usd, caller=record.caller, scope=record.scope, at=record.created_at
        )
        if ceiling is not None and micros(record.estimate_usd) > ceiling:
            raise per_run_refusal(record.effort, record.estimate_usd, ceiling, 'a Search API request')
        return self.reserve(record, cap_usd=None, limits=limits)

    def _held(self, record: RunRecord) -> tuple[float, int]:
        """What runs not finished yet hold against the budget (USD, runs): the estimates of rows without a cost."""
        rows = self.list(status=_IN_FLIGHT, limit=10_000)
        held = [r.estimate_usd for r in rows if r.cost_usd is None and (record.emulated or not r.emulated)]
        return sum(held), len(held)

    def learn_price(self, model: str, price: ModelPrice) -> None:
        """Raise `model`'s price for every later reservation of every process sharing the ledger (never lowers it)."""
        key = storable_text(model)
        self._write(
            'learning a price',
            lambda engine: engine.learn_price(key, price.input_per_million, price.output_per_million, now()),
        )

    def learned_prices(self) -> dict[str, ModelPrice]:
        """Model prices learned from runs billed above the price table (`pricing.PriceTable.observe`)."""
        found = self._read('reading learned prices', lambda engine: engine.learned_prices(), {})
        return {m: ModelPrice(i, o) for m, (i, o) in found.items() if math.isfinite(i) and math.isfinite(o)}

    def bind(self, token: str, response_id: str, /, **fields: Any) -> None:
        """Give a reservation its real `response_id` and set `fields` (status defaults to `'queued'`).

        If the row is missing (the reservation could not be written at the time), it is recorded now.

        Raises:
            TypeError: as for `update()`.
        """
        values = validated_fields(fields)
        values.setdefault('status', 'queued')
        token, key, at = storable_text(token), storable_text(response_id), now()
        with self._state:
            pending = self._pending.pop(token, None)
        self._write('binding a reservation to its run', lambda engine: engine.bind(token, key, pending, values, at))

    def release(self, token: str) -> None:
        """Drop a reservation whose create started no run, giving its estimate back to the budget."""
        token = storable_text(token)
        with self._state:
            self._pending.pop(token, None)
        self._write('releasing a reservation', lambda engine: engine.release(token))

    def close(self) -> None:
        """Store what waits (one more try), then close this process's connections; a later call opens them again."""
        self._check_fork()
        if self._backlog and self._problem is None:
            with self._writes:
                if not self._drain():
                    _log.warning(
                        'The run ledger at %s is closing with %d entries it could not store (%s); they are lost.',
                        self.describe(),
                        len(self._backlog),
                        self._failing,
                    )
        self._engine.close()

    # --- machinery --------------------------------------------------------------------------------------------------

    def _check_fork(self) -> None:
        # After fork the child must neither use nor close the parent's connections; the engine drops them without
        # touching them and the child opens its own. Locks may have been held by threads that do not exist here, and
        # what waits to be stored is the parent's to store.
        if self._pid != os.getpid():
            self._state = threading.Lock()
            self._writes = threading.RLock()
            self._backlog = deque()
            self._engine.after_fork()
            self._pid = os.getpid()

    def _read(self, action: str, op: Callable[[Engine], _T], default: _T) -> _T:
        self._check_fork()
        if self._problem is not None:
            return default
        if self._backlog:  # readers see what was written before them, once the store takes it
            with self._writes:
                self._drain()
        try:
            result = op(self._engine)
        except Exception as exc:
            self._report(action, self._engine.failure(action, exc), kept=False)
            return default
        if not self._backlog:
            self._recovered()
        return result

    def _write(self, action: str, op: Callable[[Engine], object]) -> None:
        self._write_returning(action, op, None)

    def _write_returning(self, action: str, op: Callable[[Engine], _T], default: _T) -> _T:
        """Apply the write `op` now (after the kept ones) and return what it returns; `default` when it could not be
        applied now (it is then kept, in order, if the store may take it later)."""
        self._check_fork()
        if self._problem is not None:
            return default
        if self._backlog:
            with self._writes:
                if self._backlog and not self._drain():
                    self._keep(action, op)  # after the others, so the order of writes holds
                    return default
        try:
            result = op(self._engine)
        except Exception as exc:
            failure = self._engine.failure(action, exc)
            kept = failure.retry and not failure.lasting
            if kept:
                with self._writes:
                    self._keep(action, op)
            self._report(action, failure, kept=kept)
            return default
        if not self._backlog:
            self._recovered()
        return result

    def _reserve_within(self, record: RunRecord, limits: Sequence[Limit]) -> tuple[str | None, Reserved]:
        """Store `record` as a reservation if it fits every limit (in one transaction); its key, or None if it does not
        fit, and the spend each limit counted. Without limits it is always stored.

        Raises:
            BudgetUnenforceableError: limits apply and the spend cannot be read or the row written.
        """
        reserved = record.model_copy(update={'status': RESERVED})
        if not limits:
            self._write('reserving budget for a run', lambda engine: engine.reserve(reserved, limits=()))
            found = Reserved(stored=True, spent=())
        else:
            outcome = self._reserve_capped(reserved, limits)
            if isinstance(outcome, str):
                cap = dollars(limits[0].cap_micros)
                raise BudgetUnenforceableError(
                    f'The budget cap of {usd(cap)} cannot be enforced: the run ledger at {self.describe()} is not '
                    f'working ({outcome}), so the recorded spend is unknown. The run was not started. '
                    f'{self._engine.unenforceable_fix()}, or run without a cap (`budget_usd=None` and {BUDGET_ENV} '
                    f'unset).',
                    spent_usd=math.nan,
                    cap_usd=cap,
                    estimate_usd=record.estimate_usd,
                )
            found = outcome
            if not found.stored:
                return None, found
        with self._state:
            self._pending[reserved.response_id] = reserved
        return reserved.response_id, found

    def _reserve_capped(self, record: RunRecord, limits: Sequence[Limit]) -> Reserved | str:
        """Reserve under limits: what the store found, or the reason the spend is unknown."""
        self._check_fork()
        if self._problem is None and self._backlog:
            with self._writes:
                self._drain()
        if self._problem is not None:
            return self._problem
        if self._backlog:
            return f'{len(self._backlog)} earlier entries are waiting to be stored: {self._failing}'
        try:
            found = self._engine.reserve(record, limits=limits)
        except Exception as exc:
            failure = self._engine.failure('reserving budget for a run', exc)
            self._report('reserving budget for a run', failure, kept=False)
            return failure.summary
        self._recovered()
        return found

    def _refusal(
        self,
        record: RunRecord,
        limits: Sequence[Limit],
        spent: Sequence[int],
        detail: str = '',
        *,
        fit_with: tuple[Any, Mapping[str, Any], PriceTable] | None = None,
        advice: str = '',
    ) -> BudgetExceededError:
        """The refusal for the limit that leaves the least room among those `record` does not fit (or among all);
        with `fit_with` (the query, the request sent, the prices) it names the efforts that fit what is left."""
        estimate = micros(record.estimate_usd)
        rooms = [(limit.cap_micros - s, limit, s) for limit, s in zip(limits, spent, strict=True)]
        over = [room for room in rooms if room[2] + estimate > room[1].cap_micros] or rooms
        _, limit, used = min(over, key=lambda room: room[0])
        if limit.window == 'total' and limit.caller is None and limit.scope is None:
            cap, spent_usd = dollars(limit.cap_micros), dollars(used)
            if fit_with is None:  # a bare `reserve`: the spend and the cap only
                return refusal(record, spent_usd, cap, detail)
            query, sent, table = fit_with
            fits = tuple(efforts_that_fit(query, sent, cap - spent_usd, table))
            return refusal(record, spent_usd, cap, detail, held=self._held(record), fits=fits, advice=advice)
        return window_refusal(record.effort, record.estimate_usd, dollars(used), limit, detail)

    def _drain(self) -> bool:
        """Store the kept writes in order (caller holds `_writes`); whether none is left."""
        while self._backlog and self._problem is None:
            action, op = self._backlog[0]
            try:
                op(self._engine)
            except Exception as exc:
                failure = self._engine.failure(action, exc)
                if failure.retry and not failure.lasting:
                    self._failing = failure.summary
                    _log.debug('the run ledger still cannot store its %d kept entries: %s', len(self._backlog), exc)
                    return False
                self._backlog.popleft()
                self._report(action, failure, kept=False)
                continue
            self._backlog.popleft()
        if self._problem is not None:
            self._backlog.clear()
            return False
        self._recovered()
        return True

    def _keep(self, action: str, op: Callable[[Engine], object]) -> None:
        self._backlog.append((action, op))
        if len(self._backlog) > BACKLOG_LIMIT:
            self._backlog.popleft()
            self._dropped += 1
            if self._dropped == 1 or self._dropped % BACKLOG_LIMIT == 0:
                _log.warning(
                    'The run ledger at %s has kept %d entries it could not store; the oldest are being dropped '
                    '(%d so far). %s',
                    self.describe(),
                    BACKLOG_LIMIT,
                    self._dropped,
                    self._failing,
                )

    def _recovered(self) -> None:
        if self._failing is None and not self._warned:
            return
        with self._state:
            was, self._failing, self._warned = self._failing, None, False
        if was is not None:
            _log.info('The run ledger at %s works again (it had failed: %s).', self.describe(), was)

    def _report(self, action: str, failure: Failure, *, kept: bool) -> None:
        with self._state:
            if failure.lasting:
                self._problem = failure.summary
            if failure.retry or failure.lasting:
                self._failing = failure.summary
                warned, self._warned = self._warned, True
            else:
                warned = True  # one entry that can never be stored: logged, the ledger itself is fine
        if failure.lasting:
            self._engine.close()
        lost = _what_is_lost(failure, kept=kept)
        message = (
            f'The run ledger at {self.describe()} is not working: {action} failed ({failure.cause}). Research goes on, '
            f'but {lost}, so run history (listing runs, collecting them from other processes) and spend tracking for '
            f'the budget are incomplete meanwhile. '
            f'{failure.fix}'
        )
        if warned:
            log = _log.warning if not (failure.retry or failure.lasting) else _log.debug
            log('%s', message)
            return
        try:
            warnings.warn(message, LedgerWarning, stacklevel=4)
        except Exception:  # warnings turned into errors: a ledger failure must still never reach the caller
            _log.warning('%s', message)


def _room(limits: Sequence[Limit], spent: Sequence[int], ceiling: int | None) -> int:
    """What is left (micro-USD) under the tightest of `limits` given their `spent`, and under the per-run ceiling."""
    room = min(limit.cap_micros - used for limit, used in zip(limits, spent, strict=True))
    return room if ceiling is None else min(room, ceiling)


def _fit_ceiling(
    record: RunRecord,
    query: Any,
    sent: dict[str, Any],
    table: PriceTable,
    bound: Reservation,
    ceiling: int,
    on_budget: OnBudget,
) -> Fit:
    """`sent` tightened under the per-run ceiling (micro-USD) when `on_budget` is 'tighten' and it can be; else the
    per-run refusal is raised."""
    fitted = fit(query, sent, dollars(ceiling), table)
    if on_budget != 'tighten' or not fitted.fits:
        least = fitted.reservation if on_budget == 'tighten' else bound
        raise per_run_refusal(record.effort, least.usd, ceiling, least.describe())
    return fitted


def _refusal_advice(fitted: Fit, sent: Mapping[str, Any], table: PriceTable, on_budget: OnBudget) -> str:
    """The sentences a budget refusal adds: what tightening would lower, and how to price a model with no price."""
    advice = ''
    if on_budget == 'refuse' and fitted.fits:
        lowered = ', '.join(f'{k} {a:,} -> {b:,}' for k, (a, b) in fitted.changes.items())
        advice = (
            f'With on_budget="tighten" (CLI: --tighten) it would run with lower limits ({lowered}), reserved at '
            f'{usd(fitted.reservation.usd)}.'
        )
    listed = sent.get('models')
    named = [sent.get('model'), *(cast('list[Any]', listed) if isinstance(listed, list) else [])]
    unknown = [m for m in named if isinstance(m, str) and not table.known(m)]
    if unknown:
        advice += (
            f' {unknown[0]} has no known price, so it is priced as the dearest known model; to price it, give '
            f'{PRICES_ENV}={{"models": {{"{unknown[0]}": [input, output]}}}} (USD per 1M tokens).'
        )
    return advice.strip()


def _what_is_lost(failure: Failure, *, kept: bool) -> str:
    """What a ledger failure costs, for its warning: everything from now on, one entry, or this call only."""
    if failure.lasting:
        return 'from now on nothing is recorded or read here (until the process restarts)'
    if not failure.retry:
        return 'this one entry cannot be stored (other entries are not affected)'
    if kept:
        return (
            f'the entry is kept in memory (in order, up to {BACKLOG_LIMIT} entries) and stored as soon as the '
            f'ledger works again; later calls try again'
        )
    return 'this call got nothing from the ledger; later calls try again'


def _clean(value: str | None) -> str | None:
    return storable_text(value) if value is not None else None


def _with_cap(cap_usd: float | None, since: datetime | None, limits: Sequence[Limit]) -> tuple[Limit, ...]:
    """`limits` with the plain cap (everyone's spend since `since`) first, when there is one."""
    if cap_usd is None:
        return tuple(limits)
    return (Limit('total', micros(cap_usd), since), *limits)


def _crossings(limits: Sequence[Limit], spent: Sequence[int], estimate: int) -> tuple[BudgetWarning, ...]:
    """The limits whose spend this run's reservation carries from below their warning level to it or above."""
    found: list[BudgetWarning] = []
    for limit, before in zip(limits, spent, strict=True):
        warn = limit.warn_micros
        if warn is not None and before < warn <= before + estimate:
            found.append(BudgetWarning(limit, dollars(before + estimate), dollars(limit.cap_micros), dollars(warn)))
    return tuple(found)
