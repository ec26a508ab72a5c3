"""The client against the emulator: every method, the retry policy, resume, waiting, errors, and the key's safety."""

from __future__ import annotations

import logging
import traceback
from typing import Any

import anyio
import httpx2
import pytest

from pydantic_ai_perplexity._base.errors import (
    AuthenticationError,
    BadRequestError,
    ExternalConnectorError,
    InternalServerError,
    MalformedResponseError,
    NotFoundError,
    PayloadTooLargeError,
    PerplexityError,
    RateLimitError,
    ResearchTimeoutError,
    RetiredEndpointError,
    RunMayHaveStartedError,
)
from pydantic_ai_perplexity.client import (
    AgentEvent,
    FunctionCallItem,
    McpCallItem,
    McpListToolsItem,
    MessageItem,
    PerplexityClient,
    SearchResultsItem,
)
from pydantic_ai_perplexity.emulator import Emulator
from support.client import SENTINEL_KEY

pytestmark = pytest.mark.anyio

#: Server-side waits of a few milliseconds, so that retry tests do not sleep through real backoff.
QUICK = 'retry_after=0.01'


def calls(emu: Emulator, method: str | None = None, prefix: str = '/v1/agent') -> list[tuple[str, str, str, int]]:
    return [
        (r.method, r.path, r.query, r.status)
        for r in emu.requests
        if r.path.startswith(prefix) and (method is None or r.method == method)
    ]


# -- runs -------------------------------------------------------------------------------------------------------


async def test_create_returns_the_finished_run_with_answer_and_sources(client: PerplexityClient, emu: Emulator):
    run = await client.create('When did the EU AI Act enter into force?', effort='fast')
    assert run.status == 'completed' and run.done
    assert 'AI Act' in run.output_text
    assert run.items(SearchResultsItem) and run.items(MessageItem)
    assert not run.items(FunctionCallItem)  # the internal search_web call never reaches the final output
    assert run.usage is not None and run.usage.cost is not None and run.usage.cost.total_cost
    assert calls(emu) == [('POST', '/v1/agent', '', 200)]


async def test_start_returns_a_queued_snapshot_and_retrieve_follows_the_run(client: PerplexityClient):
    run = await client.start('How do heat pumps work? [[emulate: duration=30]]', effort='low')
    assert run.status in ('queued', 'in_progress') and run.output == []
    assert run.background is True and run.store is True
    again = await client.retrieve(run.id)
    assert again.id == run.id and again.status in ('queued', 'in_progress')


async def test_failed_and_incomplete_runs_are_results_not_exceptions(client: PerplexityClient):
    failed = await client.create('heat pumps [[emulate: fail]]', effort='fast')
    assert failed.status == 'failed' and failed.error is not None and failed.error.message
    incomplete = await client.create('heat pumps [[emulate: incomplete]]', effort='fast')
    assert incomplete.status == 'incomplete'


async def test_cancel_acknowledges_and_the_run_ends_cancelled(client: PerplexityClient):
    run = await client.start('a long survey of heat pumps [[emulate: duration=600]]', effort='high')
    ack = await client.cancel(run.id)
    assert (ack.response_id, ack.status) == (run.id, 'cancelling')
    final = await client.wait(run.id, timeout=5, poll_interval=0.05)
    assert final.status == 'cancelled'
    with pytest.raises(BadRequestError, match='cannot be cancelled'):
        await client.cancel(run.id)


async def test_remote_mcp_items_parse_as_their_types(client: PerplexityClient):
    run = await client.create('heat pumps [[emulate: mcp]]', effort='fast')
    assert run.items(McpListToolsItem) and run.items(McpCallItem)


# -- search and models ------------------------------------------------------------------------------------------


async def test_search_returns_ranked_pages(client: PerplexityClient, emu: Emulator):
    found = await client.search('EU AI Act', max_results=3)
    assert 0 < len(found.results) <= 3
    assert all(r.url.startswith('https://') for r in found.results)
    assert calls(emu, prefix='/search') == [('POST', '/search', '', 200)]


async def test_models_need_a_key(emu: Emulator, client: PerplexityClient):
    """Live fact: cfdude/mcp-perplexity-pro tests/fixtures/models_unauthenticated.json, captured 2026-10-09: even
    `/v1/models` answers 401 without a key."""
    async with PerplexityClient(base_url=emu.base_url) as anonymous:
        with pytest.raises(AuthenticationError):
            await anonymous.models()
    models = await client.models()
    assert models and all('/' in m.id for m in models)


