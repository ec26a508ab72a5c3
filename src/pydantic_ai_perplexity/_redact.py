"""URLs made safe to show: the password in the user info and every secret-looking query parameter become `***`.

One rule for every place a URL is shown (the ledger's description, `doctor`, config snippets, messages): the user
info's password is everything between the first `:` and the last `@` before the query, so a password holding an
unencoded `/`, `@` or `:` is hidden whole; a query parameter is secret when its name, split on `_`, `-` and `.`,
has a word such as `password`, `token`, `key`, `secret`, `sig` or `credential`, or ends in one.

Text that is stored and shared (emulator recordings) is redacted harder: the whole user info (a bare
`https://TOKEN@host` is a credential too) and, for URLs known to address a credentialed endpoint (a remote MCP
server's `server_url`), the path segments that carry tokens (see `_token_segments`).
"""

from __future__ import annotations

import re
from urllib.parse import unquote

__all__ = (
    'has_secret',
    'is_secret_param',
    'redact_url',
    'redact_url_and_secrets',
    'redact_urls_and_secrets_in',
    'redact_urls_in',
)

MASK = '***'
_SECRET_WORDS = frozenset(
    {
        'password',
        'passwd',
        'pwd',
        'pass',
        'passphrase',
        'secret',
        'token',
        'key',
        'apikey',
        'auth',
        'authorization',
        'sig',
        'signature',
        'credential',
        'credentials',
        'sessionid',
        'cookie',
        'jwt',
    }
)
_SECRET_ENDINGS = ('password', 'passwd', 'secret', 'token', 'key', 'signature', 'credential', 'credentials')
_WORD_SPLIT = re.compile(r'[_\-.]+')
_SCHEME = re.compile(r'^[A-Za-z][A-Za-z0-9+.\-]*://')
#: A URL inside free text: a scheme, `://`, then anything up to whitespace or a closing quote or bracket.
_URL_IN_TEXT = re.compile(r'[A-Za-z][A-Za-z0-9+.\-]*://[^\s\'"<>()\[\]{}]+')
#: A path segment that looks generated rather than named: 20+ URL-safe characters with letters and digits
#: (Zapier's `/api/mcp/s/<token>/mcp`, Pipedream's `/<uuid>/<app>`, Composio's and Smithery's keyed paths).
_RANDOM_SEGMENT = re.compile(r'(?=[^/]*\d)(?=[^/]*[A-Za-z])[A-Za-z0-9_\-.~%=+]{20,}')
#: Telegram's bot token form, `/bot<id>:<secret>/`.
_BOT_TOKEN = re.compile(r'bot\d+:[A-Za-z0-9_\-]{20,}')


def is_secret_param(name: str) -> bool:
    """Whether a query parameter's name says its value is a secret (`password`, `sslpassword`, `api_key`, ...)."""
    lowered = unquote(name).strip().lower()
    if lowered.endswith(_SECRET_ENDINGS):
        return True
    return any(word in _SECRET_WORDS for word in _WORD_SPLIT.split(lowered))


def _token_segments(path: str) -> tuple[str, set[str]]:
    """`path` with its token-carrying segments as `***`: random-looking ones, bot tokens, and the one after a
    segment named like a secret (`/token/<t>`, `/api-key/<k>`)."""
    segments = path.split('/')
    secrets: set[str] = set()
    for index, segment in enumerate(segments):
        after_secret_name = index > 0 and bool(segments[index - 1]) and is_secret_param(segments[index - 1])
        if segment and (after_secret_name or _RANDOM_SEGMENT.fullmatch(segment) or _BOT_TOKEN.fullmatch(segment)):
            secrets.add(segment)
            segments[index] = MASK
    return '/'.join(segments), secrets


def redact_url_and_secrets(
    url: str, *, whole_userinfo: bool = False, path_tokens: bool = False
) -> tuple[str, frozenset[str]]:
    """The URL with its secrets shown as `***`, and those secrets (raw and percent-decoded) to scrub from any text.

    `whole_userinfo` masks a user name too (`https://TOKEN@host`); `path_tokens` masks the path segments that
    carry tokens, for URLs that address a credentialed endpoint (both for text that is stored, not shown).
    """
    match = _SCHEME.match(url)
    if match is None:
        return url, frozenset()
    head, rest = match.group(0), url[match.end() :]
    secrets: set[str] = set()
    # The authority and path run to the first `?` or `#`; the user info runs to the last `@` in them, whatever
    # `/`, `:` or `@` an unencoded password holds.
    cut = min((i for i in (rest.find('?'), rest.find('#')) if i >= 0), default=len(rest))
    before, after = rest[:cut], rest[cut:]
    userinfo, at, hosts = before.rpartition('@')
    if at and ':' not in userinfo and '/' in userinfo:  # an `@` in the path (`https://medium.com/@name`), no user
        at = ''
    if at:
        user, colon, password = userinfo.partition(':')
        if whole_userinfo:
            secrets.add(password if colon else user)  # a bare user name is the token (`https://TOKEN@host`)
            userinfo = MASK
        elif colon:
            secrets.add(password)
            userinfo = f'{user}:{MASK}'
        before = f'{userinfo}@{hosts}'
    if path_tokens:
        authority, slash, path = (before.rpartition('@')[2] if at else before).partition('/')
        if slash:
            path, found = _token_segments(path)
            secrets |= found
            before = (f'{userinfo}@' if at else '') + f'{authority}/{path}'
    if after.startswith('?'):
        query, hash_, fragment = after[1:].partition('#')
        params: list[str] = []
        for param in query.split('&'):
            name, equals, value = param.partition('=')
            if equals and is_secret_param(name):
                secrets.add(value)
                param = f'{name}={MASK}'
            params.append(param)
        after = '?' + '&'.join(params) + hash_ + fragment
    secrets |= {unquote(s) for s in secrets}
    secrets.discard('')
    secrets.discard(MASK)
    return head + before + after, frozenset(secrets)


def redact_url(url: str) -> str:
    """The URL with the password in its user info and its secret query parameters shown as `***`."""
    return redact_url_and_secrets(url)[0]


def has_secret(value: str) -> bool:
    """Whether a value holds a URL with a password or a secret parameter (so it must never be copied into a file)."""
    if redact_url_and_secrets(value.strip())[1]:
        return True
    return any(redact_url_and_secrets(m.group(0))[1] for m in _URL_IN_TEXT.finditer(value))


def redact_urls_in(text: str) -> str:
    """`text` with every URL in it redacted (see `redact_url`)."""
    return _URL_IN_TEXT.sub(lambda m: redact_url(m.group(0)), text)


def redact_urls_and_secrets_in(
    text: str, *, whole_userinfo: bool = False, path_tokens: bool = False
) -> tuple[str, frozenset[str]]:
    """`text` with every URL in it redacted (see `redact_url_and_secrets`), and the secrets those URLs held."""
    found: set[str] = set()

    def one(match: re.Match[str]) -> str:
        shown, secrets = redact_url_and_secrets(match.group(0), whole_userinfo=whole_userinfo, path_tokens=path_tokens)
        found.update(secrets)
        return shown

    return _URL_IN_TEXT.sub(one, text), frozenset(found)
