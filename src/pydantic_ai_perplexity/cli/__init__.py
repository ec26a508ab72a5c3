"""The `pydantic-ai-perplexity` command: research, jobs, doctor, config, mcp, emulator.

Results go to stdout, progress and notices to stderr: `research "…" > answer.md` keeps the answer clean, and
`--json` gives machines the whole result. Progress is a live display when stderr is a terminal and plain lines
otherwise. Each command imports what it needs when it runs, so `pydantic-ai-perplexity mcp` starts serving
without loading the research stack (or rich) first.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import time
import uuid
from collections.abc import Callable, Generator, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, NoReturn, cast

import click

if TYPE_CHECKING:
    from .._domain.results import ResearchResult, Source
    from .._domain.steps import Step
    from .._ledger import Ledger, RunRecord

STATUSES = (
    'queued', 'in_progress', 'requires_action', 'completed', 'incomplete', 'failed', 'cancelled', 'cancelling',
    'reserved',
)  # fmt: skip
#: Exit status of `research` / `jobs wait` when the run ended failed, incomplete or cancelled.
EXIT_RUN_FAILED = 1
#: Exit status of `research --strict` / `jobs wait --strict` when the run completed without finding a single source.
EXIT_FOUND_NOTHING = 3

_CONTEXT = {'help_option_names': ['-h', '--help'], 'max_content_width': 110}


def _width(stream: Any) -> int | None:
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


def _err(message: str, *, colour: str | None = None) -> None:
    """A notice on stderr, without the escape sequences or invisible characters a caller or a page may have put in;
    on a terminal, wrapped at spaces to its width (and in `colour` unless NO_COLOR)."""
    from .._present.terminal import for_terminal, wrap_for_terminal

    text = for_terminal(message)
    width = _width(sys.stderr)
    if width is not None:
        text = wrap_for_terminal(text, width, keep_indented=True)
    click.echo(click.style(text, fg=colour) if colour and _colour(sys.stderr) else text, err=True)


def _out(text: str, *, wrap: bool = False) -> None:
    """A result on stdout, made safe for a terminal the same way (newlines and tabs kept); with `wrap`, on a terminal
    wrapped at spaces to its width, never splitting a word, a URL or an id."""
    from .._present.terminal import for_terminal, wrap_for_terminal

    text = for_terminal(text)
    width = _width(sys.stdout) if wrap else None
    click.echo(wrap_for_terminal(text, width) if width is not None else text)


def _out_json(text: str) -> None:
    """JSON on stdout with every character a terminal could act on or hide written as a `\\uXXXX` escape."""
    from .._present.terminal import json_for_terminal

    click.echo(json_for_terminal(text))


def _configure_tracing() -> None:
    from .._core.tracing import configure_tracing

    configure_tracing()  # only when LOGFIRE_TOKEN, OTEL_EXPORTER_OTLP_* or LOGFIRE_CONSOLE ask for it


@contextlib.contextmanager
def _endpoint(*, no_wait: bool = False) -> Generator[dict[str, str]]:
    """The API to talk to: the configured one, or (with no key) a built-in emulator, said in one line."""
    if os.environ.get('PERPLEXITY_API_KEY'):
        yield {}
        return
    from ..emulator import Emulator

    with Emulator(time_scale=float(os.environ.get('PERPLEXITY_EMULATOR_TIME_SCALE') or '0.05')) as emu:
        note = ' It stops when this command ends, so this run cannot be collected later.' if no_wait else ''
        _err(f'No PERPLEXITY_API_KEY set: using the built-in emulator at {emu.base_url} (answers are canned).{note}')
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


def _colour(stream: Any) -> bool:
    """Whether to colour what goes to `stream`: a terminal, unless NO_COLOR is set or TERM is dumb."""
    return stream.isatty() and not os.environ.get('NO_COLOR') and os.environ.get('TERM') != 'dumb'


def _fail(exc: BaseException) -> None:
    from .._base.errors import PerplexityError

    if isinstance(exc, PerplexityError):
        from .._base.redact import redact_urls_in
        from .._present.terminal import for_terminal

        raise click.ClickException(for_terminal(_cli_words(redact_urls_in(str(exc))))) from None
    raise exc


class _Refused(click.ClickException):
    """A file the command will not touch, said in one line; exit status 2, as for a bad argument."""

    exit_code = 2


def _ledger() -> Ledger:
    """The ledger `PERPLEXITY_LEDGER_URL` names; a value it cannot use is a one-line error naming the variable."""
    from .._base.errors import ConfigurationError
    from .._ledger import Ledger

    try:
        return Ledger()
    except ConfigurationError as exc:
        _fail(exc)
        raise  # pragma: no cover - _fail always raises


#: Longer than any run id the API gives (`resp_` and a few dozen characters), short enough to show in a message.
_MAX_ID_CHARS = 256


def _response_id(ctx: click.Context, param: click.Parameter, value: str) -> str:
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


def _seconds(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    """A number of seconds, finite and 0 or more, checked as PERPLEXITY_WAIT_SECONDS is."""
    from .._domain.settings import check_seconds

    return _checked(value, check_seconds, '{value:g} is not a number of seconds: give 0 or more, e.g. 600.')


def _budget(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    """A budget in USD, finite and 0 or more, checked as PERPLEXITY_BUDGET_USD is."""
    from .._domain.settings import check_budget

    refusal = '{value:g} is not a budget: give a number of US dollars, 0 or more, e.g. --budget 5.'
    return _checked(value, check_budget, refusal)


class _ResearchCommand(click.Command):
    """`research`, whose run options are made from `ResearchOptions` when first needed (after the group's callback,
    so pydantic loads no idle plugin), with the fields' names, help and limits."""

    _derived = False

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        if not self._derived:
            self._derived = True
            self.params[1:1] = _option_params()  # after QUESTION, before the CLI's own options
        return super().get_params(ctx)


def _option_params() -> list[click.Parameter]:
    """A click option per `ResearchOptions` field the CLI offers (`Opt.cli`), typed and bounded as the field is."""
    import typing

    from annotated_types import Ge, Le

    from .._domain.options import option_fields

    params: list[click.Parameter] = []
    for name, (info, opt) in option_fields().items():
        if opt.cli is None:
            continue
        kind = opt.tool_type if opt.tool_type is not None else info.annotation
        inner = [a for a in typing.get_args(kind) if a is not type(None)] or [kind]
        choices = typing.get_args(inner[0]) if typing.get_origin(inner[0]) is typing.Literal else ()
        low = next((m.ge for m in info.metadata if isinstance(m, Ge)), None)
        high = next((m.le for m in info.metadata if isinstance(m, Le)), None)
        param_type: click.ParamType[Any] | type[Any] = str
        if choices:
            param_type = click.Choice([str(c) for c in choices])
        elif inner[0] is int:
            param_type = click.IntRange(cast('int | None', low), cast('int | None', high))
        multiple = typing.get_origin(inner[0]) is list
        help_text = opt.cli_help or info.description or ''
        params.append(click.Option([opt.cli, name], type=param_type, multiple=multiple, help=help_text))
    return params


