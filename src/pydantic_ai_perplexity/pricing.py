"""Prices, and the most a research request can cost: the reservation that makes a budget cap hold by construction.

One table (`PriceTable`) holds what the budget needs to know: each model's input and output price per million
tokens, the fee of one web search and of one fetched page, and what each effort bundles when the request does not
say (its model, at most how many steps, searches and fetched pages, how many tokens a search or a page puts in the
context, its own prompt, how much it writes). `reservation(query, request)` computes from the request itself an upper
bound of its cost under that table:

- every text the request carries (query, instructions, response schema, tool definitions) counts one token per UTF-8
  byte: byte-level tokenizers never make more tokens than bytes, so no text, however hostile, is undercounted;
- every step may read the whole context again: the prompt and every search result and fetched page the run may
  gather, and every step after the first what was written before, so input tokens are at most
  `steps x (prompt + tool results) + (steps - 1) x output`;
- output is at most `max_output_tokens` (or the effort's default) plus the effort's reasoning allowance;
- searches and pages are at most the effort's per step times the steps (pages: `max_urls` of a listed `fetch_url`).

The reservation is never below the effort's floor (`ESTIMATED_COST_USD`). `fit(query, request, remaining)` tightens
the request (fewer fetched pages, fewer output tokens, fewer steps, all sent to the API, which enforces them) until its
reservation fits `remaining`, or says it cannot. The prices are Perplexity's published ones where known
(perplexity-api.md §0.3) and stand-ins otherwise; a model not in the table is priced as the dearest one. Override any
of it with `PERPLEXITY_PRICES` (a JSON file, or JSON text), `load_prices(...)`, or `PriceTable.with_overrides(...)`;
`observe_usage(...)` (called with every finished run's `usage`) raises a model's price in this process when its
`usage.cost` shows it billed more per token than the table says.
"""

from __future__ import annotations

import copy
import json
import math
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

from .errors import ConfigurationError
from .options import LEGACY_PRESETS

__all__ = (
    'PRICES_ENV',
    'EffortBundle',
    'Fit',
    'ModelPrice',
    'PriceTable',
    'Reservation',
    'default_prices',
    'fit',
    'load_prices',
    'observe_usage',
    'reservation',
    'text_tokens',
)

PRICES_ENV = 'PERPLEXITY_PRICES'
#: Output tokens a tightened request keeps at least (an answer needs room), and the fewest steps.
MIN_OUTPUT_TOKENS = 1024
_EFFORT_ALIASES = LEGACY_PRESETS
_DEFAULT_EFFORT = 'medium'


@dataclass(frozen=True)
class ModelPrice:
    """A model's price in USD per million tokens."""

    input_per_million: float
    output_per_million: float


@dataclass(frozen=True)
class EffortBundle:
    """What an effort does when the request does not say: the upper limits the reservation assumes for it."""

    #: The model it resolves to when the request names none (for its price).
    model: str
    #: Steps it runs at most, unless the request sets `max_steps`.
    max_steps: int
    #: Web searches per step at most.
    searches_per_step: int
    #: Pages fetched per step at most when the request lists no `fetch_url` tool (0: the effort does not fetch).
    pages_per_step: int
    #: Tokens one search's results put in the context at most.
    search_tokens: int
    #: Tokens one fetched page (or one remote MCP result) puts in the context at most.
    page_tokens: int
    #: Tokens of the effort's own prompt.
    system_tokens: int
    #: Tokens the run writes at most, unless the request sets `max_output_tokens`.
    output_tokens: int
    #: Reasoning tokens that may come on top of `max_output_tokens`.
    reasoning_tokens: int
    #: Fees per run that do not depend on tokens (e.g. a code sandbox session).
    fixed_usd: float = 0.0
    #: The least a run at this effort is reserved (`ESTIMATED_COST_USD`).
    floor_usd: float = 0.0


