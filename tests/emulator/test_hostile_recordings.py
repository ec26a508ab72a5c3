"""Recording and replay against an attacker: planted links, credentials in requests, hostile replay folders.

Each attack goes through the way in where it was found: `Emulator(record=...)` / `Emulator(replay=...)` here,
the `pydantic-ai-perplexity emulator` command in tests/cli/test_emulator_command.py.
"""

from __future__ import annotations

import copy
import json
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from pydantic_ai_perplexity._base.errors import ConfigurationError
from pydantic_ai_perplexity.emulator import Emulator, RecordingError
from support.emulator import client_for
from support.live_recording import HEADERS, QUESTION, as_sent, live_recording, write_live_recording

VICTIM_TEXT = "the user's own file\n"


def record(upstream: Emulator, directory: Path, body: dict[str, Any]) -> httpx2.Response:
    with Emulator(record=directory, upstream=upstream.base_url) as proxy, client_for(proxy, upstream.api_key) as c:
        return c.post('/v1/agent', json=body)


# --- 1. recording never writes through a planted link ------------------------------------------------------------

BODY = {'input': 'What is the EU AI Act?', 'effort': 'fast'}


def test_a_planted_temporary_file_link_does_not_redirect_the_recording(upstream: Emulator, tmp_path: Path):
    # Learn the (predictable) name of the recording, then plant `<name>.json.tmp -> victim` in a fresh folder,
    # as a cloned repository could ship it.
    record(upstream, tmp_path / 'probe', BODY)
    [probe] = (tmp_path / 'probe').glob('*.json')
    folder, victim = tmp_path / 'cloned', tmp_path / 'victim.txt'
    folder.mkdir()
    victim.write_text(VICTIM_TEXT)
    (folder / f'{probe.name}.tmp').symlink_to(victim)

    answer = record(upstream, folder, BODY)

    assert answer.status_code == 200
    assert victim.read_text() == VICTIM_TEXT
    written = json.loads((folder / probe.name).read_text())
    assert written['request']['body'] == BODY and written['run']['final']['status'] == 'completed'
    assert (folder / f'{probe.name}.tmp').is_symlink()  # left alone, never followed
    with Emulator(replay=folder) as replay, client_for(replay, replay.api_key) as c:
        assert c.post('/v1/agent', json=BODY).json()['usage'] == answer.json()['usage']


