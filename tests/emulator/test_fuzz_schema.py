"""Schema-driven fuzzing of the emulator (bounded, a few seconds): bodies drawn from its own request schemas, and
junk around them, never get a 5xx, and every error has the shape its endpoint promises."""

from __future__ import annotations

from typing import Any

import httpx2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pydantic_ai_perplexity.emulator._validation import CreateRequest, SearchRequest

pytest.importorskip('hypothesis_jsonschema')
from hypothesis_jsonschema import from_schema

FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
#: Top-level create fields with flat schemas (the nested unions are covered by test_validation's cases; object
#: schemas such as `metadata` are left to JUNK, as hypothesis-jsonschema's object strategy needs an older Hypothesis).
FLAT_CREATE_FIELDS = (
    'model',
    'effort',
    'preset',
    'instructions',
    'max_steps',
    'max_output_tokens',
    'temperature',
    'top_p',
    'top_logprobs',
    'max_tool_calls',
    'truncation',
    'service_tier',
    'language_preference',
)
JUNK = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)


def _plain(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """A field's schema without annotations, with `$ref`s to `$defs` inlined one level."""
    if '$ref' in schema:
        schema = defs[schema['$ref'].rsplit('/', 1)[-1]]
    kept = {k: v for k, v in schema.items() if k not in ('default', 'description', 'title', 'examples')}
    if 'anyOf' in kept:
        kept['anyOf'] = [_plain(option, defs) for option in kept['anyOf']]
    return kept


def bodies(
    model: type[CreateRequest] | type[SearchRequest], fields: tuple[str, ...] | None, base: dict[str, Any]
) -> Any:
    schema = model.model_json_schema()
    defs = schema.get('$defs', {})
    names = fields or tuple(schema['properties'])
    drawn = {
        name: from_schema(_plain(schema['properties'][name], defs)) for name in names if name in schema['properties']
    }
    junk = st.dictionaries(st.sampled_from([*names, 'unknown_field']), JUNK, max_size=2)
    return st.tuples(st.fixed_dictionaries({}, optional=drawn), junk).map(lambda pair: {**base, **pair[0], **pair[1]})


def check_answer(response: httpx2.Response, *, fastapi: bool) -> None:
    assert response.status_code < 500, (response.status_code, response.text[:300])
    if response.status_code == 200:
        return
    data = response.json()
    if fastapi and response.status_code == 422:
        assert data['detail'] and all({'loc', 'msg', 'type'} <= set(entry) for entry in data['detail'])
    else:
        error = data['error']
        assert error['code'] == response.status_code and error['type'] and error['message']


@FUZZ
@given(body=bodies(CreateRequest, FLAT_CREATE_FIELDS, {'input': 'What is the EU AI Act?', 'effort': 'fast'}))
def test_create_bodies_never_get_a_5xx(client: httpx2.Client, body: dict[str, Any]):
    check_answer(client.post('/v1/agent', json=body), fastapi=False)


@FUZZ
@given(body=bodies(SearchRequest, None, {'query': 'heat pumps'}))
def test_search_bodies_never_get_a_5xx(client: httpx2.Client, body: dict[str, Any]):
    check_answer(client.post('/search', json=body), fastapi=True)
