"""Event streams: framing the contract does not promise but the wild sends, and resuming after drops.

These use httpx2's MockTransport for frames the emulator never sends (`event: error`, `[DONE]`, comments).
"""

from __future__ import annotations

from typing import Any

import anyio
import httpx2
import pytest

from pydantic_ai_perplexity._base.errors import (
    APIConnectionError,
    BadRequestError,
    MalformedResponseError,
    RunMayHaveStartedError,
)
from pydantic_ai_perplexity.client import AgentEvent, UnknownItem
from support.client import SENTINEL_KEY, mock_client, run_json, sse_response

pytestmark = pytest.mark.anyio


def created(seq: int = 0, run_id: str = 'resp_1') -> dict[str, Any]:
    return {'type': 'response.created', 'sequence_number': seq, 'response': run_json(run_id, 'in_progress')}


def delta(seq: int, text: str = 'x') -> dict[str, Any]:
    return {'type': 'response.output_text.delta', 'sequence_number': seq, 'delta': text}


def completed(seq: int, run_id: str = 'resp_1') -> dict[str, Any]:
    return {'type': 'response.completed', 'sequence_number': seq, 'response': run_json(run_id, 'completed')}


async def collect(events: Any) -> list[AgentEvent]:
    with anyio.fail_after(5):
        async with events:
            return [event async for event in events]


async def test_keepalives_comments_gaps_and_unknown_types_are_tolerated():
    body = (
        ': keep-alive comment\n\n',
        created(0),
        '\n\n',
        'event: ping\n\n',
        {'type': 'response.brand_new_thing', 'sequence_number': 3, 'payload': {'a': 1}},
        delta(7),
        {'sequence_number': 8, 'note': 'no type'},
        completed(41),
    )
    async with mock_client(lambda r: sse_response(*body)) as client:
        events = await collect(client.stream('q'))
    assert [(e.type, e.sequence_number) for e in events] == [
        ('response.created', 0),
        ('response.brand_new_thing', 3),
        ('response.output_text.delta', 7),
        ('message', 8),
        ('response.completed', 41),
    ]
    assert events[1].model_extra == {'payload': {'a': 1}}


async def test_done_line_ends_the_stream():
    body = (created(0), delta(1), 'data: [DONE]\n\n', delta(2))
    async with mock_client(lambda r: sse_response(*body)) as client:
        events = await collect(client.stream('q'))
    assert [e.sequence_number for e in events] == [0, 1]


@pytest.mark.parametrize(
    ('frame', 'message'),
    [
        ('event: error\ndata: {"message": "upstream overloaded", "code": 503}\n\n', 'upstream overloaded'),
        ('event: error\ndata: {"error": {"message": "boom", "type": "internal_error"}}\n\n', 'boom'),
        ('event: error\ndata: not json at all\n\n', 'not json at all'),
        ('event: error\ndata: {"type": "error", "sequence_number": 2, "error": {"message": "typed"}}\n\n', 'typed'),
        ({'type': 'error', 'sequence_number': 2, 'error': {'message': 'as event', 'code': 'x'}}, 'as event'),
    ],
)
async def test_error_frames_and_error_events_are_yielded_and_end_the_stream(frame: Any, message: str):
    async with mock_client(lambda r: sse_response(created(0), frame, delta(9))) as client:
        events = await collect(client.stream('q'))
    assert [e.type for e in events] == ['response.created', 'error']
    assert events[-1].is_terminal
    assert events[-1].error is not None and events[-1].error.message == message


async def test_the_create_body_asks_for_a_stored_background_stream():
    bodies: list[bytes] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        bodies.append(request.content)
        assert request.headers['accept'] == 'text/event-stream'
        return sse_response(created(0), completed(1))

    async with mock_client(handler) as client:
        await collect(client.stream('q', effort='fast'))
        await collect(client.stream('q', background=False, store=False))
    assert [httpx2.Response(200, content=b).json() for b in bodies] == [
        {'input': 'q', 'effort': 'fast', 'stream': True, 'background': True, 'store': True},
        {'input': 'q', 'store': False, 'stream': True},
    ]


