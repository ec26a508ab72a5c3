"""The run ledger and the budget: one SQLite file that every process starting research runs shares.

Every run started through the toolset, the MCP server or the CLI gets a row keyed by its `response_id`, so runs
can be listed, collected later by any process on the machine, and spend can be capped.

**Location.** `$PERPLEXITY_STATE_DIR/ledger.sqlite3`, else `platformdirs.user_state_dir('pydantic-ai-perplexity')`
(e.g. `~/.local/state/pydantic-ai-perplexity/ledger.sqlite3` on Linux). It must be on a local disk: SQLite's WAL
needs shared memory between the processes, which network filesystems do not give. On Linux a path on NFS, SMB/CIFS,
AFS, sshfs, Ceph, GlusterFS or Lustre is refused (read from `/proc/self/mounts`); elsewhere this is not checked.

**Concurrency.** Each process opens its own connection lazily, on first use, and reopens after `fork()` (a
connection is never carried across a fork: that can corrupt the file). Threads share it under a lock. Every
connection sets `journal_mode=WAL`, `synchronous=FULL` (a commit survives power loss), `busy_timeout=5000` and
`foreign_keys=ON`; every write is one short `BEGIN IMMEDIATE ... COMMIT`, retried a bounded number of times with
jitter when another process holds the write lock longer than the busy timeout. The schema is created and upgraded by
the registered migrations (`@migration`), recorded in `_migrations` and in `PRAGMA user_version`.

**Budget.** `spent_usd()` sums, over every recorded run, its actual `cost_usd` when known, else its
`estimate_usd` (see `ESTIMATED_COST_USD`). Failed and cancelled runs count too: they may have billed steps before
they stopped, so their estimate stands until an actual cost is recorded. A run is admitted under a cap in three
short transactions:

1. `token = ledger.reserve(record, cap_usd=cap)`: in one `BEGIN IMMEDIATE` transaction, reads the spend and inserts
   the row (status `'reserved'`) only if spend plus `record.estimate_usd` fits the cap, else raises
   `BudgetExceededError` and inserts nothing. The write lock is held from the read to the insert, so two processes
   can never both spend the last of the cap. The row is keyed by `record.response_id`, which by default is a
   provisional key (`pending_<hex>`): the real id is not known before the create request answers.
2. `ledger.bind(token, response_id, status=...)` once the API gave the run its id: renames the row to the real id.
3. `ledger.release(token)` instead, when the create provably started no run (e.g. a 400): drops the reservation.

A reservation that is never bound (the process died while the create was in flight) keeps counting its estimate:
a billed run may exist. Such rows are listed with status `'reserved'`.

**Failure policy.** Recording never fails or blocks a research call for long. If the directory cannot be created,
the file is unwritable or not a database, or the write lock is still held after the retries, the ledger emits one
`LedgerWarning` per instance saying what failed, where, what is lost and how to fix it, and degrades: writes do
nothing, reads return nothing, `spent_usd()` returns 0.0. Lock contention degrades only the call that met it;
any other failure lasts for the life of the instance (`healthy` is then False). The one exception: when a budget
cap is set, `reserve()` cannot tell whether the run fits, and rather than allowing unlimited spend it refuses with
`BudgetUnenforceableError` (a `BudgetExceededError`). No other exception leaves a `Ledger` method, except
`TypeError` for a call that names a field `RunRecord` does not have.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import os
import random
import re
import sqlite3
import threading
import time
import uuid
import warnings
import weakref
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Self, TypeVar

import platformdirs
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator

from .errors import BudgetExceededError, ConfigurationError

__all__ = (
    'DEFAULT_EFFORT',
    'ESTIMATED_COST_USD',
    'MIGRATIONS',
    'RESERVED',
    'SCHEMA_VERSION',
    'BudgetUnenforceableError',
    'Ledger',
    'LedgerWarning',
    'Origin',
    'RunRecord',
    'budget_from_env',
    'default_ledger_path',
    'estimate_cost',
    'is_provisional',
    'migration',
    'provisional_id',
)

_log = logging.getLogger('pydantic_ai_perplexity.ledger')
_T = TypeVar('_T')

BUDGET_ENV = 'PERPLEXITY_BUDGET_USD'
STATE_DIR_ENV = 'PERPLEXITY_STATE_DIR'
LEDGER_FILENAME = 'ledger.sqlite3'

#: Estimated cost in USD of one run per effort, charged against the budget until the actual cost is known.
#: Perplexity publishes no per-effort price, so these come from what each effort bundles (perplexity-api.md §0.3,
#: §8), rounded up: `fast` is one step with one search ($0.005) on a fast model; `low` about three steps with
#: search and fetch on a mid-price model; `medium` about ten steps on a frontier model ($1.75/$14 per 1M tokens,
#: ~100K tokens in); `high` and `xhigh` run many more steps, and `xhigh` adds a code sandbox. They err high so that
#: a cap is met before it is overrun; the actual `usage.cost` replaces them as soon as a run reports it.
ESTIMATED_COST_USD: dict[str, float] = {'fast': 0.01, 'low': 0.05, 'medium': 0.25, 'high': 1.00, 'xhigh': 3.00}
#: The effort whose estimate applies when the effort is unknown or not given (the API's default depth).
DEFAULT_EFFORT = 'medium'
#: The old preset names the API still accepts, and the effort each stands for.
_EFFORT_ALIASES = {
    'fast-search': 'fast',
    'pro-search': 'low',
    'deep-research': 'medium',
    'advanced-deep-research': 'high',
}

#: The status of a row that holds budget for a run whose create has not answered yet.
RESERVED = 'reserved'
_PROVISIONAL_PREFIX = 'pending_'

_BUSY_TIMEOUT_MS = 5000
_RETRIES = 2  # after the first attempt: at most 3 x busy_timeout blocked on a lock held by another process
_EPSILON_USD = 1e-9  # float sums of cents must not refuse a run that fits the cap exactly
_NETWORK_FILESYSTEMS = frozenset(
    {'nfs', 'nfs4', 'cifs', 'smb3', 'smbfs', 'afs', 'ncpfs', 'ceph', 'glusterfs', 'lustre', 'fuse.sshfs'}
    | {'fuse.glusterfs', 'fuse.ceph', 'fuse.rclone'}
)
_ABANDONED: list[sqlite3.Connection] = []  # inherited across fork: never closed in the child (see _check_fork)


class LedgerWarning(UserWarning):
    """The run ledger is not working: research goes on, but history and budget tracking are lost."""


class BudgetUnenforceableError(BudgetExceededError):
    """A budget cap is set but the ledger cannot tell the recorded spend, so the run is refused rather than unchecked.

    `spent_usd` is NaN: the spend is unknown.
    """


def _now() -> datetime:
    return datetime.now(UTC)


def _timestamp(value: datetime) -> str:
    """Fixed-width ISO 8601 in UTC, so that text order is time order in SQL."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).isoformat(timespec='microseconds')


