"""The PostgreSQL engine: one database shared by every instance of a team deployment, over psycopg 3.

**Connections.** psycopg is imported on first use only. Each process keeps a small pool (`_POOL_SIZE`) of
autocommit connections, opened on demand and shared by its threads (the ledger is called from worker threads);
after `fork()` the child opens its own and never touches the parent's sockets. Each session gets
`statement_timeout`, `lock_timeout` and `idle_in_transaction_session_timeout`, so no call blocks for long and a
frozen process cannot hold the budget lock.

**Writes.** Each write is one short transaction, most a single statement (`bind` too, unless another row holds
the run's id). Serialization failures, deadlocks and the rare key clash of two binds racing to the same id are
retried with jitter; a pooled connection found dead (a server restart, a killed session) is replaced and the write
retried on a fresh one. Every write is idempotent, so a retry after a lost commit acknowledgement records nothing
twice.

**Budget.** A capped `reserve` takes `pg_advisory_xact_lock(_BUDGET_LOCK)` as the first statement of its
transaction, then in one statement reads the spend and inserts the row only if the run fits: every capped
reservation on the database queues on that one lock, and under READ COMMITTED a statement after the lock sees every
reservation committed before it, so two instances can never both spend the last of the cap. The commit releases the
lock. The transaction is sent pipelined (one round trip), so the lock is held for the server's work only.
(SERIALIZABLE would give the same guarantee but abort all but one of the racers, each retrying; with many instances
contending that turns into refusals.)

**Migrations** run under `pg_advisory_xact_lock(_MIGRATION_LOCK)`, so instances starting together on an empty
database do not race; they are recorded in `_migrations` like SQLite's.

The URL's password (in the user info, or a `password=` or `sslpassword=` parameter) never appears in a message,
repr or log: every text built from an exception is scrubbed of it.
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final, LiteralString, TypeVar

from .._base.errors import install_hint
from .._base.redact import ConninfoError, is_conninfo, parse_conninfo, password_misread, redact_target_and_secrets
from ._engine import AMOUNT_MICROS_SQL, HELD_MICROS_SQL, MIGRATIONS, Engine, EngineName, Failure, Reserved
from ._records import LEDGER_URL_ENV, RESERVED, RunRecord, in_utc, now, record_from_row, with_micros

if TYPE_CHECKING:
    import psycopg

    from .._domain.budget import Limit

_T = TypeVar('_T')

INSTALL_HINT = install_hint('postgres')
SCHEMES = ('postgresql://', 'postgres://')

_POOL_SIZE = 4  # connections per process at most; ledger calls last milliseconds
_POOL_WAIT_S = 10.0
_CONNECT_TIMEOUT_S = 5
_STATEMENT_TIMEOUT_MS = 15_000
_LOCK_TIMEOUT_MS = 10_000
_IDLE_IN_TRANSACTION_MS = 30_000
_RETRIES = 2  # after the first attempt
_DOWN_FOR_S = 1.0  # after a failed connect, calls fail fast for this long instead of each waiting on the network
#: Advisory lock keys (one bigint space per database). Fixed, so that every instance takes the same lock.
_BUDGET_LOCK: Final = 0x70706C785F627564  # 'pplx_bud'
_MIGRATION_LOCK: Final = 0x70706C785F6D6967  # 'pplx_mig'
_ABANDONED: list[Any] = []  # a forked child's copies of the parent's connections, neutralised but kept

_COLUMN_LIST: Final = (
    'response_id, created_at, updated_at, query, effort, model, status, origin, sources, cited, input_tokens, '
    'output_tokens, cost_usd, estimate_usd, error, trace_id, span_id, caller, api, emulated, request_id, scope, '
    'cost_details, price_source, fingerprint, request_kind, cancel_requested_at, cancel_requested_by'
)
_SELECT: Final = 'SELECT ' + _COLUMN_LIST + ' FROM runs'  # noqa: S608 (constant column names)
_INSERT: Final = (
    'INSERT INTO runs ('  # noqa: S608 (constant column names)
    + _COLUMN_LIST
    + ', cost_micros, estimate_micros) VALUES (%(response_id)s, %(created_at)s, %(updated_at)s, %(query)s, '
    '%(effort)s, %(model)s, %(status)s, %(origin)s, %(sources)s, %(cited)s, %(input_tokens)s, %(output_tokens)s, '
    '%(cost_usd)s, %(estimate_usd)s, %(error)s, %(trace_id)s, %(span_id)s, %(caller)s, %(api)s, %(emulated)s, '
    '%(request_id)s, %(scope)s, %(cost_details)s, %(price_source)s, %(fingerprint)s, %(request_kind)s, '
    '%(cancel_requested_at)s, %(cancel_requested_by)s, %(cost_micros)s, %(estimate_micros)s) '
    'ON CONFLICT (response_id) DO NOTHING'
)
#: A reservation after the budget lock, in one statement (one snapshot, taken after the lock was granted): the spend
#: each limit counts (`s0`, `s1`, ... filled in by `_reserve_query`), whether the key is stored already (an earlier
#: attempt whose commit was acknowledged too late), and the insert, made only if neither that nor any limit forbids
#: it. The values are cast: in `INSERT ... SELECT` they take no type from the columns.
_RESERVE_INSERT: Final = (
    '), present AS (SELECT EXISTS (SELECT 1 FROM runs WHERE response_id = %(response_id)s) AS stored), '  # noqa: S608
    'added AS (INSERT INTO runs ('
    + _COLUMN_LIST
    + ', cost_micros, estimate_micros) SELECT %(response_id)s::text, %(created_at)s::timestamptz, '
    '%(updated_at)s::timestamptz, %(query)s::text, '
    '%(effort)s::text, %(model)s::text, %(status)s::text, %(origin)s::text, %(sources)s::bigint, %(cited)s::bigint, '
    '%(input_tokens)s::bigint, %(output_tokens)s::bigint, %(cost_usd)s::float8, %(estimate_usd)s::float8, '
    '%(error)s::text, %(trace_id)s::text, %(span_id)s::text, %(caller)s::text, %(api)s::text, %(emulated)s::boolean, '
    '%(request_id)s::text, %(scope)s::text, %(cost_details)s::text, %(price_source)s::text, %(fingerprint)s::text, '
    '%(request_kind)s::text, %(cancel_requested_at)s::timestamptz, %(cancel_requested_by)s::text, '
    '%(cost_micros)s::bigint, %(estimate_micros)s::bigint FROM spend, present WHERE NOT present.stored'
)
#: `Engine.answered` in one statement: it changes (and returns) a row only if it holds a call key or a cancel request.
_ANSWERED: Final = (
    "UPDATE runs SET request_id = CASE WHEN request_kind = 'call' THEN NULL ELSE request_id END, "
    "request_kind = CASE WHEN request_kind = 'call' THEN NULL ELSE request_kind END, "
    "error = CASE WHEN cancel_requested_at IS NOT NULL AND status = 'cancelled' THEN %(reason)s ELSE error END, "
    "updated_at = %(at)s WHERE response_id = %(_id)s AND (request_kind = 'call' OR cancel_requested_at IS NOT NULL) "
    'RETURNING cancel_requested_at IS NOT NULL'
)
_CLAIM_CALL: Final = (
    "UPDATE runs SET request_id = %(key)s, request_kind = 'call', updated_at = %(at)s WHERE response_id = %(_id)s "
    'AND caller IS NOT DISTINCT FROM %(caller)s AND status = ANY(%(statuses)s) '
    "AND (request_id IS NULL OR request_kind = 'call')"
)
#: `bind` in one statement when nothing else holds the run's id: rename the reservation and set the fields.
_BIND_HEAD: Final = 'UPDATE runs SET response_id = %(_id)s, '
_BIND_TAIL: Final = (
    ' WHERE response_id = %(_token)s AND NOT EXISTS (SELECT 1 FROM runs AS other WHERE other.response_id = %(_id)s)'
)


# --- the URL --------------------------------------------------------------------------------------------------------


def is_postgres_url(target: str) -> bool:
    """Whether `target` names a PostgreSQL database: a `postgresql://` / `postgres://` URL or a libpq keyword/value
    string (`host=db dbname=runs user=bob`), the two forms libpq accepts."""
    return target.lower().startswith(SCHEMES) or is_conninfo(target)


def target_problem(target: str, source: str) -> str | None:
    """Why libpq would not read the PostgreSQL `target` as written (in words showing no password), or None.

    `source` names where it came from (`PERPLEXITY_LEDGER_URL`, or the ledger argument).
    """
    if is_conninfo(target):
        try:
            parse_conninfo(target)
        except ConninfoError as exc:
            return (
                f'{source} is a PostgreSQL connection string that cannot be read: {exc}. Write keyword=value pairs '
                "apart by spaces (quote a value holding a space: password='a b'), or a postgresql:// URL."
            )
        return None
    if password_misread(target):
        return (
            f'{source} names a PostgreSQL ledger ({redact_url(target)[0]}) whose password holds an unencoded "@" or '
            '"/", which PostgreSQL reads as the end of the password or of the host. Percent-encode it in the URL '
            '("@" as %40, "/" as %2F), or give the password in PGPASSWORD or ~/.pgpass.'
        )
    return None


def redact_url(url: str) -> tuple[str, frozenset[str]]:
    """The URL (or keyword string) with its passwords as `***`, and the secrets to scrub from any text (raw and
    decoded)."""
    return redact_target_and_secrets(url)


def _scrub(text: str, secrets: Iterable[str]) -> str:
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, '***')
    return re.sub(r'\s+', ' ', text).strip()


# --- the driver -----------------------------------------------------------------------------------------------------


class DriverMissingError(ImportError):
    """psycopg is not installed."""


def _driver() -> Any:
    try:
        import psycopg
    except ImportError as exc:
        raise DriverMissingError(
            f'the PostgreSQL driver psycopg is not installed; install it ({INSTALL_HINT})'
        ) from exc
    return psycopg


class _ServerDown(Exception):
    """A connect failed moments ago; calls fail fast until `_DOWN_FOR_S` has passed."""


class _PoolExhausted(Exception):
    """Every connection of this process stayed busy for `_POOL_WAIT_S`."""


def _text(value: Any) -> Any:
    # PostgreSQL text cannot hold NUL; SQLite can. Replace it rather than lose the row.
    return value.replace('\x00', '\ufffd') if isinstance(value, str) else value


def _row(record: RunRecord) -> dict[str, Any]:
    return {name: _text(value) for name, value in with_micros(record.model_dump()).items()}


def _neutralise(conn: psycopg.Connection[Any]) -> None:
    """In a forked child: point the inherited socket at /dev/null, then close, so the parent's session lives on."""
    with contextlib.suppress(Exception):
        fd = conn.pgconn.socket
        devnull = os.open(os.devnull, os.O_RDWR)
        try:
            os.dup2(devnull, fd)
        finally:
            os.close(devnull)
        conn.close()  # its goodbye goes to /dev/null
        return
    _ABANDONED.append(conn)  # could not neutralise: keep it alive, never finalised here


