"""Named bearer tokens for a shared HTTP server: who is calling, from the environment or a file, revocable live.

Sources, merged (each name and each token may appear once across them):

- `PERPLEXITY_MCP_TOKEN` (or `--token`): one token, named `default`.
- `PERPLEXITY_MCP_TOKENS`: `name:token` pairs separated by commas, e.g. `alice:tok1,bob:tok2`.
- `PERPLEXITY_MCP_TOKENS_FILE` (or `--tokens-file`): a JSON object `{"alice": "tok1"}`, or `name:token` lines
  (blank lines and `#` comments ignored). The file is checked on every request and read again when its
  modification time, size or inode changes, so a token is added or revoked by editing (or atomically replacing)
  the file, without a restart; the other tokens are not affected. A file that no longer parses is reported in the
  log and the last good contents stay in force until it is fixed; a deleted file revokes every token it held.

**Who sees which runs.** With named tokens, `perplexity_research_list` shows a caller only the runs its own token
started, unless the operator sets `PERPLEXITY_MCP_SHARED_LIST=1`; then every caller's runs are listed, and the
questions other callers asked are spotlighted as untrusted text, with their caller named. Every other way to a run
(its result, its cancel, its resource, its task) reaches only the caller's own runs, whatever the list shows
(`_scope.py`).

**Strength.** A server reachable from other machines (bound off loopback) starts only with at least one token, and
every token it accepts there is at least `MIN_TOKEN_CHARS` (16) characters long with at least `MIN_DISTINCT_CHARS`
(8) different characters (`openssl rand -hex 32` or `python -c "import secrets; print(secrets.token_urlsafe(32))"`
make good ones); the placeholders of `deploy/mcp-tokens.example` are refused too. A tokens file changed later to
hold a weaker token is refused like a file that does not parse.

Only SHA-256 digests of the tokens are kept. A presented token is hashed and compared with every digest with
`hmac.compare_digest`, without stopping at a match, so the time taken tells nothing about which token (or which
part of it) matched. The name of the matching token is the caller, recorded on every run it starts.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

from ..._base.env import ENV
from ..._domain.settings import mcp_shared_list, variable

__all__ = (
    'CALLER_SCOPE_KEY',
    'DEFAULT_NAME',
    'MIN_DISTINCT_CHARS',
    'MIN_TOKEN_CHARS',
    'SHARED_LIST_ENV',
    'TOKENS_ENV',
    'TOKENS_FILE_ENV',
    'TOKEN_ENV',
    'TokenConfigError',
    'Tokens',
    'is_weak',
    'parse_tokens',
    'shared_list',
)

_log = logging.getLogger('pydantic_ai_perplexity.mcp')

TOKEN_ENV = ENV.MCP_TOKEN
TOKENS_ENV = ENV.MCP_TOKENS
TOKENS_FILE_ENV = ENV.MCP_TOKENS_FILE
#: The name of the single `PERPLEXITY_MCP_TOKEN`.
DEFAULT_NAME = 'default'
#: Where the HTTP front puts the caller's name in the ASGI scope, for the tools to read.
CALLER_SCOPE_KEY = 'pydantic_ai_perplexity.caller'
#: `1` (or true, yes, on): every token holder's `perplexity_research_list` shows every caller's runs.
SHARED_LIST_ENV = ENV.MCP_SHARED_LIST

_NAME = re.compile(r'^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$')
#: Off loopback, every token is at least this long...
MIN_TOKEN_CHARS = 16
#: ... and has at least this many different characters (so `aaaaaaaaaaaaaaaa` is refused).
MIN_DISTINCT_CHARS = 8
_PLACEHOLDER = 'replace-with-'
STRENGTH_RULE = (
    f'at least {MIN_TOKEN_CHARS} characters with {MIN_DISTINCT_CHARS} different ones, e.g. `openssl rand -hex 32`'
)


def shared_list() -> bool:
    """Whether the operator opted into a shared run list (`PERPLEXITY_MCP_SHARED_LIST`); by default a named caller
    lists only its own runs."""
    return mcp_shared_list()


def is_weak(token: str) -> bool:
    """Whether `token` is too easy to guess to protect a server reachable from other machines (too short, too few
    different characters, or a placeholder of `deploy/mcp-tokens.example` left in place)."""
    placeholder = token.lower().startswith(_PLACEHOLDER)
    return placeholder or len(token) < MIN_TOKEN_CHARS or len(set(token)) < MIN_DISTINCT_CHARS


class TokenConfigError(ValueError):
    """The tokens are misconfigured; the message names the source and the entry, never a token."""


def _digest(token: str | bytes) -> bytes:
    return hashlib.sha256(token.encode() if isinstance(token, str) else token).digest()


def _check(name: str, token: str, source: str, where: str) -> None:
    if not _NAME.match(name):
        raise TokenConfigError(
            f'{source}: {where} has the name {name[:70]!r}; a name is 1-64 letters, digits, "_", ".", "@" or "-", '
            'starting with a letter or digit.'
        )
    if not token or any(c.isspace() for c in token):
        raise TokenConfigError(f'{source}: the token of {name!r} ({where}) is empty or contains whitespace.')


def parse_tokens(text: str, source: str) -> dict[str, str]:
    """Name to token, from a JSON object or `name:token` lines; raises `TokenConfigError` naming the bad entry."""
    pairs: list[tuple[str, str, str]] = []
    if text.lstrip().startswith('{'):
        try:
            data: Any = json.loads(text)
        except json.JSONDecodeError as exc:
            raise TokenConfigError(f'{source}: not valid JSON ({exc.msg} at line {exc.lineno}).') from None
        if not isinstance(data, dict):
            raise TokenConfigError(f'{source}: the JSON must be an object of name to token.')
        for name, token in cast('dict[str, Any]', data).items():
            if not isinstance(token, str):
                raise TokenConfigError(f'{source}: the token of {name[:70]!r} is not a string.')
            pairs.append((name, token, f'the entry {name[:70]!r}'))
    else:
        for number, entry in enumerate(text.splitlines(), 1):
            entry = entry.strip()
            if not entry or entry.startswith('#'):
                continue
            name, colon, token = entry.partition(':')
            if not colon:
                raise TokenConfigError(f'{source}: entry {number} is not "name:token".')
            pairs.append((name.strip(), token.strip(), f'entry {number}'))
    tokens: dict[str, str] = {}
    for name, token, where in pairs:
        _check(name, token, source, where)
        if name in tokens:
            raise TokenConfigError(f'{source}: the name {name!r} appears twice.')
        tokens[name] = token
    return tokens


def _merge(sources: list[tuple[str, Mapping[str, str]]]) -> dict[str, bytes]:
    """Name to digest; a name or a token in two places is an error (the caller would be ambiguous)."""
    merged: dict[str, bytes] = {}
    owner: dict[bytes, str] = {}
    for source, tokens in sources:
        for name, token in tokens.items():
            digest = _digest(token)
            if name in merged:
                raise TokenConfigError(f'{source}: the name {name!r} is already given elsewhere.')
            if digest in owner:
                raise TokenConfigError(f'{source}: the token of {name!r} is also the token of {owner[digest]!r}.')
            merged[name] = digest
            owner[digest] = name
    return merged


def _signature(path: Path) -> tuple[int, int, int] | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return (stat.st_mtime_ns, stat.st_size, stat.st_ino)


class Tokens:
    """The bearer tokens a server accepts, by name; `identify` maps a presented token to its name.

    Used from the server's event loop only (one thread), so it needs no lock.
    """

    def __init__(self, fixed: list[tuple[str, Mapping[str, str]]], file: Path | None = None) -> None:
        """`fixed`: (source, name-to-token) that never change; `file`: re-read when it changes.

        Raises:
            TokenConfigError: a bad entry, a name or token given twice, or a file that cannot be read.
        """
        self._fixed_sources = fixed
        self._fixed = _merge(fixed)
        self._file = file
        self._signature: tuple[int, int, int] | None = None
        self._entries: list[tuple[str, bytes]] = list(self._fixed.items())
        self._weak = _weak_names(fixed)
        self._fixed_weak = self._weak
        self.strong_only = False
        if file is not None:
            self._signature = _signature(file)
            try:
                text = file.read_text(encoding='utf-8')
            except OSError as exc:
                raise TokenConfigError(f'{TOKENS_FILE_ENV}: cannot read {file} ({exc.strerror or exc}).') from None
            self._entries, self._weak = self._combine(text)

    @classmethod
    def from_config(cls, token: str | None = None, tokens_file: str | os.PathLike[str] | None = None) -> Tokens | None:
        """The tokens from the arguments and the environment, or None when none is configured (no auth).

        `token` (else `PERPLEXITY_MCP_TOKEN`) is named `default`; `PERPLEXITY_MCP_TOKENS` adds named ones;
        `tokens_file` (else `PERPLEXITY_MCP_TOKENS_FILE`) is watched for changes.
        """
        single = token or variable(TOKEN_ENV) or None
        listed = variable(TOKENS_ENV)
        path = tokens_file or variable(TOKENS_FILE_ENV) or None
        if single is None and not listed and path is None:
            return None
        fixed: list[tuple[str, Mapping[str, str]]] = []
        if single is not None:
            fixed.append((TOKEN_ENV, {DEFAULT_NAME: single}))
        if listed:
            fixed.append((TOKENS_ENV, parse_tokens(listed.replace(',', '\n'), TOKENS_ENV)))
        return cls(fixed, Path(path).expanduser() if path is not None else None)

    def names(self) -> list[str]:
        """The names currently accepted (after reading the file again if it changed)."""
        self.refresh()
        return [name for name, _ in self._entries]

    def identify(self, presented: bytes) -> str | None:
        """The name of the token `presented`, or None; in constant time over the configured tokens."""
        self.refresh()
        digest = _digest(presented)
        found: str | None = None
        for name, expected in self._entries:
            if hmac.compare_digest(digest, expected) and found is None:
                found = name
        return found

    def refresh(self) -> None:
        """Read the file again if it changed since the last look (a `stat` per call otherwise)."""
        if self._file is None:
            return
        signature = _signature(self._file)
        if signature == self._signature:
            return
        self._signature = signature
        if signature is None:
            _log.warning('%s %s is gone: every token it held is revoked', TOKENS_FILE_ENV, self._file)
            self._entries, self._weak = list(self._fixed.items()), self._fixed_weak
            return
        try:
            entries, weak = self._combine(self._file.read_text(encoding='utf-8'))
        except (OSError, TokenConfigError) as exc:
            _log.error('%s The tokens read before stay in force until the file is fixed.', exc)
            return
        self._entries, self._weak = entries, weak
        _log.warning('Read %s again: %d token(s) accepted', self._file, len(entries))

    def require_strength(self) -> str | None:
        """Why these tokens cannot protect a server reachable from other machines, or None (then weak tokens added
        to the file later are refused)."""
        self.refresh()
        if not self._entries:
            return 'no token is configured (the sources given list none)'
        if self._weak:
            names = ', '.join(repr(n) for n in self._weak)
            return f'the token of {names} is too weak: each token needs {STRENGTH_RULE}'
        self.strong_only = True
        return None

    def _combine(self, text: str) -> tuple[list[tuple[str, bytes]], list[str]]:
        source = f'{TOKENS_FILE_ENV} ({self._file})'
        from_file = parse_tokens(text, source)
        weak = _weak_names([*self._fixed_sources, (source, from_file)])
        if self.strong_only and weak:
            names = ', '.join(repr(n) for n in weak)
            raise TokenConfigError(f'{source}: the token of {names} is too weak: each token needs {STRENGTH_RULE}.')
        return list(_merge([*self._fixed_sources, (source, from_file)]).items()), weak


def _weak_names(sources: list[tuple[str, Mapping[str, str]]]) -> list[str]:
    return [name for _, tokens in sources for name, token in tokens.items() if is_weak(token)]
