"""`Ledger.aio`: the ledger for code on an event loop, as named operations applied in order on one recorder thread.

Every operation, read or write, goes through the ledger's one `Recorder`: it is applied after every operation queued
before it, by whoever queued it (the `Researcher` recording a run's end, an MCP cancel, a task lookup), so a read sees
the writes before it and no caller keeps order by hand (no flush before a read, no thread of its own). `later` queues
a write without waiting (the research path); every other operation waits for its result, and one that is waited for
lands even if the waiting caller is cancelled.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

import anyio.to_thread

from ._recorder import Recorder

if TYPE_CHECKING:
    from ._ledger import Ledger
    from ._records import RunRecord

__all__ = ('AsyncLedger',)

_T = TypeVar('_T')


class AsyncLedger:
    """The named operations of one `Ledger` for async callers (`ledger.aio`), in order on its recorder thread."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self._recorder = Recorder()

    def later(self, fn: Callable[..., object], /, *args: Any, **kwargs: Any) -> None:
        """Queue `fn(*args, **kwargs)` without waiting: it runs after every operation queued before it."""
        self._recorder.submit(functools.partial(fn, *args, **kwargs))

    async def run(self, fn: Callable[..., _T], /, *args: Any, **kwargs: Any) -> _T:
        """`fn(*args, **kwargs)` (a function of the ledger) after every operation queued before it; what it returns."""
        return await _result(self._recorder, functools.partial(fn, *args, **kwargs))

    async def flush(self) -> None:
        """Wait until every operation queued so far has landed."""
        await self.run(_nothing)

    async def aclose(self) -> None:
        """Let every queued operation land, stop the recorder thread, then close the ledger's connections (both start
        again on next use)."""
        await anyio.to_thread.run_sync(self._recorder.close)
        await anyio.to_thread.run_sync(self.ledger.close)

    # --- reads ------------------------------------------------------------------------------------------------------

    async def get(self, response_id: str) -> RunRecord | None:
        """`Ledger.get`, after the writes queued before it."""
        return await self.run(self.ledger.get, response_id)

    async def list(
        self,
        *,
        status: str | tuple[str, ...] | None = None,
        origin: str | None = None,
        caller: str | None = None,
        request_id: str | None = None,
        limit: int = 20,
    ) -> list[RunRecord]:
        """`Ledger.list`, after the writes queued before it."""
        return await self.run(
            self.ledger.list, status=status, origin=origin, caller=caller, request_id=request_id, limit=limit
        )

    # --- writes -----------------------------------------------------------------------------------------------------

    async def update(self, response_id: str, /, **fields: Any) -> None:
        """`Ledger.update`, after the writes queued before it (TypeError for a field `RunRecord` cannot update)."""
        await self.run(self.ledger.update, response_id, **fields)

    async def mark_cancel_requested(self, response_id: str, /, *, by: str, release_call: bool = False) -> None:
        """`Ledger.mark_cancel_requested`: a client asked for the run to be cancelled."""
        await self.run(self.ledger.mark_cancel_requested, response_id, by=by, release_call=release_call)

    async def claim_call(self, response_id: str, /, *, caller: str | None, key: str, statuses: tuple[str, ...]) -> bool:
        """`Ledger.claim_call`: the MCP call `key` waits for the run; whether it claimed it."""
        return await self.run(self.ledger.claim_call, response_id, caller=caller, key=key, statuses=statuses)

    async def answered(self, response_id: str, /, *, reason: str) -> bool:
        """`Ledger.answered`: the MCP call serving the run answered; whether a cancel was requested."""
        return await self.run(self.ledger.answered, response_id, reason=reason)


def _nothing() -> None:
    return None


async def _result(recorder: Recorder, call: Callable[[], _T]) -> _T:
    """Queue `call` on `recorder` and wait for its result, without a thread of the caller's own on asyncio."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # not asyncio (trio): wait for it in a worker thread
        return await _result_in_thread(recorder, call)
    future: asyncio.Future[_T] = loop.create_future()

    def work() -> None:
        try:
            value = call()
        except BaseException as exc:
            loop.call_soon_threadsafe(_settle, future, None, exc)
        else:
            loop.call_soon_threadsafe(_settle, future, value, None)

    recorder.submit(work)
    return await future


def _settle(future: asyncio.Future[Any], value: Any, exc: BaseException | None) -> None:
    if future.done():  # the caller stopped waiting; the operation has landed all the same
        return
    if exc is not None:
        future.set_exception(exc)
    else:
        future.set_result(value)


async def _result_in_thread(recorder: Recorder, call: Callable[[], _T]) -> _T:
    done = threading.Event()
    outcome: list[tuple[_T | None, BaseException | None]] = []

    def work() -> None:
        try:
            outcome.append((call(), None))
        except BaseException as exc:
            outcome.append((None, exc))
        finally:
            done.set()

    recorder.submit(work)
    await anyio.to_thread.run_sync(done.wait)
    value, exc = outcome[0]
    if exc is not None:
        raise exc
    return cast('_T', value)
