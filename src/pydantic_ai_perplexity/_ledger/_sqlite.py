"""The SQLite engine: one file on a local disk, shared by the processes of one machine (the default).

**Location.** `$PERPLEXITY_STATE_DIR/ledger.sqlite3`, else `platformdirs.user_state_dir('pydantic-ai-perplexity')`
(e.g. `~/.local/state/pydantic-ai-perplexity/ledger.sqlite3` on Linux). It must be on a local disk: SQLite's WAL
needs shared memory between the processes, which network filesystems do not give. On Linux a path on NFS, SMB/CIFS,
AFS, sshfs, Ceph, GlusterFS or Lustre is refused (read from `/proc/self/mounts`); elsewhere this is not checked.

**Concurrency.** Each process opens its own connection lazily, on first use, and reopens after `fork()` (a
connection is never carried across a fork: that can corrupt the file). Threads share it under a lock. Every
connection sets `journal_mode=WAL`, `synchronous=FULL` (a commit survives power loss), `busy_timeout=5000` and
`foreign_keys=ON`; every write is one short `BEGIN IMMEDIATE ... COMMIT`, retried a bounded number of times with
jitter when another process holds the write lock longer than the busy timeout. The budget check and the insert of
a reservation share one such transaction: the write lock is held from reading the spend to writing the row. The
schema is created and upgraded by the registered migrations, recorded in `_migrations` and `PRAGMA user_version`.
"""

from __future__ import annotations

import contextlib
import errno
import os
import random
import re
import sqlite3
import stat
import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import platformdirs

from .._domain.settings import variable
from ._engine import AMOUNT_MICROS_SQL, HELD_MICROS_SQL, MIGRATIONS, Engine, EngineName, Failure, Reserved
from ._records import (
    COLUMNS,
    MONEY_COLUMNS,
    RESERVED,
    STATE_DIR_ENV,
    RunRecord,
    in_utc,
    now,
    record_from_row,
    with_micros,
)

if TYPE_CHECKING:
    from .._domain.budget import Limit

_T = TypeVar('_T')

LEDGER_FILENAME = 'ledger.sqlite3'
_BUSY_TIMEOUT_MS = 5000
_RETRIES = 2  # after the first attempt: at most 3 x busy_timeout blocked on a lock held by another process
_NETWORK_FILESYSTEMS = frozenset(
    {'nfs', 'nfs4', 'cifs', 'smb3', 'smbfs', 'afs', 'ncpfs', 'ceph', 'glusterfs', 'lustre', 'fuse.sshfs'}
    | {'fuse.glusterfs', 'fuse.ceph', 'fuse.rclone'}
)
_ABANDONED: list[sqlite3.Connection] = []  # inherited across fork: never closed in the child (see after_fork)
#: SQLite's primary result codes of a store that may work again: INTERRUPT, BUSY, LOCKED, IOERR, FULL, CANTOPEN,
#: PROTOCOL. A write that meets one is kept and tried again.
_TRANSIENT_CODES = frozenset({4, 5, 6, 10, 13, 14, 15})
#: ... and of a value the store will never take: TOOBIG, CONSTRAINT, MISMATCH, RANGE.
_VALUE_CODES = frozenset({18, 19, 20, 25})
#: OS errors of a full or failing disk (creating the directory or the file), which may be fixed while we run.
_TRANSIENT_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EAGAIN, errno.EINTR})
#: Modes of what the ledger creates: its questions are private to the user.
DIRECTORY_MODE = 0o700
FILE_MODE = 0o600

_SELECT = f'SELECT {", ".join(COLUMNS)} FROM runs'  # noqa: S608 (constant column names)
_STORED = (*COLUMNS, *MONEY_COLUMNS)
_INSERT = (
    f'INSERT INTO runs ({", ".join(_STORED)}) VALUES ({", ".join(":" + c for c in _STORED)}) '  # noqa: S608
    'ON CONFLICT(response_id) DO NOTHING'
)

#: `Engine.answered` in one statement: it changes (and returns) a row only if it holds a call key or a cancel request.
_ANSWERED = (
    "UPDATE runs SET request_id = CASE WHEN request_kind = 'call' THEN NULL ELSE request_id END, "
    "request_kind = CASE WHEN request_kind = 'call' THEN NULL ELSE request_kind END, "
    "error = CASE WHEN cancel_requested_at IS NOT NULL AND status = 'cancelled' THEN :reason ELSE error END, "
    "updated_at = :at WHERE response_id = :_id AND (request_kind = 'call' OR cancel_requested_at IS NOT NULL) "
    'RETURNING cancel_requested_at IS NOT NULL AS requested'
)


