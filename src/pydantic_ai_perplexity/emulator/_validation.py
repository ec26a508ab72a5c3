"""Strict validation of request bodies, as strict as the live API: unknown fields anywhere are a 400.

The models forbid extra fields (`extra='forbid'`) and are strict about JSON types. Unions are tagged with a
leading `~` so that error locations can be read back without them; the first error becomes the API's error
envelope (`invalid request body: json: unknown field "X"` with `param: "X"` for an unknown field).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import datetime
from ipaddress import ip_address
from typing import Annotated, Any, Literal, cast
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, ConfigDict, Discriminator, Field, Tag, ValidationError
from pydantic_core import ErrorDetails

from .._base.efforts import EFFORT_NAME, EFFORTS, LEGACY_PRESETS
from ._errors import ApiError, ValidationDetail
from ._models import MODELS, ModelInfo

__all__ = (
    'MAX_SEARCH_QUERIES',
    'CreateRequest',
    'McpTool',
    'SearchRequest',
    'WebSearchFilters',
    'WebSearchTool',
    'input_text',
    'parse_create',
    'parse_search',
    'resolve_effort',
)

_RESERVED_FUNCTION_NAMES = frozenset(
    {'web_search', 'search_web', 'people_search', 'search_people', 'fetch_url', 'finance_search', 'sandbox'}
)
_LABEL = re.compile(r'^[a-zA-Z0-9_-]{1,64}$')
_SCHEMA_NAME = r'^[A-Za-z0-9_-]{1,64}$'
_LOOPBACK_NAMES = frozenset({'localhost', 'localhost.localdomain'})
_PUBLICATION_DATES = ('search_after_date_filter', 'search_before_date_filter')


class _Strict(BaseModel):
    model_config = ConfigDict(extra='forbid', strict=True, defer_build=True)


def _by_type(default: str | None = None) -> Discriminator:
    """A discriminator on the `type` key, tagged `~<type>`; a missing `type` falls back to `default`."""

    def pick(value: Any) -> str | None:
        kind: object = value.get('type', default) if isinstance(value, dict) else None  # pyright: ignore[reportUnknownMemberType,reportUnknownVariableType]
        return f'~{kind}' if isinstance(kind, str) else None

    return Discriminator(pick)


def _str_or(other: str) -> Discriminator:
    return Discriminator(lambda value: '~str' if isinstance(value, str) else f'~{other}')


# ---------------------------------------------------------------------------------------------------------------
# Tools


class WebSearchFilters(_Strict):
    """`web_search.filters`."""

    search_domain_filter: list[str] | None = None
    search_recency_filter: Literal['hour', 'day', 'week', 'month', 'year'] | None = None
    search_after_date_filter: str | None = None
    search_before_date_filter: str | None = None
    last_updated_after_filter: str | None = None
    last_updated_before_filter: str | None = None


class UserLocation(_Strict):
    """`web_search.user_location`."""

    city: str | None = None
    region: str | None = None
    country: str | None = None
    latitude: float | None = None
    longitude: float | None = None


class WebSearchTool(_Strict):
    """The `web_search` tool."""

    type: Literal['web_search']
    filters: WebSearchFilters | None = None
    max_tokens: int | None = Field(None, ge=1)
    max_tokens_per_page: int | None = Field(None, ge=1)
    search_context_size: Literal['low', 'medium', 'high'] | None = None
    search_type: Literal['web', 'fast'] | None = None
    user_location: UserLocation | None = None
    max_results: int | None = Field(None, ge=1, le=50)


class FetchUrlTool(_Strict):
    """The `fetch_url` tool."""

    type: Literal['fetch_url']
    max_urls: int | None = Field(None, ge=1, le=10)
    total_budget_tokens: int | None = Field(None, ge=1, le=120_000)


class FunctionTool(_Strict):
    """A client-side `function` tool (Responses style, not nested under `function`)."""

    type: Literal['function']
    name: str = Field(min_length=1, max_length=64)
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class ApprovalFilter(_Strict):
    """One side of an MCP `require_approval` filter (accepted and ignored, as live)."""

    read_only: bool | None = None
    tool_names: list[str] | None = None


class ApprovalFilters(_Strict):
    """`require_approval` as filters."""

    always: ApprovalFilter | None = None
    never: ApprovalFilter | None = None


class McpTool(_Strict):
    """A remote MCP server the run may call."""

    type: Literal['mcp']
    server_label: str
    server_url: str
    authorization: str | None = None
    headers: dict[str, str] | None = None
    allowed_tools: list[str] | None = None
    defer_loading: bool | None = None
    require_approval: (
        Annotated[
            Annotated[Literal['always', 'never'], Tag('~str')] | Annotated[ApprovalFilters, Tag('~object')],
            _str_or('object'),
        ]
        | None
    ) = None
    connector_id: str | None = None


class ConnectorTool(_Strict):
    """A console-saved connector."""

    type: Literal['connector']
    id: str
    server_label: str
    allowed_tools: list[str] | None = None
    require_approval: (
        Annotated[
            Annotated[Literal['always', 'never'], Tag('~str')] | Annotated[ApprovalFilters, Tag('~object')],
            _str_or('object'),
        ]
        | None
    ) = None
    server_description: str | None = None


class ImageSearchFilters(_Strict):
    """`image_search.filters`."""

    domain_filter: list[str] | None = None
    format_filter: list[Literal['bmp', 'gif', 'jpeg', 'png', 'webp', 'svg']] | None = None
    safe_search: bool | None = None


class ImageSearchTool(_Strict):
    """The `image_search` tool."""

    type: Literal['image_search']
    filters: ImageSearchFilters | None = None
    max_results: int | None = Field(None, ge=1)


class SimpleTool(_Strict):
    """Tools without options: `finance_search`, `people_search`, `sandbox`."""

    type: Literal['finance_search', 'people_search', 'sandbox']


Tool = Annotated[
    Annotated[WebSearchTool, Tag('~web_search')]
    | Annotated[FetchUrlTool, Tag('~fetch_url')]
    | Annotated[FunctionTool, Tag('~function')]
    | Annotated[McpTool, Tag('~mcp')]
    | Annotated[ConnectorTool, Tag('~connector')]
    | Annotated[ImageSearchTool, Tag('~image_search')]
    | Annotated[SimpleTool, Tag('~finance_search')]
    | Annotated[SimpleTool, Tag('~people_search')]
    | Annotated[SimpleTool, Tag('~sandbox')],
    _by_type(),
]


# ---------------------------------------------------------------------------------------------------------------
# Input items


class InputText(_Strict):
    """`{"type": "input_text", "text"}`."""

    type: Literal['input_text']
    text: str


class InputImage(_Strict):
    """`{"type": "input_image", "image_url"}` (https or a data URI; no `detail` here, unlike tool outputs)."""

    type: Literal['input_image']
    image_url: str


class InputFile(_Strict):
    """`{"type": "input_file", "file_url" | "file_data", "filename"?}`."""

    type: Literal['input_file']
    file_url: str | None = None
    file_data: str | None = None
    filename: str | None = None


ContentPart = Annotated[
    Annotated[InputText, Tag('~input_text')]
    | Annotated[InputImage, Tag('~input_image')]
    | Annotated[InputFile, Tag('~input_file')],
    _by_type(),
]


class MessageItem(_Strict):
    """A conversation message; `type` may be omitted."""

    type: Literal['message'] | None = None
    role: Literal['user', 'assistant', 'system', 'developer']
    content: Annotated[
        Annotated[str, Tag('~str')] | Annotated[list[ContentPart], Tag('~list')],
        _str_or('list'),
    ]


class OutputTextPart(_Strict):
    """`{"type": "input_text", "text"}` inside a `function_call_output`."""

    type: Literal['input_text']
    text: str


class OutputImagePart(_Strict):
    """`{"type": "input_image", "image_url", "detail"?}` inside a `function_call_output`."""

    type: Literal['input_image']
    image_url: str
    detail: Literal['low', 'high', 'auto'] | None = None


class FunctionCallOutputItem(_Strict):
    """The result of a client function call, sent back in the next turn."""

    type: Literal['function_call_output']
    call_id: str
    output: Annotated[
        Annotated[str, Tag('~str')]
        | Annotated[
            list[
                Annotated[
                    Annotated[OutputTextPart, Tag('~input_text')] | Annotated[OutputImagePart, Tag('~input_image')],
                    _by_type(),
                ]
            ],
            Tag('~list'),
        ],
        _str_or('list'),
    ]
    name: str | None = None
    id: str | None = None
    status: Literal['in_progress', 'completed', 'incomplete'] | None = None
    thought_signature: str | None = None


class FunctionCallItem(_Strict):
    """A replayed function call of a previous turn."""

    type: Literal['function_call']
    call_id: str
    name: str
    arguments: str
    thought_signature: str | None = None


class ReasoningPart(_Strict):
    """A reasoning text or summary part."""

    type: Literal['reasoning_text', 'summary_text']
    text: str


class ReasoningItem(_Strict):
    """A replayed reasoning item."""

    type: Literal['reasoning']
    summary: list[ReasoningPart]
    content: list[ReasoningPart] | None = None
    encrypted_content: str | None = None
    id: str | None = None
    status: Literal['in_progress', 'completed', 'incomplete'] | None = None


class McpToolAnnotations(_Strict):
    """`annotations` of a replayed MCP tool."""

    read_only: bool | None = None


class McpToolDef(_Strict):
    """A tool inside a replayed `mcp_list_tools`."""

    name: str
    input_schema: dict[str, Any]
    description: str | None = None
    annotations: McpToolAnnotations | None = None


class McpListToolsItem(_Strict):
    """A replayed `mcp_list_tools` item."""

    type: Literal['mcp_list_tools']
    id: str | None = None
    server_label: str | None = None
    tools: list[McpToolDef] | None = None
    error: str | None = None


class McpCallItem(_Strict):
    """A replayed `mcp_call` item."""

    type: Literal['mcp_call']
    id: str
    server_label: str
    name: str
    arguments: str
    output: str | None = None
    error: str | None = None
    approval_request_id: str | None = None
    connector_id: str | None = None


class McpApprovalRequestItem(_Strict):
    """A replayed `mcp_approval_request` item."""

    type: Literal['mcp_approval_request']
    id: str
    server_label: str
    name: str
    arguments: str
    connector_id: str | None = None
    thought_signature: str | None = None


class McpApprovalResponseItem(_Strict):
    """An `mcp_approval_response` input item."""

    type: Literal['mcp_approval_response']
    approval_request_id: str
    approve: bool
    id: str | None = None
    reason: str | None = None


InputItem = Annotated[
    Annotated[MessageItem, Tag('~message')]
    | Annotated[FunctionCallOutputItem, Tag('~function_call_output')]
    | Annotated[FunctionCallItem, Tag('~function_call')]
    | Annotated[ReasoningItem, Tag('~reasoning')]
    | Annotated[McpListToolsItem, Tag('~mcp_list_tools')]
    | Annotated[McpCallItem, Tag('~mcp_call')]
    | Annotated[McpApprovalRequestItem, Tag('~mcp_approval_request')]
    | Annotated[McpApprovalResponseItem, Tag('~mcp_approval_response')],
    _by_type('message'),
]


# ---------------------------------------------------------------------------------------------------------------
# The create request


class Profile(_Strict):
    """`profile`: an org-owned saved configuration."""

    type: Literal['custom']
    id: str
    version: str | None = None


class Reasoning(_Strict):
    """`reasoning`: the model's own reasoning depth."""

    effort: Literal['none', 'minimal', 'low', 'medium', 'high', 'xhigh', 'max'] | None = None


