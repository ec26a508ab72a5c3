"""A warning that a flood must not turn into a flood of log lines: said at most once every few seconds, with a count."""

from __future__ import annotations

import logging
import time

__all__ = ('ThrottledWarning',)


class ThrottledWarning:
    """`warn()` logs at most one line every `every` seconds, saying how many times it happened since the last one."""

    def __init__(self, logger: logging.Logger, every: float = 10.0) -> None:
        self._log = logger
        self._every = every
        self._count = 0
        self._last = -every

    def warn(self, message: str, *args: object) -> None:
        """Count one occurrence; log `message % args` and ` (N times since the last warning)` if it is time."""
        self._count += 1
        now = time.monotonic()
        if now - self._last < self._every:
            return
        self._log.warning(f'{message} (%d times since the last such warning)', *args, self._count)
        self._last, self._count = now, 0
