"""Bounded, self-stopping load on loopback: 100 research calls at once through one MCP HTTP server, through one
toolset, and straight into one `Researcher` (the baseline), against the emulator. Zero errors. The 500-call version,
with peak RSS and latency overhead, is `benchmarks/load.py`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from pydantic_ai_perplexity.emulator import Emulator
from support import load
from support.mcp_servers import HttpServer, server_env
from support.reliability import record

CALLS = 100


@pytest.fixture(scope='module')
def emu() -> Iterator[Emulator]:
    with Emulator(time_scale=0.01) as emulator:  # a `fast` run takes 50 ms: every call is in flight at once
        yield emulator


@pytest.mark.slow
def test_100_concurrent_calls_through_one_mcp_http_server(emu: Emulator, tmp_path: Path) -> None:
    server = HttpServer(server_env(emu, tmp_path, PERPLEXITY_WAIT_SECONDS='120'))

    async def calls() -> load.LoadResult:
        with anyio.fail_after(120):
            return await load.mcp_http(server.url, CALLS, tag='load-mcp')

    try:
        result = anyio.run(calls)
        rss = load.process_peak_rss_mb(server.proc.pid)
    finally:
        server.stop()
    assert result.errors == [], result.summary()
    assert result.outcomes['completed'] == CALLS
    record('load', 'mcp-http', f'{CALLS} concurrent research calls, one server', **result.summary(),
           server_peak_rss_mb=rss, lost=0)  # fmt: skip


@pytest.mark.slow
@pytest.mark.anyio
async def test_100_concurrent_calls_through_one_toolset_and_the_direct_baseline(emu: Emulator, tmp_path: Path) -> None:
    with anyio.fail_after(120):
        baseline = await load.direct(emu.base_url, emu.api_key, CALLS, ledger=tmp_path / 'd.sqlite3', tag='d')
        through = await load.toolset(emu.base_url, emu.api_key, CALLS, ledger=tmp_path / 't.sqlite3', tag='t')
    for result in (baseline, through):
        assert result.errors == [], result.summary()
        assert result.outcomes['completed'] == CALLS
    record('load', 'researcher', f'{CALLS} concurrent research calls (baseline)', **baseline.summary(), lost=0)
    record('load', 'toolset', f'{CALLS} concurrent research calls, one toolset', **through.summary(), lost=0)
