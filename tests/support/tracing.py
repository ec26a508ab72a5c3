"""Projections of exported spans and metrics that are stable from run to run, for snapshots."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from logfire.testing import CaptureLogfire

SENTINEL_KEY = 'pplx-SENTINEL-0123456789abcdef-do-not-leak'

#: Attributes whose values change from run to run (times measured with the wall clock, random ids, and the rate
#: limit's remaining count: the emulator's bucket refills with the wall clock).
_VOLATILE = frozenset(
    {
        'perplexity.ratelimit.remaining',
        'perplexity.time_to_first_token_s',
        'perplexity.answer.time_to_first_token_s',
        'perplexity.retry.delay_s',
        'perplexity.duration_s',
        'perplexity.elapsed_s',
    }
)
#: Attributes of pydantic-ai's spans worth showing (the rest is messages, schemas and random ids).
_FOREIGN_KEPT = frozenset({'gen_ai.operation.name', 'gen_ai.tool.name', 'gen_ai.agent.name'})
#: Attributes of our spans that pydantic-ai's baggage adds, with random values.
_BAGGAGE = frozenset({'gen_ai.agent.call.id', 'gen_ai.conversation.id', 'gen_ai.agent.name'})


def _value(key: str, value: Any) -> Any:
    if key in _VOLATILE:
        return f'<{type(value).__name__}>'
    if key == 'perplexity.search.domains':  # one comma-separated string on the wire; a list reads better here
        return value.split(', ') if value else []
    if isinstance(value, str) and value.startswith('resp_'):
        return '<response_id>'
    if isinstance(value, tuple):
        return list(value)
    return value


def _ours(name: str) -> bool:
    return name.startswith('perplexity.')


def _kept(span_name: str, key: str) -> bool:
    if not _ours(span_name):
        return key in _FOREIGN_KEPT
    if key in _BAGGAGE:
        return False
    return key.startswith(('gen_ai.', 'perplexity.')) or key in ('error.type', 'operation.cost', 'http.request.method')


def _attributes(name: str, attributes: dict[str, Any]) -> dict[str, Any]:
    return {k: _value(k, v) for k, v in sorted(attributes.items()) if _kept(name, k)}


def span_tree(capfire: CaptureLogfire, *, attributes: bool = True) -> list[dict[str, Any]]:
    """Exported spans as a tree in start order: names, chosen attributes, events, links, children."""
    spans = capfire.exporter.exported_spans_as_dict()
    ids = {s['context']['span_id'] for s in spans}
    children: dict[int | None, list[dict[str, Any]]] = defaultdict(list)
    for span in sorted(spans, key=lambda s: s['start_time']):
        parent = span['parent']['span_id'] if span['parent'] and span['parent']['span_id'] in ids else None
        children[parent].append(span)

    def node(span: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {'name': span['name']}
        if attributes:
            attrs = _attributes(span['name'], span['attributes'])
            if attrs:
                out['attributes'] = attrs
        events = [
            {
                'name': e['name'],
                **({'attributes': _attributes(span['name'], e['attributes'])} if e.get('attributes') else {}),
            }
            for e in span.get('events', ())
            if e['name'] != 'exception'
        ]
        exceptions = [e['attributes']['exception.type'] for e in span.get('events', ()) if e['name'] == 'exception']
        if exceptions:
            out['exceptions'] = exceptions
        if events and _ours(span['name']):
            out['events'] = events
        if span.get('links'):
            out['links'] = [
                {'trace_id': link['context']['trace_id'], 'span_id': link['context']['span_id']}
                for link in span['links']
            ]
        kids = [node(c) for c in children[span['context']['span_id']]]
        if kids:
            out['children'] = kids
        return out

    return [node(s) for s in children[None]]


def find_span(capfire: CaptureLogfire, name: str) -> dict[str, Any]:
    """The one exported span called `name`."""
    [span] = [s for s in capfire.exporter.exported_spans_as_dict() if s['name'] == name]
    return span


def metric_points(capfire: CaptureLogfire, *, prefix: tuple[str, ...] = ('gen_ai.', 'operation.', 'perplexity.')):
    """Collected metrics of ours as `{name: {unit, points: [(attributes, count, sum)]}}`; sums of times dropped."""
    out: dict[str, Any] = {}
    for metric in capfire.get_collected_metrics():
        name = metric['name']
        if not name.startswith(prefix):
            continue
        points = []
        for point in metric['data']['data_points']:
            attrs = dict(sorted(point['attributes'].items()))
            if metric['unit'] == 's':
                points.append({'attributes': attrs, 'count': point['count']})
            else:
                points.append({'attributes': attrs, 'count': point['count'], 'sum': round(point['sum'], 6)})
        out[name] = {'unit': metric['unit'], 'points': points}
    return out
