"""Where a key may be sent: a base URL checked to be safe, and whether a host is this machine only.

Shared by the wire (the client's base URL), the MCP HTTP server (its bind and `Host` checks) and the emulator (its
bind and a recording proxy's upstream), so all three apply one rule.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import SplitResult, urlsplit

from .errors import ConfigurationError

__all__ = ('DEFAULT_BASE_URL', 'check_base_url', 'is_loopback')

#: Perplexity's public API.
DEFAULT_BASE_URL = 'https://api.perplexity.ai'


def is_loopback(host: str) -> bool:
    """Whether `host` (a name or an address, IPv6 with or without brackets) reaches this machine only."""
    host = host.strip('[]')
    if host.lower() == 'localhost':
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_base_url(raw: str, *, source: str) -> str:
    """`raw` as a base URL a key may travel to: `https://`, or `http://` to a loopback host only; no credentials,
    query or fragment. Returns it normalised (lower-case scheme, no trailing `/`).

    Raises:
        ConfigurationError: the URL is unsafe or not an absolute http(s) URL, said in one line naming `source`.
    """
    parts, host, port = _split_url(raw.strip(), source=source)
    scheme = parts.scheme.lower()
    if scheme not in ('http', 'https') or not host:
        raise ConfigurationError(
            f'{source} must be an absolute http(s) URL such as {DEFAULT_BASE_URL!r}; got a URL with scheme '
            f'{scheme!r} and host {host!r}.'
        )
    shown = f'{scheme}://{_format_host(host)}' + (f':{port}' if port is not None else '')
    if parts.username is not None or parts.password is not None:
        raise ConfigurationError(
            f'{source} must not contain credentials (user:password@); the API key is sent in the Authorization '
            f'header only. Use {shown!r}.'
        )
    if parts.query or parts.fragment:
        raise ConfigurationError(f'{source} must not contain a query string or fragment; use {shown!r} plus a path.')
    if scheme == 'http' and not is_loopback(host):
        raise ConfigurationError(
            f'{source} {shown!r} uses plain http to a host that is not loopback, so the API key would travel in '
            f'clear text. Use https://, or http:// only to 127.0.0.1, localhost or ::1 (e.g. the emulator).'
        )
    return f'{shown}{parts.path.rstrip("/")}'


def _split_url(raw: str, *, source: str) -> tuple[SplitResult, str, int | None]:
    """`raw`'s parts, host (empty if none) and port, or the error for a URL that cannot be parsed, naming `source`."""
    try:
        parts = urlsplit(raw)
        host = parts.hostname or ''
        port = parts.port
    except ValueError:
        raise ConfigurationError(f'{source} is not a valid URL; expected e.g. {DEFAULT_BASE_URL!r}.') from None
    return parts, host, port


def _format_host(host: str) -> str:
    return f'[{host}]' if ':' in host else host
