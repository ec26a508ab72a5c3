"""One test, every path, a sentinel key: it appears in no output, span, metric, log line, file or exception.

The emulator accepts only the sentinel (and a second, wrong sentinel is used for the authentication failures). The
test drives the toolset (success and every error class), exceptions raised by `Researcher` (`str`, `repr`, the
formatted traceback with its whole chain), tracing with full HTTP capture (headers and bodies recorded into spans)
and DEBUG logging of every logger, the CLI, the MCP server over stdio and HTTP (answers, stdout, stderr, console
spans and OTLP exports), and then reads every byte of every file left in its state directories (ledger, WAL, SHM).
"""

from __future__ import annotations

import importlib.util
import json
import logging
import traceback
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import anyio
import httpx2
import logfire
import pytest
from logfire.testing import TestExporter
from opentelemetry import trace
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from pydantic_ai_perplexity import PerplexityError, PerplexityToolset, Researcher
from pydantic_ai_perplexity._core.tracing import configure_tracing
from pydantic_ai_perplexity.emulator import Emulator
from support.mcp_servers import DEADLINE, MCP_HEADERS, HttpServer, RawServer, server_env
from support.otlp_collector import otlp_collector
from support.reliability import (
    call_tools,
    outcome_of,
    record,
    start_cli,
    text_of_part,
    tool_call,
    until,
)

SENTINEL = 'pplx-SENTINEL0123456789abcdef-reliability-must-not-leak'
WRONG = 'pplx-WRONGSENTINEL9876543210fedcba-must-not-leak-either'
#: What must never be seen: each key, and each without its prefix (a key cut or re-encoded is still a leak).
NEEDLES = (SENTINEL, WRONG, SENTINEL.removeprefix('pplx-'), WRONG.removeprefix('pplx-'))
_tracer = trace.get_tracer('tests.reliability.capture')


class Haystack:
    """Everything the test saw, by where it came from."""

    def __init__(self) -> None:
        self.items: list[tuple[str, bytes]] = []

    def add(self, where: str, value: str | bytes) -> None:
        self.items.append((where, value if isinstance(value, bytes) else value.encode('utf-8', 'surrogatepass')))

    def assert_clean(self) -> None:
        leaks = [where for where, data in self.items for needle in NEEDLES if needle.encode() in data]
        assert leaks == [], f'the key leaked into: {leaks}'

    def add_files(self, where: str, directory: Path) -> None:
        """Every byte of every file under `directory`, now (a ledger's WAL exists only while a process holds it)."""
        for path in sorted(p for p in directory.rglob('*') if p.is_file()):
            self.add(f'file:{where}/{path.name}', path.read_bytes())

    def kinds(self) -> list[str]:
        return sorted({where.split(':', 1)[0] for where, _ in self.items})


class CaptureAllTransport(httpx2.AsyncBaseTransport):
    """Full HTTP capture into spans (what `logfire.instrument_httpx(capture_all=True)` records): headers, bodies."""

    def __init__(self, **settings: Any) -> None:
        self._inner = httpx2.AsyncHTTPTransport(**settings)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        with _tracer.start_as_current_span(f'{request.method} capture') as span:
            span.set_attribute('http.url', str(request.url))
            for name, value in request.headers.items():
                span.set_attribute(f'http.request.header.{name.lower()}', [value])
            span.set_attribute('http.request.body.text', request.content.decode(errors='replace'))
            response = await self._inner.handle_async_request(request)
            body = await response.aread()
            span.set_attribute('http.response.body.text', body.decode(errors='replace'))
            return httpx2.Response(response.status_code, headers=response.headers, content=body, request=request)

    async def aclose(self) -> None:
        await self._inner.aclose()


# -- in process ----------------------------------------------------------------------------------------------------


