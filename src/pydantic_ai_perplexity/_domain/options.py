"""`ResearchOptions`: every option of a research run, with its description, limits and normalisation, written once.

The toolset's and the MCP server's tool arguments (`_core/tool_spec.py`), the CLI's `research` options and the options
table in `docs/options.md` are derived from the fields here; `Researcher.run/start` take them as keywords (typed by
`ResearchOptionsDict`, so a misspelt option is a type error) or as `options=ResearchOptions(...)`. A bad value is an
`InvalidArgumentError` in the project's words, naming the option: never pydantic's own text.

Adding an option: a field here (type, `Opt` with its description and limits), its line in `to_request` if it
goes on the wire, and its key in `ResearchOptionsDict`. Mark it `tool=True` to offer it to models as well.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import math
import mimetypes
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, Protocol, Self, cast, get_args, runtime_checkable

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SkipValidation,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo
from typing_extensions import TypedDict

from .._base.efforts import DEFAULT_EFFORT, EFFORTS, LEGACY_PRESETS, Effort, LegacyPreset, normalize_effort
from .._base.efforts import shown as _shown
from .._base.env import ENV
from .._base.errors import InvalidArgumentError
from .._base.statuses import RunStatus

if TYPE_CHECKING:
    from ..client._params import AgentRequest, InputItem, McpTool, ResponseFormat, Tool, WebSearchFilters
else:  # the client package imports the HTTP stack, which the CLI must not load to list its options
    AgentRequest = McpTool = InputItem = dict

__all__ = (
    'EFFORTS',
    'EXTRA_TOOLS',
    'LEGACY_PRESETS',
    'MAX_FILES',
    'MAX_FILES_BYTES',
    'MAX_FILE_BYTES',
    'MAX_MODELS',
    'MODEL_ID',
    'REASONING_EFFORTS',
    'RECENCIES',
    'RUN_STATUSES',
    'SERVICE_TIERS',
    'Effort',
    'ExtraTool',
    'FileInput',
    'FunctionTool',
    'LegacyPreset',
    'Opt',
    'ReasoningEffort',
    'Recency',
    'ResearchFile',
    'ResearchOptions',
    'ResearchOptionsDict',
    'RunStatus',
    'ServiceTier',
    'check_domains',
    'check_extra_tools',
    'check_id',
    'check_recency',
    'check_wait',
    'describe_invalid',
    'files_under',
    'normalize_effort',
    'option_fields',
    'search_filters',
    'tool_files',
    'wire_date',
)

Recency = Literal['hour', 'day', 'week', 'month', 'year']
RECENCIES: tuple[str, ...] = get_args(Recency)
#: Every status a run can have. `requires_action` is in the API's schema with no flow documented: not terminal, yet
#: waiting longer changes nothing.
RUN_STATUSES: tuple[str, ...] = get_args(RunStatus)
#: The processing tiers of the API's `service_tier`: `flex` for cheaper, unhurried runs (a nightly batch), `priority`
#: for faster ones; `auto`/`default` leave it to the account, `fast` is what live responses echo.
ServiceTier = Literal['auto', 'default', 'flex', 'priority', 'fast']
SERVICE_TIERS: tuple[str, ...] = get_args(ServiceTier)
#: How hard the model itself reasons (`reasoning.effort`): not the run's `effort`, which bundles steps and tools.
ReasoningEffort = Literal['none', 'minimal', 'low', 'medium', 'high', 'xhigh']
REASONING_EFFORTS: tuple[str, ...] = get_args(ReasoningEffort)
ExtraTool = Literal['image_search', 'people_search', 'finance_search', 'sandbox']
#: The Agent API's opt-in tools (`extra_tools=`), each with its fee on the pricing page.
EXTRA_TOOLS: tuple[str, ...] = get_args(ExtraTool)

_DOMAIN = re.compile(r'^-?(?=.{1,253}$)([a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$')
_SCHEMA_NAME = re.compile(r'[^A-Za-z0-9_-]')
#: A model id as `/v1/models` lists them, "provider/model" (matched whole).
MODEL_ID = re.compile(r'[A-Za-z0-9][\w.:@+-]{0,99}/[\w.:@+-]{1,150}')
#: Longer than any id the API hands out (`resp_` and a UUID), short enough to quote back in an error.
MAX_ID_CHARS = 200
MAX_DOMAINS = 20
DEFAULT_FETCH_PAGES = 5
#: Fallback models a request may list (the API's `models`: 1 to 5, tried in order).
MAX_MODELS = 5
#: Files one run may read, the largest one, and all of them together: a create body is at most 32 MiB (413 above
#: it) and base64 makes 4 bytes of 3, so the files' bytes are held under 22 MiB, leaving room for the rest.
MAX_FILES = 10
MAX_FILE_BYTES = 20 * 1024 * 1024
MAX_FILES_BYTES = 22 * 1024 * 1024
_PROFILE_ID = re.compile(r'^[A-Za-z0-9][A-Za-z0-9_.:-]{0,199}$')
_CACHE_KEY_CHARS = 256
#: Local function calls one run may make in all, unless `max_function_calls` says otherwise.
DEFAULT_FUNCTION_CALLS = 10


# -- the checks, each written once (the model's validators and `Researcher.search` call them) --------------------


def search_filters(
    *,
    domains: Sequence[str] | str | None = None,
    recency: str | None = None,
    after: str | date | None = None,
    before: str | date | None = None,
) -> WebSearchFilters:
    """The search filters as the wire names them, each checked: the `web_search` tool's of a run and the Search
    API's share them, so both are built here."""
    filters: WebSearchFilters = {}
    if domains:
        filters['search_domain_filter'] = check_domains(domains)
    if recency:
        filters['search_recency_filter'] = check_recency(recency)
    if after:
        filters['search_after_date_filter'] = wire_date(after, 'after')
    if before:
        filters['search_before_date_filter'] = wire_date(before, 'before')
    return filters


