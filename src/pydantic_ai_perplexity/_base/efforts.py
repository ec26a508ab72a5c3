"""The efforts (run depths) the API knows and how a name given for one is read, defined once.

Standard library only, so `Settings` (read before pydantic loads) and the CLI use it as the research options, the
price table, the ledger's estimates, the MCP tools and the emulator do. Two readings: `normalize_effort` checks a
name a caller gave (a bad one is an error naming the choices); `effort_level` says which level any recorded name
counts as, for estimates and price profiles (it never raises).
"""

from __future__ import annotations

import re
from typing import Literal, get_args

from .errors import InvalidArgumentError

__all__ = (
    'DEFAULT_EFFORT',
    'EFFORTS',
    'EFFORT_NAME',
    'LEGACY_PRESETS',
    'Effort',
    'LegacyPreset',
    'effort_level',
    'normalize_effort',
    'shown',
)

Effort = Literal['fast', 'low', 'medium', 'high', 'xhigh']
#: The run depths the API knows, fastest first. A pin like `fast@2026-10-16.0` is accepted too.
EFFORTS: tuple[str, ...] = get_args(Effort)
#: The API's default depth: the effort of a run that names none (and of one whose name is not known).
DEFAULT_EFFORT = 'medium'
#: The old preset names, as a type: what `effort=` takes as a keyword (a pin like `fast@2026-10-16.0` goes through
#: `options=ResearchOptions(effort=...)`, as no type can spell it).
LegacyPreset = Literal['fast-search', 'pro-search', 'deep-research', 'advanced-deep-research']
#: The old preset names the API still accepts, and the effort each stands for.
LEGACY_PRESETS = {
    'fast-search': 'fast',
    'pro-search': 'low',
    'deep-research': 'medium',
    'advanced-deep-research': 'high',
}
#: An effort, optionally pinned to a version (`medium@2026-10-16.0`); group 1 is the level.
EFFORT_NAME = re.compile(rf'^({"|".join(EFFORTS)})(@\d{{4}}-\d{{2}}-\d{{2}}\.\d+)?$')


def shown(value: object, limit: int = 60) -> str:
    """`value` as an error message quotes it: its repr, cut in the middle past `limit` characters."""
    text = repr(value)
    return text if len(text) <= limit else f'{text[: limit - 5]}…{text[-4:]}'


def normalize_effort(effort: str) -> str:
    """Check an effort name and return it (legacy preset names mapped to today's); raise with the choices."""
    value = effort.strip().lower()
    value = LEGACY_PRESETS.get(value, value)
    if not EFFORT_NAME.match(value):
        raise InvalidArgumentError(
            f'Unknown effort {shown(effort)}: use one of {", ".join(EFFORTS)} '
            '(fast for a quick fact, low/medium for a question needing a few sources, high/xhigh for a survey), '
            'optionally pinned like "fast@2026-10-16.0".',
            argument='effort',
        )
    return value


def effort_level(effort: str | None) -> str:
    """The level `effort` counts as: a pin `name@version` as `name`, an old preset name as its effort, and an unknown
    or missing one as `DEFAULT_EFFORT`."""
    name = (effort or DEFAULT_EFFORT).strip().lower().partition('@')[0]
    name = LEGACY_PRESETS.get(name, name)
    return name if name in EFFORTS else DEFAULT_EFFORT
