"""`use_emulator_if_no_key()`: a script, notebook or example runs offline when no key is set, and says so in one line.

Exported from the package root, so that a script need not import the notebook helpers (`notebook` re-exports it).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from . import Emulator

__all__ = ('use_emulator_if_no_key',)

_emulator: Emulator | None = None


def use_emulator_if_no_key(*, time_scale: float | None = None) -> Emulator | None:
    """With no `PERPLEXITY_API_KEY`, start the built-in emulator and point the library at it; say so in one line.

    Sets `PERPLEXITY_API_KEY` and `PERPLEXITY_BASE_URL` in this process's environment, so everything after
    (`research`, `research_many`, `Researcher`, `PerplexityToolset`, MCP server children) uses it. With a key set,
    does nothing and returns None: the same code then runs against the real API. The emulator's speed is
    `time_scale` (real seconds per emulated second), else `PERPLEXITY_EMULATOR_TIME_SCALE`, else 0.05 (a `medium`
    run takes 3 s).
    """
    global _emulator
    if os.environ.get('PERPLEXITY_API_KEY'):
        return None
    from . import Emulator

    if time_scale is None:
        time_scale = float(os.environ.get('PERPLEXITY_EMULATOR_TIME_SCALE') or 0.05)
    _emulator = Emulator(time_scale=time_scale).start()
    os.environ['PERPLEXITY_API_KEY'] = _emulator.api_key
    os.environ['PERPLEXITY_BASE_URL'] = _emulator.base_url
    print(f'No PERPLEXITY_API_KEY set: using the built-in emulator at {_emulator.base_url} (answers are canned).')
    return _emulator
