"""The interface each storage engine implements, and the schema migrations they share by name and number."""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol

from ._records import RunRecord

if TYPE_CHECKING:
    from .._domain.budget import Limit

EngineName = Literal['sqlite', 'postgres']


#: A run's cost in integer micro-dollars, in SQL both engines run: the actual cost when known, else the estimate. A row
#: written by an older version of the library (float columns only) counts its float columns, rounded to micro-dollars,
#: so every sum and comparison is in integers either way.
COST_MICROS_SQL: Final = 'COALESCE(cost_micros, CAST(ROUND(cost_usd * 1000000) AS BIGINT))'
ESTIMATE_MICROS_SQL: Final = 'COALESCE(estimate_micros, CAST(ROUND(estimate_usd * 1000000) AS BIGINT))'
AMOUNT_MICROS_SQL: Final = f'COALESCE({COST_MICROS_SQL}, {ESTIMATE_MICROS_SQL})'
#: Held: what runs whose actual cost is not known yet reserve (their estimate); spent is the rest.
HELD_MICROS_SQL: Final = f'CASE WHEN cost_micros IS NULL AND cost_usd IS NULL THEN {ESTIMATE_MICROS_SQL} ELSE 0 END'


@dataclass(frozen=True)
class Reserved:
    """What a capped reservation found: whether the row is stored, and the spend each limit counted before it."""

    stored: bool
    #: Micro-dollars counted against each limit (in the order given), before this run.
    spent: tuple[int, ...]


@dataclass(frozen=True)
class Failure:
    """How an engine reads an exception that a ledger operation raised; no field ever holds a password."""

    #: True: the ledger stops for the life of the instance (`healthy` False). False: only this call failed.
    lasting: bool
    #: What went wrong, for the warning's parenthesis.
    cause: str
    #: One sentence on how to fix it.
    fix: str
    #: What went wrong in a few words, for `BudgetUnenforceableError` (and `_problem` when lasting).
    summary: str
    #: True: the store failed (full, locked, I/O, unreachable), so a write is kept and tried again later. False: the
    #: value itself cannot be stored, so trying again cannot help.
    retry: bool = True


class Engine(abc.ABC):
    """One storage engine of the ledger. Methods raise the engine's own exceptions; `Ledger` applies the policy.

    Every write is one short transaction of its own, retried by the engine where its contention rules allow.
    """

    name: EngineName

    @abc.abstractmethod
    def describe(self) -> str:
        """Where the ledger is (a path, or a URL without its password), for messages."""

    @abc.abstractmethod
    def reduce_arg(self) -> str | Path:
        """What `Ledger(...)` needs to open this ledger again in another process (used for pickling)."""

    @abc.abstractmethod
    def open(self) -> None:
        """Connect and migrate now, if not done yet."""

    @abc.abstractmethod
    def insert(self, record: RunRecord) -> None:
        """Insert the row; a row with the same `response_id` is kept as it is."""

    @abc.abstractmethod
    def update(self, response_id: str, values: dict[str, Any], at: datetime) -> None:
        """Set validated `values` and `updated_at = at` on the row, if there is one."""

    @abc.abstractmethod
    def get(self, response_id: str) -> RunRecord | None:
        """The row with this key, or None."""

    @abc.abstractmethod
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
        """Rows newest first (ties: last inserted first), filtered by the arguments that are not None.

        A tuple of statuses matches any of them.
        """

    @abc.abstractmethod
    def spent(
        self,
        *,
        since: datetime | None,
        caller: str | None,
        emulated: bool | None,
        api: str | None,
        scope: str | None = None,
    ) -> int:
        """Micro-dollars over rows: actual cost when known, else the estimate, filtered by the arguments not None."""

    @abc.abstractmethod
    def totals(
        self, *, since: datetime | None, caller: str | None, scope: str | None, emulated: bool | None
    ) -> tuple[int, int]:
        """Micro-dollars spent (actual costs) and held (estimates of runs without one), filtered as `spent`."""

    @abc.abstractmethod
    def callers(self) -> list[str]:
        """The callers that have runs recorded, sorted."""

    @abc.abstractmethod
    def reserve(self, record: RunRecord, *, limits: Sequence[Limit]) -> Reserved:
        """In one transaction: read the spend each limit counts and insert `record` only if it fits every one.

        A real run is checked against the spend of real runs only (emulated runs never use up the real API's budget);
        an emulated one against the spend of every run. Without limits the row is simply inserted (no lock).
        All amounts are integer micro-dollars.
        """

    @abc.abstractmethod
    def bind(
        self, token: str, response_id: str, pending: RunRecord | None, values: dict[str, Any], at: datetime
    ) -> None:
        """In one transaction: rename the reservation `token` to `response_id` (keeping a row already under that id,
        or inserting `pending` if the reservation is missing) and set `values`."""

    @abc.abstractmethod
    def claim_call(
        self, response_id: str, caller: str | None, key: str, statuses: tuple[str, ...], at: datetime
    ) -> bool:
        """In one statement: record the MCP call `key` on the run (`request_kind` `call`) if `caller` started it, its
        status is one of `statuses` and it carries no key of another kind; whether it did."""

    @abc.abstractmethod
    def answered(self, response_id: str, reason: str, at: datetime) -> bool:
        """In one statement, once the MCP call serving the run has answered: clear its `call` key and, if a cancel was
        requested and the run ended `cancelled`, set `error` to `reason`; whether a cancel was requested."""

    @abc.abstractmethod
    def release(self, token: str) -> None:
        """Delete the row `token` if it is still a reservation."""

    @abc.abstractmethod
    def learn_price(self, model: str, input_per_million: float, output_per_million: float, at: datetime) -> None:
        """Raise `model`'s learned price to at least these (a run was billed above the table); never lowers it."""

    @abc.abstractmethod
    def learned_prices(self) -> dict[str, tuple[float, float]]:
        """Every learned price: model to (input, output) in USD per million tokens."""

    @abc.abstractmethod
    def close(self) -> None:
        """Close this process's connections; a later call opens them again."""

    @abc.abstractmethod
    def after_fork(self) -> None:
        """In a forked child: drop the parent's connections without touching them, and replace the locks."""

    @abc.abstractmethod
    def failure(self, action: str, exc: Exception) -> Failure:
        """How to report `exc`, raised while `action`."""

    @abc.abstractmethod
    def unenforceable_fix(self) -> str:
        """How to make the ledger work again, for `BudgetUnenforceableError`."""


