"""Fixtures for the MCP server tests: a shared emulator and state directory, raw server processes."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pydantic_ai_perplexity.emulator import Emulator
from support.mcp_servers import RawServer


@pytest.fixture(scope='module')
def emu() -> Iterator[Emulator]:
    """One emulator for a test module; a `medium` run takes about 0.3 s, `duration=N` runs N x 5 ms."""
    with Emulator(time_scale=0.005) as emulator:
        yield emulator


@pytest.fixture(scope='module')
def state_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp('mcp-state')


@pytest.fixture
def raw_server_factory() -> Iterator[Callable[..., RawServer]]:
    """Start raw servers; any still running at the end of the test is killed."""
    started: list[RawServer] = []

    def start(env: dict[str, str], args: list[str] | None = None) -> RawServer:
        server = RawServer(env, args)
        started.append(server)
        return server

    yield start
    for server in started:
        if server.proc.poll() is None:
            server.kill()
