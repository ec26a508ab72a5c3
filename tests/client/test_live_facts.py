"""The client against answers in the live API's shape (captured 2026-10-09; bodies built in
tests/support/live_shapes.py).

Each test names the public capture it encodes: cfdude/mcp-perplexity-pro `tests/fixtures/NAME`, captured 2026-10-09.
The transport is httpx2's in-process mock: these are the wire facts the emulator may not serve yet.
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx2
import pytest
from logfire.testing import CaptureLogfire

from pydantic_ai_perplexity._base.errors import AuthenticationError, NotFoundError, RateLimitError
from pydantic_ai_perplexity._core.researcher import Researcher
from pydantic_ai_perplexity._ledger import Ledger, RunRecord
from pydantic_ai_perplexity.client._models import FetchUrlResultsItem, SearchResultsItem
from pydantic_ai_perplexity.client._retry import MAX_RETRY_AFTER, rate_limit_wait, rate_limits, retry_delay
from support.client import MOCK_BASE_URL, SENTINEL_KEY, mock_client
from support.live_shapes import (
    CANCEL_TERMINAL_400,
    GET_MALFORMED_400,
    MODELS_NO_KEY_401,
    fetch_item,
    message,
    models_listing,
    rate_limit_headers,
    running,
    search_item,
    search_usage,
)
from support.live_shapes import run as live_run

pytestmark = pytest.mark.anyio


async def test_models_send_the_key_and_carry_pricing():
    """Live fact: models.json, captured 2026-10-09: each model has pricing {input, output, cache_read,
    cache_write?, unit}; models_unauthenticated.json: the list needs a key."""
    seen: list[str | None] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(request.headers.get('authorization'))
        return httpx2.Response(200, json=models_listing())

    async with mock_client(handler) as client:
        models = await client.models()
    assert seen == [f'Bearer {SENTINEL_KEY}']
    luna, gpt = models
    assert luna.pricing is not None and gpt.pricing is not None
    assert (luna.id, luna.pricing.input, luna.pricing.output, luna.pricing.cache_read, luna.pricing.cache_write) == (
        'openai/gpt-6-luna',
        0.1,
        0.5,
        0.01,
        0.125,
    )
    assert luna.pricing.unit == 'usd_per_1m_tokens'
    assert (gpt.pricing.input, gpt.pricing.output, gpt.pricing.cache_write) == (2.5, 15, None)


async def test_models_without_a_key_say_a_key_is_needed():
    """Live fact: models_unauthenticated.json, captured 2026-10-09: 401 invalid_api_key without a key."""

    def handler(request: httpx2.Request) -> httpx2.Response:
        assert 'authorization' not in request.headers
        return httpx2.Response(401, json=MODELS_NO_KEY_401)

    async with mock_client(handler, api_key='') as client:
        with pytest.raises(AuthenticationError, match='No API key was sent') as info:
            await client.models()
    assert info.value.type == 'invalid_api_key' and 'PERPLEXITY_API_KEY' in str(info.value)


async def test_a_malformed_id_is_not_found_with_the_reason():
    """Live fact: agent_get_malformed_400.json, captured 2026-10-09: GET of a malformed id answers 400."""
    async with mock_client(lambda request: httpx2.Response(400, json=GET_MALFORMED_400), max_retries=0) as client:
        with pytest.raises(NotFoundError) as info:
            await client.retrieve('not-a-run')
    assert info.value.reason == "'not-a-run' is not a valid run id (run ids look like resp_ and a UUID)"
    assert info.value.status_code == 400 and 'not a valid run id' in str(info.value)


async def test_a_running_snapshot_carries_its_partial_output():
    """Live fact: agent_background_in_progress.json, captured 2026-10-09: an in_progress retrieve carries the
    search and fetch items reached so far, and model is the effort's name."""
    body = running([search_item(11, 'https://a.example/'), fetch_item('https://b.example/')])
    async with mock_client(lambda request: httpx2.Response(200, json=body)) as client:
        snapshot = await client.retrieve(body['id'])
    assert snapshot.status == 'in_progress' and not snapshot.done and snapshot.model == 'medium'
    assert [type(i) for i in snapshot.output] == [SearchResultsItem, FetchUrlResultsItem]
    assert snapshot.usage is None and snapshot.output_text == ''


