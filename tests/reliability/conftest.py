"""The reliability suite's report: rows gathered by the tests, written once at the end of the session."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from reliability_support import CreateLog, logged_emulator, write_report

from pydantic_ai_perplexity.emulator import Emulator

_outcomes: Counter[str] = Counter()
_seconds = [0.0]


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if 'tests/reliability/' not in report.nodeid.replace('\\', '/'):
        return
    _seconds[0] += report.duration
    if report.when == 'call' or report.outcome != 'passed':
        _outcomes[report.outcome] += 1


@pytest.fixture(scope='session', autouse=True)
def reliability_report() -> Iterator[None]:
    yield
    write_report(_seconds[0], dict(_outcomes))


@pytest.fixture(scope='module')
def logged() -> Iterator[tuple[Emulator, CreateLog]]:
    """One emulator for a test module, logging every create (question, status, run id)."""
    with logged_emulator() as pair:
        yield pair


@pytest.fixture(scope='module')
def module_state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A state directory (the ledger's home) shared by the processes of one test module."""
    return tmp_path_factory.mktemp('reliability-state')