class JsonSchemaFormat(_Strict):
    """`response_format.json_schema`."""

    name: str | None = Field(None, pattern=_SCHEMA_NAME)
    schema_: dict[str, Any] = Field(alias='schema')
    description: str | None = None
    strict: bool | None = None


class ResponseFormat(_Strict):
    """`response_format`: only `json_schema` is supported."""

    type: Literal['json_schema']
    json_schema: JsonSchemaFormat | None = None


class TextParam(_Strict):
    """`text`: echoed by the API but takes no request fields (OpenAI's `text.format` is rejected)."""


class ToolChoiceObject(_Strict):
    """`tool_choice` as an object: `{"type": "web_search"}`, `{"name": "fn"}`, `{"type": "required"}`."""

    type: str | None = None
    name: str | None = None


class BuiltinSkill(_Strict):
    """A built-in skill."""

    type: Literal['builtin']
    name: Literal['office', 'office/docx', 'office/pdf', 'office/pptx', 'office/xlsx']


class InlineSkill(_Strict):
    """A skill given inline."""

    type: Literal['inline']
    name: str
    description: str
    instructions: str


class CustomSkill(_Strict):
    """An org-owned saved skill."""

    type: Literal['custom']
    id: str
    version: str | None = None


class StreamOptions(_Strict):
    """`stream_options`."""

    include_usage: bool | None = None