def _timestamp(value: datetime) -> str:
    """Fixed-width ISO 8601 in UTC, so that text order is time order in SQL."""
    return in_utc(value).isoformat(timespec='microseconds')


def _row(record: RunRecord) -> dict[str, Any]:
    data = with_micros(record.model_dump())
    return {name: _timestamp(value) if isinstance(value, datetime) else value for name, value in data.items()}


# --- location -------------------------------------------------------------------------------------------------------


def default_ledger_path() -> Path:
    """`$PERPLEXITY_STATE_DIR/ledger.sqlite3`, else the ledger file in the user state directory."""
    state_dir = variable(STATE_DIR_ENV)
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


def private_mode_problem(path: Path) -> str | None:
    """What makes the ledger at `path` readable by other users (its directory or files), or None."""
    problems: list[str] = []
    for each in (path.parent, path, path.with_name(path.name + '-wal'), path.with_name(path.name + '-shm')):
        try:
            mode = stat.S_IMODE(each.stat().st_mode)
        except OSError:
            continue
        if mode & 0o077:
            problems.append(f'{each} is {mode:04o}')
    return '; '.join(problems) or None


def _network_filesystem(directory: Path) -> str | None:
    try:
        mounts = Path('/proc/self/mounts').read_text(encoding='utf-8')
    except OSError:  # not Linux: not checked
        return None
    fs_type = _filesystem_type(str(directory.resolve()), mounts)
    return fs_type if fs_type in _NETWORK_FILESYSTEMS else None


# --- migrations -----------------------------------------------------------------------------------------------------


class _MigrationDB:
    engine: EngineName = 'sqlite'

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def execute(self, sql: str, /) -> None:
        self._db.execute(sql)  # never executescript: it would commit


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
                fn(_MigrationDB(db))
                db.execute('INSERT INTO _migrations (name, applied_at) VALUES (?, ?)', (fn.__name__, _timestamp(now())))
        (version,) = db.execute('PRAGMA user_version').fetchone()
        db.execute(f'PRAGMA user_version = {max(int(version), len(MIGRATIONS))}')
        db.execute('COMMIT')
    except BaseException:
        _rollback(db)
        raise


# --- the engine -----------------------------------------------------------------------------------------------------


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


class _Refused(Exception):
    """The ledger refuses a location or a database it cannot use safely."""