def _close_pool(pool: _Pool, owner_pid: int) -> None:
    if os.getpid() == owner_pid:
        pool.close()


class _Pool:
    """At most `size` connections of this process; `acquire` opens one on demand or waits for one to come back."""

    def __init__(self, connect: Callable[[], psycopg.Connection[Any]], size: int) -> None:
        self._connect = connect
        self._size = size
        self._cond = threading.Condition(threading.Lock())
        self._idle: list[psycopg.Connection[Any]] = []
        self._all: list[psycopg.Connection[Any]] = []  # idle and in use, for close() and fork
        self._opening = 0
        self.connects = 0  # how many connections this pool has opened (for tests and diagnostics)

    def acquire(self) -> tuple[psycopg.Connection[Any], bool]:
        """A connection, and whether it is freshly opened (a pooled one may have died since its last use)."""
        deadline = time.monotonic() + _POOL_WAIT_S
        with self._cond:
            while not self._idle and len(self._all) + self._opening >= self._size:
                if not self._cond.wait(deadline - time.monotonic()):
                    raise _PoolExhausted(f'all {self._size} connections of this process stayed busy')
            if self._idle:
                return self._idle.pop(), False
            self._opening += 1
        try:
            conn = self._connect()
        except BaseException:
            with self._cond:
                self._opening -= 1
                self._cond.notify()
            raise
        with self._cond:
            self._opening -= 1
            self._all.append(conn)
            self.connects += 1
        return conn, True

    def release(self, conn: psycopg.Connection[Any]) -> None:
        from psycopg.pq import TransactionStatus

        reusable = not conn.closed and conn.info.transaction_status == TransactionStatus.IDLE
        with self._cond:
            if conn not in self._all:  # the pool was closed while it was in use
                reusable = False
            elif reusable:
                self._idle.append(conn)
            else:
                self._all.remove(conn)
            self._cond.notify()
        if not reusable:
            with contextlib.suppress(Exception):
                conn.close()

    def discard(self, conn: psycopg.Connection[Any]) -> None:
        """Drop a connection found dead, and the idle ones too: after a server restart they are all dead."""
        with self._cond:
            dropped = [conn, *self._idle]
            self._idle.clear()
            self._all = [c for c in self._all if all(c is not d for d in dropped)]
            self._cond.notify_all()
        for each in dropped:
            with contextlib.suppress(Exception):
                each.close()

    def close(self) -> None:
        """Close the idle connections now; those in use are closed when they come back."""
        with self._cond:
            idle, self._idle, self._all = self._idle, [], []
            self._cond.notify_all()
        for conn in idle:
            with contextlib.suppress(Exception):
                conn.close()

    def after_fork(self) -> None:
        inherited, self._all, self._idle = self._all, [], []
        self._cond = threading.Condition(threading.Lock())
        self._opening = 0
        for conn in inherited:
            _neutralise(conn)


