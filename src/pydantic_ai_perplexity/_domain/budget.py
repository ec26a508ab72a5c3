"""Budgets people mean: a ceiling per run, UTC calendar windows, limits per caller and per scope, and a warning.

A `Budget` says how much may be spent: `total` (all time), `day` and `month` (UTC calendar windows: a day starts at
00:00 UTC, a month on its 1st), `per_run` (the most one run may reserve), the same per caller (`per_caller`, keyed by
the name of an MCP token or one an application gives; `'*'` is every named caller without an entry of its own) and per
scope (`per_scope`, a label an application gives its runs, e.g. a project). `warn_at` (a fraction of each limit, or
an amount) makes the admission that crosses it say so, once per window.

Money is compared only in integers: micro-dollars (`micros`). The ledger checks every limit that applies to a run
(`applicable_limits`) in the one atomic admission that reserves it (see `ledger.Ledger.admit`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import ROUND_CEILING, ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .._base.env import ENV
from .._base.errors import BudgetExceededError, ConfigurationError

__all__ = (
    'ANY_CALLER',
    'MICROS_PER_USD',
    'Budget',
    'BudgetWarning',
    'Limit',
    'Limits',
    'SpendLine',
    'Window',
    'applicable_limits',
    'dollars',
    'micros',
    'parse_per_caller',
    'parse_warn_at',
    'per_run_refusal',
    'window_refusal',
    'window_start',
)

MICROS_PER_USD = 1_000_000
#: The `per_caller` key whose limits apply to every named caller that has no entry of its own.
ANY_CALLER = '*'

Window = Literal['day', 'month', 'total']
_WINDOWS: tuple[Window, ...] = ('day', 'month', 'total')
_WINDOW_WORDS: dict[str, str] = {'day': 'daily', 'month': 'monthly', 'total': 'total', 'run': 'per-run'}

Usd = Annotated[float, Field(ge=0, allow_inf_nan=False)]


def micros(usd: float | int | Decimal) -> int:
    """US dollars as integer micro-dollars, rounded half up: the only unit money is compared in."""
    return int((Decimal(str(usd)) * MICROS_PER_USD).to_integral_value(ROUND_HALF_UP))


def dollars(amount_micros: int) -> float:
    """Micro-dollars as US dollars, for display and for the float API (`spent_usd()`)."""
    return amount_micros / MICROS_PER_USD


def window_start(window: Window, at: datetime) -> datetime | None:
    """When the UTC calendar window holding `at` began: midnight of its day, the 1st of its month; None for `total`."""
    at = at.astimezone(UTC) if at.tzinfo is not None else at.replace(tzinfo=UTC)
    if window == 'day':
        return at.replace(hour=0, minute=0, second=0, microsecond=0)
    if window == 'month':
        return at.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    return None


def parse_warn_at(raw: object) -> float | str | None:
    """A `warn_at` value checked: a fraction in (0, 1], `'80%'`, or an amount `'$4'`; raises `ValueError` saying so."""
    if raw is None:
        return None
    if isinstance(raw, bool):
        raise ValueError(
            f'warn_at must be a fraction such as 0.8, a percentage such as "80%" or an amount such as "$4"; got {raw!r}'
        )
    if isinstance(raw, int | float):
        value = float(raw)
        if not (math.isfinite(value) and 0 < value <= 1):
            raise ValueError(
                f'warn_at={raw!r} is not a fraction in (0, 1]: give e.g. 0.8, "80%", or an amount such as "$4"'
            )
        return value
    if isinstance(raw, str) and (parsed := _warn_at_text(raw.strip())) is not None:
        return parsed
    raise ValueError(
        f'warn_at must be a fraction such as 0.8, a percentage such as "80%" or an amount such as "$4"; got {raw!r}'
    )


def _warn_at_text(text: str) -> float | str | None:
    """A `warn_at` written as text: `'80%'`, `'$4'` or `'0.8'`; None when it is none of them."""
    number = _decimal(text.removesuffix('%').removeprefix('$').strip())
    if number is None:
        return None
    if text.endswith('%') and 0 < number <= 100:
        return float(number / 100)
    if text.startswith('$') and number > 0:
        return f'${number}'
    if 0 < number <= 1:
        return float(number)
    return None


def _decimal(text: str) -> Decimal | None:
    try:
        value = Decimal(text)
    except InvalidOperation:
        return None
    return value if value.is_finite() else None


class Limits(BaseModel):
    """How much may be spent in each window (US dollars; None: no limit), and the most one run may reserve."""

    model_config = ConfigDict(frozen=True, extra='forbid')

    #: All time.
    total: Usd | None = None
    #: The UTC calendar day (from 00:00 UTC).
    day: Usd | None = None
    #: The UTC calendar month (from 00:00 UTC on the 1st).
    month: Usd | None = None
    #: The most one run may reserve: a request that could cost more is tightened to fit, or refused.
    per_run: Usd | None = None

    def windows(self) -> dict[Window, float]:
        """The windows that have a limit, with it."""
        limits = {'day': self.day, 'month': self.month, 'total': self.total}
        return {w: v for w, v in limits.items() if v is not None}  # pyright: ignore[reportReturnType]

    @property
    def empty(self) -> bool:
        """Whether nothing is limited."""
        return not self.windows() and self.per_run is None


class Budget(Limits):
    """A budget: limits for everyone, per caller and per scope, and when to warn.

    ```python
    Budget(total=20, day=5, per_run=2, per_caller={'alice': {'day': 1}, '*': {'day': 2}}, warn_at=0.8)
    ```
    """

    #: Limits for the runs of one caller (an MCP token's name, or a name the application gives); `'*'`: every named
    #: caller without an entry of its own, each on its own.
    per_caller: Mapping[str, Limits] = Field(default_factory=dict[str, Limits])
    #: Limits for the runs of one scope (a label the application gives, e.g. a project).
    per_scope: Mapping[str, Limits] = Field(default_factory=dict[str, Limits])
    #: Warn once per window when its spend crosses this: a fraction of each limit (0.8, '80%'), or an amount ('$4').
    warn_at: float | str | None = None

    @field_validator('warn_at', mode='before')
    @classmethod
    def _warn_at(cls, value: object) -> float | str | None:
        return parse_warn_at(value)

    @property
    def empty(self) -> bool:
        return (
            super().empty
            and all(limits.empty for limits in self.per_caller.values())
            and all(limits.empty for limits in self.per_scope.values())
        )

    def describe(self) -> str:
        """The limits in a few words, for `doctor` and logs, e.g. `total $20, day $5, per run $2, 1 caller`."""
        parts = [
            f'{name.replace("_", " ")} ${amount:g}'
            for name, amount in self.model_dump().items()
            if name in ('total', 'day', 'month', 'per_run') and amount is not None
        ]
        for what, entries in (('caller', self.per_caller), ('scope', self.per_scope)):
            if entries:
                parts.append(f'{len(entries)} {what}{"s" if len(entries) != 1 else ""}')
        if self.warn_at is not None:
            parts.append(f'warns at {self.warn_at if isinstance(self.warn_at, str) else f"{self.warn_at:.0%}"}')
        return ', '.join(parts) or 'no limits'

    def for_caller(self, caller: str | None) -> Limits | None:
        """The limits of `caller`'s own runs: its entry, else the `'*'` entry; None without a name or an entry."""
        if caller is None:
            return None
        return self.per_caller.get(caller) or self.per_caller.get(ANY_CALLER)

    def warn_micros(self, cap_micros: int) -> int | None:
        """The spend at which a window of this cap warns, in micro-dollars, or None."""
        if self.warn_at is None:
            return None
        if isinstance(self.warn_at, str):
            return micros(Decimal(self.warn_at.removeprefix('$')))
        return int((Decimal(cap_micros) * Decimal(str(self.warn_at))).to_integral_value(ROUND_CEILING))


