"""Record and replay: a recording proxy in front of a second emulator (the "upstream"), then a replaying one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pydantic_ai_perplexity import __version__
from pydantic_ai_perplexity.emulator import EMULATOR_HEADER, Emulator
from pydantic_ai_perplexity.emulator._record import FORMAT, VERSION
from support.emulator import client_for, stream_events, wait_terminal

SHIPPED = Path(__file__).parent / 'recordings'


def text_of(response: dict[str, Any]) -> str:
    return next(i for i in response['output'] if i['type'] == 'message')['content'][0]['text']


def urls_of(response: dict[str, Any]) -> list[str]:
    return [r['url'] for i in response['output'] if i['type'] == 'search_results' for r in i['results']]


QUESTION = {'input': 'What is the EU AI Act?', 'effort': 'low'}
STREAMED = {'input': 'How do heat pumps work?', 'effort': 'medium', 'stream': True}
BACKGROUND = {'input': 'How much sleep do adults need?', 'effort': 'high', 'max_output_tokens': 2000}


def record_session(upstream: Emulator, directory: Path) -> dict[str, Any]:
    """Drive a recording proxy through a blocking run, a stream, a background run, a search and the models."""
    seen: dict[str, Any] = {}
    with Emulator(record=directory, upstream=upstream.base_url) as proxy, client_for(proxy, upstream.api_key) as c:
        blocking = c.post('/v1/agent', json=QUESTION)
        assert blocking.status_code == 200 and EMULATOR_HEADER in blocking.headers  # the upstream's marker passes
        seen['blocking'] = blocking.json()
        seen['stream'] = stream_events(c, 'POST', '/v1/agent', json=STREAMED)
        started = c.post('/v1/agent', json={**BACKGROUND, 'background': True}).json()
        seen['background'] = wait_terminal(c, started['id'])
        seen['search'] = c.post('/search', json={'query': 'heat pumps', 'max_results': 3}).json()
        seen['models'] = c.get('/v1/models').json()
        assert c.post('/v1/agent', json={'input': 'q'}).status_code == 400  # errors pass through, unrecorded
    return seen


@pytest.mark.slow
def test_a_recorded_session_replays_with_the_same_answers_sources_costs_and_events(upstream: Emulator, tmp_path: Path):
    seen = record_session(upstream, tmp_path)
    files = sorted(p.name for p in tmp_path.glob('*.json'))
    assert len(files) == 5 and sum(name.startswith('run-') for name in files) == 3
    for path in tmp_path.glob('*.json'):
        text = path.read_text()
        assert upstream.api_key not in text and 'pplx-upstream' not in text
        data = json.loads(text)
        assert (data['format'], data['version']) == (FORMAT, VERSION)
    with Emulator(replay=tmp_path, time_scale=0.001) as replay, client_for(replay, replay.api_key) as c:
        blocking = c.post('/v1/agent', json=QUESTION)
        assert blocking.headers[EMULATOR_HEADER] == f'{__version__}; replay'
        again = blocking.json()
        original = seen['blocking']
        assert again['id'] != original['id'] and again['id'].startswith('resp_')
        assert text_of(again) == text_of(original) and urls_of(again) == urls_of(original)
        assert again['usage'] == original['usage'] and again['model'] == original['model']

        events = stream_events(c, 'POST', '/v1/agent', json=STREAMED)
        assert [e['type'] for e in events] == [e['type'] for e in seen['stream']]
        assert [e['sequence_number'] for e in events] == [e['sequence_number'] for e in seen['stream']]
        assert events[-1]['response']['usage'] == seen['stream'][-1]['response']['usage']

        # Recorded as a background run and polled: replayed blocking, and as a stream with resume.
        done = c.post('/v1/agent', json=BACKGROUND).json()
        assert text_of(done) == text_of(seen['background']) and done['usage'] == seen['background']['usage']
        assert c.post('/search', json={'query': 'heat pumps', 'max_results': 3}).json() == seen['search']
        assert c.get('/v1/models').json() == seen['models']


def test_replay_serves_background_retrieval_resume_and_cancel(upstream: Emulator, tmp_path: Path):
    seen = record_session(upstream, tmp_path)
    with Emulator(replay=tmp_path, time_scale=0.01) as replay, client_for(replay, replay.api_key) as c:
        body = {**STREAMED, 'background': True}
        full = stream_events(c, 'POST', '/v1/agent', json=body)
        run_id = full[0]['response']['id']
        assert [e['type'] for e in full] == [e['type'] for e in seen['stream']]
        cursor = full[len(full) // 2]['sequence_number']
        rest = stream_events(c, 'GET', f'/v1/agent/{run_id}', params={'stream': 'true', 'starting_after': cursor})
        assert [e['sequence_number'] for e in rest] == [
            e['sequence_number'] for e in full if e['sequence_number'] > cursor
        ]
        assert wait_terminal(c, run_id)['status'] == 'completed'


@pytest.mark.slow
def test_replay_cancels_a_background_run_like_a_live_one(upstream: Emulator, tmp_path: Path):
    # A run that took about 1.5 real seconds upstream, recorded as a stream (so with its real timing).
    body = {'input': 'How do heat pumps work? [[emulate: duration=1500]]', 'effort': 'low', 'stream': True}
    with Emulator(record=tmp_path, upstream=upstream.base_url) as proxy, client_for(proxy, upstream.api_key) as c:
        recorded = stream_events(c, 'POST', '/v1/agent', json=body)
    assert recorded[-1]['type'] == 'response.completed'
    with Emulator(replay=tmp_path, time_scale=1.0) as slow, client_for(slow, slow.api_key) as s:
        queued = s.post('/v1/agent', json={**body, 'stream': False, 'background': True}).json()
        assert queued['status'] == 'queued' and queued['output'] == [] and queued['background'] is True
        ack = s.post(f'/v1/agent/{queued["id"]}/cancel').json()
        assert ack == {'response_id': queued['id'], 'status': 'cancelling'}
        final = wait_terminal(s, queued['id'], timeout=10)
        assert final['status'] == 'cancelled' and final['usage'] is None


def test_an_unmatched_request_is_a_404_naming_the_closest_recording(upstream: Emulator, tmp_path: Path):
    record_session(upstream, tmp_path)
    with Emulator(replay=tmp_path) as replay, client_for(replay, replay.api_key) as c:
        response = c.post('/v1/agent', json={**QUESTION, 'effort': 'medium'})
        assert response.status_code == 404
        error = response.json()['error']
        assert error['type'] == 'recording_not_found'
        assert "query 'What is the EU AI Act?'" in error['message'] and "effort 'medium'" in error['message']
        assert (
            'the closest is run-what-is-the-eu-ai-act-' in error['message'] and 'differs in effort' in error['message']
        )
        missing = c.post('/search', json={'query': 'solar costs'})
        assert missing.status_code == 404 and 'search-heat-pumps-' in missing.json()['error']['message']


def test_secrets_in_a_request_never_reach_a_recording(upstream: Emulator, tmp_path: Path):
    tool = {
        'type': 'mcp',
        'server_label': 'docs',
        'server_url': 'https://mcp.example.com/sse',
        'authorization': 'Bearer sk-live-very-secret',
        'headers': {'X-Api-Key': 'also-secret'},
    }
    body = {'input': f'EU AI Act, key {upstream.api_key} pplx-someone-elses-key', 'effort': 'fast', 'tools': [tool]}
    with Emulator(record=tmp_path, upstream=upstream.base_url) as proxy, client_for(proxy, upstream.api_key) as c:
        assert c.post('/v1/agent', json=body).status_code == 200
    [path] = tmp_path.glob('*.json')
    text = path.read_text()
    for secret in ('sk-live-very-secret', 'also-secret', upstream.api_key, 'pplx-someone-elses-key'):
        assert secret not in text
    assert '[redacted]' in text


def test_bad_recordings_and_modes_are_refused_clearly(tmp_path: Path):
    with pytest.raises(ValueError, match='does not exist'):
        Emulator(replay=tmp_path / 'missing')
    (tmp_path / 'old.json').write_text(json.dumps({'format': FORMAT, 'version': 99}))
    with pytest.raises(ValueError, match=r'old\.json: recording version 99'):
        Emulator(replay=tmp_path)
    with pytest.raises(ValueError, match='cannot be combined'):
        Emulator(record=tmp_path, replay=tmp_path)


def test_the_shipped_recordings_replay():
    """`tests/emulator/recordings/` was recorded by the emulator itself (`python -m ...emulator._samples`)."""
    with Emulator(replay=SHIPPED, time_scale=0.001) as replay, client_for(replay, replay.api_key) as c:
        for path in sorted(SHIPPED.glob('run-*.json')):
            data = json.loads(path.read_text())
            body = {**data['request']['body'], 'stream': False, 'background': False}
            answer = c.post('/v1/agent', json=body).json()
            assert answer['usage'] == data['run']['final']['usage'], path.name
            assert text_of(answer) == text_of(data['run']['final'])


def test_a_recording_proxy_whose_upstream_is_down_says_so(tmp_path: Path):
    with Emulator(record=tmp_path, upstream='http://127.0.0.1:9') as proxy, client_for(proxy, 'pplx-any') as c:
        response = c.post('/v1/agent', json=QUESTION)
        assert response.status_code == 502 and EMULATOR_HEADER not in response.headers
        error = response.json()['error']
        assert error['type'] == 'bad_gateway' and 'http://127.0.0.1:9 could not be reached' in error['message']
    assert list(tmp_path.glob('*.json')) == []
