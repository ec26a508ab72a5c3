"""Connections before they are requests: a header timeout and connection limits for the HTTP server.

uvicorn reads a request's head for as long as the client likes (its keep-alive timeout starts only after a response)
and accepts connections until the process runs out of file descriptors; then the ledger, the upstream API and
`/healthz` fail too. So every connection of the Streamable HTTP server goes through `guarded_protocol`:

- **Header timeout.** A connection that has not sent a whole request head within `header_timeout` seconds (from
  its opening, or from its previous answer on a kept-alive connection) is closed.
- **Per client address.** A client address holds at most `per_client` connections. One more closes that address's
  oldest connection still waiting for its head (a half-open request, or an idle kept-alive one); if all of them are
  busy with requests, the new connection is closed instead. A request whose head arrives in its first packet, as an
  honest client's does, is never the oldest waiting one for long, so it is served while an attack goes on.
- **In all.** At most `total` connections, set below the process's file descriptor limit (`RLIMIT_NOFILE`), so
  there are always descriptors left for the ledger, the upstream API and `/healthz`; beyond it, the oldest waiting
  connection of any address is closed the same way.

The listening backlog (`ACCEPT_BATCH`) is also what the event loop accepts in one go, so a flood can never take
more than a few batches of descriptors before the limits above close them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..._base.env import ENV
from ..._domain.settings import variable
from ._throttle import ThrottledWarning

if TYPE_CHECKING:
    from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = (
    'ACCEPT_BATCH',
    'DEFAULT_HEADER_TIMEOUT',
    'DEFAULT_PER_CLIENT',
    'HEADER_TIMEOUT_ENV',
    'PER_CLIENT_ENV',
    'ConnectionLimits',
    'guarded_protocol',
    'quiet_descriptor_errors',
)

_log = logging.getLogger('pydantic_ai_perplexity.mcp')

HEADER_TIMEOUT_ENV = ENV.MCP_HEADER_TIMEOUT
PER_CLIENT_ENV = ENV.MCP_MAX_CONNECTIONS_PER_CLIENT
#: Seconds a connection has to send a whole request head.
DEFAULT_HEADER_TIMEOUT = 10.0
#: Connections one client address may hold (behind a proxy, the proxy is one address: raise it there). High enough
#: for an honest burst (500 concurrent calls from one client); the descriptor limit caps all clients together.
DEFAULT_PER_CLIENT = 1024
#: The listening backlog, which is also how many connections the event loop accepts in one go: room for an honest
#: burst (at 32, 500 concurrent calls from one client lost a tenth of their connections in the queue).
ACCEPT_BATCH = 128
#: Descriptors kept for everything but client connections (ledger, upstream API, logs, pipes).
_RESERVED_FDS = 64
_MAX_TOTAL = 16384


@dataclass(frozen=True)
class ConnectionLimits:
    """The header timeout and the connection limits (see the module docstring)."""

    header_timeout: float = DEFAULT_HEADER_TIMEOUT
    per_client: int = DEFAULT_PER_CLIENT
    total: int = _MAX_TOTAL

    @classmethod
    def configured(cls, header_timeout: float | None = None, per_client: int | None = None) -> ConnectionLimits:
        """The limits given, else from the environment, else the defaults; `total` from `RLIMIT_NOFILE`.

        ValueError naming the setting for a value that is not a positive number.
        """
        timeout = header_timeout if header_timeout is not None else _env(HEADER_TIMEOUT_ENV, float)
        clients = per_client if per_client is not None else _env(PER_CLIENT_ENV, int)
        timeout = DEFAULT_HEADER_TIMEOUT if timeout is None else timeout
        clients = DEFAULT_PER_CLIENT if clients is None else clients
        if not 0 < timeout <= 3600:
            raise ValueError(
                f'the header timeout must be more than 0 and at most 3600 seconds (got {timeout}); '
                f'see {HEADER_TIMEOUT_ENV}.'
            )
        if clients < 1:
            raise ValueError(f'the connections per client must be at least 1 (got {clients}); see {PER_CLIENT_ENV}.')
        return cls(header_timeout=float(timeout), per_client=clients, total=_total_budget())


def _env(name: str, kind: Callable[[str], float | int]) -> Any:
    text = variable(name)
    if not text:
        return None
    try:
        return kind(text)
    except ValueError:
        raise ValueError(f'{name}={text[:40]!r} is not a number.') from None


def _total_budget() -> int:
    """Connections this process can hold and still have descriptors for the rest: its limit, less a reserve and
    the connections the event loop may accept before the limits close them."""
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ImportError, OSError, ValueError):  # no `resource` (Windows): the OS limits are far higher there
        return _MAX_TOTAL
    if soft == resource.RLIM_INFINITY:
        return _MAX_TOTAL
    return max(8, min(_MAX_TOTAL, soft - _RESERVED_FDS - 3 * ACCEPT_BATCH))


class _Guard:
    """The open connections, oldest first, in all and per client address."""

    def __init__(self, limits: ConnectionLimits) -> None:
        self.limits = limits
        self.open: dict[H11Protocol, None] = {}
        self.by_client: dict[str, dict[H11Protocol, None]] = {}
        self._limited = ThrottledWarning(_log)

    def admit(self, conn: H11Protocol) -> bool:
        """Count `conn` in; if that is one too many, close the oldest waiting connection (or `conn`). Whether `conn`
        is still open."""
        address = conn.client[0] if conn.client else ''
        mine = self.by_client.setdefault(address, {})
        self.open[conn] = None
        mine[conn] = None
        for group, limit, scope in ((mine, self.limits.per_client, 'client'), (self.open, self.limits.total, 'all')):
            if len(group) > limit:
                victim = next((c for c in group if c is not conn and _waiting(c)), conn)
                self._limited.warn(
                    'Connection limit reached (%d for %s): closed the oldest connection still waiting for a request',
                    limit,
                    'one client address' if scope == 'client' else 'all clients',
                )
                victim.transport.close()
                self.forget(victim)
                if victim is conn:
                    return False
        return True

    def forget(self, conn: H11Protocol) -> None:
        self.open.pop(conn, None)
        address = conn.client[0] if conn.client else ''
        mine = self.by_client.get(address)
        if mine is not None:
            mine.pop(conn, None)
            if not mine:
                del self.by_client[address]


def _waiting(conn: H11Protocol) -> bool:
    """Whether `conn` has no request in progress: it is reading a head, or idle between requests."""
    import h11

    return conn.conn.their_state is h11.IDLE and not conn.transport.is_closing()


def guarded_protocol(limits: ConnectionLimits) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol with the header timeout and the connection limits, for `uvicorn.Config(http=...)`."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    guard = _Guard(limits)

    class GuardedH11Protocol(H11Protocol):
        _head_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:
            super().connection_made(transport)
            if guard.admit(self):
                self._await_head()

        def connection_lost(self, exc: Exception | None) -> None:
            self._head_arrived()
            guard.forget(self)
            super().connection_lost(exc)

        def handle_events(self) -> None:
            super().handle_events()
            if self.conn.their_state is not h11.IDLE:
                self._head_arrived()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
                self._await_head()

        def _await_head(self) -> None:
            self._head_arrived()
            self._head_timer = self.loop.call_later(guard.limits.header_timeout, self._too_slow)

        def _head_arrived(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _too_slow(self) -> None:
            self._head_timer = None
            if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
                self.transport.close()

    return GuardedH11Protocol


def quiet_descriptor_errors(loop: asyncio.AbstractEventLoop) -> None:
    """Out of descriptors at `accept()`, the event loop pauses accepting for a second and logs a traceback; log one
    line instead (the limits above make it rare: only other processes' descriptors can bring it about)."""
    import errno

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get('exception')
        if isinstance(exc, OSError) and exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
            _log.warning(
                '%s: %s; accepting again in a moment', context.get('message', 'Out of resources'), exc.strerror
            )
            return
        loop.default_exception_handler(context)

    loop.set_exception_handler(handler)