def provisional_id() -> str:
    """A fresh key for a reservation whose real `response_id` is not known yet."""
    return f'{_PROVISIONAL_PREFIX}{uuid.uuid4().hex}'


def is_provisional(response_id: str) -> bool:
    """Whether `response_id` is a reservation key made by `provisional_id()`, not an id the API gave."""
    return response_id.startswith(_PROVISIONAL_PREFIX)


Origin = Literal['toolset', 'mcp', 'cli', 'api']


class RunRecord(BaseModel):
    """One research run as the ledger records it."""

    model_config = ConfigDict(extra='forbid')

    #: The API's id (`resp_<uuid>`), or a provisional key while a reservation waits for it.
    response_id: str = Field(default_factory=provisional_id)
    created_at: AwareDatetime = Field(default_factory=_now)
    #: Defaults to `created_at`; the ledger sets it on every update.
    updated_at: AwareDatetime = Field(default_factory=_now)
    query: str
    effort: str | None = None
    model: str | None = None
    #: `queued`, `in_progress`, `completed`, `incomplete`, `failed`, `cancelled`, `cancelling`, or `reserved`.
    status: str = 'queued'
    #: Which way in started the run.
    origin: Origin
    sources: int = 0
    cited: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    #: The actual cost reported by the API, when known; it replaces `estimate_usd` in the spend.
    cost_usd: float | None = None
    #: The estimate charged against the budget until `cost_usd` is known; defaults to `estimate_cost(effort)`.
    estimate_usd: float = 0.0
    error: str | None = None
    #: Trace and span id (hex) of the span that started the run, so a later collection can link to it.
    trace_id: str | None = None
    span_id: str | None = None
    #: Who started the run (e.g. the name of an MCP bearer token), for attributing spend.
    caller: str | None = None

    @field_validator('created_at', 'updated_at')
    @classmethod
    def _in_utc(cls, value: datetime) -> datetime:
        return value.astimezone(UTC)

    def model_post_init(self, context: Any, /) -> None:
        if 'updated_at' not in self.model_fields_set:
            self.updated_at = self.created_at
        if 'estimate_usd' not in self.model_fields_set:  # a record built without one must not count as free
            self.estimate_usd = estimate_cost(self.effort)


