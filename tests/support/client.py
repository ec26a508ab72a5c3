"""Helpers of the client tests: a sentinel key, mock clients, event-stream bodies."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from typing import Any

import httpx2

from pydantic_ai_perplexity.client import PerplexityClient

#: A key that must never appear in any message, repr, log line or traceback.
SENTINEL_KEY = 'pplx-SENTINEL-5f3c9a1e7b2d4c60'
MOCK_BASE_URL = 'https://api.perplexity.test'


Handler = Callable[[httpx2.Request], httpx2.Response]


@asynccontextmanager
async def mock_client(handler: Handler, **settings: Any) -> AsyncIterator[PerplexityClient]:
    """A client whose requests go to `handler` (httpx2's MockTransport), with the sentinel key."""
    settings.setdefault('api_key', SENTINEL_KEY)
    settings.setdefault('base_url', MOCK_BASE_URL)
    async with httpx2.AsyncClient(transport=httpx2.MockTransport(handler)) as http:
        async with PerplexityClient(http_client=http, **settings) as client:
            yield client


def sse_body(*events: dict[str, Any] | str) -> bytes:
    """An event-stream body: dicts become `data:` frames, strings are written as given."""
    parts = [event if isinstance(event, str) else f'data: {json.dumps(event)}\n\n' for event in events]
    return ''.join(parts).encode()


class Chunks(httpx2.AsyncByteStream):
    """A streamed body that yields chunks, then optionally fails like a dropped connection."""

    def __init__(self, chunks: Iterable[bytes], error: Exception | None = None) -> None:
        self._chunks = list(chunks)
        self._error = error

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self._chunks:
            yield chunk
        if self._error is not None:
            raise self._error


def sse_response(*events: dict[str, Any] | str, drop: Exception | None = None) -> httpx2.Response:
    frames = [sse_body(e) for e in events]
    return httpx2.Response(200, headers={'content-type': 'text/event-stream'}, stream=Chunks(frames, drop))


def run_json(run_id: str = 'resp_1', status: str = 'completed', **extra: Any) -> dict[str, Any]:
    return {'id': run_id, 'object': 'response', 'status': status, 'output': [], **extra}
