"""The `pydantic-ai-perplexity` command: research, jobs, doctor, config, mcp, emulator.

Results go to stdout, progress and notices to stderr. Each command imports what it needs when it runs, so
`pydantic-ai-perplexity mcp` starts serving without loading the research stack first.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Generator
from typing import Any

import click

EFFORTS = ('fast', 'low', 'medium', 'high', 'xhigh')
RECENCIES = ('hour', 'day', 'week', 'month', 'year')
STATUSES = ('queued', 'in_progress', 'completed', 'incomplete', 'failed', 'cancelled', 'cancelling')


def _err(message: str) -> None:
    click.echo(message, err=True)


@contextlib.contextmanager
def _endpoint() -> Generator[dict[str, str], None, None]:
    """The API to talk to: the configured one, or (with no key) a built-in emulator, said in one line."""
    if os.environ.get('PERPLEXITY_API_KEY'):
        yield {}
        return
    from .emulator import Emulator

    with Emulator(time_scale=float(os.environ.get('PERPLEXITY_EMULATOR_TIME_SCALE', '0.05'))) as emu:
        _err(f'No PERPLEXITY_API_KEY set: using the built-in emulator at {emu.base_url} (answers are canned).')
        yield {'api_key': emu.api_key, 'base_url': emu.base_url}


def _fail(exc: BaseException) -> None:
    from .errors import PerplexityError

    if isinstance(exc, PerplexityError):
        raise click.ClickException(str(exc)) from None
    raise exc


@click.group(context_settings={'help_option_names': ['-h', '--help']})
@click.version_option(package_name='pydantic-ai-perplexity')
def cli() -> None:
    """Perplexity research from the command line, over MCP, and offline against an emulator.

    \b
    Examples:
      pydantic-ai-perplexity research "What changed in the EU AI Act this month?"
      pydantic-ai-perplexity jobs list
      pydantic-ai-perplexity mcp                      # serve MCP over stdio
      pydantic-ai-perplexity config claude-desktop    # print a ready client config
      pydantic-ai-perplexity emulator --port 8787     # the offline API on loopback
    """


# ---------------------------------------------------------------------------------------------------------------
# research


@cli.command()
@click.argument('question')
@click.option(
    '--effort', type=click.Choice(EFFORTS), help='How deep to research (default: PERPLEXITY_EFFORT or medium).'
)
@click.option('--model', help='A specific model, "provider/model".')
@click.option('--instructions', help='Extra instructions for the researcher.')
@click.option('--domain', 'domains', multiple=True, help='Only this domain (repeatable); "-domain" excludes one.')
@click.option('--recency', type=click.Choice(RECENCIES), help='Only pages from the last hour/day/week/month/year.')
@click.option('--after', help='Only pages published on or after this date (YYYY-MM-DD).')
@click.option('--before', help='Only pages published on or before this date (YYYY-MM-DD).')
@click.option('--fetch-pages', type=int, help='Let the run fetch up to N pages in full.')
@click.option('--wait', 'wait_seconds', type=float, help='Wait at most this many seconds, then print the run id.')
@click.option('--no-wait', is_flag=True, help='Start the run, print its id and exit.')
@click.option('--json', 'as_json', is_flag=True, help='Print the full result as JSON.')
def research(
    question: str,
    effort: str | None,
    model: str | None,
    instructions: str | None,
    domains: tuple[str, ...],
    recency: str | None,
    after: str | None,
    before: str | None,
    fetch_pages: int | None,
    wait_seconds: float | None,
    no_wait: bool,
    as_json: bool,
) -> None:
    """Research QUESTION and print the cited answer.

    \b
    Examples:
      pydantic-ai-perplexity research "Who won the 2026 Turing Award?" --effort fast
      pydantic-ai-perplexity research "State of solid-state batteries" --effort high --no-wait
      pydantic-ai-perplexity research "EU AI Act news" --recency week --domain europa.eu --json
    """
    import anyio

    from .tracing import configure_tracing

    configure_tracing()  # only when LOGFIRE_TOKEN, OTEL_EXPORTER_OTLP_* or LOGFIRE_CONSOLE ask for it
    options: dict[str, Any] = {
        'effort': effort,
        'model': model,
        'instructions': instructions,
        'domains': list(domains) or None,
        'recency': recency,
        'after': after,
        'before': before,
        'fetch_pages': fetch_pages,
    }

    async def go(settings: dict[str, str]) -> None:
        from .researcher import Researcher
        from .results import Progress

        def on_progress(progress: Progress, step: str) -> None:
            _err(f'  [{progress.elapsed_s:6.1f}s] {step}')

        async with Researcher(
            origin='cli', wait_seconds=wait_seconds, api_key=settings.get('api_key'), base_url=settings.get('base_url')
        ) as researcher:
            if no_wait:
                result = await researcher.start(question, **options)
            else:
                result = await researcher.run(question, on_progress=on_progress, **options)
        _print_result(result, as_json=as_json)

    try:
        with _endpoint() as settings:
            anyio.run(go, settings)
    except Exception as exc:
        _fail(exc)


def _print_result(result: Any, *, as_json: bool) -> None:
    if as_json:
        click.echo(result.model_dump_json(indent=2))
        return
    if not result.done:
        click.echo(result.response_id)
        _err(
            f'The run is still going ({result.progress.summary()}). Collect it with: '
            f'pydantic-ai-perplexity jobs wait {result.response_id}'
        )
        return
    from .render import answer_with_source_numbers

    if result.error:
        _err(f'The run ended {result.status}: {result.error}')
    click.echo(answer_with_source_numbers(result))
    if result.sources:
        click.echo('\nSources:')
        for s in result.sources:
            mark = '' if s.cited else '  (not cited)'
            click.echo(f'  [{s.n}] {s.title or s.domain} — {s.url}{mark}')
    cost = f'${result.cost_usd:.4f}' if result.cost_usd is not None else 'cost unknown'
    click.echo(f'\n{result.status} · {result.effort or "-"} · {cost} · {result.response_id}')


# ---------------------------------------------------------------------------------------------------------------
# jobs


@cli.group()
def jobs() -> None:
    """List, show, wait for and cancel runs recorded in the ledger.

    \b
    Examples:
      pydantic-ai-perplexity jobs list --status in_progress
      pydantic-ai-perplexity jobs wait resp_123 --timeout 600
      pydantic-ai-perplexity jobs cancel resp_123
    """
    from .tracing import configure_tracing

    configure_tracing()  # only when LOGFIRE_TOKEN, OTEL_EXPORTER_OTLP_* or LOGFIRE_CONSOLE ask for it


@jobs.command('list')
@click.option('--status', type=click.Choice(STATUSES), help='Only runs with this status.')
@click.option('--limit', type=int, default=20, show_default=True)
@click.option('--json', 'as_json', is_flag=True)
def jobs_list(status: str | None, limit: int, as_json: bool) -> None:
    """Recent runs, newest first."""
    from .ledger import Ledger

    with Ledger() as ledger:
        records = ledger.list(status=status, limit=limit)
    if as_json:
        click.echo(json.dumps([r.model_dump(mode='json') for r in records], indent=2))
        return
    if not records:
        _err(f'No runs recorded in {ledger.path}.')
        return
    for r in records:
        cost = r.cost_usd if r.cost_usd is not None else r.estimate_usd
        mark = '' if r.cost_usd is not None else '~'
        click.echo(
            f'{r.response_id}  {r.status:<11} {r.created_at:%Y-%m-%d %H:%M}  {mark}${cost:.4f}  '
            f'{r.effort or "-":<6} {r.query[:60]}'
        )


@jobs.command('show')
@click.argument('response_id')
def jobs_show(response_id: str) -> None:
    """One run's ledger record, as JSON."""
    from .ledger import Ledger

    with Ledger() as ledger:
        record = ledger.get(response_id)
    if record is None:
        raise click.ClickException(f'No run {response_id!r} in the ledger ({ledger.path}).')
    click.echo(record.model_dump_json(indent=2))


