"""The names of every `PERPLEXITY_*` variable the package reads, in one place.

A leaf (standard library only, nothing imported) so that every layer names a variable the same way: the wire
(the key and base URL of a bare `PerplexityClient()`), the ledger, the MCP server, the CLI and the emulator.
`Settings` (`_domain/settings.py`) reads and checks them; `ENV.ALL` is the list tests clear and check src/ against.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import ClassVar

__all__ = ('ENV', 'OFFLINE_TIME_SCALE', 'variable')

#: The default of `PERPLEXITY_EMULATOR_TIME_SCALE`: the pace (real seconds per emulated second) of an emulator a
#: person watches, the stand-in for the API when no key is set (scripts, the CLI, the MCP server's `--emulator`) and
#: the `emulator` command; a `medium` run takes 3 s. `Emulator()` itself defaults to 0.01, for tests and embedding.
OFFLINE_TIME_SCALE = 0.05


class ENV:
    """The names of the variables, for reading, for messages and for code that passes them on."""

    API_KEY = 'PERPLEXITY_API_KEY'
    BASE_URL = 'PERPLEXITY_BASE_URL'
    EFFORT = 'PERPLEXITY_EFFORT'
    WAIT_SECONDS = 'PERPLEXITY_WAIT_SECONDS'
    BUDGET_USD = 'PERPLEXITY_BUDGET_USD'
    BUDGET_DAY_USD = 'PERPLEXITY_BUDGET_DAY_USD'
    BUDGET_MONTH_USD = 'PERPLEXITY_BUDGET_MONTH_USD'
    BUDGET_PER_RUN_USD = 'PERPLEXITY_BUDGET_PER_RUN_USD'
    BUDGET_PER_CALLER = 'PERPLEXITY_BUDGET_PER_CALLER'
    BUDGET_WARN_AT = 'PERPLEXITY_BUDGET_WARN_AT'
    ON_BUDGET = 'PERPLEXITY_ON_BUDGET'
    PRICES = 'PERPLEXITY_PRICES'
    STATE_DIR = 'PERPLEXITY_STATE_DIR'
    LEDGER_URL = 'PERPLEXITY_LEDGER_URL'
    TRACE_STEPS = 'PERPLEXITY_TRACE_STEPS'
    MCP_TOKEN = 'PERPLEXITY_MCP_TOKEN'  # noqa: S105 (a variable's name)
    MCP_TOKENS = 'PERPLEXITY_MCP_TOKENS'
    MCP_TOKENS_FILE = 'PERPLEXITY_MCP_TOKENS_FILE'
    MCP_SHARED_LIST = 'PERPLEXITY_MCP_SHARED_LIST'
    MCP_LEAN = 'PERPLEXITY_MCP_LEAN'
    MCP_HEARTBEAT_SECONDS = 'PERPLEXITY_MCP_HEARTBEAT_SECONDS'
    MCP_HEADER_TIMEOUT = 'PERPLEXITY_MCP_HEADER_TIMEOUT'
    MCP_MAX_CONNECTIONS_PER_CLIENT = 'PERPLEXITY_MCP_MAX_CONNECTIONS_PER_CLIENT'
    MCP_ALLOWED_HOSTS = 'PERPLEXITY_MCP_ALLOWED_HOSTS'
    MCP_CORS_ORIGINS = 'PERPLEXITY_MCP_CORS_ORIGINS'
    MCP_FILES_ROOT = 'PERPLEXITY_MCP_FILES_ROOT'  # the one folder a stdio server reads `files` paths from
    #: The emulator's own variables (it is a separate server, configured apart from the library).
    EMULATOR_API_KEY = 'PERPLEXITY_EMULATOR_API_KEY'
    EMULATOR_CORPUS = 'PERPLEXITY_EMULATOR_CORPUS'
    EMULATOR_TIME_SCALE = 'PERPLEXITY_EMULATOR_TIME_SCALE'
    #: The prefix the emulator's variables share (config files leave them to the shell).
    EMULATOR_PREFIX = 'PERPLEXITY_EMULATOR_'

    #: Every variable above, in order: what tests clear and what a scan of src/ is checked against.
    ALL: ClassVar[tuple[str, ...]]


ENV.ALL = tuple(value for name, value in vars(ENV).items() if name.isupper() and name != 'EMULATOR_PREFIX')

_KNOWN = frozenset(ENV.ALL)


def variable(name: str, environ: Mapping[str, str] | None = None) -> str:
    """The value of the variable `name` (one of `ENV.ALL`) in `environ` (default `os.environ`), stripped; '' if unset.

    The one place a `PERPLEXITY_*` variable is read; a name not in the list is a programming error (ValueError),
    so a new variable cannot be read without being listed (and so cleared by the tests and documented).
    """
    if name not in _KNOWN:
        raise ValueError(f'{name} is not one of the variables in ENV.ALL; add it there first.')
    return ((os.environ if environ is None else environ).get(name) or '').strip()
