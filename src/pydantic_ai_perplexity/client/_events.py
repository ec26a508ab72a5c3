"""What the wire reports while it works: a retry, a stream resumed, a wait that polls, the rate limits it was told.

The wire never imports tracing: it reports to the observer in `OBSERVER`, which the research core's tracing fills
(`_core/tracing.py` turns each report into a span event or attribute on the current span). The package root names
that provider, so the slot is filled the first time the wire reports anything; with no observer, reports are dropped.
"""

from __future__ import annotations

from typing import Protocol

from .._base.slot import Slot

__all__ = ('OBSERVER', 'WireObserver', 'observer')


class WireObserver(Protocol):
    """Who hears the wire's reports (tracing)."""

    def retrying(self, method: str, path: str, attempt: int, delay: float, reason: str | int) -> None:
        """A request failed and is sent again after `delay` seconds; `attempt` counts from 0, `reason` is a status
        code or an error class."""
        ...

    def rate_limits(self, remaining: int | None, limit: int | None) -> None:
        """The API's rate-limit counts after a request (`x-ratelimit-remaining` / `-limit`)."""
        ...

    def polling(self, reason: str) -> None:
        """A wait found no stream to follow and polls instead; `reason` is the error class."""
        ...

    def resuming(self, after_sequence: int) -> None:
        """A stream dropped and is reopened after event `after_sequence`."""
        ...


class _Nobody:
    """The observer while none is provided: every report is dropped."""

    def retrying(self, method: str, path: str, attempt: int, delay: float, reason: str | int) -> None:
        pass

    def rate_limits(self, remaining: int | None, limit: int | None) -> None:
        pass

    def polling(self, reason: str) -> None:
        pass

    def resuming(self, after_sequence: int) -> None:
        pass


#: The wire's observer, filled by the research core's tracing.
OBSERVER: Slot[WireObserver] = Slot('wire observer')
_NOBODY = _Nobody()


def observer() -> WireObserver:
    """The observer to report to: the one provided, else one that drops every report."""
    return OBSERVER.get() or _NOBODY
