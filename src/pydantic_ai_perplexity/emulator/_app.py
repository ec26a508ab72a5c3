"""The emulator's ASGI app: Perplexity's Agent API, Search API and models list, served from the offline corpus.

Routing is Starlette's; authentication, the `x-request-id` header and request recording are a thin pure-ASGI
layer around it (no `BaseHTTPMiddleware`, so streams are never buffered). The `Authorization` header is only
compared, never stored, logged or echoed.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import math
import os
import re
import secrets
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import wraps
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .._base.env import ENV
from .._base.statuses import END_EVENTS
from ._corpus import DEFAULT_CORPUS, Corpus, load_corpus, search_corpus
from ._errors import ApiError, json_bytes
from ._facets import passes_facets
from ._faults import STATUS_TYPES, FaultPlan, StatusFault, parse_directives
from ._models import ModelSpec, model_table
from ._proxy import check_upstream, close_clients, proxy
from ._record import Recorder, Replayer, replay_headers, replay_run, with_headers
from ._runs import Run, Step, build_run
from ._validation import (
    CreateRequest,
    FunctionCallItem,
    FunctionCallOutputItem,
    McpTool,
    SearchRequest,
    input_text,
    parse_create,
    parse_search,
    validation_failed,
)

__all__ = (
    'EMULATOR_HEADER',
    'MAX_BODY_BYTES',
    'RATE_LIMIT',
    'EmulatorState',
    'RateBucket',
    'RecordedRequest',
    'StreamDropped',
    'create_app',
    'new_api_key',
    'rate_headers',
)

logger = logging.getLogger('pydantic_ai_perplexity.emulator')

#: Request bodies above this size are refused with 413, as the live API does.
MAX_BODY_BYTES = 32 * 1024 * 1024
#: Runs kept in memory at most; the oldest finished ones are forgotten first.
_MAX_RUNS = 10_000
#: Requests kept in the request log at most (a long-lived `serve()` must not grow without bound).
_MAX_RECORDED = 100_000
#: The live answer to the retired Sonar endpoints (403 `chat_completions_not_available`, captured 2026-10-09).
_RETIRED_MESSAGE = (
    'Sonar is now the Agent API. Use /v1/responses instead of /v1/sonar. '
    'Migrate here: https://docs.perplexity.ai/docs/agent-api/migrate-from-sonar/overview'
)
#: A well-formed response id, `resp_<uuid>`: any other id is refused with 400 "invalid response id", as live.
_RESPONSE_ID = re.compile(r'^resp_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$')
#: The live answer to a missing or wrong key (401 `invalid_api_key`).
_INVALID_KEY = 'Invalid API key provided. Ensure your API key is correct and active.'
#: Requests per minute of the emulated rate limit (the live `x-ratelimit-limit`, Tier 0's 50 RPM).
RATE_LIMIT = 50
#: Where a recording proxy forwards to by default: Perplexity's API.
DEFAULT_UPSTREAM = 'https://api.perplexity.ai'
#: A folder of pages every emulator searches instead of the built-in corpus, unless given its own `corpus`.
CORPUS_ENV = ENV.EMULATOR_CORPUS
#: The header on every response the emulator serves (JSON, SSE and errors alike): its value is the version of
#: the emulator, so a client can tell an emulated answer from a real one and say so.
EMULATOR_HEADER = 'x-pplx-emulator'


def emulator_version() -> str:
    """The value of the `x-pplx-emulator` header: this package's version."""
    from .._base.version import __version__

    return __version__


def new_api_key() -> str:
    """A fresh random key of the form `pplx-emulator-<hex>`."""
    return f'pplx-emulator-{secrets.token_hex(16)}'


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One request the emulator answered: method, path, query string and status (never headers or the key)."""

    method: str
    path: str
    query: str
    status: int


class StreamDropped(Exception):
    """Raised after a partial SSE body to make the server cut the connection abruptly (`drop@S`)."""


class _HideInjectedDrops(logging.Filter):
    """Keeps uvicorn from logging a traceback for each connection the emulator cuts on purpose."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, StreamDropped)


_drop_filter = _HideInjectedDrops()
if _drop_filter not in logging.getLogger('uvicorn.error').filters:
    logging.getLogger('uvicorn.error').addFilter(_drop_filter)