_COLUMNS: tuple[str, ...] = tuple(RunRecord.model_fields)
_SELECT = f'SELECT {", ".join(_COLUMNS)} FROM runs'  # noqa: S608 (constant column names)
_INSERT = (
    f'INSERT INTO runs ({", ".join(_COLUMNS)}) VALUES ({", ".join(":" + c for c in _COLUMNS)}) '  # noqa: S608
    'ON CONFLICT(response_id) DO NOTHING'
)
#: Fields `update()` and `bind()` accept; the key and the timestamps are the ledger's own.
_UPDATABLE = frozenset(_COLUMNS) - {'response_id', 'created_at', 'updated_at'}


def _row(record: RunRecord) -> dict[str, Any]:
    data = record.model_dump()
    data['created_at'] = _timestamp(record.created_at)
    data['updated_at'] = _timestamp(record.updated_at)
    return data


def _record(row: Any) -> RunRecord | None:
    try:
        return RunRecord.model_validate(dict(zip(_COLUMNS, row, strict=True)))
    except ValidationError as exc:  # e.g. an origin written by a newer version of the library
        _log.debug('skipping a ledger row that does not validate: %s', exc)
        return None


@functools.cache
def _field_adapter(name: str) -> TypeAdapter[Any]:
    annotation = RunRecord.model_fields[name].annotation
    assert annotation is not None
    return TypeAdapter(annotation)


def _validated_fields(fields: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(fields) - _UPDATABLE)
    if unknown:
        raise TypeError(f'RunRecord fields that cannot be updated: {", ".join(unknown)}; allowed: {sorted(_UPDATABLE)}')
    values: dict[str, Any] = {}
    for name, value in fields.items():
        try:
            values[name] = _field_adapter(name).validate_python(value)
        except ValidationError as exc:
            raise TypeError(f'invalid value for RunRecord.{name}: {value!r}') from exc
    return values


# --- budget ---------------------------------------------------------------------------------------------------------


def estimate_cost(effort: str | None) -> float:
    """The estimated cost in USD of one run at `effort`, from `ESTIMATED_COST_USD`.

    A pinned `name@version` counts as `name`, the old preset names as their efforts, and an unknown or missing
    effort as `DEFAULT_EFFORT`.
    """
    name = (effort or DEFAULT_EFFORT).strip().lower().partition('@')[0]
    name = _EFFORT_ALIASES.get(name, name)
    return ESTIMATED_COST_USD.get(name, ESTIMATED_COST_USD[DEFAULT_EFFORT])


def budget_from_env() -> float | None:
    """The budget cap in USD from `PERPLEXITY_BUDGET_USD`, or None when it is unset or empty (no cap).

    Raises:
        ConfigurationError: the variable is not a finite, non-negative number.
    """
    raw = os.environ.get(BUDGET_ENV, '').strip()
    if not raw:
        return None
    try:
        value = float(raw.removeprefix('$'))
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise ConfigurationError(
            f'{BUDGET_ENV} must be a non-negative number of US dollars, e.g. 5 or 12.50; got {raw!r}. '
            f'Unset it to run without a budget cap.'
        )
    return value


def _usd(value: float) -> str:
    return f'${value:.4f}' if 0 < abs(value) < 0.01 else f'${value:,.2f}'


def _refusal(record: RunRecord, spent: float, cap: float) -> BudgetExceededError:
    effort = f' (effort {record.effort!r})' if record.effort else ''
    message = (
        f'Budget exceeded: {_usd(spent)} already spent (recorded in the ledger) of a {_usd(cap)} cap, and this run '
        f'is estimated at {_usd(record.estimate_usd)}{effort}, which would bring it to '
        f'{_usd(spent + record.estimate_usd)}. '
        f'The run was not started. To allow it, raise the cap with the `budget_usd=` argument or the {BUDGET_ENV} '
        f'environment variable, or choose a cheaper effort.'
    )
    return BudgetExceededError(message, spent_usd=spent, cap_usd=cap, estimate_usd=record.estimate_usd)