class CreateRequest(_Strict):
    """The body of `POST /v1/agent` (and `/v1/responses`): every field of the contract, nothing else."""

    input: Annotated[
        Annotated[str, Tag('~str')] | Annotated[list[InputItem], Tag('~list')],
        _str_or('list'),
    ]
    model: str | None = None
    models: list[str] | None = Field(None, min_length=1, max_length=5)
    effort: str | None = None
    preset: str | None = None
    profile: Profile | None = None
    instructions: str | None = None
    max_steps: int | None = Field(None, ge=1, le=100)
    max_output_tokens: int | None = Field(None, ge=1)
    reasoning: Reasoning | None = None
    response_format: ResponseFormat | None = None
    text: TextParam | None = None
    tools: list[Tool] | None = None
    tool_choice: (
        Annotated[
            Annotated[Literal['none', 'auto', 'required'], Tag('~str')] | Annotated[ToolChoiceObject, Tag('~object')],
            _str_or('object'),
        ]
        | None
    ) = None
    stream: bool | None = None
    background: bool | None = None
    store: bool | None = None
    previous_response_id: str | None = None
    prompt_cache_key: str | None = None
    language_preference: str | None = None
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, ge=0, le=1)
    #: Accepted with no effect, as the migration guide says ("some such fields are accepted but have no effect").
    top_logprobs: int | None = Field(None, ge=0, le=20)
    service_tier: Literal['auto', 'default', 'flex', 'priority', 'fast'] | None = None
    step_budget_reminder: bool | None = None
    skills: (
        list[
            Annotated[
                Annotated[BuiltinSkill, Tag('~builtin')]
                | Annotated[InlineSkill, Tag('~inline')]
                | Annotated[CustomSkill, Tag('~custom')],
                _by_type(),
            ]
        ]
        | None
    ) = None
    max_tool_calls: int | None = Field(None, ge=0)
    metadata: dict[str, str] | None = None
    parallel_tool_calls: bool | None = None
    truncation: Literal['auto', 'disabled'] | None = None
    stream_options: StreamOptions | None = None


