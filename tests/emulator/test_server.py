"""The server around the app: start and stop, several at once, request log, request ids, resilience, `serve()`."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from typing import Any

import anyio
import anyio.to_thread
import httpx2
import pytest

from pydantic_ai_perplexity.emulator import Emulator, RecordedRequest, create_app
from pydantic_ai_perplexity.emulator import _app as app_module


def auth(emu: Emulator) -> dict[str, str]:
    return {'Authorization': f'Bearer {emu.api_key}'}


def test_start_and_stop_on_a_free_loopback_port():
    emu = Emulator(time_scale=0)
    assert re.fullmatch(r'pplx-emulator-[0-9a-f]{32}', emu.api_key)
    assert not emu.running
    with pytest.raises(RuntimeError, match='not running'):
        _ = emu.base_url
    with emu:
        assert emu.running and emu.port > 0
        assert emu.base_url == f'http://127.0.0.1:{emu.port}'
        with httpx2.Client(headers={'Authorization': f'Bearer {emu.api_key}'}) as c:
            assert c.get(emu.base_url + '/v1/models').status_code == 200
    assert not emu.running
    with httpx2.Client() as c, pytest.raises(httpx2.ConnectError):
        c.get(f'http://127.0.0.1:{emu.port}/v1/models')
    emu.stop()  # stopping twice is harmless
    with emu:  # and it can start again, on the same port, with the same key and runs
        with httpx2.Client(base_url=emu.base_url, headers=auth(emu)) as c:
            assert c.post('/v1/agent', json={'input': 'q', 'effort': 'fast'}).json()['status'] == 'completed'


def test_several_emulators_run_side_by_side_with_their_own_keys():
    with Emulator(api_key='pplx-sentinel-one', time_scale=0) as one, Emulator(time_scale=0) as two:
        assert one.api_key == 'pplx-sentinel-one' and one.port != two.port
        with httpx2.Client() as c:
            body = {'input': 'q', 'effort': 'fast'}
            assert c.post(one.base_url + '/v1/agent', json=body, headers=auth(one)).status_code == 200
            assert c.post(two.base_url + '/v1/agent', json=body, headers=auth(one)).status_code == 401
        assert len(one.requests) == 1 and len(two.requests) == 1


def test_a_busy_port_is_a_clear_error():
    with socket.socket() as taken:
        taken.bind(('127.0.0.1', 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(RuntimeError, match=f'could not start on 127.0.0.1:{port}'):
            Emulator(port=port).start()


@pytest.mark.anyio
async def test_async_context_manager_and_prompt_stop_with_an_open_stream():
    async with Emulator(time_scale=1) as emu:  # real time: this run would take ten minutes
        async with httpx2.AsyncClient(base_url=emu.base_url, headers=auth(emu)) as c:
            body = {
                'input': 'A very long survey',
                'effort': 'xhigh',
                'max_output_tokens': 900,
                'stream': True,
                'background': True,
            }
            async with c.stream('POST', '/v1/agent', json=body) as response:
                chunks = response.aiter_bytes()
                first = await chunks.__anext__()
                assert first.startswith(b'data: ')
                with anyio.fail_after(5):
                    await anyio.to_thread.run_sync(emu.stop)
                    with pytest.raises(StopAsyncIteration):
                        while True:
                            await chunks.__anext__()
        assert not emu.running


def test_requests_are_recorded_without_headers_and_carry_request_ids(client: httpx2.Client, emu: Emulator):
    a = client.get('/v1/models')
    missing = 'resp_00000000-0000-0000-0000-000000000000'
    b = client.get(f'/v1/agent/{missing}', params={'format': 'short'})
    assert a.headers['x-request-id'] != b.headers['x-request-id']
    assert emu.requests == [
        RecordedRequest('GET', '/v1/models', '', 200),
        RecordedRequest('GET', f'/v1/agent/{missing}', 'format=short', 404),
    ]
    assert set(RecordedRequest.__dataclass_fields__) == {'method', 'path', 'query', 'status'}
    emu.requests.clear()
    assert emu.requests == []


def test_an_internal_error_is_a_500_envelope_and_the_server_keeps_serving(
    client: httpx2.Client, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
):
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError('planted failure')

    monkeypatch.setattr(app_module, 'build_run', broken)
    response = client.post('/v1/agent', json={'input': 'q', 'effort': 'fast'})
    assert response.status_code == 500
    assert response.json()['error'] == {
        'message': 'The emulator had an internal error.',
        'type': 'internal_error',
        'code': 500,
    }
    assert 'planted failure' not in response.text
    monkeypatch.undo()
    assert client.post('/v1/agent', json={'input': 'q', 'effort': 'fast'}).json()['status'] == 'completed'


def test_time_scale_zero_finishes_every_run_at_once():
    with Emulator(time_scale=0) as emu, httpx2.Client(base_url=emu.base_url, headers=auth(emu)) as c:
        body = {'input': 'q', 'effort': 'xhigh', 'max_output_tokens': 900, 'background': True}
        started = c.post('/v1/agent', json=body).json()
        assert c.get(f'/v1/agent/{started["id"]}').json()['status'] == 'completed'
    with pytest.raises(ValueError, match='time_scale'):
        Emulator(time_scale=-1)


@pytest.mark.anyio
async def test_create_app_serves_in_process_async():
    app = create_app(api_key='pplx-inline', time_scale=0)
    assert app.state.emulator.api_key == 'pplx-inline'
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url='http://emulator') as c:
        response = await c.post(
            '/v1/agent', json={'input': 'q', 'effort': 'fast'}, headers={'Authorization': 'Bearer pplx-inline'}
        )
        assert response.json()['status'] == 'completed'


@pytest.mark.slow
def test_serve_runs_in_the_foreground_and_stops_on_ctrl_c():
    code = 'from pydantic_ai_perplexity.emulator import serve; serve(port=0, time_scale=0)'
    env = {**os.environ, 'PYDANTIC_DISABLE_PLUGINS': '1'}  # a faster start; plugins play no part here
    process = subprocess.Popen(
        [sys.executable, '-c', code], stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert process.stderr is not None
        line = ''
        for line in process.stderr:
            if 'Perplexity emulator at' in line:
                break
        found = re.search(r'at (http://127\.0\.0\.1:\d+), API key (pplx-emulator-[0-9a-f]+)', line)
        assert found, line
        base_url, key = found.groups()
        with httpx2.Client(base_url=base_url, headers={'Authorization': f'Bearer {key}'}) as c:
            assert c.post('/v1/agent', json={'input': 'q', 'effort': 'fast'}).json()['status'] == 'completed'
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=10)
        assert process.returncode == 0 and out == ''  # a clean exit, nothing on stdout
        assert 'Traceback' not in err
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()


def test_every_response_says_it_is_emulated(client: httpx2.Client, emu: Emulator):
    """JSON, errors (401, 405, 400), SSE and `/v1/models` all carry `x-pplx-emulator: <version>`."""
    from pydantic_ai_perplexity import __version__
    from pydantic_ai_perplexity.emulator import EMULATOR_HEADER

    assert EMULATOR_HEADER == 'x-pplx-emulator'
    answers = [
        client.get('/v1/models'),
        client.post('/v1/agent', json={'input': 'What is the EU AI Act?', 'effort': 'fast'}),
        client.post('/v1/agent', json={'input': 'q'}),
        client.get('/v1/agent/resp_missing'),
        client.get('/search'),
        client.post('/search', json={'query': 'EU AI Act'}),
        client.get('/v1/models', headers={'Authorization': 'Bearer wrong'}),
        client.post('/v1/agent', json={'input': 'q', 'effort': 'fast'}, headers={'Authorization': 'Bearer wrong'}),
    ]
    assert [r.status_code for r in answers] == [200, 200, 400, 400, 405, 200, 401, 401]
    for response in answers:
        assert response.headers[EMULATOR_HEADER] == __version__, response.request.url
    body = {'input': 'What is the EU AI Act?', 'effort': 'fast', 'stream': True}
    with client.stream('POST', '/v1/agent', json=body) as response:
        assert response.headers['content-type'].startswith('text/event-stream')
        assert response.headers[EMULATOR_HEADER] == __version__
        response.read()
