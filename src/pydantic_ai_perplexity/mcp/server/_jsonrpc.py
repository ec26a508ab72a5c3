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


_DECODER = json.JSONDecoder()
_SPACE = re.compile(r'[ \t\n\r]*')
_CLOSE = {'{': '}', '[': ']'}


def shallow(text: str) -> Any:
    """The value of valid JSON `text`, read without recursion (for text too deep for `json.loads`), keeping only
    what a request's envelope needs: a top-level object's members, with nested objects and arrays left empty (a
    top-level array comes back empty). ValueError if `text` is not valid JSON.

    The containers are walked with a stack of their own; every key and scalar is read by the standard library's
    decoder (`raw_decode`), so strings, numbers and literals are exactly what `json.loads` accepts.
    """
    top, position, opened = _value(text, _skip(text, 0))
    stack = [opened] if opened else []  # the open containers' openers
    read = [False] * len(stack)  # whether each has a member yet
    while stack:
        position = _skip(text, position)
        if text[position : position + 1] == _CLOSE[stack[-1]]:  # never right after a comma: read with its member
            stack.pop()
            read.pop()
            position += 1
            continue
        if read[-1]:
            position = _skip(text, _expect(text, position, ','))
        key = None
        if stack[-1] == '{':
            key, position = _key(text, position)
        value, position, opened = _value(text, position)
        read[-1] = True
        if len(stack) == 1 and key is not None and isinstance(top, dict):
            cast('dict[str, Any]', top)[key] = value
        if opened:
            stack.append(opened)
            read.append(False)
    if _skip(text, position) != len(text):
        raise ValueError('not JSON: text after the value')
    return cast(object, top)


def _skip(text: str, position: int) -> int:
    match = _SPACE.match(text, position)
    return match.end() if match else position


def _expect(text: str, position: int, char: str) -> int:
    if text[position : position + 1] != char:
        raise ValueError(f'not JSON: {char!r} was expected at {position}')
    return position + 1


def _key(text: str, position: int) -> tuple[str, int]:
    """A member's key and the position of its value."""
    if text[position : position + 1] != '"':
        raise ValueError(f'not JSON: a key was expected at {position}')
    key, position = _DECODER.raw_decode(text, position)
    return cast(str, key), _skip(text, _expect(text, _skip(text, position), ':'))


def _value(text: str, position: int) -> tuple[Any, int, str | None]:
    """A value: a scalar read whole, or a container opened (empty here; its members are read by `shallow`)."""
    char = text[position : position + 1]
    if char in ('{', '['):
        return ({} if char == '{' else []), position + 1, char
    value, position = _DECODER.raw_decode(text, position)
    return value, position, None


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
