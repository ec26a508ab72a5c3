"""Fault directives: `[[emulate: 429x2, drop@5, ...]]` in the query text, or queued from code on a `FaultPlan`.

Directives travel inside the query so they work through every layer above the emulator (client, toolset, MCP
server, CLI, notebooks). The table of directives and their exact semantics is in `docs/emulator.md`.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Literal, TypeVar

from ._errors import ApiError

__all__ = ('CreateDecision', 'Directives', 'FaultPlan', 'StatusFault', 'parse_directives', 'parse_spec')

_BLOCK = re.compile(r'\[\[\s*emulate\s*:(.*?)\]\]', re.IGNORECASE | re.DOTALL)
_STATUS = re.compile(r'^(429|500|502|503|504)(?:x(\d+))?(?:@(create|retrieve))?$')
_NUMBER = r'(\d+(?:\.\d+)?)'
_KNOWN = (
    'NNNxN (429, 500, 502, 503, 504; @retrieve), retry_after=S, drop@S, slow=T, malformed, fail, incomplete, '
    'duration=N, inject, mcp, grouped, grouped=web, unavailable'
)

#: The `type` of the error envelope for each injectable status.
STATUS_TYPES = {
    429: 'request_rate_limit_exceeded',
    500: 'internal_error',
    502: 'bad_gateway',
    503: 'service_unavailable',
    504: 'gateway_timeout',
}


@dataclass(frozen=True, slots=True)
class StatusFault:
    """`NNNxN`: the first `count` requests in `scope` answer with `status` instead of their normal answer."""

    status: int
    count: int
    scope: Literal['create', 'retrieve'] = 'create'

    @property
    def token(self) -> str:
        """The directive as written canonically, e.g. `500x2@retrieve`."""
        return f'{self.status}x{self.count}' + ('@retrieve' if self.scope == 'retrieve' else '')


@dataclass(frozen=True, slots=True)
class Directives:
    """A parsed set of directives (the union of every block in a text, or of a queued entry)."""

    status_faults: tuple[StatusFault, ...] = ()
    retry_after: float = 0.0
    drop_at: int | None = None
    slow: float | None = None
    malformed: bool = False
    fail: bool = False
    incomplete: bool = False
    duration: float | None = None
    inject: bool = False
    mcp: bool = False
    grouped: Literal['plain', 'web'] | None = None  # cite two sources in one marker: `[a, b]` or `[web:a, web:b]`
    unavailable: bool = False  # the first of the request's `models` is down: the next one answers

    @property
    def create_faults(self) -> tuple[StatusFault, ...]:
        """Status faults answered to create requests."""
        return tuple(f for f in self.status_faults if f.scope == 'create')

    @property
    def retrieve_faults(self) -> tuple[StatusFault, ...]:
        """Status faults answered to retrieves of the run."""
        return tuple(f for f in self.status_faults if f.scope == 'retrieve')

    def merge(self, other: Directives) -> Directives:
        """Both sets at once; where both set a value, `other` wins."""
        return Directives(
            status_faults=self.status_faults + other.status_faults,
            retry_after=other.retry_after or self.retry_after,
            drop_at=_set_later(self.drop_at, other.drop_at),
            slow=_set_later(self.slow, other.slow),
            malformed=self.malformed or other.malformed,
            fail=self.fail or other.fail,
            incomplete=self.incomplete or other.incomplete,
            duration=_set_later(self.duration, other.duration),
            inject=self.inject or other.inject,
            mcp=self.mcp or other.mcp,
            grouped=other.grouped or self.grouped,
            unavailable=self.unavailable or other.unavailable,
        )

    def has_run_effects(self) -> bool:
        """Whether anything but create-status faults is set (something must still apply to a later create)."""
        return replace(self, status_faults=self.retrieve_faults, retry_after=0.0) != Directives()


_T = TypeVar('_T')


def _set_later(earlier: _T | None, later: _T | None) -> _T | None:
    """`later` where it is set, else `earlier`."""
    return later if later is not None else earlier


def _parse_token(token: str, into: dict[str, object], faults: list[StatusFault]) -> None:
    """One directive of a `[[emulate: ...]]` block, into `into` (or `faults`); an unknown one is a 400."""
    word = token.strip().casefold().replace(' ', '')
    if not word:
        return
    if m := _STATUS.match(word):
        status, count, scope = int(m[1]), int(m[2] or 1), m[3] or 'create'
        faults.append(StatusFault(status, count, 'retrieve' if scope == 'retrieve' else 'create'))
        return
    if not _parse_flag(word, into) and not _parse_value(word, into):
        raise ApiError(
            400,
            'invalid_request',
            f'unknown emulator directive "{token.strip()}" in [[emulate: ...]]; known directives: {_KNOWN}',
            param='input',
        )


def _parse_flag(word: str, into: dict[str, object]) -> bool:
    """A directive without a value (`fail`, `grouped=web` ...), into `into`; whether `word` was one."""
    if word in {'malformed', 'fail', 'incomplete', 'inject', 'mcp', 'unavailable'}:
        into[word] = True
        return True
    if word in {'grouped', 'grouped=plain', 'grouped=web'}:
        into['grouped'] = 'web' if word.endswith('=web') else 'plain'
        return True
    return False


def _parse_value(word: str, into: dict[str, object]) -> bool:
    """A directive with a number (`drop@3`, `slow=2s` ...), into `into`; whether `word` was one."""
    for name, pattern, key, cast in (
        ('drop', r'^drop@(\d+)$', 'drop_at', int),
        ('slow', rf'^slow={_NUMBER}s?$', 'slow', float),
        ('duration', rf'^duration={_NUMBER}s?$', 'duration', float),
        ('retry_after', rf'^retry_after={_NUMBER}s?$', 'retry_after', float),
    ):
        if word.startswith(name):
            if m := re.match(pattern, word):
                into[key] = cast(m[1])
                return True
            break
    return False


def parse_spec(spec: str) -> Directives:
    """Parse a comma-separated directive list (`'429x2, drop@5'`); an unknown directive raises `ApiError`."""
    values: dict[str, object] = {}
    faults: list[StatusFault] = []
    for token in spec.split(','):
        _parse_token(token, values, faults)
    return Directives(status_faults=tuple(faults), **values)  # pyright: ignore[reportArgumentType]


def parse_directives(text: str) -> tuple[str, Directives]:
    """Remove every `[[emulate: ...]]` block from `text`; return the cleaned text and the directives found."""
    directives = Directives()
    for block in _BLOCK.findall(text):
        directives = directives.merge(parse_spec(block))
    cleaned = ' '.join(_BLOCK.sub(' ', text).split()) if directives != Directives() or _BLOCK.search(text) else text
    return cleaned, directives


@dataclass(slots=True)
class _Entry:
    directives: Directives
    match: str | None
    remaining: list[int] = field(default_factory=list[int])


@dataclass(frozen=True, slots=True)
class CreateDecision:
    """What one create request gets: a status failure (no run), or the directives its run follows."""

    status: StatusFault | None
    directives: Directives


class FaultPlan:
    """Faults queued from code for upcoming creates: the programmatic twin of `[[emulate: ...]]` in the query.

    `add('429x2')` makes the next two creates answer 429 (then lets the one after through); `add('fail',
    match='some text')` makes the next create whose input contains `some text` fail. Entries are used up in
    the order they were added. Thread-safe: tests add faults while the server thread serves.
    """

    def __init__(self, *directives: str) -> None:
        """Start with the given directive specs queued (each like `'429x2, drop@5'`)."""
        self._lock = threading.Lock()
        self._entries: list[_Entry] = []
        self._counts: dict[tuple[str, str], int] = {}
        for spec in directives:
            self.add(spec)

    @classmethod
    def coerce(cls, faults: FaultPlan | str | Iterable[str] | None) -> FaultPlan:
        """A `FaultPlan` from a plan, one spec string, several spec strings, or nothing."""
        if isinstance(faults, FaultPlan):
            return faults
        if faults is None:
            return cls()
        if isinstance(faults, str):
            return cls(faults)
        return cls(*faults)

    def add(self, directives: str, *, match: str | None = None) -> None:
        """Queue directives (`'429x2'`, `'[[emulate: fail]]'`) for the next create, or the next one matching `match`.

        Raises:
            ValueError: a directive is unknown (a typo must not silently do nothing).
        """
        blocks = _BLOCK.findall(directives)
        try:
            parsed = Directives()
            for spec in blocks or [directives]:
                parsed = parsed.merge(parse_spec(spec))
        except ApiError as exc:
            raise ValueError(exc.message) from None
        entry = _Entry(parsed, match, [f.count for f in parsed.create_faults])
        with self._lock:
            self._entries.append(entry)

    def clear(self) -> None:
        """Drop every queued entry and forget how often in-text directives have fired."""
        with self._lock:
            self._entries.clear()
            self._counts.clear()

    def __len__(self) -> int:
        """How many queued entries are still waiting."""
        with self._lock:
            return len(self._entries)

    def decide_create(self, text: str, in_text: Directives) -> CreateDecision:
        """Decide a create request's fate from its input text's directives and the queued entries."""
        with self._lock:
            entry = next((e for e in self._entries if e.match is None or e.match in text), None)
            merged = in_text.merge(entry.directives) if entry is not None else in_text
            fault = self._count_in_text(text, in_text)
            if fault is None and entry is not None:
                fault = self._use_entry(entry)
            return CreateDecision(fault, merged)

    def _count_in_text(self, key_text: str, in_text: Directives) -> StatusFault | None:
        """The first in-text status fault that has fired fewer times than its count for this text (counted now)."""
        for fault in in_text.create_faults:
            key = (key_text, fault.token)
            seen = self._counts.get(key, 0)
            if seen < fault.count:
                self._counts[key] = seen + 1
                return fault
        return None

    def _use_entry(self, entry: _Entry) -> StatusFault | None:
        """The queued entry's next status fault (used up now); the entry leaves the queue once nothing of it is left."""
        for i, fault in enumerate(entry.directives.create_faults):
            if entry.remaining[i] > 0:
                entry.remaining[i] -= 1
                if not any(entry.remaining) and not entry.directives.has_run_effects():
                    self._entries.remove(entry)
                return fault
        self._entries.remove(entry)
        return None

    def decide_search(self, text: str, in_text: Directives) -> StatusFault | None:
        """The status failure a `POST /search` gets from its query's directives, if any (queued entries don't apply)."""
        with self._lock:
            return self._count_in_text('search:' + text, in_text)
