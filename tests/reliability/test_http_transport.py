"""The MCP HTTP transport under hostile clients, while a well-behaved client keeps working.

Missing or wrong bearer tokens, foreign `Origin` and `Host`, a CORS preflight from an unlisted origin, bodies over
the limit (declared or streamed), the wrong content type, and slow-loris clients that dribble their headers or body a
byte at a time: each is refused, and a concurrent honest client gets every one of its answers meanwhile.
"""

from __future__ import annotations

import json
import secrets
import socket
import statistics
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from pydantic_ai_perplexity.emulator import Emulator
from support.mcp_servers import DEADLINE, MCP_HEADERS, HttpServer, server_env
from support.reliability import CreateLog, record, rpc_messages, tool_call

TOKEN = secrets.token_urlsafe(24)
AUTH = {**MCP_HEADERS, 'Authorization': f'Bearer {TOKEN}'}
PING = json.dumps({'jsonrpc': '2.0', 'id': 1, 'method': 'ping'}).encode()


@pytest.fixture(scope='module')
def server(logged: tuple[Emulator, CreateLog], module_state: Path) -> Iterator[HttpServer]:
    process = HttpServer(server_env(logged[0], module_state, PERPLEXITY_MCP_TOKEN=TOKEN, PERPLEXITY_WAIT_SECONDS='10'))
    yield process
    process.stop()


