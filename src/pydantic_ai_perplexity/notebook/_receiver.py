"""An OTLP/HTTP receiver on loopback: the spans other processes export (an MCP server started over stdio) come in
as `SpanRecord`s, handed to a callback."""

from __future__ import annotations

import gzip
import threading
import zlib
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from ._records import SpanRecord

__all__ = ('OtlpReceiver', 'spans_from_otlp')


def _any_value(value: Any) -> Any:
    kind = value.WhichOneof('value')
    if kind == 'array_value':
        return [_any_value(v) for v in value.array_value.values]
    if kind == 'kvlist_value':
        return {kv.key: _any_value(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, kind) if kind else None


_OTLP_KINDS = {0: 'UNSPECIFIED', 1: 'INTERNAL', 2: 'SERVER', 3: 'CLIENT', 4: 'PRODUCER', 5: 'CONSUMER'}


def spans_from_otlp(path: str, body: bytes) -> list[SpanRecord]:
    """The spans of one OTLP/HTTP export (protobuf); none for an export of anything but traces."""
    if not path.endswith('/v1/traces'):
        return []
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    request = ExportTraceServiceRequest.FromString(body)
    received: list[SpanRecord] = []
    for resource_spans in request.resource_spans:
        resource = {kv.key: _any_value(kv.value) for kv in resource_spans.resource.attributes}
        received.extend(
            SpanRecord(
                name=span.name,
                trace_id=span.trace_id.hex(),
                span_id=span.span_id.hex(),
                parent_id=span.parent_span_id.hex() or None,
                start_ns=span.start_time_unix_nano,
                end_ns=span.end_time_unix_nano,
                service=str(resource.get('service.name', '')),
                kind=_OTLP_KINDS.get(span.kind, 'UNSPECIFIED'),
                attributes={kv.key: _any_value(kv.value) for kv in span.attributes},
                remote=True,
                events=[(e.name, e.time_unix_nano) for e in span.events],
            )
            for scope_spans in resource_spans.scope_spans
            for span in scope_spans.spans
        )
    return received


class OtlpReceiver:
    """Serves OTLP/HTTP on a free loopback port (`endpoint`) in a daemon thread; each export's spans go to `deliver`."""

    def __init__(self, deliver: Callable[[list[SpanRecord]], None]) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get('content-length') or 0))
                encoding = (self.headers.get('content-encoding') or '').lower()
                if encoding == 'gzip':
                    body = gzip.decompress(body)
                elif encoding == 'deflate':
                    body = zlib.decompress(body)
                deliver(spans_from_otlp(self.path, body))
                self.send_response(200)
                self.send_header('content-type', 'application/x-protobuf')
                self.send_header('content-length', '0')
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(('127.0.0.1', 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, name='pplx-otlp-receiver', daemon=True).start()
        self.endpoint = f'http://127.0.0.1:{self._server.server_address[1]}'

    def close(self) -> None:
        """Stop serving and free the port."""
        self._server.shutdown()
        self._server.server_close()
