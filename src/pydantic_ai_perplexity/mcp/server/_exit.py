"""How the server process ends on a signal, on both transports and at every moment of its life.

- **SIGTERM** is how MCP clients, process managers and `docker stop` ask a server to stop: once it has stopped
  (calls in flight handed off), that is a success, exit code 0.
- **SIGINT** is Ctrl-C: a person interrupted it. Shells and scripts read 130 (128 + SIGINT) as "interrupted", as
  for any other command, so `server && next-step` does not go on as if the server had finished its work.

While the process starts (imports, the handshake front, before the transport's own handlers take over), there is
nothing in flight to hand off, so a signal ends it at once with the same code and one line on stderr, never a
traceback (`quiet_until_serving`, called first thing by `python -m pydantic_ai_perplexity.mcp` and the CLI's `mcp`).
"""

from __future__ import annotations

import os
import signal
from types import FrameType

__all__ = ('INTERRUPTED', 'exit_code', 'quiet_until_serving')

#: The exit code after SIGINT (128 + 2), as shells report an interrupted command.
INTERRUPTED = 128 + signal.SIGINT


def exit_code(signum: int | None) -> int:
    """The process's exit code after a graceful stop caused by `signum` (None: stdin closed)."""
    return INTERRUPTED if signum == signal.SIGINT else 0


def _end_now(signum: int, frame: FrameType | None) -> None:
    try:
        name = signal.Signals(signum).name
    except ValueError:
        name = f'signal {signum}'
    # A raw write: this may run while the main thread is inside a write to sys.stderr.
    os.write(2, f'Perplexity MCP server: {name} while starting, nothing in flight: exiting\n'.encode())
    os._exit(exit_code(signum))


def quiet_until_serving() -> None:
    """SIGINT and SIGTERM end the process at once, quietly, until a transport installs its graceful handlers (and
    again once they are gone). Only for the server's own process: it replaces the handlers of the whole process."""
    signal.signal(signal.SIGINT, _end_now)
    signal.signal(signal.SIGTERM, _end_now)