async def in_process(emu: Emulator, state: Path, hay: Haystack, monkeypatch: pytest.MonkeyPatch) -> int:
    """The toolset on every outcome, and every exception `Researcher` raises; returns how many calls were made."""
    ledger = state / 'ledger.sqlite3'
    made = 0
    async with httpx2.AsyncClient(transport=CaptureAllTransport(), timeout=30) as http:

        def toolset(**kw: Any) -> PerplexityToolset:
            kw.setdefault('api_key', SENTINEL)
            return PerplexityToolset(base_url=emu.base_url, ledger=ledger, http_client=http, effort='fast', **kw)

        main = toolset(budget_usd=100)
        hay.add('repr:toolset researcher', repr(main.researcher) + repr(main.researcher.client) + repr(emu))
        calls: list[tuple[str, dict[str, Any]]] = [
            ('perplexity_research', {'query': 'What does the EU AI Act regulate? [[emulate: mcp, drop@4]]'}),
            ('perplexity_research', {'query': 'A failed run [[emulate: fail]]'}),
            ('perplexity_research', {'query': 'An incomplete run [[emulate: incomplete]]'}),
            ('perplexity_research', {'query': 'A create that fails [[emulate: 500x1]]'}),
            ('perplexity_research', {'query': 'A body that is not JSON [[emulate: malformed]]'}),
            ('perplexity_research', {'query': 'Rate limited [[emulate: 429x9, retry_after=0.01]]'}),
            ('perplexity_research', {'query': 'Retrieve trouble [[emulate: 502x2@retrieve]]'}),
            ('perplexity_research', {'query': 'A bad model', 'model': 'nobody/no-such-model'}),
            ('perplexity_research', {'query': 'A bad domain', 'domains': ['not a domain']}),
            ('perplexity_research_result', {'response_id': 'resp_does-not-exist'}),
            ('perplexity_research_cancel', {'response_id': 'resp_does-not-exist'}),
            ('perplexity_search', {'query': 'EU AI Act'}),
            ('perplexity_search', {'query': 'Search rate limited [[emulate: 429x9, retry_after=0.01]]'}),
            ('perplexity_research_list', {}),
        ]
        parts = await call_tools(main, calls)
        long = await call_tools(
            toolset(wait_seconds=0.05), [('perplexity_research', {'query': 'Long [[emulate: duration=9000]]'})]
        )
        response_id = long[0].metadata['research_result'].response_id
        parts += long
        parts += await call_tools(main, [('perplexity_research_cancel', {'response_id': response_id})])
        parts += await call_tools(main, [('perplexity_research_result', {'response_id': response_id})])
        parts += await call_tools(toolset(api_key=WRONG), [('perplexity_research', {'query': 'Wrong key'})])
        parts += await call_tools(toolset(budget_usd=0.0001), [('perplexity_research', {'query': 'Over budget'})])
        monkeypatch.delenv('PERPLEXITY_API_KEY', raising=False)
        parts += await call_tools(toolset(api_key=None), [('perplexity_research', {'query': 'No key'})])
        mcp = [{'type': 'mcp', 'server_label': 'gone', 'server_url': 'https://mcp.gone.invalid/mcp'}]
        parts += await call_tools(toolset(mcp_servers=mcp), [('perplexity_research', {'query': 'A remote MCP server'})])
        assert {outcome_of(p) for p in parts} == {'success', 'failed', 'retry'}
        for part in parts:
            hay.add(f'toolset:{part.tool_name}', text_of_part(part) + repr(part))
        made += len(parts)
        await main.researcher.flush()

        # Every exception class Researcher raises, with its chain: str, repr, the formatted traceback.
        async with httpx2.AsyncClient(transport=CaptureAllTransport(), timeout=0.2) as impatient:
            cases: list[tuple[str, Callable[[], Coroutine[Any, Any, Any]]]] = []
            r = Researcher(api_key=SENTINEL, base_url=emu.base_url, ledger=ledger, http_client=http, effort='fast')
            wrong = Researcher(api_key=WRONG, base_url=emu.base_url, ledger=False, http_client=http)
            slow = Researcher(api_key=SENTINEL, base_url=emu.base_url, ledger=False, http_client=impatient)
            poor = Researcher(api_key=SENTINEL, base_url=emu.base_url, ledger=ledger, budget_usd=0.0001)
            cases = [
                ('authentication', lambda: wrong.run('q')),
                ('bad request', lambda: r.run('q', model='nobody/no-such-model')),
                ('not found', lambda: r.collect('resp_does-not-exist')),
                ('rate limited', lambda: r.run('q [[emulate: 429x9, retry_after=0.01]]')),
                ('server error', lambda: r.run('q [[emulate: 503x9, retry_after=0.01]]')),
                ('malformed', lambda: r.run('q [[emulate: malformed]]')),
                ('may have started', lambda: slow.run('q [[emulate: slow=0.6]]')),
                ('budget', lambda: poor.run('q')),
                ('external connector', lambda: r.run('q', mcp_servers=mcp)),
                ('invalid argument', lambda: r.run('q', after='yesterday')),
                ('search rate limited', lambda: r.search('q [[emulate: 429x9, retry_after=0.01]]')),
            ]
            for name, call in cases:
                with pytest.raises(PerplexityError) as caught:
                    await call()
                exc = caught.value
                hay.add(f'exception:{name}', str(exc) + repr(exc) + ''.join(traceback.format_exception(exc)))
                hay.add(f'exception:{name} attributes', repr(vars(exc)))
                made += 1
            for researcher in (r, wrong, slow, poor):
                await researcher.aclose()
    return made


