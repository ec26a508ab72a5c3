"""With full HTTP capture on and `configure_tracing()`'s scrubbing, the API key reaches no exported span or metric."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx2
import logfire
import pytest
from logfire.testing import CaptureLogfire, TestExporter
from opentelemetry import trace
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from pydantic_ai_perplexity import AuthenticationError, Researcher
from pydantic_ai_perplexity._core.tracing import configure_tracing
from pydantic_ai_perplexity.emulator import Emulator
from support.tracing import SENTINEL_KEY

pytestmark = pytest.mark.anyio

WRONG_KEY = 'pplx-WRONG-SENTINEL-fedcba9876543210'
_tracer = trace.get_tracer('tests.capture')


class CaptureAllTransport(httpx2.AsyncBaseTransport):
    """What `logfire.instrument_httpx(capture_all=True)` records, for any HTTP stack: every header, both bodies."""

    def __init__(self) -> None:
        self._inner = httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        with _tracer.start_as_current_span(request.method) as span:
            span.set_attribute('http.url', str(request.url))
            for name, value in request.headers.items():
                span.set_attribute(f'http.request.header.{name.lower()}', [value])
            span.set_attribute('http.request.body.text', request.content.decode(errors='replace'))
            # Where an innocent attribute name holds the whole header set, only the value pattern can catch the key.
            span.set_attribute('http.request.headers_dump', repr(dict(request.headers)))
            response = await self._inner.handle_async_request(request)
            body = await response.aread()
            span.set_attribute('http.status_code', response.status_code)
            with _tracer.start_as_current_span('Reading response body') as read:
                read.set_attribute('http.response.body.text', body.decode(errors='replace'))
            return httpx2.Response(response.status_code, headers=response.headers, content=body, request=request)

    async def aclose(self) -> None:
        await self._inner.aclose()


@pytest.fixture
def exported() -> Iterator[tuple[TestExporter, InMemoryMetricReader]]:
    """Logfire configured by `configure_tracing()` itself (its scrubbing), exporting to memory."""
    exporter = TestExporter()
    reader = InMemoryMetricReader()
    assert configure_tracing(
        send_to_logfire=False,
        additional_span_processors=[SimpleSpanProcessor(exporter)],
        metrics=logfire.MetricsOptions(additional_readers=[reader]),
    )
    yield exporter, reader
    logfire.configure(send_to_logfire=False, console=False)  # leave no exporter holding our spans


def _everything(exporter: TestExporter, reader: InMemoryMetricReader) -> str:
    spans: list[Any] = exporter.exported_spans_as_dict(include_resources=True, include_instrumentation_scope=True)
    return repr(spans) + repr(reader.get_metrics_data()) + repr([s.to_json() for s in exporter.exported_spans])


async def _research_with_full_capture() -> None:
    with Emulator(api_key=SENTINEL_KEY, time_scale=0.005) as emu:
        async with httpx2.AsyncClient(transport=CaptureAllTransport()) as http:
            async with Researcher(api_key=SENTINEL_KEY, base_url=emu.base_url, http_client=http) as r:
                # A person pastes the key into a question: it is in the query, the searches and the answer.
                result = await r.run(f'Is {SENTINEL_KEY} a valid key? [[emulate: mcp]]', effort='low', fetch_pages=2)
                await r.search(f'EU AI Act {SENTINEL_KEY}', max_results=2)
            async with Researcher(api_key=WRONG_KEY, base_url=emu.base_url, http_client=http) as wrong:
                with pytest.raises(AuthenticationError):
                    await wrong.run('What is the EU AI Act?', effort='fast')
    assert result.done


async def test_the_key_is_in_no_exported_span_with_full_http_capture(
    exported: tuple[TestExporter, InMemoryMetricReader],
):
    exporter, reader = exported
    await _research_with_full_capture()
    dump = _everything(exporter, reader)
    names = {s['name'] for s in exporter.exported_spans_as_dict()}
    assert {'perplexity.research', 'perplexity.search_api', 'POST', 'GET', 'Reading response body'} <= names
    assert "Scrubbed due to 'pplx-'" in dump  # the capture really held the key, and the pattern caught it
    assert SENTINEL_KEY not in dump
    assert WRONG_KEY not in dump
    assert SENTINEL_KEY.removeprefix('pplx-') not in dump
    assert WRONG_KEY.removeprefix('pplx-') not in dump


async def test_logfires_default_scrubbing_alone_would_export_the_key(capfire: CaptureLogfire):
    """The control: the same run under Logfire's default patterns leaks, so the test above proves something."""
    await _research_with_full_capture()
    assert SENTINEL_KEY in repr(capfire.exporter.exported_spans_as_dict())


async def test_the_key_is_in_no_span_with_logfires_own_httpx_capture(
    exported: tuple[TestExporter, InMemoryMetricReader],
):
    exporter, reader = exported
    logfire.instrument_httpx(capture_all=True)
    try:
        with Emulator(api_key=SENTINEL_KEY, time_scale=0.005) as emu:
            async with Researcher(api_key=SENTINEL_KEY, base_url=emu.base_url) as r:
                result = await r.run(f'Is {SENTINEL_KEY} a valid key?', effort='fast')
    finally:
        uninstrument_httpx()
    assert result.done
    names = {s['name'] for s in exporter.exported_spans_as_dict()}
    assert {'perplexity.research', 'POST', 'GET', 'Reading response body'} <= names  # httpx2 is instrumented too
    dump = _everything(exporter, reader)
    assert "Scrubbed due to 'pplx-'" in dump  # the query, echoed in request and response bodies
    assert SENTINEL_KEY not in dump
    assert SENTINEL_KEY.removeprefix('pplx-') not in dump


def uninstrument_httpx() -> None:
    """Undo `logfire.instrument_httpx()` for httpx *and* httpx2, so no later test gets HTTP spans."""
    from logfire._internal.integrations.httpx import _instrumentors_for_installed_modules  # pyright: ignore

    for instrumentor in _instrumentors_for_installed_modules():
        instrumentor.uninstrument()