def _research_options(given: dict[str, Any]) -> dict[str, Any]:
    """The options the command line gave (`--domain` repeated as a list), checked as `ResearchOptions` checks them."""
    from .._base.errors import InvalidArgumentError
    from .._domain.options import ResearchOptions, option_fields

    fields = option_fields()
    options: dict[str, Any] = {}
    for name, value in given.items():
        options[name] = (list(cast('tuple[Any, ...]', value)) or None) if isinstance(value, tuple) else value
    try:
        ResearchOptions.parse(**options)
    except InvalidArgumentError as exc:
        flag = fields[exc.argument][1].cli if exc.argument in fields else None
        text = str(exc).removeprefix(f'{exc.argument}=')  # the hint names the flag: "Invalid value for --after"
        for name, (_, spec) in fields.items():
            text = re.sub(rf'\b{re.escape(name)}=', f'{spec.cli} ', text)
        raise click.BadParameter(text, param_hint=flag) from None
    return options


# ---------------------------------------------------------------------------------------------------------------
# progress on stderr


#: A resumed stream first replays the run's earlier events in one burst: steps closer together than this, from the
#: start of the wait on, are that burst (their real times are unknown: the events carry none).
BURST_GAP_S = 0.5


class _StepDisplay:
    """Research progress on stderr: a live rich display on a terminal, one plain line per step otherwise.

    The live line is the spinner, the timer (first, so a narrow terminal never cuts it), the current step and the
    counts, fitted to the width; the question is not repeated (the first step, `searching: ...`, says it).

    For a run started earlier (`run_created_at`, the API's `created_at`, as `jobs wait` gives it), steps are timed
    from the run's start, in whole seconds (the API's clock has no finer grain), and the steps its stream replays in
    one burst when it opens are marked `earlier`, with no time: nothing says when they happened.
    """

    def __init__(self, *, run_created_at: float | None = None) -> None:
        self.live = sys.stderr.isatty()
        self.started = time.monotonic()
        self.run_created_at = run_created_at
        self._replaying = run_created_at is not None  # until the stream's first pause: the replayed burst
        self._last = self.started
        self._bar: Any = None
        self._task: Any = None

    def __enter__(self) -> _StepDisplay:
        if self.live:
            from rich.console import Console
            from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

            self._bar = Progress(
                SpinnerColumn(),
                TimeElapsedColumn(),
                TextColumn('{task.description}'),
                console=Console(stderr=True),
                transient=True,
            )
            self._bar.start()
            self._task = self._bar.add_task(self._describe('starting', ''), total=None)
        return self

    def _describe(self, step: str, counts: str) -> str:
        """The step and the counts in the room the spinner and the timer leave: the step gives way first, then the
        counts; each cut ends in `…`."""
        from rich.cells import cell_len
        from rich.markup import escape
        from rich.text import Text

        room = self._bar.console.width - 12  # spinner, timer (0:00:00) and the spaces between the columns
        if counts and cell_len(counts) + 17 > room:
            counts = ''  # too narrow for both: the step alone
        if counts:
            room -= cell_len(counts) + 2

        def fit(text: str, width: int) -> str:
            cut = Text(text)
            cut.truncate(max(width, 1), overflow='ellipsis')
            return cut.plain

        return f'{escape(fit(step, room))}  [dim]{escape(counts)}[/]' if counts else escape(fit(step, room))

    def _when(self, step: Step) -> str:
        """When the step happened, 7 characters: seconds since the wait (or the run) started, or `earlier`."""
        if self.run_created_at is None:
            return f'{step.progress.elapsed_s:6.1f}s'
        now = time.monotonic()
        gap, self._last = now - self._last, now
        if self._replaying and gap <= BURST_GAP_S:
            return 'earlier'
        self._replaying = False
        return f'{max(0.0, time.time() - self.run_created_at):6.0f}s'

    def __call__(self, step: Step) -> None:
        """The `on_progress` callback."""
        from .._present.terminal import line_for_terminal

        progress = step.progress
        detail = line_for_terminal(step.detail)  # search queries and page titles come from the model and the web
        when = self._when(step)
        if self._bar is not None:
            from rich.text import Text

            self._bar.console.print(Text.assemble((f'{when} ', 'dim'), detail))
            self._bar.update(self._task, description=self._describe(detail, progress.summary()))
        else:
            _err(f'  [{when}] {detail}')

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._bar is not None:
            self._bar.stop()

    def summary(self, result: ResearchResult) -> None:
        """One closing line on stderr: how the run ended, how long it took, what it did."""
        elapsed = time.monotonic() - self.started
        line = f'{result.status} in {elapsed:.1f}s: {result.progress.summary()}'
        if self.run_created_at is not None and result.created_at and result.completed_at:
            took = (result.completed_at - result.created_at).total_seconds()
            line = f'{result.status} in {took:.0f}s (waited {elapsed:.1f}s here): {result.progress.summary()}'
        if self._bar is not None:
            mark = (
                '[red]✗[/]'
                if result.status != 'completed'
                else '[yellow]![/]'
                if _found_nothing(result)
                else '[green]✓[/]'
            )
            self._bar.console.print(f'{mark} {line}')
        else:
            _err(line)


# ---------------------------------------------------------------------------------------------------------------
# the command


@click.group(context_settings=_CONTEXT)
@click.version_option(package_name='pydantic-ai-perplexity')
def cli() -> None:
    """Perplexity research from the command line, over MCP, and offline against an emulator.

    Results go to stdout; progress and notices to stderr. Without PERPLEXITY_API_KEY, research runs against a
    built-in emulator (canned answers, no network).

    \b
    Examples:
      pydantic-ai-perplexity research "What changed in the EU AI Act this month?"
      pydantic-ai-perplexity jobs list
      pydantic-ai-perplexity doctor
      pydantic-ai-perplexity mcp                      # serve MCP over stdio
      pydantic-ai-perplexity config claude-desktop    # print a ready client config
      pydantic-ai-perplexity emulator --port 8787     # the offline API on loopback
    """
    from .._domain.settings import skip_idle_logfire_plugin

    skip_idle_logfire_plugin()