def _chosen_corpus(corpus: str | Path | None) -> Corpus:
    """The pages of `corpus`, else of the `PERPLEXITY_EMULATOR_CORPUS` folder, else the built-in ones."""
    folder = corpus if corpus is not None else os.environ.get(CORPUS_ENV, '').strip() or None
    return load_corpus(folder) if folder is not None else DEFAULT_CORPUS


class EmulatorState:
    """Everything one emulator instance holds: its key, settings, faults, recorded requests and runs."""

    def __init__(
        self,
        *,
        api_key: str | None,
        time_scale: float,
        faults: FaultPlan | str | Iterable[str] | None,
        partial_output: bool,
        retention_seconds: float | None,
        resume_window_seconds: float | None,
        models: Mapping[str, ModelSpec] | None = None,
        blocked_keys: Iterable[str] = (),
        record: str | Path | None = None,
        replay: str | Path | None = None,
        upstream: str = DEFAULT_UPSTREAM,
        corpus: str | Path | None = None,
    ) -> None:
        """Hold the settings; `api_key=None` draws a random `pplx-emulator-…` key; `corpus` (else
        `PERPLEXITY_EMULATOR_CORPUS`) a folder of pages to search instead of the built-in ones.

        Raises:
            ValueError: both `record` and `replay`, an unsafe `upstream` or record directory, or a replay
                directory that is missing or holds a bad file (`RecordingError`, naming it).
        """
        if record is not None and replay is not None:
            raise ValueError('record and replay cannot be combined: record to one directory, then replay it')
        if time_scale < 0:
            raise ValueError('time_scale must be >= 0')
        self.api_key = api_key or new_api_key()
        self.time_scale = time_scale
        self.faults = FaultPlan.coerce(faults)
        self.partial_output = partial_output
        self.retention_seconds = retention_seconds
        self.resume_window_seconds = resume_window_seconds
        self.upstream = check_upstream(upstream) if record is not None else upstream
        self.recorder = Recorder(Path(record)) if record is not None else None
        self.replayer = Replayer(Path(replay)) if replay is not None else None
        recorded_models = dict.fromkeys(self.replayer.model_ids(), (0.0, 0.0)) if self.replayer else {}
        self.models = model_table({**recorded_models, **(models or {})})
        self.blocked_keys = frozenset(blocked_keys)
        self.corpus: Corpus = _chosen_corpus(corpus)
        self.requests: list[RecordedRequest] = []
        self.runs: dict[str, Run] = {}
        #: The `prompt_cache_key`s seen: a repeat reads its instructions and input from the prompt cache.
        self.cache_keys: set[str] = set()
        self.rate = RateBucket(time_scale)
        self.closing = False
        self._closed: anyio.Event | None = None
        self._closer: asyncio.Future[None] | None = None

    @property
    def mode(self) -> str:
        """`emulate`, `record` (a proxy to `upstream`) or `replay`."""
        return 'record' if self.recorder else 'replay' if self.replayer else 'emulate'

    # --- runs

    def add_run(self, run: Run) -> None:
        """Remember a new run, forgetting the oldest finished ones beyond the cap."""
        self.runs[run.id] = run
        if len(self.runs) > _MAX_RUNS:
            now = time.monotonic()
            for old in [r for r in self.runs.values() if r.is_terminal(now)][: len(self.runs) - _MAX_RUNS]:
                del self.runs[old.id]

    def find(self, response_id: str, *, stored_only: bool) -> Run | None:
        """The run with this id, unless unknown, expired (retention), or (with `stored_only`) `store: false`."""
        run = self.runs.get(response_id)
        if run is None:
            return None
        now = time.monotonic()
        if self.retention_seconds is not None and run.is_terminal(now) and now - run.ends_at > self.retention_seconds:
            del self.runs[response_id]
            return None
        if stored_only and not run.store:
            return None
        return run

    # --- waiting and shutdown

    async def sleep(self, seconds: float) -> None:
        """Sleep `seconds` real seconds, or less if the emulator shuts down meanwhile."""
        if self.closing:
            return
        if self._closed is None:
            self._closed = anyio.Event()
        with anyio.move_on_after(seconds):
            await self._closed.wait()

    def reopen(self) -> None:
        """Undo `close()` before the server starts again."""
        self.closing = False
        self._closed = None

    def record(self, request: RecordedRequest) -> None:
        """Add to the request log, dropping the oldest tenth once it holds `_MAX_RECORDED` entries."""
        self.requests.append(request)
        if len(self.requests) > _MAX_RECORDED:
            del self.requests[: _MAX_RECORDED // 10]

    def close(self) -> None:
        """Wake every waiting request so the server can stop promptly (call on the server's event loop)."""
        self.closing = True
        if self._closed is not None:
            self._closed.set()
        if self.recorder is not None:
            self._closer = asyncio.ensure_future(close_clients())
        for run in list(self.runs.values()):
            run.wake()


class RateBucket:
    """The live rate-limit headers, from a leaky bucket of `RATE_LIMIT` requests a minute of emulated time.

    The emulator only reports the bucket (it never refuses a request for it; the `429` fault does that), so a
    fast emulator (small `time_scale`) drains it quickly and shows plenty remaining.
    """

    def __init__(self, time_scale: float) -> None:
        self.drain_seconds = 60 / RATE_LIMIT * time_scale  # real seconds per request drained
        self.level = 0.0
        self.at = time.monotonic()

    def take(self) -> dict[str, str]:
        """Count one request and give the headers it is answered with."""
        now = time.monotonic()
        drained = (now - self.at) / self.drain_seconds if self.drain_seconds > 0 else math.inf
        self.level = min(float(RATE_LIMIT), max(0.0, self.level - drained) + 1)
        self.at = now
        used = math.ceil(self.level)
        reset = math.ceil(time.time() + self.level * self.drain_seconds)
        return rate_headers(used, reset)


def rate_headers(used: int, reset: int) -> dict[str, str]:
    """The live `x-ratelimit-*` headers (lower case, plain integers; `reset` in Unix seconds)."""
    return {
        'x-ratelimit-limit': str(RATE_LIMIT),
        'x-ratelimit-remaining': str(max(0, RATE_LIMIT - used)),
        'x-ratelimit-reset': str(reset),
        'x-ratelimit-used': str(min(used, RATE_LIMIT)),
    }


# ---------------------------------------------------------------------------------------------------------------
# Helpers


def _json(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(json_bytes(data), status_code=status, headers=headers, media_type='application/json')


def _status_error(fault: StatusFault, retry_after: float) -> ApiError:
    headers: dict[str, str] = {}
    seconds = int(retry_after) if float(retry_after).is_integer() else retry_after
    if fault.status in {429, 503}:
        headers['Retry-After'] = str(seconds)
    if fault.status == 429:
        headers |= rate_headers(RATE_LIMIT, math.ceil(time.time() + retry_after))
        message = f'Rate limit exceeded: too many requests. Retry after {seconds} seconds.'
    elif fault.status == 503:
        message = 'The service is temporarily unavailable. Please retry.'
    else:
        message = 'The server had an error while processing your request.'
    return ApiError(fault.status, STATUS_TYPES[fault.status], message, headers=headers)


def _malformed() -> Response:
    """A 200 whose body is not JSON although it says so (a truncated document)."""
    return Response(b'{"id":"resp_', status_code=200, media_type='application/json')


async def _read_body(request: Request) -> bytes:
    too_large = ApiError(
        413,
        'payload_too_large',
        f'request body is larger than the {MAX_BODY_BYTES // (1024 * 1024)} MiB limit',
    )
    length = request.headers.get('content-length', '')
    if length.isdigit() and int(length) > MAX_BODY_BYTES:
        # Drain without keeping it (bounded), so the client can read the 413 instead of a reset connection.
        drained = 0
        async for chunk in request.stream():
            drained += len(chunk)
            if drained > 2 * MAX_BODY_BYTES:
                break
        raise too_large
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise too_large
        chunks.append(chunk)
    return b''.join(chunks)


Handler = Callable[[Request], Awaitable[Any]]


def _guarded(handler: Handler) -> Handler:
    """Render `ApiError`s as envelopes and unexpected errors as a 500 envelope; the server keeps serving."""

    @wraps(handler)
    async def run(request: Request) -> Any:
        try:
            return await handler(request)
        except ApiError as exc:
            return exc.response()
        except Exception:
            logger.exception('emulator: internal error while handling %s %s', request.method, request.url.path)
            return ApiError(500, 'internal_error', 'The emulator had an internal error.').response()

    return run


def _state(request: Request) -> EmulatorState:
    state: EmulatorState = request.app.state.emulator
    return state


# ---------------------------------------------------------------------------------------------------------------
# Server-sent events


def _frame(step: Step) -> bytes:
    """The SSE frame of a step, encoded once however many streams send it."""
    if not step.frame:
        step.frame = b'data: ' + json_bytes(step.event) + b'\n\n'
    return step.frame


class _EventStream:
    """An SSE answer for a run from `cursor` on: `data:` frames only, sent as each event comes due."""

    def __init__(self, state: EmulatorState, run: Run, cursor: int) -> None:
        self.state = state
        self.run = run
        self.cursor = cursor
        self.drop_at = run.take_drop()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send(
            {
                'type': 'http.response.start',
                'status': 200,
                'headers': [
                    (b'content-type', b'text/event-stream'),
                    (b'cache-control', b'no-cache'),
                    *((k.encode(), v.encode()) for k, v in _run_headers(self.run).items()),
                ],
            }
        )
        gone = False
        outcome = 'end'
        async with anyio.create_task_group() as group:

            async def watch_disconnect() -> None:
                nonlocal gone
                while (await receive())['type'] != 'http.disconnect':
                    pass
                gone = True
                group.cancel_scope.cancel()

            group.start_soon(watch_disconnect)
            try:
                outcome = await self._pump(send)
            except Exception:
                logger.exception('emulator: internal error while streaming run %s', self.run.id)
                outcome = 'drop'
            group.cancel_scope.cancel()
        if gone:
            return
        if outcome == 'drop':
            raise StreamDropped(self.run.id)
        await send({'type': 'http.response.body', 'body': b'', 'more_body': False})

    def _due(self, pending: list[Step], now: float) -> list[Step]:
        """The pending events due by `now`, in order, up to the one the stream is to drop after."""
        batch: list[Step] = []
        for step in pending:
            if self.run.due(step) > now:
                break
            batch.append(step)
            if self.drop_at is not None and step.seq >= self.drop_at:
                break
        return batch

    async def _pump(self, send: Send) -> str:
        run = self.run
        cursor = self.cursor
        while not self.state.closing:
            pending = run.events_after(cursor)
            if not pending:
                return 'end'
            now = time.monotonic()
            batch = self._due(pending, now)
            if not batch:
                await run.wait_change(run.due(pending[0]) - now)
                continue
            await send({'type': 'http.response.body', 'body': b''.join(map(_frame, batch)), 'more_body': True})
            cursor = batch[-1].seq
            if self.drop_at is not None and cursor >= self.drop_at:
                return 'drop'
            if batch[-1].type in END_EVENTS:
                return 'end'
        return 'end'


# ---------------------------------------------------------------------------------------------------------------
# Agent API


def _run_headers(run: Run) -> dict[str, str]:
    """`x-request-id` of an answer about a run: the run id without `resp_`, as live."""
    return {'x-request-id': run.id.removeprefix('resp_')}


def _check_id(response_id: str) -> None:
    if not _RESPONSE_ID.match(response_id):
        raise ApiError(400, 'invalid_request', 'invalid response id')


def _not_cancellable() -> ApiError:
    """The live answer to a cancel of an unknown, malformed or finished id alike."""
    return ApiError(400, 'invalid_request', 'the run is already terminal and cannot be cancelled')


def _check_previous(state: EmulatorState, previous_id: str | None) -> Run | None:
    """An unknown `previous_response_id` is a 400 (a `store: false` run can still be continued, as live)."""
    if previous_id is None:
        return None
    previous = state.find(previous_id, stored_only=False)
    if previous is None:
        raise ApiError(400, 'invalid_request', 'invalid request', param='previous_response_id')
    return previous


def _check_function_outputs(req: CreateRequest, previous: Run | None) -> None:
    """Function outputs answer function calls: each `call_id` must be one the run they continue asked for, or one of
    a `function_call` replayed in the same input."""
    items = req.input if isinstance(req.input, list) else []
    asked = set(previous.function_calls if previous is not None else ())
    asked.update(item.call_id for item in items if isinstance(item, FunctionCallItem))
    for item in items:
        if isinstance(item, FunctionCallOutputItem) and item.call_id not in asked:
            raise validation_failed(
                f'function_call_output call_id "{item.call_id}" answers no function call of the previous response'
            )


@_guarded
async def create_response(request: Request) -> Any:
    """`POST /v1/agent` (and `/v1/responses`): validate, apply faults, then answer blocking, background or SSE."""
    state = _state(request)
    body = await _read_body(request)
    req = parse_create(body, state.models)
    raw_text = input_text(req)
    cleaned, in_text = parse_directives(raw_text)
    decision = state.faults.decide_create(raw_text, in_text)
    directives = decision.directives
    if directives.slow:
        await state.sleep(directives.slow)
    if decision.status is not None:
        raise _status_error(decision.status, directives.retry_after)
    if directives.malformed:
        return _malformed()
    _check_mcp_servers(req)
    query = cleaned.replace(state.api_key, '[redacted]')
    if state.replayer is not None:
        recording = state.replayer.find('run', json.loads(body))
        background, store = bool(req.background), req.store if req.store is not None else True
        run = replay_run(
            recording, background=background, store=store, stream=bool(req.stream), time_scale=state.time_scale
        )
        headers = replay_headers(recording, run.id)
    else:
        previous = _check_previous(state, req.previous_response_id)
        _check_function_outputs(req, previous)
        if not query.strip() and previous is not None:  # only function outputs: the run goes on with its question
            query = previous.query
        asked = previous.function_calls if previous is not None else None
        cache_hit = req.prompt_cache_key is not None and req.prompt_cache_key in state.cache_keys
        if req.prompt_cache_key is not None:
            state.cache_keys.add(req.prompt_cache_key)
        run = build_run(
            req,
            query,
            directives,
            time_scale=state.time_scale,
            models=state.models,
            corpus=state.corpus,
            cache_hit=cache_hit,
            asked=asked,
        )
        headers = _run_headers(run)
    state.add_run(run)
    return await _answer_create(state, req, run, headers)


def _check_mcp_servers(req: CreateRequest) -> None:
    """A remote MCP server on a `.invalid` host cannot be reached: the live 424."""
    for tool in req.tools or ():
        if isinstance(tool, McpTool) and (urlsplit(tool.server_url).hostname or '').endswith('.invalid'):
            raise ApiError(
                424, 'external_connector_error', f'MCP server "{tool.server_label}" could not be initialized'
            )


async def _answer_create(state: EmulatorState, req: CreateRequest, run: Run, headers: dict[str, str]) -> Any:
    """A created run's answer: its event stream, its queued snapshot (background), or its end (blocking)."""
    if req.stream:
        return with_headers(_EventStream(state, run, -1), headers)
    if req.background:
        return _json(run.snapshot(time.monotonic(), force_status='queued'), headers=headers)
    while not state.closing and not run.is_terminal(now := time.monotonic()):
        await run.wait_change(run.ends_at - now)
    if not run.is_terminal(time.monotonic()):
        raise ApiError(503, 'service_unavailable', 'The emulator is shutting down.')
    return _json(run.snapshot(time.monotonic()), headers=headers)


def _flag(value: str | None, name: str) -> bool:
    if value is None:
        return False
    lowered = value.casefold()
    if lowered in {'true', '1'}:
        return True
    if lowered in {'false', '0'}:
        return False
    raise ApiError(400, 'invalid_parameter', f'invalid {name} "{value}": expected true or false', param=name)


def _cursor(request: Request) -> int:
    """`starting_after` as a non-negative integer (-1 when absent: stream from the start)."""
    raw = request.query_params.get('starting_after')
    if raw is None:
        return -1
    if not raw.isdigit():
        raise ApiError(
            400, 'invalid_parameter', 'starting_after must be a non-negative integer', param='starting_after'
        )
    return int(raw)


def _check_format(request: Request) -> None:
    fmt = request.query_params.get('format')
    if fmt is not None and fmt not in {'default', 'short'}:
        raise ApiError(400, 'invalid_parameter', 'format must be "default" or "short"', param='format')


def _check_resumable(state: EmulatorState, run: Run, cursor: int, now: float) -> None:
    """Only background runs resume, within the resume window, from a cursor no further than the last event."""
    if not run.background:
        raise ApiError(
            400,
            'invalid_request',
            f'response {run.id} was not created with background=true: its stream cannot be resumed',
            param='stream',
        )
    window = state.resume_window_seconds
    if window is not None and run.is_terminal(now) and now - run.ends_at > window:
        raise ApiError(
            400,
            'invalid_request',
            f'the resume window of response {run.id} has expired; retrieve it without stream instead',
            param='starting_after',
        )
    if cursor > run.last_seq:
        raise ApiError(
            400,
            'invalid_request',
            f'starting_after {cursor} is past the last event ({run.last_seq}) of response {run.id}',
            param='starting_after',
        )


@_guarded
async def retrieve_response(request: Request) -> Any:
    """`GET /v1/agent/{id}`: the run's snapshot, or with `stream=true` its events after `starting_after`.

    A malformed id is a 400, an unknown or `store: false` one a 404 (live).
    """
    state = _state(request)
    response_id: str = request.path_params['response_id']
    _check_id(response_id)
    run = state.find(response_id, stored_only=True)
    if run is None:
        raise ApiError(404, 'not_found', 'resource not found')
    stream = _flag(request.query_params.get('stream'), 'stream')
    cursor = _cursor(request)
    _check_format(request)
    fault = run.take_retrieve_fault()
    if fault is not None:
        raise _status_error(*fault)
    now = time.monotonic()
    if not stream:
        return _json(run.snapshot(now, partial_output=state.partial_output), headers=_run_headers(run))
    _check_resumable(state, run, cursor, now)
    return _EventStream(state, run, cursor)


@_guarded
async def cancel_response(request: Request) -> Any:
    """`POST /v1/agent/{id}/cancel`: acknowledge with `cancelling`; the run turns `cancelled` shortly after.

    An unknown, malformed or finished id all get the same 400, as live.
    """
    state = _state(request)
    response_id: str = request.path_params['response_id']
    run = state.find(response_id, stored_only=False) if _RESPONSE_ID.match(response_id) else None
    now = time.monotonic()
    if run is None or run.is_terminal(now):
        raise _not_cancellable()
    if not run.cancel_requested:
        run.cancel(now)
    return _json({'response_id': response_id, 'status': 'cancelling'}, headers=_run_headers(run))


# ---------------------------------------------------------------------------------------------------------------
# Search API, models, retired and unknown endpoints


@dataclass(slots=True)
class _SearchFaults:
    """The directives of a `/search` request's queries, merged: the first status fault, the longest delay."""

    status: StatusFault | None = None
    slow: float = 0.0
    malformed: bool = False
    retry_after: float = 0.0


def _search_queries(state: EmulatorState, req: SearchRequest) -> tuple[list[str], _SearchFaults]:
    """The queries with directives removed (and the key redacted), and the faults their directives ask for."""
    queries = [req.query] if isinstance(req.query, str) else list(req.query)
    cleaned: list[str] = []
    faults = _SearchFaults()
    for query in queries:
        text, directives = parse_directives(query)
        cleaned.append(text.replace(state.api_key, '[redacted]'))
        faults.status = faults.status or state.faults.decide_search(query, directives)
        faults.slow = max(faults.slow, directives.slow or 0.0)
        faults.malformed = faults.malformed or directives.malformed
        faults.retry_after = faults.retry_after or directives.retry_after
    return cleaned, faults


def _search_results(req: SearchRequest, queries: list[str], corpus: Corpus) -> list[dict[str, Any]]:
    """Ranked pages for each query, without repeats, snippets cut to the per-page and total token budgets."""
    limit = req.max_results or 10
    page_chars = (req.max_tokens_per_page or 4096) * 4
    total_chars = (req.max_tokens or 10_000) * 4
    seen: set[str] = set()
    results: list[dict[str, Any]] = []
    for query in queries:
        docs = search_corpus(
            query,
            domain_filter=req.search_domain_filter,
            after=req.search_after_date_filter,
            before=req.search_before_date_filter,
            updated_after=req.last_updated_after_filter,
            updated_before=req.last_updated_before_filter,
            limit=len(corpus.docs) + limit,  # the country, mode and language filters below still take their share
            corpus=corpus,
        )
        docs = [
            doc
            for doc in docs
            if passes_facets(doc, country=req.country, mode=req.search_mode, languages=req.search_language_filter)
        ][:limit]
        for doc in docs:
            if doc.url in seen or len(results) >= limit * len(queries):
                continue
            seen.add(doc.url)
            budget = min(page_chars, max(0, total_chars))
            total_chars -= budget
            snippet = (doc.snippet + ' ' + doc.text)[:budget] or doc.snippet[:200]
            results.append(
                {
                    'title': doc.title,
                    'url': doc.url,
                    'snippet': snippet,
                    'date': doc.date,
                    'last_updated': doc.last_updated,
                }
            )
    return results


@_guarded
async def search(request: Request) -> Any:
    """`POST /search`: ranked pages from the corpus (no `id`/`source` per result, unlike Agent results)."""
    state = _state(request)
    body = await _read_body(request)
    req = parse_search(body)
    if state.replayer is not None:
        recording = state.replayer.find('search', json.loads(body))
        recorded = recording.response or {}
        return _json(recorded.get('body'), int(recorded.get('status', 200)), headers=replay_headers(recording))
    queries, faults = _search_queries(state, req)
    if faults.slow:
        await state.sleep(faults.slow)
    if faults.status is not None:
        raise _status_error(faults.status, faults.retry_after)
    if faults.malformed:
        return _malformed()
    results = _search_results(req, queries, state.corpus)
    server_time = datetime.now(UTC).isoformat(timespec='seconds') if req.display_server_time else None
    return _json({'id': str(uuid.uuid4()), 'results': results, 'server_time': server_time})


async def list_models(request: Request) -> Response:
    """`GET /v1/models` (a key is needed, as live): the models the emulator serves, each with its `pricing`."""
    state = _state(request)
    recorded = state.replayer.models() if state.replayer is not None else None
    if recorded is not None:
        return _json(recorded)
    models = state.models.values()
    data = [
        {'id': m.id, 'object': 'model', 'created': 0, 'owned_by': m.owned_by, 'pricing': m.pricing()} for m in models
    ]
    return _json({'object': 'list', 'data': data})


async def retired(request: Request) -> Response:
    """Retired Sonar endpoints: 403 `chat_completions_not_available` with the live message."""
    return ApiError(403, 'chat_completions_not_available', _RETIRED_MESSAGE).response()


async def _http_error(request: Request, exc: Exception) -> Response:
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    if status == 405:
        headers: Mapping[str, str] = (exc.headers or {}) if isinstance(exc, HTTPException) else {}
        allow = headers.get('Allow', '')
        message = f'method {request.method} is not allowed on {request.url.path}' + (f': use {allow}' if allow else '')
        return ApiError(405, 'method_not_allowed', message, headers={'Allow': allow} if allow else None).response()
    if status == 404:
        return ApiError(404, 'not_found', f'no such endpoint: {request.method} {request.url.path}').response()
    return ApiError(status, 'invalid_request', str(getattr(exc, 'detail', 'error'))).response()


# ---------------------------------------------------------------------------------------------------------------
# The outer ASGI layer: authentication, request id, recording


class _Outer:
    """Checks the bearer key (every path, `/v1/models` too), adds `x-request-id` and the live `x-ratelimit-*`
    headers, and records each request."""

    def __init__(self, app: ASGIApp, state: EmulatorState) -> None:
        self.app = app
        self.state = state
        # A recording proxy serves real answers: it passes on the upstream's own marker, if any, and adds none.
        marker = {'emulate': emulator_version(), 'replay': f'{emulator_version()}; replay'}.get(state.mode, '')
        self.marker = marker.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope['type'] != 'http':
            await self.app(scope, receive, send)
            return
        request_id = str(uuid.uuid4())
        rate = self.state.rate.take()
        method: str = scope['method']
        path: str = scope['path']
        query = bytes(scope.get('query_string', b'')).decode('latin-1')

        async def send_wrapper(message: Message) -> None:
            if message['type'] == 'http.response.start':
                headers = [*message.get('headers', [])]
                present = {k.lower() for k, _ in headers}
                if b'x-request-id' not in present:
                    headers.append((b'x-request-id', request_id.encode()))
                if self.state.mode != 'record':
                    headers += [(k.encode(), v.encode()) for k, v in rate.items() if k.encode() not in present]
                if self.marker:
                    headers.append((EMULATOR_HEADER.encode(), self.marker))
                message = {**message, 'headers': headers}
                self.state.record(RecordedRequest(method, path, query, int(message['status'])))
            await send(message)

        if self.state.mode != 'record':
            problem = self._auth_problem(scope)
            if problem is not None:
                await problem.response()(scope, receive, send_wrapper)
                return
        await self.app(scope, receive, send_wrapper)

    def _auth_problem(self, scope: Scope) -> ApiError | None:
        """401 `invalid_api_key` for a missing or wrong key (live), 403 `forbidden` for a blocked one."""
        values = [v for k, v in scope.get('headers', []) if k.lower() == b'authorization']
        if not values:
            return ApiError(401, 'invalid_api_key', _INVALID_KEY)
        scheme, _, token = bytes(values[0]).decode('latin-1').strip().partition(' ')
        token = token.strip()
        if scheme.casefold() == 'bearer' and token in self.state.blocked_keys:
            return ApiError(403, 'forbidden', 'This API key is blocked.')
        if scheme.casefold() != 'bearer' or not hmac.compare_digest(
            token.encode('latin-1'), self.state.api_key.encode('latin-1')
        ):
            return ApiError(401, 'invalid_api_key', _INVALID_KEY)
        return None


def create_app(
    *,
    api_key: str | None = None,
    time_scale: float = 0.01,
    faults: FaultPlan | str | Iterable[str] | None = None,
    partial_output: bool = True,
    retention_seconds: float | None = None,
    resume_window_seconds: float | None = 600.0,
    models: Mapping[str, ModelSpec] | None = None,
    blocked_keys: Iterable[str] = (),
    record: str | Path | None = None,
    replay: str | Path | None = None,
    upstream: str = DEFAULT_UPSTREAM,
    corpus: str | Path | None = None,
) -> Starlette:
    """The emulator as an ASGI app (for embedding); its state, key included, is at `app.state.emulator`."""
    state = EmulatorState(
        api_key=api_key,
        time_scale=time_scale,
        faults=faults,
        partial_output=partial_output,
        retention_seconds=retention_seconds,
        resume_window_seconds=resume_window_seconds,
        models=models,
        blocked_keys=blocked_keys,
        record=record,
        replay=replay,
        upstream=upstream,
        corpus=corpus,
    )
    routes = _routes(state)
    app = Starlette(routes=routes, exception_handlers={HTTPException: _http_error})
    app.state.emulator = state
    app.add_middleware(_OuterMiddleware, state=state)
    return app


def _routes(state: EmulatorState) -> list[Route]:
    if state.recorder is not None:
        recorder, upstream = state.recorder, state.upstream

        @_guarded
        async def forward(request: Request) -> Any:
            return await proxy(request, recorder, upstream)

        methods = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE']
        return [Route('/', forward, methods=methods), Route('/{path:path}', forward, methods=methods)]
    routes = [
        Route('/v1/models', list_models, methods=['GET']),
        Route('/search', search, methods=['POST']),
    ]
    for prefix in ('/v1/agent', '/v1/responses'):
        routes += [
            Route(prefix, create_response, methods=['POST']),
            Route(prefix + '/{response_id}', retrieve_response, methods=['GET']),
            Route(prefix + '/{response_id}/cancel', cancel_response, methods=['POST']),
        ]
    for path in (
        '/chat/completions',
        '/v1/chat/completions',
        '/v1/sonar',
        '/async/chat/completions',
        '/v1/async/sonar',
    ):
        routes.append(Route(path, retired, methods=['GET', 'POST']))
    routes.append(Route('/async/chat/completions/{request_id}', retired, methods=['GET']))
    return routes


class _OuterMiddleware(_Outer):
    """`_Outer` in the shape Starlette's `add_middleware` expects (`cls(app, **options)`)."""

    def __init__(self, app: ASGIApp, *, state: EmulatorState) -> None:
        super().__init__(app, state)