def resuming_server(cut_after: int, total: int = 10, *, resend_from: int | None = None) -> tuple[Any, list[str]]:
    """A server whose first stream drops after `cut_after`; resumes replay from `resend_from` (default: cursor+1)."""
    calls: list[str] = []
    seqs = [created(0), *(delta(i, str(i)) for i in range(1, total)), completed(total)]

    def handler(request: httpx2.Request) -> httpx2.Response:
        calls.append(f'{request.method} {request.url.path}?{request.url.query.decode()}')
        if request.method == 'POST':
            return sse_response(*seqs[: cut_after + 1], drop=httpx2.ReadError('connection reset by peer'))
        after = int(request.url.params['starting_after'])
        start = resend_from if resend_from is not None else after + 1
        return sse_response(*seqs[start:])

    return handler, calls


async def test_a_dropped_background_stream_is_resumed_and_every_event_is_yielded_once_in_order():
    handler, calls = resuming_server(cut_after=5, resend_from=2)  # the server resends some: they are skipped
    async with mock_client(handler) as client:
        stream = client.stream('q')
        events = await collect(stream)
    assert [e.sequence_number for e in events] == list(range(11))
    assert calls == ['POST /v1/agent?', 'GET /v1/agent/resp_1?stream=true&starting_after=5']
    assert stream.response_id == 'resp_1' and stream.last_sequence_number == 10


async def test_a_clean_end_without_a_terminal_event_is_resumed_too():
    calls: list[str] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        calls.append(request.method)
        if request.method == 'POST':
            return sse_response(created(0), delta(1))
        return sse_response(delta(2), completed(3))

    async with mock_client(handler) as client:
        events = await collect(client.stream('q'))
    assert [e.sequence_number for e in events] == [0, 1, 2, 3]
    assert calls == ['POST', 'GET']


async def test_resume_gives_up_after_repeated_drops_without_progress(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr('pydantic_ai_perplexity.client._stream.backoff', lambda attempt: 0.0)
    calls: list[str] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        calls.append(request.method)
        if request.method == 'POST':
            return sse_response(created(0), drop=httpx2.ReadError('reset'))
        return sse_response(drop=httpx2.RemoteProtocolError('peer closed connection'))

    async with mock_client(handler) as client:
        with pytest.raises(APIConnectionError, match=r"dropped 4 times in a row .*wait\('resp_1'") as info:
            await collect(client.stream('q'))
    assert calls == ['POST', 'GET', 'GET', 'GET', 'GET']
    assert SENTINEL_KEY not in str(info.value)


async def test_a_dropped_foreground_stream_is_not_resumed():
    def handler(request: httpx2.Request) -> httpx2.Response:
        assert request.method == 'POST'
        return sse_response(created(0), delta(1), drop=httpx2.ReadError('reset'))

    async with mock_client(handler) as client:
        got: list[int] = []
        with pytest.raises(APIConnectionError, match='not started with background=True') as info:
            async with client.stream('q', background=False) as events:
                async for event in events:  # a loop, not a comprehension: it ends in the exception
                    got.append(event.sequence_number)
    assert got == [0, 1]
    assert not isinstance(info.value, RunMayHaveStartedError)


async def test_a_stream_dropped_before_the_run_id_arrived_says_a_run_may_have_started():
    async with mock_client(lambda r: sse_response(drop=httpx2.ReadError('reset'))) as client:
        with pytest.raises(RunMayHaveStartedError, match='may go on and be billed'):
            await collect(client.stream('q'))


async def test_resume_reads_from_the_cursor_and_reports_an_expired_one():
    def handler(request: httpx2.Request) -> httpx2.Response:
        if request.url.params['starting_after'] == '3':
            return sse_response(delta(4), completed(5))
        return httpx2.Response(400, json={'error': {'message': 'cursor expired', 'type': 'invalid_request'}})

    async with mock_client(handler) as client:
        events = await collect(client.resume('resp_1', starting_after=3))
        assert [e.sequence_number for e in events] == [4, 5]
        with pytest.raises(BadRequestError, match='cursor expired'):
            await collect(client.resume('resp_1', starting_after=99))


async def test_a_non_event_stream_answer_is_malformed():
    async with mock_client(lambda r: httpx2.Response(200, json=run_json())) as client:
        with pytest.raises(MalformedResponseError, match="'application/json' instead of an event stream") as info:
            await collect(client.stream('q'))
        assert 'A run may have started' in str(info.value)
        with pytest.raises(MalformedResponseError, match='instead of an event stream') as info:
            await collect(client.resume('resp_1'))
        assert 'A run may have started' not in str(info.value)

    async with mock_client(lambda r: sse_response('data: {not json\n\n')) as client:
        with pytest.raises(MalformedResponseError, match='not JSON'):
            await collect(client.resume('resp_1'))
    async with mock_client(lambda r: sse_response('data: [1, 2]\n\n')) as client:
        with pytest.raises(MalformedResponseError, match='not a JSON object'):
            await collect(client.resume('resp_1'))


async def test_a_stream_left_early_closes_its_connection():
    closed: list[bool] = []

    class Tracking(httpx2.AsyncByteStream):
        async def __aiter__(self) -> Any:
            yield b'data: {"type": "response.created", "sequence_number": 0, "response": {"id": "r"}}\n\n'
            yield b'data: {"type": "response.in_progress", "sequence_number": 1}\n\n'

        async def aclose(self) -> None:
            closed.append(True)

    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={'content-type': 'text/event-stream'}, stream=Tracking())

    async with mock_client(handler) as client:
        async with client.stream('q') as events:
            async for _ in events:
                break
    assert closed == [True]