class HonestClient(threading.Thread):
    """Searches through the server in a loop until stopped; keeps every latency and every failure."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.latencies: list[float] = []
        self.failures: list[str] = []
        self.stop = threading.Event()

    def run(self) -> None:
        with httpx2.Client(timeout=DEADLINE, headers=AUTH) as client:
            while not self.stop.is_set():
                started = time.perf_counter()
                try:
                    reply = client.post(self.url, json=tool_call('perplexity_search', {'query': 'EU AI Act'}))
                    [message] = rpc_messages(reply)
                    assert reply.status_code == 200 and message['result'].get('isError') is not True, reply.text
                except Exception as exc:
                    self.failures.append(repr(exc))
                self.latencies.append(time.perf_counter() - started)

    def served(self, at_least: int) -> None:
        deadline = time.monotonic() + DEADLINE
        while len(self.latencies) < at_least:
            assert time.monotonic() < deadline and self.is_alive(), self.failures
            time.sleep(0.01)


def dribbled(port: int, head: bytes, body: bytes = b'', *, pause: float, stop_after: int | None = None) -> int:
    """Send `head` a byte at a time (`pause` seconds apart), then `body` (all of it, or its first `stop_after` bytes
    a byte at a time before giving up); the status answered, or 0 if the server closed without one."""
    with socket.create_connection(('127.0.0.1', port), timeout=DEADLINE) as sock:
        try:
            for i in range(len(head)):
                sock.sendall(head[i : i + 1])
                time.sleep(pause)  # the attack itself: a client too slow on purpose
            if stop_after is None:
                sock.sendall(body)
                if not body:  # a declared length with nothing sent yet: the answer may come from the headers alone
                    sock.settimeout(10.0)
            else:
                for i in range(stop_after):
                    sock.sendall(body[i : i + 1])
                    time.sleep(pause)
                sock.shutdown(socket.SHUT_WR)
            answer = sock.recv(65536)
        except TimeoutError:  # still waiting for a body that will never come: the server did not answer early
            return 0
        except (BrokenPipeError, ConnectionResetError):  # the server answered and closed before we were done
            return 0
    return int(answer.split(b' ', 2)[1]) if answer else 0


def head(port: int, *, length: int, auth: bool = True, extra: str = '') -> bytes:
    lines = [
        'POST /mcp HTTP/1.1',
        f'Host: 127.0.0.1:{port}',
        'Content-Type: application/json',
        'Accept: application/json, text/event-stream',
        f'Content-Length: {length}',
        'Connection: close',
    ]
    if auth:
        lines.append(f'Authorization: Bearer {TOKEN}')
    if extra:
        lines.append(extra)
    return ('\r\n'.join(lines) + '\r\n\r\n').encode()


@pytest.mark.slow
def test_refusals_leave_an_honest_client_unaffected(server: HttpServer) -> None:
    honest = HonestClient(server.url)
    honest.start()
    try:
        honest.served(5)
        before = len(honest.latencies)
        refused: dict[str, int] = {}
        with httpx2.Client(timeout=DEADLINE) as bad:
            cases = {
                'no bearer token': ({**MCP_HEADERS}, PING),
                'wrong bearer token': ({**MCP_HEADERS, 'Authorization': 'Bearer not-the-token'}, PING),
                'token sent as Basic': ({**MCP_HEADERS, 'Authorization': f'Basic {TOKEN}'}, PING),
                'token with a different case': ({**MCP_HEADERS, 'Authorization': f'Bearer {TOKEN.swapcase()}'}, PING),
                'foreign Origin': ({**AUTH, 'Origin': 'https://evil.example'}, PING),
                'foreign Host': ({**AUTH, 'Host': 'evil.example'}, PING),
                'Host of a rebinding attack': ({**AUTH, 'Host': 'attacker.example:80'}, PING),
                'body over 1 MiB': (AUTH, b'{"jsonrpc":"2.0","id":1,"method":"ping","pad":"' + b'x' * 2**21 + b'"}'),
                'wrong content type': ({**AUTH, 'Content-Type': 'text/plain'}, PING),
            }
            for name, (headers, body) in cases.items():
                reply = bad.post(server.url, content=body, headers=headers)
                assert reply.status_code in (400, 401, 403, 413, 415, 421), (name, reply.status_code, reply.text)
                assert TOKEN not in reply.text
                refused[name] = reply.status_code
            # A browser page from an origin the operator did not list: its CORS preflight gets no CORS grant.
            preflight = bad.options(
                server.url, headers={'Origin': 'https://evil.example', 'Access-Control-Request-Method': 'POST'}
            )
            assert preflight.status_code == 403 and 'access-control-allow-origin' not in preflight.headers
            refused['CORS preflight from an unlisted origin'] = preflight.status_code
        assert refused['no bearer token'] == refused['wrong bearer token'] == 401
        assert refused['foreign Origin'] == 403 and refused['foreign Host'] == 421
        assert refused['body over 1 MiB'] == 413

        # A streamed (chunked) body that never says how long it is: cut off at the limit.
        def chunks() -> Iterator[bytes]:
            yield b'{"jsonrpc":"2.0","id":1,"method":"ping","pad":"'
            for _ in range(40):
                yield b'x' * 65536
            yield b'"}'

        with httpx2.Client(timeout=DEADLINE) as bad:
            streamed = bad.post(server.url, content=chunks(), headers=AUTH)
        assert streamed.status_code == 413
        refused['chunked body over 1 MiB'] = 413
        honest.served(before + 5)  # and it goes on being served
    finally:
        honest.stop.set()
        honest.join(DEADLINE)
    assert honest.failures == []
    for name, status in refused.items():
        record('transport', 'mcp-http', name, outcome=f'refused {status}', honest_failures=0)


@pytest.mark.slow
def test_slow_loris_clients_are_refused_and_an_honest_client_keeps_its_answers(server: HttpServer) -> None:
    honest = HonestClient(server.url)
    honest.start()
    results: dict[str, list[int]] = {'headers': [], 'body': [], 'too big': []}
    errors: list[str] = []

    def attack(kind: str) -> None:
        port = server.port
        try:
            if kind == 'headers':  # headers a byte at a time, without the token
                status = dribbled(port, head(port, length=0, auth=False), pause=0.01)
            elif kind == 'body':  # with the token, says 1 000 000 bytes are coming, dribbles a few, gives up
                status = dribbled(
                    port, head(port, length=1_000_000), b'{"jsonrpc":"2.0","id":1', pause=0.02, stop_after=20
                )
            else:  # with the token, headers a byte at a time saying 2 000 000 bytes will come: over the limit
                status = dribbled(port, head(port, length=2_000_000), pause=0.005)
            results[kind].append(status)
        except Exception as exc:
            errors.append(f'{kind}: {exc!r}')

    try:
        honest.served(3)
        baseline = statistics.median(honest.latencies)
        during_start = len(honest.latencies)
        kinds = [kind for kind in results for _ in range(10)]
        attackers = [threading.Thread(target=attack, args=(kind,)) for kind in kinds]
        for thread in attackers:
            thread.start()
        for thread in attackers:
            thread.join(DEADLINE)
        during = honest.latencies[during_start:]
        honest.served(len(honest.latencies) + 3)
    finally:
        honest.stop.set()
        honest.join(DEADLINE)
    assert errors == [], errors
    assert honest.failures == [], honest.failures
    assert len(during) >= 10, during  # the honest client was answered all through the attack
    assert set(results['headers']) == {401}, results
    assert set(results['too big']) <= {413, 0} and 413 in results['too big'], results
    # A body cut short is answered with a client error or the connection is closed: never served, never a 5xx.
    assert all(status == 0 or 400 <= status < 500 for status in results['body']), results
    record(
        'transport', 'mcp-http', '30 slow-loris clients (headers or body a byte at a time)',
        outcome=(
            f'headers without a token: {describe(results["headers"])}; body cut short: {describe(results["body"])}; '
            f'2 MB declared: {describe(results["too big"])}'
        ),
        honest_failures=0,
        honest_calls=len(during), honest_p50_ms=round(statistics.median(during) * 1000, 1),
        honest_p50_before_ms=round(baseline * 1000, 1),
    )  # fmt: skip


def describe(statuses: list[int]) -> str:
    return ' or '.join('closed unanswered' if s == 0 else str(s) for s in sorted(set(statuses)))
