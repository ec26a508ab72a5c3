"""`config`: a ready MCP config snippet for a client, or (pydantic-deep) the server added to its file."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from ._shared import CONTEXT, err

if TYPE_CHECKING:
    from ..mcp.clients.config import Launcher


class _Refused(click.ClickException):
    """A file the command will not touch, said in one line; exit status 2, as for a bad argument."""

    exit_code = 2


@click.command(context_settings=CONTEXT)
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
    from ..mcp.clients.config import UVX_NOTE, client_snippet, missing_extra, secret_variables

    chosen = 'uvx' if launcher == 'uvx' else 'python'
    problem = missing_extra(client, chosen)
    if problem:
        raise click.ClickException(problem)
    if write and client != 'pydantic-deep':
        raise click.UsageError('--write is only for pydantic-deep.')
    if chosen == 'uvx':
        err(f'Note: {UVX_NOTE}')
    left_out = secret_variables() if client == 'pydantic-deep' else []
    if left_out:
        err(
            f'Not copied, as they hold secrets and pydantic-deep expands no variables: {", ".join(left_out)}. '
            'The server then runs without them; give it what it needs another way (e.g. ~/.pgpass for a password).'
        )
    if write:
        _write_pydantic_deep(chosen)
        return
    click.echo(client_snippet(client, launcher=chosen))


def _write_pydantic_deep(launcher: Launcher) -> None:
    """`config pydantic-deep --write`: the server added to ./.pydantic-deep/mcp.json, or why the file was left alone."""
    from ..mcp.clients.config import ConfigFileError, add_to_pydantic_deep

    try:
        path = add_to_pydantic_deep(launcher=launcher)
    except ConfigFileError as exc:  # a file of another shape: left as it is, like a bad argument (exit 2)
        from .._present.terminal import for_terminal

        raise _Refused(for_terminal(str(exc))) from None
    except (ValueError, OSError) as exc:  # a symlinked file or directory
        raise click.ClickException(str(exc)) from None
    err(f'Added the perplexity server to {path} (the key is read from PERPLEXITY_API_KEY, not written).')