#: Search API limits that the server clamps instead of refusing (the search SDK guide: "the server silently
#: clamps oversized values instead of rejecting them"); the maxima are the OpenAPI schema's.
_SEARCH_CLAMPS = {'max_results': 20, 'max_tokens': 1_000_000, 'max_tokens_per_page': 1_000_000}
#: Reformulations one `/search` request may carry (the search SDK guide: "up to 10 reformulation variants").
MAX_SEARCH_QUERIES = 10


def _clamp(field: str) -> Any:
    return AfterValidator(lambda value: None if value is None else min(value, _SEARCH_CLAMPS[field]))


class SearchRequest(BaseModel):
    """The body of `POST /search`: a FastAPI service, so JSON numbers like `5.0` are coerced (lax), not refused."""

    model_config = ConfigDict(extra='forbid', defer_build=True)

    query: str | list[str]
    max_results: Annotated[int | None, Field(ge=1), _clamp('max_results')] = None
    max_tokens: Annotated[int | None, Field(ge=1), _clamp('max_tokens')] = None
    max_tokens_per_page: Annotated[int | None, Field(ge=1), _clamp('max_tokens_per_page')] = None
    search_context_size: Literal['low', 'medium', 'high'] | None = None
    search_domain_filter: list[str] | None = None
    search_language_filter: list[str] | None = None
    search_recency_filter: Literal['hour', 'day', 'week', 'month', 'year'] | None = None
    search_after_date_filter: str | None = None
    search_before_date_filter: str | None = None
    last_updated_after_filter: str | None = None
    last_updated_before_filter: str | None = None
    country: str | None = None
    search_mode: Literal['web', 'academic', 'sec'] | None = None
    search_type: Literal['web', 'fast', 'people'] | None = None
    display_server_time: bool | None = None


# ---------------------------------------------------------------------------------------------------------------
# Error mapping

_CONSTRAINT_ERRORS = frozenset(
    {
        'greater_than',
        'greater_than_equal',
        'less_than',
        'less_than_equal',
        'literal_error',
        'enum',
        'too_short',
        'too_long',
        'string_too_short',
        'string_too_long',
        'string_pattern_mismatch',
        'finite_number',
    }
)


def _path(loc: tuple[int | str, ...]) -> tuple[str, str | None]:
    """A readable path (`tools[0].filters.x`) and the leaf field name of an error location, tags removed."""
    text = ''
    leaf: str | None = None
    for part in loc:
        if isinstance(part, int):
            text += f'[{part}]'
        elif part.startswith('~'):
            continue
        else:
            text += f'.{part}' if text else part
            leaf = part
    return text, leaf


def _pick(errors: list[ErrorDetails]) -> ErrorDetails:
    for kind in ('extra_forbidden', 'missing'):
        for error in errors:
            if error['type'] == kind:
                return error
    return errors[0]


