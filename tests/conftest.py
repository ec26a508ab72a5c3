"""Shared fixtures: anyio on asyncio, an isolated environment and state directory, an emulator per test."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from pydantic_ai_perplexity._domain.settings import ENV
from pydantic_ai_perplexity.emulator import Emulator

#: In CI a skipped test fails, naming the missing prerequisite (`support.skips`); the default run says what tiers it
#: left out (`support.tiers`); `pytester` runs sessions of their own (tests/test_suite_rules.py).
pytest_plugins = ['support.skips', 'support.tiers', 'pytester']


@pytest.fixture
def anyio_backend() -> str:
    return 'asyncio'


@pytest.fixture(autouse=True)
def isolated_environ(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No test sees the developer's key, settings or ledger; each gets its own state directory."""
    for name in ENV.ALL:  # every variable the package reads (test_settings checks src/ against the list)
        monkeypatch.delenv(name, raising=False)
    state = tmp_path / 'state'
    monkeypatch.setenv(ENV.STATE_DIR, str(state))
    return state


@pytest.fixture
def emulator() -> Iterator[Emulator]:
    """A fresh emulator on loopback, fast enough that a `medium` run takes well under a second."""
    with Emulator(time_scale=0.005) as emu:
        yield emu


@pytest.fixture
def emulator_env(emulator: Emulator, monkeypatch: pytest.MonkeyPatch) -> Emulator:
    """The emulator, with `PERPLEXITY_API_KEY` / `PERPLEXITY_BASE_URL` pointing at it."""
    monkeypatch.setenv('PERPLEXITY_API_KEY', emulator.api_key)
    monkeypatch.setenv('PERPLEXITY_BASE_URL', emulator.base_url)
    return emulator


def pytest_configure(config: pytest.Config) -> None:
    # A shell starts a background job (`pytest ... &`) with SIGINT ignored, and every child would inherit that: the
    # tests that press Ctrl-C on a command or a server would test the shell, not the program. A handler (unlike
    # "ignore") is reset to the default in each child, as in a terminal.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    # The test run never needs a real key: make sure none leaks in from the shell that started it.
    os.environ.pop(ENV.API_KEY, None)


@pytest.fixture(params=['sqlite', 'postgres'])
def ledger_target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A ledger on each engine (`support.postgres.ledger_target`): a SQLite file in the test's state directory, or a
    fresh PostgreSQL schema."""
    from support.postgres import ledger_target as on_engine

    with on_engine(request.param, tmp_path) as where:
        yield where
