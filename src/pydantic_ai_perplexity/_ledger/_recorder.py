"""Ledger writes in order on one thread, and the one place that shuts the ledger down: flush, stop, then close.

A `Recorder` applies queued writes (bind, status changes, the final record of a run) on a daemon thread, so an
fsync never sits in a research call's path. Closing is always done in one order, whoever does it (the owner's
`close()`, the interpreter exiting, a forked child): first the queued writes land, then the thread stops, and only
then are the ledgers' connections closed. No finalizer closes a connection that another thread may still be using:
an unreachable connection is closed by its own deallocation, which cannot happen while a thread holds it.
"""

from __future__ import annotations

import atexit
import logging
import os
import queue
import threading
import weakref
from collections.abc import Callable
from typing import Any, Protocol

__all__ = ('Recorder', 'shutdown', 'track')

_log = logging.getLogger('pydantic_ai_perplexity.ledger')


class _Closable(Protocol):
    def close(self) -> None: ...


_RECORDERS: weakref.WeakSet[Recorder] = weakref.WeakSet()
_LEDGERS: weakref.WeakSet[Any] = weakref.WeakSet()
_exiting = False


class Recorder:
    """Applies ledger writes in order on one daemon thread; `flush` waits until every queued write has landed.

    Reads call `flush` first, so they see their own writes. After `close()` a new write starts the thread again;
    while the interpreter exits (or after `shutdown()`), a write is applied at once, in the caller's thread.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._queue: queue.SimpleQueue[Callable[[], Any] | threading.Event | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        _RECORDERS.add(self)

    def submit(self, write: Callable[[], Any]) -> None:
        """Queue `write`; it runs after every write queued before it."""
        with self._locked():
            if _exiting:
                _apply(write)
                return
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._work, name='pplx-ledger-recorder', daemon=True)
                self._thread.start()
            self._queue.put(write)

    def flush(self) -> None:
        """Wait until every write queued so far has landed (at once from the recorder's own thread)."""
        with self._locked():
            thread = self._thread
            if thread is None or not thread.is_alive() or thread is threading.current_thread():
                return
            done = threading.Event()
            self._queue.put(done)
        while not done.wait(0.5):  # the thread may die with the interpreter: never wait for it forever
            if not thread.is_alive():
                return

    def close(self) -> None:
        """Let every queued write land, then stop the thread."""
        with self._locked():
            thread, self._thread = self._thread, None
            if thread is None or thread is threading.current_thread():
                return
            self._queue.put(None)
        thread.join()

    def _locked(self) -> threading.Lock:
        if self._pid != os.getpid():  # a forked child: the thread is not here, and the parent applies its writes
            self._lock = threading.Lock()
            self._queue = queue.SimpleQueue()
            self._thread = None
            self._pid = os.getpid()
        return self._lock

    def _work(self) -> None:
        work = self._queue
        while (item := work.get()) is not None:
            if isinstance(item, threading.Event):
                item.set()
            else:
                _apply(item)
            del item  # a write may hold the last reference to its ledger: let it go now, in this thread


def _apply(write: Callable[[], Any]) -> None:
    try:
        write()
    except Exception:  # the ledger keeps and reports its own failures; a write must not stop the queue
        _log.debug('ledger write failed', exc_info=True)


def track(ledger: _Closable) -> None:
    """Close `ledger` when the interpreter exits, after every recorder has stopped."""
    _LEDGERS.add(ledger)


def shutdown() -> None:
    """Flush and stop every recorder of this process, then close every ledger: the order that loses no write.

    Runs when the interpreter exits; later writes are applied at once.
    """
    global _exiting
    _exiting = True
    for recorder in list(_RECORDERS):
        try:
            recorder.close()
        except Exception:  # pragma: no cover - a broken recorder must not keep the others from closing
            _log.debug('stopping a ledger recorder failed', exc_info=True)
    for ledger in list(_LEDGERS):
        try:
            ledger.close()
        except Exception:  # pragma: no cover
            _log.debug('closing a ledger failed', exc_info=True)


atexit.register(shutdown)
