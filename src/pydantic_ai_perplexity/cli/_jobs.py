"""`jobs`: list, show, wait for, cancel, reconcile and total the runs recorded in the ledger."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

import click

from .._base.env import ENV
from .._base.statuses import ROW_STATUSES
from .._domain.settings import variable
from ._outcome import found_nothing, interrupted, print_outcome, print_sources
from ._progress import StepDisplay
from ._shared import (
    CONTEXT,
    check_seconds_arg,
    checked_response_id,
    err,
    fail,
    open_ledger,
    out,
    out_json,
    start_tracing,
    terminal_width,
    use_colour,
)

if TYPE_CHECKING:
    from .._domain.results import ResearchResult, Source
    from .._ledger import RunRecord


@click.group(context_settings=CONTEXT)
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
    start_tracing()


def _refresh(ledger: Any, records: list[RunRecord]) -> list[RunRecord]:
    """`records`, the unfinished ones refreshed from the API (bounded, cached) when a key is set."""
    from .._base.statuses import UNFINISHED_ROWS as UNFINISHED

    if not any(r.status in UNFINISHED for r in records) or not variable(ENV.API_KEY):
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
    widths = _column_widths(rows, flexible, console.width)
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


def _column_widths(rows: list[dict[str, str]], flexible: tuple[str, ...], width: int) -> dict[str, int]:
    """Each column's width: its longest cell, the `flexible` ones cut (in order, each down to 12) to fit `width`."""
    from .._present.terminal import line_for_terminal

    names = list(rows[0])
    widths = {n: max(len(n), *(len(line_for_terminal(row[n])) for row in rows)) for n in names}
    room = width - 2 * (len(names) - 1)
    for name in (n for n in flexible if n in widths):  # in order: the first gives up its room first
        widths[name] = max(12, min(widths[name], widths[name] - (sum(widths.values()) - room)))
    return widths


def _cost(record: RunRecord) -> str:
    if record.cost_usd is not None:
        return f'${record.cost_usd:.4f}'
    return f'~${record.estimate_usd:.4f}'


@jobs.command('list', context_settings=CONTEXT)
@click.option('--status', type=click.Choice(ROW_STATUSES), help='Only runs with this status.')
@click.option('--limit', type=click.IntRange(1, 10_000), default=20, show_default=True, help='At most this many.')
@click.option('--json', 'as_json', is_flag=True, help='Print the records as JSON.')
def jobs_list(status: str | None, limit: int, as_json: bool) -> None:
    """Recent runs, newest first: id, status, when, cost (~ an estimate; `emulated`: no real spend), effort, question.

    \b
    Examples:
      pydantic-ai-perplexity jobs list
      pydantic-ai-perplexity jobs list --status completed --limit 5 --json
    """
    with open_ledger() as ledger:
        records = _refresh(ledger, ledger.list(status=status, limit=limit))
    if as_json:
        out_json(json.dumps([r.model_dump(mode='json') for r in records], indent=2))
        return
    if not records:
        err(f'No runs recorded in {ledger.describe()}.')
        return
    _print_runs([_run_row(r) for r in records])


def _run_row(r: RunRecord) -> dict[str, str]:
    """A run as a row of `jobs list`."""
    return {
        'run': r.response_id,
        'status': r.status,
        'started': f'{r.created_at:%Y-%m-%d %H:%M}',
        'cost': 'emulated' if r.emulated else _cost(r),  # billed by no one: never read as real spend
        'effort': r.effort or '-',
        'question': r.query,  # a question may come from any caller: shown (made terminal-safe), never acted on
    }


def _print_runs(rows: list[dict[str, str]]) -> None:
    """The runs one a line, or on two where the terminal is too narrow to give the question room on one."""
    width = terminal_width(sys.stdout)
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

    bold = use_colour(sys.stdout)
    for line in (first('run', 'status', 'cost'), second('started', 'effort', 'question')):
        click.echo(click.style(line, bold=True) if bold else line)
    for row in cells:
        click.echo(first(row['run'], row['status'], row['cost']))
        click.echo(second(row['started'], row['effort'], row['question']))


@jobs.command('show', context_settings=CONTEXT)
@click.argument('response_id', callback=checked_response_id)
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
    with open_ledger() as ledger:
        record = ledger.get(response_id)
        record = _refresh(ledger, [record])[0] if record is not None else None
    if record is None:
        raise click.ClickException(f'No run {response_id!r} in the ledger ({ledger.describe()}).')
    if as_json:
        out_json(record.model_dump_json(indent=2))
        return
    _print_record(record)


