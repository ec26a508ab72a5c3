"""The recording proxy: every request goes to the upstream API unchanged, and its answer comes back unchanged.

The client's `Authorization` header is forwarded and never stored; what is stored goes through `sanitize`.
Streams are passed through chunk by chunk as they arrive, and their events are recorded with their timing.
The upstream must be `https://` (or `http://` to this machine), as for any base URL the library talks to:
the client's key travels to it.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any, cast

import httpx2
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from .._base.net import check_base_url
from ._errors import ApiError
from ._record import LIVE_HEADERS, Recorder, sse_events, sse_tee

__all__ = ('check_upstream', 'close_clients', 'proxy')

#: Upstream response headers passed back to the client (hop-by-hop and length headers are the server's own);
#: the live rate-limit and request-id headers are among them (`LIVE_HEADERS`).
_PASSED_HEADERS = frozenset({'content-type', 'cache-control', 'retry-after', 'x-pplx-emulator', 'allow', *LIVE_HEADERS})
#: Request headers forwarded upstream.
_FORWARDED_HEADERS = ('authorization', 'content-type', 'accept', 'user-agent', 'idempotency-key')
_CREATE = re.compile(r'^/v1/(agent|responses)/?$')
_RETRIEVE = re.compile(r'^/v1/(agent|responses)/([^/]+)/?$')
_TIMEOUT = httpx2.Timeout(900.0, connect=15.0)


def check_upstream(upstream: str) -> str:
    """The upstream a recording proxy forwards the client's key to, checked like any base URL (`https://`, or
    `http://` to loopback only; no credentials, query or other scheme).

    Raises:
        ConfigurationError: (a `ValueError`) the URL is unsafe or not an http(s) URL, said in one line.
    """
    return check_base_url(upstream, source='the recording upstream')


def _json_or_none(raw: bytes) -> Any:
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return None


_clients: dict[int, httpx2.AsyncClient] = {}


def _client() -> httpx2.AsyncClient:
    """One upstream client per event loop (making a client costs a TLS context; one per request is slow)."""
    loop = asyncio.get_running_loop()
    client = _clients.get(id(loop))
    if client is None or client.is_closed:
        client = _clients[id(loop)] = httpx2.AsyncClient(timeout=_TIMEOUT)
    return client


async def close_clients() -> None:
    """Close the upstream client of the running loop (when the server stops)."""
    client = _clients.pop(id(asyncio.get_running_loop()), None)
    if client is not None:
        await client.aclose()


def _passed(response: httpx2.Response) -> dict[str, str]:
    return {k: v for k, v in response.headers.items() if k.lower() in _PASSED_HEADERS}


async def proxy(request: Request, recorder: Recorder, upstream: str) -> Response:
    """Forward one request upstream and record what it is worth recording (runs, searches, the model list)."""
    body = await request.body()
    path = request.url.path
    url = upstream.rstrip('/') + path + (f'?{request.url.query}' if request.url.query else '')
    headers = {k: v for k, v in request.headers.items() if k.lower() in _FORWARDED_HEADERS}
    auth = request.headers.get('authorization', '')
    client = _client()
    try:
        response = await client.send(
            client.build_request(request.method, url, content=body, headers=headers), stream=True
        )
        started = time.monotonic()  # the run's clock starts when the upstream answers, not with our own setup
    except httpx2.HTTPError as exc:
        raise ApiError(
            502, 'bad_gateway', f'the upstream API at {upstream} could not be reached: {type(exc).__name__}'
        ) from None
    sent = _json_or_none(body)
    create = request.method == 'POST' and _CREATE.match(path) is not None
    retrieve = _RETRIEVE.match(path) if request.method == 'GET' else None
    if response.headers.get('content-type', '').startswith('text/event-stream'):
        run_id = retrieve[2] if retrieve else None

        def on_events(events: list[tuple[float, dict[str, Any]]]) -> None:
            if response.status_code == 200 and (create or retrieve):
                body = cast(dict[str, Any], sent) if create and isinstance(sent, dict) else None
                recorder.streamed(body, run_id, events, auth, started, response.headers if create else None)

        async def passthrough() -> AsyncIterator[bytes]:
            try:
                async for chunk in sse_tee(response.aiter_raw(), on_events):
                    yield chunk
            finally:
                await response.aclose()

        return StreamingResponse(passthrough(), status_code=response.status_code, headers=_passed(response))
    try:
        raw = await response.aread()
    finally:
        await response.aclose()
    if response.status_code == 200:
        answer = _json_or_none(raw)
        await _record(recorder, client, request, url, headers, sent, answer, create, retrieve, started, response)
    return Response(raw, status_code=response.status_code, headers=_passed(response))


async def _record(
    recorder: Recorder,
    client: httpx2.AsyncClient,
    request: Request,
    url: str,
    headers: dict[str, str],
    sent: Any,
    answer: Any,
    create: bool,
    retrieve: re.Match[str] | None,
    started: float,
    response: httpx2.Response,
) -> None:
    """Record a 200 answer: a create, a retrieve of a run that ended unstreamed (its whole stream fetched once), a
    search or the model list."""
    auth = request.headers.get('authorization', '')
    if not isinstance(answer, dict):
        return
    if create and isinstance(sent, dict):
        recorder.created(sent, answer, started, auth, response.headers)  # pyright: ignore[reportUnknownArgumentType]
    elif retrieve is not None and recorder.retrieved(retrieve[2], answer, auth):  # pyright: ignore[reportUnknownArgumentType]
        # A background run that ended while nobody streamed it: fetch its whole stream once, from the start.
        whole = await client.get(url.split('?', 1)[0], params={'stream': 'true'}, headers=headers)
        if whole.status_code == 200:
            recorder.backfill(retrieve[2], sse_events(whole.content), auth)
    else:
        _record_exchange(recorder, request, sent, answer, auth, response.headers)  # pyright: ignore[reportUnknownArgumentType]


def _record_exchange(
    recorder: Recorder, request: Request, sent: Any, answer: dict[str, Any], auth: str, answered: Mapping[str, str]
) -> None:
    """Record a search (`POST /search`) or the model list (`GET /v1/models`); anything else is not recorded."""
    path = request.url.path.rstrip('/')
    if request.method == 'POST' and path == '/search' and isinstance(sent, dict):
        recorder.exchange('search', sent, {'status': 200, 'body': answer}, auth, answered)  # pyright: ignore[reportUnknownArgumentType]
    elif request.method == 'GET' and path == '/v1/models':
        recorder.exchange('models', {}, {'status': 200, 'body': answer}, auth, answered)
