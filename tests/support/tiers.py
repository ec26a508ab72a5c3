"""A pytest plugin: the default run is the fast tier, and says what it left out and how to run it.

`pyproject.toml` selects `-m "not slow and not compat"` by default; a run with that selection that deselected
tests ends with one line naming the commands for the other tiers, so that a file named on the command line whose
tests are all `slow` or `compat` does not look empty for no reason. Loaded by `tests/conftest.py`.
"""

from __future__ import annotations

import pytest

#: The default selection (`addopts` in pyproject.toml): the fast tier.
FAST = 'not slow and not compat'
#: The other tiers, as CI runs them.
OTHERS = 'slow or compat'

_DESELECTED = pytest.StashKey[int]()


def pytest_deselected(items: list[pytest.Item]) -> None:
    """Count what the session left out (on its config: a session run inside a test counts its own)."""
    if items:
        stash = items[0].config.stash
        stash[_DESELECTED] = stash.get(_DESELECTED, 0) + len(items)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    """One line after a default run that left tests out: which tier they are in and the command that runs them."""
    deselected = config.stash.get(_DESELECTED, 0)
    if config.getoption('markexpr') == FAST and deselected:
        terminalreporter.write_line(
            f'{deselected} tests deselected by the default selection (the fast tier, -m "{FAST}"): '
            f'run them with -m "{OTHERS}", or every tier with -m ""'
        )