_FAILED = 'validation failed: '


def validation_failed(message: str) -> ApiError:
    """A bad field value as the live API answers it: 400 `invalid_request`, "validation failed: <message>", and
    no `param` (the live body has none; the message names the field)."""
    return ApiError(400, 'invalid_request', _FAILED + message)


def _constraint_message(error: ErrorDetails, path: str, leaf: str | None) -> str:
    """The live wording: `tools[0]: search recency filter must be one of: hour day ...`, `max steps must be at
    least 1`; the field in words, prefixed by the list item it belongs to. Other constraints keep pydantic's text.
    """
    head, _, _ = path.rpartition('.')
    item = head[: head.rindex(']') + 1] if ']' in head else ''
    words = (leaf or path).replace('_', ' ')
    subject = f'{item}: {words}' if item else words
    ctx: dict[str, Any] = dict(error.get('ctx') or {})
    kind = error['type']
    if kind == 'literal_error':
        allowed = re.findall(r"'([^']*)'", str(ctx.get('expected', '')))
        return f'{subject} must be one of: {" ".join(allowed)}'
    bounds = {'greater_than_equal': ('at least', 'ge'), 'less_than_equal': ('at most', 'le')}
    if kind in bounds:
        phrase, key = bounds[kind]
        bound = ctx.get(key)
        shown = int(bound) if isinstance(bound, float) and bound.is_integer() else bound
        return f'{subject} must be {phrase} {shown}'
    return f'{path}: {error["msg"]}'


def _to_api_error(exc: ValidationError) -> ApiError:
    """The 400 the live API answers for the body's first validation error, in its words."""
    error = _pick(exc.errors(include_url=False))
    kind = error['type']
    path, leaf = _path(tuple(error['loc']))
    if kind in {'union_tag_invalid', 'union_tag_not_found'}:
        return _union_tag_error(error, path)
    if kind == 'extra_forbidden':
        return ApiError(400, 'invalid_request', f'invalid request body: json: unknown field "{leaf}"', param=leaf)
    if kind == 'json_invalid':
        return ApiError(400, 'invalid_request', f'invalid request body: {error["msg"]}')
    if kind in {'model_type', 'model_attributes_type'} and not path:
        return ApiError(400, 'invalid_request', 'invalid request body: the body must be a JSON object')
    if kind == 'missing':
        return ApiError(400, 'invalid_request', f'invalid request body: missing required field "{path}"', param=leaf)
    if kind in _CONSTRAINT_ERRORS:
        return validation_failed(_constraint_message(error, path, leaf))
    return ApiError(400, 'invalid_request', f'invalid request body: field "{path}": {error["msg"]}', param=leaf)


def _union_tag_error(error: ErrorDetails, path: str) -> ApiError:
    """A tagged union's `type` missing or unknown (`union_tag_not_found`, `union_tag_invalid`), as the API says it."""
    where = f'{path}.type' if path else 'type'
    if error['type'] == 'union_tag_invalid':
        tag = str(error.get('ctx', {}).get('tag', '')).removeprefix('~')
        return ApiError(400, 'invalid_request', f'invalid request body: unknown {where} "{tag}"', param='type')
    return ApiError(400, 'invalid_request', f'invalid request body: missing required field "{where}"', param='type')


# ---------------------------------------------------------------------------------------------------------------
# Semantic checks


def resolve_effort(name: str, *, field: str) -> str:
    """The base effort level (`fast`…`xhigh`) of an `effort`/`preset` value, or a 400 naming `field`."""
    if field == 'preset' and name in LEGACY_PRESETS:
        return LEGACY_PRESETS[name]
    if match := EFFORT_NAME.match(name):  # a level, or a pinned one
        return match.group(1)
    allowed = ', '.join(EFFORTS)
    legacy = ', '.join(LEGACY_PRESETS) if field == 'preset' else ''
    hint = f' (or the legacy names {legacy})' if legacy else ''
    return _raise(
        validation_failed(
            f'invalid {field} "{name}": use one of {allowed}{hint}, or a pinned version like "medium@2026-10-16.0"',
        )
    )


def _raise(error: ApiError) -> str:
    raise error


def _check_date(value: str | None, field: str) -> None:
    if value is None:
        return
    try:
        if not re.fullmatch(r'\d{1,2}/\d{1,2}/\d{4}', value):
            raise ValueError(value)
        datetime.strptime(value, '%m/%d/%Y')  # noqa: DTZ007 - a calendar date, no time zone involved
    except ValueError:
        raise ApiError(
            400,
            'invalid_date_format',
            f'invalid {field} "{value}": dates must be formatted as MM/DD/YYYY',
            param=field,
        ) from None


