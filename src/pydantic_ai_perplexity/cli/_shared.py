"""What every command shares: output on stdout and stderr (terminal-safe, wrapped to a terminal's width), errors in
the command line's words, the endpoint (the configured API or a built-in emulator), and argument checks."""

from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any

import click

from .._base.env import ENV
from .._domain.settings import variable

if TYPE_CHECKING:
    from .._ledger import Ledger

CONTEXT = {'help_option_names': ['-h', '--help'], 'max_content_width': 110}


def terminal_width(stream: Any) -> int | None:
    """The columns of the terminal `stream` writes to (COLUMNS first, as rich has it), or None when it is not one:
    piped text is never wrapped."""
    if not stream.isatty():
        return None
    if (columns := os.environ.get('COLUMNS', '')).isdigit() and int(columns) > 0:
        return int(columns)
    try:
        return os.get_terminal_size(stream.fileno()).columns or 80
    except (OSError, ValueError):
        return 80


def err(message: str, *, colour: str | None = None) -> None:
    """A notice on stderr, without the escape sequences or invisible characters a caller or a page may have put in;
    on a terminal, wrapped at spaces to its width (and in `colour` unless NO_COLOR)."""
    from .._present.terminal import for_terminal, wrap_for_terminal

    text = for_terminal(message)
    width = terminal_width(sys.stderr)
    if width is not None:
        text = wrap_for_terminal(text, width, keep_indented=True)
    click.echo(click.style(text, fg=colour) if colour and use_colour(sys.stderr) else text, err=True)


def out(text: str, *, wrap: bool = False) -> None:
    """A result on stdout, made safe for a terminal the same way (newlines and tabs kept); with `wrap`, on a terminal
    wrapped at spaces to its width, never splitting a word, a URL or an id."""
    from .._present.terminal import for_terminal, wrap_for_terminal

    text = for_terminal(text)
    width = terminal_width(sys.stdout) if wrap else None
    click.echo(wrap_for_terminal(text, width) if width is not None else text)


def out_json(text: str) -> None:
    """JSON on stdout with every character a terminal could act on or hide written as a `\\uXXXX` escape."""
    from .._present.terminal import json_for_terminal

    click.echo(json_for_terminal(text))


def start_tracing() -> None:
    from .._core.tracing import configure_tracing

    configure_tracing()  # only when LOGFIRE_TOKEN, OTEL_EXPORTER_OTLP_* or LOGFIRE_CONSOLE ask for it


@contextlib.contextmanager
def endpoint(*, no_wait: bool = False) -> Generator[dict[str, str]]:
    """The API to talk to: the configured one, or (with no key) a built-in emulator, said in one line."""
    if variable(ENV.API_KEY):
        yield {}
        return
    from ..emulator import Emulator
    from ..emulator._offline import offline_time_scale

    try:
        time_scale = offline_time_scale()
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    with Emulator(time_scale=time_scale) as emu:
        note = ' It stops when this command ends, so this run cannot be collected later.' if no_wait else ''
        err(f'No PERPLEXITY_API_KEY set: using the built-in emulator at {emu.base_url} (answers are canned).{note}')
        base_url = emu.base_url
        try:
            yield {'api_key': emu.api_key, 'base_url': base_url}
        finally:
            _end_abandoned(base_url.removeprefix('http://'))  # the runs' `api`: the base URL's host:port


def _end_abandoned(api: str) -> None:
    """The built-in emulator stops with the command: a run it left unfinished (Ctrl-C, `--no-wait`) is ended in the
    ledger as cancelled at no cost, so that fake spend never holds the budget of later runs."""
    from .._core.reconcile import end_emulated_runs
    from .._ledger import Ledger

    with Ledger() as ledger:
        end_emulated_runs(ledger, api)


