"""Conformance with the official `perplexityai` SDK (0.46.1): everything the emulator serves, the SDK parses.

Non-stream bodies are also checked with the SDK's strict validation (`_strict_response_validation=True`):
the SDK models are what Perplexity generates from its own API description.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import perplexity
import pytest
from perplexity import AsyncPerplexity, Perplexity
from perplexity.generated import api as sdk

from pydantic_ai_perplexity.client._models import parse_event, parse_response
from pydantic_ai_perplexity.emulator import Emulator
from support.emulator import poll

#: The SDK class each event type must validate against strictly (the SDK's union has no discriminator).
EVENT_CLASSES: dict[str, type[Any]] = {
    'response.created': sdk.ResponseCreatedEventOutput,
    'response.in_progress': sdk.ResponseInProgressEventOutput,
    'response.completed': sdk.ResponseCompletedEventOutput,
    'response.failed': sdk.ResponseFailedEventOutput,
    'response.output_item.added': sdk.OutputItemAddedEventOutput,
    'response.output_item.done': sdk.OutputItemDoneEventOutput,
    'response.output_text.delta': sdk.TextDeltaEventOutput,
    'response.output_text.done': sdk.TextDoneEventOutput,
    'response.reasoning.started': sdk.ReasoningStartedEventOutput,
    'response.reasoning.search_queries': sdk.SearchQueriesEventOutput,
    'response.reasoning.search_results': sdk.SearchResultsEventOutput,
    'response.reasoning.fetch_url_queries': sdk.FetchUrlQueriesEventOutput,
    'response.reasoning.fetch_url_results': sdk.FetchUrlResultsEventOutput,
    'response.reasoning.stopped': sdk.ReasoningStoppedEventOutput,
}


@pytest.fixture
def pplx(emu: Emulator) -> Iterator[Perplexity]:
    with Perplexity(
        base_url=emu.base_url, api_key=emu.api_key, max_retries=0, _strict_response_validation=True
    ) as client:
        yield client


@pytest.fixture
def lenient(emu: Emulator) -> Iterator[Perplexity]:
    """A client as users have it (lenient parsing): streams need it, since live events do not all fit the SDK union."""
    with Perplexity(base_url=emu.base_url, api_key=emu.api_key, max_retries=0) as client:
        yield client


def check_event(event: Any) -> str:
    """Validate one SDK-parsed event strictly against the class its type names, and with our client models."""
    data = event.model_dump(mode='json', by_alias=True, exclude_unset=True)
    parse_event(data)
    kind = data['type']
    is_message_announcement = kind == 'response.output_item.added' and data['item'].get('content', []) is None
    if kind in EVENT_CLASSES and not is_message_announcement:  # the live quirk: content null does not fit the SDK
        EVENT_CLASSES[kind].model_validate(data)
    return kind


def test_create_parses_and_output_text_works(pplx: Perplexity):
    response = pplx.responses.create(input='What is the EU AI Act?', effort='fast')
    assert isinstance(response, sdk.ResponsesResponseOutput)
    assert response.status == 'completed' and response.model == 'openai/gpt-6-luna'  # fast, per the live capture
    assert '[1]' in response.output_text and 'AI Act' in response.output_text
    assert response.usage is not None and response.usage.cost is not None and response.usage.cost.total_cost > 0
    kinds = [type(item).__name__ for item in response.output]
    assert kinds == ['SearchResultsOutputItemOutput', 'MessageOutputItemOutput']
    parse_response(response.model_dump(mode='json', by_alias=True))


def test_every_effort_and_option_parses_strictly(pplx: Perplexity):
    for effort in ('fast', 'low', 'medium'):
        response = pplx.responses.create(
            input='Electric vehicles [[emulate: mcp]]',
            effort=effort,
            tools=[{'type': 'web_search', 'filters': {'search_domain_filter': ['iea.org', 'energy.gov']}}],
            instructions='Be brief.',
        )
        assert response.status == 'completed' and response.output_text
        assert {type(item).__name__ for item in response.output} >= {
            'McpListToolsOutputItemOutput',
            'McpCallOutputItemOutput',
        }


def test_a_background_run_is_polled_with_retrieve_until_terminal(pplx: Perplexity):
    started = pplx.responses.create(
        input='Heat pumps in Europe [[emulate: duration=60]]', effort='low', background=True
    )
    assert started.status == 'queued' and started.output == [] and started.usage is None
    done = poll(
        lambda: {'r': pplx.responses.retrieve(started.id)},
        lambda d: d['r'].status in ('completed', 'failed', 'cancelled'),
    )['r']
    assert done.status == 'completed' and done.output_text and done.id == started.id


def test_cancel_acknowledges_and_the_run_ends_cancelled(pplx: Perplexity):
    started = pplx.responses.create(input='Long [[emulate: duration=9000]]', effort='medium', background=True)
    ack = pplx.responses.cancel(started.id)
    assert isinstance(ack, sdk.ResponsesCancelResponseOutput)
    assert (ack.response_id, ack.status) == (started.id, 'cancelling')
    done = poll(lambda: {'r': pplx.responses.retrieve(started.id)}, lambda d: d['r'].status == 'cancelled')['r']
    assert done.error is not None and done.error.code == 'cancelled'


def test_a_stream_is_iterated_to_the_end_with_correct_types(lenient: Perplexity):
    with lenient.responses.create(input='Quantum computing roadmap', effort='low', stream=True) as stream:
        kinds = [check_event(event) for event in stream]
    assert kinds[0] == 'response.created' and kinds[-1] == 'response.completed'
    assert {'response.reasoning.search_queries', 'response.output_text.delta', 'response.output_text.done'} <= set(
        kinds
    )


def test_a_stream_is_resumed_with_retrieve_starting_after(lenient: Perplexity):
    with lenient.responses.create(
        input='Artemis II [[emulate: duration=30]]', effort='fast', stream=True, background=True
    ) as stream:
        events = list(stream)
    rid = events[0].response.id  # type: ignore[union-attr]
    cursor = events[4].sequence_number
    with lenient.responses.retrieve(rid, stream=True, starting_after=cursor) as resumed:
        rest = list(resumed)
    assert [e.sequence_number for e in rest] == [e.sequence_number for e in events if e.sequence_number > cursor]
    assert [check_event(e) for e in rest][-1] == 'response.completed'


def test_failed_and_incomplete_runs_parse(pplx: Perplexity, lenient: Perplexity):
    failed = pplx.responses.create(input='x [[emulate: fail]]', effort='fast')
    assert failed.status == 'failed' and failed.error is not None and failed.error.message
    incomplete = lenient.responses.create(input='x [[emulate: incomplete]]', effort='fast')
    assert incomplete.status == 'incomplete' and incomplete.output_text  # not in the SDK's status enum: lenient only
    with lenient.responses.create(input='x [[emulate: fail]]', effort='fast', stream=True) as stream:
        kinds = [check_event(e) for e in stream]
    assert kinds[-1] == 'response.failed'


def test_search_and_models(pplx: Perplexity):
    found = pplx.search.create(query='EU AI Act obligations', max_results=3, display_server_time=True)
    assert isinstance(found, sdk.ApiSearchResponseOutput)
    assert 0 < len(found.results) <= 3 and found.server_time
    assert all(r.url.startswith('https://') and r.title and r.snippet for r in found.results)
    multi = pplx.search.create(query=['heat pumps', 'solar costs'], search_domain_filter=['-iea.org'])
    assert multi.results and not any('iea.org' in r.url for r in multi.results)
    models = pplx.models.list()
    ids = {m.id for m in models.data}
    assert {'perplexity/sonar', 'openai/gpt-5.5', 'anthropic/claude-opus-4-7', 'openai/gpt-6-luna'} <= ids
    assert all(m.object == 'model' and m.owned_by == m.id.split('/')[0] for m in models.data)


def test_sdk_errors_for_400_401_404_429_500(emu: Emulator, pplx: Perplexity):
    with pytest.raises(perplexity.BadRequestError) as bad:
        pplx.responses.create(input='q', effort='fast', extra_body={'search_mode': 'web'})
    assert bad.value.status_code == 400 and bad.value.body['error']['param'] == 'search_mode'  # type: ignore[index]
    with pytest.raises(perplexity.BadRequestError):
        pplx.responses.create(input='q', effort='turbo')
    with pytest.raises(perplexity.NotFoundError):
        pplx.responses.retrieve('resp_00000000-0000-0000-0000-000000000000')
    with pytest.raises(perplexity.BadRequestError):  # live: a malformed id is a 400
        pplx.responses.retrieve('resp_does_not_exist')
    with pytest.raises(perplexity.BadRequestError):  # live: cancelling an unknown id is a 400
        pplx.responses.cancel('resp_00000000-0000-0000-0000-000000000000')
    with pytest.raises(perplexity.RateLimitError):
        pplx.responses.create(input='q [[emulate: 429x1]]', effort='fast')
    with pytest.raises(perplexity.InternalServerError):
        pplx.responses.create(input='q [[emulate: 500x1]]', effort='fast')
    with Perplexity(base_url=emu.base_url, api_key='pplx-wrong', max_retries=0) as wrong:
        with pytest.raises(perplexity.AuthenticationError):
            wrong.responses.create(input='q', effort='fast')
        with pytest.raises(perplexity.AuthenticationError):  # live: /v1/models needs a key too
            wrong.models.list()


def test_the_sdk_retries_429_with_retry_after_zero(emu: Emulator):
    with Perplexity(base_url=emu.base_url, api_key=emu.api_key, max_retries=2) as retrying:
        response = retrying.responses.create(input='Retry me [[emulate: 429x2, retry_after=0.01]]', effort='fast')
    assert response.status == 'completed'
    assert [r.status for r in emu.requests if r.method == 'POST'] == [429, 429, 200]


@pytest.mark.anyio
async def test_the_async_client_streams_and_polls(emu: Emulator):
    async with AsyncPerplexity(base_url=emu.base_url, api_key=emu.api_key, max_retries=0) as client:
        response = await client.responses.create(input='Sleep needs of teenagers', effort='fast')
        assert response.output_text
        stream = await client.responses.create(input='Sleep needs of adults', effort='fast', stream=True)
        kinds = [check_event(event) async for event in stream]
        assert kinds[-1] == 'response.completed'
        found = await client.search.create(query='sleep')
        assert found.results
