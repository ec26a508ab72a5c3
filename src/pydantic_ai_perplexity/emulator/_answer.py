"""Deterministic answers: text with `[n]` markers from the sources found, and JSON instances of a schema."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

__all__ = ('Cited', 'compose_answer', 'schema_instance', 'tokens', 'truncate_to_tokens')

#: What the offline corpus is about, named when it has nothing on a question.
CORPUS_TOPICS = (
    'the EU AI Act, Python (releases, typing and async), renewable energy and solar cells, space exploration, '
    'nutrition, sleep and jet lag, quantum computing, electric vehicles and batteries, the Turing Award and AI agents'
)
#: Characters per token in the emulator's token estimate.
_CHARS_PER_TOKEN = 4
#: Bounds on what a (possibly hostile) schema can make the emulator generate.
_MAX_ITEMS = 100
_MAX_STRING = 10_000


def tokens(text: str) -> int:
    """The emulator's token estimate for a text: one token per four characters, at least one."""
    return max(1, math.ceil(len(text) / _CHARS_PER_TOKEN))


def truncate_to_tokens(text: str, limit: int) -> str:
    """`text` cut to about `limit` tokens, at a word boundary when there is one."""
    budget = limit * _CHARS_PER_TOKEN
    if len(text) <= budget:
        return text
    cut = text[:budget]
    space = cut.rfind(' ')
    return cut[:space] if space > budget // 2 else cut


class Cited:
    """One source the answer cites: its result id and the sentences taken from it."""

    __slots__ = ('id', 'sentences', 'title')

    def __init__(self, id: int, title: str, sentences: list[str]) -> None:
        """Remember the marker id, the page title and the sentences to use."""
        self.id = id
        self.title = title
        self.sentences = sentences


def _topic(query: str) -> str:
    topic = ' '.join(query.split())
    topic = topic.rstrip('?.! ')
    return topic if len(topic) <= 90 else topic[:87].rstrip() + '…'


def compose_answer(
    query: str,
    cited: list[Cited],
    *,
    injected: Cited | None = None,
    searched: bool = True,
    grouped: str | None = None,
) -> str:
    """The answer text: a lead line and one bullet per cited source ending in its `[n]` marker.

    When the searches found nothing on the question, the answer says so plainly, with no marker and no filler.
    With `grouped` (`plain` or `web`), the first two sources share one bullet and one grouped marker,
    `[a, b]` or `[web:a, web:b]`, as live answers sometimes write them.
    """
    topic = _topic(query) or 'your question'
    if not cited and injected is None:
        if searched:
            return (
                f'I found no sources on "{topic}": the searches returned nothing on this question, so I cannot '
                f'answer it from sources. (This offline corpus covers {CORPUS_TOPICS}.)'
            )
        return (
            f'No web sources were consulted for "{topic}". '
            'The emulator answers without searching when the request offers no search tool.'
        )
    lines = [f'Here is what the sources say about "{topic}":', '']
    if grouped and len(cited) >= 2:
        first, second, *cited = cited
        prefix = 'web:' if grouped == 'web' else ''
        marker = f'[{prefix}{first.id}, {prefix}{second.id}]'
        lines.append(f'- {" ".join(first.sentences + second.sentences)}{marker}')
    lines.extend(f'- {" ".join(source.sentences)}[{source.id}]' for source in cited)
    if injected is not None:
        lines.append(f'- A forum post titled "{injected.title}" makes claims no other source supports.[{injected.id}]')
    return '\n'.join(lines)


# ---------------------------------------------------------------------------------------------------------------
# Structured output


class _Filler:
    """Source of text for string fields: the answer's sentences in turn, and the first source URL for URL fields."""

    def __init__(self, answer: str, url: str) -> None:
        sentences = [s.strip(' -') for s in re.split(r'(?<=[.!?\]])\s+', answer) if s.strip(' -')]
        self._sentences = sentences or [answer or 'No answer.']
        self._next = 0
        self.answer = answer
        self.url = url

    def sentence(self) -> str:
        text = self._sentences[self._next % len(self._sentences)]
        self._next += 1
        return text


