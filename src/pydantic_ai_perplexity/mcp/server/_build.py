"""The Perplexity MCP server: the five research tools over stdio (default) or Streamable HTTP.

What a reviewer needs to know, and where to look:

- **What it serves** (`_tools.py`, thin adapters to `Researcher` and `_present/model_text.py`): `perplexity_research`,
  `perplexity_research_result`, `perplexity_research_cancel`, `perplexity_research_list`, `perplexity_search`
  (full, or lean with `--lean`); the skill `skill://perplexity-research/SKILL.md` (also through `skills/list`,
  `_skills.py`); and `perplexity://runs/{response_id}`, a finished run's full
  result as JSON.
- **Outbound**: one host, the configured `PERPLEXITY_BASE_URL` (default `https://api.perplexity.ai`; plain http
  only to loopback), reached through `PerplexityClient` with certificate checks and timeouts. Nothing else is
  contacted, and no telemetry is sent unless you configure OpenTelemetry or Logfire yourself.
- **The key**: `PERPLEXITY_API_KEY`, read from the server's own environment when the first tool call makes the
  `Researcher`. Never taken from a tool argument or an HTTP header, never logged, never in a result. A missing key
  is a clear tool error naming the variable; the server keeps serving.
- **stdout** (stdio): protocol frames only (`_stdio.py`); logs and anything else go to stderr.
- **HTTP** (`_http.py`): binds 127.0.0.1 by default; a bearer token is required off loopback (one, or named ones
  from the environment or a file re-read on change, `_tokens.py`: the name is recorded on each run); Host/Origin
  checks against DNS rebinding; 1 MiB request bodies; stateless, so instances can sit behind a load balancer;
  `/healthz` for it; on SIGTERM, calls in flight are handed off and the process exits within 10 s.
- **Long runs**: a call waits at most `PERPLEXITY_WAIT_SECONDS` (55 s here by default, under the 60 s limit of
  Claude Desktop and other clients), sends a progress notification per research step when the client asked for
  progress (and a heartbeat when none went out for `PERPLEXITY_MCP_HEARTBEAT_SECONDS`, 15 s), then hands back
  the `response_id` (collect it with `perplexity_research_result`). A client's
  `notifications/cancelled` cancels the run upstream; running out of wait never does.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Sequence
from importlib.util import find_spec
from typing import TYPE_CHECKING, Any, Literal

from ..._base.errors import install_hint
from ._exit import exit_code

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from ..._core.researcher import Researcher

__all__ = ('build_mcp_server', 'main', 'serve')

_MCP_MISSING = f'The MCP server needs the MCP SDK: install it ({install_hint("mcp")}).\n'
#: Said on stderr when stdin is a terminal: a person typed the command, and stdio waits for a client's JSON-RPC.
_TTY_NOTE = (
    'Waiting for an MCP client on stdio: this server is meant to be started by an MCP client (Claude Desktop, '
    'Cursor, pydantic-ai ...), which speaks JSON-RPC to it. To connect one, print its config with '
    '`pydantic-ai-perplexity config claude-desktop` (or claude-code, cursor, vscode, pydantic-deep); to try it by '
    'hand, pipe the self-test in docs/mcp.md into this command. Ctrl-D or Ctrl-C ends it.\n'
)
#: Said on stderr at start without a key: research calls will fail until one is set, unless the emulator is asked for.
_NO_KEY_NOTE = (
    'No PERPLEXITY_API_KEY: research calls will answer that research is not available. Set the key where the client '
    'starts this server, or add --emulator to try it offline on the built-in emulator (canned answers).\n'
)
_DRAIN_MARGIN_SECONDS = 30.0
#: The `--lean` flag's help, shared by `python -m pydantic_ai_perplexity.mcp` and the CLI's `mcp` command.
LEAN_HELP = (
    'List the tools in their lean variant: short descriptions and few arguments, about a quarter of the tokens '
    '(default: PERPLEXITY_MCP_LEAN).'
)


def build_mcp_server(
    *,
    researcher: Researcher | None = None,
    wait_seconds: float | None = None,
    spotlight: bool = True,
    max_answer_chars: int | None = None,
    lean: bool | None = None,
) -> MCPServer[Any]:
    """The MCP server (an `mcp.server.mcpserver.MCPServer`) with the research tools, the skill and run resources.

    Serve it yourself (`server.run('stdio')`, or mount `server.streamable_http_app(...)` in your ASGI app), or use
    `serve()`, which adds the guarded stdio wire, the instant handshake and the HTTP protections.

    Args:
        researcher: Share a `Researcher` (its client, ledger and budget); by default one is made on the first call
            from the environment, with `origin='mcp'`, and closed with the server.
        wait_seconds: How long one call waits before handing back the `response_id`; default
            `PERPLEXITY_WAIT_SECONDS`, else 55 s. Ignored when `researcher` is given (its own budget applies).
        spotlight: Wrap web text in nonce delimiters marking it as data (on by default).
        max_answer_chars: Bound on the answer text a model reads (default 12 000); the full result is the
            `perplexity://runs/{response_id}` resource.
        lean: List the tools' lean variant (short descriptions, few arguments, no output schema: about a quarter
            of the tokens); default `PERPLEXITY_MCP_LEAN`, else the full list.
    """
    from ._tools import build_server

    return build_server(
        researcher=researcher,
        wait_seconds=wait_seconds,
        spotlight=spotlight,
        max_answer_chars=max_answer_chars,
        lean=lean,
    )


def serve(
    transport: Literal['stdio', 'http'] | str = 'stdio',
    host: str = '127.0.0.1',
    port: int = 8000,
    token: str | None = None,
    *,
    wait_seconds: float | None = None,
    allowed_hosts: Sequence[str] | None = None,
    tokens_file: str | os.PathLike[str] | None = None,
    emulator: bool = False,
    header_timeout: float | None = None,
    max_connections_per_client: int | None = None,
    lean: bool | None = None,
) -> None:
    """Serve the research tools until stdin closes (stdio) or the process is stopped (http).

    `emulator` runs research on the built-in emulator (offline, canned answers, no key), said on stderr.

    HTTP clients must send a bearer token when any is configured, and one is required when `host` is not a
    loopback address: `token` (default `PERPLEXITY_MCP_TOKEN`, named `default`), named ones in
    `PERPLEXITY_MCP_TOKENS` (`alice:tok1,bob:tok2`), or a file, `tokens_file` (default
    `PERPLEXITY_MCP_TOKENS_FILE`), read again when it changes. `allowed_hosts` (default
    `PERPLEXITY_MCP_ALLOWED_HOSTS`) adds `Host` names HTTP clients may use, e.g. behind a reverse proxy.
    `header_timeout` (default `PERPLEXITY_MCP_HEADER_TIMEOUT`, else 10 s) and `max_connections_per_client`
    (default `PERPLEXITY_MCP_MAX_CONNECTIONS_PER_CLIENT`, else 1024) guard the HTTP server's connections. `lean`
    (default `PERPLEXITY_MCP_LEAN`) lists the tools' lean variant. A waiting call that asked for progress hears at
    least every `PERPLEXITY_MCP_HEARTBEAT_SECONDS` (15 by default), even from a run with no new step. Exits 2 on
    an unsafe or impossible configuration.
    """
    if find_spec('mcp') is None:
        sys.stderr.write(_MCP_MISSING)
        raise SystemExit(2)
    from ..._base.env import ENV
    from ..._domain.settings import variable

    lean = _checked_settings(lean, emulator=emulator)
    if not emulator and not variable(ENV.API_KEY):
        sys.stderr.write(_NO_KEY_NOTE)
    from ..._domain.settings import skip_idle_logfire_plugin

    skip_idle_logfire_plugin()
    _log_to_stderr()
    try:
        if transport == 'stdio':
            if sys.stdin.isatty():
                sys.stderr.write(_TTY_NOTE)
                sys.stderr.flush()
            from ._stdio import serve_stdio

            stopped_by = serve_stdio(
                wait_seconds=wait_seconds, drain_seconds=_wait_budget(wait_seconds) + _DRAIN_MARGIN_SECONDS, lean=lean
            )
        elif transport in ('http', 'streamable-http'):
            stopped_by = _serve_http(
                host,
                port,
                token,
                tokens_file=tokens_file,
                wait_seconds=wait_seconds,
                allowed_hosts=allowed_hosts,
                header_timeout=header_timeout,
                max_connections_per_client=max_connections_per_client,
                lean=lean,
            )
        else:
            sys.stderr.write(f'Unknown transport {transport!r}: use "stdio" or "http".\n')
            raise SystemExit(2)
    except KeyboardInterrupt:
        stopped_by = signal.SIGINT
    if exit_code(stopped_by):  # interrupted (SIGINT): 130, as shells expect (_exit.py); SIGTERM or EOF return
        raise SystemExit(exit_code(stopped_by))


def _checked_settings(lean: bool | None, *, emulator: bool) -> bool:
    """Whether to serve the lean tools, once the MCP settings (and the emulator, if asked) are checked: exits 2 with
    the reason when one is unusable."""
    from ..._base.errors import ConfigurationError
    from ..._domain.settings import mcp_heartbeat, mcp_lean

    try:
        lean = mcp_lean(lean)
        mcp_heartbeat()  # refused here, before serving, rather than at the first call
        if emulator:
            _use_emulator()
    except (ConfigurationError, ValueError) as exc:
        sys.stderr.write(f'Cannot serve MCP: {exc}\n')
        raise SystemExit(2) from None
    return lean


def _serve_http(
    host: str,
    port: int,
    token: str | None,
    *,
    tokens_file: str | os.PathLike[str] | None,
    wait_seconds: float | None,
    allowed_hosts: Sequence[str] | None,
    header_timeout: float | None,
    max_connections_per_client: int | None,
    lean: bool,
) -> int | None:
    """`serve` over Streamable HTTP: tokens and connection limits checked (exit 2 if unusable), then served until
    stopped; the signal that stopped it."""
    from ._conns import ConnectionLimits
    from ._http import refuse_unsafe_bind, run_http
    from ._stdio import configure_tracing_quietly
    from ._tokens import TokenConfigError, Tokens
    from ._tools import Drain, build_server

    try:
        tokens = Tokens.from_config(token=token, tokens_file=tokens_file)
        limits = ConnectionLimits.configured(header_timeout, max_connections_per_client)
    except (TokenConfigError, ValueError) as exc:
        sys.stderr.write(f'Cannot serve MCP: {exc}\n')
        raise SystemExit(2) from None
    refuse_unsafe_bind(host, tokens)
    configure_tracing_quietly()
    drain = Drain()
    server = build_server(wait_seconds=wait_seconds, drain=drain, lean=lean)
    hosts = list(allowed_hosts or ()) or None
    return run_http(server, host=host, port=port, tokens=tokens, allowed_hosts=hosts, drain=drain, limits=limits)


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m pydantic_ai_perplexity.mcp [--transport http --host H --port P --token T]`."""
    parser = argparse.ArgumentParser(
        prog='python -m pydantic_ai_perplexity.mcp',
        description='Serve Perplexity research tools over MCP (stdio by default, or Streamable HTTP).',
    )
    parser.add_argument('--transport', choices=('stdio', 'http'), default='stdio')
    parser.add_argument('--host', default='127.0.0.1', help='HTTP only; a non-loopback address needs a token.')
    parser.add_argument('--port', type=int, default=8000, help='HTTP only (0 picks a free port).')
    parser.add_argument('--token', default=None, help='HTTP bearer token (default: PERPLEXITY_MCP_TOKEN).')
    parser.add_argument(
        '--tokens-file',
        default=None,
        help='HTTP: named tokens (JSON or name:token lines), re-read on change (default: PERPLEXITY_MCP_TOKENS_FILE).',
    )
    parser.add_argument(
        '--emulator',
        action='store_true',
        help='Research on the built-in emulator: offline, canned answers from a small local corpus, no key.',
    )
    parser.add_argument(
        '--header-timeout',
        type=float,
        default=None,
        help='HTTP: seconds a connection has to send a request head (default: PERPLEXITY_MCP_HEADER_TIMEOUT, 10).',
    )
    parser.add_argument(
        '--max-connections-per-client',
        type=int,
        default=None,
        help='HTTP: connections one client address may hold (default: PERPLEXITY_MCP_MAX_CONNECTIONS_PER_CLIENT, '
        '1024).',
    )
    parser.add_argument('--lean', action='store_true', default=None, help=LEAN_HELP)
    args = parser.parse_args(argv)
    serve(
        args.transport,
        args.host,
        args.port,
        args.token,
        tokens_file=args.tokens_file,
        emulator=args.emulator,
        header_timeout=args.header_timeout,
        max_connections_per_client=args.max_connections_per_client,
        lean=args.lean,
    )
    return 0


def _use_emulator() -> None:
    """Start the built-in emulator for this process and point research at it, said on stderr (never silently)."""
    from ..._base.env import ENV
    from ...emulator import Emulator
    from ...emulator._offline import offline_time_scale

    emu = Emulator(time_scale=offline_time_scale()).start()
    os.environ[ENV.API_KEY] = emu.api_key
    os.environ[ENV.BASE_URL] = emu.base_url
    sys.stderr.write(
        f'--emulator: research runs on the built-in emulator at {emu.base_url} (offline: canned answers from a small '
        'local corpus; no Perplexity key is used and nothing is billed).\n'
    )


def _wait_budget(wait_seconds: float | None) -> float:
    """The budget a call waits (for the EOF drain); a bad `PERPLEXITY_WAIT_SECONDS` is reported by the tools."""
    from ..._base.errors import ConfigurationError
    from ..._domain.settings import DEFAULT_MCP_WAIT_SECONDS, wait_budget

    try:
        return wait_budget(given=wait_seconds, mcp=True)
    except ConfigurationError:
        return DEFAULT_MCP_WAIT_SECONDS


def _log_to_stderr() -> None:
    import logging

    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format='%(levelname)s %(name)s: %(message)s')