class SQLiteEngine(Engine):
    """The ledger in a SQLite file: one connection per process, shared by its threads under a lock."""

    name: EngineName = 'sqlite'

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.RLock()
        self._pid = os.getpid()
        self._db: sqlite3.Connection | None = None

    def describe(self) -> str:
        return str(self.path)

    def reduce_arg(self) -> Path:
        return self.path

    # --- operations -------------------------------------------------------------------------------------------------

    def open(self) -> None:
        self._run(lambda db: None, write=False)

    def insert(self, record: RunRecord) -> None:
        row = _row(record)
        self._run(lambda db: db.execute(_INSERT, row), write=True)

    def update(self, response_id: str, values: dict[str, Any], at: datetime) -> None:
        self._run(lambda db: _update(db, response_id, values, at), write=True)

    def get(self, response_id: str) -> RunRecord | None:
        def op(db: sqlite3.Connection) -> RunRecord | None:
            rows = db.execute(f'{_SELECT} WHERE response_id = ?', (response_id,)).fetchall()
            return record_from_row(rows[0]) if rows else None

        return self._run(op, write=False)

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
        where: list[str] = []
        params: list[Any] = []
        if isinstance(status, tuple):
            where.append(f'status IN ({", ".join("?" for _ in status) or "NULL"})')
            params.extend(status)
            status = None
        filters = (
            ('status', status),
            ('origin', origin),
            ('caller', caller),
            ('request_id', request_id),
            ('fingerprint', fingerprint),
        )
        for column, value in filters:
            if value is not None:
                where.append(f'{column} = ?')
                params.append(value)
        clause = f' WHERE {" AND ".join(where)}' if where else ''
        sql = f'{_SELECT}{clause} ORDER BY created_at DESC, rowid DESC LIMIT ?'
        params.append(max(limit, 0))

        def op(db: sqlite3.Connection) -> list[RunRecord]:
            return [r for r in map(record_from_row, db.execute(sql, params).fetchall()) if r is not None]

        return self._run(op, write=False)

    def spent(
        self,
        *,
        since: datetime | None,
        caller: str | None,
        emulated: bool | None,
        api: str | None,
        scope: str | None = None,
    ) -> int:
        return self._run(lambda db: _sums(db, AMOUNT_MICROS_SQL, since, caller, emulated, api, scope), write=False)

    def totals(
        self, *, since: datetime | None, caller: str | None, scope: str | None, emulated: bool | None
    ) -> tuple[int, int]:
        def op(db: sqlite3.Connection) -> tuple[int, int]:
            amount = _sums(db, AMOUNT_MICROS_SQL, since, caller, emulated, None, scope)
            held = _sums(db, HELD_MICROS_SQL, since, caller, emulated, None, scope)
            return amount - held, held

        return self._run(op, write=False)

    def callers(self) -> list[str]:
        rows = 'SELECT DISTINCT caller FROM runs WHERE caller IS NOT NULL ORDER BY caller'
        return self._run(lambda db: [str(c) for (c,) in db.execute(rows).fetchall()], write=False)

    def reserve(self, record: RunRecord, *, limits: Sequence[Limit]) -> Reserved:
        row = _row(record)
        estimate = int(row['estimate_micros'])
        # A real run is checked against real spend only; an emulated one against everything (conservative).
        emulated = None if record.emulated else False

        def op(db: sqlite3.Connection) -> Reserved:
            # Inside BEGIN IMMEDIATE: the write lock is held from the first read to the insert.
            spent = tuple(
                _sums(db, AMOUNT_MICROS_SQL, limit.since, limit.caller, emulated, None, limit.scope) for limit in limits
            )
            if any(s + estimate > limit.cap_micros for s, limit in zip(spent, limits, strict=True)):
                return Reserved(stored=False, spent=spent)
            db.execute(_INSERT, row)
            return Reserved(stored=True, spent=spent)

        return self._run(op, write=True)

    def bind(
        self, token: str, response_id: str, pending: RunRecord | None, values: dict[str, Any], at: datetime
    ) -> None:
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
            _update(db, response_id, values, at)

        self._run(op, write=True)

    def claim_call(
        self, response_id: str, caller: str | None, key: str, statuses: tuple[str, ...], at: datetime
    ) -> bool:
        marks = ', '.join('?' for _ in statuses) or 'NULL'
        sql = (
            "UPDATE runs SET request_id = ?, request_kind = 'call', updated_at = ? WHERE response_id = ? "  # noqa: S608
            f"AND caller IS ? AND status IN ({marks}) AND (request_id IS NULL OR request_kind = 'call')"
        )
        params = (key, _timestamp(at), response_id, caller, *statuses)
        return self._run(lambda db: db.execute(sql, params).rowcount == 1, write=True)

    def answered(self, response_id: str, reason: str, at: datetime) -> bool:
        params = {'_id': response_id, 'reason': reason, 'at': _timestamp(at)}

        def op(db: sqlite3.Connection) -> bool:
            rows = db.execute(_ANSWERED, params).fetchall()
            return bool(rows and rows[0][0])

        return self._run(op, write=True)

    def release(self, token: str) -> None:
        self._run(
            lambda db: db.execute('DELETE FROM runs WHERE response_id = ? AND status = ?', (token, RESERVED)),
            write=True,
        )

    def learn_price(self, model: str, input_per_million: float, output_per_million: float, at: datetime) -> None:
        self._run(
            lambda db: db.execute(
                'INSERT INTO learned_prices (model, input_per_million, output_per_million, updated_at) '
                'VALUES (?, ?, ?, ?) ON CONFLICT(model) DO UPDATE SET '
                'input_per_million = max(input_per_million, excluded.input_per_million), '
                'output_per_million = max(output_per_million, excluded.output_per_million), '
                'updated_at = excluded.updated_at',
                (model, input_per_million, output_per_million, _timestamp(at)),
            ),
            write=True,
        )

    def learned_prices(self) -> dict[str, tuple[float, float]]:
        def op(db: sqlite3.Connection) -> dict[str, tuple[float, float]]:
            rows = db.execute('SELECT model, input_per_million, output_per_million FROM learned_prices').fetchall()
            return {str(m): (float(i), float(o)) for m, i, o in rows}

        return self._run(op, write=False)

    # --- machinery --------------------------------------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                db, self._db = self._db, None
                with contextlib.suppress(sqlite3.Error):
                    db.close()

    def after_fork(self) -> None:
        # The child must neither use nor close the parent's connection (closing would drop the parent's POSIX locks
        # on the file); it keeps the object alive and opens its own. The lock may have been held by a thread that
        # does not exist here, so it is replaced too.
        self._lock = threading.RLock()
        if self._db is not None:
            _ABANDONED.append(self._db)
            self._db = None
        self._pid = os.getpid()

    def _connection(self) -> sqlite3.Connection:
        # No finalizer closes it: a connection another thread may be using must never be closed under it. When the
        # engine is dropped, the connection closes itself once no thread holds it; at exit the ledger closes it after
        # the queued writes have landed (see `_recorder`).
        if self._db is None:
            self._db = self._open()
        return self._db

    def _open(self) -> sqlite3.Connection:
        directory = self.path.parent
        directory.mkdir(parents=True, exist_ok=True, mode=DIRECTORY_MODE)  # private, when the ledger creates it
        fs_type = _network_filesystem(directory)
        if fs_type is not None:
            raise _Refused(f'{directory} is on a network filesystem ({fs_type}), where SQLite cannot share the file')
        # Created here, private, before SQLite opens it: its -wal and -shm files then take the same mode.
        os.close(os.open(self.path, os.O_CREAT | os.O_RDWR | getattr(os, 'O_CLOEXEC', 0), FILE_MODE))
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
        with self._lock:
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

    def failure(self, action: str, exc: Exception) -> Failure:
        code = _primary_code(exc)
        if isinstance(exc, UnicodeError | OverflowError | sqlite3.InterfaceError) or code in _VALUE_CODES:
            return Failure(
                lasting=False,
                cause=f'a value it cannot store: {type(exc).__name__}: {exc}',
                fix='This entry cannot be stored as it is; other entries are not affected.',
                summary=f'{action} failed: {type(exc).__name__}: {exc}',
                retry=False,
            )
        if _is_busy(exc):
            return Failure(
                lasting=False,
                cause=(
                    f'another process held its write lock for more than {(_RETRIES + 1) * _BUSY_TIMEOUT_MS // 1000} s'
                ),
                fix='Look for a process holding a long transaction on the file (e.g. an open `sqlite3` shell).',
                summary='its write lock stayed busy',
            )
        transient_os = isinstance(exc, OSError) and exc.errno in _TRANSIENT_ERRNOS
        if transient_os or (isinstance(exc, sqlite3.OperationalError) and code in _TRANSIENT_CODES):
            return Failure(
                lasting=False,
                cause=str(exc) or type(exc).__name__,
                fix=(
                    f'Free space on the disk holding {self.path.parent} (or fix the disk); the ledger stores what it '
                    f'kept as soon as it can write again.'
                ),
                summary=f'{action} failed: {type(exc).__name__}: {exc}',
            )
        return self._lasting_failure(action, exc, code)

    def _lasting_failure(self, action: str, exc: Exception, code: int) -> Failure:
        """A failure that retrying does not cure (a corrupt file, a directory it cannot write), with its fix."""
        if code in {11, 26}:  # CORRUPT, NOTADB
            fix = f'Move the file aside (a new ledger is then created), or set {STATE_DIR_ENV} to another directory.'
        else:
            fix = f'Make {self.path.parent} a writable local directory, or set {STATE_DIR_ENV} to one.'
        return Failure(
            lasting=True,
            cause=str(exc) or type(exc).__name__,
            fix=fix,
            summary=f'{action} failed: {type(exc).__name__}: {exc}',
        )

    def unenforceable_fix(self) -> str:
        return f'Point {STATE_DIR_ENV} at a writable local directory'


