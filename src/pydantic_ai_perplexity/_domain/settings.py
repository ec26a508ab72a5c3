"""`Settings`: every `PERPLEXITY_*` variable of the package, read and checked here and nowhere else.

The names are `ENV` (`_base/env.py`, so the wire can name the key's variable too). `Researcher` calls
`Settings.load()` (explicit arguments win over the environment) and passes its fields down: the key and base URL to
the client, the effort, waits and budget to the runs; the toolset, the MCP server and the CLI get theirs through it,
and `doctor` reports from one. A value that must be read live (the ledger's location for a `Ledger()` made later,
the step shape of tracing, `PERPLEXITY_PRICES`, the MCP tokens re-read when their file changes) is read with
`variable()` and parsed by the one function here, so a bad value is refused with the same words everywhere: the
variable's name, what it must be, an example, and what was given (never for a secret). NaN and infinities are not
numbers here. This module imports only the standard library at import time: the CLI and the MCP server call
`skip_idle_logfire_plugin` before pydantic loads.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from .._base.efforts import DEFAULT_EFFORT, EFFORTS, normalize_effort
from .._base.env import ENV, variable
from .._base.errors import ConfigurationError, InvalidArgumentError

if TYPE_CHECKING:
    from pydantic import SecretStr

    from .budget import Budget

__all__ = (
    'DEFAULT_MCP_HEARTBEAT_SECONDS',
    'DEFAULT_MCP_WAIT_SECONDS',
    'DEFAULT_WAIT_SECONDS',
    'ENV',
    'OnBudget',
    'Settings',
    'TraceSteps',
    'check_budget',
    'check_seconds',
    'mcp_heartbeat',
    'mcp_lean',
    'mcp_shared_list',
    'read_on_budget',
    'skip_idle_logfire_plugin',
    'trace_steps',
    'variable',
    'wait_budget',
)

#: How long an in-process call (toolset, CLI, notebook) waits before handing back the run's id.
DEFAULT_WAIT_SECONDS = 600.0
#: How long an MCP call waits: it answers (result or hand-off) before the 60 s limit of Claude Desktop and
#: other TypeScript-SDK clients.
DEFAULT_MCP_WAIT_SECONDS = 55.0
#: At most this long between two progress notifications of an MCP call that asked for them, so that clients with
#: an idle timeout keep a call whose run shows no new step for a while.
DEFAULT_MCP_HEARTBEAT_SECONDS = 15.0

TraceSteps = Literal['events', 'spans', 'off']
#: What a run does when it does not fit what is left of the budget: be refused (the default), or run tightened.
OnBudget = Literal['refuse', 'tighten']


def _refused(name: str, what: str, example: str, raw: object, hint: str = '') -> ConfigurationError:
    shown = raw if isinstance(raw, str) else repr(raw)
    return ConfigurationError(f'{name} must be {what}, e.g. {name}={example}; got {shown!r}.{hint}')


def _number(raw: object) -> float:
    """A finite float from a string or a number; NaN for anything else (so the caller refuses it)."""
    if isinstance(raw, bool):
        return math.nan
    if isinstance(raw, int | float):
        value = float(raw)
    elif isinstance(raw, str):
        try:
            value = float(raw.strip().removeprefix('$'))
        except ValueError:
            return math.nan
    else:
        return math.nan
    return value if math.isfinite(value) else math.nan


def check_seconds(raw: object, name: str = ENV.WAIT_SECONDS, *, cap: float | None = None) -> float:
    """A wait in seconds: finite and 0 or more (at most `cap` when given); `ConfigurationError` naming `name`."""
    value = _number(raw)
    if math.isnan(value) or value < 0:
        raise _refused(name, 'a number of seconds, 0 or more', '600', raw)
    return value if cap is None else min(value, cap)


def check_budget(raw: object, name: str = ENV.BUDGET_USD) -> float:
    """A budget cap in USD: finite and 0 or more (`$5` is read as 5); `ConfigurationError` naming `name`."""
    value = _number(raw)
    if math.isnan(value) or value < 0:
        raise _refused(
            name, 'a non-negative number of US dollars', '5 or 12.50', raw, ' Unset it to run without a budget cap.'
        )
    return value


_YES = ('1', 'true', 'yes', 'on')
_NO = ('', '0', 'false', 'no', 'off')


def mcp_lean(given: bool | None = None, environ: Mapping[str, str] | None = None) -> bool:
    """Whether the MCP server lists the tools' lean variant: `given`, else `PERPLEXITY_MCP_LEAN` (off by default)."""
    if given is not None:
        return given
    raw = variable(ENV.MCP_LEAN, environ)
    value = raw.lower()
    if value not in _YES + _NO:
        raise _refused(ENV.MCP_LEAN, '1 or 0 (true or false)', '1', raw)
    return value in _YES