def test_rate_limit_headers_are_read_in_their_live_form():
    """Live fact: agent_response_headers.json, captured 2026-10-09: x-ratelimit-limit/-remaining/-used as
    decimal strings, x-ratelimit-reset a unix time in seconds, x-request-id the run id without resp_."""
    headers = httpx2.Headers(rate_limit_headers(limit=50, remaining=49, reset=1791572841, run_id='resp_abc'))
    limits = rate_limits(headers)
    assert (limits.limit, limits.remaining, limits.used, limits.reset) == (50, 49, 1, 1791572841.0)
    assert headers['x-request-id'] == 'abc'
    assert rate_limits(httpx2.Headers({'x-ratelimit-remaining': 'lots'})).remaining is None


def test_a_429_waits_for_retry_after_or_else_the_reset():
    now = int(time.time())
    reset_only = httpx2.Headers(rate_limit_headers(remaining=0, reset=now + 20))
    assert 18 <= retry_delay(0, reset_only, 429) <= 20
    assert retry_delay(0, reset_only, 503) <= 8  # only a 429 is about the rate limit: backoff
    # Retry-After is the server's own word (to the millisecond); the reset counts whole seconds.
    with_retry_after = httpx2.Headers({**rate_limit_headers(remaining=0, reset=now + 20), 'retry-after': '3'})
    assert retry_delay(0, with_retry_after, 429) == 3
    later_retry_after = httpx2.Headers({**rate_limit_headers(remaining=0, reset=now + 2), 'retry-after': '30'})
    assert retry_delay(0, later_retry_after, 429) == 30
    too_far = httpx2.Headers(rate_limit_headers(remaining=0, reset=now + int(MAX_RETRY_AFTER) + 30))
    assert retry_delay(0, too_far, 429) <= 8  # beyond the client's limit: our own backoff, bounded by the deadline
    past = httpx2.Headers(rate_limit_headers(remaining=0, reset=now - 5))
    assert rate_limit_wait(past) is None


async def test_a_rate_limited_read_retries_after_the_reset_and_reports_it():
    calls: list[float] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        calls.append(time.time())
        reset = time.time() + 30
        return httpx2.Response(
            429, json={'error': {'message': 'slow down'}}, headers=rate_limit_headers(remaining=0, reset=int(reset))
        )

    async with mock_client(handler, max_retries=3, retry_deadline=5) as client:
        with pytest.raises(RateLimitError) as info:
            await client.retrieve('resp_1')
    # A 30 s reset is past the 5 s deadline: no attempt sleeps through it, and the error says when to come back.
    assert len(calls) == 1
    assert info.value.retry_after is not None and 28 <= info.value.retry_after <= 31
    assert 'retry after' in str(info.value)


async def test_the_remaining_count_and_limit_go_on_the_current_span(capfire: CaptureLogfire):
    """Live fact: agent_response_headers.json, captured 2026-10-09 (x-ratelimit-remaining and -limit)."""
    from opentelemetry import trace

    body = running([])
    headers = rate_limit_headers(limit=50, remaining=37)
    async with mock_client(lambda request: httpx2.Response(200, json=body, headers=headers)) as client:
        with trace.get_tracer('test').start_as_current_span('outer'):
            await client.retrieve(body['id'])
    span = [s for s in capfire.exporter.exported_spans if s.name == 'outer'][
        -1
    ]  # the ended span (after the pending one)
    assert span.attributes is not None
    assert span.attributes['perplexity.ratelimit.remaining'] == 37
    assert span.attributes['perplexity.ratelimit.limit'] == 50