# --- migrations -----------------------------------------------------------------------------------------------------


class _MigrationDB:
    engine: EngineName = 'postgres'

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._conn = conn

    def execute(self, sql: str, /) -> None:
        from psycopg import sql as pgsql

        self._conn.execute(pgsql.SQL(sql))  # pyright: ignore[reportArgumentType] (a migration's own constant SQL)


def _migrate(conn: psycopg.Connection[Any]) -> None:
    names = [fn.__name__ for fn in MIGRATIONS]
    if conn.execute("SELECT to_regclass('_migrations') IS NOT NULL").fetchone() == (True,):
        rows = conn.execute('SELECT name FROM _migrations WHERE name = ANY(%s)', (names,)).fetchall()
        if len(rows) == len(names):  # the usual case: nothing to do, no lock taken
            return
    with conn.transaction():
        conn.execute('SELECT pg_advisory_xact_lock(%s)', (_MIGRATION_LOCK,))
        conn.execute('CREATE TABLE IF NOT EXISTS _migrations (name text PRIMARY KEY, applied_at timestamptz NOT NULL)')
        applied = {str(name) for (name,) in conn.execute('SELECT name FROM _migrations').fetchall()}
        for fn in MIGRATIONS:
            if fn.__name__ not in applied:
                fn(_MigrationDB(conn))
                conn.execute('INSERT INTO _migrations (name, applied_at) VALUES (%s, %s)', (fn.__name__, now()))