# --- location -------------------------------------------------------------------------------------------------------


def default_ledger_path() -> Path:
    """`$PERPLEXITY_STATE_DIR/ledger.sqlite3`, else the ledger file in the user state directory."""
    state_dir = os.environ.get(STATE_DIR_ENV, '').strip()
    base = Path(state_dir).expanduser() if state_dir else Path(platformdirs.user_state_dir('pydantic-ai-perplexity'))
    return base / LEDGER_FILENAME


_MOUNT_ESCAPE = re.compile(r'\\([0-7]{3})')


def _filesystem_type(directory: str, mounts: str) -> str | None:
    """The type of the filesystem holding `directory` (absolute, resolved), from the text of `/proc/self/mounts`."""
    best, best_type = '', None
    for line in mounts.splitlines():
        parts = line.split()
        if len(parts) < 3:
            continue
        mount = _MOUNT_ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), parts[1])
        inside = directory == mount or directory.startswith(mount.rstrip('/') + '/')
        if inside and len(mount) >= len(best):
            best, best_type = mount, parts[2]
    return best_type


def _network_filesystem(directory: Path) -> str | None:
    try:
        mounts = Path('/proc/self/mounts').read_text(encoding='utf-8')
    except OSError:  # not Linux: not checked
        return None
    fs_type = _filesystem_type(str(directory.resolve()), mounts)
    return fs_type if fs_type in _NETWORK_FILESYSTEMS else None


# --- migrations -----------------------------------------------------------------------------------------------------

#: The schema's migrations, in order. Each runs once per database, inside the transaction that records it, so it must
#: use `db.execute` (never `executescript`, which commits). Never edit one that has shipped: add the next.
MIGRATIONS: list[Callable[[sqlite3.Connection], None]] = []


def migration(fn: Callable[[sqlite3.Connection], None]) -> Callable[[sqlite3.Connection], None]:
    """Register `fn` as the next schema migration; its name is its identity in `_migrations`."""
    MIGRATIONS.append(fn)
    return fn


@migration
def m001_initial(db: sqlite3.Connection) -> None:
    db.execute(
        """
        CREATE TABLE runs (
            response_id   TEXT PRIMARY KEY,
            created_at    TEXT NOT NULL,
            updated_at    TEXT NOT NULL,
            query         TEXT NOT NULL,
            effort        TEXT,
            model         TEXT,
            status        TEXT NOT NULL,
            origin        TEXT NOT NULL,
            sources       INTEGER NOT NULL DEFAULT 0,
            cited         INTEGER NOT NULL DEFAULT 0,
            input_tokens  INTEGER NOT NULL DEFAULT 0,
            output_tokens INTEGER NOT NULL DEFAULT 0,
            cost_usd      REAL,
            estimate_usd  REAL NOT NULL DEFAULT 0,
            error         TEXT,
            trace_id      TEXT,
            span_id       TEXT,
            caller        TEXT
        )
        """
    )
    db.execute('CREATE INDEX runs_created_at ON runs (created_at)')
    db.execute('CREATE INDEX runs_status ON runs (status)')


#: The schema version a database reaches once every migration is applied (`PRAGMA user_version`).
SCHEMA_VERSION = len(MIGRATIONS)


def _migrate(db: sqlite3.Connection) -> None:
    (version,) = db.execute('PRAGMA user_version').fetchone()
    if int(version) >= len(MIGRATIONS):  # a newer library may have gone further: its migrations only add
        return
    db.execute('BEGIN IMMEDIATE')
    try:
        db.execute('CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)')
        applied = {str(name) for (name,) in db.execute('SELECT name FROM _migrations')}
        for fn in MIGRATIONS:
            if fn.__name__ not in applied:
                fn(db)
                db.execute(
                    'INSERT INTO _migrations (name, applied_at) VALUES (?, ?)', (fn.__name__, _timestamp(_now()))
                )
        (version,) = db.execute('PRAGMA user_version').fetchone()
        db.execute(f'PRAGMA user_version = {max(int(version), len(MIGRATIONS))}')
        db.execute('COMMIT')
    except BaseException:
        _rollback(db)
        raise