def mcp_heartbeat(given: float | None = None, environ: Mapping[str, str] | None = None) -> float:
    """The MCP heartbeat interval: `given`, else `PERPLEXITY_MCP_HEARTBEAT_SECONDS`, else 15 s; more than 0."""
    name = 'heartbeat_seconds' if given is not None else ENV.MCP_HEARTBEAT_SECONDS
    raw: object = given if given is not None else variable(name, environ)
    if raw == '':
        return DEFAULT_MCP_HEARTBEAT_SECONDS
    value = _number(raw)
    if math.isnan(value) or value <= 0:
        raise _refused(name, 'a number of seconds, more than 0', '15', raw)
    return value


def _effort(raw: str, name: str) -> str:
    try:
        return normalize_effort(raw)
    except InvalidArgumentError:
        what = f'one of {", ".join(EFFORTS)} (optionally pinned)'
        raise _refused(name, what, DEFAULT_EFFORT, raw) from None


def trace_steps(environ: Mapping[str, str] | None = None) -> TraceSteps:
    """How tracing records a run's steps: `PERPLEXITY_TRACE_STEPS` (events, spans or off), else events."""
    raw = variable(ENV.TRACE_STEPS, environ)
    value = raw.lower() or 'events'
    if value not in ('events', 'spans', 'off'):
        raise _refused(ENV.TRACE_STEPS, 'events, spans or off', 'spans', raw)
    return value


def read_on_budget(environ: Mapping[str, str] | None = None) -> OnBudget:
    """What a run that does not fit the budget does: `PERPLEXITY_ON_BUDGET` (refuse or tighten), else refuse."""
    raw = variable(ENV.ON_BUDGET, environ)
    value = raw.lower() or 'refuse'
    if value not in ('refuse', 'tighten'):
        raise _refused(ENV.ON_BUDGET, '"refuse" (the default) or "tighten"', 'tighten', raw)
    return value


def mcp_shared_list(environ: Mapping[str, str] | None = None) -> bool:
    """Whether named MCP callers all see every run (`PERPLEXITY_MCP_SHARED_LIST`); off unless it says yes."""
    return variable(ENV.MCP_SHARED_LIST, environ).lower() in _YES


@dataclass(frozen=True)
class Settings:
    """The checked settings of one process (or one `Researcher`): made by `Settings.load()`.

    Secrets (`api_key`, the MCP tokens, the ledger URL, which may hold a password) are left out of the repr.
    """

    api_key: SecretStr | None = field(default=None, repr=False)
    base_url: str = 'https://api.perplexity.ai'
    effort: str = DEFAULT_EFFORT
    #: The wait budget of an in-process call (toolset, CLI, notebook).
    wait_seconds: float = DEFAULT_WAIT_SECONDS
    #: The wait budget of an MCP call.
    mcp_wait_seconds: float = DEFAULT_MCP_WAIT_SECONDS
    #: The total limit (`budget_usd=` or `PERPLEXITY_BUDGET_USD`); also `budget.total`.
    budget_usd: float | None = None
    #: Every limit (windows, per run, per caller, `warn_at`), or None when nothing is limited.
    budget: Budget | None = None
    state_dir: Path | None = None
    ledger_url: str | None = field(default=None, repr=False)
    mcp_token: SecretStr | None = field(default=None, repr=False)
    mcp_tokens: SecretStr | None = field(default=None, repr=False)
    mcp_tokens_file: Path | None = None
    trace_steps: TraceSteps = 'events'
    on_budget: OnBudget = 'refuse'
    #: `PERPLEXITY_PRICES`: a price table (JSON text or a file) over the API's, or None.
    prices: str | None = None

    @classmethod
    def load(
        cls,
        environ: Mapping[str, str] | None = None,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        effort: str | None = None,
        wait_seconds: float | None = None,
        budget_usd: float | None = None,
        budget: Budget | None = None,
        on_budget: OnBudget | None = None,
    ) -> Settings:
        """Read and check the environment (default `os.environ`); a value given here wins over its variable.

        Each limit of `budget` that is set wins over its variable; the others come from the environment.

        Raises `ConfigurationError` naming the variable (or the argument), with an example of a good value.
        """
        from ..client._settings import DEFAULT_BASE_URL, resolve_api_key, resolve_base_url

        env = os.environ if environ is None else environ

        def raw(name: str) -> str:
            return variable(name, env)

        key_source = 'api_key' if api_key is not None else ENV.API_KEY
        key = resolve_api_key(api_key if api_key is not None else raw(ENV.API_KEY), source=key_source)
        url_source = 'base_url' if base_url is not None else ENV.BASE_URL
        url_given = base_url if base_url is not None else raw(ENV.BASE_URL) or DEFAULT_BASE_URL
        url = resolve_base_url(url_given, source=url_source)
        if effort is not None:
            chosen_effort = _effort(effort, 'effort')
        else:
            chosen_effort = _effort(raw(ENV.EFFORT) or DEFAULT_EFFORT, ENV.EFFORT)
        in_process = wait_budget(env, wait_seconds, mcp=False)
        mcp = wait_budget(env, wait_seconds, mcp=True)
        given_total = budget.total if budget is not None else None
        if budget_usd is not None:
            total: float | None = check_budget(budget_usd, 'budget_usd')
            total = total if given_total is None else min(total, given_total)
        elif given_total is not None:
            total = given_total
        else:
            total = check_budget(raw(ENV.BUDGET_USD)) if raw(ENV.BUDGET_USD) else None
        limits = _budget(raw, budget, total)
        state_dir = raw(ENV.STATE_DIR)
        tokens_file = raw(ENV.MCP_TOKENS_FILE)
        return cls(
            api_key=key,
            base_url=url,
            effort=chosen_effort,
            wait_seconds=in_process,
            mcp_wait_seconds=mcp,
            budget_usd=limits.total if limits is not None else None,
            budget=limits,
            state_dir=Path(state_dir).expanduser() if state_dir else None,
            ledger_url=raw(ENV.LEDGER_URL) or None,
            mcp_token=_secret(raw(ENV.MCP_TOKEN)),
            mcp_tokens=_secret(raw(ENV.MCP_TOKENS)),
            mcp_tokens_file=Path(tokens_file).expanduser() if tokens_file else None,
            trace_steps=trace_steps(env),
            on_budget=on_budget if on_budget is not None else read_on_budget(env),
            prices=raw(ENV.PRICES) or None,
        )

    @property
    def has_api_key(self) -> bool:
        """Whether a key is configured (research then goes to the API rather than needing one)."""
        return self.api_key is not None