# -- subprocesses --------------------------------------------------------------------------------------------------


def cli_runs(emu: Emulator, state: Path, endpoint: str, hay: Haystack) -> int:
    env = server_env(emu, state, OTEL_EXPORTER_OTLP_ENDPOINT=endpoint, LOGFIRE_CONSOLE='true')
    env['PERPLEXITY_API_KEY'] = SENTINEL

    def run(*args: str, key: str = SENTINEL) -> str:
        process = start_cli(list(args), {**env, 'PERPLEXITY_API_KEY': key})
        out, err = process.communicate(timeout=DEADLINE)
        hay.add(f'cli:{args[0]} {args[1] if len(args) > 1 else ""} stdout', out)
        hay.add(f'cli:{args[0]} stderr', err)
        return out.decode()

    started = json.loads(run('research', 'A long question [[emulate: duration=20000]]', '--no-wait', '--json'))
    response_id = started['response_id']
    batch = [  # every command, a success and each kind of failure (a process costs about a second of CPU)
        ('research', 'What does the EU AI Act regulate? [[emulate: drop@3]]', '--effort', 'fast', '--json'),
        ('research', 'A failed run [[emulate: fail]]', '--effort', 'fast'),
        ('research', 'A create that fails [[emulate: 500x1]]'),
        ('research', 'Bad model', '--model', 'nobody/no-such-model'),
        ('jobs', 'list'),
        ('jobs', 'show', response_id),
        ('jobs', 'cancel', response_id),
        ('jobs', 'wait', 'resp_does-not-exist', '--timeout', '5'),
        ('doctor',),
        ('config', 'claude-desktop'),
    ]
    processes = [(args, start_cli(list(args), env)) for args in batch]
    processes.append(
        (('research', 'wrong key'), start_cli(['research', 'Wrong key'], {**env, 'PERPLEXITY_API_KEY': WRONG}))
    )
    for args, process in processes:
        out, err = process.communicate(timeout=DEADLINE)
        hay.add(f'cli:{" ".join(args[:2])} stdout', out)
        hay.add(f'cli:{" ".join(args[:2])} stderr', err)
    return len(processes) + 1


def mcp_stdio_runs(emu: Emulator, state: Path, endpoint: str, hay: Haystack) -> int:
    env = server_env(emu, state, OTEL_EXPORTER_OTLP_ENDPOINT=endpoint, LOGFIRE_CONSOLE='true',
                     PERPLEXITY_WAIT_SECONDS='10')  # fmt: skip
    env['PERPLEXITY_API_KEY'] = SENTINEL
    calls = 0
    for key in (SENTINEL, WRONG):
        server = RawServer({**env, 'PERPLEXITY_API_KEY': key})
        try:
            server.initialize()
            done = server.call('perplexity_research', {'query': 'What is the EU AI Act? [[emulate: mcp]]'})
            for name, args in [
                ('perplexity_research', {'query': 'A failed run [[emulate: fail]]'}),
                ('perplexity_research', {'query': 'A create that fails [[emulate: 500x1]]'}),
                ('perplexity_research', {'query': 'Not JSON [[emulate: malformed]]'}),
                ('perplexity_research', {'query': 'Bad model', 'model': 'nobody/no-such-model'}),
                ('perplexity_research_result', {'response_id': 'resp_does-not-exist'}),
                ('perplexity_research_cancel', {'response_id': 'resp_does-not-exist'}),
                ('perplexity_research_list', {}),
                ('perplexity_search', {'query': 'EU AI Act'}),
            ]:
                server.call(name, args)
                calls += 1
            if key == SENTINEL:
                response_id = done['structuredContent']['response_id']
                server.request('resources/read', {'uri': f'perplexity://runs/{response_id}'})
                server.request('resources/read', {'uri': 'skill://perplexity-research/SKILL.md'})
                hay.add_files('mcp-stdio (serving)', state)
            assert server.close() == 0
        finally:
            server.kill()
        hay.add('mcp-stdio:stdout', b''.join(server.raw_stdout))
        hay.add('mcp-stdio:stderr', b''.join(server.stderr))
    return calls


