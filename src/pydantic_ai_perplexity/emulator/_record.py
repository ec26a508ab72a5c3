"""Record and replay: a proxy that stores real sessions, and a replayer that serves them back deterministically.

`Emulator(record=DIR)` forwards every request to the upstream API (the client's own `Authorization` header goes
through and is never stored), streams answers through unchanged, and writes one JSON file per exchange: a run
(its create request, every event with its arrival time, the final response), a search, or the model list.
`Emulator(replay=DIR)` serves those files: a create is matched by its request (query, effort, model, options;
not by how it is delivered), and its recorded events become an ordinary emulator run, so streaming, background
retrieval, resume (`starting_after`) and cancel behave as they do for any run. The format is in
`docs/emulator.md` ("Record and replay").
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from ._errors import ApiError
from ._runs import Run, Step, chunks

__all__ = (
    'FORMAT',
    'VERSION',
    'Recorder',
    'Recording',
    'Replayer',
    'match_key',
    'replay_run',
    'sanitize',
    'sse_events',
    'sse_tee',
)

#: The `format` and `version` of every recording file; a reader refuses other versions.
FORMAT = 'pydantic-ai-perplexity/recording'
VERSION = 1
#: Request fields that change how a run is delivered or tagged, not what it is: a recording serves every mode.
_DELIVERY_FIELDS = frozenset({'stream', 'background', 'store', 'stream_options', 'metadata'})
#: Keys whose values are secrets wherever they appear in a body.
_SECRET_KEYS = frozenset({'authorization', 'headers', 'api_key', 'apikey', 'token', 'access_token', 'password'})
_SECRET_TEXT = re.compile(r'pplx-[A-Za-z0-9_-]{8,}')
_TERMINAL_EVENTS = frozenset({'response.completed', 'response.failed', 'response.incomplete', 'response.cancelled'})
_TERMINAL_STATUSES = frozenset({'completed', 'failed', 'incomplete', 'cancelled'})
_REDACTED = '[redacted]'


def _obj(value: Any) -> dict[str, Any]:
    """`value` if it is a JSON object, else an empty one."""
    return cast(dict[str, Any], value) if isinstance(value, dict) else {}


def _arr(value: Any) -> list[Any]:
    """`value` if it is a JSON array, else an empty one."""
    return cast(list[Any], value) if isinstance(value, list) else []


def sanitize(value: Any, secrets: tuple[str, ...] = ()) -> Any:
    """`value` with secrets removed: values of secret-named keys, `pplx-…` keys and the given strings."""
    if isinstance(value, dict):
        return {
            key: _REDACTED if key.casefold() in _SECRET_KEYS and item is not None else sanitize(item, secrets)
            for key, item in _obj(value).items()
        }
    if isinstance(value, list):
        return [sanitize(item, secrets) for item in _arr(value)]
    if isinstance(value, str):
        for secret in secrets:
            if secret:
                value = value.replace(secret, _REDACTED)
        return _SECRET_TEXT.sub(_REDACTED, value)
    return value


def match_key(kind: str, body: Mapping[str, Any]) -> str:
    """The canonical text a request is matched by: its kind and body, without the delivery fields of a create."""
    kept = {k: v for k, v in body.items() if not (kind == 'run' and k in _DELIVERY_FIELDS)}
    return kind + ':' + json.dumps(kept, sort_keys=True, ensure_ascii=False, separators=(',', ':'))


def _query_of(kind: str, body: Mapping[str, Any]) -> str:
    value = body.get('input' if kind == 'run' else 'query')
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        texts: list[str] = []
        for item in value:  # pyright: ignore[reportUnknownVariableType]
            if isinstance(item, str):
                texts.append(item)
            elif isinstance(item, dict) and isinstance(item.get('content'), str):  # pyright: ignore[reportUnknownMemberType]
                texts.append(str(item['content']))  # pyright: ignore[reportUnknownArgumentType]
        return ' | '.join(texts)
    return ''


def _file_name(kind: str, body: Mapping[str, Any]) -> str:
    slug = '-'.join(re.findall(r'[a-z0-9]+', _query_of(kind, body).casefold()))[:48].strip('-') or kind
    digest = hashlib.sha256(match_key(kind, body).encode()).hexdigest()[:10]
    return f'{kind}-{slug}-{digest}.json'


def _describe(kind: str, body: Mapping[str, Any]) -> str:
    parts = [f'query {_query_of(kind, body)!r}']
    parts.extend(
        f'{name} {body[name]!r}' for name in ('effort', 'preset', 'model', 'models') if body.get(name) is not None
    )
    return ', '.join(parts)


# ---------------------------------------------------------------------------------------------------------------
# The recording of one exchange


@dataclass(slots=True)
class Recording:
    """One recorded exchange, as stored in its file."""

    kind: str  # 'run', 'search' or 'models'
    body: dict[str, Any]
    events: list[tuple[float, dict[str, Any]]] = field(default_factory=list[tuple[float, dict[str, Any]]])
    final: dict[str, Any] | None = None
    response: dict[str, Any] | None = None
    recorded_at: str = ''
    path: Path | None = None

    @property
    def key(self) -> str:
        """The canonical match key of its request."""
        return match_key(self.kind, self.body)

    def to_json(self) -> dict[str, Any]:
        """The file's content (see `docs/emulator.md`)."""
        data: dict[str, Any] = {
            'format': FORMAT,
            'version': VERSION,
            'kind': self.kind,
            'recorded_at': self.recorded_at,
            'request': {'body': self.body},
        }
        if self.kind == 'run':
            data['run'] = {
                'events': [{'at': round(at, 6), 'event': event} for at, event in self.events],
                'final': self.final,
            }
        else:
            data['response'] = self.response
        return data

    @classmethod
    def from_json(cls, data: Any, path: Path) -> Recording:
        """Read a file's content, refusing another format or version with the file's name."""
        if not isinstance(data, dict) or data.get('format') != FORMAT:  # pyright: ignore[reportUnknownMemberType]
            raise ValueError(f'{path.name}: not a recording (no "format": "{FORMAT}")')
        if data.get('version') != VERSION:  # pyright: ignore[reportUnknownMemberType]
            raise ValueError(f'{path.name}: recording version {data.get("version")!r}, this emulator reads {VERSION}')  # pyright: ignore[reportUnknownMemberType]
        content = _obj(data)
        kind = str(content['kind'])
        body = _obj(_obj(content.get('request')).get('body'))
        recording = cls(kind, body, recorded_at=str(content.get('recorded_at', '')), path=path)
        if kind == 'run':
            run = _obj(content.get('run'))
            events = [_obj(e) for e in _arr(run.get('events'))]
            recording.events = [(float(e['at']), _obj(e['event'])) for e in events]
            recording.final = _obj(run['final']) if run.get('final') is not None else None
        else:
            recording.response = _obj(content.get('response'))
        return recording

    def write(self, directory: Path) -> Path:
        """Write (or rewrite) the file atomically and return its path."""
        directory.mkdir(parents=True, exist_ok=True)
        path = self.path or directory / _file_name(self.kind, self.body)
        temporary = path.with_suffix('.json.tmp')
        temporary.write_text(json.dumps(self.to_json(), ensure_ascii=False, indent=1) + '\n', encoding='utf-8')
        temporary.replace(path)
        self.path = path
        return path


