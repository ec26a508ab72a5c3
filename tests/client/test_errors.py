"""Errors: every status and network failure maps to its class with an actionable message, never the key."""

from __future__ import annotations

import logging
import socket
import traceback
from collections.abc import Callable
from typing import Any

import httpx2
import pytest

from pydantic_ai_perplexity._base.errors import (
    APIConnectionError,
    APIStatusError,
    APITimeoutError,
    AuthenticationError,
    BadRequestError,
    ExternalConnectorError,
    MalformedResponseError,
    NotFoundError,
    PayloadTooLargeError,
    PermissionDeniedError,
    PerplexityError,
    RateLimitError,
    RetiredEndpointError,
    RunMayHaveStartedError,
)
from pydantic_ai_perplexity.client import PerplexityClient
from support.client import SENTINEL_KEY, mock_client, run_json

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        'pydantic_ai_perplexity.client._transport.retry_delay', lambda attempt, headers=None, status=None: 0.0
    )


def answer(status: int, body: Any = None, *, text: str | None = None, headers: dict[str, str] | None = None) -> Any:
    def handler(request: httpx2.Request) -> httpx2.Response:
        if text is not None:
            return httpx2.Response(status, text=text, headers=headers)
        if body is None:
            return httpx2.Response(status, headers=headers)
        return httpx2.Response(status, json=body, headers=headers)

    return handler


def envelope(message: str, kind: str, param: str | None = None) -> dict[str, Any]:
    error: dict[str, Any] = {'message': message, 'type': kind, 'code': 400}
    if param:
        error['param'] = param
    return {'error': error}


CASES: list[tuple[int, Any, type[APIStatusError], str]] = [
    (400, envelope('invalid request body: json: unknown field "colour"', 'invalid_request', 'colour'),
     BadRequestError, "rejected parameter 'colour'"),
    (401, envelope('invalid api key', 'authentication_error'), AuthenticationError, 'check that PERPLEXITY_API_KEY'),
    (403, {'message': 'key blocked'}, PermissionDeniedError, 'key is active'),
    (404, None, NotFoundError, 'store=False'),
    (413, envelope('body too large', 'payload_too_large'), PayloadTooLargeError, '32 MiB'),
    (424, envelope('MCP server "github" could not be initialized', 'external_connector_error'),
     ExternalConnectorError, "remote MCP server 'github'"),
    (410, envelope('Sonar is now the Agent API: use /v1/agent', 'gone'), RetiredEndpointError, 'POST /v1/agent'),
    (400, {'detail': 'Sonar is now the Agent API.'}, RetiredEndpointError, 'POST /v1/agent'),
    (422, {'detail': [{'loc': ['body', 'query'], 'msg': 'field required', 'type': 'missing'}]},
     BadRequestError, "parameter 'query': query: field required"),
    (418, {'detail': 'short and stout'}, APIStatusError, 'short and stout'),
    (409, None, APIStatusError, 'Conflict'),
]  # fmt: skip


@pytest.mark.parametrize(('status', 'body', 'cls', 'phrase'), CASES)
async def test_statuses_map_to_their_classes_with_actionable_messages(
    status: int, body: Any, cls: type[APIStatusError], phrase: str
):
    headers = {'x-request-id': 'req_42'}
    async with mock_client(answer(status, body, headers=headers), max_retries=0) as client:
        with pytest.raises(cls) as info:
            await client.retrieve('resp_1')
    error = info.value
    assert type(error) is cls
    assert phrase in str(error)
    assert error.status_code == status and error.request_id == 'req_42'
    assert error.method == 'GET' and error.path == '/v1/agent/resp_1'
    assert 'req_42' in str(error)


async def test_error_fields_are_parsed_from_every_body_shape():
    shapes: list[tuple[Any, str, str | None, str | None]] = [
        (envelope('bad slug', 'invalid_model', 'model'), 'bad slug', 'invalid_model', 'model'),
        ({'error': 'plain string error'}, 'plain string error', None, None),
        ({'message': 'flat', 'type': 'invalid_parameter', 'param': 'top_p'}, 'flat', 'invalid_parameter', 'top_p'),
        ({'detail': 'fastapi string'}, 'fastapi string', None, None),
        ({'detail': [{'loc': ['body', 'filters', 0], 'msg': 'bad'}, {'loc': [], 'msg': 'worse'}, 'odd']},
         'filters.0: bad; worse; odd', None, 'filters.0'),
        ('just a string', 'just a string', None, None),
    ]  # fmt: skip
    for body, message, kind, param in shapes:
        async with mock_client(answer(400, body)) as client:
            with pytest.raises(BadRequestError) as info:
                await client.search('q')
        assert message in str(info.value)
        assert (info.value.type, info.value.param, info.value.body) == (kind, param, body)

    async with mock_client(answer(400, text='<html>Bad   gateway\npage</html>')) as client:
        with pytest.raises(BadRequestError, match='<html>Bad gateway page</html>'):
            await client.search('q')
    async with mock_client(answer(400, text='')) as client:
        with pytest.raises(BadRequestError, match='Bad Request'):
            await client.search('q')


