"""Server-sent events of a run, resumed transparently after a dropped connection.

Framing follows the contract and tolerates what it does not promise: blank keep-alives and comments are
skipped, `data: [DONE]` ends the stream, an `event: error` frame or a `{"type": "error"}` event is yielded as
an `error` event (terminal), unknown event types are yielded as they are, and sequence numbers must only rise
(gaps are normal). A background run's stream that drops is reopened with
`GET /v1/agent/{id}?stream=true&starting_after=<last seq>`; events already yielded are skipped by
`sequence_number`, so each event is yielded once, in order.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import Any
from urllib.parse import quote

import anyio
import httpx2

from .._base.errors import APIConnectionError, RunMayHaveStartedError
from . import _events
from ._errors import ErrorContext, as_object, describe_failure, malformed_error, redact
from ._models import AgentEvent, parse_event
from ._retry import backoff
from ._transport import MAX_EVENT_SIZE, Transport, logger

__all__ = ('MAX_RESUMES_WITHOUT_PROGRESS', 'EventStream', 'decode_frame', 'run_path')

#: Reconnections in a row that bring no new event before the stream gives up.
MAX_RESUMES_WITHOUT_PROGRESS = 3

Opener = Callable[[], AbstractAsyncContextManager[httpx2.Response]]


class _Done:
    """The `data: [DONE]` sentinel."""


DONE = _Done()


def run_path(response_id: str, suffix: str = '') -> str:
    """`/v1/agent/{id}{suffix}`, with the id escaped so that it cannot change the path."""
    if not response_id:
        raise ValueError('response_id must be a non-empty string')
    segment = quote(response_id, safe='')
    if segment in ('.', '..'):  # a dot segment would be resolved away (`/v1/agent/..` is `/v1`): escape its dots
        segment = segment.replace('.', '%2E')
    return f'/v1/agent/{segment}{suffix}'


def decode_frame(sse: httpx2.ServerSentEvent, ctx: ErrorContext) -> AgentEvent | _Done | None:
    """One SSE frame as an event; `None` for frames without data, `DONE` for `[DONE]`."""
    data = sse.data.strip()
    if sse.event == 'error':
        return parse_event(_error_payload(data))
    if not data:
        return None
    if data == '[DONE]':
        return DONE
    try:
        decoded: Any = json.loads(data)
    except ValueError:
        raise malformed_error(ctx, 'an event whose data is not JSON', data) from None
    payload = as_object(decoded)
    if payload is None:
        raise malformed_error(ctx, 'an event whose data is not a JSON object', data)
    if not isinstance(payload.get('type'), str):
        payload['type'] = sse.event
    return parse_event(payload)


def _error_payload(data: str) -> dict[str, Any]:
    """An `event: error` frame as an `error` event, whatever shape its data has."""
    try:
        decoded: Any = json.loads(data) if data else {}
    except ValueError:
        decoded = data
    payload = as_object(decoded)
    if payload is None:
        return {'type': 'error', 'error': {'message': str(decoded)}}
    if payload.get('type') == 'error':
        return payload
    inner = payload.get('error', payload)
    event: dict[str, Any] = {'type': 'error', 'error': as_object(inner) or {'message': str(inner)}}
    if isinstance(payload.get('sequence_number'), int):
        event['sequence_number'] = payload['sequence_number']
    return event


class EventStream(AsyncIterator[AgentEvent]):
    """The events of one run, as an async iterator; also an async context manager that closes the connection.

    ```python
    async with client.stream('What changed in the AI Act?', effort='low') as events:
        async for event in events:
            print(event.type)
    ```

    `response_id` is known once the first lifecycle event arrived; `last_sequence_number` (-1 before any event)
    is the cursor to resume from (`client.resume(response_id, starting_after=...)`) after this stream is left.
    """

    def __init__(
        self,
        transport: Transport,
        first: Opener,
        first_ctx: ErrorContext,
        *,
        response_id: str | None,
        starting_after: int,
        resumable: bool,
        max_stalls: int = MAX_RESUMES_WITHOUT_PROGRESS,
    ) -> None:
        self._transport = transport
        self._first: Opener | None = first
        self._first_ctx = first_ctx
        self.response_id = response_id
        self.last_sequence_number = starting_after
        self._resumable = resumable
        self._max_stalls = max_stalls
        self._events = self._run()

    def __aiter__(self) -> EventStream:
        return self

    async def __anext__(self) -> AgentEvent:
        return await self._events.__anext__()

    async def aclose(self) -> None:
        """Stop listening and close the connection. The run itself goes on."""
        await self._events.aclose()

    async def __aenter__(self) -> EventStream:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    def _resume_opener(self) -> tuple[Opener, ErrorContext]:
        assert self.response_id is not None
        path = run_path(self.response_id)
        params = {'stream': 'true', 'starting_after': str(self.last_sequence_number)}

        def opener() -> AbstractAsyncContextManager[httpx2.Response]:
            return self._transport.open_stream('GET', path, kind='read', params=params)

        return opener, self._transport.context('GET', path, 'read')

    def _first_opener(self) -> tuple[Opener, ErrorContext]:
        """The opener of the stream's first connection (the one given, once), else of a resumption."""
        first, self._first = self._first, None
        if first is not None:
            return first, self._first_ctx
        return self._resume_opener()

    async def _run(self) -> AsyncGenerator[AgentEvent]:
        opener, ctx = self._first_opener()
        stalls = 0
        while True:
            progressed = False
            drop: str = 'the connection closed before the run ended'
            try:
                async with opener() as response:
                    await _check_event_stream(response, ctx)
                    async for sse in httpx2.EventSource(response, max_event_size=MAX_EVENT_SIZE):
                        event = decode_frame(sse, ctx)
                        if event is None:
                            continue
                        if isinstance(event, _Done):
                            return
                        if not self._is_new(event):
                            continue  # already yielded before a reconnection
                        progressed = True
                        yield event
                        if event.is_terminal:
                            return
            except httpx2.SSEError as exc:
                why = redact(f'an event stream that could not be read ({exc})', ctx.key)
                raise malformed_error(ctx, why) from self._transport.safe_cause(exc)
            except httpx2.RequestError as exc:
                drop = describe_failure(exc, ctx.key)
            logger.debug('%s %s stream ended after seq %d: %s', ctx.method, ctx.path, self.last_sequence_number, drop)
            stalls = 0 if progressed else stalls + 1
            await self._before_resuming(ctx, drop, stalls)
            opener, ctx = self._resume_opener()

    async def _before_resuming(self, ctx: ErrorContext, drop: str, stalls: int) -> None:
        """Raise if the dropped stream cannot be reopened, else report it and back off after a stall."""
        self._check_resumable(ctx, drop, stalls)
        _events.observer().resuming(self.last_sequence_number)
        if stalls:
            await anyio.sleep(backoff(stalls - 1))

    def _is_new(self, event: AgentEvent) -> bool:
        """Whether `event` comes after the last one yielded; note its sequence number and the run's id."""
        if event.sequence_number >= 0:
            if event.sequence_number <= self.last_sequence_number:
                return False
            self.last_sequence_number = event.sequence_number
        if self.response_id is None and event.response is not None:
            rid: Any = event.response.get('id')
            self.response_id = rid if isinstance(rid, str) else None
        return True

    def _check_resumable(self, ctx: ErrorContext, drop: str, stalls: int) -> None:
        """Raise if the stream cannot or should no longer be reopened."""
        if self.response_id is None:
            raise RunMayHaveStartedError(
                f'{ctx.where}: the run was accepted but its stream dropped before its id arrived ({drop}). The run '
                f'may go on and be billed; without its id it cannot be resumed, so it was not re-sent.',
                method=ctx.method,
                path=ctx.path,
            )
        if not self._resumable:
            raise APIConnectionError(
                f'{ctx.where}: the stream of run {self.response_id!r} dropped after event '
                f'{self.last_sequence_number} ({drop}). It was not started with background=True, so it cannot be '
                f'resumed and may end without a result. Use background=True (the default of stream()) to resume.',
                method=ctx.method,
                path=ctx.path,
            )
        if stalls > self._max_stalls:
            raise APIConnectionError(
                f'{ctx.where}: the stream of run {self.response_id!r} dropped {stalls} times in a row without a new '
                f'event ({drop}). The run goes on server-side: collect it with wait({self.response_id!r}, ...) or '
                f'retrieve({self.response_id!r}).',
                method=ctx.method,
                path=ctx.path,
            )


async def _check_event_stream(response: httpx2.Response, ctx: ErrorContext) -> None:
    """Raise if a 2xx answer to a stream request is not an event stream (its body read for the error)."""
    content_type = response.headers.get('content-type', '').partition(';')[0].strip().lower()
    if content_type != 'text/event-stream':
        await response.aread()
        why = f'{content_type or "no content type"!r} instead of an event stream'
        raise malformed_error(ctx, why, response.text)