# ---------------------------------------------------------------------------------------------------------------
# Recording: the proxy side


def _sse_events(buffer: bytearray) -> Iterator[dict[str, Any]]:
    """Pop the complete `data:` frames from `buffer` and decode them (other lines are ignored)."""
    while (end := buffer.find(b'\n\n')) >= 0:
        frame = bytes(buffer[:end])
        del buffer[: end + 2]
        for line in frame.splitlines():
            if line.startswith(b'data:'):
                payload = line[5:].strip()
                if payload and payload != b'[DONE]':
                    try:
                        event = json.loads(payload)
                    except ValueError:
                        continue
                    if isinstance(event, dict):
                        yield _obj(event)


class Recorder:
    """Keeps the recordings of a proxy session and writes each one as it changes."""

    def __init__(self, directory: Path, secrets: tuple[str, ...] = ()) -> None:
        """Record into `directory` (created if needed); `secrets` are extra strings never to store."""
        self.directory = directory
        self.secrets = secrets
        self._runs: dict[str, tuple[Recording, float]] = {}

    def _clean(self, value: Any, authorization: str) -> Any:
        token = authorization.partition(' ')[2].strip()
        return sanitize(value, (*self.secrets, token) if token else self.secrets)

    def created(self, body: dict[str, Any], snapshot: dict[str, Any], started: float, authorization: str) -> None:
        """A create answered with JSON: remember the run; write it now if it is already terminal."""
        recording = Recording('run', self._clean(body, authorization), recorded_at=_now())
        recording.final = self._clean(snapshot, authorization)
        run_id = str(snapshot.get('id', ''))
        self._runs[run_id] = (recording, started)
        recording.write(self.directory)

    def streamed(
        self,
        body: dict[str, Any] | None,
        run_id: str | None,
        events: list[tuple[float, dict[str, Any]]],
        auth: str,
        started: float,
    ) -> None:
        """Events seen on a stream (a create's from `started`, or a resume of `run_id`), merged into its recording."""
        if not events:
            return
        first = events[0][1]
        found_id = run_id or str(_obj(first.get('response')).get('id', ''))
        entry = self._runs.get(found_id)
        if entry is None:
            if body is None:
                return
            entry = (Recording('run', self._clean(body, auth), recorded_at=_now()), started)
            self._runs[found_id] = entry
        recording, started = entry
        seen = {e.get('sequence_number') for _, e in recording.events}
        for at, event in events:
            if event.get('sequence_number') not in seen:
                recording.events.append((max(0.0, at - started), self._clean(event, auth)))
        recording.events.sort(key=lambda pair: int(pair[1].get('sequence_number', 0)))
        last = recording.events[-1][1]
        if last.get('type') in _TERMINAL_EVENTS and isinstance(last.get('response'), dict):
            recording.final = last['response']
        recording.write(self.directory)

    def retrieved(self, run_id: str, snapshot: dict[str, Any], auth: str) -> bool:
        """A retrieve's snapshot: a terminal one becomes the final response. True when the events are missing."""
        entry = self._runs.get(run_id)
        if entry is None or snapshot.get('status') not in _TERMINAL_STATUSES:
            return False
        recording, _ = entry
        recording.final = self._clean(snapshot, auth)
        recording.write(self.directory)
        has_end = bool(recording.events) and recording.events[-1][1].get('type') in _TERMINAL_EVENTS
        return not has_end and bool(snapshot.get('background'))

    def backfill(self, run_id: str, events: list[dict[str, Any]], auth: str) -> None:
        """The whole stream of a background run fetched after it ended: spread over its recorded duration."""
        entry = self._runs.get(run_id)
        if entry is None or not events:
            return
        recording, started = entry
        final = recording.final or {}
        # The whole-second timestamps, or the time it was seen to end, whichever is longer.
        duration = max(
            float((final.get('completed_at') or 0) - (final.get('created_at') or 0)), time.monotonic() - started
        )
        span = max(1, len(events) - 1)
        timed = [(started + duration * i / span, event) for i, event in enumerate(events)]
        self.streamed(None, run_id, timed, auth, started)

    def exchange(self, kind: str, body: dict[str, Any], response: dict[str, Any], auth: str) -> None:
        """A search or the model list, stored whole."""
        recording = Recording(kind, self._clean(body, auth), recorded_at=_now())
        recording.response = self._clean(response, auth)
        recording.write(self.directory)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec='seconds')


