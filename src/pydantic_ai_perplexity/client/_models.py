"""Typed, tolerant models of what the Agent API sends back.

Every model keeps fields it does not know (`extra='allow'`, read them from `model_extra`), and output
items and stream events of unknown `type` parse as `UnknownItem` / `UnknownEvent` instead of failing:
the API adds types without notice, and a client must not break on them. Always switch on `.type`.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, cast

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    TypeAdapter,
    ValidationError,
    ValidatorFunctionWrapHandler,
    field_validator,
)

from .._base.statuses import END_EVENTS, TERMINAL_STATUSES

__all__ = (
    'RESERVED_TOOL_NAMES',
    'TERMINAL_STATUSES',
    'AgentEvent',
    'CancelAck',
    'ErrorInfo',
    'FetchUrlContent',
    'FetchUrlResultsItem',
    'FinanceResult',
    'FinanceResultsItem',
    'FunctionCallItem',
    'ImageResult',
    'ImageSearchResultsItem',
    'McpCallItem',
    'McpListToolsItem',
    'MessageItem',
    'Model',
    'ModelList',
    'ModelPricing',
    'OutputItem',
    'OutputText',
    'PeopleSearchResultsItem',
    'Response',
    'ResponseCost',
    'ResponseUsage',
    'SandboxOutput',
    'SandboxResultsItem',
    'SearchApiResult',
    'SearchResponse',
    'SearchResult',
    'SearchResultsItem',
    'ShareFileItem',
    'ToolCallDetail',
    'ToolSearchOutputItem',
    'ToolTokenUsage',
    'UnknownEvent',
    'UnknownItem',
    'parse_event',
    'parse_response',
)

#: Names the Agent API keeps for its own tools: a client `function` may not take one (400), and a `function_call` so
#: named announces an internal search, never a call for the client to run.
RESERVED_TOOL_NAMES = frozenset(
    {'web_search', 'search_web', 'people_search', 'search_people', 'fetch_url', 'finance_search', 'sandbox'}
)


class WireModel(BaseModel):
    """Base of every wire model: unknown fields are kept, never fatal."""

    model_config = ConfigDict(extra='allow', populate_by_name=True, protected_namespaces=())


class ErrorInfo(WireModel):
    """`error` on a failed or cancelled run (HTTP 200), or inside a `response.failed` / `error` event."""

    message: str = ''
    code: str | int | None = None
    type: str | None = None


# ---------------------------------------------------------------------------------------------------------------
# Output items


class Annotation(WireModel):
    """An `output_text` annotation; the API usually sends none (markers live in the text)."""

    type: str | None = None
    url: str | None = None
    title: str | None = None
    start_index: int | None = None
    end_index: int | None = None


class OutputText(WireModel):
    """One content part of a `message` item."""

    type: str = 'output_text'
    text: str = ''
    annotations: list[Annotation] | None = None


class MessageItem(WireModel):
    """The answer. `content` is `null` when the item is first announced in a stream."""

    type: Literal['message'] = 'message'
    id: str | None = None
    role: str = 'assistant'
    status: str | None = None
    content: list[OutputText] | None = None

    @property
    def text(self) -> str:
        """The concatenated `output_text` parts."""
        return ''.join(part.text for part in self.content or () if part.type == 'output_text')


class SearchResult(WireModel):
    """One web result; the answer's `[n]` markers point at `id`."""

    id: int | None = None
    url: str = ''
    title: str = ''
    snippet: str = ''
    date: str | None = None
    last_updated: str | None = None
    source: str | None = None


class SearchResultsItem(WireModel):
    """The results of one search (a run may hold several); `search_results` items carry no `id`."""

    type: Literal['search_results'] = 'search_results'
    queries: list[str] | None = None
    results: list[SearchResult] = Field(default_factory=list[SearchResult])


class FetchUrlContent(WireModel):
    """One fetched page."""

    url: str = ''
    title: str | None = None
    snippet: str | None = None


class FetchUrlResultsItem(WireModel):
    """Pages the run fetched."""

    type: Literal['fetch_url_results'] = 'fetch_url_results'
    contents: list[FetchUrlContent] = Field(default_factory=list[FetchUrlContent])


class FunctionCallItem(WireModel):
    """A call of a client `function` tool, to be answered with `function_call_output` in the next turn.

    Streams also announce internal searches as a `function_call` named `search_web` that is later *done* as a
    `search_results` item: never execute one of those.
    """

    type: Literal['function_call'] = 'function_call'
    id: str | None = None
    call_id: str | None = None
    name: str = ''
    arguments: str = ''
    status: str | None = None

    def parsed_arguments(self) -> Any:
        """`arguments` decoded from its JSON string (the raw string if it is not JSON)."""
        try:
            return json.loads(self.arguments)
        except ValueError:
            return self.arguments


