"""A tiny OTLP/HTTP (protobuf) collector on loopback, for tests whose spans come from another process."""

from __future__ import annotations

import gzip
import threading
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue


@dataclass
class CollectedSpan:
    """One received span, with ids as hex and attributes decoded."""

    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    service: str
    attributes: dict[str, Any]
    links: list[tuple[str, str]]
    events: list[tuple[str, dict[str, Any]]]


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof('value')
    if kind == 'array_value':
        return [_value(v) for v in value.array_value.values]
    if kind == 'kvlist_value':
        return {kv.key: _value(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, kind) if kind else None


class Collector:
    """Receives `/v1/traces` and `/v1/metrics`; keeps the decoded spans and the raw bodies."""

    def __init__(self) -> None:
        self.spans: list[CollectedSpan] = []
        self.metric_requests: list[ExportMetricsServiceRequest] = []
        self.raw: list[bytes] = []
        self._lock = threading.Lock()

    def receive(self, path: str, body: bytes) -> None:
        with self._lock:
            self.raw.append(body)
            if path.endswith('/v1/traces'):
                request = ExportTraceServiceRequest.FromString(body)
                for resource_spans in request.resource_spans:
                    resource = {kv.key: _value(kv.value) for kv in resource_spans.resource.attributes}
                    for scope_spans in resource_spans.scope_spans:
                        for span in scope_spans.spans:
                            self.spans.append(
                                CollectedSpan(
                                    name=span.name,
                                    trace_id=span.trace_id.hex(),
                                    span_id=span.span_id.hex(),
                                    parent_span_id=span.parent_span_id.hex(),
                                    service=str(resource.get('service.name', '')),
                                    attributes={kv.key: _value(kv.value) for kv in span.attributes},
                                    links=[(link.trace_id.hex(), link.span_id.hex()) for link in span.links],
                                    events=[
                                        (e.name, {kv.key: _value(kv.value) for kv in e.attributes}) for e in span.events
                                    ],
                                )
                            )
            elif path.endswith('/v1/metrics'):
                self.metric_requests.append(ExportMetricsServiceRequest.FromString(body))

    def metric_names(self) -> set[str]:
        with self._lock:
            return {
                metric.name
                for request in self.metric_requests
                for resource_metrics in request.resource_metrics
                for scope_metrics in resource_metrics.scope_metrics
                for metric in scope_metrics.metrics
            }

    def named(self, name: str) -> list[CollectedSpan]:
        with self._lock:
            return [s for s in self.spans if s.name == name]


@contextmanager
def otlp_collector() -> Iterator[tuple[Collector, str]]:
    """A running collector and its endpoint (for `OTEL_EXPORTER_OTLP_ENDPOINT`)."""
    collector = Collector()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get('content-length') or 0))
            encoding = (self.headers.get('content-encoding') or '').lower()
            if encoding == 'gzip':
                body = gzip.decompress(body)
            elif encoding == 'deflate':
                body = zlib.decompress(body)
            collector.receive(self.path, body)
            self.send_response(200)
            self.send_header('content-type', 'application/x-protobuf')
            self.send_header('content-length', '0')
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(('127.0.0.1', 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield collector, f'http://127.0.0.1:{server.server_address[1]}'
    finally:
        server.shutdown()
        server.server_close()