async def sse_tee(
    stream: AsyncIterator[bytes], on_events: Callable[[list[tuple[float, dict[str, Any]]]], None]
) -> AsyncIterator[bytes]:
    """Pass an SSE body through unchanged, handing the decoded events with their arrival times to `on_events`."""
    buffer = bytearray()
    seen: list[tuple[float, dict[str, Any]]] = []
    try:
        async for chunk in stream:
            buffer.extend(chunk)
            now = time.monotonic()
            seen.extend((now, event) for event in _sse_events(buffer))
            yield chunk
    finally:
        on_events(seen)


def sse_events(raw: bytes) -> list[dict[str, Any]]:
    """The events of a whole SSE body."""
    return list(_sse_events(bytearray(raw)))


# ---------------------------------------------------------------------------------------------------------------
# Replaying


class Replayer:
    """The recordings of a directory, indexed by request, and the runs built from them."""

    def __init__(self, directory: Path) -> None:
        """Load every `*.json` recording in `directory`.

        Raises:
            ValueError: the directory is missing, or a file is not a recording of this version.
        """
        if not directory.is_dir():
            raise ValueError(f'replay directory {directory} does not exist')
        self.directory = directory
        self.recordings: dict[str, Recording] = {}
        for path in sorted(directory.glob('*.json')):
            recording = Recording.from_json(json.loads(path.read_text(encoding='utf-8')), path)
            self.recordings[recording.key] = recording

    def find(self, kind: str, body: Mapping[str, Any]) -> Recording:
        """The recording of this request, or a 404 naming the closest recording and how it differs."""
        key = match_key(kind, body)
        found = self.recordings.get(key)
        if found is not None:
            return found
        candidates = [r for r in self.recordings.values() if r.kind == kind]
        message = f'no recording in {self.directory.name}/ matches this request ({_describe(kind, body)})'
        if candidates:
            closest = max(candidates, key=lambda r: difflib.SequenceMatcher(None, r.key, key).ratio())
            name = closest.path.name if closest.path else '?'
            differ = sorted(
                k
                for k in set(closest.body) | set(body)
                if not (kind == 'run' and k in _DELIVERY_FIELDS) and closest.body.get(k) != body.get(k)
            )
            message += (
                f'; the closest is {name} ({_describe(kind, closest.body)}), which differs in {", ".join(differ)}'
            )
        else:
            message += f'; it holds no {kind} recordings'
        raise ApiError(404, 'recording_not_found', message)

    def model_ids(self) -> set[str]:
        """Every model id named by a recorded create (so that replay accepts them even if the table lacks them)."""
        ids: set[str] = set()
        for recording in self.recordings.values():
            if recording.kind == 'run':
                named = [recording.body.get('model'), *_arr(recording.body.get('models'))]
                ids.update(str(m) for m in named if m)
                if recording.final and recording.final.get('model'):
                    ids.add(str(recording.final['model']))
        return ids

    def models(self) -> dict[str, Any] | None:
        """The recorded model list, if one was recorded."""
        recording = self.recordings.get(match_key('models', {}))
        return recording.response['body'] if recording and recording.response else None