async def test_rate_limits_are_retried_then_raised_with_retry_after():
    calls: list[int] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        calls.append(1)
        body = envelope('slow down', 'request_rate_limit_exceeded')
        return httpx2.Response(429, json=body, headers={'retry-after': '7'})

    async with mock_client(handler, max_retries=3) as client:
        with pytest.raises(RateLimitError, match='after 4 attempts: retry after 7 s') as info:
            await client.create('q')
    assert len(calls) == 4 and info.value.retry_after == 7.0


Decision = Callable[[httpx2.Request], httpx2.Response]


def sequence(*answers: httpx2.Response | Exception) -> tuple[Decision, list[str]]:
    """A handler answering (or raising) each item in turn, then repeating the last."""
    calls: list[str] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        item = answers[min(len(calls), len(answers) - 1)]
        calls.append(request.method)
        if isinstance(item, Exception):
            raise item
        return item

    return handler, calls


OK = httpx2.Response(200, json=run_json())


@pytest.mark.parametrize(
    ('first', 'retried'),
    [
        (httpx2.ConnectError('refused'), True),
        (httpx2.ConnectTimeout('connect timeout'), True),
        (httpx2.PoolTimeout('pool'), True),
        (httpx2.Response(429), True),
        (httpx2.Response(503, headers={'retry-after': '1'}), True),
        (httpx2.Response(503), False),
        (httpx2.Response(500), False),
        (httpx2.Response(502), False),
        (httpx2.Response(504), False),
        (httpx2.Response(408), False),
        (httpx2.Response(429, headers={'x-should-retry': 'false'}), False),
        (httpx2.Response(500, headers={'x-should-retry': 'true'}), False),
        (httpx2.ReadTimeout('read timeout'), False),
        (httpx2.ReadError('reset'), False),
        (httpx2.RemoteProtocolError('Server disconnected without sending a response.'), False),
        (httpx2.WriteError('broken pipe'), False),
    ],
)
async def test_a_create_is_retried_only_where_no_run_can_have_started(first: Any, retried: bool):
    handler, calls = sequence(first, OK)
    async with mock_client(handler) as client:
        if retried:
            assert (await client.start('q')).id == 'resp_1'
            assert calls == ['POST', 'POST']
            return
        with pytest.raises(PerplexityError) as info:
            await client.start('q')
    assert calls == ['POST']
    proven_refused = isinstance(first, httpx2.Response) and first.status_code == 429
    noted = 'A run may have started and been billed; the request was not re-sent' in str(info.value)
    assert noted is not proven_refused
    if isinstance(first, Exception):
        assert isinstance(info.value, RunMayHaveStartedError)


@pytest.mark.parametrize(
    ('first', 'retried'),
    [
        (httpx2.ConnectError('refused'), True),
        (httpx2.ReadTimeout('read timeout'), True),
        (httpx2.ReadError('reset'), True),
        (httpx2.Response(408), True),
        (httpx2.Response(409), True),
        (httpx2.Response(429), True),
        (httpx2.Response(500), True),
        (httpx2.Response(503), True),
        (httpx2.Response(500, headers={'x-should-retry': 'false'}), False),
        (httpx2.Response(400, headers={'x-should-retry': 'true'}), True),
        (httpx2.Response(400), False),
        (httpx2.UnsupportedProtocol('nope'), False),
    ],
)
async def test_reads_are_retried_on_transient_failures(first: Any, retried: bool):
    handler, calls = sequence(first, OK)
    async with mock_client(handler) as client:
        if retried:
            await client.retrieve('resp_1')
            assert calls == ['GET', 'GET']
        else:
            with pytest.raises(PerplexityError):
                await client.retrieve('resp_1')
            assert calls == ['GET']


async def test_network_failures_of_reads_map_to_connection_and_timeout_errors():
    handler, calls = sequence(httpx2.ReadTimeout('timed out'))
    async with mock_client(handler, max_retries=2) as client:
        with pytest.raises(APITimeoutError, match=r'timed out after 3 attempts .*timeout=') as timeout_info:
            await client.cancel('resp_1')
    assert calls == ['POST'] * 3
    assert not isinstance(timeout_info.value, RunMayHaveStartedError)

    handler, calls = sequence(httpx2.ReadError('reset'))
    async with mock_client(handler, max_retries=1) as client:
        with pytest.raises(APIConnectionError, match='could not reach the API after 2 attempts'):
            await client.models()