async def test_a_polling_wait_hands_each_running_snapshot_with_its_partial_output():
    """Live fact: agent_background_in_progress.json, captured 2026-10-09: a polled running snapshot carries the search
    and fetch items reached so far; with no stream, `wait` hands each one to `on_snapshot`."""
    run_id = 'resp_5e0c1f2a-0000-4000-8000-00000000000a'
    snapshots = [
        running([search_item(1, 'https://a.example/')], run_id=run_id),
        running([search_item(1, 'https://a.example/'), fetch_item('https://b.example/')], run_id=run_id),
        live_run(
            [search_item(1, 'https://a.example/'), fetch_item('https://b.example/'), message('A [1]')], run_id=run_id
        ),
    ]
    polls: list[int] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        if request.url.params.get('stream') == 'true':
            return httpx2.Response(400, json={'error': {'message': 'no stream here', 'type': 'invalid_request'}})
        polls.append(1)
        return httpx2.Response(200, json=snapshots[min(len(polls), len(snapshots)) - 1])

    seen: list[int] = []
    async with mock_client(handler) as client:
        done = await client.wait(
            run_id, timeout=10, poll_interval=0.01, on_snapshot=lambda s: seen.append(len(s.output))
        )
    assert done.status == 'completed' and done.output_text == 'A [1]'
    assert seen == [1, 2]  # each running snapshot, with what it had found; the final one is the result


async def test_a_refused_cancel_is_explained_in_our_words(tmp_path: Path):
    """Live facts, captured 2026-10-09: a cancel of an unknown, malformed or finished id answers 400 "the run is
    already terminal and cannot be cancelled" (agent_cancel_unknown_400.json, agent_cancel_malformed_400.meta.json,
    agent_cancel_terminal_400.meta.json); a GET of a malformed id answers 400 (agent_get_malformed_400.json), of an
    unknown one 404 (agent_get_unknown_404.meta.json)."""
    finished = live_run([search_item(1, 'https://a.example/'), message('A [1]')], usage=search_usage())
    known_gone = 'resp_5e0c1f2a-0000-4000-8000-0000000000aa'
    never = 'resp_5e0c1f2a-0000-4000-8000-0000000000bb'

    def handler(request: httpx2.Request) -> httpx2.Response:
        run_id = request.url.path.split('/')[3]
        if request.url.path.endswith('/cancel'):
            return httpx2.Response(400, json=CANCEL_TERMINAL_400)
        if run_id == finished['id']:
            return httpx2.Response(200, json=finished)
        if run_id.startswith('resp_'):
            return httpx2.Response(404, json={'error': {'message': 'response not found', 'type': 'not_found'}})
        return httpx2.Response(400, json=GET_MALFORMED_400)

    with Ledger(tmp_path / 'runs.db') as ledger:
        ledger.record_start(RunRecord(response_id=known_gone, query='q', origin='api'))
        async with httpx2.AsyncClient(transport=httpx2.MockTransport(handler)) as http:
            async with Researcher(
                api_key=SENTINEL_KEY, base_url=MOCK_BASE_URL, http_client=http, ledger=ledger, max_retries=0
            ) as r:
                ended = await r.cancel(finished['id'])
                with pytest.raises(NotFoundError) as malformed:
                    await r.cancel('not-a-run')
                with pytest.raises(NotFoundError) as unknown:
                    await r.cancel(never)
                with pytest.raises(NotFoundError) as gone:
                    await r.cancel(known_gone)
    assert ended.status == 'completed' and ended.sources  # nothing cancelled: how it ended
    assert str(malformed.value) == (
        "Nothing was cancelled: 'not-a-run' is not a valid run id (run ids look like resp_ and a UUID)."
    )
    assert str(unknown.value) == (
        f"Nothing was cancelled: no run '{never}' was started here (the ledger does not know it) and the API has none."
    )
    assert str(gone.value) == (
        f"Nothing was cancelled: the API has no run '{known_gone}' (it expired, or was created with store=False)."
    )
    for error in (malformed.value, unknown.value, gone.value):
        assert 'terminal' not in str(error) and error.reason
