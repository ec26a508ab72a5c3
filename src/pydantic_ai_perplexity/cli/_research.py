"""`research`: one question, its run options made from `ResearchOptions`, the answer printed as it ends."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import click

from .._base.env import ENV
from .._domain.settings import variable
from ._outcome import interrupted, print_outcome
from ._progress import StepDisplay
from ._shared import CONTEXT, check_budget_arg, check_seconds_arg, endpoint, fail, start_tracing

if TYPE_CHECKING:
    from pydantic.fields import FieldInfo

    from .._domain.results import ResearchResult


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

    from .._domain.options import option_fields

    params: list[click.Parameter] = []
    for name, (info, opt) in option_fields().items():
        if opt.cli is None:
            continue
        kind = opt.tool_type if opt.tool_type is not None else info.annotation
        inner = [a for a in typing.get_args(kind) if a is not type(None)] or [kind]
        multiple = typing.get_origin(inner[0]) is list
        help_text = opt.cli_help or info.description or ''
        params.append(
            click.Option([opt.cli, name], type=_param_type(inner[0], info), multiple=multiple, help=help_text)
        )
    return params


def _param_type(kind: Any, info: FieldInfo) -> click.ParamType[Any] | type[Any]:
    """The click type of a field whose (non-None) type is `kind`: its choices, an int in its bounds, or text."""
    import typing

    from annotated_types import Ge, Le

    if typing.get_origin(kind) is typing.Literal:
        return click.Choice([str(c) for c in typing.get_args(kind)])
    if kind is int:
        low = next((m.ge for m in info.metadata if isinstance(m, Ge)), None)
        high = next((m.le for m in info.metadata if isinstance(m, Le)), None)
        return click.IntRange(cast('int | None', low), cast('int | None', high))
    return str


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


def _mcp_server(value: str) -> dict[str, str]:
    label, sep, url = value.partition('=')
    if not sep or not label or not url:
        raise click.BadParameter(f'{value!r}: give it as LABEL=URL, e.g. docs=https://mcp.example.com/mcp')
    return {'type': 'mcp', 'server_label': label, 'server_url': url}


@click.command(cls=_ResearchCommand, context_settings=CONTEXT)
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
    callback=check_budget_arg,
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
    '--budget-day',
    type=float,
    callback=check_budget_arg,
    help="Refuse the run if today's spend (UTC) would pass this many USD.",
)
@click.option(
    '--budget-month',
    type=float,
    callback=check_budget_arg,
    help="Refuse the run if this month's spend would pass this many USD.",
)
@click.option(
    '--budget-per-run',
    type=float,
    callback=check_budget_arg,
    help='Tighten or refuse the run if it could cost more than this.',
)
@click.option(
    '--wait',
    'wait_seconds',
    type=float,
    callback=check_seconds_arg,
    help='Wait at most this many seconds, then print the run id.',
)
@click.option('--no-wait', is_flag=True, help='Start the run, print its id and exit (collect it with `jobs wait`).')
@click.option(
    '--reuse-within',
    type=float,
    callback=check_seconds_arg,
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

    start_tracing()
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
            with StepDisplay() as display:
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

    emulated = not variable(ENV.API_KEY)
    try:
        with endpoint(no_wait=no_wait) as settings:
            result = anyio.run(go, settings)
    except KeyboardInterrupt:
        interrupted(started[-1] if started else _bound_to(key), emulated=emulated)
    except Exception as exc:
        fail(exc)
        return
    print_outcome(result, as_json=as_json, builtin_emulator=emulated, strict=strict)


def _bound_to(key: str) -> str | None:
    """The id of the run this command's create made, if it reached the ledger (the create is finished before a
    Ctrl-C is let through, so a run the API created is there)."""
    from .._ledger import Ledger, is_provisional

    with Ledger() as ledger:
        found = ledger.list(request_id=key, limit=1)
    return found[0].response_id if found and not is_provisional(found[0].response_id) else None