@jobs.command('wait')
@click.argument('response_id')
@click.option('--timeout', type=float, default=600, show_default=True, help='Give up waiting after this many seconds.')
@click.option('--json', 'as_json', is_flag=True)
def jobs_wait(response_id: str, timeout: float, as_json: bool) -> None:
    """Wait for a run and print its result."""
    import anyio

    async def go() -> None:
        from .researcher import Researcher

        async with Researcher(origin='cli', wait_seconds=timeout) as researcher:
            result = await researcher.collect(response_id)
        _print_result(result, as_json=as_json)

    try:
        anyio.run(go)
    except Exception as exc:
        _fail(exc)


@jobs.command('cancel')
@click.argument('response_id')
def jobs_cancel(response_id: str) -> None:
    """Cancel a run that is still going."""
    import anyio

    async def go() -> None:
        from .researcher import Researcher

        async with Researcher(origin='cli') as researcher:
            result = await researcher.cancel(response_id)
        click.echo(f'{result.response_id} {result.status}')

    try:
        anyio.run(go)
    except Exception as exc:
        _fail(exc)


# ---------------------------------------------------------------------------------------------------------------
# doctor


@cli.command()
def doctor() -> None:
    """Check the setup: key, base URL, API reachability, models, ledger, tracing. Each line says how to fix it.

    \b
    Example:
      pydantic-ai-perplexity doctor
    """
    import anyio

    from .doctor import run_checks

    ok = anyio.run(run_checks, click.echo)
    if not ok:
        sys.exit(1)


