"""One HTTP exchange with retries: the layer under `PerplexityClient` that knows URLs, headers and attempts.

The key is attached per request as `Authorization: Bearer …`, so a caller's own `httpx2.AsyncClient` works
unchanged and never holds it. One debug line per attempt goes to the `pydantic_ai_perplexity` logger:
method, path, status or error class, attempt number. Never headers, never bodies.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncGenerator, Mapping
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import anyio
import httpx2
from httpx2._client import UseClientDefault
from pydantic import BaseModel, SecretStr, ValidationError

from .._base.env import ENV
from .._base.errors import ConfigurationError
from . import _events
from ._errors import ErrorContext, malformed_error, network_error, status_error
from ._retry import RequestKind, network_error_retryable, rate_limits, retry_delay, status_retryable

__all__ = ('MAX_EVENT_SIZE', 'Transport', 'logger')

logger = logging.getLogger('pydantic_ai_perplexity')

#: `response.completed` carries the whole run (answer, every search result, usage) in one event.
MAX_EVENT_SIZE = 64 * 1024 * 1024
_SSE_HEADERS = {'Accept': 'text/event-stream', 'Cache-Control': 'no-store'}
_JSON_HEADERS = {'Accept': 'application/json'}
#: The header every answer of the built-in emulator carries (`emulator.EMULATOR_HEADER`); the live API never sends it.
_EMULATOR_HEADER = 'x-pplx-emulator'

M = TypeVar('M', bound=BaseModel)


class Transport:
    """Sends requests to one base URL with one key, retrying as `_retry` allows."""

    def __init__(
        self,
        http: httpx2.AsyncClient,
        *,
        base_url: str,
        api_key: SecretStr | None,
        timeout: httpx2.Timeout | UseClientDefault | None,
        max_retries: int,
        retry_deadline: float,
    ) -> None:
        self.http = http
        self.base_url = base_url
        self._api_key = api_key
        self._timeout = timeout
        self.max_retries = max_retries
        self.retry_deadline = retry_deadline
        #: Whether the base URL answered as an emulator (the `x-pplx-emulator` header); None until it answered.
        self.emulated: bool | None = None

    @property
    def key(self) -> str | None:
        """The key's value, for scrubbing error text only."""
        return self._api_key.get_secret_value() if self._api_key is not None else None

    def _headers(self, base: Mapping[str, str], *, auth: bool) -> dict[str, str]:
        headers = dict(base)
        if self._api_key is not None:
            headers['Authorization'] = f'Bearer {self._api_key.get_secret_value()}'
        elif auth:
            raise ConfigurationError(
                f'No Perplexity API key: set the {ENV.API_KEY} environment variable (keys are created in your '
                'Perplexity API settings), or give api_key= in Python. To try it offline on the built-in emulator '
                '(canned answers): the CLI without a key, `pydantic-ai-perplexity mcp --emulator` for the MCP server, '
                'or use_emulator_if_no_key() from pydantic_ai_perplexity in Python.'
            )
        return headers

    def require_key(self) -> None:
        """Raise `ConfigurationError` now if there is no key, rather than when a stream is first read."""
        self._headers({}, auth=True)

    def _ctx(self, method: str, path: str, kind: RequestKind, attempt: int) -> ErrorContext:
        return ErrorContext(method=method, path=path, kind=kind, attempts=attempt + 1, key=self.key)

    def _next_delay(
        self, attempt: int, started: float, headers: httpx2.Headers | None, status: int | None = None
    ) -> float | None:
        """The delay before another attempt, or `None` when attempts or the deadline are used up."""
        if attempt >= self.max_retries:
            return None
        delay = retry_delay(attempt, headers, status)
        if time.monotonic() - started + delay > self.retry_deadline:
            return None
        return delay

    async def _send(
        self,
        method: str,
        path: str,
        *,
        kind: RequestKind,
        stream: bool,
        json_body: Any = None,
        params: Mapping[str, str] | None = None,
        auth: bool = True,
    ) -> httpx2.Response:
        """Send until a 2xx answer (returned; its body unread if `stream`) or a final error (raised)."""
        headers = self._headers(_SSE_HEADERS if stream else _JSON_HEADERS, auth=auth)
        url = self.base_url + path
        started = time.monotonic()
        attempt = 0
        while True:
            request = self.http.build_request(
                method, url, json=json_body, params=params, headers=headers, timeout=self._timeout
            )
            try:
                response = await self.http.send(request, stream=stream)
            except httpx2.RequestError as exc:
                logger.debug('%s %s -> %s (attempt %d)', method, path, type(exc).__name__, attempt + 1)
                retryable = network_error_retryable(kind, exc)
                delay = self._next_delay(attempt, started, None) if retryable else None
                if delay is None:
                    sent = not network_error_retryable('create', exc)
                    error = network_error(exc, self._ctx(method, path, kind, attempt), sent=sent)
                    raise error from self.safe_cause(exc)
                _events.observer().retrying(method, path, attempt, delay, type(exc).__name__)
            else:
                logger.debug('%s %s -> %d (attempt %d)', method, path, response.status_code, attempt + 1)
                self.emulated = _EMULATOR_HEADER in response.headers
                limits = rate_limits(response.headers)
                _events.observer().rate_limits(limits.remaining, limits.limit)
                if response.is_success:
                    return response
                await _read_error_body(response)
                retryable = status_retryable(kind, response.status_code, response.headers)
                status = response.status_code
                delay = self._next_delay(attempt, started, response.headers, status) if retryable else None
                if delay is None:
                    raise status_error(response, self._ctx(method, path, kind, attempt))
                _events.observer().retrying(method, path, attempt, delay, response.status_code)
            await anyio.sleep(delay)
            attempt += 1

    async def request_json(
        self,
        method: str,
        path: str,
        *,
        kind: RequestKind,
        json_body: Any = None,
        params: Mapping[str, str] | None = None,
        auth: bool = True,
    ) -> Any:
        """One JSON exchange: the decoded body of the 2xx answer."""
        response = await self._send(
            method, path, kind=kind, stream=False, json_body=json_body, params=params, auth=auth
        )
        try:
            return json.loads(response.content)
        except ValueError:
            raise self._not_json(response, method, path, kind) from None

    async def request_model(
        self,
        model: type[M],
        method: str,
        path: str,
        *,
        kind: RequestKind,
        json_body: Any = None,
        params: Mapping[str, str] | None = None,
        auth: bool = True,
    ) -> M:
        """One JSON exchange, its 2xx body validated straight from bytes as `model`."""
        response = await self._send(
            method, path, kind=kind, stream=False, json_body=json_body, params=params, auth=auth
        )
        try:
            return model.model_validate_json(response.content)
        except ValidationError as exc:
            problems = exc.errors(include_url=False, include_input=False)
            if any(p['type'] == 'json_invalid' for p in problems):
                raise self._not_json(response, method, path, kind) from None
            ctx = self._ctx(method, path, kind, 0)
            why = f'JSON that is not a {model.__name__} ({len(problems)} problems, first: {problems[0]["msg"]})'
            raise malformed_error(ctx, why) from None

    def _not_json(self, response: httpx2.Response, method: str, path: str, kind: RequestKind) -> Exception:
        content_type = response.headers.get('content-type', 'no content type')
        ctx = self._ctx(method, path, kind, 0)
        return malformed_error(ctx, f'a body that is not JSON ({content_type})', response.text)

    @asynccontextmanager
    async def open_stream(
        self,
        method: str,
        path: str,
        *,
        kind: RequestKind,
        json_body: Any = None,
        params: Mapping[str, str] | None = None,
    ) -> AsyncGenerator[httpx2.Response]:
        """A 2xx streaming answer (retries done), closed on exit. Its body is read by the caller."""
        response = await self._send(method, path, kind=kind, stream=True, json_body=json_body, params=params)
        try:
            yield response
        finally:
            await response.aclose()

    def safe_cause(self, exc: BaseException) -> BaseException | None:
        """`exc` to chain from, or `None` if its text holds the key (then only our scrubbed message remains)."""
        key = self.key
        return None if key and key in str(exc) else exc

    def context(self, method: str, path: str, kind: RequestKind) -> ErrorContext:
        """The error context of a request, for errors raised while reading its answer."""
        return self._ctx(method, path, kind, 0)


async def _read_error_body(response: httpx2.Response) -> None:
    """Read an error answer's body as far as it arrives, then close it: its status is what counts."""
    try:
        await response.aread()
    except httpx2.TransportError:
        pass  # a partial error body still has a status; judge by that
    finally:
        await response.aclose()
