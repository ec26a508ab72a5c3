"""`pydantic-ai-perplexity doctor`: check the setup, one line per check, each failure with its fix.

The checks, in order: the key is set; the base URL is safe; the API answers and lists models; the key is
accepted; the research settings (`PERPLEXITY_EFFORT`, `PERPLEXITY_WAIT_SECONDS`, `PERPLEXITY_BUDGET_USD`) are
valid; the ledger is writable; tracing (Logfire or OTLP) is configured as the environment says. A check that
cannot run because an earlier one failed fails too, saying which to fix first.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..client import PerplexityClient

__all__ = ('Check', 'run_checks')

#: What the API checks say when the base URL answered as an emulator: passing them proves nothing about Perplexity.
EMULATOR_NOTE = 'an emulator answered (x-pplx-emulator header), not Perplexity: answers are canned'

_LOW_DISK_BYTES = 1 << 20  # below this a ledger write (a WAL frame or two per run) may fail


@dataclass(frozen=True)
class Check:
    """One line of the report: what was checked, whether it passed, what was found, and how to fix a failure."""

    name: str
    ok: bool
    detail: str = ''
    fix: str = ''
    #: Whether what answered this check is an emulator (its `x-pplx-emulator` header), not Perplexity.
    emulator: bool = False

    def line(self) -> str:
        """`[pass] name: detail` or `[FAIL] name: detail — fix: …`."""
        text = f'[{"pass" if self.ok else "FAIL"}] {self.name}'
        if self.detail:
            text += f': {self.detail}'
        if not self.ok and self.fix:
            text += f' — fix: {self.fix}'
        return text


async def run_checks(emit: Callable[[Check], None]) -> bool:
    """Run every check, passing each result to `emit` as it is known; return whether all passed."""
    from .._base.env import ENV
    from .._base.errors import AuthenticationError, ConfigurationError, PermissionDeniedError, PerplexityError
    from .._domain.settings import variable
    from ..client import PerplexityClient

    results: list[Check] = []

    def report(check: Check) -> None:
        results.append(check)
        emit(check)

    key = variable(ENV.API_KEY)
    key_problem = _key_problem()
    if key_problem:
        report(Check(f'{ENV.API_KEY} is set', False, key_problem, 'copy the key again and export it once more'))
    elif key:
        report(Check(f'{ENV.API_KEY} is set', True, f'{len(key)} characters'))
    else:
        report(
            Check(
                f'{ENV.API_KEY} is set',
                False,
                'not set (research then runs against the built-in emulator)',
                'export PERPLEXITY_API_KEY=pplx-… (create one at https://www.perplexity.ai/account/api)',
            )
        )

    try:
        # A key that cannot be sent is reported above; the API is still checked, without it.
        client = PerplexityClient(api_key='') if key_problem else PerplexityClient()
    except ConfigurationError as exc:
        report(Check('base URL is safe', False, str(exc), 'unset PERPLEXITY_BASE_URL, or give an https:// URL'))
        for name in ('API reachable', 'key accepted'):
            report(Check(name, False, 'not checked', 'fix the base URL first'))
    else:
        report(Check('base URL is safe', True, client.base_url))
        async with client:
            try:
                models = await client.models()
            except (AuthenticationError, PermissionDeniedError):
                # The live model list needs an accepted key: a refusal still shows the API answering.
                report(Check('API reachable', True, 'it answered (the model list needs an accepted key)'))
                reachable = True
            except PerplexityError as exc:
                # The error's own advice ("Check the network ...") is left out: the fix below says it once.
                found = str(exc).split('. ', 1)[0].rstrip('.') + '.'
                custom = bool(variable(ENV.BASE_URL))
                fix = (
                    f'make sure {client.base_url} is up (e.g. `pydantic-ai-perplexity emulator`), '
                    'or unset PERPLEXITY_BASE_URL to use the public API'
                    if custom
                    else 'check the network and the proxy variables (HTTPS_PROXY, NO_PROXY)'
                )
                report(Check('API reachable', False, found, fix))
                reachable = False
            else:
                example = ', '.join(m.id for m in models[:3])
                listed = f'{len(models)} model{"" if len(models) == 1 else "s"} listed, e.g. {example}'
                if client.emulated:
                    listed = f'{EMULATOR_NOTE}; {listed}'
                report(Check('API reachable', True, listed, emulator=bool(client.emulated)))
                reachable = True
            if key_problem:
                report(Check('key accepted', False, 'not checked', 'fix PERPLEXITY_API_KEY first'))
            elif not key:
                report(Check('key accepted', False, 'no key to check', 'set PERPLEXITY_API_KEY'))
            elif not reachable:
                report(Check('key accepted', False, 'not checked', 'make the API reachable first'))
            else:
                check = await _key_check(client)
                if client.emulated:
                    check = replace(check, detail=check.detail or 'by the emulator, not Perplexity', emulator=True)
                report(check)

    report(_settings_check())
    report(_ledger_check())
    report(_ledger_privacy_check())
    report(_tracing_check())
    return all(check.ok for check in results)


def _key_problem() -> str | None:
    """Why the key in the environment cannot be sent (whitespace, control or non-ASCII characters), never showing it."""
    from .._base.errors import ConfigurationError
    from ..client._settings import resolve_api_key

    try:
        resolve_api_key(None)
    except ConfigurationError as exc:
        return str(exc)
    return None


async def _key_check(client: PerplexityClient) -> Check:
    """Ask for a run that cannot exist: a 404 means the key was accepted, a 401/403 that it was not.

    The id is well formed: the live API answers a malformed one with a 400 before it looks the run up.
    """
    from .._base.errors import AuthenticationError, NotFoundError, PermissionDeniedError, PerplexityError

    try:
        await client.retrieve('resp_00000000-0000-0000-0000-000000000000')
    except NotFoundError:
        return Check('key accepted', True)
    except (AuthenticationError, PermissionDeniedError) as exc:
        return Check('key accepted', False, str(exc), 'copy the key again from your Perplexity API settings')
    except PerplexityError as exc:
        return Check('key accepted', False, f'could not check: {exc}', 'run doctor again; if it persists, check status')
    return Check('key accepted', True)


def _settings_check() -> Check:
    from .._base.errors import ConfigurationError
    from .._domain.settings import Settings
    from ..client._settings import DEFAULT_BASE_URL

    try:
        # The key and the base URL have their own checks above; this one reads every other variable.
        settings = Settings.load(api_key='', base_url=DEFAULT_BASE_URL)
    except ConfigurationError as exc:
        return Check(
            'research settings', False, str(exc), 'fix or unset the variable named (see `Settings` for every one)'
        )
    budget = settings.budget
    cap = f'budget: {budget.describe()}' if budget is not None else 'no budget cap (PERPLEXITY_BUDGET_USD adds one)'
    waits = f'waits {settings.wait_seconds:g} s (MCP {settings.mcp_wait_seconds:g} s)'
    return Check('research settings', True, f'effort {settings.effort}, {waits}, {cap}')


def _ledger_check() -> Check:
    from .._base.errors import ConfigurationError
    from .._ledger import Ledger

    try:
        ledger = Ledger()
    except ConfigurationError as exc:  # the message names the variable and shows no password
        return Check('ledger writable', False, str(exc), 'fix or unset PERPLEXITY_LEDGER_URL')
    try:
        healthy = ledger.check()
    finally:
        ledger.close()
    if healthy and ledger.path is not None:
        free = shutil.disk_usage(ledger.path.parent).free
        if free < _LOW_DISK_BYTES:
            return Check(
                'ledger writable',
                False,
                f'{ledger.describe()} is degraded: {free:,} bytes free on its disk, so writes fail (they are kept '
                f'in memory until space is free)',
                f'free space on the disk of {ledger.path.parent}, or set PERPLEXITY_STATE_DIR to another disk',
            )
    if healthy:
        return Check('ledger writable', True, ledger.describe())
    return Check(
        'ledger writable',
        False,
        f'{ledger.describe()} cannot be used',
        'set PERPLEXITY_STATE_DIR to a writable directory on a local disk',
    )


def _ledger_privacy_check() -> Check:
    """Whether other local users can read the SQLite ledger (every stored question is in it)."""
    from .._base.errors import ConfigurationError
    from .._ledger import Ledger, private_mode_problem

    try:
        ledger = Ledger()
    except ConfigurationError:
        return Check('ledger private', False, 'not checked', 'fix the ledger first')
    if ledger.path is None:
        return Check('ledger private', True, 'on a PostgreSQL server (its own access rules)')
    problem = private_mode_problem(ledger.path)
    if problem is None:
        return Check('ledger private', True, 'readable by this user only')
    return Check(
        'ledger private',
        False,
        f'other local users can read the stored questions: {problem}',
        f'chmod 700 {ledger.path.parent} && chmod 600 {ledger.path}*',
    )


def _tracing_check() -> Check:
    from .._base.errors import install_hint
    from .._base.redact import redact_url

    has_logfire = importlib.util.find_spec('logfire') is not None
    install = install_hint('logfire')
    otlp = os.environ.get('OTEL_EXPORTER_OTLP_ENDPOINT') or os.environ.get('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT')
    if os.environ.get('LOGFIRE_TOKEN'):
        if has_logfire:
            return Check('tracing', True, 'to Logfire (LOGFIRE_TOKEN set)')
        return Check('tracing', False, 'LOGFIRE_TOKEN is set but logfire is not installed', install)
    if otlp:
        if has_logfire:
            return Check('tracing', True, f'to the OTLP endpoint {redact_url(otlp)}')
        return Check('tracing', False, 'an OTLP endpoint is set but logfire is not installed', install)
    return Check('tracing', True, 'off (set LOGFIRE_TOKEN or OTEL_EXPORTER_OTLP_ENDPOINT to export traces)')