def _events_from_final(final: dict[str, Any]) -> list[tuple[float, dict[str, Any]]]:
    """A plausible event stream for a run recorded without one (a blocking create): its items, then its end."""
    duration = max(0.05, float((final.get('completed_at') or 0) - (final.get('created_at') or 0)))
    running: dict[str, Any] = {**final, 'status': 'in_progress', 'output': [], 'usage': None, 'completed_at': None}
    events: list[tuple[float, dict[str, Any]]] = [
        (0.0, {'type': 'response.created', 'response': running}),
        (0.0, {'type': 'response.in_progress', 'response': running}),
    ]
    output: list[dict[str, Any]] = list(final.get('output') or [])
    step = duration / (len(output) + 2)
    for index, item in enumerate(output):
        at = step * (index + 1)
        if item.get('type') == 'message':
            text = ''.join(str(_obj(part).get('text', '')) for part in _arr(item.get('content')))
            where = {'item_id': item.get('id'), 'output_index': index, 'content_index': 0}
            events.append(
                (at, {'type': 'response.output_item.added', 'output_index': index, 'item': {**item, 'content': None}})
            )
            events.extend((at, {'type': 'response.output_text.delta', **where, 'delta': c}) for c in chunks(text))
            events.append((at, {'type': 'response.output_text.done', **where, 'text': text}))
        else:
            events.append((at, {'type': 'response.output_item.added', 'output_index': index, 'item': item}))
        events.append((at, {'type': 'response.output_item.done', 'output_index': index, 'item': item}))
    status = str(final.get('status', 'completed'))
    if status == 'failed':
        events.append((duration, {'type': 'response.failed', 'error': final.get('error')}))
    else:
        events.append((duration, {'type': f'response.{status}', 'response': final}))
    return [(at, {**event, 'sequence_number': seq}) for seq, (at, event) in enumerate(events)]


@dataclass(frozen=True, slots=True)
class _Renewal:
    """Rewrites a recorded object for its replay: the new id, timestamps moved to now, the replay's delivery."""

    old_id: str
    new_id: str
    shift: int
    background: bool
    store: bool

    def __call__(self, value: dict[str, Any]) -> dict[str, Any]:
        text = json.dumps(value, ensure_ascii=False)
        data = _obj(json.loads(text.replace(self.old_id, self.new_id) if self.old_id else text))
        for name in ('created_at', 'completed_at'):
            if isinstance(data.get(name), int):
                data[name] += self.shift
        if 'background' in data:
            data |= {'background': self.background, 'store': self.store}
        return data


