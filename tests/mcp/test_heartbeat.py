"""The progress heartbeat: a waiting call that asked for progress hears at least every
`PERPLEXITY_MCP_HEARTBEAT_SECONDS`, even while its run shows no new step (clients with idle timeouts keep it)."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters

from pydantic_ai_perplexity.emulator import Emulator
from support.mcp_servers import DEADLINE, SERVER, server_env

pytestmark = pytest.mark.anyio

EVERY = 0.25
#: Room for a busy machine on top of the interval, still far below the quiet spans the run has without it.
SLACK = 1.5


@pytest.fixture(scope='module')
def slow_emu() -> Iterator[Emulator]:
    """An emulator slow enough that a `duration=300` run is quiet (no new step) for several heartbeats at a time."""
    with Emulator(time_scale=0.01) as emulator:
        yield emulator


@pytest.mark.slow
@pytest.mark.parametrize('mode', ['legacy', 'auto'])
async def test_a_quiet_run_still_sends_progress_every_interval(slow_emu: Emulator, state_dir: Path, mode: str) -> None:
    heard: list[tuple[float, float, str]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        heard.append((time.monotonic(), value, message or ''))

    env = server_env(slow_emu, state_dir, PERPLEXITY_MCP_HEARTBEAT_SECONDS=str(EVERY))
    with anyio.fail_after(DEADLINE):
        async with Client(StdioServerParameters(command=SERVER[0], args=SERVER[1:], env=env), mode=mode) as client:
            result = await client.call_tool(
                'perplexity_research',
                {'query': 'What does the EU AI Act regulate? [[emulate: duration=300]]', 'effort': 'fast'},
                progress_callback=on_progress,
            )
            answered = time.monotonic()
    assert result.structured_content is not None and result.structured_content['status'] == 'completed'
    run_id = result.structured_content['response_id']
    steps = [m for _, _, m in heard if not m.startswith('still researching')]
    beats = [m for _, _, m in heard if m.startswith('still researching')]
    assert steps[0] == f'started research run {run_id}' and len(steps) >= 3
    assert len(beats) >= 3 and all(m.endswith(f'· {run_id}') for m in beats)
    values = [v for _, v, _ in heard]
    assert values == sorted(set(values))  # progress rises with every notification, as the protocol requires
    times = [t for t, _, _ in heard] + [answered]
    assert max(b - a for a, b in itertools.pairwise(times)) < EVERY + SLACK


def test_a_bad_heartbeat_setting_is_refused_in_words(state_dir: Path, raw_server_factory: Any) -> None:
    server = raw_server_factory(server_env(None, state_dir, PERPLEXITY_MCP_HEARTBEAT_SECONDS='0'))
    assert server.close() == 2
    err = b''.join(server.stderr).decode()
    assert 'PERPLEXITY_MCP_HEARTBEAT_SECONDS must be a number of seconds, more than 0' in err
