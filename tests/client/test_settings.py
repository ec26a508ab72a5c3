"""Settings: where the key and base URL come from, what makes a base URL safe, and the client's lifecycle."""

from __future__ import annotations

import httpx2
import pytest
from pydantic import SecretStr

from pydantic_ai_perplexity._base.errors import ConfigurationError
from pydantic_ai_perplexity.client import PerplexityClient
from support.client import SENTINEL_KEY, mock_client, run_json

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ('given', 'expected'),
    [
        ('https://api.perplexity.ai', 'https://api.perplexity.ai'),
        ('https://api.perplexity.ai/', 'https://api.perplexity.ai'),
        ('HTTPS://Proxy.example.com:8443/perplexity/', 'https://proxy.example.com:8443/perplexity'),
        ('http://127.0.0.1:8080', 'http://127.0.0.1:8080'),
        ('http://127.10.0.3', 'http://127.10.0.3'),
        ('http://localhost:9000', 'http://localhost:9000'),
        ('http://[::1]:9000', 'http://[::1]:9000'),
    ],
)
async def test_safe_base_urls_are_accepted_and_normalised(given: str, expected: str):
    async with PerplexityClient(base_url=given) as client:
        assert client.base_url == expected


@pytest.mark.parametrize(
    ('given', 'reason'),
    [
        ('http://api.perplexity.ai', 'clear text'),
        ('http://10.0.0.5:8000', 'clear text'),
        ('http://localhost.example.com', 'clear text'),
        ('ftp://api.perplexity.ai', 'absolute http(s) URL'),
        ('api.perplexity.ai', 'absolute http(s) URL'),
        ('', 'absolute http(s) URL'),
        ('https://user:secret@api.perplexity.ai', 'credentials'),
        ('https://api.perplexity.ai/?key=x', 'query string'),
        ('https://[::1', 'not a valid URL'),
    ],
)
def test_unsafe_base_urls_are_refused_with_the_reason(given: str, reason: str):
    with pytest.raises(ConfigurationError) as info:
        PerplexityClient(base_url=given)
    assert reason in str(info.value)
    assert 'secret' not in str(info.value)


