"""Cancel from any instance: `notifications/cancelled` over Streamable HTTP stops the run upstream, through the ledger.

The HTTP server is stateless (any instance serves any POST), so the notification may reach an instance that is not
running the call, and the SDK has nothing to cancel there (in the 2026-07-28 era it drops client notifications
outright). So each research call over HTTP records its key with the run, `request_key(caller, id)`: the caller (the
bearer token's name) in the `caller` column and `mcp-http:<JSON id>` in `request_id` (`request_kind` `call`), from
the run's first ledger row on. The key is cleared once the call has answered (a finished or handed-off call can no
longer be cancelled, and its client may use the id again). A `perplexity_research_result` call over HTTP claims the
run the same way while it waits (`RemoteCancels.claim`), if the run is its caller's and carries no other key (a
durable workflow's). When the HTTP front has accepted a `notifications/cancelled` (202), the instance that got it
looks the call up with `RemoteCancels.notify`:

- exactly one unfinished run of that caller carries the key and it has its id: it is cancelled upstream
  (`Researcher.cancel`), the run leaves the key and the ledger says why, as over stdio;
- the create is still in flight (the row is a reservation, or there is no row yet): the reservation is marked
  (`cancel_requested_at`, `Ledger.mark_cancel_requested`), and
  the instance watches the ledger for up to `WATCH_SECONDS` for the run's id; the starting instance also looks for
  the mark right after recording the id (`RemoteCancels.check_mark`), so whichever sees the id first cancels;
- two unfinished runs of that caller carry the key: nothing is cancelled (a warning is logged).

Each caller has at most `MAX_WATCHES_PER_CALLER` watches at once; a caller that sends more (a flood of ids no
call has) loses its own oldest watch, never another caller's.

A run is only ever cancelled for the caller that started it. Without bearer tokens (loopback only) every client is
the same anonymous caller and request ids are unique only per client, so two clients that use the same id at the
same time make the cancel ambiguous (nothing is cancelled); name a token per client to tell them apart.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import weakref
from collections import deque
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING, Any, cast

import anyio

from ..._base.statuses import CANCELLING, RESERVED, STARTING, UNFINISHED_ROWS
from ..._ledger import CALL_KEY_PREFIX
from . import _jsonrpc
from ._throttle import ThrottledWarning

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from ..._core.researcher import Researcher
    from ..._ledger import Ledger, RunRecord

__all__ = (
    'CANCELLED_BY_CLIENT',
    'KEY_PREFIX',
    'MAX_WATCHES_PER_CALLER',
    'REQUESTED_BY',
    'WATCH_SECONDS',
    'RemoteCancels',
    'cancelled_request',
    'for_server',
    'request_key',
)

_log = logging.getLogger('pydantic_ai_perplexity.mcp')

KEY_PREFIX = CALL_KEY_PREFIX
#: What the ledger says of a run cancelled because its MCP client cancelled the call (stdio and HTTP alike).
CANCELLED_BY_CLIENT = 'cancelled: the MCP client cancelled the call'
#: Who asked, in `cancel_requested_by`: the cancel request left on a run (on a reservation whose create is still in
#: flight, read by the instance that binds the run's id; on a run cancelled upstream, read when its call answers).
REQUESTED_BY = 'mcp-client'
#: How long the instance that got the notification watches the ledger for the run's id to appear.
WATCH_SECONDS = 20.0
_POLL_SECONDS = 0.2
#: At most this many notifications of one caller are watched at once: a caller sending more (a flood of bogus ids)
#: loses its own oldest watch, never another caller's.
MAX_WATCHES_PER_CALLER = 16
#: Calls in flight: their run has not ended and no cancel was asked for yet.
_UNFINISHED = tuple(status for status in UNFINISHED_ROWS if status != CANCELLING)
_NO_ID_YET = (STARTING, RESERVED)
_CANCEL_GRACE_SECONDS = 15.0


def request_key(request_id: int | str) -> str:
    """The `request_id` recorded with a run started by an HTTP `tools/call`: `mcp-http:` and the id as JSON (so the
    ids `1` and `"1"`, which JSON-RPC tells apart, stay apart)."""
    return KEY_PREFIX + json.dumps(request_id, ensure_ascii=False)


def cancelled_request(body: bytes) -> int | str | None:
    """The `params.requestId` of a `notifications/cancelled` POST body, or None for anything else."""
    try:
        message = _jsonrpc.loads(body)
    except ValueError:
        return None
    if not isinstance(message, dict):
        return None
    fields = cast('dict[str, Any]', message)
    if fields.get('jsonrpc') != '2.0' or fields.get('method') != 'notifications/cancelled' or 'id' in fields:
        return None
    params = fields.get('params')
    rid = cast('dict[str, Any]', params).get('requestId') if isinstance(params, dict) else None
    if isinstance(rid, bool) or not isinstance(rid, int | str):
        return None
    return rid


_REGISTRY: weakref.WeakKeyDictionary[Any, RemoteCancels] = weakref.WeakKeyDictionary()


def for_server(server: MCPServer[Any]) -> RemoteCancels | None:
    """The `RemoteCancels` that `build_server` made for `server`, or None (a server built another way)."""
    return _REGISTRY.get(server)


class RemoteCancels:
    """Applies `notifications/cancelled` accepted by this instance to research calls served by any instance."""

    def __init__(self, researcher: Callable[[], Awaitable[Researcher]]) -> None:
        self._researcher = researcher
        #: The watches in flight, oldest first, per caller (None: the anonymous caller of a server without tokens).
        self._watches: dict[str | None, deque[asyncio.Task[None]]] = {}
        self._flooded = ThrottledWarning(_log)

    def register(self, server: MCPServer[Any]) -> None:
        _REGISTRY[server] = self

    def watching(self, caller: str | None) -> int:
        """How many of `caller`'s notifications are being watched now."""
        return len(self._watches.get(caller, ()))

    def notify(self, caller: str | None, request_id: int | str) -> None:
        """Look the call up and cancel its run, in the background (called on the event loop by the HTTP front).

        A caller has at most `MAX_WATCHES_PER_CALLER` watches: beyond that its oldest one ends, so a flood from one
        caller never crowds out another caller's cancel.
        """
        watches = self._watches.setdefault(caller, deque())
        if len(watches) >= MAX_WATCHES_PER_CALLER:
            watches.popleft().cancel()
            self._flooded.warn(
                'More than %d cancel notifications at once from caller %s: its oldest is no longer watched',
                MAX_WATCHES_PER_CALLER,
                caller or '(anonymous)',
            )
        task = asyncio.get_running_loop().create_task(self._watch(caller, request_key(request_id)))
        watches.append(task)
        task.add_done_callback(partial(self._forget, caller))

    def _forget(self, caller: str | None, task: asyncio.Task[None]) -> None:
        watches = self._watches.get(caller)
        if watches is None:
            return
        with contextlib.suppress(ValueError):  # already dropped as the caller's oldest
            watches.remove(task)
        if not watches:
            del self._watches[caller]

    async def _watch(self, caller: str | None, key: str) -> None:
        try:
            await self.apply(caller, key)
        except Exception as exc:  # a background task: log, never raise into the loop
            _log.warning('Could not apply a cancel notification: %s', type(exc).__name__)

    async def apply(self, caller: str | None, key: str, *, watch_seconds: float = WATCH_SECONDS) -> str:
        """Cancel the run of `caller`'s call `key`; `cancelled`, `ambiguous`, `marked` (the create was still in flight
        when the watch ended) or `none` (no research call of that caller with that key appeared)."""
        r = await self._researcher()
        ledger = r.ledger
        if ledger is None:
            return 'none'
        deadline = time.monotonic() + watch_seconds
        marked: set[str] = set()
        while True:
            rows = await _in_flight(ledger, caller, key)
            if len(rows) > 1:
                _log.warning(
                    'A cancel notification matches %d calls in flight of the same caller (request ids are unique only '
                    'per client; give each client its own token): nothing was cancelled',
                    len(rows),
                )
                return 'ambiguous'
            if rows and rows[0].status not in _NO_ID_YET:
                with anyio.CancelScope(shield=True):  # a dropped watch never leaves half a cancel
                    await self._cancel(r, rows[0].response_id)
                return 'cancelled'
            if rows and rows[0].response_id not in marked:
                pending = rows[0].response_id
                with anyio.CancelScope(shield=True):
                    await ledger.aio.mark_cancel_requested(pending, by=REQUESTED_BY)
                marked.add(pending)
            if time.monotonic() >= deadline:
                return 'marked' if marked else 'none'
            await anyio.sleep(_POLL_SECONDS)

    async def check_mark(self, r: Researcher, response_id: str) -> bool:
        """On the starting instance, right after the run's id is recorded: cancel it if a cancel came first."""
        ledger = r.ledger
        if ledger is None:
            return False
        record = await ledger.aio.get(response_id)
        if record is None or record.cancel_requested_at is None:
            return False
        with anyio.move_on_after(_CANCEL_GRACE_SECONDS, shield=True):
            await self._cancel(r, response_id)
        return True

    async def claim(self, r: Researcher, response_id: str, caller: str | None, key: str) -> bool:
        """A collect call over HTTP: record its key on the run while it waits, if the run is the caller's, unfinished
        and carries no other key (a durable workflow's, say); whether it did (then `answered` clears it)."""
        ledger = r.ledger
        if ledger is None:
            return False
        return await ledger.aio.claim_call(response_id, caller=caller, key=key, statuses=_UNFINISHED)

    async def _cancel(self, r: Researcher, response_id: str) -> None:
        ledger = r.ledger
        assert ledger is not None
        # First the sign that the client cancelled the call, for the instance serving it (see `answered`).
        await ledger.aio.mark_cancel_requested(response_id, by=REQUESTED_BY, release_call=True)
        await cancel_upstream(r, response_id)

    async def answered(self, r: Researcher, response_id: str) -> None:
        """The call answered (a result or a hand-off): its key leaves the run, so a late cancel never stops it.

        If a cancel notification stopped the run, the reason is written again: this instance's record of the run's
        end (the API's words) may have landed after the reason the cancelling instance wrote. One conditional update,
        in order after this instance's own writes of the run (`Ledger.answered`).
        """
        ledger = r.ledger
        if ledger is None:
            return
        await ledger.aio.answered(response_id, reason=CANCELLED_BY_CLIENT)


async def _in_flight(ledger: Ledger, caller: str | None, key: str) -> list[RunRecord]:
    rows = await ledger.aio.list(caller=caller, request_id=key, status=_UNFINISHED, limit=20)
    return [row for row in rows if row.caller == caller]


async def cancel_upstream(r: Researcher, response_id: str) -> None:
    """Cancel the run after the client cancelled the call, and say so in the ledger."""
    try:
        await r.cancel(response_id)
    except Exception as exc:
        _log.warning('Could not cancel research run %s after the client cancelled the call: %s', response_id, exc)
        return
    if r.ledger is not None:
        await r.ledger.aio.update(response_id, error=CANCELLED_BY_CLIENT)  # after the cancel's own writes