def check_filters(
    domains: list[str] | None,
    recency: str | None,
    dates: dict[str, str | None],
) -> None:
    """Domain filter size, date formats, and that recency is not combined with publication-date filters."""
    if domains is not None:
        if len(domains) > 20:
            raise ApiError(
                400,
                'invalid_search_domain_filter',
                f'search_domain_filter accepts at most 20 entries, got {len(domains)}',
                param='search_domain_filter',
            )
        for domain in domains:
            bare = domain.removeprefix('-')
            if not bare or '/' in bare or ' ' in bare or bare.startswith('.'):
                raise ApiError(
                    400,
                    'invalid_search_domain_filter',
                    f'invalid search_domain_filter entry "{domain}": use a bare domain like "example.com" '
                    'or "-example.com" to exclude it',
                    param='search_domain_filter',
                )
    for field, value in dates.items():
        _check_date(value, field)
    published = [name for name in _PUBLICATION_DATES if dates.get(name) is not None]
    if recency is not None and published:
        # The search SDK guide: recency "can combine with the last-updated range but NOT with" publication dates.
        error = validation_failed(
            f'search_recency_filter cannot be combined with {" or ".join(published)} (publication dates); '
            'it can be combined with the last-updated filters',
        )
        error.param = 'search_recency_filter'  # where the Search API's 422 points (`loc`)
        raise error


def _is_loopback(host: str) -> bool:
    if host.casefold() in _LOOPBACK_NAMES:
        return True
    try:
        return ip_address(host).is_loopback
    except ValueError:
        return False


def _check_mcp(tools: list[McpTool]) -> None:
    if len(tools) > 16:
        raise validation_failed(f'at most 16 mcp tools are allowed, got {len(tools)}')
    seen: set[str] = set()
    for tool in tools:
        if not _LABEL.match(tool.server_label):
            raise validation_failed(
                f'invalid server_label "{tool.server_label}": must match ^[a-zA-Z0-9_-]{{1,64}}$',
            )
        if tool.server_label in seen:
            raise validation_failed(f'duplicate server_label "{tool.server_label}"')
        seen.add(tool.server_label)
        parts = urlsplit(tool.server_url)
        host = parts.hostname or ''
        secure = parts.scheme == 'https' or (parts.scheme == 'http' and _is_loopback(host))
        if not host or not secure:
            raise validation_failed(
                f'invalid server_url for mcp server "{tool.server_label}": must be an https URL',
            )


def _check_input(req: CreateRequest, models: Mapping[str, ModelInfo]) -> None:
    if (isinstance(req.input, str) and not req.input.strip()) or (isinstance(req.input, list) and not req.input):
        raise validation_failed('input cannot be empty')


_BASE64 = re.compile(r'^[A-Za-z0-9+/]*={0,2}$')


def _check_attachments(req: CreateRequest, models: Mapping[str, ModelInfo]) -> None:
    """Each `input_file` has exactly one of `file_url` (https) and `file_data` (base64); each `input_image` an https
    URL or a base64 data URI. Not captured live: worded like the captured validation failures."""
    if isinstance(req.input, str):
        return
    for item in req.input:
        if not isinstance(item, MessageItem) or isinstance(item.content, str):
            continue
        for part in item.content:
            if isinstance(part, InputFile):
                if (part.file_url is None) == (part.file_data is None):
                    raise validation_failed('input_file needs exactly one of file_url and file_data')
                if part.file_url is not None and not part.file_url.startswith('https://'):
                    raise validation_failed('input_file.file_url must be an https URL')
                if part.file_data is not None and (not part.file_data or not _BASE64.match(part.file_data)):
                    raise validation_failed('input_file.file_data must be base64-encoded file content')
            elif isinstance(part, InputImage):
                url = part.image_url
                if not (url.startswith('https://') or (url.startswith('data:image/') and ';base64,' in url)):
                    raise validation_failed('input_image.image_url must be an https URL or a base64 data URI')


def _check_target(req: CreateRequest, models: Mapping[str, ModelInfo]) -> None:
    """One of `model`, `models`, `effort` or `preset` names what answers; efforts must be known names or pins."""
    if req.model is None and req.models is None and req.effort is None and req.preset is None:
        raise ApiError(400, 'invalid_request', 'one of model, models, effort or preset is required', param='model')
    if req.effort is not None:
        resolve_effort(req.effort, field='effort')
    if req.preset is not None:
        resolve_effort(req.preset, field='preset')