# --- migrations -----------------------------------------------------------------------------------------------------


class MigrationDB(Protocol):
    """What a migration gets: the engine's name and a way to run one statement in the migration's transaction."""

    @property
    def engine(self) -> EngineName: ...

    def execute(self, sql: str, /) -> None: ...


#: The schema's migrations, in order, the same list for both engines: a migration's function name is its identity in
#: `_migrations`, and the number applied is the schema version, so both engines are versioned the same way. Each runs
#: once per database inside the transaction that records it, and writes the SQL of each engine (`db.engine`). Never
#: edit one that has shipped: add the next.
MIGRATIONS: list[Callable[[MigrationDB], None]] = []


def migration(fn: Callable[[MigrationDB], None]) -> Callable[[MigrationDB], None]:
    """Register `fn` as the next schema migration; its name is its identity in `_migrations`."""
    MIGRATIONS.append(fn)
    return fn


@migration
def m001_initial(db: MigrationDB) -> None:
    if db.engine == 'sqlite':
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
    else:
        # `seq` orders runs created in the same instant (SQLite has its rowid for that).
        db.execute(
            """
            CREATE TABLE runs (
                seq           bigint GENERATED ALWAYS AS IDENTITY,
                response_id   text PRIMARY KEY,
                created_at    timestamptz NOT NULL,
                updated_at    timestamptz NOT NULL,
                query         text NOT NULL,
                effort        text,
                model         text,
                status        text NOT NULL,
                origin        text NOT NULL,
                sources       bigint NOT NULL DEFAULT 0,
                cited         bigint NOT NULL DEFAULT 0,
                input_tokens  bigint NOT NULL DEFAULT 0,
                output_tokens bigint NOT NULL DEFAULT 0,
                cost_usd      double precision,
                estimate_usd  double precision NOT NULL DEFAULT 0,
                error         text,
                trace_id      text,
                span_id       text,
                caller        text
            )
            """
        )
        db.execute('CREATE INDEX runs_created_at ON runs (created_at DESC, seq DESC)')
    db.execute('CREATE INDEX runs_status ON runs (status)')


@migration
def m002_runs_caller(db: MigrationDB) -> None:
    # Spend and history per caller (`spent_usd(caller=...)`, `list(caller=...)`) on a shared ledger.
    db.execute('CREATE INDEX runs_caller ON runs (caller, created_at)')


@migration
def m003_runs_api_emulated_request(db: MigrationDB) -> None:
    # Which API a run went to and whether it was emulated (emulated runs never count against the real API's budget),
    # and the caller's JSON-RPC request id, so that a cancel arriving at any instance finds the run.
    if db.engine == 'sqlite':
        db.execute('ALTER TABLE runs ADD COLUMN api TEXT')
        db.execute('ALTER TABLE runs ADD COLUMN emulated INTEGER NOT NULL DEFAULT 0')
        db.execute('ALTER TABLE runs ADD COLUMN request_id TEXT')
    else:
        db.execute('ALTER TABLE runs ADD COLUMN api text')
        db.execute('ALTER TABLE runs ADD COLUMN emulated boolean NOT NULL DEFAULT false')
        db.execute('ALTER TABLE runs ADD COLUMN request_id text')
    db.execute('CREATE INDEX runs_request ON runs (caller, request_id)')