# ---------------------------------------------------------------------------------------------------------------
# research


def _mcp_server(value: str) -> dict[str, str]:
    label, sep, url = value.partition('=')
    if not sep or not label or not url:
        raise click.BadParameter(f'{value!r}: give it as LABEL=URL, e.g. docs=https://mcp.example.com/mcp')
    return {'type': 'mcp', 'server_label': label, 'server_url': url}


@cli.command(cls=_ResearchCommand, context_settings=_CONTEXT)
@click.argument('question')
@click.option(
    '--schema',
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help='A JSON Schema file: the answer comes back as JSON that fits it.',
)
@click.option(
    '--mcp-server', 'mcp_servers', multiple=True, metavar='LABEL=URL', help='A remote MCP server the run may call.'
)
@click.option(
    '--budget',
    'budget_usd',
    type=float,
    callback=_budget,
    help="A lifetime cap in USD on recorded spend: every run in the ledger (all processes, all time, this run's "
    'reservation included). A run that does not fit is refused, unless --tighten.',
)
@click.option(
    '--tighten',
    is_flag=True,
    help='When the run does not fit the budget, run it with lower limits (steps, output, tool calls) instead of '
    'refusing it; the output says which.',
)
@click.option(
    '--budget-day', type=float, callback=_budget, help="Refuse the run if today's spend (UTC) would pass this many USD."
)
@click.option(
    '--budget-month',
    type=float,
    callback=_budget,
    help="Refuse the run if this month's spend would pass this many USD.",
)
@click.option(
    '--budget-per-run', type=float, callback=_budget, help='Tighten or refuse the run if it could cost more than this.'
)
@click.option(
    '--wait',
    'wait_seconds',
    type=float,
    callback=_seconds,
    help='Wait at most this many seconds, then print the run id.',
)
@click.option('--no-wait', is_flag=True, help='Start the run, print its id and exit (collect it with `jobs wait`).')
@click.option(
    '--reuse-within',
    type=float,
    callback=_seconds,
    help='Answer from a run of the same question and options that finished within this many seconds (not billed).',
)
@click.option('--json', 'as_json', is_flag=True, help='Print the full result as JSON.')
@click.option(
    '--strict',
    is_flag=True,
    help='Exit with status 3 when the run completed but found nothing (not a single source).',
)
def research(
    question: str,
    schema: Path | None,
    mcp_servers: tuple[str, ...],
    budget_usd: float | None,
    budget_day: float | None,
    budget_month: float | None,
    budget_per_run: float | None,
    tighten: bool,
    wait_seconds: float | None,
    no_wait: bool,
    reuse_within: float | None,
    as_json: bool,
    strict: bool,
    **given: Any,
) -> None:
    """Research QUESTION and print the cited answer, numbered sources and cost.

    A run still going after the wait (PERPLEXITY_WAIT_SECONDS, default 600 s) is not lost: its id is printed,
    and `jobs wait ID` collects it. The exit status is 1 when the run failed or was cut short. A run that found
    nothing (no source at all) says so in a yellow line; with --strict it exits with status 3.

    \b
    Examples:
      pydantic-ai-perplexity research "Who won the 2026 Turing Award?" --effort fast
      pydantic-ai-perplexity research "State of solid-state batteries" --effort high --no-wait
      pydantic-ai-perplexity research "EU AI Act news" --recency week --domain europa.eu --json
      pydantic-ai-perplexity research "Top 3 heat pump makers" --schema makers.schema.json
    """
    import anyio

    _configure_tracing()
    options: dict[str, Any] = _research_options(given)
    options['mcp_servers'] = [_mcp_server(m) for m in mcp_servers] or None
    if schema is not None:
        try:
            options['output_type'] = json.loads(schema.read_text(encoding='utf-8'))
        except ValueError as exc:
            raise click.BadParameter(f'{schema} is not JSON: {exc}', param_hint='--schema') from None

    started: list[str] = []  # the run's id, once the API has given it (for a Ctrl-C notice)
    key = f'cli:{uuid.uuid4().hex}'  # on the run's row: finds its id after a Ctrl-C that came during the create

    async def go(settings: dict[str, str]) -> ResearchResult:
        from .._core.researcher import Researcher
        from .._domain.budget import Budget

        windows = Budget(day=budget_day, month=budget_month, per_run=budget_per_run)
        async with Researcher(
            origin='cli',
            wait_seconds=wait_seconds,
            budget_usd=budget_usd,
            budget=None if windows.empty else windows,
            on_budget='tighten' if tighten else 'refuse',
            api_key=settings.get('api_key'),
            base_url=settings.get('base_url'),
        ) as researcher:
            if no_wait:
                return await researcher.start(question, request_id=key, **options)
            with _StepDisplay() as display:
                result = await researcher.run(
                    question,
                    on_progress=display,
                    on_started=started.append,
                    request_id=key,
                    reuse_within=reuse_within,
                    **options,
                )
            if result.done:
                display.summary(result)
            return result

    emulated = not os.environ.get('PERPLEXITY_API_KEY')
    try:
        with _endpoint(no_wait=no_wait) as settings:
            result = anyio.run(go, settings)
    except KeyboardInterrupt:
        _interrupted(started[-1] if started else _bound_to(key), emulated=emulated)
    except Exception as exc:
        _fail(exc)
        return
    _print_outcome(result, as_json=as_json, builtin_emulator=emulated, strict=strict)


def _bound_to(key: str) -> str | None:
    """The id of the run this command's create made, if it reached the ledger (the create is finished before a
    Ctrl-C is let through, so a run the API created is there)."""
    from .._ledger import Ledger, is_provisional

    with Ledger() as ledger:
        found = ledger.list(request_id=key, limit=1)
    return found[0].response_id if found and not is_provisional(found[0].response_id) else None


#: Exit status after Ctrl-C, as a shell reports a command ended by SIGINT.
EXIT_INTERRUPTED = 130


def _interrupted(response_id: str | None, *, emulated: bool, collecting: bool = False) -> NoReturn:
    """After Ctrl-C: which run was going and how to collect or cancel it (it goes on server-side), then exit 130."""
    if response_id is None:
        _err(
            "Interrupted before the run's id came back. If it started, it is in the ledger: "
            'see `pydantic-ai-perplexity jobs list`.'
        )
    elif emulated:
        _err(f'Interrupted. Run {response_id} was on the built-in emulator, which stopped with this command.')
    else:
        what = 'Stopped waiting' if collecting else 'Interrupted'
        _err(
            f'{what}. Run {response_id} goes on server-side (and is billed) until it ends.\n'
            f'  Collect it: pydantic-ai-perplexity jobs wait {response_id}\n'
            f'  Cancel it:  pydantic-ai-perplexity jobs cancel {response_id}'
        )
    sys.exit(EXIT_INTERRUPTED)


