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
import logging
import os
import re
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .._base.redact import is_secret_param, redact_urls_and_secrets_in
from .._base.safe_write import UnsafePathError, write_text_no_follow
from .._base.statuses import END_EVENTS, TERMINAL_STATUSES
from ._errors import ApiError
from ._files import list_names, open_folder, read_inside
from ._runs import Run, Step, chunks

__all__ = (
    'FORMAT',
    'LIVE_HEADERS',
    'MAX_DEPTH',
    'MAX_RECORDING_BYTES',
    'VERSION',
    'Recorder',
    'Recording',
    'RecordingError',
    'Replayer',
    'live_headers',
    'match_key',
    'replay_headers',
    'replay_run',
    'sanitize',
    'sse_events',
    'sse_tee',
    'with_headers',
)

#: The `format` and `version` of every recording file; a reader refuses other versions.
FORMAT = 'pydantic-ai-perplexity/recording'
VERSION = 1
#: Request fields that change how a run is delivered or tagged, not what it is: a recording serves every mode.
_DELIVERY_FIELDS = frozenset({'stream', 'background', 'store', 'stream_options', 'metadata'})
#: Keys whose values are secrets wherever they appear in a body.
_SECRET_KEYS = frozenset(
    {
        'authorization',
        'headers',
        'api_key',
        'apikey',
        'api-key',
        'x-api-key',
        'token',
        'access_token',
        'refresh_token',
        'client_secret',
        'secret',
        'password',
        'cookie',
    }
)
#: Keys whose value is the URL of a credentialed endpoint (a remote MCP server): its path tokens go too.
_ENDPOINT_KEYS = frozenset({'server_url'})
#: Secrets found in a URL shorter than this are masked in the URL but not hunted through every other text.
_MIN_HUNTED = 6
_SECRET_TEXT = re.compile(r'pplx-[A-Za-z0-9_-]{8,}')
#: The live API's answer headers that a recording keeps and a replay serves back (live capture, 2026-10-09):
#: the rate limit's state and the request id (the run id without `resp_` on a create).
LIVE_HEADERS = ('x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset', 'x-ratelimit-used', 'x-request-id')
#: A recording file larger than this is refused (the largest real run is well under 1 MiB).
MAX_RECORDING_BYTES = 16 * 1024 * 1024
#: JSON nested deeper than this is refused (a real recording is about 10 levels deep).
MAX_DEPTH = 64
#: More files than this in a replay directory are refused (each is read at start).
_MAX_FILES = 10_000
_KINDS = frozenset({'run', 'search', 'models'})
#: The longest run a replay plays (recorded seconds); a run id as the API makes them (it is replaced on replay).
_MAX_SECONDS = 86_400
_RUN_ID = re.compile(r'resp_[A-Za-z0-9_-]{4,128}')
_MODEL_ID = re.compile(r'[^/\s]+/\S+')
#: Statuses whose answers have no body: a recorded answer (which has one) cannot be served with them.
_NO_BODY = frozenset({204, 205, 304})
_REDACTED = '[redacted]'
_log = logging.getLogger('uvicorn.error')


def _obj(value: Any) -> dict[str, Any]:
    """`value` if it is a JSON object, else an empty one."""
    return cast(dict[str, Any], value) if isinstance(value, dict) else {}


def _arr(value: Any) -> list[Any]:
    """`value` if it is a JSON array, else an empty one."""
    return cast(list[Any], value) if isinstance(value, list) else []


class RecordingError(ValueError):
    """A file in a replay directory that cannot be served: the message names the file and says why."""


def sanitize(value: Any, secrets: tuple[str, ...] = ()) -> Any:
    """`value` with every credential removed, for a file that may be committed and shared.

    The values of secret-named keys (`authorization`, `headers`, `api_key`, ...) become `[redacted]`; every URL
    loses its user info and secret query parameters (`_base/redact.py`), a remote MCP server's `server_url` its token
    path segments too; then each secret found that way, each of `secrets` and any `pplx-…` key is removed
    from every text (an answer may quote a URL it was given).
    """
    found: set[str] = set()
    cleaned = _redact_tree(value, found, endpoint=False)
    hunted = {s for s in found if len(s) >= _MIN_HUNTED} | {s for s in secrets if s}
    return _scrub_tree(cleaned, tuple(sorted(hunted, key=len, reverse=True)))