# -- streams ----------------------------------------------------------------------------------------------------


async def test_stream_yields_the_run_including_the_search_web_quirk(client: PerplexityClient):
    with anyio.fail_after(10):
        async with client.stream('When did the EU AI Act enter into force?', effort='fast') as events:
            seen = [event async for event in events]
    assert seen[0].type == 'response.created' and seen[-1].type == 'response.completed'
    seqs = [e.sequence_number for e in seen]
    assert seqs == sorted(set(seqs))
    added = {e.output_index: e.item_ for e in seen if e.type == 'response.output_item.added'}
    done = {e.output_index: e.item_ for e in seen if e.type == 'response.output_item.done'}
    quirk = [i for i, item in added.items() if isinstance(item, FunctionCallItem) and item.name == 'search_web']
    assert quirk and all(isinstance(done[i], SearchResultsItem) for i in quirk)
    text = ''.join(e.delta or '' for e in seen if e.type == 'response.output_text.delta')
    final = seen[-1].response_
    assert final is not None and final.status == 'completed' and final.output_text == text


async def test_a_dropped_stream_is_resumed_and_yields_every_event_exactly_once(client: PerplexityClient, emu: Emulator):
    with anyio.fail_after(10):
        stream = client.stream('When did the EU AI Act enter into force? [[emulate: drop@5]]', effort='fast')
        async with stream as events:
            seen = [event async for event in events]
        assert stream.response_id is not None
        async with client.resume(stream.response_id, starting_after=0) as replay:
            reference = [event async for event in replay]
    assert [e.sequence_number for e in seen] == [0] + [e.sequence_number for e in reference]
    assert [e.type for e in seen[1:]] == [e.type for e in reference]
    assert seen[-1].type == 'response.completed'
    assert calls(emu)[:2] == [
        ('POST', '/v1/agent', '', 200),
        ('GET', f'/v1/agent/{stream.response_id}', 'stream=true&starting_after=5', 200),
    ]


async def test_a_foreground_run_cannot_be_resumed(client: PerplexityClient):
    run = await client.create('heat pumps', effort='fast', store=True)
    with pytest.raises(BadRequestError, match='background'):
        async with client.resume(run.id) as events:
            [event async for event in events]


# -- retries ----------------------------------------------------------------------------------------------------


async def test_a_rate_limited_create_is_retried_and_succeeds_with_three_posts(client: PerplexityClient, emu: Emulator):
    run = await client.create(f'heat pumps [[emulate: 429x2, {QUICK}]]', effort='fast')
    assert run.status == 'completed'
    assert [c[3] for c in calls(emu, 'POST')] == [429, 429, 200]


async def test_rate_limits_beyond_the_retries_raise_with_retry_after(client: PerplexityClient, emu: Emulator):
    with pytest.raises(RateLimitError) as info:
        await client.create(f'heat pumps [[emulate: 429x3, {QUICK}]]', effort='fast')
    assert info.value.retry_after == 0.01 and info.value.status_code == 429
    assert len(calls(emu, 'POST')) == 3


async def test_a_503_with_retry_after_on_create_is_retried(client: PerplexityClient, emu: Emulator):
    run = await client.start(f'heat pumps [[emulate: 503x1, {QUICK}]]', effort='fast')
    assert run.status == 'queued'
    assert [c[3] for c in calls(emu, 'POST')] == [503, 200]


@pytest.mark.parametrize('status', [500, 502, 504])
async def test_a_server_error_on_create_is_not_retried_and_says_a_run_may_have_started(
    client: PerplexityClient, emu: Emulator, status: int
):
    with pytest.raises(InternalServerError) as info:
        await client.start(f'heat pumps [[emulate: {status}x1]]', effort='fast')
    assert 'A run may have started and been billed; the request was not re-sent' in str(info.value)
    assert info.value.status_code == status and info.value.request_id
    assert calls(emu, 'POST') == [('POST', '/v1/agent', '', status)]