async def test_a_refused_connection_is_retried_and_reported(monkeypatch: pytest.MonkeyPatch):
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        port = sock.getsockname()[1]
    async with PerplexityClient(api_key=SENTINEL_KEY, base_url=f'http://127.0.0.1:{port}', max_retries=1) as client:
        with pytest.raises(APIConnectionError) as info:
            await client.create('q')
    assert type(info.value) is APIConnectionError
    assert 'ConnectError' in str(info.value) and 'after 2 attempts' in str(info.value)


async def test_retry_after_beyond_the_deadline_is_not_waited_for(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.undo()  # the real delays: the server asks for 30 s, the deadline allows 1 s
    handler, calls = sequence(httpx2.Response(429, headers={'retry-after': '30'}), OK)
    async with mock_client(handler, retry_deadline=1.0) as client:
        with pytest.raises(RateLimitError) as info:
            await client.search('q')
    assert calls == ['POST'] and info.value.retry_after == 30.0


async def test_a_2xx_body_that_is_not_json_or_not_the_model_is_malformed():
    async with mock_client(answer(200, text='<html>captive portal</html>')) as client:
        with pytest.raises(MalformedResponseError, match='not JSON') as info:
            await client.create('q')
        assert 'A run may have started' in str(info.value)
        assert info.value.body == '<html>captive portal</html>'
    async with mock_client(answer(200, {'no': 'id'})) as client:
        with pytest.raises(MalformedResponseError, match='not a Response'):
            await client.retrieve('resp_1')
    async with mock_client(answer(200, {'data': 'not a list'})) as client:
        with pytest.raises(MalformedResponseError, match='not a ModelList'):
            await client.models()


async def test_unknown_arguments_are_refused_before_anything_is_sent():
    handler, calls = sequence(OK)
    async with mock_client(handler) as client:
        with pytest.raises(TypeError, match=r"'colour'.*extra_body"):
            await client.create('q', colour='blue')  # type: ignore[call-arg]
        with pytest.raises(TypeError, match="'stream'"):
            await client.start('q', stream=True)  # type: ignore[call-arg]
        with pytest.raises(TypeError, match="'effort'"):
            await client.search('q', effort='fast')  # type: ignore[call-arg]
    assert calls == []


async def test_requests_send_exactly_the_keys_given():
    bodies: list[Any] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        bodies.append(httpx2.Response(200, content=request.content).json())
        return httpx2.Response(200, json=run_json() if request.url.path != '/search' else {'id': 's', 'results': []})

    async with mock_client(handler) as client:
        await client.create('q')
        await client.create([{'role': 'user', 'content': 'hi'}], preset='low', max_steps=3)
        await client.create('q', preset='low', effort='high', extra_body={'brand_new': 1})
        await client.start('q', model='openai/gpt-5.4', store=False)
        await client.search(['a', 'b'], max_results=3, extra_body={'x': True})
    assert bodies == [
        {'input': 'q'},
        {'input': [{'role': 'user', 'content': 'hi'}], 'max_steps': 3, 'effort': 'low'},
        {'input': 'q', 'effort': 'high', 'brand_new': 1},
        {'input': 'q', 'model': 'openai/gpt-5.4', 'store': False, 'background': True},
        {'query': ['a', 'b'], 'max_results': 3, 'x': True},
    ]


async def test_the_key_appears_in_no_message_repr_log_or_traceback(caplog: pytest.LogCaptureFixture):
    """Every error path, with a server that even echoes the key back in its error text."""
    caplog.set_level(logging.DEBUG)
    echo = f'bad key {SENTINEL_KEY}'
    handlers: list[Any] = [
        answer(status, envelope(echo, 'x', 'p')) for status in (400, 401, 403, 404, 410, 413, 424, 429, 500, 503)
    ]
    handlers += [answer(422, {'detail': [{'loc': ['body', SENTINEL_KEY], 'msg': echo}]}), answer(200, text=echo)]
    failures = (httpx2.ReadTimeout(echo), httpx2.ConnectError(echo), httpx2.ReadError(echo))
    handlers += [sequence(exc)[0] for exc in failures]
    errors: list[BaseException] = []
    for handler in handlers:
        async with mock_client(handler, max_retries=1) as client:
            for call in (client.create('q'), client.retrieve('r'), client.search('q')):
                try:
                    await call
                except PerplexityError as exc:
                    errors.append(exc)
            assert SENTINEL_KEY not in repr(client)
    assert len(errors) == len(handlers) * 3
    for error in errors:
        text = ''.join(traceback.format_exception(error)) + repr(error) + repr(vars(error))
        assert SENTINEL_KEY not in text
    assert caplog.records and SENTINEL_KEY not in caplog.text
    assert all(r.name == 'pydantic_ai_perplexity' for r in caplog.records if r.name.startswith('pydantic'))