class McpToolInfo(WireModel):
    """A tool a remote MCP server offered."""

    name: str = ''
    description: str | None = None
    input_schema: dict[str, Any] | None = None


class McpListToolsItem(WireModel):
    """The tools a remote MCP server offered at the start of the run."""

    type: Literal['mcp_list_tools'] = 'mcp_list_tools'
    id: str | None = None
    server_label: str = ''
    tools: list[McpToolInfo] = Field(default_factory=list[McpToolInfo])
    error: str | None = None


class McpCallItem(WireModel):
    """A call the run made to a remote MCP tool. A failed call does not fail the run: see `error`."""

    type: Literal['mcp_call'] = 'mcp_call'
    id: str | None = None
    server_label: str = ''
    name: str = ''
    arguments: str = ''
    output: str | None = None
    error: str | None = None


class ToolSearchOutputItem(WireModel):
    """Tools found in a deferred-loading MCP catalogue."""

    type: Literal['tool_search_output'] = 'tool_search_output'
    id: str | None = None
    tools: list[dict[str, Any]] = Field(default_factory=list[dict[str, Any]])


class ImageResult(WireModel):
    """One image an `image_search` found: the image itself and the page it is on."""

    image_url: str = ''
    origin_url: str | None = None
    width: int | None = None
    height: int | None = None
    title: str | None = None


class ImageSearchResultsItem(WireModel):
    """The images one `image_search` call found."""

    type: Literal['image_search_results'] = 'image_search_results'
    queries: list[str] | None = None
    results: list[ImageResult] = Field(default_factory=list[ImageResult])
    error: str | None = None


class PeopleSearchResultsItem(WireModel):
    """The people one `people_search` call found: results shaped as web results (a profile page each)."""

    type: Literal['people_search_results'] = 'people_search_results'
    queries: list[str] | None = None
    results: list[SearchResult] = Field(default_factory=list[SearchResult])


class FinanceResult(WireModel):
    """One finance record (a quote, a filing, an earnings line); no `url` of its own, its `sources` are pages."""

    category: str = ''
    tickers: list[str] | None = None
    sources: list[str] | None = None


class FinanceResultsItem(WireModel):
    """The records one `finance_search` call found."""

    type: Literal['finance_results'] = 'finance_results'
    results: list[FinanceResult] = Field(default_factory=list[FinanceResult])


class SandboxOutput(WireModel):
    """What one execution in the code sandbox printed and how it ended."""

    stdout: str = ''
    stderr: str = ''
    exit_code: int | None = None
    duration_ms: int | None = None
    status: str | None = None


class SandboxResultsItem(WireModel):
    """Code the run executed in its `sandbox`, and its output."""

    type: Literal['sandbox_results'] = 'sandbox_results'
    call_id: str | None = None
    code: str = ''
    language: str | None = None
    status: str | None = None
    container_id: str | None = None
    results: list[SandboxOutput] = Field(default_factory=list[SandboxOutput])


class ShareFileItem(WireModel):
    """A file the sandbox shared: its `url` is an API path (`/v1/responses/{id}/files/{file_id}/content`)."""

    type: Literal['share_file'] = 'share_file'
    call_id: str | None = None
    file_id: str | None = None
    filename: str | None = None
    size_bytes: int | None = None
    url: str | None = None
    error: str | None = None


class UnknownItem(WireModel):
    """Any output item type this version does not model (`skill_loaded`, `sandbox_read_file`, …)."""

    type: str = 'unknown'


_ITEM_TYPES = frozenset(
    {'message', 'search_results', 'fetch_url_results', 'function_call', 'mcp_list_tools', 'mcp_call',
     'tool_search_output', 'image_search_results', 'people_search_results', 'finance_results', 'sandbox_results',
     'share_file'}
)  # fmt: skip


def field_of(value: object, key: str) -> object:
    """`value[key]` of a decoded JSON object, or `value.key` of a model; `None` when absent."""
    if isinstance(value, dict):
        return cast('dict[str, object]', value).get(key)
    return getattr(value, key, None)


def _item_tag(value: Any) -> str:
    kind = field_of(value, 'type')
    return kind if isinstance(kind, str) and kind in _ITEM_TYPES else 'unknown'