#: Perplexity's published prices where known (sonar; gpt-5.x from the docs' example); the others are stand-ins in
#: line with their providers' list prices. These are the emulator's prices too.
_MODELS: dict[str, ModelPrice] = {
    'perplexity/sonar': ModelPrice(0.25, 2.50),
    'openai/gpt-5.5': ModelPrice(1.75, 14.00),
    'openai/gpt-5.4': ModelPrice(1.25, 10.00),
    'openai/gpt-5.2': ModelPrice(1.75, 14.00),
    'openai/gpt-5-mini': ModelPrice(0.25, 2.00),
    'anthropic/claude-opus-4-7': ModelPrice(5.00, 25.00),
    'anthropic/claude-sonnet-4-6': ModelPrice(3.00, 15.00),
    'anthropic/claude-haiku-4-5': ModelPrice(1.00, 5.00),
    'google/gemini-3.1-pro-preview': ModelPrice(2.00, 12.00),
    'google/gemini-3-flash-preview': ModelPrice(0.50, 3.00),
    'xai/grok-4-1-fast-non-reasoning': ModelPrice(0.20, 0.50),
}

#: What each effort bundles, as upper limits (perplexity-api.md §8: fast one step with one search, low three steps
#: with search and fetch, medium ten; high and xhigh more, xhigh with a code sandbox at $0.03 a session).
_EFFORTS: dict[str, EffortBundle] = {
    'fast': EffortBundle('xai/grok-4-1-fast-non-reasoning', 1, 1, 0, 8_000, 3_000, 2_000, 4_000, 1_024, 0.0, 0.01),
    'low': EffortBundle('openai/gpt-5.4', 3, 1, 1, 8_000, 4_000, 2_000, 8_000, 2_048, 0.0, 0.05),
    'medium': EffortBundle('openai/gpt-5.5', 10, 1, 1, 8_000, 4_000, 2_000, 16_000, 4_096, 0.0, 0.25),
    'high': EffortBundle('anthropic/claude-opus-4-7', 15, 1, 1, 8_000, 4_000, 2_000, 32_000, 8_192, 0.0, 1.00),
    'xhigh': EffortBundle('anthropic/claude-opus-4-7', 25, 1, 1, 8_000, 4_000, 2_000, 64_000, 16_384, 0.03, 3.00),
}


@dataclass(frozen=True)
class PriceTable:
    """Model prices, tool fees and effort bundles: everything a reservation is computed from."""

    models: Mapping[str, ModelPrice] = field(default_factory=lambda: dict(_MODELS))
    efforts: Mapping[str, EffortBundle] = field(default_factory=lambda: dict(_EFFORTS))
    #: One web search (`search_web` in `usage.cost`).
    search_usd: float = 0.005
    #: One fetched page (`fetch_url`).
    fetch_usd: float = 0.0005
    #: UTF-8 bytes per token at least: 1 (byte-level tokenizers never make more tokens than bytes).
    bytes_per_token: float = 1.0

    def price(self, model: str | None) -> ModelPrice:
        """The price of `model`; a model not in the table costs as much as the dearest one in it."""
        if model is not None and model in self.models:
            return self.models[model]
        return ModelPrice(
            max((p.input_per_million for p in self.models.values()), default=0.0),
            max((p.output_per_million for p in self.models.values()), default=0.0),
        )

    def bundle(self, effort: str | None) -> EffortBundle:
        """The bundle of `effort` (a pin `name@version` counts as `name`; unknown or none: the default depth)."""
        name = (effort or _DEFAULT_EFFORT).strip().lower().partition('@')[0]
        name = _EFFORT_ALIASES.get(name, name)
        return self.efforts.get(name) or self.efforts[_DEFAULT_EFFORT]

    def with_overrides(self, overrides: Mapping[str, Any]) -> PriceTable:
        """A copy with `overrides` applied: `{"models": {"id": [in, out]}, "efforts": {"fast": {"max_steps": 2}},
        "search_usd": 0.005, "fetch_usd": 0.0005, "bytes_per_token": 1}` (every part optional).

        Raises:
            ConfigurationError: an unknown key or a value that is not a non-negative number.
        """
        known = {'models', 'efforts', 'search_usd', 'fetch_usd', 'bytes_per_token'}
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise ConfigurationError(f'Unknown price table keys {unknown}; use {sorted(known)}.')
        models = dict(self.models)
        for model, value in _mapping(overrides.get('models'), 'models').items():
            pair: Any = value
            if isinstance(value, Mapping):
                entry = cast('Mapping[str, Any]', value)
                pair = [entry.get('input_per_million'), entry.get('output_per_million')]
            if not isinstance(pair, list | tuple) or len(cast('list[Any]', pair)) != 2:
                raise ConfigurationError(f'The price of {model!r} must be [input, output] in USD per million tokens.')
            listed = list(cast('list[Any]', pair))
            models[model] = ModelPrice(_usd(listed[0], model), _usd(listed[1], model))
        efforts = dict(self.efforts)
        fields = set(EffortBundle.__dataclass_fields__)
        for name, changes in _mapping(overrides.get('efforts'), 'efforts').items():
            base = efforts.get(name) or efforts[_DEFAULT_EFFORT]
            given = _mapping(changes, f'efforts.{name}')
            bad = sorted(set(given) - fields)
            if bad:
                raise ConfigurationError(f'Unknown effort bundle fields {bad}; use {sorted(fields)}.')
            values: dict[str, Any] = {k: str(v) if k == 'model' else _usd(v, f'{name}.{k}') for k, v in given.items()}
            efforts[name] = replace(base, **values)
        scalars = {k: _usd(overrides[k], k) for k in ('search_usd', 'fetch_usd', 'bytes_per_token') if k in overrides}
        if scalars.get('bytes_per_token', 1.0) <= 0:
            raise ConfigurationError('bytes_per_token must be above 0.')
        return replace(self, models=models, efforts=efforts, **scalars)

    def observe(self, model: str | None, usage: Mapping[str, Any] | None) -> PriceTable:
        """The table with `model`'s price raised where a finished run's `usage` shows it billed more per token.

        Prices are only ever raised from observation (a lower bill proves nothing about the next run).
        """
        if not model or not usage:
            return self
        cost = usage.get('cost')
        if not isinstance(cost, Mapping):
            return self
        current = self.price(model)
        rates: list[float] = []
        for tokens_key, cost_key, known in (
            ('input_tokens', 'input_cost', current.input_per_million),
            ('output_tokens', 'output_cost', current.output_per_million),
        ):
            tokens, paid = usage.get(tokens_key), cast('Mapping[str, Any]', cost).get(cost_key)
            rate = known
            if isinstance(tokens, int) and tokens > 0 and isinstance(paid, int | float) and math.isfinite(paid):
                rate = max(known, float(paid) * 1_000_000 / tokens)
            rates.append(rate)
        if (rates[0], rates[1]) == (current.input_per_million, current.output_per_million) and model in self.models:
            return self
        return replace(self, models={**self.models, model: ModelPrice(rates[0], rates[1])})