# --- the engine -----------------------------------------------------------------------------------------------------


class PostgresEngine(Engine):
    """The ledger in a PostgreSQL database: a small pool of connections per process, shared by its threads."""

    name: EngineName = 'postgres'

    def __init__(self, url: str) -> None:
        self._url = url
        self.redacted, self._secrets = redact_url(url)
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._pool: _Pool | None = None
        self._migrated = False
        self._down_until = 0.0
        self._down_reason = ''
        self._finalizer: weakref.finalize[..., Any] | None = None

    def describe(self) -> str:
        return self.redacted

    def reduce_arg(self) -> str:
        return self._url

    def scrub(self, text: str) -> str:
        return _scrub(text, self._secrets)

    # --- operations -------------------------------------------------------------------------------------------------

    def open(self) -> None:
        self._run(lambda conn: None)

    def insert(self, record: RunRecord) -> None:
        row = _row(record)
        self._run(lambda conn: conn.execute(_INSERT, row))

    def update(self, response_id: str, values: dict[str, Any], at: datetime) -> None:
        self._run(lambda conn: _update(conn, response_id, values, at))

    def get(self, response_id: str) -> RunRecord | None:
        def op(conn: psycopg.Connection[Any]) -> RunRecord | None:
            row = conn.execute(_SELECT + ' WHERE response_id = %s', (response_id,)).fetchone()
            return record_from_row(row) if row is not None else None

        return self._run(op)

    def list(
        self,
        *,
        status: str | tuple[str, ...] | None,
        origin: str | None,
        caller: str | None,
        request_id: str | None,
        limit: int,
        fingerprint: str | None = None,
    ) -> list[RunRecord]:
        where: list[LiteralString] = []
        params: list[Any] = []
        if isinstance(status, tuple):
            where.append('status = ANY(%s)')
            params.append(list(status))
        elif status is not None:
            where.append('status = %s')
            params.append(status)
        if origin is not None:
            where.append('origin = %s')
            params.append(origin)
        if caller is not None:
            where.append('caller = %s')
            params.append(caller)
        if request_id is not None:
            where.append('request_id = %s')
            params.append(_text(request_id))
        if fingerprint is not None:
            where.append('fingerprint = %s')
            params.append(fingerprint)
        clause: LiteralString = ' WHERE ' + ' AND '.join(where) if where else ''
        sql = _SELECT + clause + ' ORDER BY created_at DESC, seq DESC LIMIT %s'
        params.append(max(limit, 0))

        def op(conn: psycopg.Connection[Any]) -> list[RunRecord]:
            return [r for r in map(record_from_row, conn.execute(sql, params).fetchall()) if r is not None]

        return self._run(op)

    def spent(
        self,
        *,
        since: datetime | None,
        caller: str | None,
        emulated: bool | None,
        api: str | None,
        scope: str | None = None,
    ) -> int:
        return self._run(lambda conn: _sums(conn, since, caller, emulated, api, scope)[0])

    def totals(
        self, *, since: datetime | None, caller: str | None, scope: str | None, emulated: bool | None
    ) -> tuple[int, int]:
        amount, held = self._run(lambda conn: _sums(conn, since, caller, emulated, None, scope))
        return amount - held, held

    def callers(self) -> list[str]:
        rows = 'SELECT DISTINCT caller FROM runs WHERE caller IS NOT NULL ORDER BY caller'
        return self._run(lambda conn: [str(c) for (c,) in conn.execute(rows).fetchall()])

    def reserve(self, record: RunRecord, *, limits: Sequence[Limit]) -> Reserved:
        row = _row(record)
        if not limits:  # nothing to check: no lock
            self._run(lambda conn: conn.execute(_INSERT, row))
            return Reserved(stored=True, spent=())
        query = _reserve_query(limits)
        params = dict(row)
        for n, limit in enumerate(limits):
            params |= {f'_cap{n}': limit.cap_micros, f'_since{n}': limit.since, f'_caller{n}': limit.caller}
            params[f'_scope{n}'] = limit.scope

        def op(conn: psycopg.Connection[Any]) -> Reserved:
            # One round trip (pipelined): the lock is held only for the server's own work, not for network waits.
            with _pipeline(conn), conn.transaction():
                # Its own statement: under READ COMMITTED the next one then sees every reservation before it.
                conn.execute('SELECT pg_advisory_xact_lock(%s)', (_BUDGET_LOCK,))
                cursor = conn.execute(query, params)
            found = cursor.fetchone()
            assert found is not None
            spent = tuple(int(value) for value in found[: len(limits)])
            stored, added = bool(found[len(limits)]), bool(found[len(limits) + 1])
            return Reserved(stored=stored or added, spent=spent)

        return self._run(op)

    def bind(
        self, token: str, response_id: str, pending: RunRecord | None, values: dict[str, Any], at: datetime
    ) -> None:
        values = with_micros(values)

        def op(conn: psycopg.Connection[Any]) -> None:
            if token != response_id:  # the usual case first, in one statement
                renamed = conn.execute(
                    _bind_query(values), {**_bind_params(values, at), '_id': response_id, '_token': token}
                )
                if renamed.rowcount:
                    return
            with conn.transaction():
                if token != response_id:
                    if conn.execute('SELECT 1 FROM runs WHERE response_id = %s', (response_id,)).fetchone():
                        conn.execute('DELETE FROM runs WHERE response_id = %s', (token,))  # keep the recorded row
                    elif pending is not None:  # the reservation was never written
                        conn.execute(_INSERT, _row(pending.model_copy(update={'response_id': response_id})))
                elif pending is not None:
                    conn.execute(_INSERT, _row(pending))
                _update(conn, response_id, values, at)

        self._run(op)

    def claim_call(
        self, response_id: str, caller: str | None, key: str, statuses: tuple[str, ...], at: datetime
    ) -> bool:
        params = {'key': _text(key), 'at': at, '_id': response_id, 'caller': _text(caller), 'statuses': list(statuses)}
        return self._run(lambda conn: conn.execute(_CLAIM_CALL, params).rowcount == 1)

    def answered(self, response_id: str, reason: str, at: datetime) -> bool:
        params = {'_id': response_id, 'reason': _text(reason), 'at': at}

        def op(conn: psycopg.Connection[Any]) -> bool:
            row = conn.execute(_ANSWERED, params).fetchone()
            return bool(row is not None and row[0])

        return self._run(op)

    def release(self, token: str) -> None:
        delete = 'DELETE FROM runs WHERE response_id = %s AND status = %s'
        self._run(lambda conn: conn.execute(delete, (token, RESERVED)))

    def learn_price(self, model: str, input_per_million: float, output_per_million: float, at: datetime) -> None:
        self._run(
            lambda conn: conn.execute(
                'INSERT INTO learned_prices (model, input_per_million, output_per_million, updated_at) '
                'VALUES (%s, %s, %s, %s) ON CONFLICT (model) DO UPDATE SET '
                'input_per_million = greatest(learned_prices.input_per_million, excluded.input_per_million), '
                'output_per_million = greatest(learned_prices.output_per_million, excluded.output_per_million), '
                'updated_at = excluded.updated_at',
                (_text(model), input_per_million, output_per_million, in_utc(at)),
            )
        )

    def learned_prices(self) -> dict[str, tuple[float, float]]:
        def op(conn: psycopg.Connection[Any]) -> dict[str, tuple[float, float]]:
            rows = conn.execute('SELECT model, input_per_million, output_per_million FROM learned_prices').fetchall()
            return {str(m): (float(i), float(o)) for m, i, o in rows}

        return self._run(op)

    # --- machinery --------------------------------------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
            if self._finalizer is not None:
                self._finalizer.detach()
                self._finalizer = None
        if pool is not None:
            pool.close()

    def after_fork(self) -> None:
        self._lock = threading.Lock()
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        if self._pool is not None:
            self._pool.after_fork()
            self._pool = None
        self._pid = os.getpid()

    @property
    def connects(self) -> int:
        """How many connections this process has opened through the current pool."""
        return self._pool.connects if self._pool is not None else 0

    def _connect(self) -> psycopg.Connection[Any]:
        driver = _driver()
        conn: psycopg.Connection[Any] = driver.Connection.connect(self._url, **self._connect_options(driver))
        try:
            conn.execute(
                "SELECT set_config('statement_timeout', %s, false), set_config('lock_timeout', %s, false), "
                "set_config('idle_in_transaction_session_timeout', %s, false)",
                (f'{_STATEMENT_TIMEOUT_MS}ms', f'{_LOCK_TIMEOUT_MS}ms', f'{_IDLE_IN_TRANSACTION_MS}ms'),
            )
            if not self._migrated:
                _migrate(conn)
                self._migrated = True
        except BaseException:
            conn.close()
            raise
        return conn

    def _connect_options(self, driver: Any) -> dict[str, Any]:
        given = driver.conninfo.conninfo_to_dict(self._url)
        options: dict[str, Any] = {'autocommit': True}
        if 'connect_timeout' not in given:
            options['connect_timeout'] = _CONNECT_TIMEOUT_S
        if 'application_name' not in given:
            options['application_name'] = 'pydantic-ai-perplexity'
        return options

    def _acquire(self) -> tuple[psycopg.Connection[Any], bool, _Pool]:
        with self._lock:
            if self._pool is None:
                self._pool = _Pool(self._connect, _POOL_SIZE)
                # Closes idle connections only (one in use is closed when it comes back); never at exit, where the
                # ledger closes after its queued writes have landed (see `_recorder`).
                self._finalizer = weakref.finalize(self, _close_pool, self._pool, self._pid)
                self._finalizer.atexit = False
            pool = self._pool
        if time.monotonic() < self._down_until:
            raise _ServerDown(self._down_reason)
        try:
            conn, fresh = pool.acquire()
        except Exception as exc:
            driver = _driver()
            if isinstance(exc, driver.OperationalError):
                self._down_reason = f'{type(exc).__name__}: {self.scrub(str(exc))}'
                self._down_until = time.monotonic() + _DOWN_FOR_S
            raise
        return conn, fresh, pool

    def _run(self, op: Callable[[psycopg.Connection[Any]], _T]) -> _T:
        attempt = 0
        while True:
            conn, fresh, pool = self._acquire()
            driver = _driver()
            errors = driver.errors
            try:
                result = op(conn)
            except (errors.SerializationFailure, errors.DeadlockDetected, errors.UniqueViolation):
                pool.release(conn)
                if attempt >= _RETRIES:
                    raise
                attempt += 1
                time.sleep(random.uniform(0.01, 0.05) * attempt)
                continue
            except driver.OperationalError:
                if not (conn.closed or conn.broken):  # e.g. a lock or statement timeout: the session is fine
                    pool.release(conn)
                    raise
                pool.discard(conn)
                if fresh or attempt >= _RETRIES:
                    raise
                attempt += 1  # a pooled connection died while idle: try again on a fresh one
                continue
            except BaseException:
                pool.release(conn)
                raise
            pool.release(conn)
            return result

    def failure(self, action: str, exc: Exception) -> Failure:
        detail = f'{type(exc).__name__}: {self.scrub(str(exc))}'
        if isinstance(exc, UnicodeError | OverflowError) or _is_bad_value(exc):
            return Failure(
                lasting=False,
                cause=f'a value the server would not store: {detail}',
                fix='This entry cannot be stored as it is; other entries are not affected.',
                summary=f'{action} failed: {detail}',
                retry=False,
            )
        if isinstance(exc, DriverMissingError):
            return Failure(
                lasting=True,
                cause=str(exc),
                fix=f'Install the driver ({INSTALL_HINT}), or unset {LEDGER_URL_ENV} to use the SQLite ledger.',
                summary=f'{action} failed: {detail}',
            )
        if isinstance(exc, _ServerDown | _PoolExhausted) or _is_transient(exc):
            return Failure(
                lasting=False,
                cause=self.scrub(str(exc)) or type(exc).__name__,
                fix=(
                    f'Check that the PostgreSQL server at {self.redacted} is running and reachable, and that the '
                    f'user, password (in the URL, PGPASSWORD or ~/.pgpass) and database in {LEDGER_URL_ENV} (or the '
                    f'ledger argument) are right.'
                ),
                summary=f'{action} failed: {detail}',
            )
        return Failure(
            lasting=True,
            cause=self.scrub(str(exc)) or type(exc).__name__,
            fix=(
                f'Check that the user of {self.redacted} may create tables in that database and read and write '
                f'them, then restart the process.'
            ),
            summary=f'{action} failed: {detail}',
        )

    def unenforceable_fix(self) -> str:
        return f'Make the PostgreSQL server at {self.redacted} reachable (or fix {LEDGER_URL_ENV})'