OutputItem = Annotated[
    Annotated[MessageItem, Tag('message')]
    | Annotated[SearchResultsItem, Tag('search_results')]
    | Annotated[FetchUrlResultsItem, Tag('fetch_url_results')]
    | Annotated[FunctionCallItem, Tag('function_call')]
    | Annotated[McpListToolsItem, Tag('mcp_list_tools')]
    | Annotated[McpCallItem, Tag('mcp_call')]
    | Annotated[ToolSearchOutputItem, Tag('tool_search_output')]
    | Annotated[ImageSearchResultsItem, Tag('image_search_results')]
    | Annotated[PeopleSearchResultsItem, Tag('people_search_results')]
    | Annotated[FinanceResultsItem, Tag('finance_results')]
    | Annotated[SandboxResultsItem, Tag('sandbox_results')]
    | Annotated[ShareFileItem, Tag('share_file')]
    | Annotated[UnknownItem, Tag('unknown')],
    Discriminator(_item_tag),
]
"""One element of `Response.output`; unknown types parse as `UnknownItem`."""


# ---------------------------------------------------------------------------------------------------------------
# Usage and cost


class ResponseCost(WireModel):
    """`usage.cost`: what the run cost in USD, as billed. Read it; never recompute it from a price table.

    Live runs bill the input as `cache_creation_cost` and `cache_read_cost`, with `input_cost: 0`: read the input
    spend from `input_spend`, never from `input_cost` alone.
    """

    currency: str = 'USD'
    input_cost: float | None = None
    output_cost: float | None = None
    total_cost: float | None = None
    cache_creation_cost: float | None = None
    cache_read_cost: float | None = None
    tool_calls_cost: float | None = None
    tool_calls_cost_details: dict[str, float] | None = None

    @property
    def input_spend(self) -> float | None:
        """The whole input spend: `input_cost` + `cache_creation_cost` + `cache_read_cost` (None if none is given)."""
        parts = [c for c in (self.input_cost, self.cache_creation_cost, self.cache_read_cost) if c is not None]
        return round(sum(parts), 10) if parts else None


class ToolTokenUsage(WireModel):
    """Tokens of a model a tool ran (e.g. the one that read a fetched page): `tool_calls_details.<tool>.token_usage`."""

    model: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    input_tokens_details: dict[str, Any] | None = None
    output_tokens_details: dict[str, Any] | None = None


class ToolCallDetail(WireModel):
    """`usage.tool_calls_details.<tool>`: how often the run used a tool (`search_web`, `fetch_url`, ...), its cost."""

    invocation: int = 0
    cost_usd: float | None = None
    token_usage: list[ToolTokenUsage] | None = None


class ResponseUsage(WireModel):
    """`usage` of a terminal run (null until then, and null on a cancelled run)."""

    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    input_tokens_details: dict[str, Any] | None = None
    output_tokens_details: dict[str, Any] | None = None
    tool_calls_details: dict[str, ToolCallDetail] | None = None
    cost: ResponseCost | None = None

    @field_validator('tool_calls_details', mode='before')
    @classmethod
    def _tool_objects(cls, value: Any) -> Any:
        """Keep the tools whose detail is an object: one odd entry must not make the whole run unreadable."""
        if isinstance(value, dict):
            entries = cast('dict[str, Any]', value)
            return {k: cast('object', v) for k, v in entries.items() if isinstance(v, dict)}
        return value

    @property
    def input_spend(self) -> float | None:
        """The input's cost as billed, cache writes and reads included (`ResponseCost.input_spend`)."""
        return self.cost.input_spend if self.cost is not None else None

    @property
    def cache_creation_input_tokens(self) -> int:
        """Input tokens written to the cache (billed as `cache_creation_cost`)."""
        return _int((self.input_tokens_details or {}).get('cache_creation_input_tokens'))

    @property
    def cache_read_input_tokens(self) -> int:
        """Input tokens read from the cache (billed as `cache_read_cost`)."""
        details = self.input_tokens_details or {}
        return _int(details.get('cache_read_input_tokens', details.get('cached_tokens')))


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


# ---------------------------------------------------------------------------------------------------------------
# The Response object