@dataclass(frozen=True)
class Limit:
    """One limit that applies to a run: only the runs it names count against it, in its window."""

    window: Window
    cap_micros: int
    #: The window's start (None: all time).
    since: datetime | None = None
    #: Only this caller's runs count (None: everyone's).
    caller: str | None = None
    #: Only this scope's runs count (None: every scope's).
    scope: str | None = None
    #: The spend at which it warns, or None.
    warn_micros: int | None = None

    def describe(self) -> str:
        """E.g. `the daily limit of caller 'alice'`."""
        whose = ''
        if self.caller is not None:
            whose = f' of caller {self.caller!r}'
        elif self.scope is not None:
            whose = f' of scope {self.scope!r}'
        return f'the {_WINDOW_WORDS[self.window]} limit{whose}'

    def key(self) -> tuple[str, str | None, str | None, str]:
        """Identifies this window (its kind, whose, and when it began): a warning is given once per key."""
        return (self.window, self.caller, self.scope, self.since.isoformat() if self.since else '')


def applicable_limits(
    budget: Budget | None,
    *,
    cap_usd: float | None = None,
    since: datetime | None = None,
    caller: str | None = None,
    scope: str | None = None,
    at: datetime | None = None,
) -> tuple[tuple[Limit, ...], int | None]:
    """The limits a run of `caller` in `scope` must fit at `at`, and its per-run ceiling in micro-dollars (or None).

    `cap_usd` (with `since`) is the plain cap of `Ledger.reserve`/`admit`: one more limit on everyone's spend.
    """
    at = at or datetime.now(UTC)
    found: list[Limit] = [_cap_limit(budget, cap_usd, since)] if cap_usd is not None else []
    ceilings: list[int] = []
    if budget is not None:
        for limits, whose in _limits_for(budget, caller, scope):
            found += [limit for limit in _window_limits(budget, limits, whose, at) if limit not in found]
            if limits.per_run is not None:
                ceilings.append(micros(limits.per_run))
    return tuple(found), min(ceilings) if ceilings else None