def _budget(raw: Callable[[str], str], given: Budget | None, total: float | None) -> Budget | None:
    """Every limit: those `given` sets, the others from their variables; None when nothing is limited."""
    from .budget import Budget, parse_per_caller, parse_warn_at

    found: dict[str, object] = {}
    for name, env_name in (
        ('day', ENV.BUDGET_DAY_USD),
        ('month', ENV.BUDGET_MONTH_USD),
        ('per_run', ENV.BUDGET_PER_RUN_USD),
    ):
        if raw(env_name):
            found[name] = check_budget(raw(env_name), env_name)
    if raw(ENV.BUDGET_PER_CALLER):
        found['per_caller'] = parse_per_caller(raw(ENV.BUDGET_PER_CALLER), ENV.BUDGET_PER_CALLER)
    if raw(ENV.BUDGET_WARN_AT):
        try:
            found['warn_at'] = parse_warn_at(raw(ENV.BUDGET_WARN_AT))
        except ValueError:
            what, example = 'a fraction, a percentage or an amount', '0.8'
            raise _refused(ENV.BUDGET_WARN_AT, what, example, raw(ENV.BUDGET_WARN_AT)) from None
    if given is not None:
        found |= given.model_dump(exclude_defaults=True)
    found['total'] = total
    chosen = Budget.model_validate(found)
    return None if chosen.empty else chosen


def wait_budget(environ: Mapping[str, str] | None = None, given: float | None = None, *, mcp: bool = False) -> float:
    """The wait budget of a call: `given`, else `PERPLEXITY_WAIT_SECONDS`, else the default of the way in.

    Standard library only, so the MCP server's start-up path can call it before anything heavy loads.
    """
    if given is not None:
        return check_seconds(given, 'wait_seconds')
    raw = variable(ENV.WAIT_SECONDS, environ)
    if raw:
        return check_seconds(raw)
    return DEFAULT_MCP_WAIT_SECONDS if mcp else DEFAULT_WAIT_SECONDS


def _secret(value: str) -> SecretStr | None:
    if not value:
        return None
    from pydantic import SecretStr

    return SecretStr(value)


def skip_idle_logfire_plugin() -> None:
    """Skip Logfire's pydantic plugin in this process while it would record nothing.

    Loading it imports Logfire (a third of a second of every command's start, and before the first MCP tool call can
    run), yet it records only with `LOGFIRE_PYDANTIC_PLUGIN_RECORD` set. Only this process, only that plugin, and
    never over an explicit `PYDANTIC_DISABLE_PLUGINS` or a plugin set to record.
    """
    if 'PYDANTIC_DISABLE_PLUGINS' in os.environ:
        return
    if os.environ.get('LOGFIRE_PYDANTIC_PLUGIN_RECORD', 'off').strip().lower() not in ('', 'off'):
        return
    os.environ['PYDANTIC_DISABLE_PLUGINS'] = 'logfire-plugin'
