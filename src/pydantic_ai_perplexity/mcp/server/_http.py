"""Serving MCP over Streamable HTTP: stateless, loopback by default, named bearer tokens, Host/Origin checks, size
limit, a health endpoint for load balancers, and a graceful shutdown.

- **Bind.** `127.0.0.1` unless told otherwise. Any other address needs at least one bearer token, each of at least
  16 characters with 8 different ones (`_tokens.is_weak`); without that the server refuses to start.
- **Tokens** (`_tokens.py`). `PERPLEXITY_MCP_TOKEN` (named `default`), named ones in `PERPLEXITY_MCP_TOKENS`, or a
  file in `PERPLEXITY_MCP_TOKENS_FILE` that is read again when it changes (revocation without a restart). With any
  configured, every request to `/mcp` must carry `Authorization: Bearer <token>` of one of them (401 otherwise);
  the token's name is the caller, recorded on every run it starts. Tokens are never forwarded: Perplexity is called
  with the server's own `PERPLEXITY_API_KEY`, and no tool takes a key.
- **DNS rebinding.** `Host` must name this server (421 otherwise) and a browser `Origin` must be this server's
  (403 otherwise). Loopback names are always allowed; add the names clients use behind a proxy or balancer with
  `PERPLEXITY_MCP_ALLOWED_HOSTS` (comma-separated, e.g. `research.internal,research.internal:443`).
- **Browsers (CORS).** Off by default: a preflight (`OPTIONS` with `Origin`) is refused with 403. Origins listed in
  `PERPLEXITY_MCP_CORS_ORIGINS` (comma-separated `scheme://host[:port]`, no wildcard) get 204 with the
  `Access-Control-*` headers, may send requests (their `Origin` passes the rebinding check) and read the answers.
  A browser client still needs a bearer token when tokens are configured.
- **Answers.** A JSON-RPC request whose id can be read is answered with that id, even when the SDK refuses its
  envelope (it answers those with id null), and a handler's unexpected failure is a JSON-RPC error without a
  traceback (`_sdk.answer_errors_cleanly`).
- **Size.** Request bodies over 1 MiB are refused (413).
- **Connections.** A request head must arrive within a header timeout (10 s), and a client address holds at most
  1,024 connections, all of them fewer than the descriptor limit allows (`_conns.py`): half-open requests cannot lock
  out honest callers or `/healthz`.
- **Stateless.** No session lives in the process (every request stands alone, in both protocol eras, and runs are
  shared through the ledger), so any instance behind a load balancer serves any call. Progress streams over SSE.
  A `notifications/cancelled` any instance accepts stops the call's run upstream, found through the ledger by
  caller and request id (`_cancels.py`).
- **Server card.** `GET /.well-known/mcp/server-card.json`, without a token (SEP-2127): the server's identity,
  endpoint, capabilities and tools, nothing secret (`_card.py`). A `Host` the server does not answer to gets 421.
- **Health.** `GET /healthz`, without a token: 200 `{"status": "ok", "ledger": "ok"}` when the ledger answers a
  fresh connection, 503 when it does not or while the server shuts down. It says nothing else (no URL, no names).
- **Shutdown.** On SIGTERM (or Ctrl-C) the server stops accepting connections and hands off every research call
  in flight at once: each answers with its `response_id` (in the ledger since its start) for any instance to
  collect. Then the answers go out, queued ledger writes land, and the process exits: within
  `SHUTDOWN_GRACE_SECONDS` plus the ledger flush, and a watchdog ends it at `SHUTDOWN_DEADLINE_SECONDS` whatever
  is stuck.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import socket
import sys
import threading
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any, cast

from ..._base.env import ENV
from ..._base.net import is_loopback
from ..._domain.settings import variable
from . import _jsonrpc
from ._card import CARD_PATH
from ._tokens import CALLER_SCOPE_KEY, STRENGTH_RULE, Tokens, is_weak

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer
    from starlette.types import ASGIApp, Receive, Scope, Send

    from ..._ledger import Ledger
    from ._conns import ConnectionLimits
    from ._tools import Drain

__all__ = (
    'CORS_ORIGINS_ENV',
    'HEALTH_PATH',
    'MAX_BODY_BYTES',
    'SHUTDOWN_DEADLINE_SECONDS',
    'SHUTDOWN_GRACE_SECONDS',
    'http_app',
    'parse_origins',
    'refuse_unsafe_bind',
    'run_http',
)

MAX_BODY_BYTES = 1024 * 1024
HEALTH_PATH = '/healthz'
#: How long a shutdown waits for answers to go out once the calls in flight were handed off.
SHUTDOWN_GRACE_SECONDS = 5.0
#: When a shutdown that is still not done ends the process anyway (exit code 1).
SHUTDOWN_DEADLINE_SECONDS = 10.0
_HEALTH_TIMEOUT_SECONDS = 3.0
_LOOPBACK_HOSTS = ('127.0.0.1', 'localhost', '[::1]')
#: Origins whose browser pages may call the server (CORS), comma-separated; none by default.
CORS_ORIGINS_ENV = ENV.MCP_CORS_ORIGINS
_CORS_METHODS = 'GET, POST, DELETE'
_CORS_HEADERS = ('authorization', 'content-type', 'accept', 'last-event-id', 'mcp-protocol-version', 'mcp-session-id')
_CORS_EXPOSE = 'Mcp-Session-Id, Mcp-Protocol-Version, WWW-Authenticate'
_CORS_MAX_AGE = '600'
_ORIGIN = re.compile(r'^https?://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(:[0-9]{1,5})?$')


def parse_origins(text: str) -> list[str]:
    """The origins of `PERPLEXITY_MCP_CORS_ORIGINS`; ValueError naming a bad entry (a wildcard, a path...)."""
    origins: list[str] = []
    for entry in (e.strip() for e in text.split(',')):
        if not entry:
            continue
        if not _ORIGIN.match(entry):
            raise ValueError(
                f'{CORS_ORIGINS_ENV}: {entry[:80]!r} is not an origin; list each one as scheme://host[:port], '
                'e.g. https://app.example.com (no wildcard, no path).'
            )
        origins.append(entry.lower())
    return origins


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


class LedgerProbe:
    """Whether the ledger answers now, for `/healthz`: a fresh connection each time (a pooled one may be stale).

    One probe at a time: a probe asked for while another runs answers what the last one found.
    """

    def __init__(self, ledger: Callable[[], Ledger] | None = None) -> None:
        self._make = ledger
        self._ledger: Ledger | None = None
        self._lock = threading.Lock()
        self._last = False

    def __call__(self) -> bool:
        if not self._lock.acquire(blocking=False):
            return self._last
        try:
            from ..._base.errors import ConfigurationError
            from ..._ledger import Ledger

            try:
                if self._ledger is None:
                    self._ledger = self._make() if self._make is not None else Ledger()
            except ConfigurationError:
                self._last = False
                return False
            self._last = self._ledger.check()
            self._ledger.close()
            return self._last
        finally:
            self._lock.release()


class _Front:
    """What sits before the MCP app: `/healthz` (no token), CORS, then the bearer check, which names the caller."""

    def __init__(
        self,
        app: ASGIApp,
        tokens: Tokens | None,
        probe: Callable[[], bool],
        cors_origins: list[str] | None = None,
        path: str = '/mcp',
        on_cancelled: Callable[[str | None, int | str], None] | None = None,
        server: MCPServer[Any] | None = None,
        allowed_hosts: list[str] | None = None,
    ) -> None:
        self.app = app
        self.server = server
        self.allowed_hosts = allowed_hosts or []
        self.on_cancelled = on_cancelled
        self.tokens = tokens
        self.probe = probe
        self.cors_origins = frozenset(cors_origins or ())
        self.path = path
        self.draining = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope['type'] == 'http':
            if scope['path'] == HEALTH_PATH:
                await self._health(scope, receive, send)
                return
            if scope['path'] == CARD_PATH and self.server is not None:
                await self._card(scope, receive, send)
                return
            origin = _header(scope, b'origin')
            if scope['method'] == 'OPTIONS':
                await self._preflight(scope, receive, send, origin)
                return
            if origin is not None and origin.lower() in self.cors_origins:
                send = _with_cors(send, origin)
            if not await self._authorized(scope, receive, send):
                return
            if scope['method'] == 'POST':
                await self._post(scope, receive, send)
                return
        await self.app(scope, receive, send)

    async def _authorized(self, scope: Scope, receive: Receive, send: Send) -> bool:
        """Whether the request may go on: no tokens configured, or it bears one (its caller then noted in `scope`);
        else it was answered 401."""
        if self.tokens is not None:
            caller = self._caller(scope)
            if caller is None:
                await self._unauthorized(scope, receive, send)
                return False
            scope[CALLER_SCOPE_KEY] = caller
        return True

    async def _post(self, scope: Scope, receive: Receive, send: Send) -> None:
        """A JSON-RPC POST, answered by the SDK; a cancellation it accepted is passed on to `on_cancelled`."""
        status, body = await _answer_with_ids(self.app, scope, receive, send)
        if status == 202 and self.on_cancelled is not None:  # a notification the SDK accepted
            from ._cancels import cancelled_request

            request_id = cancelled_request(body)
            if request_id is not None:  # the call may be served by any instance: through the ledger
                self.on_cancelled(scope.get(CALLER_SCOPE_KEY), request_id)

    async def _preflight(self, scope: Scope, receive: Receive, send: Send, origin: str | None) -> None:
        """A CORS preflight: 204 with the `Access-Control-*` headers for a listed origin, 403 for any other."""
        from starlette.responses import JSONResponse, Response

        allow = 'GET, POST, DELETE, OPTIONS'
        if origin is None:  # not a browser's preflight: say what the endpoint takes
            response = Response(status_code=204, headers={'Allow': allow})
        elif origin.lower() not in self.cors_origins:
            response = JSONResponse(
                {
                    'error': 'origin not allowed',
                    'error_description': (
                        'Browser clients are not allowed from this origin. The operator can list it in '
                        f'{CORS_ORIGINS_ENV} (e.g. https://app.example.com).'
                    ),
                },
                status_code=403,
                headers={'Vary': 'Origin'},
            )
        else:
            asked = _header(scope, b'access-control-request-headers') or ''
            names = [n.strip().lower() for n in asked.split(',') if n.strip()]
            granted = [n for n in names if n in _CORS_HEADERS or n.startswith('mcp-')]
            headers = {
                'Access-Control-Allow-Origin': origin,
                'Access-Control-Allow-Methods': _CORS_METHODS,
                'Access-Control-Allow-Headers': ', '.join(dict.fromkeys([*_CORS_HEADERS, *granted])),
                'Access-Control-Max-Age': _CORS_MAX_AGE,
                'Vary': 'Origin, Access-Control-Request-Headers',
                'Allow': allow,
            }
            response = Response(status_code=204, headers=headers)
        await response(scope, receive, send)

    def _caller(self, scope: Scope) -> str | None:
        assert self.tokens is not None
        header = next((v for k, v in scope.get('headers', ()) if k == b'authorization'), b'')
        scheme, _, value = bytes(header).partition(b' ')
        # Compared even on a wrong scheme, so timing never tells which part was wrong.
        name = self.tokens.identify(value.strip())
        return name if scheme.lower() == b'bearer' else None

    async def _unauthorized(self, scope: Scope, receive: Receive, send: Send) -> None:
        from starlette.responses import JSONResponse

        response = JSONResponse(
            {'error': 'unauthorized', 'error_description': 'Send a server token as "Authorization: Bearer ...".'},
            status_code=401,
            headers={'WWW-Authenticate': 'Bearer'},
        )
        await response(scope, receive, send)

    async def _card(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The server card (`_card.py`), without a token; a `Host` this server does not answer to gets 421."""
        from starlette.responses import JSONResponse

        from ._card import server_card

        host = _header(scope, b'host') or ''
        if scope['method'] not in ('GET', 'HEAD'):
            response = JSONResponse({'error': 'method not allowed'}, 405, headers={'Allow': 'GET, HEAD'})
        elif not _host_allowed(host, self.allowed_hosts):
            response = JSONResponse({'error': 'misdirected request', 'error_description': 'Unknown Host.'}, 421)
        else:
            assert self.server is not None
            endpoint = f'{scope.get("scheme", "http")}://{host}{self.path}'
            card = await server_card(self.server, endpoint, token_required=self.tokens is not None)
            # Public metadata with no secret in it: any page may read it, caches may keep it a little while.
            headers = {'Cache-Control': 'public, max-age=300', 'Access-Control-Allow-Origin': '*'}
            response = JSONResponse(card, headers=headers)
        await response(scope, receive, send)

    async def _health(self, scope: Scope, receive: Receive, send: Send) -> None:
        import anyio
        import anyio.to_thread
        from starlette.responses import JSONResponse

        headers = {'Cache-Control': 'no-store'}
        if scope['method'] not in ('GET', 'HEAD'):
            response = JSONResponse({'error': 'method not allowed'}, 405, headers={**headers, 'Allow': 'GET, HEAD'})
        elif self.draining:
            response = JSONResponse({'status': 'draining'}, 503, headers=headers)
        else:
            ok = False
            with anyio.move_on_after(_HEALTH_TIMEOUT_SECONDS):
                ok = await anyio.to_thread.run_sync(self.probe, abandon_on_cancel=True)
            body: dict[str, object] = {'status': 'ok' if ok else 'unavailable', 'ledger': 'ok' if ok else 'unreachable'}
            if ok:  # reachable; but are this process's own writes failing (a full disk, an outage)? Still serving.
                from ..._ledger import process_health

                with anyio.move_on_after(_HEALTH_TIMEOUT_SECONDS):
                    health = await anyio.to_thread.run_sync(process_health, abandon_on_cancel=True)
                    if health.status != 'ok':
                        body = {'status': 'degraded', 'ledger': health.status, 'waiting': health.waiting}
            response = JSONResponse(body, 200 if ok else 503, headers=headers)
        await response(scope, receive, send)