def _requested_models(req: CreateRequest) -> list[str]:
    return list(req.models or ()) + ([req.model] if req.model is not None else [])


def _check_models(req: CreateRequest, models: Mapping[str, ModelInfo]) -> None:
    """Every model id is listed by `/v1/models` (a bare `sonar` gets a hint). No unknown-model answer was captured
    live; it is typed like the captured validation failures."""
    for name in _requested_models(req):
        if name not in models:
            hint = f' (did you mean "perplexity/{name}"?)' if '/' not in name and f'perplexity/{name}' in models else ''
            raise validation_failed(
                f'model "{name}" is not supported: use a provider/model id listed by GET /v1/models{hint}',
            )


def _check_anthropic(req: CreateRequest, models: Mapping[str, ModelInfo]) -> None:
    """Anthropic models need `max_output_tokens` (the live message, word for word)."""
    if req.max_output_tokens is None and any(name.startswith('anthropic/') for name in _requested_models(req)):
        raise validation_failed('max_output_tokens is required when using Anthropic models')


def _check_metadata(req: CreateRequest, models: Mapping[str, ModelInfo]) -> None:
    """At most 16 keys, keys up to 64 characters, values up to 512."""
    metadata = req.metadata or {}
    if len(metadata) > 16:
        raise validation_failed('metadata can have at most 16 keys')
    for key, value in metadata.items():
        if len(key) > 64:
            raise validation_failed('metadata keys can be at most 64 characters')
        if len(value) > 512:
            raise validation_failed('metadata values can be at most 512 characters')


_JSON_TYPES = frozenset({'string', 'number', 'integer', 'boolean', 'object', 'array', 'null'})
#: Keywords whose value is one subschema, a list of them, or a map of them.
_ONE_SCHEMA = ('items', 'additionalProperties', 'not', 'contains', 'propertyNames', 'if', 'then', 'else')
_SCHEMA_LISTS = ('anyOf', 'oneOf', 'allOf', 'prefixItems')
_SCHEMA_MAPS = ('properties', 'patternProperties', '$defs', 'definitions')


def _subschemas(schema: dict[str, Any]) -> list[Any]:
    found: list[Any] = [schema[key] for key in _ONE_SCHEMA if key in schema]
    for key in _SCHEMA_LISTS:
        value = schema.get(key)
        if isinstance(value, list):
            found += cast('list[Any]', value)
    for key in _SCHEMA_MAPS:
        value = schema.get(key)
        if isinstance(value, dict):
            found += list(cast('dict[str, Any]', value).values())
    return found


def _bad_type(schema: Any) -> bool:
    """Whether a (sub)schema or any schema inside it names a `type` JSON Schema does not have."""
    if not isinstance(schema, dict):
        return False
    node = cast('dict[str, Any]', schema)
    kind = node.get('type')
    kinds = cast('list[Any]', kind) if isinstance(kind, list) else [] if kind is None else [kind]
    if any(k not in _JSON_TYPES for k in kinds):
        return True
    return any(_bad_type(sub) for sub in _subschemas(node))


def _check_response_format(req: CreateRequest, models: Mapping[str, ModelInfo]) -> None:
    """The live rules: the schema is required, its root is an object, and every type inside it is a JSON type."""
    if req.response_format is None:
        return
    if req.response_format.json_schema is None:
        raise validation_failed('response_format.json_schema is required when type is "json_schema"')
    schema = req.response_format.json_schema.schema_
    root = schema.get('type', 'object')
    if root != 'object':
        raise ApiError(
            400,
            'invalid_parameter',
            f"json_schema.schema must have a root type of 'object' (got type={json.dumps(root)}). Wrap your data in "
            "an object property (e.g. {'type': 'object', 'properties': {'items': {'type': 'array', 'items': ...}}}).",
        )
    if _bad_type(schema):
        raise ApiError(400, 'invalid_request', 'invalid request')


def _check_function(tool: FunctionTool) -> None:
    """Client functions may not take a built-in tool's name."""
    if tool.name in _RESERVED_FUNCTION_NAMES:
        raise validation_failed(f'function name "{tool.name}" is reserved for a built-in tool; choose another name')