def _found_nothing(result: ResearchResult) -> bool:
    """Whether a completed run found not a single source: its answer rests on no page."""
    return result.status == 'completed' and not result.sources


def _print_outcome(
    result: ResearchResult, *, as_json: bool, builtin_emulator: bool = False, strict: bool = False
) -> None:
    """Print a result (`research`, `jobs wait`); a run that ended other than `completed` exits `EXIT_RUN_FAILED`, one
    that found nothing says so in yellow, and exits `EXIT_FOUND_NOTHING` when `strict`."""
    _print_result(result, as_json=as_json, builtin_emulator=builtin_emulator)
    if result.done and result.status != 'completed':
        sys.exit(EXIT_RUN_FAILED)
    if _found_nothing(result):
        _err(
            'Found nothing: the run completed without a single source, so the answer rests on no page. Rephrase the '
            'question or widen the search (--recency, --domain).'
            + ('' if strict else ' With --strict this exits with status 3.'),
            colour='yellow',
        )
        if strict:
            sys.exit(EXIT_FOUND_NOTHING)


def _print_result(result: ResearchResult, *, as_json: bool, builtin_emulator: bool = False) -> None:
    if as_json:
        _out_json(result.model_dump_json(indent=2))
        if not result.done:
            _handoff_notice(result, builtin_emulator=builtin_emulator)
        return
    if not result.done:
        _out(result.response_id)
        _handoff_notice(result, builtin_emulator=builtin_emulator)
        return
    from .._present.model_text import answer_with_source_numbers, tightened_note

    if result.error:
        _err(f'The run ended {result.status}: {result.error}')
    if result.data is not None:
        _out_json(json.dumps(result.data, indent=2, ensure_ascii=False))
    else:
        _out(answer_with_source_numbers(result), wrap=True)
    if result.sources:
        _out('\nSources:')
        _print_sources(result.sources)
    if result.orphan_markers:
        _out(f'\nMarkers pointing at no source: {", ".join(result.orphan_markers)}', wrap=True)
    if note := tightened_note(result):
        _out(f'\n{note}', wrap=True)
    for note in result.notes:
        _out(f'\n{note}', wrap=True)
    cost = f'${result.cost_usd:.4f}' if result.cost_usd is not None else 'cost unknown'
    status = f'{result.status} · emulated' if result.emulated else result.status  # never taken for a real answer
    _out('\n' + _joined([status, result.effort or '-', result.model or '-', cost, result.response_id]))


def _print_sources(sources: Sequence[Source]) -> None:
    """The numbered sources, each its title (wrapped, marked when not cited) and, on its own line, the URL whole: a
    URL is never cut, so it can be copied."""
    from .._present.terminal import line_for_terminal

    for s in sources:
        title = line_for_terminal(s.title or s.domain) + ('' if s.cited else '  (not cited)')
        _out(f'[{s.n}] {title}', wrap=True)
        _out(f'    {line_for_terminal(s.url)}')


def _joined(parts: list[str], sep: str = ' · ') -> str:
    """`parts` joined by `sep`; on a terminal, a line breaks between parts, never inside one (a model, a run id)."""
    width = _width(sys.stdout)
    if width is None:
        return sep.join(parts)
    lines = [parts[0]]
    for part in parts[1:]:
        if len(lines[-1]) + len(sep) + len(part) <= width:
            lines[-1] += sep + part
        else:
            lines[-1] += sep.rstrip()
            lines.append(part)
    return '\n'.join(lines)


def _handoff_notice(result: ResearchResult, *, builtin_emulator: bool = False) -> None:
    state = 'Started' if result.status == 'queued' else f'Still going ({result.progress.summary()})'
    where = ' (emulated)' if result.emulated else ''
    if builtin_emulator:  # it stopped with this command: there is nothing left to collect
        _err(f'{state}{where}: {result.response_id}. It cannot be collected: the built-in emulator has stopped.')
        return
    _err(
        f'{state}{where}: {result.response_id}. Collect it with: pydantic-ai-perplexity jobs wait {result.response_id}'
    )


# ---------------------------------------------------------------------------------------------------------------
# jobs


@cli.group(context_settings=_CONTEXT)
def jobs() -> None:
    """List, show, wait for and cancel runs recorded in the ledger (PERPLEXITY_STATE_DIR).

    `list` and `show` read the ledger only; `wait` and `cancel` ask the API (PERPLEXITY_API_KEY), so they work
    for runs started by any process: the CLI, a notebook, an agent or the MCP server.

    \b
    Examples:
      pydantic-ai-perplexity jobs list --status in_progress
      pydantic-ai-perplexity jobs show resp_123
      pydantic-ai-perplexity jobs wait resp_123 --timeout 600
      pydantic-ai-perplexity jobs cancel resp_123
    """
    _configure_tracing()


def _refresh(ledger: Any, records: list[RunRecord]) -> list[RunRecord]:
    """`records`, the unfinished ones refreshed from the API (bounded, cached) when a key is set."""
    from .._core.reconcile import UNFINISHED

    if not any(r.status in UNFINISHED for r in records) or not os.environ.get('PERPLEXITY_API_KEY', '').strip():
        return records
    import anyio

    from .._core.reconcile import reconcile
    from ..client import PerplexityClient

    async def go() -> dict[str, RunRecord]:
        async with PerplexityClient() as client:
            return await reconcile(ledger, client, records, timeout=5.0)

    try:
        updated = anyio.run(go)
    except Exception:  # a courtesy: the rows are shown as the ledger has them
        return records
    return [updated.get(r.response_id, r) for r in records]