def _redact_tree(value: Any, found: set[str], *, endpoint: bool) -> Any:
    """Secret-named values and URL credentials replaced; the secrets they held added to `found`."""
    if isinstance(value, dict):
        result: dict[str, Any] = {}
        for key, item in _obj(value).items():
            folded = key.casefold()
            if folded in _SECRET_KEYS and item is not None:
                found.update(_strings_of(item))
                result[key] = _REDACTED
            else:
                result[key] = _redact_tree(item, found, endpoint=folded in _ENDPOINT_KEYS)
        return result
    if isinstance(value, list):
        return [_redact_tree(item, found, endpoint=endpoint) for item in _arr(value)]
    if isinstance(value, str):
        text, secrets = redact_urls_and_secrets_in(value, whole_userinfo=True, path_tokens=endpoint)
        found.update(secrets)
        return text
    return value


def _strings_of(value: Any) -> Iterator[str]:
    """The texts of a secret value (of a headers object, those under secret names), and the token after a scheme
    word (`Bearer <token>`)."""
    if isinstance(value, str):
        yield value
        yield value.rpartition(' ')[2]
    elif isinstance(value, dict):
        for key, item in _obj(value).items():
            if key.casefold() in _SECRET_KEYS or is_secret_param(key):
                yield from _strings_of(item)
    elif isinstance(value, list):
        for item in _arr(value):
            yield from _strings_of(item)


def _scrub_tree(value: Any, secrets: tuple[str, ...]) -> Any:
    if isinstance(value, dict):
        return {key: _scrub_tree(item, secrets) for key, item in _obj(value).items()}
    if isinstance(value, list):
        return [_scrub_tree(item, secrets) for item in _arr(value)]
    if isinstance(value, str):
        for secret in secrets:
            value = value.replace(secret, _REDACTED)
        return _SECRET_TEXT.sub(_REDACTED, value)
    return value


def live_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The live headers (`LIVE_HEADERS`) among an answer's headers, by their lower-case names."""
    lowered = {k.lower(): v for k, v in headers.items()}
    return {name: lowered[name] for name in LIVE_HEADERS if name in lowered}


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
    headers: dict[str, str] = field(default_factory=dict[str, str])

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
            if self.headers:
                data['run']['headers'] = self.headers
        else:
            data['response'] = self.response if not self.headers else {**(self.response or {}), 'headers': self.headers}
        return data

    @classmethod
    def from_json(cls, data: Any, path: Path) -> Recording:
        """Read a file's content, checking every field a replay uses; `RecordingError` names the file and the field."""
        name = path.name
        content, kind = _envelope(data, name)
        request = _field(content, 'request', dict, name)
        body = _field(request, 'body', dict, name, where='request.')
        recorded_at = content.get('recorded_at', '')
        recording = cls(kind, body, recorded_at=recorded_at if isinstance(recorded_at, str) else '', path=path)
        if kind == 'run':
            _check_models(body, name)
            run = _field(content, 'run', dict, name)
            recording.events = _events(_field(run, 'events', list, name, where='run.'), name)
            recording.final = _final(run.get('final'), name)
            recording.headers = _headers(run.get('headers'), name, 'run.headers')
        else:
            response = _response(_field(content, 'response', dict, name), kind, name)
            recording.headers = _headers(response.get('headers'), name, 'response.headers')
            recording.response = {k: v for k, v in response.items() if k != 'headers'}
        return recording

    def write(self, directory: Path) -> Path:
        """Write (or rewrite) the file atomically, never through a link (`_base/safe_write.py`), and return its path."""
        path = self.path or directory / _file_name(self.kind, self.body)
        write_text_no_follow(path, json.dumps(self.to_json(), ensure_ascii=False, indent=1) + '\n')
        self.path = path
        return path