def _sums(
    db: sqlite3.Connection,
    amount: str,
    since: datetime | None,
    caller: str | None,
    emulated: bool | None,
    api: str | None,
    scope: str | None,
) -> int:
    """The sum in micro-dollars of `amount` (an expression of `_engine`) over the rows the arguments select."""
    where: list[str] = []
    params: list[str | int] = []
    if since is not None:
        where.append('created_at >= ?')
        params.append(_timestamp(since))
    if caller is not None:
        where.append('caller = ?')
        params.append(caller)
    if emulated is not None:
        where.append('emulated = ?')
        params.append(int(emulated))
    if api is not None:
        where.append('api = ?')
        params.append(api)
    if scope is not None:
        where.append('scope = ?')
        params.append(scope)
    clause = f' WHERE {" AND ".join(where)}' if where else ''
    sql = f'SELECT COALESCE(SUM({amount}), 0) FROM runs{clause}'  # noqa: S608 (constant expressions and clauses)
    ((total,),) = db.execute(sql, params).fetchall()  # fetchall: the read ends with the call
    return int(total)


def _update(db: sqlite3.Connection, response_id: str, values: dict[str, Any], at: datetime) -> None:
    values = {name: _timestamp(v) if isinstance(v, datetime) else v for name, v in with_micros(values).items()}
    values['updated_at'] = _timestamp(at)
    assignments = ', '.join(f'{name} = :{name}' for name in values)  # names checked against UPDATABLE
    db.execute(f'UPDATE runs SET {assignments} WHERE response_id = :_id', {**values, '_id': response_id})  # noqa: S608
