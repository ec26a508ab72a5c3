"""The run ledger and the budget: one store of runs that every process starting research runs shares.

Every run started through the toolset, the MCP server or the CLI gets a row keyed by its `response_id`, so runs
can be listed, collected later by any process that shares the ledger, and spend can be capped.

**Engines.** Two, behind one interface (`Ledger`):

- **SQLite** (the default, zero configuration): one file on a local disk, shared by the processes of one machine;
  `$PERPLEXITY_STATE_DIR/ledger.sqlite3`, else under `platformdirs.user_state_dir` (see `_sqlite.py`).
- **PostgreSQL**, for a team: one database shared by every instance on every machine (see `_postgres.py`). Chosen
  by `PERPLEXITY_LEDGER_URL=postgresql://user@host/db` or `Ledger('postgresql://...')`; needs the `postgres` extra.

`Ledger(target)` takes a path or `sqlite:///path` (SQLite), or a `postgresql://` / `postgres://` URL or a libpq
keyword/value string (`host=db dbname=runs user=bob`). Without one it reads `PERPLEXITY_LEDGER_URL` (any of those),
else uses the default SQLite file. A PostgreSQL target is shown (`describe`, `url`, messages) with its passwords and
secret settings as `***` (`_base/redact.py`). The schema is built by the
registered migrations (`@migration`), the same list on both engines, recorded in a `_migrations` table.

**Budget.** `spent_usd()` sums, over every recorded run, its actual `cost_usd` when known, else its
`estimate_usd` (see `ESTIMATED_COST_USD`). Failed and cancelled runs count too: they may have billed steps before
they stopped, so their estimate stands until an actual cost is recorded. A run is admitted under a cap in three
short transactions:

1. `token = ledger.reserve(record, cap_usd=cap)`: in one transaction, reads the spend and inserts the row (status
   `'reserved'`) only if spend plus `record.estimate_usd` fits the cap, else raises `BudgetExceededError` and inserts
   nothing. Reservations are serialized from the read to the insert (SQLite: the write lock; PostgreSQL: an
   advisory transaction lock), so two processes or instances can never both spend the last of the cap. The row is
   keyed by `record.response_id`, by default a provisional key (`pending_<hex>`): the real id is not known before
   the create request answers.
2. `ledger.bind(token, response_id, status=...)` once the API gave the run its id: renames the row to the real id.
3. `ledger.release(token)` instead, when the create provably started no run (e.g. a 400): drops the reservation.

A reservation that is never bound (the process died while the create was in flight) keeps counting its estimate:
a billed run may exist. Such rows are listed with status `'reserved'`.

**Failure policy.** Recording never fails or blocks a research call for long. If the ledger cannot be opened,
read or written (the directory cannot be created, the file is not a database, the server is unreachable, a lock
stays held past the retries...), the ledger emits one `LedgerWarning` per instance saying what failed, where, what
is lost and how to fix it, and degrades: writes do nothing, reads return nothing, `spent_usd()` returns 0.0.
Contention and a server or network outage degrade only the call that met them; any other failure lasts for the
life of the instance (`healthy` is then False). The one exception: when a budget cap is set, `reserve()` cannot
tell whether the run fits, and rather than allowing unlimited spend it refuses with `BudgetUnenforceableError` (a
`BudgetExceededError`). No other exception leaves a `Ledger` method, except `TypeError` for a call that names a
field `RunRecord` does not have. A PostgreSQL URL's password never appears in a message, repr, warning or log.
"""

from __future__ import annotations

from ._aio import AsyncLedger
from ._engine import MIGRATIONS, SCHEMA_VERSION, EngineName, MigrationDB, migration
from ._ledger import Admission, Ledger, LedgerHealth, OnBudget, process_health
from ._recorder import Recorder
from ._records import (
    BUDGET_ENV,
    CALL_KEY_PREFIX,
    DEFAULT_EFFORT,
    EPSILON_USD,
    ESTIMATED_COST_USD,
    LEDGER_URL_ENV,
    RESERVED,
    STATE_DIR_ENV,
    TASK_KEY,
    BudgetUnenforceableError,
    LedgerWarning,
    Origin,
    RequestKind,
    RunRecord,
    budget_from_env,
    estimate_cost,
    is_provisional,
    provisional_id,
)
from ._sqlite import LEDGER_FILENAME, default_ledger_path, private_mode_problem

__all__ = (
    'BUDGET_ENV',
    'CALL_KEY_PREFIX',
    'DEFAULT_EFFORT',
    'EPSILON_USD',
    'ESTIMATED_COST_USD',
    'LEDGER_FILENAME',
    'LEDGER_URL_ENV',
    'MIGRATIONS',
    'RESERVED',
    'SCHEMA_VERSION',
    'STATE_DIR_ENV',
    'TASK_KEY',
    'Admission',
    'AsyncLedger',
    'BudgetUnenforceableError',
    'EngineName',
    'Ledger',
    'LedgerHealth',
    'LedgerWarning',
    'MigrationDB',
    'OnBudget',
    'Origin',
    'Recorder',
    'RequestKind',
    'RunRecord',
    'budget_from_env',
    'default_ledger_path',
    'estimate_cost',
    'is_provisional',
    'migration',
    'private_mode_problem',
    'process_health',
    'provisional_id',
)