# --- the ledger -----------------------------------------------------------------------------------------------------


def _rollback(db: sqlite3.Connection) -> None:
    if db.in_transaction:
        with contextlib.suppress(sqlite3.Error):
            db.execute('ROLLBACK')


def _primary_code(exc: BaseException) -> int:
    """SQLite's primary result code for an error raised by SQLite itself, else 0."""
    code = getattr(exc, 'sqlite_errorcode', None)
    return code & 0xFF if isinstance(code, int) else 0


def _is_busy(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.OperationalError) and _primary_code(exc) in {5, 6}  # BUSY, LOCKED


def _close_connection(db: sqlite3.Connection, owner_pid: int) -> None:
    if os.getpid() == owner_pid:
        with contextlib.suppress(sqlite3.Error):
            db.close()


class _Unavailable(Exception):
    """The ledger already failed for good; the call degrades without another warning."""


class _Refused(Exception):
    """The ledger refuses a location or a database it cannot use safely."""


class Ledger:
    """The run ledger: a SQLite file shared by the processes on this machine, and the budget check.

    Cheap to construct: nothing is opened or created until first use. Safe to use from several threads, and after
    `fork()`. Methods never raise for a broken ledger (see the module docstring): they warn once and degrade.
    """

    path: Path

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        """Use the ledger at `path`, or at `default_ledger_path()` (which reads `PERPLEXITY_STATE_DIR` now)."""
        self.path = Path(path).expanduser() if path is not None else default_ledger_path()
        self._lock = threading.RLock()
        self._pid = os.getpid()
        self._db: sqlite3.Connection | None = None
        self._finalizer: weakref.finalize[..., Any] | None = None
        self._problem: str | None = None
        self._warned = False
        self._pending: dict[str, RunRecord] = {}

    def __repr__(self) -> str:
        return f'Ledger({str(self.path)!r}, healthy={self.healthy})'

    def __reduce__(self) -> tuple[type[Ledger], tuple[Path]]:
        return (Ledger, (self.path,))

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    @property
    def healthy(self) -> bool:
        """False once a failure other than lock contention made the ledger degrade (it stays so)."""
        return self._problem is None

    # --- public operations ------------------------------------------------------------------------------------------

    def check(self) -> bool:
        """Open the ledger now, if not yet, and return `healthy`; for diagnostics such as `doctor`."""
        self._call('opening the ledger', lambda db: True, False)
        return self.healthy

    def record_start(self, record: RunRecord) -> None:
        """Record a run that has started; a row with the same `response_id` already there is kept as it is."""
        row = _row(record)
        self._call('recording a run', lambda db: db.execute(_INSERT, row), None, write=True)

    def update(self, response_id: str, /, **fields: Any) -> None:
        """Set fields of a recorded run (status, model, counts, tokens, cost, error…) and its `updated_at`.

        Raises:
            TypeError: a field `RunRecord` does not have, or one that is not updatable, or a value of the wrong type.
        """
        values = _validated_fields(fields)
        self._call('updating a run', lambda db: _update(db, response_id, values), None, write=True)

    def get(self, response_id: str) -> RunRecord | None:
        """The recorded run with this `response_id` (or reservation key), or None."""

        def op(db: sqlite3.Connection) -> RunRecord | None:
            rows = db.execute(f'{_SELECT} WHERE response_id = ?', (response_id,)).fetchall()
            return _record(rows[0]) if rows else None

        return self._call('reading a run', op, None)

    def list(self, *, status: str | None = None, origin: str | None = None, limit: int = 20) -> list[RunRecord]:
        """Recorded runs, newest first, optionally only those with this status or origin."""
        where: list[str] = []
        params: list[Any] = []
        if status is not None:
            where.append('status = ?')
            params.append(status)
        if origin is not None:
            where.append('origin = ?')
            params.append(origin)
        clause = f' WHERE {" AND ".join(where)}' if where else ''
        sql = f'{_SELECT}{clause} ORDER BY created_at DESC, rowid DESC LIMIT ?'
        params.append(max(limit, 0))

        def op(db: sqlite3.Connection) -> list[RunRecord]:
            return [r for r in map(_record, db.execute(sql, params).fetchall()) if r is not None]

        return self._call('listing runs', op, [])

    def spent_usd(self, *, since: datetime | None = None) -> float:
        """Recorded spend in USD: each run's actual cost when known, else its estimate (failed and cancelled too).

        `since` counts only runs created at or after it (a naive datetime is taken as UTC).
        """
        return self._call('reading the spend', lambda db: _spent(db, since), 0.0)

    def reserve(self, record: RunRecord, *, cap_usd: float | None, since: datetime | None = None) -> str:
        """Check the budget and record the run in one transaction; return the key the row is stored under.

        The row is stored under `record.response_id` (by default a provisional key) with status `'reserved'`,
        only if the spend (since `since`, if given) plus `record.estimate_usd` fits `cap_usd`. No cap: always stored.
        Follow with `bind()` once the API gave the run its id, or `release()` if no run was started.

        Raises:
            BudgetExceededError: the run does not fit the cap; nothing was recorded.
            BudgetUnenforceableError: a cap is set and the ledger is not working, so the spend is unknown.
        """
        reserved = record.model_copy(update={'status': RESERVED})
        row = _row(reserved)

        def op(db: sqlite3.Connection) -> bool:
            if cap_usd is not None:
                spent = _spent(db, since)
                if spent + record.estimate_usd > cap_usd + _EPSILON_USD:
                    raise _refusal(record, spent, cap_usd)
            db.execute(_INSERT, row)
            return True

        if not self._call('reserving budget for a run', op, False, write=True) and cap_usd is not None:
            raise BudgetUnenforceableError(
                f'The budget cap of {_usd(cap_usd)} cannot be enforced: the run ledger at {self.path} is not working '
                f'({self._problem or "its write lock stayed busy"}), so the recorded spend is unknown. The run was '
                f'not started. Point {STATE_DIR_ENV} at a writable local directory, or run without a cap '
                f'(`budget_usd=None` and {BUDGET_ENV} unset).',
                spent_usd=math.nan,
                cap_usd=cap_usd,
                estimate_usd=record.estimate_usd,
            )
        with self._lock:
            self._pending[reserved.response_id] = reserved
        return reserved.response_id

    def bind(self, token: str, response_id: str, /, **fields: Any) -> None:
        """Give a reservation its real `response_id` and set `fields` (status defaults to `'queued'`).

        If the row is missing (the reservation could not be written at the time), it is recorded now.

        Raises:
            TypeError: as for `update()`.
        """
        values = _validated_fields(fields)
        values.setdefault('status', 'queued')
        with self._lock:
            pending = self._pending.pop(token, None)

        def op(db: sqlite3.Connection) -> None:
            if token != response_id:
                if db.execute('SELECT 1 FROM runs WHERE response_id = ?', (response_id,)).fetchone():
                    db.execute('DELETE FROM runs WHERE response_id = ?', (token,))  # already recorded: keep that row
                else:
                    renamed = db.execute('UPDATE runs SET response_id = ? WHERE response_id = ?', (response_id, token))
                    if renamed.rowcount == 0 and pending is not None:
                        db.execute(_INSERT, _row(pending.model_copy(update={'response_id': response_id})))
            elif pending is not None:
                db.execute(_INSERT, _row(pending))
            _update(db, response_id, values)

        self._call('binding a reservation to its run', op, None, write=True)

    def release(self, token: str) -> None:
        """Drop a reservation whose create started no run, giving its estimate back to the budget."""
        with self._lock:
            self._pending.pop(token, None)
        self._call(
            'releasing a reservation',
            lambda db: db.execute('DELETE FROM runs WHERE response_id = ? AND status = ?', (token, RESERVED)),
            None,
            write=True,
        )

    def close(self) -> None:
        """Close this process's connection; a later call opens it again."""
        self._check_fork()
        with self._lock:
            self._close()

    # --- machinery --------------------------------------------------------------------------------------------------

    def _check_fork(self) -> None:
        # After fork the child must neither use nor close the parent's connection (closing would drop the parent's
        # POSIX locks on the file); it keeps the object alive and opens its own. The lock may have been held by a
        # thread that does not exist here, so it is replaced too.
        if self._pid != os.getpid():
            self._lock = threading.RLock()
            if self._db is not None:
                _ABANDONED.append(self._db)
                self._db = None
            if self._finalizer is not None:
                self._finalizer.detach()
                self._finalizer = None
            self._pid = os.getpid()

    def _close(self) -> None:
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        if self._db is not None:
            db, self._db = self._db, None
            with contextlib.suppress(sqlite3.Error):
                db.close()

    def _connection(self) -> sqlite3.Connection:
        if self._problem is not None:
            raise _Unavailable
        if self._db is None:
            self._db = self._open()
            self._finalizer = weakref.finalize(self, _close_connection, self._db, self._pid)
        return self._db

    def _open(self) -> sqlite3.Connection:
        directory = self.path.parent
        directory.mkdir(parents=True, exist_ok=True)
        fs_type = _network_filesystem(directory)
        if fs_type is not None:
            raise _Refused(f'{directory} is on a network filesystem ({fs_type}), where SQLite cannot share the file')
        db = sqlite3.connect(self.path, timeout=_BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False)
        try:
            db.execute(f'PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}')
            (mode,) = db.execute('PRAGMA journal_mode = WAL').fetchone()
            if str(mode).lower() != 'wal':
                raise _Refused(f'the file cannot use write-ahead logging (journal mode stayed {mode!r})')
            db.execute('PRAGMA synchronous = FULL')
            db.execute('PRAGMA foreign_keys = ON')
            _migrate(db)
        except BaseException:
            db.close()
            raise
        return db

    def _run(self, op: Callable[[sqlite3.Connection], _T], *, write: bool) -> _T:
        attempt = 0
        while True:
            try:
                db = self._connection()
                if not write:
                    return op(db)
                db.execute('BEGIN IMMEDIATE')
                try:
                    result = op(db)
                    db.execute('COMMIT')
                except BaseException:
                    _rollback(db)
                    raise
                return result
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc) or attempt >= _RETRIES:
                    raise
                attempt += 1
                time.sleep(random.uniform(0.05, 0.25) * attempt)

    def _call(self, action: str, op: Callable[[sqlite3.Connection], _T], default: _T, *, write: bool = False) -> _T:
        self._check_fork()
        with self._lock:
            try:
                return self._run(op, write=write)
            except BudgetExceededError:
                raise
            except _Unavailable:
                return default
            except Exception as exc:
                self._degrade(action, exc)
                return default

    def _degrade(self, action: str, exc: Exception) -> None:
        if _is_busy(exc):
            lost = 'this one call was skipped (an entry it was writing is lost; later calls try again)'
            cause = f'another process held its write lock for more than {(_RETRIES + 1) * _BUSY_TIMEOUT_MS // 1000} s'
            fix = 'Look for a process holding a long transaction on the file (e.g. an open `sqlite3` shell).'
        else:
            self._problem = f'{action} failed: {type(exc).__name__}: {exc}'
            self._close()
            lost = 'from now on nothing is recorded or read here (until the process restarts)'
            cause = str(exc) or type(exc).__name__
            if _primary_code(exc) in {11, 26}:  # CORRUPT, NOTADB
                fix = (
                    f'Move the file aside (a new ledger is then created), or set {STATE_DIR_ENV} to another directory.'
                )
            else:
                fix = f'Make {self.path.parent} a writable local directory, or set {STATE_DIR_ENV} to one.'
        message = (
            f'The run ledger at {self.path} is not working: {action} failed ({cause}). Research goes on, but {lost}, '
            f'so run history (listing runs, collecting them from other processes) and spend tracking for the budget '
            f'are incomplete. '
            f'{fix}'
        )
        if self._warned:
            _log.debug('%s', message)
            return
        self._warned = True
        try:
            warnings.warn(message, LedgerWarning, stacklevel=4)
        except Exception:  # warnings turned into errors: a ledger failure must still never reach the caller
            _log.warning('%s', message)


def _spent(db: sqlite3.Connection, since: datetime | None) -> float:
    sql = 'SELECT TOTAL(COALESCE(cost_usd, estimate_usd)) FROM runs'
    params: tuple[str, ...] = ()
    if since is not None:
        sql += ' WHERE created_at >= ?'
        params = (_timestamp(since),)
    ((total,),) = db.execute(sql, params).fetchall()  # fetchall: the read ends with the call
    return float(total)


def _update(db: sqlite3.Connection, response_id: str, values: dict[str, Any]) -> None:
    values = {**values, 'updated_at': _timestamp(_now())}
    assignments = ', '.join(f'{name} = :{name}' for name in values)  # names checked against _UPDATABLE
    db.execute(f'UPDATE runs SET {assignments} WHERE response_id = :_id', {**values, '_id': response_id})  # noqa: S608