def _print_record(record: RunRecord) -> None:
    """A run's fields, what it found so far while it runs, and, once it ended, its answer and sources."""
    from .._base.statuses import UNFINISHED_ROWS as UNFINISHED

    snapshot = _snapshot(record)
    so_far = snapshot if snapshot is not None and not snapshot.done and record.status in UNFINISHED else None
    for name, value in _record_fields(record, so_far):
        out(f'{name + ":":<10}{value}')
    if so_far is not None and so_far.sources:
        _print_found_so_far(so_far.sources)
    if record.status in UNFINISHED:
        return
    if snapshot is None or not snapshot.done:
        out(f'{"answer:":<10}{_no_answer_here(record)}', wrap=True)
        return
    _print_answer(snapshot)


def _record_fields(record: RunRecord, so_far: ResearchResult | None) -> list[tuple[str, str]]:
    """The `name: value` lines `jobs show` prints for a run; `so_far`, a running run's snapshot, if there is one."""
    from .._domain.results import Usage

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
    return fields


def _print_found_so_far(sources: Sequence[Source]) -> None:
    """The first sources a running run found, each marked when it was read."""
    from .._present.terminal import line_for_terminal

    for source in sources[:_SHOWN_SO_FAR]:
        read = ' (read)' if source.fetched else ''
        title = line_for_terminal(source.title or source.domain)
        out(f'  [{source.n}] {title}{read} — {line_for_terminal(source.url)}')
    if len(sources) > _SHOWN_SO_FAR:
        out(f'  (+{len(sources) - _SHOWN_SO_FAR} more)')


def _print_answer(snapshot: ResearchResult) -> None:
    """A finished run's answer (or data) and numbered sources, as the API keeps them."""
    from .._present.model_text import answer_with_source_numbers

    if snapshot.data is not None:
        out('\n' + json.dumps(snapshot.data, indent=2, ensure_ascii=False))
    else:
        out('\n' + (answer_with_source_numbers(snapshot) or '(no answer)'), wrap=True)
    if snapshot.sources:
        out('\nSources:')
        print_sources(snapshot.sources)
    if found_nothing(snapshot):
        err(
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
    if not variable(ENV.API_KEY):
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


@jobs.command('reconcile', context_settings=CONTEXT)
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

    with open_ledger() as ledger:

        async def go() -> dict[str, RunRecord]:
            async with PerplexityClient() as client:
                return await reconcile(ledger, client, limit=limit, timeout=60.0, fresh_for=0.0)

        try:
            updated = anyio.run(go)
        except Exception as exc:
            fail(exc)
            return
    from .._present.terminal import line_for_terminal

    for r in updated.values():
        out(f'{line_for_terminal(r.response_id)}  {line_for_terminal(r.status):<11} {_cost(r):>9}')
    err(f'{len(updated)} unfinished run{"s" if len(updated) != 1 else ""} refreshed from the API.')


@jobs.command('spend', context_settings=CONTEXT)
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
        fail(exc)
        return
    with Ledger() as ledger:
        lines = ledger.spend(budget, caller=caller, emulated=None if include_emulated else False)
    if as_json:
        out_json(json.dumps([line.as_dict() for line in lines], indent=2))
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
    err(f'Ledger: {ledger.describe()}; {"all runs" if include_emulated else "real runs only (--all adds emulated)"}.')


@jobs.command('wait', context_settings=CONTEXT)
@click.argument('response_id', callback=checked_response_id)
@click.option(
    '--timeout',
    type=float,
    default=600,
    show_default=True,
    callback=check_seconds_arg,
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
            with StepDisplay(run_created_at=created_at or None) as display:
                result = await researcher.collect(response_id, on_progress=display)
            if result.done:
                display.summary(result)
            return result

    try:
        result = anyio.run(go)
    except KeyboardInterrupt:
        interrupted(response_id, emulated=False, collecting=True)
    except Exception as exc:
        fail(exc)
        return
    print_outcome(result, as_json=as_json, strict=strict)


@jobs.command('cancel', context_settings=CONTEXT)
@click.argument('response_id', callback=checked_response_id)
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
        fail(exc)
        return
    out(f'{result.response_id} {result.status}')
    if result.done and result.status != 'cancelled':
        err(f'The run had already ended ({result.status}); nothing to cancel.')