def _cap_limit(budget: Budget | None, cap_usd: float, since: datetime | None) -> Limit:
    """The plain cap on everyone's spend since `since`, warned at the budget's `warn_at` if there is a budget."""
    cap = micros(cap_usd)
    return Limit('total', cap, since, warn_micros=budget.warn_micros(cap) if budget else None)


def _limits_for(budget: Budget, caller: str | None, scope: str | None) -> list[tuple[Limits, dict[str, str | None]]]:
    """The limits that apply to a run, each with whose they are: everyone's, the caller's, the scope's."""
    scoped = budget.per_scope.get(scope) if scope is not None else None
    found: list[tuple[Limits, dict[str, str | None]]] = [(budget, {})]
    for limits, whose in ((budget.for_caller(caller), {'caller': caller}), (scoped, {'scope': scope})):
        if limits is not None:
            found.append((limits, whose))
    return found


def _window_limits(budget: Budget, limits: Limits, whose: dict[str, str | None], at: datetime) -> list[Limit]:
    """The limit of each window `limits` sets, for `whose` (a caller, a scope, or everyone) at `at`."""
    found: list[Limit] = []
    for window, amount in limits.windows().items():
        cap = micros(amount)
        found.append(Limit(window, cap, window_start(window, at), warn_micros=budget.warn_micros(cap), **whose))
    return found


@dataclass(frozen=True)
class BudgetWarning:
    """A window's spend crossed `warn_at` with the run just admitted: given once per window."""

    limit: Limit
    #: The window's spend with this run's reservation, in US dollars.
    spent_usd: float
    cap_usd: float
    #: The spend it warns at.
    warn_usd: float

    @property
    def message(self) -> str:
        """The warning for people: which limit, how much is spent, how much is left."""
        left = max(self.cap_usd - self.spent_usd, 0.0)
        return (
            f'Budget warning: {self.limit.describe()} is {_pct(self.spent_usd, self.cap_usd)} used '
            f'({_usd(self.spent_usd)} of {_usd(self.cap_usd)}, {_usd(left)} left; warns at {_usd(self.warn_usd)}).'
        )

    def attributes(self) -> dict[str, str | float]:
        """The warning as span event attributes."""
        found: dict[str, str | float] = {
            'perplexity.budget.window': self.limit.window,
            'perplexity.budget.spent_usd': self.spent_usd,
            'perplexity.budget.cap_usd': self.cap_usd,
            'perplexity.budget.warn_usd': self.warn_usd,
        }
        if self.limit.caller is not None:
            found['perplexity.budget.caller'] = self.limit.caller
        if self.limit.scope is not None:
            found['perplexity.budget.scope'] = self.limit.scope
        return found


@dataclass(frozen=True)
class SpendLine:
    """Spend in one window, for everyone or one caller or scope: what the budget shows (`jobs spend`, `spend()`)."""

    window: Window
    #: When the window began (None: all time).
    since: datetime | None
    caller: str | None
    scope: str | None
    #: Actual costs reported by the API.
    spent_usd: float
    #: Reservations and estimates of runs whose actual cost is not known yet.
    held_usd: float
    #: The window's limit, or None.
    cap_usd: float | None

    @property
    def left_usd(self) -> float | None:
        """What the limit leaves after spent and held money (never below 0), or None without a limit."""
        if self.cap_usd is None:
            return None
        return dollars(max(micros(self.cap_usd) - micros(self.spent_usd) - micros(self.held_usd), 0))

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            'window': self.window,
            'since': self.since.isoformat() if self.since else None,
            'caller': self.caller,
            'scope': self.scope,
            'spent_usd': self.spent_usd,
            'held_usd': self.held_usd,
            'cap_usd': self.cap_usd,
            'left_usd': self.left_usd,
        }


