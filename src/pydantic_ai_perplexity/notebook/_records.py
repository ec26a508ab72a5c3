"""A finished span as the notebook shows it, whether this process's (from the OpenTelemetry SDK) or another's."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

__all__ = ('SpanRecord', 'from_sdk')


@dataclass
class SpanRecord:
    """One finished span, from this process or another: names, ids (hex), times (ns), service, attributes."""

    name: str
    trace_id: str
    span_id: str
    parent_id: str | None
    start_ns: int
    end_ns: int
    service: str
    kind: str
    attributes: dict[str, Any] = field(default_factory=dict[str, Any])
    remote: bool = False
    #: Span events as `(name, time_ns)`: the research steps, when steps are recorded as events.
    events: list[tuple[str, int]] = field(default_factory=list[tuple[str, int]])

    @property
    def duration_s(self) -> float:
        """How long the span lasted."""
        return max(self.end_ns - self.start_ns, 0) / 1e9


def from_sdk(span: ReadableSpan) -> SpanRecord:
    """A span this process finished, as a record."""
    context = span.get_span_context()
    parent = span.parent
    resource = span.resource.attributes
    return SpanRecord(
        name=span.name,
        trace_id=format(context.trace_id if context else 0, '032x'),
        span_id=format(context.span_id if context else 0, '016x'),
        parent_id=format(parent.span_id, '016x') if parent is not None else None,
        start_ns=span.start_time or 0,
        end_ns=span.end_time or 0,
        service=str(resource.get('service.name', '')),
        kind=span.kind.name,
        attributes=dict(span.attributes or {}),
        events=[(e.name, e.timestamp) for e in span.events],
    )