def _mapping(value: object, what: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigurationError(f'The price table part {what!r} must be an object.')
    return {str(k): v for k, v in cast('Mapping[object, Any]', value).items()}


def _tools(request: Mapping[str, Any]) -> list[dict[str, Any]]:
    listed = request.get('tools')
    if not isinstance(listed, list | tuple):
        return []
    return [
        {str(k): v for k, v in cast('Mapping[object, Any]', t).items()}
        for t in cast('list[Any]', listed)
        if isinstance(t, Mapping)
    ]


def _usd(value: Any, what: object) -> Any:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise ConfigurationError(f'The price table value {what} must be a non-negative number, not {value!r}.')
    return int(value) if isinstance(value, int) else float(value)


_DEFAULT = PriceTable()
_lock = threading.Lock()
_loaded: tuple[str, PriceTable] | None = None
#: Model prices raised by what finished runs of this process were billed (`observe_usage`); applied over the table.
_observed: dict[str, ModelPrice] = {}


def observe_usage(model: str | None, usage: Mapping[str, Any] | None) -> None:
    """Learn from a finished run's `usage.cost`: later reservations price `model` at least as it was billed.

    The input is priced from its whole spend (`ResponseUsage.input_spend`: `input_cost` + `cache_creation_cost` +
    `cache_read_cost`): live runs bill input as cache writes and reads with `input_cost: 0`.
    """
    if not model or not usage:
        return
    usage = _with_input_spend(usage)
    with _lock:
        seen = PriceTable(models={**_DEFAULT.models, **_observed}).observe(model, usage)
        price = seen.price(model)
        if price != _observed.get(model, _DEFAULT.models.get(model)):
            _observed[model] = price


def _with_input_spend(usage: Mapping[str, Any]) -> Mapping[str, Any]:
    """`usage` with `cost.input_cost` replaced by the whole input spend, cache writes and reads included."""
    from .client._models import ResponseUsage

    cost = usage.get('cost')
    if not isinstance(cost, Mapping):
        return usage
    try:
        spend = ResponseUsage.model_validate(usage).input_spend
    except ValueError:
        return usage
    if spend is None:
        return usage
    return {**usage, 'cost': {**cast('Mapping[str, Any]', cost), 'input_cost': spend}}


def _with_observed(table: PriceTable) -> PriceTable:
    if not _observed:
        return table
    models = dict(table.models)
    for model, seen in _observed.items():
        known = table.price(model) if model in models else ModelPrice(0.0, 0.0)
        models[model] = ModelPrice(
            max(known.input_per_million, seen.input_per_million), max(known.output_per_million, seen.output_per_million)
        )
    return replace(table, models=models)


def default_prices() -> PriceTable:
    """The table in force: the built-in one, with `PERPLEXITY_PRICES` applied (a JSON file's path, or JSON text).

    Raises:
        ConfigurationError: the variable names no readable JSON, or the JSON is not a valid override.
    """
    global _loaded
    raw = os.environ.get(PRICES_ENV, '').strip()
    if not raw:
        return _with_observed(_DEFAULT)
    with _lock:
        if _loaded is None or _loaded[0] != raw:
            _loaded = (raw, load_prices(raw))
        table = _loaded[1]
    return _with_observed(table)


def load_prices(source: str | os.PathLike[str] | Mapping[str, Any]) -> PriceTable:
    """The built-in table with overrides from a JSON file, JSON text, or a mapping (see `PriceTable.with_overrides`).

    Raises:
        ConfigurationError: unreadable, not JSON, or not a valid override.
    """
    if isinstance(source, Mapping):
        return _DEFAULT.with_overrides(source)
    text = str(source).strip()
    if not text.startswith('{'):
        try:
            text = Path(text).expanduser().read_text(encoding='utf-8')
        except OSError as exc:
            raise ConfigurationError(f'{PRICES_ENV}: cannot read the price file {source}: {exc.strerror}.') from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ConfigurationError(f'{PRICES_ENV}: the prices are not valid JSON ({exc}).') from None
    if not isinstance(data, dict):
        raise ConfigurationError(f'{PRICES_ENV}: the prices must be a JSON object.')
    return _DEFAULT.with_overrides(copy.deepcopy(data))  # pyright: ignore[reportUnknownArgumentType]


# --- the reservation ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Reservation:
    """The most a request can cost under a price table, and what that bound assumed."""

    usd: float
    #: The bound before the effort's floor was applied.
    bound_usd: float
    model: str
    steps: int
    input_tokens: int
    output_tokens: int
    searches: int
    pages: int

    def describe(self) -> str:
        """The numbers behind the bound, for an error message."""
        return (
            f'at most {self.steps} step{"s" if self.steps != 1 else ""} on {self.model}: {self.input_tokens:,} input '
            f'and {self.output_tokens:,} output tokens, {self.searches} search{"es" if self.searches != 1 else ""}, '
            f'{self.pages} fetched page{"s" if self.pages != 1 else ""}'
        )


def text_tokens(text: str, table: PriceTable | None = None) -> int:
    """An upper bound of the tokens of `text`: its UTF-8 bytes over the table's `bytes_per_token`."""
    size = len(text.encode('utf-8', 'surrogatepass'))
    return math.ceil(size / (table or _DEFAULT).bytes_per_token)


def _json_size(value: Any, table: PriceTable) -> int:
    return text_tokens(json.dumps(value, ensure_ascii=False, default=str), table) if value else 0


def _input_text(query: Any) -> str:
    return query if isinstance(query, str) else json.dumps(query, ensure_ascii=False, default=str)


def reservation(query: Any, request: Mapping[str, Any], table: PriceTable | None = None) -> Reservation:
    """The most `request` (an Agent API create body without `input`) with input `query` can cost under `table`."""
    table = table or default_prices()
    bundle = table.bundle(request.get('effort') or request.get('preset'))
    listed = request.get('models')
    fallbacks = [m for m in cast('list[Any]', listed) if isinstance(m, str)] if isinstance(listed, list) else []
    models: list[str] = fallbacks or [str(request.get('model') or bundle.model)]
    priced = max(models, key=lambda m: (table.price(m).input_per_million, table.price(m).output_per_million))
    price = ModelPrice(
        max(table.price(m).input_per_million for m in models), max(table.price(m).output_per_million for m in models)
    )
    steps = int(request.get('max_steps') or bundle.max_steps)
    tools = _tools(request)
    fetch = next((t for t in tools if t.get('type') == 'fetch_url'), None)
    pages_per_step = int(fetch.get('max_urls') or 10) if fetch is not None else bundle.pages_per_step
    mcp_servers = sum(1 for t in tools if t.get('type') in ('mcp', 'connector'))
    searches = steps * bundle.searches_per_step
    pages = steps * pages_per_step
    schema = request.get('response_format')
    prompt = (
        bundle.system_tokens
        + text_tokens(_input_text(query), table)
        + text_tokens(str(request.get('instructions') or ''), table)
        + _json_size(schema, table)
        + _json_size(tools, table)
    )
    context = searches * bundle.search_tokens + pages * bundle.page_tokens + steps * mcp_servers * bundle.page_tokens
    limit = request.get('max_output_tokens')
    written = max(16, int(limit)) if limit else bundle.output_tokens + _json_size(schema, table)
    output = written + bundle.reasoning_tokens
    input_tokens = steps * (prompt + context) + (steps - 1) * output
    bound = (
        input_tokens * price.input_per_million / 1_000_000
        + output * price.output_per_million / 1_000_000
        + searches * table.search_usd
        + pages * table.fetch_usd
        + bundle.fixed_usd
    )
    bound = math.ceil(bound * 1e6) / 1e6  # whole micro-dollars, rounded up
    return Reservation(
        usd=max(bound, bundle.floor_usd),
        bound_usd=bound,
        model=priced,
        steps=steps,
        input_tokens=input_tokens,
        output_tokens=output,
        searches=searches,
        pages=pages,
    )


@dataclass(frozen=True)
class Fit:
    """A request tightened to fit a budget (or as far as it goes), its reservation, and what was changed."""

    request: dict[str, Any]
    reservation: Reservation
    changes: dict[str, int]
    #: Whether the reservation fits; if not, `reservation` is the least this request can be reserved at.
    fits: bool


def fit(query: Any, request: Mapping[str, Any], remaining_usd: float, table: PriceTable | None = None) -> Fit:
    """`request` tightened until its reservation fits `remaining_usd`; `fits` False if no tightening can.

    Tightens, in this order and only as far as needed: the pages fetched per step (to 1), the output tokens (halving,
    down to `MIN_OUTPUT_TOKENS`), then the steps (down to 1). Each limit is set in the request, so the API enforces it.
    No tightening goes below the effort's floor: then the floor is the least reservation.
    """
    table = table or default_prices()
    current: dict[str, Any] = dict(request)
    changes: dict[str, int] = {}
    found = reservation(query, current, table)
    if found.usd <= remaining_usd:
        return Fit(current, found, changes, True)
    bundle = table.bundle(current.get('effort') or current.get('preset'))
    if bundle.floor_usd > remaining_usd:
        return Fit(dict(request), replace(found, usd=bundle.floor_usd), {}, False)

    def attempt(update: dict[str, Any], change: tuple[str, int]) -> bool:
        nonlocal current, found
        current = {**current, **update}
        changes[change[0]] = change[1]
        found = reservation(query, current, table)
        return found.usd <= remaining_usd

    tools = _tools(current)
    fetch = next((t for t in tools if t.get('type') == 'fetch_url'), None)
    if fetch is not None or bundle.pages_per_step > 1:
        if fetch is None:
            fetch = dict[str, Any](type='fetch_url')
            tools.append(fetch)
        fetch['max_urls'] = 1  # a listed tool overrides the effort's tool of the same type
        if attempt({'tools': tools}, ('fetch_pages', 1)):
            return Fit(current, found, changes, True)
    limit = int(current.get('max_output_tokens') or bundle.output_tokens)
    while limit > MIN_OUTPUT_TOKENS:
        limit = max(MIN_OUTPUT_TOKENS, limit // 2)
        if attempt({'max_output_tokens': limit}, ('max_output_tokens', limit)):
            return Fit(current, found, changes, True)
    steps = int(current.get('max_steps') or bundle.max_steps)
    while steps > 1:
        steps -= 1
        if attempt({'max_steps': steps}, ('max_steps', steps)):
            return Fit(current, found, changes, True)
    return Fit(current, found, changes, False)
