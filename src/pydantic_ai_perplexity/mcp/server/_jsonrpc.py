"""JSON-RPC envelopes both transports check before or after the MCP SDK: a request with a readable id is answered
with that id, even when the SDK cannot validate the rest of it (it would answer with id null, and the client would
wait for its answer forever).

Standard library only: the stdio front uses it before the SDK has loaded.
"""

from __future__ import annotations

import json
import re
from typing import Any, cast

__all__ = (
    'INVALID_PARAMS',
    'INVALID_REQUEST',
    'PARSE_ERROR',
    'TooDeep',
    'dumps',
    'error',
    'loads',
    'readable_id',
    'refusal_for',
    'shallow',
)

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602


def loads(data: bytes | str) -> Any:
    """The JSON value of `data` (`NaN` and `Infinity` read as numbers, as the SDK's parser does); ValueError if none,
    `TooDeep` (with the top-level members) for valid JSON nested deeper than the interpreter's stack."""
    try:
        return json.loads(data)
    except RecursionError:
        text = data.decode() if isinstance(data, bytes) else data
        raise TooDeep(shallow(text)) from None


class TooDeep(ValueError):
    """Valid JSON nested deeper than the parser's stack; `members` are its top-level members (nested values empty)."""

    def __init__(self, members: Any) -> None:
        super().__init__('nested too deeply')
        self.members = members


_TOKEN = re.compile(
    r'\s*(?:(?P<punct>[{}\[\]:,])|(?P<string>"(?:[^"\\\x00-\x1f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*")'
    r'|(?P<scalar>-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?|true|false|null|NaN|-?Infinity))'
)


def shallow(text: str) -> Any:
    """The value of valid JSON `text`, read without recursion (for text too deep for `json.loads`), keeping only
    what a request's envelope needs: a top-level object's members, with nested objects and arrays left empty (a
    top-level array comes back empty). ValueError if `text` is not valid JSON."""
    stack: list[str] = []  # the open containers, '{' or '['
    top: Any = None
    key: str | None = None
    expect = 'value'  # value, value_or_close, key, key_or_close, colon, next (a comma or a close), done
    position = 0
    while True:
        match = _TOKEN.match(text, position)
        if match is None:
            if expect == 'done' and not text[position:].strip():
                return cast(object, top)
            raise ValueError('not JSON')
        position = match.end()
        punct, string, scalar = match.group('punct'), match.group('string'), match.group('scalar')
        if punct in ('}', ']') and expect in ('next', 'key_or_close' if punct == '}' else 'value_or_close'):
            if not stack or stack.pop() != ('{' if punct == '}' else '['):
                raise ValueError('not JSON: a close without its open')
            expect = 'next' if stack else 'done'
            continue
        if expect in ('key', 'key_or_close'):
            if string is None:
                raise ValueError('not JSON: a key was expected')
            key, expect = json.loads(string), 'colon'
            continue
        if expect == 'colon' or expect == 'next':
            if punct != (':' if expect == 'colon' else ','):
                raise ValueError('not JSON: a separator was expected')
            expect = 'value' if expect == 'colon' or stack[-1] == '[' else 'key'
            continue
        if expect == 'done':
            raise ValueError('not JSON: text after the value')
        if punct in ('{', '['):
            value: Any = {} if punct == '{' else []
            holder = len(stack)
            stack.append(punct)
            expect = 'key_or_close' if punct == '{' else 'value_or_close'
        elif string is not None or scalar is not None:
            value = json.loads(string if string is not None else scalar)
            holder = len(stack)
            expect = 'next' if stack else 'done'
        else:
            raise ValueError('not JSON: a value was expected')
        if holder == 0:
            top = value
        elif holder == 1 and isinstance(top, dict) and key is not None:
            cast('dict[str, Any]', top)[key] = value


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