def _check_web_search(tool: WebSearchTool) -> None:
    """The `web_search` filters: domains, dates, and recency against date filters."""
    f = tool.filters
    if f is not None:
        check_filters(
            f.search_domain_filter,
            f.search_recency_filter,
            {
                'search_after_date_filter': f.search_after_date_filter,
                'search_before_date_filter': f.search_before_date_filter,
                'last_updated_after_filter': f.last_updated_after_filter,
                'last_updated_before_filter': f.last_updated_before_filter,
            },
        )


def _check_tools(req: CreateRequest, models: Mapping[str, ModelInfo]) -> None:
    """Each tool's own rules, in the order the tools are listed."""
    for tool in req.tools or ():
        if isinstance(tool, FunctionTool):
            _check_function(tool)
        elif isinstance(tool, WebSearchTool):
            _check_web_search(tool)


def _check_mcp_tools(req: CreateRequest, models: Mapping[str, ModelInfo]) -> None:
    _check_mcp([tool for tool in req.tools or () if isinstance(tool, McpTool)])


#: The semantic checks of a create, one per rule of the live API, in the order the first error is reported.
_CREATE_CHECKS = (
    _check_input,
    _check_attachments,
    _check_target,
    _check_models,
    _check_anthropic,
    _check_metadata,
    _check_response_format,
    _check_tools,
    _check_mcp_tools,
)


def _check_create(req: CreateRequest, models: Mapping[str, ModelInfo]) -> None:
    for check in _CREATE_CHECKS:
        check(req, models)


def _check_search(req: SearchRequest) -> None:
    queries = [req.query] if isinstance(req.query, str) else req.query
    if not queries or any(not q.strip() for q in queries):
        raise ApiError(400, 'invalid_request', 'query must not be empty', param='query')
    if len(queries) > MAX_SEARCH_QUERIES:
        raise ApiError(
            400,
            'invalid_parameter',
            f'at most {MAX_SEARCH_QUERIES} queries (rewordings of one question) are allowed in one request',
            param='query',
        )
    check_filters(
        req.search_domain_filter,
        req.search_recency_filter,
        {
            'search_after_date_filter': req.search_after_date_filter,
            'search_before_date_filter': req.search_before_date_filter,
            'last_updated_after_filter': req.last_updated_after_filter,
            'last_updated_before_filter': req.last_updated_before_filter,
        },
    )
    languages = req.search_language_filter or []
    if len(languages) > 20 or any(not re.fullmatch(r'[a-z]{2}', code) for code in languages):
        raise ApiError(
            400,
            'invalid_parameter',
            'search_language_filter takes at most 20 ISO 639-1 codes such as "en"',
            param='search_language_filter',
        )
    if req.country is not None and not re.fullmatch(r'[A-Z]{2}', req.country):
        raise ApiError(
            400, 'invalid_parameter', 'country must be an ISO 3166-1 alpha-2 code such as "US"', param='country'
        )


def parse_create(body: bytes, models: Mapping[str, ModelInfo] = MODELS) -> CreateRequest:
    """Validate a create body against the model table `models`, or raise the `ApiError` the live API would answer."""
    try:
        req = CreateRequest.model_validate_json(body)
    except ValidationError as exc:
        raise _to_api_error(exc) from None
    _check_create(req, models)
    return req


def _detail(exc: ValidationError) -> list[dict[str, Any]]:
    """Pydantic's errors as FastAPI lists them: `loc` from `body`, `msg`, `type`, `input`."""
    return [
        {
            'loc': ['body', *(part for part in error['loc'] if not (isinstance(part, str) and part.startswith('~')))],
            'msg': error['msg'],
            'type': error['type'],
            'input': error.get('input'),
        }
        for error in exc.errors(include_url=False)
    ]


def parse_search(body: bytes) -> SearchRequest:
    """Validate a `POST /search` body, or raise a 422 with FastAPI's `{"detail": [...]}` as the Search API does."""
    try:
        req = SearchRequest.model_validate_json(body)
    except ValidationError as exc:
        raise ValidationDetail(_detail(exc)) from None
    try:
        _check_search(req)
    except ApiError as exc:
        raise ValidationDetail(
            [{'loc': ['body', exc.param or 'body'], 'msg': exc.message.removeprefix(_FAILED), 'type': 'value_error'}]
        ) from None
    return req


def input_text(req: CreateRequest) -> str:
    """The text of the request's question: the string input, or the last user message's text."""
    if isinstance(req.input, str):
        return req.input
    for item in reversed(req.input):
        if isinstance(item, MessageItem) and item.role == 'user':
            if isinstance(item.content, str):
                return item.content
            return '\n'.join(part.text for part in item.content if isinstance(part, InputText))
    return ''