def _envelope(data: Any, name: str) -> tuple[dict[str, Any], str]:
    """A recording file's content and kind, once its format, version and kind are checked."""
    if not isinstance(data, dict) or data.get('format') != FORMAT:  # pyright: ignore[reportUnknownMemberType]
        raise RecordingError(f'{name}: not a recording (no "format": "{FORMAT}")')
    content = _obj(data)
    if content.get('version') != VERSION:
        raise RecordingError(f'{name}: recording version {content.get("version")!r}, this emulator reads {VERSION}')
    kind = content.get('kind')
    if not isinstance(kind, str) or kind not in _KINDS:
        raise RecordingError(f'{name}: "kind" is {kind!r}; expected "run", "search" or "models"')
    return content, kind


def _check_models(body: dict[str, Any], name: str) -> None:
    """A recorded run's `model` and `models` are `provider/model` ids (a replay adds them to its model table)."""
    named = [('model', body.get('model'))] + [(f'models[{i}]', m) for i, m in enumerate(_arr(body.get('models')))]
    for where, model in named:
        if model is not None and not _is_model_id(model):
            raise RecordingError(f'{name}: "request.body.{where}" is {model!r}; expected "provider/model"')


def _response(response: dict[str, Any], kind: str, name: str) -> dict[str, Any]:
    """A recorded search or model list answer: an HTTP status with a body, and the body (an object for models)."""
    status = response.get('status', 200)
    if type(status) is not int or not 200 <= status <= 599 or status in _NO_BODY:
        raise RecordingError(
            f'{name}: "response.status" is {status!r}; expected an HTTP status with a body (200-599, '
            'not 204, 205 or 304)'
        )
    if 'body' not in response or (kind == 'models' and not isinstance(response['body'], dict)):
        wanted = 'a JSON object' if kind == 'models' else 'the recorded JSON answer'
        raise RecordingError(f'{name}: "response.body" is missing or not {wanted}')
    return response


def _field(parent: dict[str, Any], key: str, kind: type, name: str, *, where: str = '') -> Any:
    """`parent[key]`, which must be of type `kind` (a JSON object or array), or a `RecordingError`."""
    value = parent.get(key)
    if not isinstance(value, kind):
        wanted = 'a JSON object' if kind is dict else 'a JSON array'
        raise RecordingError(f'{name}: "{where}{key}" is missing or not {wanted}')
    return value


def _is_model_id(value: Any) -> bool:
    """Whether `value` is a `provider/model` id (a replay adds the recorded ones to its model table)."""
    return isinstance(value, str) and _MODEL_ID.fullmatch(value) is not None


def _is_int(value: Any) -> bool:
    return type(value) is int


def _events(raw: list[Any], name: str) -> list[tuple[float, dict[str, Any]]]:
    """The recorded events, each with a finite time, a type and increasing sequence numbers."""
    events: list[tuple[float, dict[str, Any]]] = []
    last = -1
    for index, entry in enumerate(raw):
        at, event = _event(entry, f'{name}: "run.events[{index}]', last)
        last = event['sequence_number']
        events.append((at, event))
    return events


def _event(entry: Any, where: str, last: int) -> tuple[float, dict[str, Any]]:
    """One recorded event and its time; its sequence number must be above `last`."""
    at = _obj(entry).get('at')
    event = _obj(entry).get('event')
    if not isinstance(at, int | float) or isinstance(at, bool) or not 0 <= at <= _MAX_SECONDS:
        raise RecordingError(
            f'{where}.at" is {at!r}; expected seconds since the create (a number from 0 to {_MAX_SECONDS})'
        )
    if not isinstance(event, dict):
        raise RecordingError(f'{where}.event" is missing or not a JSON object')
    event = _obj(event)
    if not isinstance(event.get('type'), str):
        raise RecordingError(f'{where}.event.type" is missing or not a string')
    seq = event.get('sequence_number')
    if not isinstance(seq, int) or isinstance(seq, bool) or seq <= last:
        raise RecordingError(
            f'{where}.event.sequence_number" is {seq!r}; expected an integer above the one before ({last})'
        )
    _check_event_shape(event, where)
    return float(at), event


