"""Where the client's settings come from and what makes them safe.

A bare `PerplexityClient()` reads the environment (`ENV.API_KEY`, `ENV.BASE_URL`) when it is constructed, never at
import; the `Researcher` passes the values its `Settings` read instead. The key is kept in a `SecretStr` so that no
repr shows it, and is checked to be a plain token: a key with whitespace or non-ASCII characters would otherwise
surface inside an HTTP library's header error.
"""

from __future__ import annotations

import functools
import os
import ssl

import httpx2
from pydantic import SecretStr

from .._base.env import ENV
from .._base.errors import ConfigurationError
from .._base.net import DEFAULT_BASE_URL, check_base_url

__all__ = (
    'DEFAULT_BASE_URL',
    'DEFAULT_TIMEOUT',
    'resolve_api_key',
    'resolve_base_url',
    'shared_ssl_context',
)

#: 60 s to read (a quiet stream longer than that is resumed), 5 s to connect.
DEFAULT_TIMEOUT = httpx2.Timeout(60.0, connect=5.0)


def resolve_api_key(api_key: str | SecretStr | None, *, source: str | None = None) -> SecretStr | None:
    """The key from the argument, else `PERPLEXITY_API_KEY`; `None` when neither is set (or both are blank).

    `source` names where the value came from in an error (default: the argument, else the variable). A `SecretStr`
    (a key `Settings` already read) is checked the same way, and never unwrapped into anything but the result.
    """
    source = source or ('api_key' if api_key is not None else ENV.API_KEY)
    if isinstance(api_key, SecretStr):
        api_key = api_key.get_secret_value()
    raw = api_key if api_key is not None else os.environ.get(ENV.API_KEY)
    value = (raw or '').strip()
    if not value:
        return None
    if not all('\x21' <= ch <= '\x7e' for ch in value):
        raise ConfigurationError(
            f'The API key given in {source} contains whitespace, control or non-ASCII characters, so it cannot be '
            f'sent in an HTTP header. Copy the key again from your Perplexity API settings (keys look like "pplx-…").'
        )
    return SecretStr(value)


def resolve_base_url(base_url: str | None, *, source: str | None = None) -> str:
    """The base URL from the argument, else `PERPLEXITY_BASE_URL`, else the public API; checked to be safe.

    The key travels in a header to this URL, so it must be `https://`, or `http://` to a loopback host only
    (`127.0.0.0/8`, `localhost`, `::1`: the emulator, a local proxy).
    """
    source = source or ('base_url' if base_url is not None else ENV.BASE_URL)
    raw = base_url if base_url is not None else os.environ.get(ENV.BASE_URL) or DEFAULT_BASE_URL
    return check_base_url(raw, source=source)


@functools.cache
def shared_ssl_context() -> ssl.SSLContext:
    """The default TLS context (the OS trust store), built once per process and shared by our own HTTP clients.

    Building one takes about 0.1 s, which would otherwise be paid by every `PerplexityClient()`.
    """
    return httpx2.create_ssl_context()