@migration
def m004_money_in_micros_and_scope(db: MigrationDB) -> None:
    # Money in integer micro-dollars, so that sums and the budget's comparisons are exact; the float columns stay (and
    # are still written) for older versions of the library sharing the ledger. And the scope a run was started in
    # (a label an application gives, e.g. a project), for budgets per scope.
    kind = 'INTEGER' if db.engine == 'sqlite' else 'bigint'
    db.execute(f'ALTER TABLE runs ADD COLUMN cost_micros {kind}')
    db.execute(f'ALTER TABLE runs ADD COLUMN estimate_micros {kind}')
    db.execute(f'ALTER TABLE runs ADD COLUMN scope {"TEXT" if db.engine == "sqlite" else "text"}')
    db.execute('UPDATE runs SET cost_micros = CAST(ROUND(cost_usd * 1000000) AS BIGINT) WHERE cost_usd IS NOT NULL')
    db.execute('UPDATE runs SET estimate_micros = CAST(ROUND(estimate_usd * 1000000) AS BIGINT)')
    db.execute('CREATE INDEX runs_scope ON runs (scope, created_at)')


@migration
def m005_runs_cost_details(db: MigrationDB) -> None:
    # The billed cost's parts (input with cache writes and reads, output, each tool) as JSON text, beside the total.
    db.execute(
        'ALTER TABLE runs ADD COLUMN cost_details TEXT'
        if db.engine == 'sqlite'
        else 'ALTER TABLE runs ADD COLUMN cost_details text'
    )


@migration
def m006_prices(db: MigrationDB) -> None:
    # Which prices each reservation came from, and the model prices learned from runs billed above the table (raised
    # at once for every process that shares the ledger).
    if db.engine == 'sqlite':
        db.execute('ALTER TABLE runs ADD COLUMN price_source TEXT')
        db.execute(
            'CREATE TABLE learned_prices (model TEXT PRIMARY KEY, input_per_million REAL NOT NULL, '
            'output_per_million REAL NOT NULL, updated_at TEXT NOT NULL)'
        )
    else:
        db.execute('ALTER TABLE runs ADD COLUMN price_source text')
        db.execute(
            'CREATE TABLE learned_prices (model text PRIMARY KEY, input_per_million double precision NOT NULL, '
            'output_per_million double precision NOT NULL, updated_at timestamptz NOT NULL)'
        )


@migration
def m007_runs_fingerprint(db: MigrationDB) -> None:
    # A digest of each run's question and request, so that the same question asked again inside a window is served
    # from the finished run (`reuse_within`), found by its newest row.
    db.execute(f'ALTER TABLE runs ADD COLUMN fingerprint {"TEXT" if db.engine == "sqlite" else "text"}')
    db.execute('CREATE INDEX runs_fingerprint ON runs (fingerprint, created_at)')


@migration
def m008_request_kind_and_cancel_marks(db: MigrationDB) -> None:
    # Real columns for what was encoded in others: what a run's `request_id` is (`request_kind`: `call`, `task`,
    # `key`), and a client's cancel request (`cancel_requested_at`, `cancel_requested_by`). Before, a cancel requested
    # while the create was in flight was written into `error`, and a cancel applied to an MCP call over HTTP was
    # written into `request_id` as `cancelled:<key>`; both are moved into the new columns here.
    text, stamp = ('TEXT', 'TEXT') if db.engine == 'sqlite' else ('text', 'timestamptz')
    db.execute(f'ALTER TABLE runs ADD COLUMN request_kind {text}')
    db.execute(f'ALTER TABLE runs ADD COLUMN cancel_requested_at {stamp}')
    db.execute(f'ALTER TABLE runs ADD COLUMN cancel_requested_by {text}')
    db.execute(
        "UPDATE runs SET cancel_requested_at = updated_at, cancel_requested_by = 'mcp-client', error = NULL "
        "WHERE error = 'cancel requested: the MCP client cancelled the call before the run had its id'"
    )
    db.execute(
        'UPDATE runs SET cancel_requested_at = COALESCE(cancel_requested_at, updated_at), '
        "cancel_requested_by = 'mcp-client', request_id = SUBSTR(request_id, 11) "
        "WHERE SUBSTR(request_id, 1, 10) = 'cancelled:'"
    )
    db.execute(
        "UPDATE runs SET request_kind = CASE WHEN request_id = 'mcp:task' THEN 'task' "
        "WHEN SUBSTR(request_id, 1, 9) = 'mcp-http:' THEN 'call' ELSE 'key' END WHERE request_id IS NOT NULL"
    )


#: The schema version a database reaches once every migration is applied (`PRAGMA user_version` on SQLite, the
#: number of rows in `_migrations` on both).
SCHEMA_VERSION = len(MIGRATIONS)