def _replay_steps(events: list[tuple[float, dict[str, Any]]], renew: _Renewal, terminal: dict[str, Any]) -> list[Step]:
    """The recorded events as a run's script, in order, each terminal event carrying the terminal snapshot."""
    steps: list[Step] = []
    offset = 0.0
    for at, recorded in events:
        event = renew(recorded)
        if isinstance(event.get('response'), dict):
            event['response'] = terminal if event.get('type') in _TERMINAL_EVENTS else renew(event['response'])
        offset = max(offset, at)  # never earlier than the event before
        done = (int(event['output_index']), event['item']) if event.get('type') == 'response.output_item.done' else None
        steps.append(Step(offset, int(event['sequence_number']), event, done))
    return steps


def replay_run(
    recording: Recording, *, background: bool, store: bool, stream: bool, time_scale: float, now: float | None = None
) -> Run:
    """An emulator run that plays a recording back: a new id, times moved to now, the recorded events in order.

    Recorded offsets are real seconds; like every emulated duration they are scaled by `time_scale`.
    """
    final = recording.final
    if final is None:
        name = recording.path.name if recording.path else '?'
        raise ApiError(404, 'recording_not_found', f'{name} has no final response')
    events = recording.events if recording.events and recording.events[-1][1].get('type') in _TERMINAL_EVENTS else []
    wall = time.time()
    shift = int(wall) - int(final.get('created_at') or int(wall))
    renew = _Renewal(str(final.get('id', '')), f'resp_{uuid.uuid4()}', shift, background, store)
    terminal = renew(final)
    steps = _replay_steps(events or _events_from_final(final), renew, terminal)
    created = _obj(next((s.event.get('response') for s in steps if s.type == 'response.created'), None))
    base: dict[str, Any] = {**terminal, 'status': 'queued', 'completed_at': None, 'output': [], 'usage': None}
    base |= {'error': None, 'incomplete_details': None}
    return Run(
        id=renew.new_id,
        created_at=wall,
        t0=time.monotonic() if now is None else now,
        time_scale=time_scale,
        background=background,
        store=store,
        stream=stream,
        steps=steps,
        base=base,
        running_model=str(created.get('model') or terminal.get('model', '')),
        model=str(terminal.get('model', '')),
        terminal=terminal,
    )


# ---------------------------------------------------------------------------------------------------------------
# The sample recordings shipped with the tests

#: What `make_samples` records: small runs as the library's research calls send them, a search, the model list.
SAMPLE_RUNS = (
    {'input': 'What is the EU AI Act?', 'effort': 'fast'},
    {'input': 'How do heat pumps work?', 'effort': 'low'},
)
SAMPLE_SEARCH = {'query': 'heat pumps', 'max_results': 3}


def make_samples(directory: Path) -> list[Path]:
    """Record the sample sessions into `directory`: an emulator is the upstream, a recording proxy in front of it.

    Each run is created as a background stream, as the library's research calls are, so its timing is recorded.
    """
    import httpx2

    from ._server import Emulator

    for old in directory.glob('*.json'):
        old.unlink()
    with Emulator(time_scale=0.002) as upstream, Emulator(record=directory, upstream=upstream.base_url) as proxy:
        headers = {'Authorization': f'Bearer {upstream.api_key}'}
        with httpx2.Client(base_url=proxy.base_url, headers=headers, timeout=60) as client:
            for body in SAMPLE_RUNS:
                streamed = {**body, 'background': True, 'store': True, 'stream': True}
                with client.stream('POST', '/v1/agent', json=streamed) as response:
                    response.read()
            client.post('/search', json=SAMPLE_SEARCH).raise_for_status()
            client.get('/v1/models').raise_for_status()
    return sorted(directory.glob('*.json'))


if __name__ == '__main__':  # pragma: no cover - regenerates tests/emulator/recordings
    import sys

    for written in make_samples(Path(sys.argv[1] if len(sys.argv) > 1 else 'tests/emulator/recordings')):
        print(written)
