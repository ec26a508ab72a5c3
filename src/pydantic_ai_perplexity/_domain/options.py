"""`ResearchOptions`: every option of a research run, with its description, limits and normalisation, written once.

The toolset's and the MCP server's tool arguments (`tools.py`), the CLI's `research` options and the options table
in `docs/options.md` are derived from the fields here; `Researcher.run/start` take them as keywords (typed by
`ResearchOptionsDict`, so a misspelt option is a type error) or as `options=ResearchOptions(...)`. A bad value is
an `InvalidArgumentError` in the project's words, naming the option: never pydantic's own text.

Adding an option: a field here (type, `Opt` with its description and limits), its line in `to_request` if it
goes on the wire, and its key in `ResearchOptionsDict`. Mark it `tool=True` to offer it to models as well.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from typing import TYPE_CHECKING, Annotated, Any, Literal, Self, cast, get_args

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

from .._base.errors import InvalidArgumentError

if TYPE_CHECKING:
    from ..client._params import AgentRequest, McpTool, ResponseFormat, Tool, WebSearchFilters
else:  # the client package imports the HTTP stack, which the CLI must not load to list its options
    AgentRequest = McpTool = dict

__all__ = (
    'EFFORTS',
    'EXTRA_TOOLS',
    'LEGACY_PRESETS',
    'RECENCIES',
    'RUN_STATUSES',
    'Effort',
    'ExtraTool',
    'LegacyPreset',
    'Opt',
    'Recency',
    'ResearchOptions',
    'ResearchOptionsDict',
    'RunStatus',
    'check_domains',
    'check_extra_tools',
    'check_id',
    'check_recency',
    'check_wait',
    'describe_invalid',
    'normalize_effort',
    'option_fields',
    'wire_date',
)

Effort = Literal['fast', 'low', 'medium', 'high', 'xhigh']
#: The run depths the API knows, fastest first. A pin like `fast@2026-10-16.0` is accepted too.
EFFORTS: tuple[str, ...] = get_args(Effort)
Recency = Literal['hour', 'day', 'week', 'month', 'year']
RECENCIES: tuple[str, ...] = get_args(Recency)
#: The old preset names, as a type: what `effort=` takes as a keyword (a pin like `fast@2026-10-16.0` goes through
#: `options=ResearchOptions(effort=...)`, as no type can spell it).
LegacyPreset = Literal['fast-search', 'pro-search', 'deep-research', 'advanced-deep-research']
#: Every status a run can have. `requires_action` is in the API's schema with no flow documented: not terminal, yet
#: waiting longer changes nothing.
RunStatus = Literal['queued', 'in_progress', 'requires_action', 'completed', 'incomplete', 'failed', 'cancelled']
RUN_STATUSES: tuple[str, ...] = get_args(RunStatus)
ExtraTool = Literal['image_search', 'people_search', 'finance_search', 'sandbox']
#: The Agent API's opt-in tools (`extra_tools=`), each with its fee on the pricing page.
EXTRA_TOOLS: tuple[str, ...] = get_args(ExtraTool)

#: The old preset names the API still accepts, and the effort each stands for.
LEGACY_PRESETS = {
    'fast-search': 'fast',
    'pro-search': 'low',
    'deep-research': 'medium',
    'advanced-deep-research': 'high',
}
_EFFORT = re.compile(r'^(fast|low|medium|high|xhigh)(@\d{4}-\d{2}-\d{2}\.\d+)?$')
_DOMAIN = re.compile(r'^-?(?=.{1,253}$)([a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$')
_SCHEMA_NAME = re.compile(r'[^A-Za-z0-9_-]')
#: Longer than any id the API hands out (`resp_` and a UUID), short enough to quote back in an error.
MAX_ID_CHARS = 200
MAX_DOMAINS = 20
DEFAULT_FETCH_PAGES = 5
#: Local function calls one run may make in all, unless `max_function_calls` says otherwise.
DEFAULT_FUNCTION_CALLS = 10


# -- the checks, each written once (the model's validators and `Researcher.search` call them) --------------------


def _shown(value: object, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else f'{text[: limit - 5]}…{text[-4:]}'


def normalize_effort(effort: str) -> str:
    """Check an effort name and return it (legacy preset names mapped to today's); raise with the choices."""
    value = effort.strip().lower()
    value = LEGACY_PRESETS.get(value, value)
    if not _EFFORT.match(value):
        raise InvalidArgumentError(
            f'Unknown effort {_shown(effort)}: use one of {", ".join(EFFORTS)} '
            '(fast for a quick fact, low/medium for a question needing a few sources, high/xhigh for a survey), '
            'optionally pinned like "fast@2026-10-16.0".',
            argument='effort',
        )
    return value


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
    if any(not ch.isprintable() or '\ud800' <= ch <= '\udfff' for ch in value):
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
        schema = output_type.model_json_schema()
        name = output_type.__name__
        adapter = TypeAdapter(output_type)
    name = _SCHEMA_NAME.sub('_', name)[:64] or 'research_result'
    return {'type': 'json_schema', 'json_schema': {'name': name, 'schema': schema}}, adapter


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


class ResearchOptions(BaseModel):
    """The options of one research run; every field is optional (the researcher's defaults apply)."""

    model_config = ConfigDict(extra='forbid', frozen=True, arbitrary_types_allowed=True)

    effort: Annotated[
        str | None,
        Field(description='How deep to go: fast, low, medium, high or xhigh. Leave empty for the default.'),
        Opt(
            'one of fast, low, medium, high, xhigh',
            tool=True,
            tool_type=Effort | None,
            cli='--effort',
            cli_help='How deep to research (default: PERPLEXITY_EFFORT or medium).',
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
        SkipValidation[list[Callable[..., Any]] | None],
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
        if callable(value):
            return [value]
        if not isinstance(value, Sequence) or isinstance(value, str):
            raise InvalidArgumentError('functions must be a list of Python functions.', argument='functions')
        return list(cast('Sequence[Callable[..., Any]]', value))

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

    @model_validator(mode='after')
    def _recency_or_dates(self) -> Self:
        if self.recency and (self.after or self.before):
            raise InvalidArgumentError(
                'recency cannot be combined with after/before: use one or the other.', argument='recency'
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
        if self.instructions:
            request['instructions'] = self.instructions
        if self.max_steps is not None:
            request['max_steps'] = self.max_steps
        if self.max_output_tokens is not None:
            request['max_output_tokens'] = self.max_output_tokens
        if self.language:
            request['language_preference'] = self.language
        filters: WebSearchFilters = {}
        if self.domains:
            filters['search_domain_filter'] = list(self.domains)
        if self.recency:
            filters['search_recency_filter'] = self.recency
        if self.after:
            filters['search_after_date_filter'] = wire_date(self.after, 'after')
        if self.before:
            filters['search_before_date_filter'] = wire_date(self.before, 'before')
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
    functions: Sequence[Callable[..., Any]] | None
    max_function_calls: int | None
    max_steps: int | None
    max_output_tokens: int | None
    previous_response_id: str | None
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
        '<!-- Generated from `ResearchOptions` (src/pydantic_ai_perplexity/options.py): '
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