def _host_allowed(host: str, allowed: list[str]) -> bool:
    """Whether `host` matches one of `allowed` (`_allowed_hosts`' names, `name:*` for any port)."""
    if host in allowed:
        return True
    name, sep, port = host.rpartition(':')
    return bool(sep) and port.isdigit() and not name.endswith(':') and f'{name}:*' in allowed


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get('headers', ()):
        if key == name:
            return bytes(value).decode('latin-1')
    return None


def _with_cors(send: Send, origin: str) -> Send:
    """`send` with the CORS headers that let a listed origin's page read the answer."""

    async def cors_send(message: Any) -> None:
        if message['type'] == 'http.response.start':
            headers = [(k, v) for k, v in message.get('headers', ()) if not k.lower().startswith(b'access-control-')]
            headers += [
                (b'access-control-allow-origin', origin.encode('latin-1')),
                (b'access-control-expose-headers', _CORS_EXPOSE.encode()),
                (b'vary', b'Origin'),
            ]
            message = {**message, 'headers': headers}
        await send(message)

    return cors_send


async def _answer_with_ids(app: ASGIApp, scope: Scope, receive: Receive, send: Send) -> tuple[int, bytes]:
    """Serve a POST; an answer the SDK gives with id null to a request whose id can be read gets that id.
    Returns the answer's status and the request's body.

    The SDK refuses a request whose envelope it cannot validate (`params` that is not an object, a lone surrogate)
    with a JSON-RPC error without an id, so the client would wait for its answer forever. Only such error answers
    (400, JSON, id null) are read and rewritten; everything else passes through untouched.
    """
    body = bytearray()

    async def tee() -> Any:
        message = await receive()
        if message['type'] == 'http.request' and len(body) <= MAX_BODY_BYTES:
            body.extend(message.get('body', b''))
        return message

    held: dict[str, Any] | None = None
    chunks: list[bytes] = []
    status = 0

    async def patched(message: Any) -> None:
        nonlocal held, status
        if message['type'] == 'http.response.start':
            status = message['status']
        if message['type'] == 'http.response.start' and message['status'] == 400:
            kind = dict(message.get('headers', ())).get(b'content-type', b'')
            if kind.startswith(b'application/json'):
                held = message
                return
        if held is None or message['type'] != 'http.response.body':
            await send(message)
            return
        chunks.append(message.get('body', b''))
        if message.get('more_body', False):
            return
        data = _with_request_id(b''.join(chunks), bytes(body))
        headers = [(k, v) for k, v in held.get('headers', ()) if k.lower() != b'content-length']
        headers.append((b'content-length', str(len(data)).encode()))
        await send({**held, 'headers': headers})
        await send({'type': 'http.response.body', 'body': data})

    await app(scope, tee, patched)
    return status, bytes(body)


