"""Typed request parameters of the Agent API, the Search API and their tools.

These are `TypedDict`s so that a plain dict literal type-checks, and so that the client can send exactly
the keys the caller gave (the API rejects unknown fields with a 400, and treats omitted ones as defaults).
`effort` is the run's depth (`fast`, `low`, `medium`, `high`, `xhigh`, or a pin like `fast@2026-10-16.0`);
`preset` is its deprecated name and is sent as `effort`.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, Required

from typing_extensions import TypedDict

__all__ = (
    'AgentRequest',
    'FetchUrlTool',
    'FunctionTool',
    'InputItem',
    'McpTool',
    'ReasoningParam',
    'ResponseFormat',
    'SearchRequest',
    'Tool',
    'UserLocation',
    'WebSearchFilters',
    'WebSearchTool',
)

Recency = Literal['hour', 'day', 'week', 'month', 'year']


class WebSearchFilters(TypedDict, total=False):
    """Filters of the `web_search` tool. Dates are `MM/DD/YYYY`; recency excludes the date filters."""

    search_domain_filter: list[str]
    search_recency_filter: Recency
    search_after_date_filter: str
    search_before_date_filter: str
    last_updated_after_filter: str
    last_updated_before_filter: str


class UserLocation(TypedDict, total=False):
    """Where the user is, to localise results."""

    city: str
    region: str
    country: str
    latitude: float
    longitude: float


class WebSearchTool(TypedDict, total=False):
    """`{"type": "web_search", ...}`."""

    type: Required[Literal['web_search']]
    filters: WebSearchFilters
    max_tokens: int
    max_tokens_per_page: int
    search_context_size: Literal['low', 'medium', 'high']
    search_type: Literal['web', 'fast']
    user_location: UserLocation


class FetchUrlTool(TypedDict, total=False):
    """`{"type": "fetch_url", "max_urls": n}`."""

    type: Required[Literal['fetch_url']]
    max_urls: int


class FunctionTool(TypedDict, total=False):
    """A client-side function the model may call (answered with `function_call_output` next turn)."""

    type: Required[Literal['function']]
    name: Required[str]
    description: str
    parameters: dict[str, Any]
    strict: bool


class McpTool(TypedDict, total=False):
    """A remote MCP server (Streamable HTTP, https) that Perplexity itself calls during the run."""

    type: Required[Literal['mcp']]
    server_label: Required[str]
    server_url: Required[str]
    authorization: str
    headers: dict[str, str]
    allowed_tools: list[str]
    defer_loading: bool
    require_approval: Any


class _SimpleTool(TypedDict):
    type: Literal['finance_search', 'people_search', 'sandbox']


Tool = WebSearchTool | FetchUrlTool | FunctionTool | McpTool | _SimpleTool | dict[str, Any]
"""Any tool of the contract; a plain dict is accepted for types this version does not model."""


class ReasoningParam(TypedDict, total=False):
    """`reasoning`: the model's own reasoning depth (not the run's `effort`)."""

    effort: Literal['none', 'minimal', 'low', 'medium', 'high', 'xhigh']


class _JsonSchemaFormat(TypedDict, total=False):
    name: Required[str]
    schema: Required[dict[str, Any]]
    description: str
    strict: bool


class ResponseFormat(TypedDict):
    """Structured output: `{"type": "json_schema", "json_schema": {"name", "schema", ...}}`."""

    type: Literal['json_schema']
    json_schema: _JsonSchemaFormat


InputItem = dict[str, Any]
"""A message, `function_call`, `function_call_output` or other input item, as the contract describes."""


class AgentRequest(TypedDict, total=False):
    """Every field of a create request (`POST /v1/agent`) except `input`, `stream` and `background`."""

    model: str
    models: list[str]
    effort: str
    preset: str
    profile: dict[str, Any]
    instructions: str
    max_steps: int
    max_output_tokens: int
    reasoning: ReasoningParam
    response_format: ResponseFormat
    tools: list[Tool]
    tool_choice: str | dict[str, Any]
    store: bool
    previous_response_id: str
    prompt_cache_key: str
    language_preference: str
    temperature: float
    top_p: float
    service_tier: Literal['auto', 'default', 'flex', 'priority', 'fast']
    step_budget_reminder: bool
    skills: list[dict[str, Any]]
    max_tool_calls: int
    metadata: dict[str, str]
    parallel_tool_calls: bool
    truncation: Literal['auto', 'disabled']
    stream_options: dict[str, Any]
    #: Fields this version does not know yet, merged into the body as given.
    extra_body: NotRequired[dict[str, Any]]


class SearchRequest(TypedDict, total=False):
    """Options of `POST /search` besides `query`."""

    max_results: int
    max_tokens: int
    max_tokens_per_page: int
    search_context_size: Literal['low', 'medium', 'high']
    search_domain_filter: list[str]
    search_language_filter: list[str]
    search_recency_filter: Recency
    search_after_date_filter: str
    search_before_date_filter: str
    last_updated_after_filter: str
    last_updated_before_filter: str
    country: str
    search_mode: Literal['web', 'academic', 'sec']
    search_type: Literal['web', 'fast', 'people']
    display_server_time: bool
    extra_body: NotRequired[dict[str, Any]]