def _is_transient(exc: BaseException) -> bool:
    """An error of the server, the network or contention: the call may work later."""
    try:
        import psycopg
    except ImportError:
        return False
    return isinstance(exc, psycopg.OperationalError)


def _is_bad_value(exc: BaseException) -> bool:
    """A value the server will never store (out of range, invalid text...): trying again cannot help."""
    try:
        import psycopg
    except ImportError:
        return False
    return isinstance(exc, psycopg.DataError | psycopg.errors.IntegrityError)


def _conditions(
    since: datetime | None, caller: str | None, emulated: bool | None, api: str | None, scope: str | None
) -> tuple[LiteralString, list[Any]]:
    """A WHERE clause (possibly empty) selecting the rows of the arguments not None, and its parameters."""
    where: list[LiteralString] = []
    params: list[Any] = []
    if emulated is not None:
        where.append('emulated = %s')
        params.append(emulated)
    if api is not None:
        where.append('api = %s')
        params.append(_text(api))
    if since is not None:
        where.append('created_at >= %s')
        params.append(in_utc(since))
    if caller is not None:
        where.append('caller = %s')
        params.append(_text(caller))
    if scope is not None:
        where.append('scope = %s')
        params.append(_text(scope))
    clause: LiteralString = ' WHERE ' + ' AND '.join(where) if where else ''
    return clause, params