def _with_request_id(answer: bytes, request: bytes) -> bytes:
    """`answer` (a JSON-RPC error) with the request's id when it had none; unchanged otherwise."""
    why = 'Invalid Request: not a valid JSON-RPC request for this server.'
    try:
        reply = _jsonrpc.loads(answer)
        try:
            parsed = _jsonrpc.loads(request) if len(request) <= MAX_BODY_BYTES else None
        except _jsonrpc.TooDeep as exc:
            parsed, why = exc.members, 'Invalid Request: nested too deeply.'
    except ValueError:
        return answer
    request_id = _jsonrpc.readable_id(parsed)
    if not isinstance(reply, dict) or request_id is None:
        return answer
    fields = cast('dict[str, Any]', reply)
    if fields.get('id') is not None or not isinstance(fields.get('error'), dict):
        return answer
    frame = _jsonrpc.refusal_for(parsed) or _jsonrpc.error(request_id, _jsonrpc.INVALID_REQUEST, why)
    return _jsonrpc.dumps(frame)


def http_app(
    server: MCPServer[Any],
    *,
    host: str = '127.0.0.1',
    token: str | None = None,
    tokens: Tokens | None = None,
    allowed_hosts: list[str] | None = None,
    path: str = '/mcp',
    probe: Callable[[], bool] | None = None,
    cors_origins: list[str] | None = None,
) -> ASGIApp:
    """The ASGI app serving `server` at `path`, with `/healthz` and the protections above.

    `tokens` (or a single `token`, named `default`) turns the bearer check on; `probe` answers whether the ledger
    is reachable (default: the ledger the environment configures); `cors_origins` lists the origins whose browser
    pages may call it (see `parse_origins`).
    """
    from mcp.server.transport_security import TransportSecuritySettings

    from ._cancels import for_server
    from ._sdk import answer_errors_cleanly

    answer_errors_cleanly(server)
    hosts = _allowed_hosts(host, allowed_hosts or [])
    origins = [f'{scheme}://{name}' for name in hosts for scheme in ('http', 'https')]
    origins += cors_origins or []
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
    if tokens is None and token:
        tokens = Tokens.from_config(token=token, tokens_file=None)
    cancels = for_server(server)
    on_cancelled = cancels.notify if cancels is not None else None
    return _Front(app, tokens, probe or LedgerProbe(), cors_origins, path, on_cancelled, server, hosts)