def wire_date(value: str | date, argument: str) -> str:
    """An ISO date (or `date`) as the API's `MM/DD/YYYY`; `InvalidArgumentError` naming `argument` otherwise."""
    return _iso_date(value, argument).strftime('%m/%d/%Y')


def _iso_date(value: object, argument: str) -> date:
    if isinstance(value, date):
        return value
    if isinstance(value, str):
        try:
            return date.fromisoformat(value.strip())
        except ValueError:
            pass
    raise InvalidArgumentError(
        f'{argument}={_shown(value)} is not a date: give it as YYYY-MM-DD, e.g. "2026-01-31".', argument=argument
    )


def check_domains(domains: Sequence[str] | str) -> list[str]:
    """Bare lower-case domains (scheme, path and `www.` dropped; `-` keeps a deny), at most 20."""
    if isinstance(domains, str):
        domains = [domains]
    cleaned: list[str] = []
    for raw in domains:
        value = str(raw).strip().lower()
        deny = value.startswith('-')
        host = value.removeprefix('-')
        host = re.sub(r'^[a-z]+://', '', host).split('/', 1)[0].removeprefix('www.')
        candidate = f'-{host}' if deny else host
        if not _DOMAIN.match(candidate):
            raise InvalidArgumentError(
                f'{_shown(raw)} is not a domain: give bare domains like "nature.com" to search only those, '
                'or "-reddit.com" to exclude one.',
                argument='domains',
            )
        cleaned.append(candidate)
    if len(cleaned) > MAX_DOMAINS:
        raise InvalidArgumentError(
            f'{len(cleaned)} domains given; at most {MAX_DOMAINS} are allowed.', argument='domains'
        )
    return cleaned


def check_recency(recency: object) -> Recency:
    """One of hour, day, week, month, year."""
    if recency not in RECENCIES:
        raise InvalidArgumentError(
            f'recency={_shown(recency)} is not one of {", ".join(RECENCIES)}.', argument='recency'
        )
    return cast('Recency', recency)


def _printable(value: str) -> bool:
    """Whether `value` holds no control characters and no lone surrogates."""
    return all(ch.isprintable() and not '\ud800' <= ch <= '\udfff' for ch in value)


def check_extra_tools(value: object) -> list[ExtraTool]:
    """Opt-in tool names, each once, in the order given: a name or a list of names among `EXTRA_TOOLS`."""
    given: list[object] = (
        [value]
        if isinstance(value, str)
        else list(cast('Sequence[object]', value))
        if isinstance(value, Sequence)
        else [value]
    )
    chosen: list[ExtraTool] = []
    for raw in given:
        name = raw.strip().lower() if isinstance(raw, str) else raw
        if name not in EXTRA_TOOLS:
            raise InvalidArgumentError(
                f'{_shown(raw)} is not a tool the run can be given: use {", ".join(EXTRA_TOOLS)}.',
                argument='extra_tools',
            )
        if name not in chosen:
            chosen.append(cast('ExtraTool', name))
    return chosen


def check_id(response_id: object) -> str:
    """A run id as a caller gave it back: stripped, non-empty, bounded, printable."""
    if not isinstance(response_id, str):
        raise InvalidArgumentError(
            'response_id must be a string, the id a research call handed back, like "resp_...".',
            argument='response_id',
        )
    value = response_id.strip()
    if not value:
        raise InvalidArgumentError(
            'response_id is empty: pass the id a research call handed back, like "resp_...".', argument='response_id'
        )
    if len(value) > MAX_ID_CHARS:
        raise InvalidArgumentError(
            f'response_id is {len(value)} characters long; a run id is at most {MAX_ID_CHARS}, like "resp_...". '
            'Pass the id a research call handed back.',
            argument='response_id',
        )
    if not _printable(value):
        raise InvalidArgumentError(
            'response_id contains control or invalid characters: pass the id a research call handed back, '
            'like "resp_...".',
            argument='response_id',
        )
    return value


def check_wait(wait_seconds: object, cap: float | None = None) -> float | None:
    """A per-call wait: None (the usual budget), or finite seconds >= 0, capped at `cap` (the way in's budget)."""
    if wait_seconds is None:
        return None
    value = math.nan
    if isinstance(wait_seconds, int | float) and not isinstance(wait_seconds, bool):
        value = float(wait_seconds)
    elif isinstance(wait_seconds, str):
        try:
            value = float(wait_seconds.strip())
        except ValueError:
            value = math.nan
    if not math.isfinite(value) or value < 0:
        limit = f' (at most {cap:g})' if cap is not None else ''
        raise InvalidArgumentError(
            f'wait_seconds={_shown(wait_seconds)} is not a number of seconds: give a finite number, 0 or more{limit}, '
            'or leave it out for the usual wait.',
            argument='wait_seconds',
        )
    return value if cap is None else min(value, cap)


def response_format(output_type: type[BaseModel] | dict[str, Any]) -> tuple[ResponseFormat, TypeAdapter[Any] | None]:
    """The `response_format` of a structured answer, and the adapter its data is validated with (for a model)."""
    if isinstance(output_type, dict):
        schema = output_type
        name = str(schema.get('title') or 'research_result')
        adapter = None
    else:
        schema, name, adapter = _model_format(output_type)
    name = _SCHEMA_NAME.sub('_', name)[:64] or 'research_result'
    return {'type': 'json_schema', 'json_schema': {'name': name, 'schema': schema}}, adapter


# -- files and images the run reads ---------------------------------------------------------------------------

