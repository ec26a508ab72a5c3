"""Half-open HTTP requests against the MCP server's file descriptors (issue 22): nobody honest is locked out.

A subprocess server runs with a lowered descriptor limit; more half-open requests than that limit (a request line
and part of the headers, then silence) come in over raw sockets on loopback. An honest `/healthz` and an honest
`tools/call` are answered while the attack lasts, stderr has no traceback, and once the header timeout has passed
the server has closed every half-open socket.
"""

from __future__ import annotations

import json
import resource
import select
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from pydantic_ai_perplexity.emulator import Emulator
from support.mcp_servers import DEADLINE, MCP_HEADERS, SERVER, HttpServer, server_env
from support.reliability import final_reply, record, rpc_messages, tool_call

LIMIT = 256  # the server's RLIMIT_NOFILE
ATTACK = 400  # half-open requests: more than the server has descriptors
HEADER_TIMEOUT = 3.0
PARTIAL = b'POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: appl'


@pytest.fixture(scope='module')
def emu() -> Iterator[Emulator]:
    with Emulator(time_scale=0.002) as emulator:
        yield emulator


def lowered_descriptors() -> None:
    """In the server's process, before it starts: the descriptor limit of a small container."""
    resource.setrlimit(resource.RLIMIT_NOFILE, (LIMIT, LIMIT))


def closed_by_server(sock: socket.socket) -> bool:
    """Whether the server closed this socket (end of stream or a reset); never blocks."""
    try:
        return sock.recv(4096) == b''
    except BlockingIOError:
        return False
    except OSError:
        return True


@pytest.mark.slow
def test_half_open_requests_beyond_the_descriptor_limit_lock_nobody_out(emu: Emulator, tmp_path: Path) -> None:
    env = server_env(emu, tmp_path, PERPLEXITY_MCP_HEADER_TIMEOUT=str(HEADER_TIMEOUT))
    server = HttpServer(env, preexec_fn=lowered_descriptors)
    health_url = server.url.removesuffix('/mcp') + '/healthz'
    attack: list[socket.socket] = []
    try:
        began = time.monotonic()
        for _ in range(ATTACK):
            sock = socket.create_connection(('127.0.0.1', server.port), timeout=5)
            sock.sendall(PARTIAL)
            sock.setblocking(False)
            attack.append(sock)
        attacked = time.monotonic()
        assert attacked - began < DEADLINE

        # While the attack holds its sockets open: an honest caller is answered.
        asked = time.monotonic()
        health = httpx2.get(health_url, timeout=DEADLINE)
        health_s = time.monotonic() - asked
        assert health.status_code == 200 and health.json()['status'] == 'ok', health.text
        asked = time.monotonic()
        body = tool_call('perplexity_search', {'query': 'heat pumps'})
        reply = httpx2.post(server.url, content=json.dumps(body), headers=MCP_HEADERS, timeout=DEADLINE)
        call_s = time.monotonic() - asked
        assert reply.status_code == 200, reply.text
        result = final_reply(rpc_messages(reply))['result']
        assert result.get('isError') is not True and '[1]' in result['content'][0]['text'], result
        open_during = sum(1 for sock in attack if not closed_by_server(sock))
        assert open_during < LIMIT  # the limits closed the excess at once

        # After the header timeout, the server has closed every half-open socket.
        deadline = time.monotonic() + HEADER_TIMEOUT + DEADLINE
        remaining = [sock for sock in attack if not closed_by_server(sock)]
        while remaining:
            assert time.monotonic() < deadline, f'{len(remaining)} half-open sockets still open'
            select.select(remaining, [], [], 1.0)
            remaining = [sock for sock in remaining if not closed_by_server(sock)]
        closed_s = time.monotonic() - attacked
        assert httpx2.get(health_url, timeout=DEADLINE).status_code == 200  # and it keeps serving
    finally:
        for sock in attack:
            sock.close()
        server.stop()
    log = b''.join(server.stderr)
    assert b'Traceback' not in log, log[-3000:]
    # The limits said so, but at most a line per 10 s: an attack must not flood the log either.
    warned = log.count(b'Connection limit reached')
    assert 1 <= warned <= 2 + int((time.monotonic() - began) / 10), warned
    record('connections', 'mcp-http', f'{ATTACK} half-open requests against a {LIMIT}-descriptor limit',
           attack_s=round(attacked - began, 1), healthz_s=round(health_s, 2), tools_call_s=round(call_s, 2),
           half_open_kept=open_during, all_closed_after_s=round(closed_s, 1),
           outcome='honest calls answered; no traceback', lost=0)  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize(
    ('setting', 'value', 'said'),
    [
        ('PERPLEXITY_MCP_HEADER_TIMEOUT', '0', 'the header timeout must be more than 0'),
        ('PERPLEXITY_MCP_HEADER_TIMEOUT', 'soon', "PERPLEXITY_MCP_HEADER_TIMEOUT='soon' is not a number"),
        ('PERPLEXITY_MCP_MAX_CONNECTIONS_PER_CLIENT', '0', 'the connections per client must be at least 1'),
    ],
)
def test_a_bad_connection_setting_stops_the_server_at_start_naming_it(
    tmp_path: Path, setting: str, value: str, said: str
) -> None:
    done = subprocess.run(
        [*SERVER, '--transport', 'http', '--port', '0'],
        env=server_env(None, tmp_path, **{setting: value}),
        capture_output=True,
        timeout=DEADLINE,
    )
    assert done.returncode == 2 and said.encode() in done.stderr and setting.encode() in done.stderr, done.stderr
    assert b'Traceback' not in done.stderr
