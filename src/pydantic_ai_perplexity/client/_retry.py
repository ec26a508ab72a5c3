"""The retry policy, with every constant in one place.

Two kinds of request, two policies:

* **Reads** (`retrieve`, stream resume, `models`, `search`, `cancel`): retried on connection errors, timeouts,
  408, 409, 429 and 5xx, as the Stainless SDKs do. Repeating them cannot start or bill a run.
* **Creates** (`POST /v1/agent`, blocking, background or streaming): the endpoint is not idempotent and takes
  no idempotency key, so a repeated create can start and bill a second run. A create is retried only where
  the request provably did not start one: a connect error (refused, DNS, TLS, pool: nothing was sent), a 429,
  or a 503 that carries `Retry-After`. Any failure after the request may have reached the API (a read
  timeout, a connection dropped mid-answer, 500/502/504) is raised at once and never re-sent.

The server may veto any retry with `x-should-retry: false`; it may ask for one with `x-should-retry: true`,
which is honoured for reads only. Delays follow `retry-after-ms` / `Retry-After` when 0 < value ≤ 60 s,
else exponential backoff with jitter. A 429 waits for the rate limit's reset (`x-ratelimit-reset`, a unix time in
seconds on the live API) when that is later than `Retry-After` or there is none, within the same 60 s.
`retry_deadline` bounds the total time spent on one call's attempts.
"""

from __future__ import annotations

import random
import time
from email.utils import parsedate_to_datetime
from typing import Literal, NamedTuple

import httpx2

__all__ = (
    'BACKOFF_CAP',
    'BACKOFF_INITIAL',
    'MAX_RETRY_AFTER',
    'RateLimits',
    'RequestKind',
    'backoff',
    'network_error_retryable',
    'rate_limit_wait',
    'rate_limits',
    'retry_after',
    'retry_delay',
    'status_retryable',
)

RequestKind = Literal['read', 'create']

BACKOFF_INITIAL = 0.5
BACKOFF_CAP = 8.0
#: The longest server-requested wait we obey; longer ones fall back to our own backoff.
MAX_RETRY_AFTER = 60.0
_READ_RETRY_STATUSES = frozenset({408, 409, 429})
#: Network errors raised before a single byte of the request left: safe to repeat even for a create.
_NOT_SENT_ERRORS: tuple[type[Exception], ...] = (httpx2.ConnectError, httpx2.ConnectTimeout, httpx2.PoolTimeout)
#: Network errors worth another try; the rest (unsupported protocol, bad header, proxy refusal) would repeat.
_TRANSIENT_ERRORS: tuple[type[Exception], ...] = (
    httpx2.TimeoutException,
    httpx2.NetworkError,
    httpx2.RemoteProtocolError,
)


def backoff(attempt: int) -> float:
    """Exponential backoff with jitter for the retry after attempt number `attempt` (0-based)."""
    return min(BACKOFF_INITIAL * 2**attempt, BACKOFF_CAP) * (1 - 0.25 * random.random())


def retry_after(headers: httpx2.Headers) -> float | None:
    """Seconds the server asked us to wait (`retry-after-ms`, then `Retry-After` as seconds or HTTP date)."""
    ms = headers.get('retry-after-ms')
    if ms is not None:
        try:
            return float(ms) / 1000
        except ValueError:
            pass
    value = headers.get('retry-after')
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        return parsedate_to_datetime(value).timestamp() - time.time()
    except (TypeError, ValueError, IndexError):
        return None


class RateLimits(NamedTuple):
    """The rate-limit headers of an answer: requests allowed, left and used in the window, and when it resets."""

    limit: int | None
    remaining: int | None
    used: int | None
    #: Unix time in seconds when the window resets.
    reset: float | None


#: A `x-ratelimit-reset` above this is a unix time (the live API's form); below it, seconds from now.
_EPOCH_FLOOR = 1_000_000_000


def _count(headers: httpx2.Headers, name: str) -> int | None:
    try:
        return int(headers.get(name, '').strip())
    except ValueError:
        return None


def rate_limits(headers: httpx2.Headers) -> RateLimits:
    """`x-ratelimit-limit`, `-remaining`, `-used` and `-reset` of an answer (None where absent or unreadable).

    Live fact: cfdude/mcp-perplexity-pro tests/fixtures/agent_response_headers.json, captured 2026-10-09: counts are
    decimal strings and `x-ratelimit-reset` is a unix time in seconds (one second after the answer's `date`).
    """
    reset: float | None = None
    raw = headers.get('x-ratelimit-reset')
    if raw is not None:
        try:
            value = float(raw.strip())
        except ValueError:
            value = None
        if value is not None and value >= 0:
            reset = value if value >= _EPOCH_FLOOR else time.time() + value
    return RateLimits(
        _count(headers, 'x-ratelimit-limit'),
        _count(headers, 'x-ratelimit-remaining'),
        _count(headers, 'x-ratelimit-used'),
        reset,
    )


def rate_limit_wait(headers: httpx2.Headers) -> float | None:
    """Seconds a 429 asks us to wait: `Retry-After` when the answer says it (the server's own word, to the
    millisecond), else until the rate limit's reset (`x-ratelimit-reset`, whole Unix seconds); None if neither."""
    given = retry_after(headers)
    if given is not None and given > 0:
        return given
    until = _until(rate_limits(headers).reset)
    return until if until is not None and until > 0 else None


def _until(moment: float | None) -> float | None:
    return None if moment is None else moment - time.time()


def retry_delay(attempt: int, headers: httpx2.Headers | None = None, status: int | None = None) -> float:
    """How long to sleep before the next attempt: the server's wish if sane (for a 429 without `Retry-After`, until
    the rate limit resets), else our backoff."""
    if headers is not None:
        wanted = rate_limit_wait(headers) if status == 429 else retry_after(headers)
        if wanted is not None and 0 < wanted <= MAX_RETRY_AFTER:
            return wanted
    return backoff(attempt)


def status_retryable(kind: RequestKind, status: int, headers: httpx2.Headers) -> bool:
    """Whether an answer with this status may be retried for this kind of request."""
    should = headers.get('x-should-retry', '').strip().lower()
    if should == 'false':
        return False
    if kind == 'create':
        # Only answers that prove no run started: rate limited, or unavailable and saying when to come back.
        return status == 429 or (status == 503 and retry_after(headers) is not None)
    if should == 'true':
        return True
    return status in _READ_RETRY_STATUSES or status >= 500


def network_error_retryable(kind: RequestKind, exc: httpx2.RequestError) -> bool:
    """Whether a failed exchange may be retried: always for reads, for creates only if nothing was sent."""
    if kind == 'read':
        return isinstance(exc, _TRANSIENT_ERRORS)
    return isinstance(exc, _NOT_SENT_ERRORS)