class Response(WireModel):
    """A run of the Agent API, as `POST /v1/agent` and `GET /v1/agent/{id}` return it.

    There is no `output_text` on the wire: `output_text` rebuilds it from the `message` items. The run's
    sources, citations and cost in one reading come from `results.ResearchResult.from_response(response)`.
    """

    id: str
    object: str = 'response'
    created_at: int | None = None
    completed_at: int | None = None
    status: str = 'queued'
    model: str | None = None
    effort: str | None = None
    preset: str | None = None
    background: bool | None = None
    store: bool | None = None
    output: list[OutputItem] = Field(default_factory=list[OutputItem])
    usage: ResponseUsage | None = None
    error: ErrorInfo | None = None
    incomplete_details: dict[str, Any] | None = None
    previous_response_id: str | None = None

    @property
    def done(self) -> bool:
        """Whether the run reached a terminal status (`completed`, `failed`, `cancelled`, `incomplete`)."""
        return self.status in TERMINAL_STATUSES

    @property
    def output_text(self) -> str:
        """The answer: the text of every `message` item, joined."""
        return '\n\n'.join(t for item in self.output if isinstance(item, MessageItem) if (t := item.text))

    def items(self, kind: type[Any]) -> list[Any]:
        """The output items of one model class, e.g. `response.items(SearchResultsItem)`."""
        return [item for item in self.output if isinstance(item, kind)]


class CancelAck(WireModel):
    """The 200 answer of `POST /v1/agent/{id}/cancel`: `status` is `cancelling`, not a Response status."""

    response_id: str = ''
    status: str = 'cancelling'


# ---------------------------------------------------------------------------------------------------------------
# Stream events


class AgentEvent(WireModel):
    """One server-sent event of a run. Fields beyond `type` and `sequence_number` depend on the type.

    Events are deliberately one open model rather than a union: the API adds types, and the same field
    (e.g. `item`) holds different item types. Use the typed accessors (`item_`, `response_`) for payloads.
    """

    type: str
    sequence_number: int = -1
    response: dict[str, Any] | None = None
    item: dict[str, Any] | None = None
    output_index: int | None = None
    item_id: str | None = None
    content_index: int | None = None
    delta: str | None = None
    text: str | None = None
    queries: list[str] | None = None
    results: list[dict[str, Any]] | None = None
    urls: list[str] | None = None
    contents: list[dict[str, Any]] | None = None
    thought: str | None = None
    error: ErrorInfo | None = None

    @property
    def is_terminal(self) -> bool:
        """Whether this event ends the run's stream."""
        return self.type in _TERMINAL_EVENTS

    @property
    def response_(self) -> Response | None:
        """The `response` snapshot carried by lifecycle events, parsed."""
        return parse_response(self.response) if self.response is not None else None

    @property
    def item_(self) -> OutputItem | None:
        """The `item` of `response.output_item.*` events, parsed (unknown types as `UnknownItem`)."""
        return _ITEM_ADAPTER.validate_python(self.item) if self.item is not None else None


class UnknownEvent(AgentEvent):
    """Alias kept for readability at call sites: any event of a type this version does not know."""


#: The events that end a run's stream: a run's end, or an `error` event.
_TERMINAL_EVENTS = frozenset({*END_EVENTS, 'error'})
_ITEM_ADAPTER: TypeAdapter[OutputItem] = TypeAdapter(OutputItem)


def parse_response(data: Any) -> Response:
    """Validate a decoded JSON body as a `Response`."""
    return Response.model_validate(data)


def parse_event(data: Any) -> AgentEvent:
    """Validate a decoded `data:` payload as an `AgentEvent`."""
    return AgentEvent.model_validate(data)


# ---------------------------------------------------------------------------------------------------------------
# Search API and models


class SearchApiResult(WireModel):
    """One ranked page from `POST /search` (no `id`, unlike Agent `search_results`)."""

    title: str = ''
    url: str = ''
    snippet: str = ''
    date: str | None = None
    last_updated: str | None = None


class SearchResponse(WireModel):
    """The answer of `POST /search`."""

    id: str = ''
    results: list[SearchApiResult] = Field(default_factory=list[SearchApiResult])
    server_time: str | None = None


class ModelPricing(WireModel):
    """`pricing` of a `/v1/models` entry: USD per `unit` (`usd_per_1m_tokens`); `cache_write` only where billed."""

    input: float | None = None
    output: float | None = None
    cache_read: float | None = None
    cache_write: float | None = None
    unit: str = 'usd_per_1m_tokens'


class Model(WireModel):
    """One entry of `GET /v1/models`; ids are `provider/model`, `pricing` as the live API lists it."""

    id: str
    object: str = 'model'
    created: int = 0
    owned_by: str = ''
    pricing: ModelPricing | None = None

    @field_validator('pricing', mode='wrap')
    @classmethod
    def _unreadable_pricing_is_none(cls, value: Any, handler: ValidatorFunctionWrapHandler) -> ModelPricing | None:
        """A `pricing` that is not one (`{"input": "free"}`) leaves that model unpriced instead of failing the list."""
        try:
            return handler(value)
        except ValidationError:
            return None


class ModelList(WireModel):
    """The answer of `GET /v1/models`."""

    object: str = 'list'
    data: list[Model] = Field(default_factory=list[Model])