def refuse_unsafe_bind(host: str, tokens: Tokens | str | None) -> None:
    """Exit 2 with a clear message when `host` is reachable from other machines and no strong token protects it.

    Off loopback, at least one token is needed and each must be strong (`_tokens.is_weak`); tokens added to a
    watched file later are held to the same rule.
    """
    if is_loopback(host):
        return
    if tokens is None or tokens == '':
        problem = 'a non-loopback address needs a bearer token'
    elif isinstance(tokens, str):
        problem = f'the token is too weak: it needs {STRENGTH_RULE}' if is_weak(tokens) else None
    else:
        problem = tokens.require_strength()
    if problem is None:
        return
    sys.stderr.write(
        f'Refusing to serve MCP on {host}: {problem}. Set PERPLEXITY_MCP_TOKEN (or pass --token) to a long random '
        f'secret ({STRENGTH_RULE}), or name such tokens in PERPLEXITY_MCP_TOKENS or PERPLEXITY_MCP_TOKENS_FILE; '
        'or bind 127.0.0.1.\n'
    )
    raise SystemExit(2)


def run_http(
    server: MCPServer[Any],
    *,
    host: str,
    port: int,
    tokens: Tokens | None,
    allowed_hosts: list[str] | None = None,
    drain: Drain | None = None,
    limits: ConnectionLimits | None = None,
) -> int | None:
    """Serve until SIGTERM or Ctrl-C, then shut down gracefully (above); prints the URL to stderr once listening.
    Returns the signal that stopped it.

    `limits`: the header timeout and connection limits (`_conns.py`; default from the environment).
    """
    import uvicorn
    from sse_starlette.sse import AppStatus

    from ._conns import ACCEPT_BATCH, ConnectionLimits, guarded_protocol, quiet_descriptor_errors

    # By default the SDK's SSE responses end the moment uvicorn is told to exit, cutting off the hand-offs the drain
    # is about to send; they end on their own once answered, and `begin_shutdown` ends any left at the grace's end.
    AppStatus.disable_automatic_graceful_drain()

    refuse_unsafe_bind(host, tokens)
    extra = [h.strip() for h in (allowed_hosts or variable(ENV.MCP_ALLOWED_HOSTS).split(','))]
    try:
        cors = parse_origins(variable(CORS_ORIGINS_ENV))
    except ValueError as exc:
        sys.stderr.write(f'Cannot serve MCP: {exc}\n')
        raise SystemExit(2) from None
    try:
        limits = limits or ConnectionLimits.configured()
    except ValueError as exc:
        sys.stderr.write(f'Cannot serve MCP: {exc}\n')
        raise SystemExit(2) from None
    front = http_app(server, host=host, tokens=tokens, allowed_hosts=[h for h in extra if h], cors_origins=cors)
    assert isinstance(front, _Front)

    class _Server(uvicorn.Server):
        loop: asyncio.AbstractEventLoop | None = None
        stopped_by: int | None = None

        @contextlib.contextmanager
        def capture_signals(self) -> Generator[None, None, None]:
            """uvicorn's, but the signal that stopped the server is returned, not raised again once it has stopped
            (that would end the process before `serve` could exit with the code `_exit.py` gives it)."""
            with super().capture_signals():
                try:
                    yield
                finally:
                    captured = getattr(self, '_captured_signals', None)
                    if isinstance(captured, list) and captured:
                        self.stopped_by = cast('int', captured[0])
                        captured.clear()

        async def startup(self, sockets: Any = None) -> None:
            self.loop = asyncio.get_running_loop()
            quiet_descriptor_errors(self.loop)
            await super().startup(sockets)
            if self.started:
                _announce(self)

        def handle_exit(self, sig: int, frame: Any) -> None:
            first = not self.should_exit
            super().handle_exit(sig, frame)
            if first and self.loop is not None:
                self.loop.call_soon_threadsafe(self.begin_shutdown, sig)

        def begin_shutdown(self, sig: int) -> None:
            """Fail the health check, hand off the calls in flight, and arm the watchdog (uvicorn stops accepting)."""
            front.draining = True
            if drain is not None:
                drain.start()
            if self.loop is not None:
                self.loop.call_later(max(0.0, SHUTDOWN_GRACE_SECONDS - 1.0), _end_streams)
            sys.stderr.write(
                f'Perplexity MCP server: {_signal_name(sig)}, handing off the calls in flight and shutting down\n'
            )
            sys.stderr.flush()
            watchdog = threading.Timer(SHUTDOWN_DEADLINE_SECONDS, _give_up)
            watchdog.daemon = True
            watchdog.start()

    config = uvicorn.Config(
        front,
        host=host,
        port=port,
        log_level='warning',
        access_log=False,
        lifespan='on',
        timeout_graceful_shutdown=int(SHUTDOWN_GRACE_SECONDS),
        http=guarded_protocol(limits),  # a header timeout and connection limits (_conns.py)
        backlog=ACCEPT_BATCH,
    )
    served = _Server(config)
    served.run()
    return served.stopped_by


def _end_streams() -> None:
    from sse_starlette.sse import AppStatus

    AppStatus.should_exit = True


def _signal_name(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f'signal {sig}'


def _give_up() -> None:
    sys.stderr.write(f'Perplexity MCP server: still not shut down after {SHUTDOWN_DEADLINE_SECONDS:.0f} s, exiting\n')
    sys.stderr.flush()
    os._exit(1)


def _announce(server: Any) -> None:
    for listener in server.servers:
        for sock in listener.sockets:
            bound_host, bound_port = sock.getsockname()[:2]
            shown = f'[{bound_host}]' if ':' in bound_host else bound_host
            sys.stderr.write(f'Perplexity MCP server listening on http://{shown}:{bound_port}/mcp\n')
    sys.stderr.flush()
