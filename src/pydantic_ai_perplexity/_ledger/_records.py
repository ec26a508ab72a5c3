"""What both engines share: the row model, the budget's estimates and refusals, and the ledger's exceptions."""

from __future__ import annotations

import functools
import logging
import uuid
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator

from .._base.efforts import DEFAULT_EFFORT as DEFAULT_EFFORT  # the ledger's modules import it from here
from .._base.efforts import effort_level
from .._base.env import ENV
from .._base.errors import BudgetExceededError
from .._base.statuses import RESERVED as RESERVED  # the ledger's modules import it from here

_log = logging.getLogger('pydantic_ai_perplexity.ledger')

BUDGET_ENV = ENV.BUDGET_USD
STATE_DIR_ENV = ENV.STATE_DIR
LEDGER_URL_ENV = ENV.LEDGER_URL

#: The least a run at each effort is reserved in USD (its floor): the reservation is the larger of this and the most
#: its request can cost (`pricing.reservation`), charged against the budget until the actual cost is known.
#: Perplexity publishes no per-effort price, so these come from what each effort bundles (perplexity-api.md §0.3,
#: §8), rounded up: `fast` is one step with one search ($0.005) on a fast model; `low` about three steps with
#: search and fetch on a mid-price model; `medium` about ten steps on a frontier model ($1.75/$14 per 1M tokens,
#: ~100K tokens in); `high` and `xhigh` run many more steps, and `xhigh` adds a code sandbox. They err high so that
#: a cap is met before it is overrun; the actual `usage.cost` replaces them as soon as a run reports it.
ESTIMATED_COST_USD: dict[str, float] = {'fast': 0.01, 'low': 0.05, 'medium': 0.25, 'high': 1.00, 'xhigh': 3.00}
#: The effort whose estimate applies when the effort is unknown or not given (the API's default depth).

#: What a run's `request_id` is (`RunRecord.request_kind`): `call`, the key of the MCP call over HTTP serving the run
#: (`mcp-http:<JSON id>`, cleared once the call has answered); `task`, the mark of a run started as an MCP task;
#: `key`, an idempotency key its starter finds it by again (a durable workflow step's, a CLI command's).
RequestKind = Literal['call', 'task', 'key']
#: The start of a `call` key: the MCP HTTP call's JSON-RPC id follows, as JSON.
CALL_KEY_PREFIX = 'mcp-http:'
#: The `request_id` of a run started as an MCP task.
TASK_KEY = 'mcp:task'


def request_kind_of(request_id: str) -> RequestKind:
    """What kind of request id `request_id` is, from its form (each way in makes its own)."""
    if request_id == TASK_KEY:
        return 'task'
    return 'call' if request_id.startswith(CALL_KEY_PREFIX) else 'key'


#: The start of the key of a row that holds budget for a run whose create has not answered yet.
_PROVISIONAL_PREFIX = 'pending_'

EPSILON_USD = 1e-9  # for comparing USD floats read back (the ledger itself compares integer micro-dollars)


class LedgerWarning(UserWarning):
    """The run ledger is not working: research goes on, but history and budget tracking are lost."""


class BudgetUnenforceableError(BudgetExceededError):
    """A budget cap is set but the ledger cannot tell the recorded spend, so the run is refused rather than unchecked.

    `spent_usd` is NaN: the spend is unknown.
    """


def now() -> datetime:
    return datetime.now(UTC)


