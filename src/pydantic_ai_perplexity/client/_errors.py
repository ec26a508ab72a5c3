"""Turning HTTP failures into the library's exceptions, with messages that say what to do.

Messages are built from our own words, the request's method and path, and the server's error text with any
occurrence of the key removed. They never include headers, request bodies, or the key.
"""

from __future__ import annotations

import json
import re
from typing import Any, NamedTuple, cast

import httpx2

from .._base.env import ENV
from .._base.errors import (
    APIConnectionError,
    APIStatusError,
    APITimeoutError,
    AuthenticationError,
    BadRequestError,
    ExternalConnectorError,
    InternalServerError,
    MalformedResponseError,
    NotFoundError,
    PayloadTooLargeError,
    PermissionDeniedError,
    RateLimitError,
    RetiredEndpointError,
    RunMayHaveStartedError,
)
from ._retry import RequestKind, rate_limit_wait

__all__ = (
    'ErrorContext',
    'as_object',
    'invalid_run_id',
    'malformed_error',
    'network_error',
    'redact',
    'status_error',
)

_REDACTED = '[redacted]'
_RETIRED_MARKER = 'sonar is now the agent api'
_MCP_SERVER = re.compile(r'MCP server "([^"]+)"')
_MAY_HAVE_STARTED = (
    'A run may have started and been billed; the request was not re-sent, so that no second run is started. '
    'If it was a background run, find it by id (the ledger, or your usage page) before trying again; for '
    'long runs prefer start() + wait(), which survive dropped connections.'
)


class ErrorContext:
    """What an error message may mention about the request: method, path, attempts, and the key to scrub."""

    __slots__ = ('attempts', 'key', 'kind', 'method', 'path')

    def __init__(self, *, method: str, path: str, kind: RequestKind, attempts: int, key: str | None) -> None:
        self.method = method
        self.path = path
        self.kind = kind
        self.attempts = attempts
        self.key = key

    @property
    def where(self) -> str:
        return f'{self.method} {self.path}'

    @property
    def tries(self) -> str:
        return '1 attempt' if self.attempts == 1 else f'{self.attempts} attempts'


def redact(text: str, key: str | None) -> str:
    """`text` with every occurrence of the key replaced."""
    return text.replace(key, _REDACTED) if key and key in text else text


def _redact_body(body: Any, key: str | None) -> Any:
    if not key:
        return body
    dumped = json.dumps(body)
    return json.loads(dumped.replace(key, _REDACTED)) if key in dumped else body


def as_object(value: object) -> dict[str, Any] | None:
    """`value` if it is a JSON object, typed as one."""
    return cast('dict[str, Any]', value) if isinstance(value, dict) else None


def _parse_body(response: httpx2.Response) -> tuple[Any, str, str | None, str | None]:
    """(body, message, type, param) from any of the error shapes the API family uses."""
    text = response.text
    try:
        body: Any = json.loads(text) if text.strip() else None
    except ValueError:
        return text[:500], ' '.join(text.split())[:300], None, None
    outer = as_object(body)
    if outer is not None:
        return (body, *_object_fields(outer))
    return body, body if isinstance(body, str) else '', None, None


def _object_fields(outer: dict[str, Any]) -> tuple[str, str | None, str | None]:
    """(message, type, param) of a JSON object error body, flat or under `error`."""
    message, kind, param = '', None, None
    error = outer.get('error')
    source = as_object(error) or outer
    if isinstance(error, str):
        message = error
    detail = source.get('detail')
    if isinstance(source.get('message'), str):
        message = source['message']
    elif isinstance(detail, str):
        message = detail
    elif isinstance(detail, list):
        message, param = _fastapi_detail(cast('list[Any]', detail))
    if isinstance(source.get('type'), str):
        kind = source['type']
    if isinstance(source.get('param'), str):
        param = source['param']
    return message, kind, param