def _sums(
    conn: psycopg.Connection[Any],
    since: datetime | None,
    caller: str | None,
    emulated: bool | None,
    api: str | None,
    scope: str | None,
) -> tuple[int, int]:
    """Micro-dollars over the rows selected: the amount (actual cost, else estimate), and what is held (estimates)."""
    clause, params = _conditions(since, caller, emulated, api, scope)
    query: LiteralString = (
        'SELECT COALESCE(SUM(' + AMOUNT_MICROS_SQL + '), 0)::bigint, '  # noqa: S608 (constant SQL)
        'COALESCE(SUM(' + HELD_MICROS_SQL + '), 0)::bigint FROM runs' + clause
    )
    row = conn.execute(query, params).fetchone()
    return (int(row[0]), int(row[1])) if row is not None else (0, 0)


def _reserve_query(limits: Sequence[Limit]) -> Any:
    """The reservation's statement for these limits: the spend of each (`FILTER`ed sums), then the insert."""
    from psycopg import sql

    sums: list[Any] = []
    checks: list[Any] = []
    for n, limit in enumerate(limits):
        conditions: list[sql.Composable] = [sql.SQL('TRUE')]
        if limit.since is not None:
            conditions.append(sql.SQL('created_at >= {}::timestamptz').format(sql.Placeholder(f'_since{n}')))
        if limit.caller is not None:
            conditions.append(sql.SQL('caller = {}::text').format(sql.Placeholder(f'_caller{n}')))
        if limit.scope is not None:
            conditions.append(sql.SQL('scope = {}::text').format(sql.Placeholder(f'_scope{n}')))
        column = sql.Identifier(f's{n}')
        sums.append(
            sql.SQL('COALESCE(SUM(' + AMOUNT_MICROS_SQL + ') FILTER (WHERE {}), 0)::bigint AS {}').format(
                sql.SQL(' AND ').join(conditions), column
            )
        )
        checks.append(
            sql.SQL('spend.{} + %(estimate_micros)s::bigint <= {}::bigint').format(column, sql.Placeholder(f'_cap{n}'))
        )
    # A real run is checked against real spend only; an emulated one against everything (conservative).
    head = sql.SQL('WITH spend AS (SELECT {} FROM runs WHERE (%(emulated)s::boolean OR NOT emulated)').format(
        sql.SQL(', ').join(sums)
    )
    columns = sql.SQL(', ').join(sql.SQL('spend.{}').format(sql.Identifier(f's{n}')) for n in range(len(limits)))
    tail = sql.SQL(
        ' AND {} ON CONFLICT (response_id) DO NOTHING RETURNING 1) '
        'SELECT {}, present.stored, EXISTS (SELECT 1 FROM added) FROM spend, present'
    ).format(sql.SQL(' AND ').join(checks), columns)
    return head + sql.SQL(_RESERVE_INSERT) + tail