def _table(
    rows: list[dict[str, str]],
    *,
    flexible: tuple[str, ...],
    right: tuple[str, ...] = (),
) -> None:
    """Rows under a header row on stdout, with rich. On a terminal it fits the width: the `flexible` columns give up
    room (in order, each down to 12 characters) and a cell too long ends in `…`, so no word is broken across lines;
    piped, nothing is cut. Cells are made terminal-safe first."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from .._present.terminal import line_for_terminal

    tty = sys.stdout.isatty()
    console = Console(highlight=False, soft_wrap=False, width=None if tty else 1_000_000)
    names = list(rows[0])
    widths = {n: max(len(n), *(len(line_for_terminal(row[n])) for row in rows)) for n in names}
    room = console.width - 2 * (len(names) - 1)
    for name in (n for n in flexible if n in widths):  # in order: the first gives up its room first
        widths[name] = max(12, min(widths[name], widths[name] - (sum(widths.values()) - room)))
    table = Table(box=None, pad_edge=False, show_edge=False, header_style='bold', padding=(0, 1), expand=False)
    for name in names:
        justify: Literal['left', 'right'] = 'right' if name in right else 'left'
        table.add_column(name, no_wrap=True, overflow='ellipsis', justify=justify, width=widths[name])
    for row in rows:
        table.add_row(*(Text(line_for_terminal(row[name])) for name in names))
    with console.capture() as captured:
        console.print(table)
    for line in captured.get().splitlines():
        click.echo(line.rstrip())


def _cost(record: RunRecord) -> str:
    if record.cost_usd is not None:
        return f'${record.cost_usd:.4f}'
    return f'~${record.estimate_usd:.4f}'


@jobs.command('list', context_settings=_CONTEXT)
@click.option('--status', type=click.Choice(STATUSES), help='Only runs with this status.')
@click.option('--limit', type=click.IntRange(1, 10_000), default=20, show_default=True, help='At most this many.')
@click.option('--json', 'as_json', is_flag=True, help='Print the records as JSON.')
def jobs_list(status: str | None, limit: int, as_json: bool) -> None:
    """Recent runs, newest first: id, status, when, cost (~ an estimate; `emulated`: no real spend), effort, question.

    \b
    Examples:
      pydantic-ai-perplexity jobs list
      pydantic-ai-perplexity jobs list --status completed --limit 5 --json
    """
    with _ledger() as ledger:
        records = _refresh(ledger, ledger.list(status=status, limit=limit))
    if as_json:
        _out_json(json.dumps([r.model_dump(mode='json') for r in records], indent=2))
        return
    if not records:
        _err(f'No runs recorded in {ledger.describe()}.')
        return
    rows = [
        {
            'run': r.response_id,
            'status': r.status,
            'started': f'{r.created_at:%Y-%m-%d %H:%M}',
            'cost': 'emulated' if r.emulated else _cost(r),  # billed by no one: never read as real spend
            'effort': r.effort or '-',
            'question': r.query,  # a question may come from any caller: shown (made terminal-safe), never acted on
        }
        for r in records
    ]
    width = _width(sys.stdout)
    fixed = sum(max(len(n), *(len(row[n]) for row in rows)) + 2 for n in rows[0] if n != 'question')
    if width is None or width - fixed >= _MIN_QUESTION_ON_ONE_LINE:
        _table(rows, flexible=('question',), right=('cost',))
    else:
        _runs_on_two_lines(rows, width)


#: `jobs list` puts each run on one line when its question gets at least this many columns there, else on two.
_MIN_QUESTION_ON_ONE_LINE = 60


def _runs_on_two_lines(rows: list[dict[str, str]], width: int) -> None:
    """Runs as a terminal narrower than one line per run shows them: the id (whole, to be copied), status and cost,
    then, indented, the date, the effort and as much of the question as the width leaves (ending in `…`)."""
    from rich.text import Text

    from .._present.terminal import line_for_terminal

    cells = [{name: line_for_terminal(value) for name, value in row.items()} for row in rows]
    size = {name: max(len(name), *(len(row[name]) for row in cells)) for name in cells[0]}

    def first(run: str, status: str, cost: str) -> str:
        return f'{run:<{size["run"]}}  {status:<{size["status"]}}  {cost:>{size["cost"]}}'.rstrip()

    def second(started: str, effort: str, question: str) -> str:
        lead = f'  {started:<{size["started"]}}  {effort:<{size["effort"]}}  '
        cut = Text(question)
        cut.truncate(max(width - len(lead), 1), overflow='ellipsis')
        if cut.plain != question and ' ' in cut.plain:  # cut between words, not inside one
            return lead + cut.plain[:-1].rsplit(' ', 1)[0].rstrip(' ,;:') + '…'
        return (lead + cut.plain).rstrip()

    bold = _colour(sys.stdout)
    for line in (first('run', 'status', 'cost'), second('started', 'effort', 'question')):
        click.echo(click.style(line, bold=True) if bold else line)
    for row in cells:
        click.echo(first(row['run'], row['status'], row['cost']))
        click.echo(second(row['started'], row['effort'], row['question']))


@jobs.command('show', context_settings=_CONTEXT)
@click.argument('response_id', callback=_response_id)
@click.option('--json', 'as_json', is_flag=True, help='Print the record as JSON.')
def jobs_show(response_id: str, as_json: bool) -> None:
    """One run as the ledger has it (refreshed from the API first if it has not ended and a key is set).

    A run still going lists what it found so far (its searches and the pages it read), from the API's snapshot; a
    finished one shows its answer and numbered sources, which the API keeps (the ledger does not): with the key the
    run was started with, on the API it ran on.

    \b
    Examples:
      pydantic-ai-perplexity jobs show resp_123
      pydantic-ai-perplexity jobs show resp_123 --json
    """
    with _ledger() as ledger:
        record = ledger.get(response_id)
        record = _refresh(ledger, [record])[0] if record is not None else None
    if record is None:
        raise click.ClickException(f'No run {response_id!r} in the ledger ({ledger.describe()}).')
    if as_json:
        _out_json(record.model_dump_json(indent=2))
        return
    from .._core.reconcile import UNFINISHED
    from .._domain.results import Usage

    snapshot = _snapshot(record)
    so_far = snapshot if snapshot is not None and not snapshot.done and record.status in UNFINISHED else None
    fields = [
        ('run', record.response_id),
        ('status', f'{record.status} (emulated: not Perplexity)' if record.emulated else record.status),
        ('question', record.query),
        ('effort', record.effort or '-'),
        ('model', record.model or '-'),
        ('started', f'{record.created_at:%Y-%m-%d %H:%M:%S} UTC by {record.origin}'),
        ('updated', f'{record.updated_at:%Y-%m-%d %H:%M:%S} UTC'),
        # A running run: what its snapshot shows it found so far (the ledger counts sources once it ends).
        ('found', f'so far: {so_far.progress.summary()}')
        if so_far is not None
        else ('sources', f'{record.sources} ({record.cited} cited)'),
        ('tokens', f'{record.input_tokens} in, {record.output_tokens} out'),
        ('cost', _cost(record) + ('' if record.cost_usd is not None else ' (estimate)')),
    ]
    billed = Usage.from_cost_details(record.cost_details)
    if billed is not None and billed.breakdown():
        fields.append(('billed', billed.breakdown()))
    if record.error:
        fields.append(('error', record.error))
    for name, value in fields:
        _out(f'{name + ":":<10}{value}')
    if so_far is not None and so_far.sources:
        from .._present.terminal import line_for_terminal

        for source in so_far.sources[:_SHOWN_SO_FAR]:
            read = ' (read)' if source.fetched else ''
            title = line_for_terminal(source.title or source.domain)
            _out(f'  [{source.n}] {title}{read} — {line_for_terminal(source.url)}')
        if len(so_far.sources) > _SHOWN_SO_FAR:
            _out(f'  (+{len(so_far.sources) - _SHOWN_SO_FAR} more)')
    if record.status in UNFINISHED:
        return
    if snapshot is None or not snapshot.done:
        _out(f'{"answer:":<10}{_no_answer_here(record)}', wrap=True)
        return
    from .._present.model_text import answer_with_source_numbers

    if snapshot.data is not None:
        _out('\n' + json.dumps(snapshot.data, indent=2, ensure_ascii=False))
    else:
        _out('\n' + (answer_with_source_numbers(snapshot) or '(no answer)'), wrap=True)
    if snapshot.sources:
        _out('\nSources:')
        _print_sources(snapshot.sources)
    if _found_nothing(snapshot):
        _err(
            'Found nothing: the run completed without a single source, so the answer rests on no page.', colour='yellow'
        )


def _no_answer_here(record: RunRecord) -> str:
    """Why `jobs show` has no answer for a finished run: the ledger keeps none, and the API could not be asked."""
    where = f'the emulator at {record.api} keeps it while it runs' if record.emulated else 'the API keeps it'
    return (
        f'not kept in the ledger; {where}: export the key the run was started with (and PERPLEXITY_BASE_URL if it '
        'ran elsewhere) and run this again.'
    )


#: At most this many sources of a running run are listed by `jobs show`.
_SHOWN_SO_FAR = 10


def _snapshot(record: RunRecord) -> ResearchResult | None:
    """The run as the API has it now, read as a result: what a running run found so far, or a finished run's answer
    and sources. None if it cannot be asked: no key, the run went to another API than the configured one (its id is
    never sent elsewhere), or the API did not answer within 5 s."""
    if not os.environ.get('PERPLEXITY_API_KEY', '').strip():
        return None
    import anyio

    from .._domain.results import ResearchResult
    from ..client import PerplexityClient

    async def go() -> ResearchResult | None:
        with anyio.move_on_after(5.0):
            async with PerplexityClient() as client:
                if record.api is not None and client.api != record.api:
                    return None
                snapshot = await client.retrieve(record.response_id)
            return ResearchResult.from_response(snapshot)
        return None

    try:
        return anyio.run(go)
    except Exception:  # a courtesy: the row is shown as the ledger has it
        return None


@jobs.command('reconcile', context_settings=_CONTEXT)
@click.option('--limit', type=click.IntRange(1, 10_000), default=200, show_default=True, help='At most this many runs.')
def jobs_reconcile(limit: int) -> None:
    """Ask the API how every run the ledger still shows as unfinished ended, and record it with its actual cost.

    Runs abandoned by Ctrl-C or by a client that left then stop holding their estimate against the budget.

    \b
    Example:
      pydantic-ai-perplexity jobs reconcile
    """
    import anyio

    from .._core.reconcile import reconcile
    from ..client import PerplexityClient

    with _ledger() as ledger:

        async def go() -> dict[str, RunRecord]:
            async with PerplexityClient() as client:
                return await reconcile(ledger, client, limit=limit, timeout=60.0, fresh_for=0.0)

        try:
            updated = anyio.run(go)
        except Exception as exc:
            _fail(exc)
            return
    from .._present.terminal import line_for_terminal

    for r in updated.values():
        _out(f'{line_for_terminal(r.response_id)}  {line_for_terminal(r.status):<11} {_cost(r):>9}')
    _err(f'{len(updated)} unfinished run{"s" if len(updated) != 1 else ""} refreshed from the API.')


@jobs.command('spend', context_settings=_CONTEXT)
@click.option('--caller', help="Only this caller (an MCP token's name, or a name an application gave).")
@click.option('--all', 'include_emulated', is_flag=True, help="Count emulated runs too (a real run's budget does not).")
@click.option('--json', 'as_json', is_flag=True, help='Print the lines as JSON.')
def jobs_spend(caller: str | None, include_emulated: bool, as_json: bool) -> None:
    """Spent, held and left today, this month and in total (UTC), for everyone and per caller and scope.

    Spent is the actual cost the API reported; held is what runs without one yet reserve. The limits come from
    PERPLEXITY_BUDGET_USD, PERPLEXITY_BUDGET_DAY_USD, PERPLEXITY_BUDGET_MONTH_USD and PERPLEXITY_BUDGET_PER_CALLER.

    \b
    Examples:
      pydantic-ai-perplexity jobs spend
      pydantic-ai-perplexity jobs spend --caller alice --json
    """
    from .._base.errors import ConfigurationError
    from .._domain.settings import Settings
    from .._ledger import Ledger

    try:
        budget = Settings.load().budget
    except ConfigurationError as exc:
        _fail(exc)
        return
    with Ledger() as ledger:
        lines = ledger.spend(budget, caller=caller, emulated=None if include_emulated else False)
    if as_json:
        _out_json(json.dumps([line.as_dict() for line in lines], indent=2))
        return

    def money(value: float | None) -> str:
        return '-' if value is None else f'${value:,.4f}'

    rows = [
        {
            'for': (f'caller {line.caller}' if line.caller else f'scope {line.scope}' if line.scope else 'everyone'),
            'window': line.window,
            'since': f'{line.since:%Y-%m-%d}' if line.since else '-',
            'spent': money(line.spent_usd),
            'held': money(line.held_usd),
            'limit': money(line.cap_usd),
            'left': money(line.left_usd),
        }
        for line in lines
    ]
    _table(rows, flexible=('for',), right=('spent', 'held', 'limit', 'left'))
    _err(f'Ledger: {ledger.describe()}; {"all runs" if include_emulated else "real runs only (--all adds emulated)"}.')


@jobs.command('wait', context_settings=_CONTEXT)
@click.argument('response_id', callback=_response_id)
@click.option(
    '--timeout',
    type=float,
    default=600,
    show_default=True,
    callback=_seconds,
    help='Give up waiting after this many seconds.',
)
@click.option('--json', 'as_json', is_flag=True, help='Print the full result as JSON.')
@click.option(
    '--strict',
    is_flag=True,
    help='Exit with status 3 when the run completed but found nothing (not a single source).',
)
def jobs_wait(response_id: str, timeout: float, as_json: bool, strict: bool) -> None:
    """Wait for a run (showing its progress) and print its result, as `research` does.

    A run still going at the timeout prints its id again; nothing is cancelled. Exit status as for `research`:
    1 when the run failed or was cut short, 3 with --strict when it found nothing.

    \b
    Examples:
      pydantic-ai-perplexity jobs wait resp_123
      pydantic-ai-perplexity jobs wait resp_123 --timeout 60 --json
    """
    import anyio

    async def go() -> ResearchResult:
        from .._core.researcher import Researcher

        async with Researcher(origin='cli', wait_seconds=timeout) as researcher:
            # The run's start as the API has it: its steps are timed from there, not from this wait.
            created_at = (await researcher.client.retrieve(response_id)).created_at
            with _StepDisplay(run_created_at=created_at or None) as display:
                result = await researcher.collect(response_id, on_progress=display)
            if result.done:
                display.summary(result)
            return result

    try:
        result = anyio.run(go)
    except KeyboardInterrupt:
        _interrupted(response_id, emulated=False, collecting=True)
    except Exception as exc:
        _fail(exc)
        return
    _print_outcome(result, as_json=as_json, strict=strict)


@jobs.command('cancel', context_settings=_CONTEXT)
@click.argument('response_id', callback=_response_id)
def jobs_cancel(response_id: str) -> None:
    """Cancel a run that is still going (it stops, and stops costing); prints the id and its status.

    \b
    Example:
      pydantic-ai-perplexity jobs cancel resp_123
    """
    import anyio

    async def go() -> ResearchResult:
        from .._core.researcher import Researcher

        async with Researcher(origin='cli') as researcher:
            return await researcher.cancel(response_id)

    try:
        result = anyio.run(go)
    except Exception as exc:
        _fail(exc)
        return
    _out(f'{result.response_id} {result.status}')
    if result.done and result.status != 'cancelled':
        _err(f'The run had already ended ({result.status}); nothing to cancel.')


# ---------------------------------------------------------------------------------------------------------------
# doctor


@cli.command(context_settings=_CONTEXT)
@click.option('--json', 'as_json', is_flag=True, help='Print the checks as JSON.')
def doctor(as_json: bool) -> None:
    """Check the setup: key, base URL, API, models, settings, ledger, tracing. Exit status 1 if any check fails.

    Each line says pass or FAIL, what was found and, for a failure, how to fix it. When the base URL answers as an
    emulator, the API checks and the summary say so (and `--json` marks them `"emulator": true`).

    \b
    Examples:
      pydantic-ai-perplexity doctor
      PERPLEXITY_BASE_URL=http://127.0.0.1:8787 pydantic-ai-perplexity doctor   # against a local emulator
    """
    import dataclasses

    import anyio

    from .._core.doctor import Check, run_checks

    checks: list[Check] = []

    colour = _colour(sys.stdout)

    def emit(check: Check) -> None:
        checks.append(check)
        if as_json:
            return
        if not colour:
            _out(check.line())
            return
        from .._present.terminal import for_terminal

        label, rest = check.line().split('] ', 1)
        click.echo(
            click.style(f'{label}]', fg='green' if check.ok else 'red', bold=not check.ok) + ' ' + for_terminal(rest)
        )

    ok = anyio.run(run_checks, emit)
    if as_json:
        _out_json(json.dumps([dataclasses.asdict(c) for c in checks], indent=2))
    else:
        failed = sum(not c.ok for c in checks)
        summary = f'{len(checks) - failed} passed, {failed} failed.'
        if any(c.emulator for c in checks):
            summary += ' The API checks ran against an emulator, not Perplexity.'
        if _colour(sys.stderr):
            click.echo(click.style(summary, fg='red' if failed else 'green', bold=True), err=True)
        else:
            _err(summary)
    if not ok:
        sys.exit(1)


# ---------------------------------------------------------------------------------------------------------------
# config, mcp, emulator


@cli.command(context_settings=_CONTEXT)
@click.argument(
    'client',
    type=click.Choice(
        ['claude-desktop', 'claude-code', 'cursor', 'vscode', 'codex', 'windsurf', 'zed', 'pydantic-deep']
    ),
)
@click.option('--write', is_flag=True, help='pydantic-deep only: add the server to ./.pydantic-deep/mcp.json.')
@click.option(
    '--launcher',
    type=click.Choice(['python', 'uvx']),
    default='python',
    show_default=True,
    help='python: this interpreter (works now). uvx: `uvx --from ...`, once the package is on the package index.',
)
def config(client: str, write: bool, launcher: str) -> None:
    """Print a ready MCP config snippet for CLIENT (absolute paths; the key stays in your environment).

    \b
    Examples:
      pydantic-ai-perplexity config claude-desktop
      pydantic-ai-perplexity config claude-code
      pydantic-ai-perplexity config pydantic-deep --write
      pydantic-ai-perplexity config cursor --launcher uvx
      pydantic-ai-perplexity config codex >> ~/.codex/config.toml
    """
    from ..mcp.clients.config import (
        UVX_NOTE,
        ConfigFileError,
        add_to_pydantic_deep,
        client_snippet,
        missing_extra,
        secret_variables,
    )

    chosen = 'uvx' if launcher == 'uvx' else 'python'
    problem = missing_extra(client, chosen)
    if problem:
        raise click.ClickException(problem)
    if write and client != 'pydantic-deep':
        raise click.UsageError('--write is only for pydantic-deep.')
    if chosen == 'uvx':
        _err(f'Note: {UVX_NOTE}')
    left_out = secret_variables() if client == 'pydantic-deep' else []
    if left_out:
        _err(
            f'Not copied, as they hold secrets and pydantic-deep expands no variables: {", ".join(left_out)}. '
            'The server then runs without them; give it what it needs another way (e.g. ~/.pgpass for a password).'
        )
    if write:
        try:
            path = add_to_pydantic_deep(launcher=chosen)
        except ConfigFileError as exc:  # a file of another shape: left as it is, like a bad argument (exit 2)
            from .._present.terminal import for_terminal

            raise _Refused(for_terminal(str(exc))) from None
        except (ValueError, OSError) as exc:  # a symlinked file or directory
            raise click.ClickException(str(exc)) from None
        _err(f'Added the perplexity server to {path} (the key is read from PERPLEXITY_API_KEY, not written).')
        return
    click.echo(client_snippet(client, launcher=chosen))


@cli.command(context_settings=_CONTEXT)
@click.option('--transport', type=click.Choice(['stdio', 'http']), default='stdio', show_default=True)
@click.option('--host', default='127.0.0.1', show_default=True, help='HTTP only. Non-loopback needs a token.')
@click.option('--port', type=int, default=8000, show_default=True, help='HTTP only.')
@click.option('--token', envvar='PERPLEXITY_MCP_TOKEN', help='HTTP bearer token clients must send.')
@click.option(
    '--tokens-file',
    type=click.Path(dir_okay=False),
    envvar='PERPLEXITY_MCP_TOKENS_FILE',
    help='HTTP only: named tokens (JSON or name:token lines), re-read when the file changes.',
)
@click.option(
    '--emulator',
    is_flag=True,
    help='Research on the built-in emulator: offline, canned answers from a small local corpus, no key.',
)
@click.option(
    '--header-timeout',
    type=click.FloatRange(min=0, min_open=True, max=3600),
    envvar='PERPLEXITY_MCP_HEADER_TIMEOUT',
    help='HTTP only: seconds a connection has to send a whole request head, then it is closed.  [default: 10]',
)
@click.option(
    '--max-connections-per-client',
    type=click.IntRange(min=1),
    envvar='PERPLEXITY_MCP_MAX_CONNECTIONS_PER_CLIENT',
    help='HTTP only: connections one client address may hold (behind a proxy, raise it).  [default: 1024]',
)
@click.option(
    '--lean',
    is_flag=True,
    default=None,
    help='List the tools lean: short descriptions, few arguments, about a quarter of the tokens (PERPLEXITY_MCP_LEAN).',
)
def mcp(
    transport: str,
    host: str,
    port: int,
    token: str | None,
    tokens_file: str | None,
    emulator: bool,
    header_timeout: float | None,
    max_connections_per_client: int | None,
    lean: bool | None,
) -> None:
    """Serve the research tools over MCP (stdio by default, or Streamable HTTP).

    \b
    Examples:
      pydantic-ai-perplexity mcp
      pydantic-ai-perplexity mcp --emulator          # offline: the built-in emulator, said on stderr
      pydantic-ai-perplexity mcp --lean              # the tool list in about a quarter of the tokens
      pydantic-ai-perplexity mcp --transport http --port 8000
      PERPLEXITY_MCP_TOKEN=$(openssl rand -hex 32) pydantic-ai-perplexity mcp --transport http --host 0.0.0.0
      pydantic-ai-perplexity mcp --transport http --host 0.0.0.0 --tokens-file /etc/pplx/tokens
    """
    from ..mcp.server._build import serve
    from ..mcp.server._exit import quiet_until_serving

    quiet_until_serving()  # a signal before the transport serves ends the process quietly
    serve(
        transport=transport,
        host=host,
        port=port,
        token=token,
        tokens_file=tokens_file,
        emulator=emulator,
        header_timeout=header_timeout,
        max_connections_per_client=max_connections_per_client,
        lean=lean,
    )


@cli.command(context_settings=_CONTEXT)
@click.option(
    '--host', default='127.0.0.1', show_default=True, help='Interface to bind; off loopback needs --allow-remote.'
)
@click.option('--port', type=int, default=8787, show_default=True)
@click.option(
    '--api-key',
    envvar='PERPLEXITY_EMULATOR_API_KEY',
    help='The key the emulator accepts (default: a random pplx-emulator-… key, printed on loopback only).',
)
@click.option('--time-scale', type=float, default=0.1, show_default=True, help='Real seconds per emulated second.')
@click.option(
    '--record',
    type=click.Path(file_okay=False),
    help='Be a proxy to the real API that stores each run, search and model list in DIR (secrets removed).',
)
@click.option(
    '--replay', type=click.Path(exists=True, file_okay=False), help='Serve the recordings in DIR, matched by request.'
)
@click.option(
    '--upstream',
    default='https://api.perplexity.ai',
    show_default=True,
    help='Where --record forwards to (and your key with it): https://, or http:// to loopback only.',
)
@click.option(
    '--allow-remote',
    is_flag=True,
    help='Allow a --host that other machines can reach. The key is then never printed: give it with --api-key.',
)
@click.option(
    '--corpus',
    type=click.Path(file_okay=False),
    envvar='PERPLEXITY_EMULATOR_CORPUS',
    help='Search the pages in DIR (*.md with url:/title: front matter, or *.json) instead of the built-in ones.',
)
def emulator(
    host: str,
    port: int,
    api_key: str | None,
    time_scale: float,
    record: str | None,
    replay: str | None,
    upstream: str,
    allow_remote: bool,
    corpus: str | None,
) -> None:
    """Run the offline Perplexity API emulator on loopback, for tests and demos without a key.

    \b
    Examples:
      pydantic-ai-perplexity emulator --port 8787
      PERPLEXITY_BASE_URL=http://127.0.0.1:8787 PERPLEXITY_API_KEY=<printed key> pydantic-ai-perplexity research "q"
      pydantic-ai-perplexity emulator --record tests/recordings   # then use your real key against it
      pydantic-ai-perplexity emulator --replay tests/recordings
      pydantic-ai-perplexity emulator --corpus my-pages/          # your own pages to search, for your tests
      PERPLEXITY_EMULATOR_API_KEY=<a key> pydantic-ai-perplexity emulator --host 0.0.0.0 --allow-remote
    """
    from ..emulator import serve

    if record and replay:
        raise click.UsageError('--record and --replay cannot be combined: record into a directory, then replay it.')
    try:
        serve(
            host=host,
            port=port,
            api_key=api_key,
            time_scale=time_scale,
            record=record,
            replay=replay,
            upstream=upstream,
            allow_remote=allow_remote,
            corpus=corpus,
        )
    except ValueError as exc:  # an unsafe setting, or a replay or corpus directory holding a file it cannot serve
        _err(f'Error: {exc}')
        sys.exit(2)


def _undecodable_argument(args: list[str]) -> str | None:
    """The first argument that is not valid UTF-8 (Python keeps its bad bytes as surrogates), shown escaped."""
    from .._present.terminal import line_for_terminal

    for arg in args:
        try:
            arg.encode('utf-8')
        except UnicodeEncodeError:
            shown = line_for_terminal(arg.encode('utf-8', 'surrogateescape').decode('utf-8', 'backslashreplace'))
            return shown if len(shown) <= 60 else shown[:59] + '…'
    return None


def _add_search() -> None:
    from ._search import search

    cli.add_command(search)


_add_search()


def main() -> None:
    """Entry point of the console script."""
    bad = _undecodable_argument(sys.argv[1:])
    if bad is not None:
        _err(
            f'Error: an argument is not valid UTF-8 text: "{bad}". Pass text in UTF-8 (check the terminal\'s encoding).'
        )
        sys.exit(2)
    cli()


if __name__ == '__main__':  # pragma: no cover
    main()
