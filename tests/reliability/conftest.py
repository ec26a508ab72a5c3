"""The reliability suite's report: rows gathered by the tests, written once at the end of the session."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from pydantic_ai_perplexity.emulator import Emulator
from support.reliability import CreateLog, logged_emulator, write_report

_outcomes: Counter[str] = Counter()
_seconds = [0.0]
_HERE = Path(__file__).resolve().parent
_scope = {'complete': False, 'deselected': False}


def _ours(item: pytest.Item) -> bool:
    return Path(str(item.path)).resolve().parent == _HERE


def pytest_deselected(items: list[pytest.Item]) -> None:
    if any(_ours(item) for item in items):
        _scope['deselected'] = True


def pytest_collection_finish(session: pytest.Session) -> None:
    """The report is complete only when every test of this folder is in the session (none left out by -k)."""
    files = {p.name for p in _HERE.glob('test_*.py')}
    collected = {Path(str(item.path)).name for item in session.items if _ours(item)}
    _scope['complete'] = collected == files and not _scope['deselected']


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if 'tests/reliability/' not in report.nodeid.replace('\\', '/'):
        return
    _seconds[0] += report.duration
    if report.when == 'call' or report.outcome != 'passed':
        _outcomes[report.outcome] += 1


@pytest.fixture(scope='session', autouse=True)
def reliability_report() -> Iterator[None]:
    yield
    write_report(_seconds[0], dict(_outcomes), complete=_scope['complete'])


@pytest.fixture(scope='module')
def logged() -> Iterator[tuple[Emulator, CreateLog]]:
    """One emulator for a test module, logging every create (question, status, run id)."""
    with logged_emulator() as pair:
        yield pair


@pytest.fixture(scope='module')
def module_state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A state directory (the ledger's home) shared by the processes of one test module."""
    return tmp_path_factory.mktemp('reliability-state')