def in_utc(value: datetime) -> datetime:
    """`value` in UTC; a naive datetime is taken to be UTC already."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


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
    created_at: AwareDatetime = Field(default_factory=now)
    #: Defaults to `created_at`; the ledger sets it on every update.
    updated_at: AwareDatetime = Field(default_factory=now)
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
    #: The API the run went to (the base URL's host and port, e.g. `api.perplexity.ai`).
    api: str | None = None
    #: Whether the run was served by an emulator: such runs never count against a budget for the real API.
    emulated: bool = False
    #: The caller's JSON-RPC request id of the call that started the run (MCP), to find the run to cancel.
    request_id: str | None = None
    #: The scope the run was started in (a label the application gives, e.g. a project), for budgets per scope.
    scope: str | None = None
    #: The billed cost in parts, as JSON (`Usage.cost_details()`): input with cache writes and reads, output, and
    #: each tool's calls, cost and tokens. None until the API reported the cost.
    cost_details: str | None = None
    #: Which prices its reservation came from: `fallback`, `api@<date>`, `user file` or `negotiated`.
    price_source: str | None = None
    #: A digest of the question and the request its options made (and the API it went to): a finished run with the
    #: same one inside `reuse_within` is served again instead of researched again (`Ledger.find_reusable`).
    fingerprint: str | None = None
    #: What `request_id` is (`call`, `task` or `key`, see `RequestKind`); set from its form when not given.
    request_kind: RequestKind | None = None
    #: When a client asked for the run to be cancelled (e.g. an MCP client cancelled the call), and who: the
    #: instance serving the call or binding the run's id reads it, whichever instance the cancel reached.
    cancel_requested_at: AwareDatetime | None = None
    cancel_requested_by: str | None = None

    @field_validator('created_at', 'updated_at', 'cancel_requested_at')
    @classmethod
    def _in_utc(cls, value: datetime | None) -> datetime | None:
        return value.astimezone(UTC) if value is not None else None

    @field_validator('*', mode='after')
    @classmethod
    def _storable(cls, value: Any) -> Any:
        return storable_text(value) if isinstance(value, str) else value

    def model_post_init(self, context: Any, /) -> None:
        if 'updated_at' not in self.model_fields_set:
            self.updated_at = self.created_at
        if 'estimate_usd' not in self.model_fields_set:  # a record built without one must not count as free
            self.estimate_usd = estimate_cost(self.effort)
        if self.request_id is not None and self.request_kind is None:  # also a row an older version wrote
            self.request_kind = request_kind_of(self.request_id)


#: The columns of `runs` that both engines read and write, in `RunRecord`'s order.
COLUMNS: tuple[str, ...] = tuple(RunRecord.model_fields)
#: Fields `update()` and `bind()` accept; the key and the timestamps are the ledger's own.
UPDATABLE = frozenset(COLUMNS) - {'response_id', 'created_at', 'updated_at'}
#: The integer micro-dollar columns beside the float ones (`cost_usd`, `estimate_usd`): sums and the budget use these.
MONEY_COLUMNS: tuple[str, ...] = ('cost_micros', 'estimate_micros')


def with_micros(values: dict[str, Any]) -> dict[str, Any]:
    """`values` (a row or fields to set) with the micro-dollar columns of the money it sets."""
    from .._domain.budget import micros

    found = dict(values)
    if 'cost_usd' in values:
        found['cost_micros'] = micros(values['cost_usd']) if values['cost_usd'] is not None else None
    if 'estimate_usd' in values:
        found['estimate_micros'] = micros(values['estimate_usd'])
    return found


def storable_text(value: str) -> str:
    """`value` with any lone surrogate (e.g. from undecodable bytes on a command line) escaped as `\\udcff`.

    Such text cannot be encoded as UTF-8, so no store can hold it; escaped, it is kept, readable, and the same key
    finds the same row again.
    """
    try:
        value.encode('utf-8')
    except UnicodeEncodeError:
        return value.encode('utf-8', 'backslashreplace').decode('utf-8')
    return value


def record_from_row(row: Any) -> RunRecord | None:
    """A `RunRecord` from a row of `COLUMNS`, or None (logged) if it does not validate."""
    try:
        return RunRecord.model_validate(dict(zip(COLUMNS, row, strict=True)))
    except ValidationError as exc:  # e.g. an origin written by a newer version of the library
        _log.debug('skipping a ledger row that does not validate: %s', exc)
        return None


@functools.cache
def _field_adapter(name: str) -> TypeAdapter[Any]:
    annotation = RunRecord.model_fields[name].annotation
    assert annotation is not None
    return TypeAdapter(annotation)


def validated_fields(fields: dict[str, Any]) -> dict[str, Any]:
    """`fields` checked against `RunRecord` for `update()` and `bind()`.

    Raises:
        TypeError: a field that does not exist or cannot be updated, or a value of the wrong type.
    """
    unknown = sorted(set(fields) - UPDATABLE)
    if unknown:
        raise TypeError(f'RunRecord fields that cannot be updated: {", ".join(unknown)}; allowed: {sorted(UPDATABLE)}')
    values: dict[str, Any] = {}
    for name, value in fields.items():
        try:
            checked = _field_adapter(name).validate_python(value)
        except ValidationError as exc:
            raise TypeError(f'invalid value for RunRecord.{name}: {value!r}') from exc
        values[name] = storable_text(checked) if isinstance(checked, str) else checked
    if 'request_id' in values and 'request_kind' not in values:
        values['request_kind'] = request_kind_of(values['request_id']) if values['request_id'] is not None else None
    return values


# --- budget ---------------------------------------------------------------------------------------------------------


def estimate_cost(effort: str | None) -> float:
    """The estimated cost in USD of one run at `effort`, from `ESTIMATED_COST_USD`.

    A pinned `name@version` counts as `name`, the old preset names as their efforts, and an unknown or missing
    effort as `DEFAULT_EFFORT`.
    """
    return ESTIMATED_COST_USD.get(effort_level(effort), ESTIMATED_COST_USD[DEFAULT_EFFORT])


def budget_from_env() -> float | None:
    """The budget cap in USD from `PERPLEXITY_BUDGET_USD`, or None when it is unset or empty (no cap).

    Raises:
        ConfigurationError: the variable is not a finite, non-negative number (checked by `settings.check_budget`).
    """
    from .._domain.settings import check_budget, variable

    raw = variable(BUDGET_ENV)
    return check_budget(raw) if raw else None


def usd(value: float) -> str:
    return f'${value:.4f}' if 0 < abs(value) < 0.01 else f'${value:,.2f}'


def _used(spent: float, held: tuple[float, int]) -> str:
    """What of the cap is used, for a refusal: spent, and held by runs in flight when there are some."""
    held_usd, held_runs = held
    if not held_runs:
        return f'{usd(spent)} already spent'
    runs = f'{held_runs} run{"s" if held_runs != 1 else ""} in flight'
    return (
        f'{usd(spent)} used ({usd(max(spent - held_usd, 0.0))} spent, {usd(held_usd)} held by {runs} until they '
        'report a cost)'
    )


def _next_step(fits: tuple[tuple[str, float], ...] | None, held_runs: int) -> str:
    """What a refused caller can do: the efforts that fit what is left, or that none does."""
    if fits is None:
        return 'Choose a cheaper effort, or wait for runs in flight to finish.'
    if fits:
        choice = ', '.join(f'{effort} ({usd(price)})' for effort, price in fits)
        return f'Efforts that fit what is left: {choice}.'
    wait = '; wait for the runs in flight to finish (what they hold comes back if they cost less)' if held_runs else ''
    return f'No effort fits what is left{wait}.'


def refusal(
    record: RunRecord,
    spent: float,
    cap: float,
    detail: str = '',
    *,
    held: tuple[float, int] = (0.0, 0),
    fits: tuple[tuple[str, float], ...] | None = None,
    advice: str = '',
) -> BudgetExceededError:
    """The error for a run that does not fit the cap: what is used (spent, and held by runs in flight), what is left,
    what this run needs and what it assumed (`detail`), the efforts that fit what is left, and how to allow it.

    `held` is (USD, runs) held by runs not finished yet; `fits` each effort that fits, cheapest first; `advice` a
    sentence more (e.g. what tightening would lower). `fits` None: not worked out (a bare `reserve`).
    """
    about = '; '.join(part for part in (f'effort {record.effort!r}' if record.effort else '', detail) if part)
    held_usd, held_runs = held
    used = _used(spent, held)
    left = max(cap - spent, 0.0)
    next_step = _next_step(fits, held_runs)
    message = (
        f'Budget exceeded: this run needs {usd(record.estimate_usd)}{f" ({about})" if about else ""}, and '
        f'{usd(left)} is left of the {usd(cap)} cap: {used}. The run was not started. {next_step}'
        f'{f" {advice}" if advice else ""} To allow it, raise the cap with the `budget_usd=` argument or the '
        f'{BUDGET_ENV} environment variable.'
    )
    return BudgetExceededError(
        message,
        spent_usd=spent,
        cap_usd=cap,
        estimate_usd=record.estimate_usd,
        held_usd=held_usd,
        fits=fits or (),
    )