def mcp_http_runs(emu: Emulator, state: Path, endpoint: str, hay: Haystack) -> int:
    env = server_env(emu, state, OTEL_EXPORTER_OTLP_ENDPOINT=endpoint, LOGFIRE_CONSOLE='true',
                     PERPLEXITY_WAIT_SECONDS='10', PERPLEXITY_MCP_TOKEN='http-token-for-the-secrets-test')  # fmt: skip
    env['PERPLEXITY_API_KEY'] = SENTINEL
    server = HttpServer(env)
    headers = {**MCP_HEADERS, 'Authorization': 'Bearer http-token-for-the-secrets-test'}
    calls = 0
    try:
        with httpx2.Client(timeout=DEADLINE, headers=headers) as client:
            for name, args in [
                ('perplexity_research', {'query': 'What is the EU AI Act? [[emulate: drop@3]]'}),
                ('perplexity_research', {'query': 'A failed run [[emulate: fail]]'}),
                ('perplexity_research', {'query': 'A create that fails [[emulate: 500x1]]'}),
                ('perplexity_research', {'query': 'Bad model', 'model': 'nobody/no-such-model'}),
                ('perplexity_research_result', {'response_id': 'resp_does-not-exist'}),
                ('perplexity_research_list', {}),
                ('perplexity_search', {'query': 'EU AI Act'}),
            ]:
                reply = client.post(server.url, json=tool_call(name, args, progressToken='p'))
                hay.add(f'mcp-http:{name}', reply.content + repr(dict(reply.headers)).encode())
                calls += 1
            unauthorised = httpx2.post(server.url, json=tool_call('perplexity_search', {'query': 'q'}), timeout=10)
            hay.add('mcp-http:401', unauthorised.content)
            hay.add('mcp-http:healthz', httpx2.get(server.url.replace('/mcp', '/healthz'), timeout=10).content)
        hay.add_files('mcp-http (serving)', state)
    finally:
        server.stop()
    until(lambda: server.proc.stderr is None or server.proc.stderr.closed, what='the server stderr drained')
    hay.add('mcp-http:stderr', b''.join(server.stderr))
    hay.add('mcp-http:stdout', b''.join(server.stdout))
    return calls + 2


# -- the test ------------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_key_appears_nowhere_on_any_path(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    hay = Haystack()
    exporter, reader = TestExporter(), InMemoryMetricReader()
    httpx_instrumented = importlib.util.find_spec('opentelemetry.instrumentation.httpx') is not None
    caplog.set_level(logging.DEBUG)  # every logger, every level
    with Emulator(api_key=SENTINEL, time_scale=0.002) as emu, otlp_collector() as (collector, endpoint):
        monkeypatch.setenv('PERPLEXITY_API_KEY', SENTINEL)
        assert configure_tracing(
            send_to_logfire=False,
            additional_span_processors=[SimpleSpanProcessor(exporter)],
            metrics=logfire.MetricsOptions(additional_readers=[reader]),
        )
        if httpx_instrumented:
            logfire.instrument_httpx(capture_all=True)
        try:
            made = anyio.run(in_process, emu, tmp_path / 'in-process', hay, monkeypatch)
        finally:
            if httpx_instrumented:
                from logfire._internal.integrations.httpx import _instrumentors_for_installed_modules  # pyright: ignore

                for instrumentor in _instrumentors_for_installed_modules():
                    instrumentor.uninstrument()
            logfire.configure(send_to_logfire=False, console=False)  # leave no exporter holding our spans
        spans = exporter.exported_spans_as_dict(include_resources=True, include_instrumentation_scope=True)
        captured = [s for s in spans if s['name'].endswith(' capture')]
        assert captured and all('http.request.header.authorization' in s['attributes'] for s in captured)
        assert 'Scrubbed due to' in repr(captured)  # the capture really held the key, and scrubbing caught it
        hay.add('spans:in-process', repr(spans) + repr([s.to_json() for s in exporter.exported_spans]))
        hay.add('metrics:in-process', repr(reader.get_metrics_data()))
        hay.add('logs:in-process', caplog.text)
        assert any(r.levelno == logging.DEBUG for r in caplog.records)

        made += cli_runs(emu, tmp_path / 'cli', endpoint, hay)
        made += mcp_stdio_runs(emu, tmp_path / 'mcp-stdio', endpoint, hay)
        made += mcp_http_runs(emu, tmp_path / 'mcp-http', endpoint, hay)
        until(lambda: collector.named('perplexity.research'), what='spans exported over OTLP')
        hay.add('otlp:exports', b''.join(collector.raw))
    hay.add_files('left behind', tmp_path)  # ledgers, and anything else the processes wrote
    files = [where for where, _ in hay.items if where.startswith('file:')]
    assert any(f.endswith('-wal') for f in files) and any(f.endswith('.sqlite3') for f in files), files
    hay.assert_clean()
    scanned = sum(len(data) for _, data in hay.items)
    record(
        'secrets', 'every way in', 'sentinel key on every path (success, each error, tracing, logs, CLI, MCP, ledger)',
        calls=made, places=len(hay.items), kinds=hay.kinds(), bytes_scanned=scanned, files=len(files), leaks=0,
        httpx_instrumentation='used' if httpx_instrumented else 'not installed: full capture by a transport instead',
    )  # fmt: skip
