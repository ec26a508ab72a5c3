"""The envelope reader both transports use when the MCP SDK cannot read a request: `shallow` agrees with `json`."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pydantic_ai_perplexity.mcp.server import _jsonrpc

values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=10,
)


def envelope(value: Any) -> Any:
    """What `shallow` keeps of `value`: a top-level object's members with nested containers emptied."""
    if isinstance(value, dict):
        return {k: type(v)() if isinstance(v, dict | list) else v for k, v in value.items()}
    return type(value)() if isinstance(value, list) else value


def same(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)  # NaN equals itself here


@settings(max_examples=300, database=None)
@given(value=values, indent=st.sampled_from([None, 0, 2]))
def test_shallow_reads_what_json_reads(value: Any, indent: int | None) -> None:
    assert same(_jsonrpc.shallow(json.dumps(value, indent=indent)), envelope(value))


@pytest.mark.slow
@settings(max_examples=300, database=None)
@given(value=values, cut=st.integers(0, 200), junk=st.sampled_from(['', ',', '}', ']', ':', '"', 'x', '{}']))
def test_shallow_refuses_what_json_refuses(value: Any, cut: int, junk: str) -> None:
    text = json.dumps(value)
    mangled = text[: cut % (len(text) + 1)] + junk
    try:
        json.loads(mangled)
    except ValueError:
        with pytest.raises(ValueError):
            _jsonrpc.shallow(mangled)
    else:
        assert same(_jsonrpc.shallow(mangled), envelope(json.loads(mangled)))


def test_a_request_nested_past_the_parsers_stack_still_has_a_readable_id() -> None:
    line = b'{"jsonrpc":"2.0","id":"deep","method":"ping","params":' + b'{"a":' * 50_000 + b'1' + b'}' * 50_001
    with pytest.raises(_jsonrpc.TooDeep) as caught:
        _jsonrpc.loads(line)
    assert _jsonrpc.readable_id(caught.value.members) == 'deep'
    assert _jsonrpc.refusal_for(caught.value.members) is None  # params is an object: refused for its depth only
    with pytest.raises(ValueError):
        _jsonrpc.loads(line[:-1])


@pytest.mark.parametrize(
    ('params', 'kind'), [(False, 'a boolean'), (1e30, 'a number'), ('x', 'a string'), ([1], 'an array')]
)
def test_params_that_is_not_an_object_is_refused_with_the_id(params: Any, kind: str) -> None:
    refusal = _jsonrpc.refusal_for({'jsonrpc': '2.0', 'id': 3, 'method': 'ping', 'params': params})
    assert refusal == {
        'jsonrpc': '2.0',
        'id': 3,
        'error': {'code': -32602, 'message': f'Invalid params: "params" must be an object (or left out), not {kind}.'},
    }
    assert _jsonrpc.refusal_for({'jsonrpc': '2.0', 'id': 3, 'method': 'ping', 'params': None}) is None
    assert _jsonrpc.refusal_for({'jsonrpc': '2.0', 'id': True, 'method': 'ping', 'params': params}) is None