#: Images the API takes as `input_image` (as an https URL or a data URI).
_IMAGE_TYPES = frozenset({'image/png', 'image/jpeg', 'image/webp', 'image/gif'})
#: Documents it takes as `input_file` (text is sent as it is; PDFs and office files are read by the API).
_DOCUMENT_TYPES = frozenset(
    {
        'application/pdf',
        'text/plain',
        'text/markdown',
        'text/csv',
        'text/html',
        'application/json',
        'application/rtf',
        'application/msword',
        'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
        'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet',
        'application/vnd.openxmlformats-officedocument.presentationml.presentation',
    }
)
_EXTRA_TYPES = {'.md': 'text/markdown', '.markdown': 'text/markdown', '.csv': 'text/csv', '.webp': 'image/webp'}
#: Magic numbers of the binary types, for bytes given without a media type.
_MAGIC = (
    (b'%PDF-', 'application/pdf'),
    (b'\x89PNG\r\n\x1a\n', 'image/png'),
    (b'\xff\xd8\xff', 'image/jpeg'),
    (b'GIF87a', 'image/gif'),
    (b'GIF89a', 'image/gif'),
)
_DATA_URI = re.compile(r'^data:(?P<type>[\w.+-]+/[\w.+-]+)?(?:;[\w-]+=[\w.-]+)*;base64,(?P<data>.*)$', re.DOTALL)


def _media_type_of(name: str) -> str | None:
    """The media type a file name's extension says (None when it says nothing known)."""
    suffix = Path(name.split('?', 1)[0]).suffix.lower()
    return _EXTRA_TYPES.get(suffix) or mimetypes.types_map.get(suffix)


def _sniffed(data: bytes) -> str | None:
    """The media type of bytes given without one: a known magic number, or UTF-8 text."""
    for magic, kind in _MAGIC:
        if data.startswith(magic):
            return kind
    if data[:4] == b'RIFF' and data[8:12] == b'WEBP':
        return 'image/webp'
    try:
        data.decode('utf-8')
    except UnicodeDecodeError:
        return None
    return 'text/plain'


def _file_error(message: str) -> InvalidArgumentError:
    return InvalidArgumentError(message, argument='files')


def _label(name: str | None) -> str:
    return f' {_shown(name)}' if name else ''


def _accepted_types() -> str:
    return 'PDF, text (txt, md, csv, html, json), office documents and images (png, jpeg, webp, gif)'