def _check_event_shape(event: dict[str, Any], where: str) -> None:
    """An `output_item.done` event has its index and item; a `response` field is an object."""
    if event['type'] == 'response.output_item.done' and not (
        _is_int(event.get('output_index')) and event['output_index'] >= 0 and isinstance(event.get('item'), dict)
    ):
        raise RecordingError(f'{where}.event" (output_item.done) needs an "output_index" >= 0 and an "item" object')
    if 'response' in event and event['response'] is not None and not isinstance(event['response'], dict):
        raise RecordingError(f'{where}.event.response" is not a JSON object')


def _final(raw: Any, name: str) -> dict[str, Any]:
    """The run's terminal response, with the fields a replay reads of the right types."""
    if not isinstance(raw, dict):
        raise RecordingError(
            f'{name}: "run.final" is missing or not a JSON object (the run did not end while it was recorded; '
            'record it again and let it finish)'
        )
    final = _obj(raw)
    status = final.get('status')
    if not isinstance(status, str) or status not in TERMINAL_STATUSES:
        raise RecordingError(
            f'{name}: "run.final.status" is {status!r}, not an end state ({", ".join(sorted(TERMINAL_STATUSES))}); '
            'the run did not end while it was recorded'
        )
    _check_final_times(final, name)
    _check_final_fields(final, name)
    return final


def _check_final_times(final: dict[str, Any], name: str) -> None:
    """The terminal response's `created_at` and `completed_at`: Unix seconds or null, at most a replay apart."""
    for key in ('created_at', 'completed_at'):
        if final.get(key) is not None and not (_is_int(final[key]) and 0 <= final[key] < 2**40):
            raise RecordingError(f'{name}: "run.final.{key}" is {final[key]!r}; expected Unix seconds or null')
    created, completed = final.get('created_at') or 0, final.get('completed_at') or 0
    if created and completed - created > _MAX_SECONDS:
        raise RecordingError(
            f'{name}: the run lasted {completed - created} s, more than a replay plays ({_MAX_SECONDS})'
        )


def _check_final_fields(final: dict[str, Any], name: str) -> None:
    """The terminal response's id and model, and its output and objects, of the types a replay reads."""
    if final.get('id') is not None and not (isinstance(final['id'], str) and _RUN_ID.fullmatch(final['id'])):
        raise RecordingError(f'{name}: "run.final.id" is {final["id"]!r}; expected a run id such as "resp_<uuid>"')
    if final.get('model') is not None and not _is_model_id(final['model']):
        raise RecordingError(f'{name}: "run.final.model" is {final["model"]!r}; expected "provider/model"')
    _check_final_objects(final, name)


def _check_final_objects(final: dict[str, Any], name: str) -> None:
    """The terminal response's output is an array of objects; usage, error and incomplete details objects or null."""
    output = final.get('output', [])
    if not isinstance(output, list) or not all(isinstance(item, dict) for item in _arr(output)):
        raise RecordingError(f'{name}: "run.final.output" is not a JSON array of objects')
    for key in ('usage', 'error', 'incomplete_details'):
        if final.get(key) is not None and not isinstance(final[key], dict):
            raise RecordingError(f'{name}: "run.final.{key}" is {final[key]!r}; expected a JSON object or null')


