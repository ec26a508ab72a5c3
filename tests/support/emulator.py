"""Helpers shared by the emulator tests: SSE parsing of raw bytes, polling with a deadline, keyed clients."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import anyio
import httpx2

from pydantic_ai_perplexity.client._models import parse_event, parse_response
from pydantic_ai_perplexity.emulator import Emulator

TERMINAL = {'completed', 'failed', 'cancelled', 'incomplete'}
TERMINAL_EVENTS = {'response.completed', 'response.failed', 'response.incomplete', 'response.cancelled'}


def frames(raw: bytes) -> list[dict[str, Any]]:
    """Decode a raw SSE body, asserting the framing: only `data: <one-line JSON>` frames, no `event:`, no `[DONE]`."""
    text = raw.decode()
    assert text == '' or text.endswith('\n\n'), text[-200:]
    events: list[dict[str, Any]] = []
    for frame in text.split('\n\n')[:-1]:
        assert frame.startswith('data: '), frame[:100]
        assert '\n' not in frame and '\r' not in frame
        assert frame != 'data: [DONE]'
        event = json.loads(frame.removeprefix('data: '))
        parse_event(event)  # our client's wire model parses every event
        if event.get('response') is not None:
            parse_response(event['response'])
        events.append(event)
    return events


def partial_frames(raw: bytes) -> list[dict[str, Any]]:
    """The complete frames of a body that may have been cut mid-way."""
    text = raw.decode(errors='replace')
    return [json.loads(f.removeprefix('data: ')) for f in text.split('\n\n')[:-1]]


def stream_events(client: httpx2.Client, method: str, url: str, **kw: Any) -> list[dict[str, Any]]:
    """Send a request answered with SSE and return its decoded events (framing checked)."""
    with client.stream(method, url, **kw) as response:
        assert response.status_code == 200, response.read()
        assert response.headers['content-type'].startswith('text/event-stream')
        return frames(response.read())


def poll(
    get: Callable[[], dict[str, Any]], until: Callable[[dict[str, Any]], bool], timeout: float = 5.0
) -> dict[str, Any]:
    """Call `get` until `until(result)` holds, failing after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = get()
        if until(value):
            return value
        assert time.monotonic() < deadline, f'condition not reached within {timeout}s: {value}'
        time.sleep(0.005)


def wait_terminal(client: httpx2.Client, response_id: str, timeout: float = 5.0) -> dict[str, Any]:
    """Poll `GET /v1/agent/{id}` until the run is terminal."""
    return poll(lambda: client.get(f'/v1/agent/{response_id}').json(), lambda r: r['status'] in TERMINAL, timeout)


async def apoll(get: Callable[[], Any], until: Callable[[Any], bool], timeout: float = 5.0) -> Any:
    """Async `poll`."""
    with anyio.fail_after(timeout):
        while True:
            value = await get()
            if until(value):
                return value
            await anyio.sleep(0.005)


def client_for(emu: Emulator, key: str) -> httpx2.Client:
    """A client of `emu` sending `key` (a recording proxy forwards it upstream)."""
    return httpx2.Client(base_url=emu.base_url, headers={'Authorization': f'Bearer {key}'}, timeout=30)