def test_base_url_comes_from_the_environment_at_construction(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv('PERPLEXITY_BASE_URL', 'http://example.com')
    with pytest.raises(ConfigurationError, match='PERPLEXITY_BASE_URL'):
        PerplexityClient()
    monkeypatch.setenv('PERPLEXITY_BASE_URL', 'http://127.0.0.1:1234/')
    assert PerplexityClient(http_client=httpx2.AsyncClient()).base_url == 'http://127.0.0.1:1234'


def test_default_base_url_is_the_public_api():
    assert PerplexityClient(http_client=httpx2.AsyncClient()).base_url == 'https://api.perplexity.ai'


async def test_a_missing_key_is_reported_when_a_call_needs_it():
    seen: list[httpx2.Request] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        return httpx2.Response(200, json={'object': 'list', 'data': [{'id': 'openai/gpt-5.4'}]})

    async with mock_client(handler, api_key=None) as client:
        assert [m.id for m in await client.models()] == ['openai/gpt-5.4']
        assert 'authorization' not in seen[0].headers
        for call in (client.create('q'), client.start('q'), client.retrieve('resp_1'), client.search('q')):
            with pytest.raises(ConfigurationError, match='PERPLEXITY_API_KEY'):
                await call
        with pytest.raises(ConfigurationError, match='PERPLEXITY_API_KEY'):
            client.stream('q')
        with pytest.raises(ConfigurationError, match='PERPLEXITY_API_KEY'):
            await client.wait('resp_1', timeout=1)
    assert len(seen) == 1


async def test_a_blank_key_counts_as_missing(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv('PERPLEXITY_API_KEY', '   ')
    async with mock_client(lambda r: httpx2.Response(200, json=run_json()), api_key=None) as client:
        with pytest.raises(ConfigurationError, match='PERPLEXITY_API_KEY'):
            await client.retrieve('resp_1')


async def test_the_key_comes_from_the_environment_and_travels_only_in_the_authorization_header(
    monkeypatch: pytest.MonkeyPatch,
):
    monkeypatch.setenv('PERPLEXITY_API_KEY', f'  {SENTINEL_KEY}\n')
    seen: list[httpx2.Request] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        return httpx2.Response(200, json=run_json())

    async with mock_client(handler, api_key=None) as client:
        await client.retrieve('resp_1')
        await client.create('q')
    for request in seen:
        assert request.headers['authorization'] == f'Bearer {SENTINEL_KEY}'
        assert SENTINEL_KEY not in str(request.url)
        assert SENTINEL_KEY.encode() not in request.content


@pytest.mark.parametrize('bad', ['pplx-abc def', 'pplx-abc\ndef', 'pplx-ключ'])
def test_a_key_that_cannot_be_a_header_is_refused_without_showing_it(bad: str):
    with pytest.raises(ConfigurationError) as info:
        PerplexityClient(api_key=bad)
    assert bad not in str(info.value)
    assert 'api_key' in str(info.value)


def test_repr_shows_the_base_url_only():
    client = PerplexityClient(api_key=SENTINEL_KEY, http_client=httpx2.AsyncClient())
    assert repr(client) == "PerplexityClient(base_url='https://api.perplexity.ai')"
    assert SENTINEL_KEY not in repr(vars(client))
    assert SENTINEL_KEY not in repr(vars(client._transport))


@pytest.mark.parametrize(('setting', 'value'), [('max_retries', -1), ('retry_deadline', -0.5)])
def test_negative_retry_settings_are_refused(setting: str, value: float):
    with pytest.raises(ConfigurationError, match=setting):
        PerplexityClient(**{setting: value})  # type: ignore[arg-type]


async def test_a_closed_client_refuses_use_and_closes_only_what_it_owns():
    transport = httpx2.MockTransport(lambda r: httpx2.Response(200, json=run_json()))
    async with httpx2.AsyncClient(transport=transport) as http:
        client = PerplexityClient(api_key=SENTINEL_KEY, http_client=http)
        async with client:
            await client.retrieve('resp_1')
        assert not http.is_closed
        with pytest.raises(RuntimeError, match='closed'):
            await client.retrieve('resp_1')
        with pytest.raises(RuntimeError, match='closed'):
            client.stream('q')
        with pytest.raises(RuntimeError, match='closed'):
            async with client:
                pass
        await client.aclose()  # idempotent

    owned = PerplexityClient(api_key=SENTINEL_KEY)
    await owned.aclose()
    assert owned._transport.http.is_closed


async def test_timeouts_default_to_60s_read_5s_connect_or_the_given_client_or_the_argument():
    timeouts: list[dict[str, float | None]] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        timeouts.append(request.extensions['timeout'])
        return httpx2.Response(200, json=run_json())

    transport = httpx2.MockTransport(handler)
    async with httpx2.AsyncClient(transport=transport, timeout=7.0) as http:
        async with PerplexityClient(api_key=SENTINEL_KEY, http_client=http) as client:
            await client.retrieve('r')
        async with PerplexityClient(api_key=SENTINEL_KEY, http_client=http, timeout=3.0) as client:
            await client.retrieve('r')
    assert timeouts == [
        {'connect': 7.0, 'read': 7.0, 'write': 7.0, 'pool': 7.0},
        {'connect': 3.0, 'read': 3.0, 'write': 3.0, 'pool': 3.0},
    ]
    async with PerplexityClient(api_key=SENTINEL_KEY) as owned:
        assert owned._transport.http.timeout == httpx2.Timeout(60.0, connect=5.0)
    async with PerplexityClient(api_key=SENTINEL_KEY, timeout=httpx2.Timeout(300.0, connect=2.0)) as owned:
        assert owned._transport.http.timeout == httpx2.Timeout(300.0, connect=2.0)


async def test_response_ids_are_escaped_into_the_path():
    paths: list[str] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        paths.append(request.url.raw_path.decode())
        return httpx2.Response(200, json=run_json())

    async with mock_client(handler) as client:
        await client.retrieve('../../search?x=1')
        with pytest.raises(ValueError, match='response_id'):
            await client.retrieve('')
    assert paths == ['/v1/agent/..%2F..%2Fsearch%3Fx%3D1']


async def test_a_key_given_as_a_secret_is_used_as_is_and_never_shown(monkeypatch: pytest.MonkeyPatch):
    """The `Researcher` hands the client the `SecretStr` its `Settings` read: used as is, no variable read."""
    monkeypatch.setenv('PERPLEXITY_API_KEY', 'pplx-from-the-environment')
    seen: list[str] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(request.headers['authorization'])
        return httpx2.Response(200, json=run_json())

    async with mock_client(handler, api_key=SecretStr(SENTINEL_KEY)) as client:
        await client.retrieve('resp_1')
        assert SENTINEL_KEY not in repr(vars(client._transport))
    assert seen == [f'Bearer {SENTINEL_KEY}']
    with pytest.raises(ConfigurationError) as info:
        PerplexityClient(api_key=SecretStr('pplx-abc def'))
    assert 'pplx-abc' not in str(info.value) and 'api_key' in str(info.value)


async def test_a_researcher_gives_its_client_the_settings_it_read(monkeypatch: pytest.MonkeyPatch):
    """Read once: a variable changed after the `Researcher` was made does not reach its (re-made) client."""
    from pydantic_ai_perplexity._core.researcher import Researcher

    monkeypatch.setenv('PERPLEXITY_API_KEY', SENTINEL_KEY)
    monkeypatch.setenv('PERPLEXITY_BASE_URL', 'http://127.0.0.1:9')
    researcher = Researcher(ledger=False)
    await researcher.aclose()  # the client is made again on next use
    monkeypatch.setenv('PERPLEXITY_BASE_URL', 'http://127.0.0.1:10')
    monkeypatch.delenv('PERPLEXITY_API_KEY')
    async with researcher:
        assert researcher.client.base_url == 'http://127.0.0.1:9'
        key = researcher.client._transport._api_key  # pyright: ignore[reportPrivateUsage]
        assert key is not None and key.get_secret_value() == SENTINEL_KEY
