"""`pydantic-ai-perplexity doctor`: check the setup line by line, each failure with its fix."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable

__all__ = ('run_checks',)

_PASS = 'pass'  # noqa: S105 - a status word, not a secret
_FAIL = 'FAIL'
_INFO = 'info'


async def run_checks(emit: Callable[[str], None]) -> bool:
    """Run every check, emitting one line each; return whether all required ones passed."""
    from .client import PerplexityClient
    from .errors import AuthenticationError, ConfigurationError, NotFoundError, PermissionDeniedError, PerplexityError
    from .ledger import Ledger

    ok = True

    def line(status: str, what: str, detail: str = '') -> None:
        emit(f'[{status}] {what}' + (f': {detail}' if detail else ''))

    key = os.environ.get('PERPLEXITY_API_KEY', '')
    if key:
        line(_PASS, 'PERPLEXITY_API_KEY is set', f'{len(key)} characters')
    else:
        ok = False
        line(_FAIL, 'PERPLEXITY_API_KEY is not set', 'export PERPLEXITY_API_KEY=pplx-… (from the Perplexity console)')

    try:
        client = PerplexityClient()
    except ConfigurationError as exc:
        line(_FAIL, 'base URL', f'{exc} Fix or unset PERPLEXITY_BASE_URL.')
        return False
    line(_PASS, 'base URL is safe', client.base_url)

    async with client:
        try:
            models = await client.models()
        except PerplexityError as exc:
            ok = False
            line(_FAIL, 'API reachable', f'{exc} Check the network, proxy variables and PERPLEXITY_BASE_URL.')
        else:
            line(_PASS, 'API reachable', f'{len(models)} models listed, e.g. {", ".join(m.id for m in models[:3])}')
        if key:
            try:
                await client.retrieve('resp_doctor-check')
            except NotFoundError:
                line(_PASS, 'key accepted')
            except (AuthenticationError, PermissionDeniedError) as exc:
                ok = False
                line(_FAIL, 'key accepted', f'{exc}')
            except PerplexityError as exc:
                ok = False
                line(_FAIL, 'key accepted', f'could not check: {exc}')
            else:
                line(_PASS, 'key accepted')

    ledger = Ledger()
    try:
        healthy = ledger.check()
    finally:
        ledger.close()
    if healthy:
        line(_PASS, 'ledger writable', str(ledger.path))
    else:
        ok = False
        line(
            _FAIL, 'ledger writable', f'{ledger.path} cannot be used; set PERPLEXITY_STATE_DIR to a writable directory'
        )

    budget = os.environ.get('PERPLEXITY_BUDGET_USD')
    line(_INFO, 'budget', f'${budget} cap' if budget else 'no cap (set PERPLEXITY_BUDGET_USD to add one)')

    has_logfire = importlib.util.find_spec('logfire') is not None
    otlp = os.environ.get('OTEL_EXPORTER_OTLP_ENDPOINT') or os.environ.get('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT')
    if os.environ.get('LOGFIRE_TOKEN'):
        line(
            _PASS if has_logfire else _FAIL,
            'tracing to Logfire',
            'LOGFIRE_TOKEN set'
            if has_logfire
            else 'LOGFIRE_TOKEN is set but logfire is not installed: pip install "pydantic-ai-perplexity[logfire]"',
        )
        ok = ok and has_logfire
    elif otlp:
        line(
            _PASS if has_logfire else _FAIL,
            'tracing to OTLP',
            otlp
            if has_logfire
            else 'an OTLP endpoint is set but logfire is not installed: pip install "pydantic-ai-perplexity[logfire]"',
        )
        ok = ok and has_logfire
    else:
        line(_INFO, 'tracing', 'off (set LOGFIRE_TOKEN or OTEL_EXPORTER_OTLP_ENDPOINT to export traces)')
    return ok