def _bind_params(values: dict[str, Any], at: datetime) -> dict[str, Any]:
    return {name: _text(value) for name, value in values.items()} | {'updated_at': at}


def _assignments(values: dict[str, Any]) -> Any:
    """`name = %(name)s, ...` for the fields to set and `updated_at`; names are checked against UPDATABLE."""
    from psycopg import sql

    names = [*values, 'updated_at'] if 'updated_at' not in values else list(values)
    return sql.SQL(', ').join(sql.SQL('{} = {}').format(sql.Identifier(name), sql.Placeholder(name)) for name in names)


def _bind_query(values: dict[str, Any]) -> Any:
    from psycopg import sql

    return sql.SQL(_BIND_HEAD) + _assignments(values) + sql.SQL(_BIND_TAIL)


def _update(conn: psycopg.Connection[Any], response_id: str, values: dict[str, Any], at: datetime) -> None:
    from psycopg import sql

    values = with_micros(values)
    query = sql.SQL('UPDATE runs SET {} WHERE response_id = {}').format(_assignments(values), sql.Placeholder('_id'))
    conn.execute(query, {**_bind_params(values, at), '_id': response_id})


def _pipeline(conn: psycopg.Connection[Any]) -> contextlib.AbstractContextManager[Any]:
    """Send the statements of a block together and read their results once, where libpq can (14 and later)."""
    from psycopg import Pipeline

    return conn.pipeline() if Pipeline.is_supported() else contextlib.nullcontext()
