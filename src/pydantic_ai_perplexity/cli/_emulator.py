"""`emulator`: the offline Perplexity API on loopback (or a recording proxy, or a replay of its recordings)."""

from __future__ import annotations

import sys

import click

from .._base.env import ENV, OFFLINE_TIME_SCALE
from ._shared import CONTEXT, err


@click.command(context_settings=CONTEXT)
@click.option(
    '--host', default='127.0.0.1', show_default=True, help='Interface to bind; off loopback needs --allow-remote.'
)
@click.option('--port', type=int, default=8787, show_default=True)
@click.option(
    '--api-key',
    envvar=ENV.EMULATOR_API_KEY,
    help='The key the emulator accepts (default: a random pplx-emulator-… key, printed on loopback only).',
)
@click.option(
    '--time-scale',
    type=click.FloatRange(min=0),
    envvar=ENV.EMULATOR_TIME_SCALE,
    default=OFFLINE_TIME_SCALE,
    show_default=True,
    help='Real seconds per emulated second.',
)
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
    envvar=ENV.EMULATOR_CORPUS,
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
        err(f'Error: {exc}')
        sys.exit(2)