#: Library wording that names Python arguments, and what the command line calls the same thing.
_CLI_WORDS = (
    (re.compile(r'the `budget_usd=` argument'), 'the --budget option'),
    (re.compile(r'on_budget="tighten" \(CLI: --tighten\)'), '--tighten'),
    (re.compile(r' \(start runs with store=True to retrieve them\)'), ''),
    (re.compile(r'\bbudget_usd='), '--budget '),
    (re.compile(r'`Budget\(day=\.\.\.\)`'), '--budget-day'),
    (re.compile(r'`Budget\(month=\.\.\.\)`'), '--budget-month'),
    (re.compile(r'`Budget\(per_run=\.\.\.\)`'), '--budget-per-run'),
    (re.compile(r'\bwait_seconds='), '--wait '),
)
_NO_KEY_FOR_JOBS = (
    'No PERPLEXITY_API_KEY set: collecting or cancelling a run asks the API, so export the key the run was '
    'started with (export PERPLEXITY_API_KEY=pplx-…). A run started without a key ran on the built-in emulator, '
    'which ended with the command that started it.'
)


def _cli_words(message: str) -> str:
    """A library message as the command line says it: flags, not Python arguments."""
    if message.startswith('No Perplexity API key'):
        return _NO_KEY_FOR_JOBS
    for pattern, replacement in _CLI_WORDS:
        message = pattern.sub(replacement, message)
    return message


def use_colour(stream: Any) -> bool:
    """Whether to colour what goes to `stream`: a terminal, unless NO_COLOR is set or TERM is dumb."""
    return stream.isatty() and not os.environ.get('NO_COLOR') and os.environ.get('TERM') != 'dumb'


def fail(exc: BaseException) -> None:
    from .._base.errors import PerplexityError

    if isinstance(exc, PerplexityError):
        from .._base.redact import redact_urls_in
        from .._present.terminal import for_terminal

        raise click.ClickException(for_terminal(_cli_words(redact_urls_in(str(exc))))) from None
    raise exc


def open_ledger() -> Ledger:
    """The ledger `PERPLEXITY_LEDGER_URL` names; a value it cannot use is a one-line error naming the variable."""
    from .._base.errors import ConfigurationError
    from .._ledger import Ledger

    try:
        return Ledger()
    except ConfigurationError as exc:
        fail(exc)
        raise  # pragma: no cover - fail always raises


#: Longer than any run id the API gives (`resp_` and a few dozen characters), short enough to show in a message.
_MAX_ID_CHARS = 256


def checked_response_id(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """A RESPONSE_ID argument checked before it reaches a URL: printable text of a sane length."""
    if len(value) > _MAX_ID_CHARS:
        raise click.BadParameter(
            f'{len(value):,} characters is too long for a run id (ids look like resp_…, at most {_MAX_ID_CHARS} '
            'characters); copy it again from `pydantic-ai-perplexity jobs list`.'
        )
    if not value.strip() or not value.isprintable():
        raise click.BadParameter(
            'a run id is printable text such as resp_…; copy it again from `pydantic-ai-perplexity jobs list`.'
        )
    return value


def _checked(value: float | None, check: Callable[[float], float], refusal: str) -> float | None:
    """`value` through the check its variable gets in `settings.py`; a bad one is click's error, `refusal` its words."""
    if value is None:
        return None
    from .._base.errors import ConfigurationError

    try:
        return check(value)
    except ConfigurationError:
        raise click.BadParameter(refusal.format(value=value)) from None


def check_seconds_arg(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    """A number of seconds, finite and 0 or more, checked as PERPLEXITY_WAIT_SECONDS is."""
    from .._domain.settings import check_seconds

    return _checked(value, check_seconds, '{value:g} is not a number of seconds: give 0 or more, e.g. 600.')


def check_budget_arg(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    """A budget in USD, finite and 0 or more, checked as PERPLEXITY_BUDGET_USD is."""
    from .._domain.settings import check_budget

    refusal = '{value:g} is not a budget: give a number of US dollars, 0 or more, e.g. --budget 5.'
    return _checked(value, check_budget, refusal)
