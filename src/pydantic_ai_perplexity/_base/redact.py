"""URLs and libpq strings made safe to show: every password and secret-looking parameter or setting becomes `***`.

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
    'ConninfoError',
    'has_secret',
    'is_conninfo',
    'is_secret_param',
    'parse_conninfo',
    'password_misread',
    'redact_target_and_secrets',
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


def _split_userinfo(before: str) -> tuple[str, str, str]:
    """A URL's authority and path split at the last `@` into user info, `@` and the rest; `('', '', before)` when
    there is no user info (an `@` in the path, as in `https://medium.com/@name`, is not one)."""
    userinfo, at, hosts = before.rpartition('@')
    if at and ':' not in userinfo and '/' in userinfo:
        return '', '', before
    return userinfo, at, hosts


def _masked_userinfo(userinfo: str, secrets: set[str], *, whole: bool) -> str:
    """A URL's user info with its password (`whole`: all of it) as `***`; what was masked is added to `secrets`."""
    user, colon, password = userinfo.partition(':')
    if whole:
        secrets.add(password if colon else user)  # a bare user name is the token (`https://TOKEN@host`)
        return MASK
    if colon:
        secrets.add(password)
        return f'{user}:{MASK}'
    return userinfo


def _masked_path(before: str, userinfo: str | None, secrets: set[str]) -> str:
    """A URL's authority and path with the path's token segments as `***` (added to `secrets`); `userinfo` is the
    already masked user info, None when the URL has none."""
    authority, slash, path = (before.rpartition('@')[2] if userinfo is not None else before).partition('/')
    if not slash:
        return before
    path, found = _token_segments(path)
    secrets |= found
    return (f'{userinfo}@' if userinfo is not None else '') + f'{authority}/{path}'


def _masked_query(after: str, secrets: set[str]) -> str:
    """A URL's `?query#fragment` with each secret parameter's value as `***`; the values are added to `secrets`."""
    query, hash_, fragment = after[1:].partition('#')
    params: list[str] = []
    for param in query.split('&'):
        name, equals, value = param.partition('=')
        if equals and _is_secret_setting(unquote(name), unquote(value)):
            secrets |= {value, *_secrets_of(unquote(name), unquote(value))}
            param = f'{name}={MASK}'
        params.append(param)
    return '?' + '&'.join(params) + hash_ + fragment


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
    userinfo, at, hosts = _split_userinfo(before)
    if at:
        userinfo = _masked_userinfo(userinfo, secrets, whole=whole_userinfo)
        before = f'{userinfo}@{hosts}'
    if path_tokens:
        before = _masked_path(before, userinfo if at else None, secrets)
    if after.startswith('?'):
        after = _masked_query(after, secrets)
    secrets |= {unquote(s) for s in secrets}
    secrets.discard('')
    secrets.discard(MASK)
    return head + before + after, frozenset(secrets)


def redact_url(url: str) -> str:
    """The URL (or libpq keyword/value string) with its passwords and secret settings shown as `***`."""
    return redact_target_and_secrets(url)[0]


# -- libpq keyword/value strings (`host=db user=bob password='a b'`): the other form a PostgreSQL target takes ------

#: libpq's connection keywords (PostgreSQL 17's list): a value starting with one of them and `=` is a keyword string.
LIBPQ_KEYWORDS = frozenset(
    {
        'host', 'hostaddr', 'port', 'dbname', 'user', 'password', 'passfile', 'require_auth', 'channel_binding',
        'connect_timeout', 'client_encoding', 'options', 'application_name', 'fallback_application_name',
        'keepalives', 'keepalives_idle', 'keepalives_interval', 'keepalives_count', 'tcp_user_timeout',
        'replication', 'gssencmode', 'sslmode', 'sslnegotiation', 'requiressl', 'sslcompression', 'sslcert', 'sslkey',
        'sslkeylogfile', 'sslpassword', 'sslcertmode', 'sslrootcert', 'sslcrl', 'sslcrldir', 'sslsni',
        'requirepeer', 'ssl_min_protocol_version', 'ssl_max_protocol_version', 'krbsrvname', 'gsslib',
        'gssdelegation', 'service', 'target_session_attrs', 'load_balance_hosts',
    }
)  # fmt: skip
_KEYWORD_START = re.compile(r'\s*([A-Za-z_]+)\s*=')
#: A server setting in libpq's `options`: `-c name=value`, `-cname=value` or `--name=value`.
_OPTION_NAME = re.compile(r'(?:-c\s*|--)([A-Za-z0-9_.\-]+)\s*=(\S*)')


class ConninfoError(ValueError):
    """A libpq keyword/value string that libpq could not read either; the message shows no value."""


def is_conninfo(value: str) -> bool:
    """Whether `value` is a libpq keyword/value string (`host=db user=bob ...`), not a path or a URL."""
    match = _KEYWORD_START.match(value)
    return match is not None and match.group(1).lower() in LIBPQ_KEYWORDS


