"""`PerplexityClient`: the async client of Perplexity's Agent API, the Search API and the model list.

Retry policy (details in `_retry`): reads (`retrieve`, stream resume, `cancel`, `search`, `models`) are
retried on connection errors, timeouts, 408, 409, 429 and 5xx. A create (`create`, `start`, `stream`) is
retried only where the request provably did not start a run: a connect error (nothing was sent), a 429, or
a 503 with `Retry-After`. Any other failure after the request may have reached the API (a read timeout, a
connection dropped mid-answer, a 500/502/504) raises at once, `RunMayHaveStartedError` or the status error,
saying that a billed run may exist and was not re-sent. Every call's attempts end within `retry_deadline`.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import Any, Self, TypeVar

import anyio
import httpx2
from httpx2._client import UseClientDefault
from pydantic import BaseModel, SecretStr, ValidationError
from typing_extensions import Unpack

from .._base.errors import (
    APIError,
    AuthenticationError,
    BadRequestError,
    ConfigurationError,
    PermissionDeniedError,
    ResearchTimeoutError,
)
from .._base.statuses import SETTLED_STATUSES
from . import _events
from ._errors import as_object, invalid_run_id, redact
from ._models import AgentEvent, CancelAck, Model, ModelList, Response, SearchResponse
from ._params import AgentRequest, InputItem, SearchRequest
from ._retry import RequestKind
from ._settings import DEFAULT_TIMEOUT, resolve_api_key, resolve_base_url, shared_ssl_context
from ._stream import MAX_RESUMES_WITHOUT_PROGRESS, EventStream, run_path
from ._transport import Transport, logger

__all__ = ('POLL_INTERVAL_CAP', 'PerplexityClient')

#: The longest pause between two polls of a run when `wait` cannot stream.
POLL_INTERVAL_CAP = 10.0
_POLL_GROWTH = 1.5
#: At most this long for the one retrieve `wait` makes when its budget ended before any snapshot was seen.
_LAST_LOOK_S = 5.0
_AGENT_KEYS = AgentRequest.__required_keys__ | AgentRequest.__optional_keys__
_SEARCH_KEYS = SearchRequest.__required_keys__ | SearchRequest.__optional_keys__

M = TypeVar('M', bound=BaseModel)
OnEvent = Callable[[AgentEvent], Awaitable[None] | None]
OnSnapshot = Callable[[Response], Awaitable[None] | None]


class _NotGiven:
    def __repr__(self) -> str:
        return 'NOT_GIVEN'


NOT_GIVEN = _NotGiven()


class PerplexityClient:
    """Async client of the Perplexity Agent API: runs (blocking, background, streamed), search and models.

    ```python
    async with PerplexityClient() as client:
        run = await client.start('How did the EU AI Act change in 2026?', effort='medium')
        done = await client.wait(run.id, timeout=600, on_event=print)
        print(done.output_text)
    ```

    **Parameters:**

    * `api_key` (a string or a `SecretStr`): defaults to `PERPLEXITY_API_KEY`. Optional at construction; a call
      that needs it raises `ConfigurationError` naming the variable (`models()` is sent without one, and the live
      API then answers 401).
    * `base_url`: defaults to `PERPLEXITY_BASE_URL`, else `https://api.perplexity.ai`. Must be https, or http
      to a loopback host (the emulator).
    * `timeout`: per request; default 60 s to read, 5 s to connect (with `http_client`: that client's own).
    * `max_retries`: retries per call, for requests that are safe to repeat (see the module docstring).
    * `retry_deadline`: seconds all attempts of one call may take, sleeps included.
    * `http_client`: an `httpx2.AsyncClient` to send with; the caller keeps ownership and closes it.
    """

    def __init__(
        self,
        *,
        api_key: str | SecretStr | None = None,
        base_url: str | None = None,
        timeout: float | httpx2.Timeout | _NotGiven | None = NOT_GIVEN,
        max_retries: int = 2,
        retry_deadline: float = 60.0,
        http_client: httpx2.AsyncClient | None = None,
    ) -> None:
        if max_retries < 0:
            raise ConfigurationError(f'max_retries must be 0 or more, not {max_retries!r}.')
        if retry_deadline < 0:
            raise ConfigurationError(f'retry_deadline must be 0 or more seconds, not {retry_deadline!r}.')
        key = resolve_api_key(api_key)
        url = resolve_base_url(base_url)
        given = None if isinstance(timeout, _NotGiven) else timeout
        self._owns_http = http_client is None
        per_request: httpx2.Timeout | UseClientDefault | None = httpx2.USE_CLIENT_DEFAULT
        if http_client is None:
            own_timeout = DEFAULT_TIMEOUT if isinstance(timeout, _NotGiven) else given
            http_client = httpx2.AsyncClient(timeout=own_timeout, verify=shared_ssl_context())
        elif not isinstance(timeout, _NotGiven):
            per_request = given if isinstance(given, httpx2.Timeout) or given is None else httpx2.Timeout(given)
        self._transport = Transport(
            http_client,
            base_url=url,
            api_key=key,
            timeout=per_request,
            max_retries=max_retries,
            retry_deadline=retry_deadline,
        )
        self._closed = False

    def redact(self, text: str) -> str:
        """`text` with this client's API key replaced, for anything that records or shows user-supplied text."""
        return redact(text, self._transport.key)

    def require_key(self) -> None:
        """Raise `ConfigurationError` (saying how to give one) now if this client has no key."""
        self._transport.require_key()

    @property
    def base_url(self) -> str:
        """The API's base URL, e.g. `https://api.perplexity.ai`."""
        return self._transport.base_url

    @property
    def api(self) -> str:
        """The API's host (and port, if not the default), e.g. `api.perplexity.ai`: where runs are recorded as sent."""
        return httpx2.URL(self.base_url).netloc.decode('ascii', 'replace')

    @property
    def emulated(self) -> bool | None:
        """Whether the base URL answered as an emulator (its `x-pplx-emulator` header); None before any answer."""
        return self._transport.emulated

    def __repr__(self) -> str:
        return f'PerplexityClient(base_url={self.base_url!r})'

    async def __aenter__(self) -> Self:
        self._check_open()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the HTTP client if this client created it. Further calls raise `RuntimeError`."""
        if not self._closed:
            self._closed = True
            if self._owns_http:
                await self._transport.http.aclose()

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError('This PerplexityClient is closed; create a new one to send more requests.')

    # -- runs ---------------------------------------------------------------------------------------------------

    async def create(self, input: str | list[InputItem], **request: Unpack[AgentRequest]) -> Response:
        """Run the agent and return the finished run (blocking: the answer arrives when the run ends).

        Long runs (`medium` effort and up) can outlast the read timeout and any dropped connection; use
        `start` + `wait` for them. A create is never re-sent after it may have reached the API.
        """
        body = _agent_body(input, request)
        return await self._call(Response, 'POST', '/v1/agent', 'create', json_body=body)

    async def start(self, input: str | list[InputItem], **request: Unpack[AgentRequest]) -> Response:
        """Start a background run (`background` and `store` on) and return its first snapshot (`queued`).

        The run goes on server-side whatever happens to this process; collect it with `wait` or `retrieve`.
        """
        body = _agent_body(input, request, background=True)
        return await self._call(Response, 'POST', '/v1/agent', 'create', json_body=body)

    async def retrieve(self, response_id: str) -> Response:
        """The current snapshot of a run. While it goes, `output` holds the search and fetch items reached so far and
        `model` is the effort's name; the answer and `usage` come at the end.

        Raises:
            NotFoundError: no such run (404), or an id the API refused as malformed (400 live; `reason` says so).
        """
        try:
            return await self._call(Response, 'GET', run_path(response_id), 'read')
        except BadRequestError as exc:
            if exc.status_code != 400 or exc.param is not None:  # a field of the request, not the id
                raise
            raise invalid_run_id(exc, response_id) from None

    async def cancel(self, response_id: str) -> CancelAck:
        """Ask the API to cancel a run. Cancelling is asynchronous: the run becomes `cancelled` shortly after."""
        return await self._call(CancelAck, 'POST', run_path(response_id, '/cancel'), 'read')

    def stream(
        self, input: str | list[InputItem], *, background: bool = True, **request: Unpack[AgentRequest]
    ) -> EventStream:
        """Start a run and iterate its events as they happen (nothing is sent until iteration starts).

        With `background=True` (the default; `store` on too) a dropped connection is resumed from the last
        event seen, and every event is yielded exactly once. Without it, a drop ends the stream with
        `APIConnectionError`, since such a run cannot be resumed.
        """
        self._check_open()
        self._transport.require_key()
        body = _agent_body(input, request, stream=True, **({'background': True} if background else {}))

        def first() -> AbstractAsyncContextManager[httpx2.Response]:
            return self._transport.open_stream('POST', '/v1/agent', kind='create', json_body=body)

        ctx = self._transport.context('POST', '/v1/agent', 'create')
        return EventStream(self._transport, first, ctx, response_id=None, starting_after=-1, resumable=background)

    def resume(self, response_id: str, starting_after: int = 0) -> EventStream:
        """Iterate the events of a background run with a sequence number above `starting_after`.

        Dropped connections are resumed as in `stream`.
        """
        return self._resume(response_id, starting_after, MAX_RESUMES_WITHOUT_PROGRESS)

    def _resume(self, response_id: str, starting_after: int, max_stalls: int) -> EventStream:
        self._check_open()
        self._transport.require_key()
        path = run_path(response_id)
        params = {'stream': 'true', 'starting_after': str(starting_after)}

        def first() -> AbstractAsyncContextManager[httpx2.Response]:
            return self._transport.open_stream('GET', path, kind='read', params=params)

        ctx = self._transport.context('GET', path, 'read')
        return EventStream(
            self._transport,
            first,
            ctx,
            response_id=response_id,
            starting_after=starting_after,
            resumable=True,
            max_stalls=max_stalls,
        )

    async def wait(
        self,
        response_id: str,
        *,
        timeout: float,
        on_event: OnEvent | None = None,
        starting_after: int | None = None,
        poll_interval: float = 1.0,
        on_snapshot: OnSnapshot | None = None,
    ) -> Response:
        """Wait until a background run ends and return its final snapshot.

        Listens to the run's event stream (one request for the whole run, resumed after drops) and hands
        every event to `on_event`. If the stream is unavailable it polls `retrieve` instead, every
        `poll_interval` seconds growing by half each time up to 10 s: no events are reported then, but each
        polled snapshot of the running run goes to `on_snapshot` (its output holds the search and fetch items
        reached so far).

        Raises:
            ResearchTimeoutError: the run is still going after `timeout` seconds. It goes on server-side and
                is never cancelled here; `.last` holds the last snapshot seen.
        """
        self._check_open()
        self._transport.require_key()
        seen = _Seen()
        with anyio.move_on_after(timeout):
            return await self._wait(response_id, seen, on_event, starting_after or 0, poll_interval, on_snapshot)
        if seen.last is None:
            # Nothing seen within the budget (0 s, or a first answer slower than it): one look says whether the run
            # exists at all (an unknown id raises NotFoundError, never "still going") and how it stands.
            with anyio.move_on_after(_LAST_LOOK_S):
                seen.last = await self.retrieve(response_id)
            if seen.last is not None and seen.last.done:
                return seen.last
        last = seen.last
        status = f'still {last.status}' if last is not None else 'not finished'
        raise ResearchTimeoutError(
            f'Run {response_id!r} is {status} after waiting {timeout:g} s. It goes on server-side and was not '
            f'cancelled: collect it later with wait({response_id!r}, ...) or retrieve({response_id!r}).',
            response_id=response_id,
            last=last,
        )

    async def _wait(
        self,
        response_id: str,
        seen: _Seen,
        on_event: OnEvent | None,
        starting_after: int,
        interval: float,
        on_snapshot: OnSnapshot | None = None,
    ) -> Response:
        # A reconnection that brings no event means the stream is no use here (max_stalls=0): poll instead.
        async with self._resume(response_id, starting_after, max_stalls=0) as events:
            while True:
                try:
                    event = await events.__anext__()
                except StopAsyncIteration:
                    break
                except (AuthenticationError, PermissionDeniedError):
                    raise
                except APIError as exc:
                    logger.debug('wait %s: no stream (%s), polling instead', response_id, type(exc).__name__)
                    _events.observer().polling(type(exc).__name__)
                    break
                snapshot = _snapshot(event)
                if snapshot is not None:
                    seen.last = snapshot
                if on_event is not None:
                    await _notify(on_event(event))
                if event.is_terminal:
                    if snapshot is not None and snapshot.done:
                        return snapshot
                    break
        return await self._poll(response_id, seen, interval, on_snapshot)

    async def _poll(self, response_id: str, seen: _Seen, interval: float, on_snapshot: OnSnapshot | None) -> Response:
        delay = interval
        while True:
            run = await self.retrieve(response_id)
            seen.last = run
            if run.status in SETTLED_STATUSES:
                return run
            if on_snapshot is not None:
                await _notify(on_snapshot(run))
            await anyio.sleep(delay)
            delay = min(delay * _POLL_GROWTH, max(POLL_INTERVAL_CAP, interval))

    # -- search and models --------------------------------------------------------------------------------------

    async def search(self, query: str | list[str], **filters: Unpack[SearchRequest]) -> SearchResponse:
        """Ranked web pages from the Search API (`POST /search`): no synthesis, no answer, fast and cheap."""
        options: dict[str, Any] = dict(filters)
        _check_keys(options, _SEARCH_KEYS, 'the Search API')
        extra = as_object(options.pop('extra_body', None)) or {}
        body: dict[str, Any] = {'query': query, **options, **extra}
        return await self._call(SearchResponse, 'POST', '/search', 'read', json_body=body)

    async def models(self) -> list[Model]:
        """The models the Agent API offers (`provider/model` ids) with their `pricing` (USD per 1M tokens).

        The key is sent when there is one: the live API answers 401 without it (an emulator may not ask for one).
        """
        listing = await self._call(ModelList, 'GET', '/v1/models', 'read', auth=False)
        return listing.data

    # -- plumbing -----------------------------------------------------------------------------------------------

    async def _call(
        self,
        model: type[M],
        method: str,
        path: str,
        kind: RequestKind,
        *,
        json_body: Any = None,
        auth: bool = True,
    ) -> M:
        self._check_open()
        return await self._transport.request_model(model, method, path, kind=kind, json_body=json_body, auth=auth)


class _Seen:
    """The last snapshot of a run seen while waiting, for the timeout error."""

    __slots__ = ('last',)

    def __init__(self) -> None:
        self.last: Response | None = None


def _snapshot(event: AgentEvent) -> Response | None:
    """The run snapshot an event carries, if it carries a usable one."""
    if event.response is None:
        return None
    try:
        return event.response_
    except ValidationError:
        return None


def _check_keys(given: Mapping[str, Any], allowed: frozenset[str], what: str) -> None:
    unknown = sorted(set(given) - allowed)
    if unknown:
        raise TypeError(
            f'Unexpected argument(s) {", ".join(map(repr, unknown))}: not fields of {what} known to this version. '
            f'Send fields this version does not know with extra_body={{...}}.'
        )


def _agent_body(input: str | list[InputItem], request: Mapping[str, Any], **fixed: Any) -> dict[str, Any]:
    """The create body: exactly the keys given, `preset` sent as `effort`, `extra_body` merged last."""
    options = dict(request)
    _check_keys(options, _AGENT_KEYS, 'the Agent API')
    extra = as_object(options.pop('extra_body', None)) or {}
    preset = options.pop('preset', None)
    if preset is not None and options.get('effort') is None:
        options['effort'] = preset
    body: dict[str, Any] = {'input': input, **options, **fixed}
    if body.get('background'):
        body.setdefault('store', True)
    return {**body, **extra}


async def _notify(outcome: Awaitable[None] | None) -> None:
    """Await what a caller's hook returned when it is awaitable: hooks may be plain or async functions."""
    if inspect.isawaitable(outcome):
        await outcome
