"""Serving MCP over Streamable HTTP: stateless, loopback by default, bearer token, Host/Origin checks, size limit.

- **Bind.** `127.0.0.1` unless told otherwise. Any other address needs a bearer token (`PERPLEXITY_MCP_TOKEN` or
  `--token`); without one the server refuses to start.
- **Token.** Every request must carry `Authorization: Bearer <token>` when a token is set; it is compared in
  constant time, answered 401 otherwise, and never forwarded anywhere: Perplexity is called with the server's own
  `PERPLEXITY_API_KEY`, and no tool takes a key.
- **DNS rebinding.** `Host` must name this server (421 otherwise) and a browser `Origin` must be this server's
  (403 otherwise). Loopback names are always allowed; add the names clients use behind a proxy or balancer with
  `PERPLEXITY_MCP_ALLOWED_HOSTS` (comma-separated, e.g. `research.internal,research.internal:443`).
- **Size.** Request bodies over 1 MiB are refused (413).
- **Stateless.** No session lives in the process (every request stands alone and the ledger is shared through
  SQLite), so several instances can run behind a load balancer. Progress streams back over SSE.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import socket
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer
    from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ('MAX_BODY_BYTES', 'http_app', 'is_loopback', 'refuse_unsafe_bind', 'run_http')

MAX_BODY_BYTES = 1024 * 1024
_LOOPBACK_HOSTS = ('127.0.0.1', 'localhost', '[::1]')


def is_loopback(host: str) -> bool:
    """Whether binding `host` keeps the server reachable from this machine only."""
    if host.strip('[]').lower() == 'localhost':
        return True
    try:
        return ipaddress.ip_address(host.strip('[]')).is_loopback
    except ValueError:
        return False


def _allowed_hosts(host: str, extra: list[str]) -> list[str]:
    """`Host` values to accept: loopback names, the bound name, this machine's name off loopback, and `extra`."""
    names: list[str] = list(_LOOPBACK_HOSTS)
    if host not in ('0.0.0.0', '::', '[::]'):  # noqa: S104 (a name to accept, not a bind)
        names.append(f'[{host}]' if ':' in host and not host.startswith('[') else host)
    if not is_loopback(host):
        names.append(socket.gethostname())
    names.extend(extra)
    allowed: list[str] = []
    for name in dict.fromkeys(names):
        has_port = ']:' in name if name.startswith('[') else ':' in name
        allowed.extend([name] if has_port else [name, f'{name}:*'])
    return allowed


class _BearerAuth:
    """Refuses (401) any HTTP request that does not carry the server's bearer token."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self._token = token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope['type'] == 'http' and not self._authorized(scope):
            from starlette.responses import JSONResponse

            response = JSONResponse(
                {'error': 'unauthorized', 'error_description': 'Send the server token as "Authorization: Bearer ...".'},
                status_code=401,
                headers={'WWW-Authenticate': 'Bearer'},
            )
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _authorized(self, scope: Scope) -> bool:
        header = next((v for k, v in scope.get('headers', ()) if k == b'authorization'), b'')
        scheme, _, value = bytes(header).partition(b' ')
        # compare_digest even on a wrong scheme, so timing never tells which part was wrong.
        return hmac.compare_digest(value.strip(), self._token) and scheme.lower() == b'bearer'


def http_app(
    server: MCPServer[Any],
    *,
    host: str = '127.0.0.1',
    token: str | None = None,
    allowed_hosts: list[str] | None = None,
    path: str = '/mcp',
) -> ASGIApp:
    """The ASGI app serving `server` at `path`, with the protections above (the token only when given)."""
    from mcp.server.transport_security import TransportSecuritySettings

    hosts = _allowed_hosts(host, allowed_hosts or [])
    origins = [f'{scheme}://{name}' for name in hosts for scheme in ('http', 'https')]
    # Passed explicitly: the SDK turns this protection off when given None for a non-loopback host.
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
    )
    app: ASGIApp = server.streamable_http_app(
        streamable_http_path=path,
        stateless_http=True,
        json_response=False,
        max_request_body_size=MAX_BODY_BYTES,
        transport_security=security,
        host=host,
    )
    return _BearerAuth(app, token) if token else app


def refuse_unsafe_bind(host: str, token: str | None) -> None:
    """Exit 2 with a clear message when `host` is reachable from other machines and no token protects it."""
    if is_loopback(host) or token:
        return
    sys.stderr.write(
        f'Refusing to serve MCP on {host}: a non-loopback address needs a bearer token. '
        'Set PERPLEXITY_MCP_TOKEN (or pass --token) to a long random secret, or bind 127.0.0.1.\n'
    )
    raise SystemExit(2)


def run_http(
    server: MCPServer[Any], *, host: str, port: int, token: str | None, allowed_hosts: list[str] | None = None
) -> None:
    """Serve until interrupted; prints the URL to stderr once listening. Refuses an unsafe bind (exit 2)."""
    import uvicorn

    class _Server(uvicorn.Server):
        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets)
            if self.started:
                _announce(self)

    refuse_unsafe_bind(host, token)
    extra = [h.strip() for h in (allowed_hosts or os.environ.get('PERPLEXITY_MCP_ALLOWED_HOSTS', '').split(','))]
    app = http_app(server, host=host, token=token, allowed_hosts=[h for h in extra if h])
    config = uvicorn.Config(app, host=host, port=port, log_level='warning', access_log=False, lifespan='on')
    _Server(config).run()


def _announce(server: Any) -> None:
    for listener in server.servers:
        for sock in listener.sockets:
            bound_host, bound_port = sock.getsockname()[:2]
            shown = f'[{bound_host}]' if ':' in bound_host else bound_host
            sys.stderr.write(f'Perplexity MCP server listening on http://{shown}:{bound_port}/mcp\n')
    sys.stderr.flush()