# ---------------------------------------------------------------------------------------------------------------
# config, mcp, emulator


@cli.command()
@click.argument('client', type=click.Choice(['claude-desktop', 'claude-code', 'cursor', 'vscode', 'pydantic-deep']))
@click.option('--write', is_flag=True, help='pydantic-deep only: add the server to ./.pydantic-deep/mcp.json.')
def config(client: str, write: bool) -> None:
    """Print a ready MCP config snippet for CLIENT (absolute paths; the key stays in your environment).

    \b
    Examples:
      pydantic-ai-perplexity config claude-desktop
      pydantic-ai-perplexity config pydantic-deep --write
    """
    from .mcp.config import add_to_pydantic_deep, client_snippet

    if write:
        if client != 'pydantic-deep':
            raise click.UsageError('--write is only for pydantic-deep.')
        path = add_to_pydantic_deep()
        _err(f'Added the perplexity server to {path} (the key is read from PERPLEXITY_API_KEY, not written).')
        return
    click.echo(client_snippet(client))


@cli.command()
@click.option('--transport', type=click.Choice(['stdio', 'http']), default='stdio', show_default=True)
@click.option('--host', default='127.0.0.1', show_default=True, help='HTTP only. Non-loopback needs a token.')
@click.option('--port', type=int, default=8000, show_default=True, help='HTTP only.')
@click.option('--token', envvar='PERPLEXITY_MCP_TOKEN', help='HTTP bearer token clients must send.')
def mcp(transport: str, host: str, port: int, token: str | None) -> None:
    """Serve the research tools over MCP (stdio by default, or Streamable HTTP).

    \b
    Examples:
      pydantic-ai-perplexity mcp
      pydantic-ai-perplexity mcp --transport http --port 8000
    """
    from .mcp.server import serve

    serve(transport=transport, host=host, port=port, token=token)


@cli.command()
@click.option('--host', default='127.0.0.1', show_default=True)
@click.option('--port', type=int, default=8787, show_default=True)
@click.option('--api-key', help='The key the emulator accepts (default: a random pplx-emulator-… key, printed).')
@click.option('--time-scale', type=float, default=0.1, show_default=True, help='Real seconds per emulated second.')
def emulator(host: str, port: int, api_key: str | None, time_scale: float) -> None:
    """Run the offline Perplexity API emulator on loopback, for tests and demos without a key.

    \b
    Examples:
      pydantic-ai-perplexity emulator --port 8787
      PERPLEXITY_BASE_URL=http://127.0.0.1:8787 PERPLEXITY_API_KEY=<printed key> pydantic-ai-perplexity research "q"
    """
    from .emulator import serve

    serve(host=host, port=port, api_key=api_key, time_scale=time_scale)


def main() -> None:
    """Entry point of the console script."""
    cli()


if __name__ == '__main__':  # pragma: no cover
    main()