class ResearchFile(BaseModel):
    """A file or image the run reads along with the web: an https URL, or content (bytes with their media type).

    A local path is read on the caller's side (`ResearchFile.from_path`) and sent as content, so the API never needs
    to reach it. Size and type are checked here, before anything is reserved or sent. Images go to the API as
    `input_image`, every other file as `input_file`.
    """

    model_config = ConfigDict(extra='forbid', frozen=True)

    url: str | None = None
    data: bytes | None = None
    media_type: str | None = None
    filename: str | None = None

    @model_validator(mode='after')
    def _check(self) -> Self:
        if (self.url is None) == (self.data is None):
            raise _file_error('A file is an https URL or its content (bytes), exactly one of them.')
        if self.url is not None:
            if not re.match(r'^https://[^\s/?#]+\.[^\s/?#]+', self.url) or len(self.url) > 2048:
                raise _file_error(
                    f'{_shown(self.url)} is not a file URL the API can read: give a public https URL (at most 2048 '
                    'characters), or the file itself (a path or its bytes).'
                )
            kind = self.media_type or _media_type_of(self.url)
        else:
            data = cast('bytes', self.data)
            if not data:
                raise _file_error(f'The file{_label(self.filename)} is empty: there is nothing to read.')
            if len(data) > MAX_FILE_BYTES:
                raise _file_error(
                    f'The file{_label(self.filename)} is {_mib(len(data))}; a file may be at most '
                    f'{_mib(MAX_FILE_BYTES)} (the API takes a request of at most 32 MiB). Send a smaller file, or '
                    'its public https URL.'
                )
            kind = self.media_type or (_media_type_of(self.filename) if self.filename else None) or _sniffed(data)
            if kind is None:
                raise _file_error(
                    f'The type of the file{_label(self.filename)} is unknown: give its media_type (e.g. '
                    f'"application/pdf") or a file name with its extension. Accepted: {_accepted_types()}.'
                )
        if kind is not None:
            kind = kind.split(';', 1)[0].strip().lower()
            if kind not in _IMAGE_TYPES and kind not in _DOCUMENT_TYPES:
                raise _file_error(
                    f'The file{_label(self.filename or self.url)} is of type {kind}, which the API does not read. '
                    f'Accepted: {_accepted_types()}.'
                )
        if self.filename is not None and (not self.filename.strip() or len(self.filename) > 255):
            raise _file_error('A file name must be 1 to 255 characters long.')
        object.__setattr__(self, 'media_type', kind)
        return self

    @classmethod
    def from_path(cls, path: str | os.PathLike[str], *, media_type: str | None = None) -> ResearchFile:
        """A local file, read now (its size checked before it is read); sent as its content."""
        where = Path(path).expanduser()
        try:
            size = where.stat().st_size
            if not where.is_file():
                raise _file_error(f'{_shown(str(path))} is not a file: give the path of a file to read.')
            if size > MAX_FILE_BYTES:
                raise _file_error(
                    f'The file {where.name} is {_mib(size)}; a file may be at most {_mib(MAX_FILE_BYTES)}. Send a '
                    'smaller file, or its public https URL.'
                )
            data = where.read_bytes()
        except FileNotFoundError:
            raise _file_error(f'No file {_shown(str(path))}: give the path of a file to read.') from None
        except OSError as exc:
            raise _file_error(f'The file {_shown(str(path))} cannot be read ({exc.strerror or exc}).') from None
        return cls(data=data, media_type=media_type, filename=where.name)

    @classmethod
    def coerce(cls, value: object) -> ResearchFile:
        """A file from what a caller gives: a `ResearchFile`, an https URL, a `data:` URI, a path, or bytes."""
        if isinstance(value, ResearchFile):
            return value
        if isinstance(value, bytes | bytearray):
            return cls(data=bytes(value))
        if isinstance(value, os.PathLike):
            return cls.from_path(cast('os.PathLike[str]', value))
        if isinstance(value, Mapping):
            return cls.model_validate(value)
        if isinstance(value, str):
            text = value.strip()
            if text.startswith('data:'):
                return cls.from_data_uri(text)
            if re.match(r'^[a-z][a-z0-9+.-]*://', text, re.IGNORECASE):
                return cls(url=text)
            return cls.from_path(text)
        raise _file_error(
            f'{_shown(value)} is not a file: give an https URL, a path, bytes, a data: URI or a ResearchFile.'
        )

    @classmethod
    def from_data_uri(cls, uri: str, *, filename: str | None = None) -> ResearchFile:
        """Content given as `data:<media type>;base64,<content>` (how an MCP client sends a file)."""
        match = _DATA_URI.match(uri)
        if match is None:
            raise _file_error(
                'A data: URI must be "data:<media type>;base64,<content>", e.g. "data:application/pdf;base64,JVBE...".'
            )
        body = match['data']
        if len(body) > (MAX_FILE_BYTES // 3 + 1) * 4 + 8:
            raise _file_error(f'The file is over {_mib(MAX_FILE_BYTES)}: send a smaller file, or its https URL.')
        try:
            data = base64.b64decode(body, validate=True)
        except (binascii.Error, ValueError):
            raise _file_error('The data: URI holds no valid base64 content.') from None
        return cls(data=data, media_type=match['type'], filename=filename)

    @property
    def is_image(self) -> bool:
        """Whether the API takes it as an image (`input_image`)."""
        return self.media_type in _IMAGE_TYPES

    @property
    def name(self) -> str:
        """How messages name it: its file name, else its URL, else its type."""
        return self.filename or self.url or f'a {self.media_type} file'

    def identity(self) -> str:
        """What makes two files the same for reuse: the URL, or a digest of the content."""
        if self.url is not None:
            return self.url
        return 'sha256:' + hashlib.sha256(cast('bytes', self.data)).hexdigest()

    def to_part(self) -> dict[str, Any]:
        """The content part of the create request's user message."""
        if self.is_image:
            if self.url is not None:
                return {'type': 'input_image', 'image_url': self.url}
            encoded = base64.b64encode(cast('bytes', self.data)).decode('ascii')
            return {'type': 'input_image', 'image_url': f'data:{self.media_type};base64,{encoded}'}
        part: dict[str, Any] = {'type': 'input_file'}
        if self.url is not None:
            part['file_url'] = self.url
        else:
            part['file_data'] = base64.b64encode(cast('bytes', self.data)).decode('ascii')
        name = self.filename or (_default_name(self.media_type) if self.data is not None else None)
        if name:
            part['filename'] = name
        return part

    def __repr__(self) -> str:
        size = f', {len(self.data)} bytes' if self.data is not None else ''
        return f'ResearchFile({self.name!r}, {self.media_type!r}{size})'


def _default_name(media_type: str | None) -> str | None:
    """A file name for content given without one, so that the API can tell its type."""
    suffix = mimetypes.guess_extension(media_type) if media_type else None
    return f'file{suffix}' if suffix else None


def _mib(size: int) -> str:
    return f'{size / (1024 * 1024):.1f} MiB'


FileInput = ResearchFile | str | bytes | os.PathLike[str]
"""What `files=` takes per file: a `ResearchFile`, an https URL, a path (read here), bytes, or a `data:` URI."""


def check_files(value: object) -> tuple[ResearchFile, ...]:
    """The files a run reads, each checked, with their count and total size bounded."""
    items: list[object]
    if isinstance(value, str | bytes | bytearray | os.PathLike | ResearchFile | Mapping):
        items = [cast('object', value)]
    elif isinstance(value, Sequence):
        items = list(cast('Sequence[object]', value))
    else:
        raise _file_error('files must be a list of files: https URLs, paths, bytes or ResearchFile.')
    if len(items) > MAX_FILES:
        raise _file_error(f'{len(items)} files given; a run reads at most {MAX_FILES}.')
    files = tuple(ResearchFile.coerce(item) for item in items)
    total = sum(len(f.data) for f in files if f.data is not None)
    if total > MAX_FILES_BYTES:
        raise _file_error(
            f'The files come to {_mib(total)} together; a run takes at most {_mib(MAX_FILES_BYTES)} (the API takes a '
            'request of at most 32 MiB). Send fewer or smaller files, or their https URLs.'
        )
    return files


def tool_files(given: Sequence[str], root: str | os.PathLike[str] | None = None) -> tuple[ResearchFile, ...]:
    """The `files` a tool call names: https URLs and `data:` URIs; a local path only under `root` (a stdio MCP
    server's `PERPLEXITY_MCP_FILES_ROOT`), never anywhere else: a model's argument must not read the host's files."""
    files: list[ResearchFile] = []
    for raw in given:
        text = str(raw).strip()
        if text.startswith('data:') or re.match(r'^[a-z][a-z0-9+.-]*://', text, re.IGNORECASE):
            files.append(ResearchFile.coerce(text))
        elif root is not None:
            files.append(files_under(root, text))
        else:
            raise _file_error(
                f'{_shown(text)} is not an https URL: this tool reads files by https URL, or their content as '
                '"data:<type>;base64,...". (A local stdio MCP server reads paths inside the folder its operator '
                'sets in PERPLEXITY_MCP_FILES_ROOT.)'
            )
    return check_files(files)


def files_under(root: str | os.PathLike[str], given: str) -> ResearchFile:
    """A file named by a path relative to `root` (an operator's folder), read only if it lies inside it.

    Raises:
        InvalidArgumentError: the path leaves the root (`..`, an absolute path elsewhere, or a symlink out of it),
            or names no file.
    """
    base = Path(root).expanduser().resolve()
    if not base.is_dir():
        raise _file_error(
            f'This server reads files from {str(base)!r}, which is not a folder: ask its operator to fix '
            'PERPLEXITY_MCP_FILES_ROOT, or send the file by https URL or as a data: URI.'
        )
    target = (base / given).resolve()
    if not target.is_relative_to(base):
        raise _file_error(
            f'{_shown(given)} is outside the folder this server reads files from: give a path inside it '
            '(relative to it), an https URL, or the content as a data: URI.'
        )
    return ResearchFile.from_path(target)


@functools.lru_cache(maxsize=64)
def _model_format(model: type[BaseModel]) -> tuple[dict[str, Any], str, TypeAdapter[Any]]:
    """A model's JSON schema, name and adapter, built once per model: a run asks for them several times (the check,
    the fingerprint, the create), and a toolset or server for every run (the schema is shared: never change it)."""
    return model.model_json_schema(), model.__name__, TypeAdapter(model)


# -- the model -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Opt:
    """What a field is beyond its type: its wording in errors, whether models see it, how the CLI spells it."""

    #: "effort must be …": the rule in the project's words, used when the type itself is wrong.
    must: str
    #: Offered to models as an argument of `perplexity_research` (with `tool_type` as its schema type, if given).
    tool: bool = False
    tool_type: Any = None
    #: The CLI option (None: not on the command line); `cli_help` overrides the description there.
    cli: str | None = None
    cli_help: str | None = None


@runtime_checkable
class FunctionTool(Protocol):
    """What the `Researcher` offers a run and answers its calls with: a `LocalFunction` (a Python callable), or an
    adapter of another source of tools (a pydantic-ai toolset: `toolset_functions`)."""

    @property
    def name(self) -> str:
        """The name the run calls it by."""
        ...

    def tool(self) -> dict[str, Any]:
        """The `function` tool of the create request."""
        ...

    async def call(self, arguments: str) -> tuple[str, str | None]:
        """Run one call (its arguments as the run sent them, JSON): the output text, and the error if it failed."""
        ...


class ResearchOptions(BaseModel):
    """The options of one research run; every field is optional (the researcher's defaults apply)."""

    model_config = ConfigDict(extra='forbid', frozen=True, arbitrary_types_allowed=True)

    effort: Annotated[
        str | None,
        Field(description=f'How deep to go: {", ".join(EFFORTS[:-1])} or {EFFORTS[-1]}. Leave empty for the default.'),
        Opt(
            f'one of {", ".join(EFFORTS)}',
            tool=True,
            tool_type=Effort | None,
            cli='--effort',
            cli_help=f'How deep to research (default: {ENV.EFFORT} or {DEFAULT_EFFORT}).',
        ),
    ] = None
    model: Annotated[
        str | None,
        Field(description='A specific model as "provider/model" (e.g. "openai/gpt-5.4"); usually leave empty.'),
        Opt(
            'a model id "provider/model", e.g. "openai/gpt-5.4"',
            tool=True,
            cli='--model',
            cli_help='A specific model, "provider/model" (default: the effort chooses).',
        ),
    ] = None
    instructions: Annotated[
        str | None,
        Field(description="Extra instructions for the researcher, e.g. the answer's format or length."),
        Opt(
            'text',
            tool=True,
            cli='--instructions',
            cli_help="Extra instructions for the researcher, e.g. the answer's format.",
        ),
    ] = None
    domains: Annotated[
        list[str] | None,
        Field(description='Only search these domains (e.g. ["nature.com"]), or exclude one with a leading "-".'),
        Opt(
            f'a list of at most {MAX_DOMAINS} bare domains like "nature.com" (or "-reddit.com" to exclude one)',
            tool=True,
            cli='--domain',
            cli_help='Only this domain (repeatable); "-domain" excludes one.',
        ),
    ] = None
    recency: Annotated[
        Recency | None,
        Field(description='Only pages from the last hour, day, week, month or year.'),
        Opt(
            'one of hour, day, week, month, year',
            tool=True,
            cli='--recency',
            cli_help='Only pages from the last hour/day/week/month/year.',
        ),
    ] = None
    after: Annotated[
        date | None,
        Field(description='Only pages published on or after this date (YYYY-MM-DD).'),
        Opt('a date as YYYY-MM-DD, e.g. "2026-01-31"', tool=True, tool_type=str | None, cli='--after'),
    ] = None
    before: Annotated[
        date | None,
        Field(description='Only pages published on or before this date (YYYY-MM-DD).'),
        Opt('a date as YYYY-MM-DD, e.g. "2026-01-31"', tool=True, tool_type=str | None, cli='--before'),
    ] = None
    language: Annotated[
        str | None,
        Field(description='Answer in this language, as a two-letter ISO 639-1 code (e.g. "de"); usually leave empty.'),
        Opt('a two-letter ISO 639-1 language code, e.g. "de"', tool=True, cli='--language'),
    ] = None
    fetch_pages: Annotated[
        int | None,
        Field(
            description=f'Let the run read up to this many pages in full (1-10; true means {DEFAULT_FETCH_PAGES}).',
            ge=1,
            le=10,
        ),
        Opt(
            'a whole number from 1 to 10 (or true)',
            cli='--fetch-pages',
            cli_help='Let the run read up to N pages in full (1-10).',
        ),
    ] = None
    # -- more tools: opt-in, each billed per call (`sandbox` per session) ------------------------------------------
    extra_tools: Annotated[
        list[ExtraTool] | None,
        Field(
            description='More tools the run may use, each billed: image_search (images), people_search (people), '
            'finance_search (market data) and sandbox (runs code; the API then drops the other built-in tools).'
        ),
        Opt(
            f'a list of tools among {", ".join(EXTRA_TOOLS)}',
            tool=True,
            cli='--tool',
            cli_help='Let the run use this tool (repeatable): image_search, people_search, finance_search or sandbox.',
        ),
    ] = None
    # -- local functions: Python callables the run may call (in this process; the Researcher answers them) --------
    functions: Annotated[
        SkipValidation[list[Callable[..., Any] | FunctionTool] | None],
        Field(
            description='Python functions the run may call (a private database, a wiki): their arguments are checked '
            'against their type hints, they run here, and only their output is sent. Python only.'
        ),
        Opt('a list of Python functions with type-hinted parameters'),
    ] = None
    max_function_calls: Annotated[
        int | None,
        Field(
            description=f'Run at most this many local function calls in all (1-100; default {DEFAULT_FUNCTION_CALLS}).',
            ge=1,
            le=100,
        ),
        Opt('a whole number from 1 to 100'),
    ] = None
    max_steps: Annotated[
        int | None,
        Field(description='Stop the run after this many steps (1-100).', ge=1, le=100),
        Opt('a whole number from 1 to 100', cli='--max-steps', cli_help='Stop the run after this many steps.'),
    ] = None
    max_output_tokens: Annotated[
        int | None,
        Field(description='Cap on the answer length in tokens (1 or more; the API floors it at 16).', ge=1),
        Opt('a whole number, 1 or more', cli='--max-output-tokens'),
    ] = None
    previous_response_id: Annotated[
        str | None,
        Field(
            description='Continue an earlier run: the id it handed back ("resp_..."). The question can then refer to '
            'what that run found, e.g. "and how does that compare with 2020?".'
        ),
        Opt('the id a research call handed back, like "resp_..."', tool=True, cli='--follow-up'),
    ] = None
    # -- the request options of issue 26: files, fallback models, tier, profile, reasoning, cache key ------------
    files: Annotated[
        tuple[ResearchFile, ...] | None,
        Field(
            description='Files or images to read along with the web (PDF, text, office documents, png/jpeg/webp/gif):'
            ' https URLs (or the content as "data:<type>;base64,..."). The answer can cite them.'
        ),
        Opt(
            f'a list of at most {MAX_FILES} files: https URLs, paths, bytes or ResearchFile '
            f'(each at most {MAX_FILE_BYTES // (1024 * 1024)} MiB)',
            tool=True,
            tool_type=list[str] | None,
            cli='--file',
            cli_help='A file or image to read with the web: a path or an https URL (repeatable).',
        ),
    ] = None
    models: Annotated[
        list[str] | None,
        Field(
            description=f'Fallback models, tried in order (at most {MAX_MODELS}), each "provider/model": the first '
            'one available answers. Instead of `model`.'
        ),
        Opt(
            f'a list of 1 to {MAX_MODELS} model ids "provider/model"',
            cli='--models',
            cli_help=f'Fallback models tried in order, comma-separated (at most {MAX_MODELS}); instead of --model.',
        ),
    ] = None
    service_tier: Annotated[
        ServiceTier | None,
        Field(
            description='The processing tier: flex (cheaper, unhurried: batches), priority (faster, dearer), '
            'default or auto. Reserved at the dearest terms the tier may bill.'
        ),
        Opt(f'one of {", ".join(SERVICE_TIERS)}', cli='--service-tier'),
    ] = None
    profile: Annotated[
        str | None,
        Field(description='An organisation\'s saved run profile: its id, optionally pinned as "id@version".'),
        Opt('a profile id, optionally "id@version"', cli='--profile'),
    ] = None
    reasoning_effort: Annotated[
        ReasoningEffort | None,
        Field(
            description="How hard the model itself reasons (the API's reasoning.effort), not the run's depth: "
            'none, minimal, low, medium, high or xhigh.'
        ),
        Opt(f'one of {", ".join(REASONING_EFFORTS)}', cli='--reasoning-effort'),
    ] = None
    prompt_cache_key: Annotated[
        str | None,
        Field(
            description='A key that groups runs sharing long instructions, so that repeats read them from the '
            'prompt cache (billed as cached input).'
        ),
        Opt(f'text of at most {_CACHE_KEY_CHARS} printable characters', cli='--prompt-cache-key'),
    ] = None
    output_type: Annotated[
        SkipValidation[type[BaseModel] | dict[str, Any] | None],
        Field(description='A pydantic model or JSON Schema: the answer comes back as that structure.'),
        Opt('a pydantic model class or a JSON Schema dict'),
    ] = None
    mcp_servers: Annotated[
        SkipValidation[list[McpTool] | None],
        Field(description='Remote MCP servers (Agent API `mcp` tools) Perplexity may call during the run.'),
        Opt('a list of `mcp` tools'),
    ] = None
    extra: Annotated[
        SkipValidation[AgentRequest | None],
        Field(description='Raw create-request fields, merged last (for what this version does not model).'),
        Opt('a dict of create-request fields'),
    ] = None

    # -- validators: each calls the one check of its kind ---------------------------------------------------------

    @field_validator('effort', mode='before')
    @classmethod
    def _effort(cls, value: object) -> object:
        if value is None or value == '':
            return None
        if not isinstance(value, str):
            raise InvalidArgumentError(f'effort must be one of {", ".join(EFFORTS)}.', argument='effort')
        return normalize_effort(value)

    @field_validator('model', mode='before')
    @classmethod
    def _model(cls, value: object) -> object:
        if value is None or value == '':
            return None
        if not isinstance(value, str) or '/' not in value:
            raise InvalidArgumentError(
                f'model={_shown(value)} is not a model id: use "provider/model", e.g. "openai/gpt-5.4", or leave it '
                'out to let the effort choose.',
                argument='model',
            )
        return value

    @field_validator('instructions', mode='before')
    @classmethod
    def _instructions(cls, value: object) -> object:
        return None if value == '' else value

    @field_validator('domains', mode='before')
    @classmethod
    def _domains(cls, value: object) -> object:
        if value is None or (isinstance(value, Sequence) and not value):
            return None
        if not isinstance(value, str | Sequence):
            raise InvalidArgumentError(
                'domains must be a list of bare domains like ["nature.com"].', argument='domains'
            )
        return check_domains(cast('Sequence[str] | str', value))

    @field_validator('recency', mode='before')
    @classmethod
    def _recency(cls, value: object) -> object:
        return None if value is None or value == '' else check_recency(value)

    @field_validator('after', 'before', mode='before')
    @classmethod
    def _dates(cls, value: object, info: Any) -> object:
        return None if value is None or value == '' else _iso_date(value, info.field_name)

    @field_validator('language', mode='before')
    @classmethod
    def _language(cls, value: object) -> object:
        if value is None or value == '':
            return None
        code = value.strip().lower() if isinstance(value, str) else ''
        if not re.fullmatch(r'[a-z]{2}', code):
            raise InvalidArgumentError(
                f'language={_shown(value)} is not a language code: give a two-letter ISO 639-1 code, e.g. "de".',
                argument='language',
            )
        return code

    @field_validator('fetch_pages', mode='before')
    @classmethod
    def _fetch_pages(cls, value: object) -> object:
        if value is None or value is False:
            return None
        if value is True:
            return DEFAULT_FETCH_PAGES
        return _whole(value, 'fetch_pages', 1, 10)

    @field_validator('extra_tools', mode='before')
    @classmethod
    def _extra_tools(cls, value: object) -> object:
        if value is None or value == [] or value == ():
            return None
        return check_extra_tools(value)

    @field_validator('functions', mode='before')
    @classmethod
    def _functions(cls, value: object) -> object:
        if value is None or value == [] or value == ():
            return None
        if callable(value) or isinstance(value, FunctionTool):
            return [value]
        if not isinstance(value, Sequence) or isinstance(value, str):
            raise InvalidArgumentError('functions must be a list of Python functions.', argument='functions')
        return list(cast('Sequence[Callable[..., Any] | FunctionTool]', value))

    @field_validator('max_function_calls', mode='before')
    @classmethod
    def _max_function_calls(cls, value: object) -> object:
        return None if value is None else _whole(value, 'max_function_calls', 1, 100)

    @field_validator('max_steps', mode='before')
    @classmethod
    def _max_steps(cls, value: object) -> object:
        return None if value is None else _whole(value, 'max_steps', 1, 100)

    @field_validator('max_output_tokens', mode='before')
    @classmethod
    def _max_output_tokens(cls, value: object) -> object:
        return None if value is None else _whole(value, 'max_output_tokens', 1, None)

    @field_validator('previous_response_id', mode='before')
    @classmethod
    def _previous_response_id(cls, value: object) -> object:
        if value is None or value == '':
            return None
        try:
            return check_id(value)
        except InvalidArgumentError as exc:
            raise InvalidArgumentError(
                str(exc).replace('response_id', 'previous_response_id', 1), argument='previous_response_id'
            ) from None

    @field_validator('files', mode='before')
    @classmethod
    def _files(cls, value: object) -> object:
        if value is None or (isinstance(value, list | tuple) and not value):
            return None
        return check_files(cast('object', value))

    @field_validator('models', mode='before')
    @classmethod
    def _models(cls, value: object) -> object:
        if value is None or value == '' or (isinstance(value, Sequence) and not value):
            return None
        items: object = [value] if isinstance(value, str) else cast('object', value)
        if not isinstance(items, Sequence):
            raise InvalidArgumentError(
                'models must be a list of model ids like ["openai/gpt-5.4", "openai/gpt-5.5"].', argument='models'
            )
        names = [n.strip() for item in cast('Sequence[object]', items) for n in str(item).split(',') if n.strip()]
        bad = next((n for n in names if not MODEL_ID.fullmatch(n)), None)
        if bad is not None:
            raise InvalidArgumentError(
                f'models: {_shown(bad)} is not a model id: use "provider/model", e.g. "openai/gpt-5.4".',
                argument='models',
            )
        if not 1 <= len(names) <= MAX_MODELS:
            raise InvalidArgumentError(
                f'{len(names)} models given; list 1 to {MAX_MODELS} fallback models, tried in order.', argument='models'
            )
        return names

    @field_validator('service_tier', 'reasoning_effort', mode='before')
    @classmethod
    def _choice(cls, value: object, info: Any) -> object:
        if value is None or value == '':
            return None
        choices = SERVICE_TIERS if info.field_name == 'service_tier' else REASONING_EFFORTS
        word = value.strip().lower() if isinstance(value, str) else value
        if word not in choices:
            raise InvalidArgumentError(
                f'{info.field_name}={_shown(value)} is not one of {", ".join(choices)}.', argument=info.field_name
            )
        return word

    @field_validator('profile', mode='before')
    @classmethod
    def _profile(cls, value: object) -> object:
        if value is None or value == '':
            return None
        ident, pinned, version = value.strip().partition('@') if isinstance(value, str) else ('', '', '')
        if not _PROFILE_ID.match(ident) or (pinned and not _PROFILE_ID.match(version)):
            raise InvalidArgumentError(
                f'profile={_shown(value)} is not a profile id: give the id of a saved profile, optionally pinned '
                'as "id@version".',
                argument='profile',
            )
        return cast('str', value).strip()

    @field_validator('prompt_cache_key', mode='before')
    @classmethod
    def _prompt_cache_key(cls, value: object) -> object:
        if value is None or value == '':
            return None
        if not isinstance(value, str) or len(value) > _CACHE_KEY_CHARS or not _printable(value):
            raise InvalidArgumentError(
                f'prompt_cache_key must be text of at most {_CACHE_KEY_CHARS} printable characters, e.g. '
                '"weekly-report".',
                argument='prompt_cache_key',
            )
        return value

    @model_validator(mode='after')
    def _recency_or_dates(self) -> Self:
        if self.recency and (self.after or self.before):
            raise InvalidArgumentError(
                'recency cannot be combined with after/before: use one or the other.', argument='recency'
            )
        if self.model and self.models:
            raise InvalidArgumentError(
                'model and models cannot be combined: list the model first in models (the fallbacks after it).',
                argument='models',
            )
        return self

    # -- construction and the wire ------------------------------------------------------------------------------

    @classmethod
    def parse(cls, options: ResearchOptions | None = None, /, **given: Any) -> ResearchOptions:
        """The options checked; keywords override `options`. Raises `InvalidArgumentError` in the project's words."""
        values: dict[str, Any] = dict(options) if options is not None else {}
        values.update(given)
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            raise _invalid(exc) from None

    def to_request(self, default_effort: str) -> AgentRequest:
        """The create request (`POST /v1/agent` body, less `input`) these options make (the `Researcher` adds the
        limits of the effort's profile the request does not set itself: `pricing.limit_request`)."""
        request: AgentRequest = {'effort': self.effort or default_effort}
        if self.model:
            request['model'] = self.model
        if self.models:
            request['models'] = list(self.models)
        if self.service_tier:
            request['service_tier'] = self.service_tier
        if self.profile:
            ident, _, version = self.profile.partition('@')
            request['profile'] = {'type': 'custom', 'id': ident, **({'version': version} if version else {})}
        if self.reasoning_effort:
            request['reasoning'] = {'effort': self.reasoning_effort}
        if self.prompt_cache_key:
            request['prompt_cache_key'] = self.prompt_cache_key
        if self.instructions:
            request['instructions'] = self.instructions
        if self.max_steps is not None:
            request['max_steps'] = self.max_steps
        if self.max_output_tokens is not None:
            request['max_output_tokens'] = self.max_output_tokens
        if self.language:
            request['language_preference'] = self.language
        filters = search_filters(domains=self.domains, recency=self.recency, after=self.after, before=self.before)
        tools: list[Tool] = []
        if filters:
            tools.append({'type': 'web_search', 'filters': filters})
        if self.fetch_pages:
            tools.append({'type': 'fetch_url', 'max_urls': self.fetch_pages})
        tools.extend({'type': name} for name in self.extra_tools or ())
        tools.extend(self.mcp_servers or ())
        if tools:
            request['tools'] = tools
        if self.previous_response_id:
            request['previous_response_id'] = self.previous_response_id
        if self.output_type is not None:
            request['response_format'] = response_format(self.output_type)[0]
        if self.extra:
            request.update(self.extra)
        return request

    def to_input(self, query: str) -> str | list[InputItem]:
        """The create request's `input`: the question, with the files as parts of the same user message."""
        if not self.files:
            return query
        parts: list[dict[str, Any]] = [{'type': 'input_text', 'text': query}]
        parts.extend(f.to_part() for f in self.files)
        return [{'type': 'message', 'role': 'user', 'content': parts}]


class ResearchOptionsDict(TypedDict, total=False):
    """`ResearchOptions` as keywords (`Researcher.run(query, effort='fast')`): a misspelt key is a type error."""

    effort: Effort | LegacyPreset | None
    model: str | None
    instructions: str | None
    domains: Sequence[str] | None
    recency: Recency | None
    after: str | date | None
    before: str | date | None
    language: str | None
    fetch_pages: bool | int | None
    extra_tools: Sequence[ExtraTool] | None
    functions: Sequence[Callable[..., Any] | FunctionTool] | None
    max_function_calls: int | None
    max_steps: int | None
    max_output_tokens: int | None
    previous_response_id: str | None
    files: Sequence[FileInput] | None
    models: Sequence[str] | None
    service_tier: ServiceTier | None
    profile: str | None
    reasoning_effort: ReasoningEffort | None
    prompt_cache_key: str | None
    output_type: type[BaseModel] | dict[str, Any] | None
    mcp_servers: Sequence[McpTool] | None
    extra: AgentRequest | None


def option_fields() -> dict[str, tuple[FieldInfo, Opt]]:
    """Every option's field and its `Opt`, in declaration order (what tools, the CLI and the docs derive from)."""
    fields: dict[str, tuple[FieldInfo, Opt]] = {}
    for name, info in ResearchOptions.model_fields.items():
        opt = next(m for m in info.metadata if isinstance(m, Opt))
        fields[name] = (info, opt)
    return fields


def _whole(value: object, name: str, low: int, high: int | None) -> int:
    number = value if isinstance(value, int) and not isinstance(value, bool) else None
    if isinstance(value, float) and value.is_integer():
        number = int(value)
    if number is None or number < low or (high is not None and number > high):
        rule = f'from {low} to {high}' if high is not None else f'{low} or more'
        raise InvalidArgumentError(
            f'{name}={_shown(value)} is out of range: give a whole number {rule}.', argument=name
        )
    return number


def _invalid(exc: ValidationError) -> InvalidArgumentError:
    fields = option_fields()
    return describe_invalid(exc, must={name: opt.must for name, (_, opt) in fields.items()}, names=list(fields))


def describe_invalid(
    exc: ValidationError, *, must: Mapping[str, str], noun: str = 'option', names: Sequence[str] = ()
) -> InvalidArgumentError:
    """The first problem of a validation error, in the project's words (never pydantic's text or links).

    `must` says what each field must be; `names` lists the accepted ones, for an unknown name.
    """
    error = exc.errors(include_url=False)[0]
    cause = (error.get('ctx') or {}).get('error')
    if isinstance(cause, InvalidArgumentError):
        return cause
    name = str(error['loc'][0]) if error['loc'] else noun
    shown = _shown(name, 40)
    if error['type'] == 'extra_forbidden':
        return InvalidArgumentError(f'Unknown {noun} {shown}: the {noun}s are {", ".join(names)}.', argument=name)
    rule = must.get(name, 'valid')
    if error['type'] == 'missing':
        return InvalidArgumentError(f'{name} is required: give {rule}.', argument=name)
    return InvalidArgumentError(f'{name} must be {rule}; got {_shown(error.get("input"))}.', argument=name)


def options_table() -> str:
    """`docs/options.md`: one row per option, made from the fields (a test keeps the file equal to this)."""
    lines = [
        '# Research options',
        '',
        '<!-- Generated from `ResearchOptions` (src/pydantic_ai_perplexity/_domain/options.py): '
        'run `python -m pydantic_ai_perplexity._domain.options > docs/options.md` after changing a field. -->',
        '',
        'Every way in takes the same options: `Researcher.run(query, **options)` / `research(...)` in Python, the',
        '`perplexity_research` tool (the options marked as offered to models), and `pydantic-ai-perplexity research`.',
        '',
        '| Option | Must be | Offered to models | CLI | What it does |',
        '|---|---|---|---|---|',
    ]
    for name, (info, opt) in option_fields().items():
        cli = f'`{opt.cli}`' if opt.cli else ''
        offered = 'yes' if opt.tool else ''
        must = opt.must.replace('|', '\\|')
        lines.append(f'| `{name}` | {must} | {offered} | {cli} | {info.description or ""} |')
    return '\n'.join(lines) + '\n'


if __name__ == '__main__':
    print(options_table(), end='')