def _fastapi_detail(detail: list[Any]) -> tuple[str, str | None]:
    parts: list[str] = []
    param: str | None = None
    for item in detail:
        entry = as_object(item)
        if entry is None:
            parts.append(str(item))
            continue
        raw_loc = entry.get('loc')
        loc = [p for p in cast('list[Any]', raw_loc) if p != 'body'] if isinstance(raw_loc, list) else []
        name = '.'.join(str(p) for p in loc)
        param = param or name or None
        msg = str(entry.get('msg', ''))
        parts.append(f'{name}: {msg}' if name else msg)
    return '; '.join(parts), param


class _Reply(NamedTuple):
    """A non-2xx answer read and redacted: what each error message is made of."""

    status: int
    message: str
    head: str
    tail: str
    common: dict[str, Any]


def status_error(response: httpx2.Response, ctx: ErrorContext) -> APIStatusError:
    """The exception for a non-2xx answer, read in full."""
    reply = _read_reply(response, ctx)
    if reply.status == 410 or _RETIRED_MARKER in reply.message.lower():
        return RetiredEndpointError(
            f'{reply.head}: {reply.message}. This endpoint was retired (the Sonar chat API ended on 2026-09-27); '
            f'use the Agent API, POST /v1/agent (PerplexityClient.create or start).{reply.tail}',
            **reply.common,
        )
    return _refusal_error(reply, ctx) or _failure_error(reply, response, ctx)


def _read_reply(response: httpx2.Response, ctx: ErrorContext) -> _Reply:
    """The answer's status, message, message head and tail, and the fields every status error carries, redacted."""
    status = response.status_code
    body, server_message, error_type, param = _parse_body(response)
    server_message = redact(server_message, ctx.key).strip().rstrip('.') or response.reason_phrase or 'no message'
    error_type = redact(error_type, ctx.key) if error_type else None
    param = redact(param, ctx.key) if param else None
    request_id = response.headers.get('x-request-id')
    request_id = redact(request_id, ctx.key) if request_id else None
    head = f'{ctx.where} failed with HTTP {status}' + (f' ({error_type})' if error_type else '')
    tail = f' (request id {request_id})' if request_id else ''
    common: dict[str, Any] = {
        'status_code': status,
        'error_type': error_type,
        'param': param,
        'request_id': request_id,
        'body': _redact_body(body, ctx.key),
        'method': ctx.method,
        'path': ctx.path,
    }
    return _Reply(status, server_message, head, tail, common)


def _refusal_error(reply: _Reply, ctx: ErrorContext) -> APIStatusError | None:
    """The error for an endpoint, request, key or run the API refused (400/422, 401, 403, 404, 413), else None."""
    status, server_message, head, tail, common = reply
    if status == 400 or status == 422:
        param = common['param']
        named = f'parameter {param!r}' if param else 'the request'
        return BadRequestError(f'{head}: the API rejected {named}: {server_message}{tail}', **common)
    if status == 401 and not ctx.key:
        return AuthenticationError(
            f'{head}: {server_message}. No API key was sent, and this endpoint needs one (the model list too): set '
            f'{ENV.API_KEY}, or give api_key= in Python.{tail}',
            **common,
        )
    if status == 401:
        return AuthenticationError(
            f'{head}: {server_message}. The API key was not accepted: check that {ENV.API_KEY} (or api_key=) '
            f'holds a current key from your Perplexity API settings, with no quotes or extra characters.{tail}',
            **common,
        )
    if status == 403:
        return PermissionDeniedError(
            f'{head}: {server_message}. The key was recognised but may not do this: check in your Perplexity API '
            f'settings that the key is active and the account has credit and access to this feature.{tail}',
            **common,
        )
    if status == 404:
        return NotFoundError(
            f'{head}: {server_message}. No such run for this key: the id is unknown or expired, belongs to another '
            f'account, or the run was created with store=False (start runs with store=True to retrieve them).{tail}',
            **common,
        )
    if status == 413:
        return PayloadTooLargeError(
            f'{head}: {server_message}. The request body is larger than the API accepts (32 MiB): shorten the '
            f'input, or pass files by URL instead of inline data.{tail}',
            **common,
        )
    return None


