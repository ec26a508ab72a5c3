"""JSON-RPC envelopes both transports check before or after the MCP SDK: a request with a readable id is answered
with that id, even when the SDK cannot validate the rest of it (it would answer with id null, and the client would
wait for its answer forever).

Standard library only: the stdio front uses it before the SDK has loaded.
"""

from __future__ import annotations

import json
from typing import Any, cast

__all__ = ('INVALID_PARAMS', 'INVALID_REQUEST', 'PARSE_ERROR', 'dumps', 'error', 'loads', 'readable_id', 'refusal_for')

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602


def loads(data: bytes | str) -> Any:
    """The JSON value of `data` (`NaN` and `Infinity` read as numbers, as the SDK's parser does); ValueError if none."""
    try:
        return json.loads(data)
    except RecursionError:  # nesting deeper than the interpreter's stack
        raise ValueError('nested too deeply') from None


def readable_id(message: Any) -> int | str | None:
    """The id of a JSON-RPC request (`jsonrpc` "2.0", a string `method`, an integer or string `id`), else None."""
    if not isinstance(message, dict):
        return None
    fields = cast('dict[str, Any]', message)
    request_id = fields.get('id')
    if fields.get('jsonrpc') != '2.0' or not isinstance(fields.get('method'), str):
        return None
    if isinstance(request_id, bool) or not isinstance(request_id, int | str):
        return None
    return request_id


def refusal_for(message: Any) -> dict[str, Any] | None:
    """The error for a request with a readable id whose envelope is wrong in a way the SDK answers with id null."""
    request_id = readable_id(message)
    if request_id is None:
        return None
    fields = cast('dict[str, Any]', message)
    params = fields.get('params')
    if params is not None and not isinstance(params, dict):
        got = _KINDS.get(type(cast(object, params)), 'something else')
        message = f'Invalid params: "params" must be an object (or left out), not {got}.'
        return error(request_id, INVALID_PARAMS, message)
    return None


_KINDS: dict[type, str] = {bool: 'a boolean', int: 'a number', float: 'a number', str: 'a string', list: 'an array'}


def error(request_id: int | str | None, code: int, message: str) -> dict[str, Any]:
    """A JSON-RPC error response."""
    return {'jsonrpc': '2.0', 'id': request_id, 'error': {'code': code, 'message': message}}


def dumps(message: dict[str, Any]) -> bytes:
    """One frame, ASCII-safe: an id carrying a lone surrogate is escaped rather than unencodable."""
    return json.dumps(message, separators=(',', ':'), ensure_ascii=True).encode()
