"""`mcp`: serve the research tools over MCP (stdio or Streamable HTTP)."""

from __future__ import annotations

import click

from .._base.env import ENV
from ._shared import CONTEXT


@click.command(context_settings=CONTEXT)
@click.option('--transport', type=click.Choice(['stdio', 'http']), default='stdio', show_default=True)
@click.option('--host', default='127.0.0.1', show_default=True, help='HTTP only. Non-loopback needs a token.')
@click.option('--port', type=int, default=8000, show_default=True, help='HTTP only.')
@click.option('--token', envvar=ENV.MCP_TOKEN, help='HTTP bearer token clients must send.')
@click.option(
    '--tokens-file',
    type=click.Path(dir_okay=False),
    envvar=ENV.MCP_TOKENS_FILE,
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
    envvar=ENV.MCP_HEADER_TIMEOUT,
    help='HTTP only: seconds a connection has to send a whole request head, then it is closed.  [default: 10]',
)
@click.option(
    '--max-connections-per-client',
    type=click.IntRange(min=1),
    envvar=ENV.MCP_MAX_CONNECTIONS_PER_CLIENT,
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