def test_a_planted_link_at_the_recordings_own_name_is_refused_and_the_answer_still_served(
    upstream: Emulator, tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    record(upstream, tmp_path / 'probe', BODY)
    [probe] = (tmp_path / 'probe').glob('*.json')
    folder, victim = tmp_path / 'cloned', tmp_path / 'victim.txt'
    folder.mkdir()
    victim.write_text(VICTIM_TEXT)
    (folder / probe.name).symlink_to(victim)

    with caplog.at_level('ERROR', logger='uvicorn.error'):
        answer = record(upstream, folder, BODY)

    assert answer.status_code == 200 and answer.json()['status'] == 'completed'
    assert victim.read_text() == VICTIM_TEXT and (folder / probe.name).is_symlink()
    assert any('Recording not written' in r.getMessage() and 'symbolic link' in r.getMessage() for r in caplog.records)


def test_a_record_folder_that_is_a_link_is_refused_before_anything_starts(upstream: Emulator, tmp_path: Path):
    (tmp_path / 'elsewhere').mkdir()
    (tmp_path / 'recordings').symlink_to(tmp_path / 'elsewhere')
    with pytest.raises(ValueError, match='is a symbolic link'):
        Emulator(record=tmp_path / 'recordings', upstream=upstream.base_url)


# --- 2. no credential reaches disk -------------------------------------------------------------------------------

#: Every credential form a remote MCP server's settings can carry, each with a distinct planted secret.
SECRETS = {
    'userinfo password': 'PASSWD-5e8a1f',
    'bare userinfo token': 'ghp_USERINFOTOKEN0123456789',
    'query api-key': 'QUERYKEY-77c3d2',
    'query token': 'QUERYTOKEN-91aa0e',
    'zapier path token': 'ZjQ2ZTk4NTgtYmMxNS00YjQ1LWE5OGQt',
    'named path token': 'PATHTOKEN-4b1d',
    'authorization': 'AUTHVALUE-ab12cd34',
    'header value': 'HEADERVALUE-0f9e8d',
    'input password': 'INPUTPASS-6c5b4a',
}
TOOLS = [
    {
        'type': 'mcp',
        'server_label': 'docs',
        'server_url': f'https://alice:{SECRETS["userinfo password"]}@mcp.example.com/mcp'
        f'?api-key={SECRETS["query api-key"]}',
        'authorization': f'Bearer {SECRETS["authorization"]}',
        'headers': {'X-Api-Key': SECRETS['header value'], 'Accept': 'application/json'},
    },
    {
        'type': 'mcp',
        'server_label': 'zapier',
        'server_url': f'https://mcp.zapier.com/api/mcp/s/{SECRETS["zapier path token"]}/mcp',
    },
    {
        'type': 'mcp',
        'server_label': 'gh',
        'server_url': f'https://{SECRETS["bare userinfo token"]}@mcp.github.example'
        f'/token/{SECRETS["named path token"]}/mcp?access_token={SECRETS["query token"]}',
    },
]
SECRET_BODY = {
    'input': f'EU AI Act; the notes are at https://bob:{SECRETS["input password"]}@notes.example/ai-act',
    'effort': 'fast',
    'tools': TOOLS,
}


def test_no_credential_of_a_remote_mcp_server_reaches_disk(upstream: Emulator, tmp_path: Path):
    answer = record(upstream, tmp_path, SECRET_BODY)
    assert answer.status_code == 200, answer.text
    files = [p for p in tmp_path.rglob('*') if p.is_file()]
    assert files
    for path in files:
        text = path.read_bytes().decode()
        for form, secret in SECRETS.items():
            assert secret not in text, (form, path.name)
        assert upstream.api_key not in text
    [path] = files
    tools = json.loads(path.read_text())['request']['body']['tools']
    assert [t['server_url'] for t in tools] == [
        'https://***@mcp.example.com/mcp?api-key=***',
        'https://mcp.zapier.com/api/mcp/s/***/mcp',
        'https://***@mcp.github.example/token/***/mcp?access_token=***',
    ]
    assert tools[0]['authorization'] == tools[0]['headers'] == '[redacted]'
    # The same request, credentials and all, still finds its recording (both sides are redacted alike).
    with Emulator(replay=tmp_path) as replay, client_for(replay, replay.api_key) as c:
        again = c.post('/v1/agent', json=SECRET_BODY)
        assert again.status_code == 200 and again.json()['usage'] == answer.json()['usage']


# --- 3. a hostile replay folder ----------------------------------------------------------------------------------


def _plant(kind: str, folder: Path, outside: Path) -> str:
    """Put one hostile entry in `folder`; returns its name."""
    if kind == 'symlink out':
        (outside / 'secret.json').write_text(json.dumps(live_recording()))
        (folder / 'evil.json').symlink_to(outside / 'secret.json')
        return 'evil.json'
    if kind == 'device':
        (folder / 'zero.json').symlink_to('/dev/zero')
        return 'zero.json'
    if kind == 'fifo':
        os.mkfifo(folder / 'pipe.json')
        return 'pipe.json'
    if kind == 'directory':
        (folder / 'x.json').mkdir()
        return 'x.json'
    if kind == 'deep nesting':
        (folder / 'deep.json').write_text('[' * 200_000 + ']' * 200_000)
        return 'deep.json'
    if kind == 'moderate nesting':
        data = live_recording()
        data['run']['final']['metadata'] = json.loads('{"a":' * 100 + '1' + '}' * 100)
        (folder / 'nested.json').write_text(json.dumps(data))
        return 'nested.json'
    if kind == 'nan':
        (folder / 'nan.json').write_text(
            json.dumps(live_recording()).replace('"total_cost": 0.00429', '"total_cost": NaN')
        )
        return 'nan.json'
    if kind == 'huge':
        with open(folder / 'huge.json', 'wb') as f:
            f.truncate(64 * 1024 * 1024)  # sparse: no disk used
        return 'huge.json'
    if kind == 'not utf-8':
        (folder / 'latin.json').write_bytes(b'{"format": "\xff"}')
        return 'latin.json'
    if kind == 'not json':
        (folder / 'broken.json').write_text('{"format": ')
        return 'broken.json'
    raise AssertionError(kind)


HOSTILE = [
    'nan',
    'symlink out',
    'device',
    'fifo',
    'directory',
    'deep nesting',
    'moderate nesting',
    'huge',
    'not utf-8',
    'not json',
]
REASONS = {
    'nan': 'NaN is not a JSON value',
    'symlink out': 'symbolic link',
    'device': 'symbolic link',
    'fifo': 'not a regular file',
    'directory': 'is a directory',
    'deep nesting': 'nested deeper than',
    'moderate nesting': 'nested deeper than',
    'huge': 'byte limit',
    'not utf-8': 'not UTF-8',
    'not json': 'not valid JSON',
}


def _load_with_deadline(folder: Path, seconds: float = 20.0) -> BaseException | None:
    """Construct `Emulator(replay=folder)` in a thread, failing the test if it has not returned by the deadline."""
    outcome: list[BaseException | None] = []

    def load() -> None:
        try:
            Emulator(replay=folder)
        except BaseException as exc:  # handed to the test
            outcome.append(exc)
        else:
            outcome.append(None)

    thread = threading.Thread(target=load, daemon=True)
    thread.start()
    thread.join(seconds)
    assert outcome, f'loading {folder.name} did not return within {seconds} s'
    return outcome[0]


@pytest.mark.parametrize('kind', HOSTILE)
def test_a_hostile_entry_in_a_replay_folder_is_refused_at_start_with_its_name(kind: str, tmp_path: Path):
    folder, outside = tmp_path / 'recordings', tmp_path / 'outside'
    folder.mkdir()
    outside.mkdir()
    write_live_recording(folder)  # a good recording beside it
    name = _plant(kind, folder, outside)
    error = _load_with_deadline(folder)
    assert isinstance(error, RecordingError), repr(error)
    message = str(error)
    assert message.startswith(f'{name}: ') and REASONS[kind] in message and '\n' not in message


def test_hidden_files_and_other_names_are_not_read(tmp_path: Path):
    write_live_recording(tmp_path)
    os.mkfifo(tmp_path / '.pipe.json')  # hidden: skipped, never opened
    (tmp_path / 'README.md').write_text('not a recording')
    with Emulator(replay=tmp_path) as replay, client_for(replay, replay.api_key) as c:
        assert c.post('/v1/agent', json=as_sent({'input': QUESTION, 'effort': 'fast'})).status_code == 200


# Malformed fields: each found at load, naming the file and the field, never a 500 later.

Mutation = Callable[[dict[str, Any]], None]


def _set(path: str, value: Any) -> Mutation:
    def mutate(data: dict[str, Any]) -> None:
        *parents, last = path.split('.')
        node: Any = data
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value

    return mutate


def _drop(path: str) -> Mutation:
    def mutate(data: dict[str, Any]) -> None:
        *parents, last = path.split('.')
        node: Any = data
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        del node[last]

    return mutate


def _search_answered(status: int) -> Mutation:
    """The recording turned into a search recording answered with `status` (the test then searches too)."""

    def mutate(data: dict[str, Any]) -> None:
        data.clear()
        data.update(
            {
                'format': 'pydantic-ai-perplexity/recording',
                'version': 1,
                'kind': 'search',
                'request': {'body': {'query': QUESTION}},
                'response': {'status': status, 'body': {'results': []}},
            }
        )

    return mutate


#: Paths into the live-shape recording, with the field a refusal must name.
FIELDS = [
    'kind',
    'request',
    'request.body',
    'run',
    'run.events',
    'run.final',
    'run.headers',
    'run.events.0',
    'run.events.0.at',
    'run.events.0.event',
    'run.events.0.event.type',
    'run.events.0.event.sequence_number',
    'run.events.0.event.response',
    'run.events.3.event.output_index',
    'run.events.3.event.item',
    'run.final.id',
    'run.final.status',
    'run.final.created_at',
    'run.final.completed_at',
    'run.final.model',
    'run.final.output',
    'run.final.output.0',
    'run.final.usage',
    'run.final.error',
    'run.headers.x-ratelimit-used',
]
BAD_VALUES: list[Any] = [
    None,
    True,
    -1,
    10**30,
    float('nan'),
    float('inf'),
    'x',
    '\r\nset-cookie: a=b',
    [],
    {},
    [1],
    {'a': 1},
]


def _variants() -> Iterator[tuple[str, Mutation]]:
    for path in FIELDS:
        for value in BAD_VALUES:
            yield f'{path}={value!r}'[:80], _set(path, value)
    for path in ('kind', 'request', 'run', 'run.final', 'run.events.0.at', 'run.events.3.event.item'):
        yield f'del {path}', _drop(path)
    yield 'sequence going back', _set('run.events.2.event.sequence_number', 0)
    yield 'a run of a year', _set('run.final.completed_at', 1796122340 + 365 * 86_400)
    yield 'still running', _set('run.final.status', 'in_progress')
    yield 'a set-cookie header', _set('run.headers.set-cookie', 'a=b')
    for index in (0, 3, 6):  # an end event early in the stream, or an unknown one
        for kind in ('response.completed', 'response.failed', 'response.cancelled', 'response.unknown', 'error'):
            yield f'event {index} is {kind}', _set(f'run.events.{index}.event.type', kind)
    yield 'a search answered 204', _search_answered(204)
    yield 'a search answered 304', _search_answered(304)
    yield 'a search answered 503', _search_answered(503)


@pytest.mark.slow
def test_every_malformed_field_is_refused_at_load_or_served_without_an_error(tmp_path: Path):
    """A property over ~330 variants of a good recording: each is refused at start (naming the file), or loads
    and then serves a blocking and a streamed create with 200, never a 500."""
    refused = served = 0
    variants = list(_variants())
    for index, (label, mutate) in enumerate(variants):
        data = copy.deepcopy(live_recording())
        mutate(data)
        folder = tmp_path / f'v{index}'
        write_live_recording(folder, data)
        try:
            emulator = Emulator(replay=folder, time_scale=0)
        except RecordingError as exc:
            assert str(exc).startswith('run-live-shape.json: ') and '\n' not in str(exc), label
            refused += 1
            continue
        with emulator, client_for(emulator, emulator.api_key) as c:
            body = as_sent({'input': QUESTION, 'effort': 'fast'})  # as every way in sends it
            searched = c.post('/search', json={'query': QUESTION})
            assert searched.status_code != 500 and searched.headers['content-type'] == 'application/json', label
            blocking = c.post('/v1/agent', json=body)
            assert blocking.status_code in (200, 404), (label, blocking.text)
            if blocking.status_code == 200:
                # Served as recorded (whatever the recording holds), in SSE frames of JSON, to the end.
                with c.stream('POST', '/v1/agent', json={**body, 'stream': True}) as stream:
                    assert stream.status_code == 200, label
                    lines = [line for line in stream.iter_lines() if line.startswith('data:')]
                events = [json.loads(line[5:]) for line in lines]
                assert events and events[-1]['type'].startswith('response.'), label
                served += 1
    assert refused > 250 and served > 0, (refused, served)


def test_a_refused_file_keeps_the_replay_from_starting_with_the_field_named(tmp_path: Path):
    data = live_recording()
    data['run']['events'][3]['event']['output_index'] = 'first'
    write_live_recording(tmp_path, data)
    with pytest.raises(RecordingError, match=r'^run-live-shape\.json: "run\.events\[3\]\.event" \(output_item\.done\)'):
        Emulator(replay=tmp_path)


def test_two_files_for_one_request_are_refused(tmp_path: Path):
    write_live_recording(tmp_path)
    (tmp_path / 'run-copy.json').write_text((tmp_path / 'run-live-shape.json').read_text())
    with pytest.raises(RecordingError, match=r'run-live-shape\.json: records the same request as run-copy\.json'):
        Emulator(replay=tmp_path)


# --- 4. unsafe recorder and bind settings (Python API) -----------------------------------------------------------


@pytest.mark.parametrize(
    ('upstream_url', 'reason'),
    [
        ('http://api.perplexity.example', 'clear text'),
        ('http://10.0.0.7:8787', 'clear text'),
        ('file:///etc/passwd', "scheme 'file'"),
        ('ftp://api.perplexity.example', "scheme 'ftp'"),
        ('https://user:pw@api.perplexity.example', 'must not contain credentials'),
    ],
)
def test_an_unsafe_recording_upstream_is_refused(upstream_url: str, reason: str, tmp_path: Path):
    with pytest.raises(ConfigurationError, match=reason):
        Emulator(record=tmp_path, upstream=upstream_url)
    assert list(tmp_path.iterdir()) == []


def test_an_emulator_off_loopback_needs_allow_remote(tmp_path: Path):
    with pytest.raises(ValueError, match='allow_remote=True'):
        Emulator(host='0.0.0.0')  # refused before anything binds
    with Emulator(host='127.0.0.1', allow_remote=True) as emu:  # the flag is accepted (loopback here)
        assert emu.base_url.startswith('http://127.0.0.1:')


# --- 5. live headers through the recording proxy and back from a replay -------------------------------------------


class _LiveHeaders:
    """An upstream's answers with the live API's headers (live fact: cfdude/mcp-perplexity-pro
    tests/fixtures/agent_response_headers.json, captured 2026-10-09), and a header a recording must not keep."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        async def send_live(message: dict[str, Any]) -> None:
            if message['type'] == 'http.response.start':
                ours = {name.encode() for name in HEADERS}  # the emulator's own rate-limit headers give way
                kept = [(k, v) for k, v in message.get('headers', []) if k.lower() not in ours]
                live = [(k.encode(), v.encode()) for k, v in HEADERS.items()]
                message = {**message, 'headers': [*kept, *live, (b'set-cookie', b'__cf_bm=tracking')]}
            await send(message)

        await self.app(scope, receive, send_live)


def test_live_headers_pass_through_the_proxy_are_recorded_and_replayed(tmp_path: Path):
    upstream = Emulator(time_scale=0.001)
    upstream.app = _LiveHeaders(upstream.app)  # type: ignore[assignment]
    body = {'input': 'What is the EU AI Act?', 'effort': 'fast'}
    with upstream, Emulator(record=tmp_path, upstream=upstream.base_url) as proxy:
        with client_for(proxy, upstream.api_key) as c:
            created = c.post('/v1/agent', json=body)
            with c.stream(
                'POST', '/v1/agent', json={'input': 'How do heat pumps work?', 'effort': 'low', 'stream': True}
            ) as s:
                streamed_headers = s.headers
                s.read()
            searched = c.post('/search', json={'query': 'heat pumps'})
    for answer in (created.headers, streamed_headers, searched.headers):
        assert {k: answer.get(k) for k in HEADERS} == HEADERS
        assert 'set-cookie' not in answer
    for path in tmp_path.glob('*.json'):
        data = json.loads(path.read_text())
        recorded = (data.get('run') or data.get('response') or {}).get('headers')
        if data['kind'] != 'models':
            assert recorded == HEADERS, path.name
        assert '__cf_bm' not in path.read_text()

    with Emulator(replay=tmp_path, time_scale=0.001) as replay, client_for(replay, replay.api_key) as c:
        ratelimit = {k: v for k, v in HEADERS.items() if k != 'x-request-id'}
        blocking = c.post('/v1/agent', json=body)
        background = c.post('/v1/agent', json={**body, 'background': True})
        for answer in (blocking, background):
            assert {k: answer.headers.get(k) for k in ratelimit} == ratelimit
            assert answer.headers['x-request-id'] == answer.json()['id'].removeprefix('resp_')
        with c.stream('POST', '/v1/agent', json={**body, 'stream': True}) as s:
            assert {k: s.headers.get(k) for k in ratelimit} == ratelimit
            first = json.loads(next(line for line in s.iter_lines() if line.startswith('data:'))[5:])
            assert s.headers['x-request-id'] == first['response']['id'].removeprefix('resp_')
        search = c.post('/search', json={'query': 'heat pumps'})
        assert {k: search.headers.get(k) for k in ratelimit} == ratelimit
