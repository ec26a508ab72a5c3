"""The `pydantic-ai-perplexity` command: research, search, jobs, doctor, config, mcp, emulator.

Results go to stdout, progress and notices to stderr: `research "…" > answer.md` keeps the answer clean, and
`--json` gives machines the whole result. Progress is a live display when stderr is a terminal and plain lines
otherwise. Each command imports what it needs when it runs, so `pydantic-ai-perplexity mcp` starts serving
without loading the research stack (or rich) first. One module per command group; `_shared` has what they share.
"""

from __future__ import annotations

import sys

import click

from ._config import config
from ._doctor import doctor
from ._emulator import emulator
from ._jobs import jobs
from ._mcp import mcp
from ._research import research
from ._search import search
from ._shared import CONTEXT, err


@click.group(context_settings=CONTEXT)
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


for _command in (research, search, jobs, doctor, config, mcp, emulator):
    cli.add_command(_command)


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


def main() -> None:
    """Entry point of the console script."""
    bad = _undecodable_argument(sys.argv[1:])
    if bad is not None:
        err(
            f'Error: an argument is not valid UTF-8 text: "{bad}". Pass text in UTF-8 (check the terminal\'s encoding).'
        )
        sys.exit(2)
    cli()
