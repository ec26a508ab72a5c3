"""`use_emulator_if_no_key()`: a script, notebook or example runs offline when no key is set, and says so in one line.

Exported from the package root, so that a script need not import the notebook helpers (`notebook` re-exports it).
"""

from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING

from .._base.env import ENV, OFFLINE_TIME_SCALE, variable

if TYPE_CHECKING:
    from . import Emulator

__all__ = ('offline_time_scale', 'use_emulator_if_no_key')


def offline_time_scale(given: float | None = None) -> float:
    """`given`, else `PERPLEXITY_EMULATOR_TIME_SCALE`, else `OFFLINE_TIME_SCALE`; a finite number, 0 or more.

    Raises:
        ValueError: naming the variable, when it is not such a number.
    """
    if given is not None:
        return given
    raw = os.environ.get(ENV.EMULATOR_TIME_SCALE, '').strip()
    if not raw:
        return OFFLINE_TIME_SCALE
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise ValueError(
            f'{ENV.EMULATOR_TIME_SCALE} must be a number of real seconds per emulated second, 0 or more, '
            f'e.g. {ENV.EMULATOR_TIME_SCALE}={OFFLINE_TIME_SCALE}; got {raw!r}.'
        )
    return value


_emulator: Emulator | None = None


def use_emulator_if_no_key(*, time_scale: float | None = None) -> Emulator | None:
    """With no `PERPLEXITY_API_KEY`, start the built-in emulator and point the library at it; say so in one line.

    Sets `PERPLEXITY_API_KEY` and `PERPLEXITY_BASE_URL` in this process's environment, so everything after
    (`research`, `research_many`, `Researcher`, `PerplexityToolset`, MCP server children) uses it. With a key set,
    does nothing and returns None: the same code then runs against the real API. The emulator's speed is
    `time_scale` (real seconds per emulated second), else `PERPLEXITY_EMULATOR_TIME_SCALE`, else
    `OFFLINE_TIME_SCALE` (a `medium` run takes 3 s).
    """
    global _emulator
    if variable(ENV.API_KEY):
        return None
    from . import Emulator

    _emulator = Emulator(time_scale=offline_time_scale(time_scale)).start()
    os.environ[ENV.API_KEY] = _emulator.api_key
    os.environ[ENV.BASE_URL] = _emulator.base_url
    print(f'No {ENV.API_KEY} set: using the built-in emulator at {_emulator.base_url} (answers are canned).')
    return _emulator