async def test_a_read_timeout_on_create_is_not_retried(emu: Emulator):
    timeout = httpx2.Timeout(0.2, connect=5.0)
    async with PerplexityClient(api_key=emu.api_key, base_url=emu.base_url, timeout=timeout) as client:
        with pytest.raises(RunMayHaveStartedError, match='may have started and been billed') as info:
            await client.create('heat pumps [[emulate: slow=0.6]]', effort='fast')
    assert 'ReadTimeout' in str(info.value)
    with anyio.fail_after(5):
        while not calls(emu, 'POST'):  # the emulator records the request when it answers, after the delay
            await anyio.sleep(0.02)
    assert len(calls(emu, 'POST')) == 1


async def test_reads_are_retried_through_server_errors(
    client: PerplexityClient, emu: Emulator, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr('pydantic_ai_perplexity.client._retry.BACKOFF_INITIAL', 0.01)
    run = await client.start(f'heat pumps [[emulate: 500x2@retrieve, {QUICK}]]', effort='fast')
    again = await client.retrieve(run.id)
    assert again.id == run.id
    assert [c[3] for c in calls(emu, 'GET')] == [500, 500, 200]


# -- waiting ----------------------------------------------------------------------------------------------------


async def test_wait_follows_the_stream_with_one_or_two_requests(client: PerplexityClient, emu: Emulator):
    run = await client.start('a survey of heat pumps [[emulate: duration=90]]', effort='medium')
    events: list[AgentEvent] = []

    async def on_event(event: AgentEvent) -> None:
        events.append(event)

    final = await client.wait(run.id, timeout=10, on_event=on_event)
    assert final.status == 'completed' and final.output_text
    assert events[-1].type == 'response.completed'
    assert 1 <= len(calls(emu, 'GET')) <= 2
    seqs = [e.sequence_number for e in events]
    assert seqs == sorted(set(seqs)) and seqs[0] > 0


async def test_wait_resumes_after_a_drop_without_losing_events(client: PerplexityClient, emu: Emulator):
    stream = client.stream('heat pumps [[emulate: drop@3, duration=20]]', effort='low')
    async with stream as events:
        first = await events.__anext__()
    assert stream.response_id is not None
    seen: list[int] = []
    final = await client.wait(stream.response_id, timeout=10, on_event=lambda e: seen.append(e.sequence_number))
    assert final.status == 'completed'
    assert seen == sorted(set(seen)) and seen[0] == first.sequence_number + 1


async def test_wait_falls_back_to_polling_when_the_stream_is_unavailable(client: PerplexityClient, emu: Emulator):
    run = await client.start('heat pumps [[emulate: duration=30]]', effort='low')
    events: list[AgentEvent] = []
    final = await client.wait(run.id, timeout=10, on_event=events.append, starting_after=10_000, poll_interval=0.05)
    assert final.status == 'completed'
    assert events == []  # polling synthesises nothing
    gets = calls(emu, 'GET')
    assert gets[0] == ('GET', f'/v1/agent/{run.id}', 'stream=true&starting_after=10000', 400)
    assert len(gets) >= 2 and all(query == '' and status == 200 for _, _, query, status in gets[1:])


async def test_wait_returns_a_finished_run_at_once(client: PerplexityClient):
    run = await client.create('heat pumps', effort='fast')
    assert (await client.wait(run.id, timeout=5)).status == 'completed'


async def test_wait_timeout_leaves_the_run_going_and_retrievable(client: PerplexityClient, emu: Emulator):
    run = await client.start('a long survey of heat pumps [[emulate: duration=3000]]', effort='high')
    with pytest.raises(ResearchTimeoutError) as info:
        await client.wait(run.id, timeout=0.3)
    assert info.value.response_id == run.id
    assert 'goes on server-side and was not cancelled' in str(info.value)
    with pytest.raises(ResearchTimeoutError) as info:  # polling: the last snapshot seen comes with the error
        await client.wait(run.id, timeout=0.3, starting_after=10_000, poll_interval=0.05)
    assert info.value.last is not None and info.value.last.id == run.id and not info.value.last.done
    assert (await client.retrieve(run.id)).status in ('queued', 'in_progress')
    assert not [c for c in calls(emu) if c[1].endswith('/cancel')]


async def test_wait_for_an_unknown_run_raises_not_found(client: PerplexityClient):
    with pytest.raises(NotFoundError):
        await client.wait('resp_00000000-0000-0000-0000-000000000000', timeout=5, poll_interval=0.01)


# -- errors -----------------------------------------------------------------------------------------------------


async def test_unknown_and_unstored_runs_are_not_found(client: PerplexityClient):
    with pytest.raises(NotFoundError, match='store=False'):
        await client.retrieve('resp_00000000-0000-0000-0000-000000000000')
    run = await client.create('heat pumps', effort='fast', store=False)
    with pytest.raises(NotFoundError):
        await client.retrieve(run.id)


async def test_a_wrong_key_is_an_authentication_error(emu: Emulator):
    async with PerplexityClient(api_key='pplx-wrong', base_url=emu.base_url) as client:
        with pytest.raises(AuthenticationError, match='PERPLEXITY_API_KEY') as info:
            await client.retrieve('resp_1')
    assert info.value.status_code == 401 and 'pplx-wrong' not in str(info.value)


async def test_an_unknown_field_is_a_bad_request_naming_it(client: PerplexityClient):
    with pytest.raises(BadRequestError) as info:
        await client.create('heat pumps', effort='fast', extra_body={'colour': 'blue'})
    assert info.value.param == 'colour' and "parameter 'colour'" in str(info.value)


async def test_an_unreachable_remote_mcp_server_is_an_external_connector_error(client: PerplexityClient):
    tool: dict[str, Any] = {'type': 'mcp', 'server_label': 'github', 'server_url': 'https://mcp.example.invalid/mcp'}
    with pytest.raises(ExternalConnectorError) as info:
        await client.create('heat pumps', effort='fast', tools=[tool])
    assert info.value.server_label == 'github' and info.value.status_code == 424


async def test_a_body_over_32_mib_is_payload_too_large(client: PerplexityClient):
    with pytest.raises(PayloadTooLargeError, match='32 MiB'):
        await client.create('x' * (33 * 1024 * 1024), effort='fast')


async def test_a_malformed_create_answer_is_reported_once(client: PerplexityClient, emu: Emulator):
    with pytest.raises(MalformedResponseError, match='not JSON') as info:
        await client.create('heat pumps [[emulate: malformed]]', effort='fast')
    assert 'A run may have started' in str(info.value)
    assert len(calls(emu, 'POST')) == 1


async def test_retired_sonar_endpoints_are_named_as_such(client: PerplexityClient):
    transport = client._transport  # the client never calls these paths itself
    with pytest.raises(RetiredEndpointError, match='POST /v1/agent') as info:
        await transport.request_json('POST', '/chat/completions', kind='read', json_body={'model': 'sonar'})
    assert info.value.status_code == 403  # live: 403 chat_completions_not_available


async def test_the_sentinel_key_is_never_shown(emu: Emulator, caplog: pytest.LogCaptureFixture):
    caplog.set_level(logging.DEBUG)
    failures: list[PerplexityError] = []
    timeout = httpx2.Timeout(0.2, connect=5.0)
    async with PerplexityClient(api_key=SENTINEL_KEY, base_url=emu.base_url, timeout=timeout) as client:
        attempts: list[Any] = [
            client.create(f'heat pumps {SENTINEL_KEY} [[emulate: 500x1]]', effort='fast'),
            client.create('heat pumps [[emulate: 429x3, retry_after=0.01]]', effort='fast'),
            client.create('heat pumps [[emulate: malformed]]', effort='fast'),
            client.create('heat pumps [[emulate: slow=0.5]]', effort='fast'),
            client.create('heat pumps', effort='fast', extra_body={SENTINEL_KEY: 1}),
            client.cancel('resp_nope'),
            client.wait('resp_nope', timeout=1),
            client.wait((await client.start('x [[emulate: duration=3000]]', effort='high')).id, timeout=0.2),
            client._transport.request_json('GET', '/v1/sonar', kind='read'),
        ]
        for attempt in attempts:
            try:
                await attempt
            except PerplexityError as exc:
                failures.append(exc)
        texts = [repr(client), caplog.text]
    async with PerplexityClient(api_key='pplx-other', base_url=emu.base_url) as other:
        try:
            await other.retrieve('resp_1')
        except PerplexityError as exc:
            failures.append(exc)
    assert len(failures) == len(attempts) + 1
    for failure in failures:
        texts += [str(failure), repr(failure), repr(vars(failure)), ''.join(traceback.format_exception(failure))]
    assert caplog.records
    for text in texts:
        assert SENTINEL_KEY not in text
