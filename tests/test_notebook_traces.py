"""`SpanCapture`: this process's spans and, through its OTLP/HTTP receiver on loopback, another process's, drawn as
one `SpanTree`; `wait_for_remote` returns once every MCP call made here has its server-side span."""

from __future__ import annotations

import pytest

pytest.importorskip('opentelemetry.sdk')
pytest.importorskip('opentelemetry.exporter.otlp.proto.http')

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from pydantic_ai_perplexity.notebook import SpanCapture, SpanTree


def _serve_call(endpoint: str, parent: trace.SpanContext, compression: Compression) -> None:
    """What an MCP server in another process does: its SERVER span, parented on the call, exported over OTLP/HTTP."""
    provider = TracerProvider(resource=Resource.create({'service.name': 'mcp-server'}))
    provider.add_span_processor(
        SimpleSpanProcessor(OTLPSpanExporter(endpoint=f'{endpoint}/v1/traces', compression=compression))
    )
    remote_parent = trace.set_span_in_context(trace.NonRecordingSpan(parent))
    with provider.get_tracer('server').start_as_current_span(
        'tools/call perplexity_research', context=remote_parent, kind=trace.SpanKind.SERVER
    ):
        pass
    provider.shutdown()


@pytest.mark.parametrize('compression', [Compression.NoCompression, Compression.Gzip, Compression.Deflate])
def test_a_remote_server_span_joins_the_local_trace(compression: Compression) -> None:
    capture = SpanCapture(receive_otlp=True)
    try:
        assert capture.endpoint is not None and capture.endpoint.startswith('http://127.0.0.1:')
        tracer = trace.get_tracer('test')
        with capture.trace('one research') as trace_id:
            with tracer.start_as_current_span('MCP send tools/call perplexity_research', kind=trace.SpanKind.CLIENT):
                call = trace.get_current_span().get_span_context()
        assert capture.wait_for_remote(trace_id, timeout=0.05) is False  # the server's span has not come yet

        _serve_call(capture.endpoint, call, compression)

        assert capture.wait_for_remote(trace_id, timeout=10) is True
        spans = capture.spans(trace_id)
        assert [(s.name, s.kind, s.remote) for s in spans] == [
            ('one research', 'INTERNAL', False),
            ('MCP send tools/call perplexity_research', 'CLIENT', False),
            ('tools/call perplexity_research', 'SERVER', True),
        ]
        assert spans[2].parent_id == format(call.span_id, '016x') and spans[2].service == 'mcp-server'
        tree = capture.tree(trace_id)
        assert isinstance(tree, SpanTree)
        assert tree.names() == [s.name for s in spans]
        lines = tree.lines()
        assert lines[2].startswith('   └─ tools/call perplexity_research') and lines[2].endswith('  [mcp-server]')
    finally:
        capture.close()


def test_a_capture_without_the_receiver_says_how_to_get_one() -> None:
    capture = SpanCapture()
    assert capture.endpoint is None
    with pytest.raises(RuntimeError, match='receive_otlp=True'):
        capture.child_env('mcp')
    capture.close()  # nothing to stop: no error