def parse_conninfo(value: str) -> list[tuple[str, str]]:
    """A libpq keyword/value string read as libpq reads it: `keyword = value` pairs apart by whitespace; a value in
    single quotes may hold whitespace; a backslash takes the next character as it is (`\\'`, `\\\\`).

    Raises:
        ConninfoError: a keyword without `=`, or a quote left open (the message names the keyword, never a value).
    """
    pairs: list[tuple[str, str]] = []
    i, n = 0, len(value)
    while True:
        i = _skip_space(value, i)
        if i >= n:
            return pairs
        start = i
        while i < n and value[i] != '=' and not value[i].isspace():
            i += 1
        keyword = value[start:i]
        i = _skip_space(value, i)
        if i >= n or value[i] != '=':
            raise ConninfoError(f'"{keyword[:40]}" is not followed by "=" (write keyword=value pairs)')
        i = _skip_space(value, i + 1)
        if i < n and value[i] == "'":
            setting, i = _quoted_setting(value, i + 1, keyword)
        else:
            setting, i = _bare_setting(value, i)
        pairs.append((keyword, setting))


def _skip_space(value: str, i: int) -> int:
    """The index of the first character at or after `i` that is not whitespace."""
    while i < len(value) and value[i].isspace():
        i += 1
    return i


def _quoted_setting(value: str, i: int, keyword: str) -> tuple[str, int]:
    """A single-quoted value starting at `i` (after the quote) and the index after its closing quote."""
    chars: list[str] = []
    n = len(value)
    while True:
        if i >= n:
            raise ConninfoError(f'the quoted value of "{keyword[:40]}" is not closed with a \'')
        if value[i] == '\\' and i + 1 < n:
            chars.append(value[i + 1])
            i += 2
        elif value[i] == "'":
            return ''.join(chars), i + 1
        else:
            chars.append(value[i])
            i += 1


def _bare_setting(value: str, i: int) -> tuple[str, int]:
    """An unquoted value starting at `i`, up to whitespace, and the index after it."""
    chars: list[str] = []
    n = len(value)
    while i < n and not value[i].isspace():
        if value[i] == '\\' and i + 1 < n:
            chars.append(value[i + 1])
            i += 2
        else:
            chars.append(value[i])
            i += 1
    return ''.join(chars), i


def _is_secret_setting(name: str, value: str) -> bool:
    """A libpq setting whose value is secret: by its name, or an `options` with a secret-looking server setting."""
    if name.lower() == 'options':
        return any(is_secret_param(m.group(1)) for m in _OPTION_NAME.finditer(value))
    return is_secret_param(name)


def _secrets_of(name: str, value: str) -> set[str]:
    """What to scrub for a secret setting: its value, and for `options` each server setting's value in it too."""
    if name.lower() != 'options':
        return {value}
    return {value, *(m.group(2) for m in _OPTION_NAME.finditer(value) if is_secret_param(m.group(1)) and m.group(2))}


def _quoted(value: str) -> str:
    if value and not any(ch.isspace() or ch in "'\\" for ch in value):
        return value
    return "'" + value.replace('\\', '\\\\').replace("'", "\\'") + "'"


def _redact_conninfo(value: str) -> tuple[str, frozenset[str]]:
    try:
        pairs = parse_conninfo(value)
    except ConninfoError as exc:
        # Unreadable: nothing of it is shown, and every part of it is a secret to scrub.
        parts = {p for p in re.split(r'[\s=\']+', value) if len(p) > 3 and p.lower() not in LIBPQ_KEYWORDS}
        return f'(a PostgreSQL connection string that cannot be read: {exc})', frozenset(parts | {value.strip()})
    secrets: set[str] = set()
    shown: list[str] = []
    for name, setting in pairs:
        if _is_secret_setting(name, setting):
            secrets |= _secrets_of(name, setting)
            setting = MASK
        shown.append(f'{name}={_quoted(setting)}')
    secrets.discard('')
    return ' '.join(shown), frozenset(secrets)


def password_misread(url: str) -> bool:
    """Whether PostgreSQL would read a URL's password otherwise than `redact_url` hides it: a password holding an
    unencoded `@` or `/` ends, for libpq, at the first of them, so the rest becomes the host or the database."""
    match = _SCHEME.match(url)
    if match is None:
        return False
    rest = url[match.end() :]
    cut = min((i for i in (rest.find('?'), rest.find('#')) if i >= 0), default=len(rest))
    userinfo, at, _ = rest[:cut].rpartition('@')
    password = userinfo.partition(':')[2] if at and ':' in userinfo else ''
    return '@' in password or '/' in password


def redact_target_and_secrets(value: str) -> tuple[str, frozenset[str]]:
    """A URL or a libpq keyword/value string with its secrets shown as `***`, and those secrets to scrub from any
    text: the one redaction of a target (a ledger, an endpoint, a proxy) whatever its form. In a keyword string the
    value of each secret-looking keyword is hidden; in either form, libpq's `options` (`-c name=value` settings sent
    to the server) is hidden whole when one of its settings is secret-looking."""
    return _redact_conninfo(value) if is_conninfo(value) else redact_url_and_secrets(value)


def has_secret(value: str) -> bool:
    """Whether a value holds a URL with a password or a secret parameter (so it must never be copied into a file)."""
    if redact_target_and_secrets(value.strip())[1]:
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