# -- wait() on frames the emulator never sends -------------------------------------------------------------------


async def test_wait_retrieves_the_final_run_when_the_terminal_event_carries_no_snapshot():
    requests: list[str] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        requests.append(str(request.url.query.decode()))
        if request.url.params.get('stream') == 'true':
            failed = {'type': 'response.failed', 'sequence_number': 3, 'error': {'message': 'model overloaded'}}
            return sse_response(delta(2), failed)
        return httpx2.Response(200, json=run_json(status='failed', error={'message': 'model overloaded'}))

    async with mock_client(handler) as client:
        final = await client.wait('resp_1', timeout=5)
    assert final.status == 'failed' and final.error is not None
    assert requests == ['stream=true&starting_after=0', '']


async def test_wait_polls_on_after_an_error_event_while_the_run_goes_on():
    states = iter(['in_progress', 'completed'])
    seen: list[str] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        if request.url.params.get('stream') == 'true':
            return sse_response(delta(1), {'type': 'error', 'sequence_number': 2, 'error': {'message': 'stream lost'}})
        return httpx2.Response(200, json=run_json(status=next(states)))

    async with mock_client(handler) as client:
        final = await client.wait('resp_1', timeout=5, on_event=lambda e: seen.append(e.type), poll_interval=0.01)
    assert final.status == 'completed'
    assert seen == ['response.output_text.delta', 'error']


async def test_wait_lets_errors_of_on_event_through():
    async with mock_client(lambda r: sse_response(delta(1), completed(2))) as client:

        async def on_event(event: AgentEvent) -> None:
            raise BadRequestError('raised by the callback', status_code=400)

        with pytest.raises(BadRequestError, match='raised by the callback'):
            await client.wait('resp_1', timeout=5, on_event=on_event)


async def test_wait_returns_a_run_that_requires_action():
    def handler(request: httpx2.Request) -> httpx2.Response:
        if request.url.params.get('stream') == 'true':
            return httpx2.Response(400, json={'error': {'message': 'no stream', 'type': 'invalid_request'}})
        return httpx2.Response(200, json=run_json(status='requires_action'))

    async with mock_client(handler) as client:
        assert (await client.wait('resp_1', timeout=5)).status == 'requires_action'


async def test_unknown_output_item_types_are_kept_in_events_and_runs():
    # `sandbox_results` is modelled since the opt-in tools; an item type no model knows stands in for the unknown.
    item = {'type': 'sandbox_grep', 'call_id': 'c1', 'code': 'print(1)', 'results': [{'stdout': '1'}]}
    added = {'type': 'response.output_item.added', 'sequence_number': 1, 'output_index': 0, 'item': item}

    def handler(request: httpx2.Request) -> httpx2.Response:
        if request.method == 'GET':
            return httpx2.Response(200, json=run_json(output=[item]))
        return sse_response(created(0), added, completed(2))

    async with mock_client(handler) as client:
        events = await collect(client.stream('q'))
        run = await client.retrieve('resp_1')
    parsed = events[1].item_
    assert isinstance(parsed, UnknownItem) and parsed.type == 'sandbox_grep'
    assert parsed.model_extra == {'call_id': 'c1', 'code': 'print(1)', 'results': [{'stdout': '1'}]}
    assert isinstance(run.output[0], UnknownItem) and run.output[0].model_dump() == item
