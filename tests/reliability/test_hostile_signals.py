"""Signals at every moment of the MCP server's life (issue 22): the exit code the docs give, never a traceback.

SIGTERM (how MCP clients and process managers stop a server) exits 0; SIGINT (Ctrl-C) exits 130, as shells expect
of an interrupted command. Sent right after spawn, after the first line on stderr, after `initialize`, and while
serving calls, over stdio; and to a listening HTTP server. Each exit is waited for with a deadline.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from pydantic_ai_perplexity.emulator import Emulator
from support.mcp_servers import DEADLINE, HttpServer, RawServer, eventually, server_env
from support.reliability import record

EXPECTED = {signal.SIGINT: 130, signal.SIGTERM: 0}
MOMENTS = ('right after spawn', 'after the first line on stderr', 'after initialize', 'while serving calls')


@pytest.fixture(scope='module')
def emu() -> Iterator[Emulator]:
    with Emulator(time_scale=0.002) as emulator:
        yield emulator


def reach(process: RawServer, moment: str) -> None:
    """Bring the server to `moment` (waiting on what it says, never on time)."""
    if moment == 'right after spawn':
        return
    if moment == 'after the first line on stderr':
        eventually(lambda: process.stderr)
        return
    assert process.initialize()['result']['serverInfo']['name'] == 'perplexity'
    if moment == 'while serving calls':
        assert len(process.request('tools/list')['result']['tools']) == 5
        found = process.call('perplexity_search', {'query': 'heat pumps'})  # served by the SDK, not the front
        assert found.get('isError') is not True


@pytest.mark.compat  # signals or kills a process
@pytest.mark.parametrize('sig', [signal.SIGINT, signal.SIGTERM], ids=['SIGINT', 'SIGTERM'])
def test_a_signal_at_any_moment_of_a_stdio_server_exits_quietly_with_the_documented_code(
    emu: Emulator, tmp_path: Path, sig: signal.Signals
) -> None:
    codes: dict[str, int] = {}
    for moment in MOMENTS:
        # Without a key the server says so on stderr at once: the "first line" moment; with one, it says nothing.
        env = server_env(None if moment == 'after the first line on stderr' else emu, tmp_path)
        process = RawServer(env)
        try:
            reach(process, moment)
            process.proc.send_signal(sig)
            codes[moment] = process.proc.wait(timeout=DEADLINE)
        finally:
            process.kill()
        log = b''.join(process.stderr)
        assert b'Traceback' not in log and b'KeyboardInterrupt' not in log, (moment, log[-3000:])
        if moment == 'right after spawn':
            # Possibly before Python installed any handler: the default action ends it, 128 + sig to a shell too.
            assert codes[moment] in (EXPECTED[sig], -sig), (moment, codes)
        else:
            assert codes[moment] == EXPECTED[sig], (moment, codes, log[-2000:])
    record('signals', 'mcp-stdio', f'{sig.name} right after spawn, at the first stderr line, handshake, serving',
           runs=0, exit_codes=sorted(set(codes.values())), outcome='the documented exit code, no traceback',
           lost=0)  # fmt: skip


@pytest.mark.compat  # signals or kills a process
@pytest.mark.parametrize('sig', [signal.SIGINT, signal.SIGTERM], ids=['SIGINT', 'SIGTERM'])
def test_a_signal_to_a_listening_http_server_exits_with_the_same_code(
    emu: Emulator, tmp_path: Path, sig: signal.Signals
) -> None:
    server = HttpServer(server_env(emu, tmp_path))
    server.proc.send_signal(sig)
    code = server.proc.wait(timeout=DEADLINE)
    server.stop()
    log = b''.join(server.stderr)
    assert code == EXPECTED[sig] and b'Traceback' not in log, (code, log[-2000:])