def window_refusal(
    record_effort: str | None, estimate_usd: float, spent_usd: float, limit: Limit, detail: str = ''
) -> BudgetExceededError:
    """The error for a run that does not fit a window, per-caller or per-scope limit: which one, and how to allow it."""
    cap = dollars(limit.cap_micros)
    about = '; '.join(p for p in (f'effort {record_effort!r}' if record_effort else '', detail) if p)
    effort = f' ({about})' if about else ''
    since = f' since {limit.since:%Y-%m-%d %H:%M} UTC' if limit.since is not None else ''
    message = (
        f'Budget exceeded: {limit.describe()} is {_usd(cap)}, {_usd(spent_usd)} is already spent or held{since}, '
        f'and this run is estimated at {_usd(estimate_usd)}{effort}, which would bring it to '
        f'{_usd(spent_usd + estimate_usd)}. The run was not started. To allow it, raise that limit ({_how(limit)}), '
        f'{"wait for the window to roll over, " if limit.since is not None else ""}or choose a cheaper effort.'
    )
    return BudgetExceededError(message, spent_usd=spent_usd, cap_usd=cap, estimate_usd=estimate_usd)


def per_run_refusal(
    record_effort: str | None, estimate_usd: float, ceiling_micros: int, detail: str = ''
) -> BudgetExceededError:
    """The error for a run that even tightened could cost more than the per-run ceiling."""
    ceiling = dollars(ceiling_micros)
    about = '; '.join(p for p in (f'effort {record_effort!r}' if record_effort else '', detail) if p)
    effort = f' ({about})' if about else ''
    message = (
        f'Budget exceeded: this run is estimated at {_usd(estimate_usd)}{effort} at the least, over the per-run limit '
        f'of {_usd(ceiling)}. The run was not started. To allow it, raise the limit (`Budget(per_run=...)` or '
        f'{ENV.BUDGET_PER_RUN_USD}) or choose a cheaper effort.'
    )
    return BudgetExceededError(message, spent_usd=0.0, cap_usd=ceiling, estimate_usd=estimate_usd)


def _how(limit: Limit) -> str:
    """Where the limit is set: the `Budget` field, and the variable of the environment when there is one."""
    if limit.caller is not None:
        return f'`Budget(per_caller={{{limit.caller!r}: Limits({limit.window}=...)}})` or {ENV.BUDGET_PER_CALLER}'
    if limit.scope is not None:
        return f'`Budget(per_scope={{{limit.scope!r}: Limits({limit.window}=...)}})`'
    variable = {'day': ENV.BUDGET_DAY_USD, 'month': ENV.BUDGET_MONTH_USD}.get(limit.window, ENV.BUDGET_USD)
    return f'`Budget({limit.window}=...)` or {variable}'


def _usd(value: float) -> str:
    return f'${value:.4f}' if 0 < abs(value) < 0.01 else f'${value:,.2f}'


def _pct(part: float, whole: float) -> str:
    return f'{100 * part / whole:.0f}%' if whole > 0 else '100%'


def _caller_values(rest: str, caller: str, name: str, example: str) -> dict[str, float]:
    """One caller's `day=2,total=10` as amounts by window (or `per_run`); `ConfigurationError` naming `name`."""
    values: dict[str, float] = {}
    for item in filter(None, (part.strip() for part in rest.split(','))):
        key, _, value = item.partition('=')
        key = key.strip().replace('-', '_')
        amount = _decimal(value.strip().removeprefix('$'))
        if key not in (*_WINDOWS, 'per_run') or amount is None or amount < 0:
            raise ConfigurationError(
                f'{name}: {item!r} for caller {caller!r} is not a limit; use day=, month=, total= or per_run= '
                f'with a non-negative number of US dollars, e.g. {example}.'
            )
        values[key] = float(amount)
    return values


_CALLER_ENTRY = re.compile(r'^\s*([^:=;,\s]+)\s*:(.*)$')


def parse_per_caller(raw: str, name: str) -> dict[str, Limits]:
    """`alice:day=2,total=10;*:day=1` as per-caller limits; `ConfigurationError` naming the variable `name`."""
    found: dict[str, Limits] = {}
    example = f'{name}="alice:day=2,total=10;*:day=1"'
    for entry in filter(None, (part.strip() for part in raw.split(';'))):
        match = _CALLER_ENTRY.match(entry)
        if match is None:
            raise ConfigurationError(f'{name} has an entry without a caller name ({entry!r}); write e.g. {example}.')
        caller = match.group(1)
        values = _caller_values(match.group(2), caller, name, example)
        if caller in found or not values:
            why = 'appears twice' if caller in found else 'has no limits'
            raise ConfigurationError(f'{name}: caller {caller!r} {why}; write e.g. {example}.')
        found[caller] = Limits.model_validate(values)
    return found