def _headers(raw: Any, name: str, where: str) -> dict[str, str]:
    """Recorded live headers: only `LIVE_HEADERS`, each a printable string (a header value holds no line break)."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise RecordingError(f'{name}: "{where}" is not a JSON object')
    headers: dict[str, str] = {}
    for key, value in _obj(raw).items():
        if key.lower() not in LIVE_HEADERS:
            raise RecordingError(f'{name}: "{where}" holds {key!r}; a recording keeps only {", ".join(LIVE_HEADERS)}')
        if not isinstance(value, str) or not value.isprintable() or not value.isascii() or len(value) > 256:
            raise RecordingError(f'{name}: "{where}.{key}" is not a short printable ASCII string')
        headers[key.lower()] = value
    return headers


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
        """Record into `directory` (created if needed); `secrets` are extra strings never to store.

        Raises:
            UnsafePathError: the directory is a symbolic link (recordings are never written through one).
        """
        if directory.is_symlink():
            raise UnsafePathError(
                f'{directory} is a symbolic link (to {os.readlink(directory)}); recordings are not written through '
                'one. Record into a real directory.'
            )
        self.directory = directory
        self.secrets = secrets
        self._runs: dict[str, tuple[Recording, float]] = {}

    def _clean(self, value: Any, authorization: str) -> Any:
        token = authorization.partition(' ')[2].strip()
        return sanitize(value, (*self.secrets, token) if token else self.secrets)

    def _write(self, recording: Recording) -> None:
        """Write a recording; a refused or failed write is logged (the answer still reaches the client)."""
        try:
            recording.write(self.directory)
        except (UnsafePathError, OSError) as exc:
            _log.error('Recording not written: %s', exc)

    def created(
        self,
        body: dict[str, Any],
        snapshot: dict[str, Any],
        started: float,
        authorization: str,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """A create answered with JSON: remember the run; write it now if it is already terminal."""
        recording = Recording('run', self._clean(body, authorization), recorded_at=_now())
        recording.final = self._clean(snapshot, authorization)
        recording.headers = live_headers(headers or {})
        run_id = str(snapshot.get('id', ''))
        self._runs[run_id] = (recording, started)
        self._write(recording)

    def streamed(
        self,
        body: dict[str, Any] | None,
        run_id: str | None,
        events: list[tuple[float, dict[str, Any]]],
        auth: str,
        started: float,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """Events seen on a stream (a create's from `started`, or a resume of `run_id`), merged into its recording.

        `headers` are the create's answer headers (a resume's are not the create's, so it passes none).
        """
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
        if headers:
            recording.headers = live_headers(headers)
        self._merge(recording, events, started, auth)
        last = recording.events[-1][1]
        if last.get('type') in END_EVENTS and isinstance(last.get('response'), dict):
            recording.final = last['response']
        self._write(recording)

    def _merge(
        self, recording: Recording, events: list[tuple[float, dict[str, Any]]], started: float, auth: str
    ) -> None:
        """Add the events the recording lacks (timed from `started`, cleaned), kept in sequence order."""
        seen = {e.get('sequence_number') for _, e in recording.events}
        for at, event in events:
            if event.get('sequence_number') not in seen:
                recording.events.append((max(0.0, at - started), self._clean(event, auth)))
        recording.events.sort(key=lambda pair: int(pair[1].get('sequence_number', 0)))

    def retrieved(self, run_id: str, snapshot: dict[str, Any], auth: str) -> bool:
        """A retrieve's snapshot: a terminal one becomes the final response. True when the events are missing."""
        entry = self._runs.get(run_id)
        if entry is None or snapshot.get('status') not in TERMINAL_STATUSES:
            return False
        recording, _ = entry
        recording.final = self._clean(snapshot, auth)
        self._write(recording)
        has_end = bool(recording.events) and recording.events[-1][1].get('type') in END_EVENTS
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

    def exchange(
        self,
        kind: str,
        body: dict[str, Any],
        response: dict[str, Any],
        auth: str,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """A search or the model list, stored whole."""
        recording = Recording(kind, self._clean(body, auth), recorded_at=_now())
        recording.response = self._clean(response, auth)
        recording.headers = live_headers(headers or {})
        self._write(recording)


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
        """Load every `*.json` recording in `directory`, checking each one now rather than when it is served.

        Only regular files directly inside the directory are read: a symbolic link, a directory, a FIFO or a
        device named `*.json` is refused, as is a file over `MAX_RECORDING_BYTES`, nested deeper than
        `MAX_DEPTH`, not UTF-8 JSON, or with a field a replay cannot serve. Hidden files (`.name`) are skipped.

        Raises:
            RecordingError: the directory is missing, or a file is refused (the message names it and says why).
        """
        self.directory = directory
        self.recordings: dict[str, Recording] = {}
        dir_fd = open_folder(directory, 'replay directory', RecordingError)
        try:
            names = list_names(dir_fd, ('.json',))
            if len(names) > _MAX_FILES:
                raise RecordingError(f'replay directory {directory} holds {len(names)} recordings, over {_MAX_FILES}')
            for name in names:
                recording = Recording.from_json(_read_recording(dir_fd, name), directory / name)
                key = match_key(recording.kind, sanitize(recording.body))  # as `find` sees a request
                other = self.recordings.get(key)
                if other is not None and other.path is not None:
                    raise RecordingError(f'{name}: records the same request as {other.path.name}; keep one of them')
                self.recordings[key] = recording
        finally:
            os.close(dir_fd)

    def find(self, kind: str, body: Mapping[str, Any]) -> Recording:
        """The recording of this request, or a 404 naming the closest recording and how it differs."""
        body = sanitize(body)  # as the recorded requests were: a request's credentials are not in any file
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


def replay_headers(recording: Recording, run_id: str | None = None) -> dict[str, str]:
    """The recorded live headers to serve with a replayed answer; a run's `x-request-id` is its new id without
    `resp_` (as live), another answer's a fresh one (the recorded id named another request)."""
    headers = {k: v for k, v in recording.headers.items() if k != 'x-request-id'}
    if run_id is not None:
        headers['x-request-id'] = run_id.removeprefix('resp_')
    return headers


def with_headers(app: ASGIApp, headers: Mapping[str, str]) -> ASGIApp:
    """`app` (a response) with `headers` set on its start message (replacing any of the same name)."""
    if not headers:
        return app
    extra = [(k.lower().encode('latin-1'), v.encode('latin-1')) for k, v in headers.items()]
    names = {k for k, _ in extra}

    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        async def send_with(message: Message) -> None:
            if message['type'] == 'http.response.start':
                kept = [(k, v) for k, v in message.get('headers', []) if bytes(k).lower() not in names]
                message = {**message, 'headers': [*kept, *extra]}
            await send(message)

        await app(scope, receive, send_with)

    return wrapped


def _read_recording(dir_fd: int, name: str) -> Any:
    """The JSON of one file of a replay directory: a regular file inside it, bounded in size and depth."""
    raw = read_inside(dir_fd, name, MAX_RECORDING_BYTES, RecordingError)
    try:
        data = json.loads(raw.decode('utf-8'), parse_constant=_not_json)
    except UnicodeDecodeError:
        raise RecordingError(f'{name}: is not UTF-8 text') from None
    except RecursionError:
        raise RecordingError(f'{name}: JSON nested deeper than {MAX_DEPTH} levels') from None
    except ValueError as exc:
        raise RecordingError(f'{name}: is not valid JSON ({exc})') from None
    if _depth_over(data, MAX_DEPTH):
        raise RecordingError(f'{name}: JSON nested deeper than {MAX_DEPTH} levels')
    return data


def _not_json(constant: str) -> Any:
    """`NaN` and `Infinity`, which Python's reader takes but JSON has not (nor can a replay serve them)."""
    raise ValueError(f'{constant} is not a JSON value')


def _depth_over(value: Any, limit: int) -> bool:
    """Whether JSON `value` nests deeper than `limit` (walked without recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > limit:
                return True
            children = _obj(item).values() if isinstance(item, dict) else _arr(item)
            stack.extend((child, depth + 1) for child in children)
    return False


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
            event['response'] = terminal if event.get('type') in END_EVENTS else renew(event['response'])
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
    events = recording.events if recording.events and recording.events[-1][1].get('type') in END_EVENTS else []
    wall = time.time()
    shift = int(wall) - int(final.get('created_at') or int(wall))
    renew = _Renewal(str(final.get('id', '')), f'resp_{uuid.uuid4()}', shift, background, store)
    terminal = renew(final)
    steps = _replay_steps(events or _events_from_final(final), renew, terminal)
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
        running_model=_running_model(steps, terminal),
        model=str(terminal.get('model', '')),
        terminal=terminal,
    )


def _running_model(steps: list[Step], terminal: dict[str, Any]) -> str:
    """The model a replayed run shows while running: the recorded `response.created`'s, else the final one."""
    created = _obj(next((s.event.get('response') for s in steps if s.type == 'response.created'), None))
    return str(created.get('model') or terminal.get('model', ''))