def _failure_error(reply: _Reply, response: httpx2.Response, ctx: ErrorContext) -> APIStatusError:
    """The error for any other status: a remote MCP server (424), a rate limit (429), a server failure (5xx)."""
    status, server_message, head, tail, common = reply
    if status == 424:
        match = _MCP_SERVER.search(server_message)
        label = match.group(1) if match else None
        named = f'The remote MCP server {label!r}' if label else 'A remote MCP server in tools'
        return ExternalConnectorError(
            f'{head}: {server_message}. {named} could not be used: check that its server_url is reachable from '
            f'the internet over https (Streamable HTTP) and that its authorization is valid.{tail}',
            server_label=label,
            **common,
        )
    if status == 429:
        return _rate_limit_error(reply, response, ctx)
    if status >= 500:
        note = f' {_MAY_HAVE_STARTED}' if ctx.kind == 'create' else ' The API is failing; try again later.'
        return InternalServerError(f'{head} after {ctx.tries}: {server_message}.{note}{tail}', **common)
    # A timeout or conflict answered by the API or a proxy on the way does not prove the run was refused.
    note = f' {_MAY_HAVE_STARTED}' if ctx.kind == 'create' and status in (408, 409) else ''
    return APIStatusError(f'{head}: {server_message}.{note}{tail}', **common)


def _rate_limit_error(reply: _Reply, response: httpx2.Response, ctx: ErrorContext) -> RateLimitError:
    """The error for a 429, with the wait the API asked for when it named one."""
    _, server_message, head, tail, common = reply
    wait = rate_limit_wait(response.headers)
    hint = f'retry after {wait:g} s' if wait is not None and wait > 0 else 'retry later'
    return RateLimitError(
        f'{head}: {server_message}. Rate limited after {ctx.tries}: {hint}, or lower the request rate '
        f'(limits rise with your usage tier).{tail}',
        retry_after=wait,
        **common,
    )


def invalid_run_id(exc: BadRequestError, response_id: str) -> NotFoundError:
    """The error for a run id the API refused as malformed (live: `GET /v1/agent/{id}` answers 400 `invalid response
    id`, cfdude/mcp-perplexity-pro tests/fixtures/agent_get_malformed_400.json, captured 2026-10-09)."""
    shown = response_id if len(response_id) <= 80 else response_id[:79] + '…'
    reason = f'{shown!r} is not a valid run id (run ids look like resp_ and a UUID)'
    message = f'No such run: {reason}. Copy the id again from the research call or the ledger (jobs list).'
    return NotFoundError.because(reason, message, exc)


def describe_failure(exc: BaseException, key: str | None) -> str:
    """`Name: message` of a failed exchange (just `Name` when it has no message), with the key redacted."""
    return redact(f'{type(exc).__name__}: {exc}' if str(exc) else type(exc).__name__, key)


def network_error(exc: httpx2.RequestError, ctx: ErrorContext, *, sent: bool) -> APIConnectionError:
    """The exception for a failed exchange. `sent`: the request may have reached the API."""
    detail = describe_failure(exc, ctx.key)
    if ctx.kind == 'create' and sent:
        return RunMayHaveStartedError(
            f'{ctx.where} failed after the request was sent ({detail}). {_MAY_HAVE_STARTED}',
            method=ctx.method,
            path=ctx.path,
        )
    if isinstance(exc, httpx2.TimeoutException):
        return APITimeoutError(
            f'{ctx.where} timed out after {ctx.tries} ({detail}). The network or the API is slow: try again, or '
            f'raise PerplexityClient(timeout=...).',
            method=ctx.method,
            path=ctx.path,
        )
    return APIConnectionError(
        f'{ctx.where} could not reach the API after {ctx.tries} ({detail}). Check the network and the base URL '
        f'(PERPLEXITY_BASE_URL).',
        method=ctx.method,
        path=ctx.path,
    )


def malformed_error(ctx: ErrorContext, why: str, body: str = '') -> MalformedResponseError:
    """The exception for a 2xx answer that is not what the contract promises."""
    note = f' {_MAY_HAVE_STARTED}' if ctx.kind == 'create' else ''
    return MalformedResponseError(
        f'{ctx.where} answered with {why}. This is not the API contract: check that the base URL points at the '
        f'Perplexity API (or the emulator) and not at a proxy or captive portal.{note}',
        method=ctx.method,
        path=ctx.path,
        body=redact(body, ctx.key),
    )