def _resolve(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    seen = 0
    while isinstance(ref := schema.get('$ref'), str) and seen < 32:
        target: Any = root
        for part in ref.removeprefix('#/').split('/'):
            target = target.get(part, {}) if isinstance(target, dict) else {}  # pyright: ignore[reportUnknownMemberType,reportUnknownVariableType]
        found: dict[str, Any] = target if isinstance(target, dict) else {}  # pyright: ignore[reportUnknownVariableType]
        merged: dict[str, Any] = {**found, **{k: v for k, v in schema.items() if k != '$ref'}}
        schema = merged
        seen += 1
    return schema


def _bound(schema: dict[str, Any], inclusive: str, exclusive: str) -> tuple[float | None, int]:
    """A number's bound (`inclusive` first, else `exclusive`) and 1 when only the exclusive one is given."""
    value = schema.get(inclusive, schema.get(exclusive))
    if not isinstance(value, int | float):
        return None, 0
    return value, 1 if exclusive in schema and inclusive not in schema else 0


def _number(schema: dict[str, Any], integer: bool) -> int | float:
    """A number within the schema's bounds: 1, or the lowest one allowed, or the highest when that is lower."""
    low, low_step = _bound(schema, 'minimum', 'exclusiveMinimum')
    high, high_step = _bound(schema, 'maximum', 'exclusiveMaximum')
    value: float = 1
    if low is not None:
        value = low + low_step
    if high is not None and value > high:
        value = high - high_step
    if integer:
        return math.ceil(value) if high is None or math.ceil(value) <= high else math.floor(value)
    return float(value)


#: The string a format asks for, whatever the field's name.
_FORMATTED = {'date-time': '2026-01-01T00:00:00Z', 'date': '2026-01-01', 'email': 'research@example.com'}


def _string_text(name: str, fmt: Any, fill: _Filler) -> str:
    """A string for a field: a URL for a link, the answer for an answer-like name, else a sentence."""
    if fmt in {'uri', 'url'} or 'url' in name.casefold() or 'link' in name.casefold():
        return fill.url
    if name.casefold() in {'answer', 'summary', 'text', 'content', 'body', 'response'}:
        return fill.answer
    return fill.sentence()


def _string(name: str, schema: dict[str, Any], fill: _Filler) -> str:
    """A string for a field, fitted to its `minLength` and `maxLength` (a formatted one as it is)."""
    fmt = schema.get('format')
    if isinstance(fmt, str) and fmt in _FORMATTED:
        return _FORMATTED[fmt]
    text = _string_text(name, fmt, fill)
    low = schema.get('minLength', 0)
    high = schema.get('maxLength')
    if isinstance(high, int) and len(text) > high:
        text = text[:high]
    if isinstance(low, int) and len(text) < low:
        text = text + 'x' * (min(low, _MAX_STRING) - len(text))
    return text


_MAX_DEPTH = 12
_NOTHING = object()


def _chosen(schema: dict[str, Any], root: dict[str, Any], fill: _Filler, name: str, depth: int) -> Any:
    """The value fixed by `const`, `enum`, `default` (below the root), `anyOf`/`oneOf` or `allOf`, else `_NOTHING`."""
    if 'const' in schema:
        return schema['const']
    enum = schema.get('enum')
    if isinstance(enum, list) and enum:
        return enum[0]  # pyright: ignore[reportUnknownVariableType]
    if 'default' in schema and depth > 0:
        return schema['default']
    return _combined(schema, root, fill, name, depth)


def _combined(schema: dict[str, Any], root: dict[str, Any], fill: _Filler, name: str, depth: int) -> Any:
    """The value of `anyOf`/`oneOf` (its first non-null option) or of `allOf`, else `_NOTHING`."""
    for key in ('anyOf', 'oneOf'):
        options = schema.get(key)
        if isinstance(options, list) and options:
            typed: list[Any] = [o for o in options if not (isinstance(o, dict) and o.get('type') == 'null')]  # pyright: ignore[reportUnknownVariableType,reportUnknownMemberType]
            return _instance((typed or options)[0], root, fill, name, depth + 1)
    return _all_of(schema, root, fill, name, depth)


def _all_of(schema: dict[str, Any], root: dict[str, Any], fill: _Filler, name: str, depth: int) -> Any:
    """The value of `allOf`, its parts (and the schema's other keys) merged, else `_NOTHING`."""
    all_of = schema.get('allOf')
    if isinstance(all_of, list) and all_of:
        merged: dict[str, Any] = {}
        for part in all_of:  # pyright: ignore[reportUnknownVariableType]
            merged.update(_resolve(part, root) if isinstance(part, dict) else {})  # pyright: ignore[reportUnknownArgumentType]
        merged.update({k: v for k, v in schema.items() if k != 'allOf'})
        return _instance(merged, root, fill, name, depth + 1)
    return _NOTHING


def _kind(schema: dict[str, Any]) -> str:
    """The JSON type to produce: the first non-null of `type`, else guessed from `properties`/`items`."""
    kind = schema.get('type')
    if isinstance(kind, list):
        kinds: list[Any] = [k for k in kind if k != 'null']  # pyright: ignore[reportUnknownVariableType]
        kind = kinds[0] if kinds else 'null'
    if kind is None:
        return 'object' if 'properties' in schema else 'array' if 'items' in schema else 'string'
    return str(kind)


def _object(schema: dict[str, Any], root: dict[str, Any], fill: _Filler, name: str, depth: int) -> Any:
    props: dict[str, Any] = schema.get('properties') or {}
    required: list[Any] = schema.get('required') or []
    if depth >= _MAX_DEPTH:
        return {}
    return {key: _instance(props.get(key, {}), root, fill, key, depth + 1) for key in required if isinstance(key, str)}


def _array(schema: dict[str, Any], root: dict[str, Any], fill: _Filler, name: str, depth: int) -> Any:
    count = max(1, schema.get('minItems', 1) if isinstance(schema.get('minItems'), int) else 1)
    if isinstance(schema.get('maxItems'), int):
        count = min(count, schema['maxItems'])
    count = min(count, _MAX_ITEMS)
    prefix = schema.get('prefixItems')
    if isinstance(prefix, list):
        return [_instance(p, root, fill, name, depth + 1) for p in prefix]  # pyright: ignore[reportUnknownVariableType]
    if depth >= _MAX_DEPTH:
        return []
    return [_instance(schema.get('items', {}), root, fill, name, depth + 1) for _ in range(count)]


_Maker = Callable[[dict[str, Any], dict[str, Any], _Filler, str, int], Any]
#: How each JSON type is produced (strings are the fallback, filled from the answer).
_MAKERS: dict[str, _Maker] = {
    'object': _object,
    'array': _array,
    'integer': lambda schema, root, fill, name, depth: _number(schema, integer=True),
    'number': lambda schema, root, fill, name, depth: _number(schema, integer=False),
    'boolean': lambda schema, root, fill, name, depth: True,
    'null': lambda schema, root, fill, name, depth: None,
}


def _instance(schema: Any, root: dict[str, Any], fill: _Filler, name: str, depth: int) -> Any:
    if not isinstance(schema, dict):
        return fill.sentence() if schema is True else None
    schema = _resolve(schema, root)  # pyright: ignore[reportUnknownArgumentType]
    chosen = _chosen(schema, root, fill, name, depth)
    if chosen is not _NOTHING:
        return chosen
    maker = _MAKERS.get(_kind(schema))
    if maker is None:
        return _string(name, schema, fill)
    return maker(schema, root, fill, name, depth)


def schema_instance(schema: dict[str, Any], *, answer: str, url: str) -> Any:
    """A minimal JSON instance of `schema`: required properties only, one array element, first enum value.

    String fields are filled from the answer's sentences (a field named like `answer`/`summary` gets the whole
    answer, URL-like fields get the first source's URL); numbers respect their bounds.
    """
    return _instance(schema, schema, _Filler(answer, url), 'answer', 0)
