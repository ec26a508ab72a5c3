"""Prices, the limits each effort sends, and the most a research request can cost: the reservation that makes a
budget cap hold by construction.

One table (`PriceTable`) holds what the budget needs to know: each model's price per million tokens, the fee of one
search call and of one fetched page, and each effort's **profile** (`EffortBundle`). A profile is mostly limits the
request *sends* and the API enforces (`max_steps`, `max_output_tokens`, `max_tool_calls`, the `web_search` tool's
`max_tokens` and `max_tokens_per_page`, the `fetch_url` tool's `max_urls`): `limit_request` writes them into every
request, so the bound below holds against the live API, not only against an emulator built on the same assumptions.
What no field can limit is a stated ceiling (the effort's own prompt, what one fetched page puts in the context, the
reasoning tokens on top of `max_output_tokens`, the page reader's fee). `reservation(query, request)` is then:

- every text the request carries (query, instructions, response schema, tool definitions) counts one token per UTF-8
  byte (byte-level tokenizers never make more tokens than bytes);
- a run makes at most `max_steps + 1` model calls (the steps, and a final answer); the first reads the prompt, every
  later one at most the prompt, every tool result and everything written: input tokens are at most
  `(steps + 1) x prompt + steps x (tool calls x tokens per call + output)`;
- output is at most `max_output_tokens` plus the effort's reasoning ceiling;
- tool calls are at most `max_tool_calls`, each at most the dearest call the request allows (a search of `max_tokens`
  tokens, or `max_urls` fetched pages, or a remote MCP result);
- a file in the input counts one token per byte (a file given by URL, and any file, at most `FILE_TOKENS`: no model
  reads more than its context window), an image `IMAGE_TOKENS`; a `models` list is priced at its dearest model, a
  `service_tier` at its factor (`SERVICE_TIER_FACTORS`), a `reasoning.effort` at its reasoning ceiling at least.

A model the table does not know, and an effort's model (the API picks it, and it moves), are priced as the dearest
model in the table. Prices come, in this order, from: the API's `/v1/models` (`api@<date>`, cached a day in the
state directory, see `refresh_api_prices`), else the live prices shipped with the package (`fallback`,
`_base/prices.py`); then `PERPLEXITY_PRICES` (`user file`; it may only raise prices, unless it says
`"negotiated": true`); then prices learned from runs billed above the table (`observe`; the ledger keeps them for
every process). `fit(...)` tightens a request to fit what is left of a budget, when the caller asked for that.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from .._base.efforts import DEFAULT_EFFORT, EFFORTS, effort_level
from .._base.env import ENV
from .._base.errors import ConfigurationError
from .._base.prices import LIVE_MODELS, LIVE_TOOL_FEES
from .options import MODEL_ID
from .settings import variable

if TYPE_CHECKING:
    from ..client import PerplexityClient

__all__ = (
    'FILE_TOKENS',
    'IMAGE_TOKENS',
    'PRICES_ENV',
    'REASONING_CEILINGS',
    'SERVICE_TIER_FACTORS',
    'EffortBundle',
    'Fit',
    'ModelPrice',
    'PriceTable',
    'Reservation',
    'cached_api_prices',
    'default_prices',
    'effort_table',
    'efforts_that_fit',
    'fallback_prices',
    'fit',
    'input_tokens',
    'limit_request',
    'load_prices',
    'observe_usage',
    'parse_api_prices',
    'refresh_api_prices',
    'reservation',
    'text_tokens',
)

_log = logging.getLogger('pydantic_ai_perplexity.pricing')

PRICES_ENV = ENV.PRICES
#: Output tokens a tightened request keeps at least (an answer needs room).
MIN_OUTPUT_TOKENS = 1024
#: How long prices read from the API's `/v1/models` are used before they are read again.
API_PRICES_MAX_AGE_S = 24 * 3600
#: How long an API that listed no prices (or could not be asked) is not asked again by this process.
API_PRICES_RETRY_S = 3600.0
#: The largest price file read (a table of every model is a few KB).
MAX_PRICE_FILE_BYTES = 1 << 20
#: A price above this (USD per million tokens) is a typo, not a price.
_MAX_PRICE = 100_000.0
_MAX_MODELS = 10_000
_PROFILE_KEYS = frozenset({'effort', 'preset', 'max_steps', 'max_output_tokens', 'max_tool_calls'})


@dataclass(frozen=True)
class ModelPrice:
    """A model's price in USD per million tokens (input: the dearest way input is billed, cache writes included)."""

    input_per_million: float
    output_per_million: float

    def describe(self) -> str:
        return f'${self.input_per_million:g} / ${self.output_per_million:g} per 1M tokens'


@dataclass(frozen=True)
class EffortBundle:
    """An effort's profile: the limits its requests send (enforced by the API) and the ceilings no field can set."""

    #: The model it is priced at; None (the default): the dearest model in the table, since the API chooses the
    #: effort's model and that choice moves (live, `fast` and `medium` were served by `openai/gpt-6-luna`).
    model: str | None
    #: Sent as `max_steps`.
    max_steps: int
    #: Sent as `max_output_tokens`.
    output_tokens: int
    #: Sent as `max_tool_calls`: searches, fetches and remote MCP calls of the whole run.
    tool_calls: int
    #: Sent as the `web_search` tool's `max_tokens`: what one search puts in the context.
    search_tokens: int
    #: Sent as the `web_search` tool's `max_tokens_per_page`.
    search_page_tokens: int
    #: Sent as the `fetch_url` tool's `max_urls` (pages per fetch call); 0: the effort does not fetch.
    fetch_urls: int
    #: Ceiling (not enforceable): tokens one fetched page, or one remote MCP result, puts in the context.
    page_tokens: int
    #: Ceiling (not enforceable): tokens of the effort's own prompt.
    system_tokens: int
    #: Ceiling (not enforceable): reasoning tokens that may come on top of `max_output_tokens`.
    reasoning_tokens: int
    #: Fees per run that do not depend on tokens (`xhigh`'s code sandbox session).
    fixed_usd: float = 0.0
    #: The least a run at this effort is reserved (`ESTIMATED_COST_USD`).
    floor_usd: float = 0.0


#: Profile fields the request sends (any valid value is safe: the API enforces it), with their allowed ranges.
_SENT_LIMITS: dict[str, tuple[int, int]] = {
    'max_steps': (1, 100),
    'output_tokens': (16, 1_000_000),
    'tool_calls': (0, 1_000),
    'search_tokens': (1, 1_000_000),
    'search_page_tokens': (1, 1_000_000),
    'fetch_urls': (0, 10),
}
#: Profile fields that are assumptions (a table may raise them; only negotiated prices may lower them).
_CEILINGS: dict[str, tuple[float, float]] = {
    'page_tokens': (1, 1_000_000),
    'system_tokens': (0, 1_000_000),
    'reasoning_tokens': (0, 1_000_000),
    'fixed_usd': (0, 1_000),
    'floor_usd': (0, 1_000),
}


def _fallback_models() -> dict[str, ModelPrice]:
    """The live `/v1/models` prices shipped with the package; input at the dearer of input and cache write."""
    return {m.id: ModelPrice(max(m.input, m.cache_write or 0.0), m.output) for m in LIVE_MODELS}


#: Each effort's profile. Sized so that at the dearest live price ($10 in, $12.50 cache write, $50 out per 1M) a
#: short question reserves under $5 at `high` and under $20 at `xhigh` (docs/ledger.md has the table).
_EFFORTS: dict[str, EffortBundle] = {
    'fast': EffortBundle(None, 1, 2_048, 1, 3_000, 1_000, 0, 3_000, 2_000, 0, 0.0, 0.01),
    'low': EffortBundle(None, 3, 4_096, 3, 3_000, 1_000, 1, 3_000, 2_000, 1_024, 0.0, 0.05),
    'medium': EffortBundle(None, 5, 6_144, 6, 3_000, 1_000, 1, 3_000, 2_000, 2_048, 0.0, 0.25),
    'high': EffortBundle(None, 8, 8_192, 8, 3_000, 1_000, 1, 3_000, 2_000, 2_048, 0.0, 1.00),
    'xhigh': EffortBundle(None, 14, 16_384, 16, 4_000, 1_000, 1, 4_000, 2_000, 4_096, LIVE_TOOL_FEES['sandbox'], 3.00),
}

#: One search call: the dearest search tool (`people_search` / `finance_search` $0.005; `web_search` $0.0025).
_SEARCH_USD = max(LIVE_TOOL_FEES['web_search'], LIVE_TOOL_FEES['people_search'], LIVE_TOOL_FEES['finance_search'])
#: The opt-in tools billed per call (USD), from the pricing page; `sandbox` is billed per session instead.
_PER_CALL_TOOLS: dict[str, float] = {
    name: LIVE_TOOL_FEES[name] for name in ('image_search', 'people_search', 'finance_search')
}
#: One fetched page, a ceiling: its $0.0005 fee plus the tokens of the model that reads it (about $0.0035 live).
_FETCH_USD = 0.01


@dataclass(frozen=True)
class PriceTable:
    """Model prices, tool fees and effort profiles: everything a reservation is computed from."""

    models: Mapping[str, ModelPrice] = field(default_factory=_fallback_models)
    efforts: Mapping[str, EffortBundle] = field(default_factory=lambda: dict(_EFFORTS))
    #: One search call.
    search_usd: float = _SEARCH_USD
    #: One fetched page (fee and reader, a ceiling).
    fetch_usd: float = _FETCH_USD
    #: UTF-8 bytes per token at least: 1 (byte-level tokenizers never make more tokens than bytes).
    bytes_per_token: float = 1.0
    #: Which prices these are, as recorded with each reservation: `fallback` (shipped with the package, read live on
    #: `prices.CAPTURED_ON`), `api@<date>` (the API's `/v1/models`), `user file`, or `negotiated`.
    source: str = 'fallback'

    def known(self, model: str | None) -> bool:
        """Whether the table has a price for `model`."""
        return model is not None and model in self.models

    def dearest(self) -> ModelPrice:
        """The highest input and output price in the table (the price of a model it does not know)."""
        return ModelPrice(
            max((p.input_per_million for p in self.models.values()), default=0.0),
            max((p.output_per_million for p in self.models.values()), default=0.0),
        )

    def price(self, model: str | None) -> ModelPrice:
        """The price of `model`; a model not in the table (or None: the API's choice) costs as the dearest one."""
        if model is not None and model in self.models:
            return self.models[model]
        return self.dearest()

    def bundle(self, effort: str | None) -> EffortBundle:
        """The profile of `effort` (a pin `name@version` counts as `name`; unknown or none: the default depth)."""
        return self.efforts.get(effort_level(effort)) or self.efforts[DEFAULT_EFFORT]

    def with_overrides(self, overrides: Mapping[str, Any], *, origin: str = 'the price table') -> PriceTable:
        """A copy with `overrides` applied: `{"models": {"id": [in, out]}, "efforts": {"high": {"max_steps": 10}},
        "search_usd": 0.005, "fetch_usd": 0.01, "bytes_per_token": 1, "negotiated": false}` (every part optional).

        Limits the request sends (`max_steps`, `output_tokens`, `tool_calls`, `search_tokens`, `search_page_tokens`,
        `fetch_urls`) may take any valid value; prices and ceilings may only be raised, unless `negotiated` is true
        (the account's own prices).

        Raises:
            ConfigurationError: naming `origin` and the problem (an unknown key, a value out of range, a lowered price).
        """
        try:
            return _overridden(self, overrides, origin)
        except ConfigurationError:
            raise
        except (RecursionError, TypeError, ValueError, OverflowError, AttributeError) as exc:  # never a traceback
            raise ConfigurationError(f'{origin}: the price table is not valid ({type(exc).__name__}).') from None

    def with_learned(self, learned: Mapping[str, ModelPrice]) -> PriceTable:
        """The table with prices learned from billed runs applied; they only ever raise a price."""
        if not learned:
            return self
        models = dict(self.models)
        for model, seen in learned.items():
            known = models.get(model)
            if known is None:
                models[model] = seen
            else:
                models[model] = ModelPrice(
                    max(known.input_per_million, seen.input_per_million),
                    max(known.output_per_million, seen.output_per_million),
                )
        return replace(self, models=models)

    def observe(self, model: str | None, usage: Mapping[str, Any] | None) -> ModelPrice | None:
        """`model`'s price raised to what a finished run's `usage` was billed for its tokens, or None if not above.

        The tokens' cost is the bill less its tool fees; when it is above what the table prices those tokens at,
        both prices are raised by that ratio (a lower bill proves nothing about the next run).
        """
        billed = _billed_tokens(usage) if model else None
        if model is None or billed is None:
            return None
        tokens_in, tokens_out, paid = billed
        price = self.price(model)
        priced = (max(tokens_in, 0) * price.input_per_million + max(tokens_out, 0) * price.output_per_million) / 1e6
        if priced <= 0 or paid <= priced * (1 + 1e-6):
            return None
        ratio = min(paid / priced, 1_000.0)
        return ModelPrice(price.input_per_million * ratio, price.output_per_million * ratio)


def _billed_tokens(usage: Mapping[str, Any] | None) -> tuple[int, int, float] | None:
    """A finished run's input and output tokens and what its bill charged for them (the total less the tool fees);
    None when its usage does not say."""
    if not isinstance(usage, Mapping):
        return None
    cost = usage.get('cost')
    tokens_in, tokens_out = usage.get('input_tokens'), usage.get('output_tokens')
    if not isinstance(cost, Mapping) or not isinstance(tokens_in, int) or not isinstance(tokens_out, int):
        return None
    bill = cast('Mapping[str, Any]', cost)
    total, tools = bill.get('total_cost'), bill.get('tool_calls_cost') or 0.0
    if not _finite(total) or not _finite(tools):
        return None
    return tokens_in, tokens_out, float(cast('float', total)) - float(cast('float', tools))


def _finite(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _mapping(value: object, what: str, origin: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigurationError(f'{origin}: {what!r} must be an object, not {type(value).__name__}.')
    return {str(k): v for k, v in cast('Mapping[object, Any]', value).items()}


def _number(value: Any, what: str, origin: str, low: float, high: float) -> float:
    if not _finite(value) or not low <= value <= high:
        shown = repr(value) if isinstance(value, int | float | bool | None) else type(value).__name__
        raise ConfigurationError(f'{origin}: {what} must be a number from {low:g} to {high:g}, not {shown[:40]}.')
    return float(value)


def _whole(value: Any, what: str, origin: str, low: int, high: int) -> int:
    number = _number(value, what, origin, low, high)
    if not number.is_integer():
        raise ConfigurationError(f'{origin}: {what} must be a whole number, not {value!r}.')
    return int(number)


def _not_lower(given: float, known: float, what: str, origin: str, negotiated: bool) -> None:
    if given < known and not negotiated:
        raise ConfigurationError(
            f'{origin}: {what} ({given:g}) is below the known {known:g}. A price table may raise prices and '
            'ceilings, not lower them; if these are your account\'s negotiated prices, add "negotiated": true.'
        )


def _overridden(table: PriceTable, overrides: Mapping[str, Any], origin: str) -> PriceTable:
    """`table` with a user's price table applied, each value checked; only negotiated prices may lower one."""
    known_keys = {'models', 'efforts', 'search_usd', 'fetch_usd', 'bytes_per_token', 'negotiated'}
    unknown = sorted(str(k)[:40] for k in set(overrides) - known_keys)
    if unknown:
        raise ConfigurationError(f'{origin}: unknown price table keys {unknown}; use {sorted(known_keys)}.')
    negotiated = overrides.get('negotiated', False)
    if not isinstance(negotiated, bool):
        raise ConfigurationError(f'{origin}: "negotiated" must be true or false.')
    models = _model_overrides(table, _mapping(overrides.get('models'), 'models', origin), origin, negotiated)
    efforts = dict(table.efforts)
    for name, changes in _mapping(overrides.get('efforts'), 'efforts', origin).items():
        if name not in efforts:
            raise ConfigurationError(f'{origin}: unknown effort {name[:40]!r}; use {", ".join(efforts)}.')
        efforts[name] = _effort_override(table, efforts[name], name, changes, origin, negotiated)
    scalars = _scalar_overrides(table, overrides, origin, negotiated)
    source = 'negotiated' if negotiated else 'user file'
    return replace(table, models=models, efforts=efforts, source=source, **scalars)


def _model_overrides(
    table: PriceTable, given_models: dict[str, Any], origin: str, negotiated: bool
) -> dict[str, ModelPrice]:
    """The table's model prices with the given ones (`[input, output]` or an object) checked and applied."""
    models = dict(table.models)
    if len(given_models) > _MAX_MODELS:
        raise ConfigurationError(f'{origin}: {len(given_models):,} models is more than the {_MAX_MODELS:,} allowed.')
    for model, value in given_models.items():
        if not MODEL_ID.fullmatch(model):
            raise ConfigurationError(f'{origin}: {model[:60]!r} is not a model id ("provider/model").')
        price = _given_price(model, value, origin)
        if model in table.models:
            old = table.models[model]
            _not_lower(
                price.input_per_million, old.input_per_million, f'the input price of {model}', origin, negotiated
            )
            _not_lower(
                price.output_per_million, old.output_per_million, f'the output price of {model}', origin, negotiated
            )
        models[model] = price
    return models


def _given_price(model: str, value: Any, origin: str) -> ModelPrice:
    """A model's price as a user's table gives it: `[input, output]` or `{input_per_million, output_per_million}`."""
    pair: Any = value
    if isinstance(value, Mapping):
        entry = cast('Mapping[str, Any]', value)
        pair = [
            entry.get('input_per_million', entry.get('input')),
            entry.get('output_per_million', entry.get('output')),
        ]
    if not isinstance(pair, list | tuple) or len(cast('list[Any]', pair)) != 2:
        raise ConfigurationError(f'{origin}: the price of {model!r} must be [input, output] in USD per 1M tokens.')
    listed = list(cast('list[Any]', pair))
    return ModelPrice(
        _number(listed[0], f'the input price of {model}', origin, 1e-9, _MAX_PRICE),
        _number(listed[1], f'the output price of {model}', origin, 1e-9, _MAX_PRICE),
    )


def _effort_override(
    table: PriceTable, base: EffortBundle, name: str, changes: Any, origin: str, negotiated: bool
) -> EffortBundle:
    """An effort's profile with a user's changes (its model, sent limits, ceilings) checked and applied."""
    given = _mapping(changes, f'efforts.{name}', origin)
    allowed = {f.name for f in fields(EffortBundle)}
    bad = sorted(k[:40] for k in set(given) - allowed)
    if bad:
        raise ConfigurationError(f'{origin}: unknown effort profile fields {bad}; use {sorted(allowed)}.')
    values: dict[str, Any] = {}
    for key, value in given.items():
        what = f'efforts.{name}.{key}'
        if key == 'model':
            values[key] = _effort_model(table, base, value, what, origin, negotiated)
        elif key in _SENT_LIMITS:
            values[key] = _whole(value, what, origin, *_SENT_LIMITS[key])
        else:
            low, high = _CEILINGS[key]
            number = _number(value, what, origin, low, high)
            _not_lower(number, float(getattr(base, key)), what, origin, negotiated)
            values[key] = number if key.endswith('_usd') else math.ceil(number)
    return replace(base, **values)


def _effort_model(
    table: PriceTable, base: EffortBundle, value: Any, what: str, origin: str, negotiated: bool
) -> str | None:
    """An effort's model from a user's table: a model id (priced no lower than the one it replaces) or null."""
    if value is not None and not (isinstance(value, str) and MODEL_ID.fullmatch(value)):
        raise ConfigurationError(f'{origin}: {what} must be a model id or null.')
    if value is not None and not negotiated:
        old, new = table.price(base.model), table.price(value)
        _not_lower(new.input_per_million, old.input_per_million, f'{what} input price', origin, False)
        _not_lower(new.output_per_million, old.output_per_million, f'{what} output price', origin, False)
    return value


def _scalar_overrides(
    table: PriceTable, overrides: Mapping[str, Any], origin: str, negotiated: bool
) -> dict[str, float]:
    """The per-call prices and the bytes-per-token bound a user's table sets, checked."""
    scalars: dict[str, float] = {}
    for key in ('search_usd', 'fetch_usd'):
        if key in overrides:
            scalars[key] = _number(overrides[key], key, origin, 0, 100)
            _not_lower(scalars[key], getattr(table, key), key, origin, negotiated)
    if 'bytes_per_token' in overrides:
        per_token = _number(overrides['bytes_per_token'], 'bytes_per_token', origin, 0.01, 16)
        if per_token > table.bytes_per_token and not negotiated:
            raise ConfigurationError(
                f'{origin}: bytes_per_token {per_token:g} would count fewer tokens than the known bound '
                f'({table.bytes_per_token:g}); only negotiated prices ("negotiated": true) may lower a reservation.'
            )
        scalars['bytes_per_token'] = per_token
    return scalars


# --- where the table comes from -------------------------------------------------------------------------------------


def fallback_prices() -> PriceTable:
    """The live prices shipped with the package (`_base/prices.py`, read on `CAPTURED_ON`) and the effort profiles."""
    return _FALLBACK


_FALLBACK = PriceTable()
_lock = threading.Lock()
_loaded: tuple[str, PriceTable, PriceTable] | None = None
#: Model prices raised by what finished runs of this process were billed (`observe_usage`); applied over the table.
_observed: dict[str, ModelPrice] = {}
#: APIs (host[:port]) asked for prices lately without an answer, and when they may be asked again (monotonic).
_unpriced: dict[str, float] = {}


def observe_usage(
    model: str | None, usage: Mapping[str, Any] | None, table: PriceTable | None = None
) -> ModelPrice | None:
    """Learn from a finished run's `usage.cost`: later reservations of this process price `model` at least as billed.

    Returns the raised price (store it in the ledger, `Ledger.learn_price`, so other processes learn it too), or None.
    """
    with _lock:
        base = (table or _FALLBACK).with_learned(_observed)
    raised = base.observe(model, usage)
    if raised is not None and model:
        with _lock:
            _observed[model] = raised
    return raised


def default_prices(base: PriceTable | None = None) -> PriceTable:
    """The table in force: `base` (the API's prices, else the fallback), `PERPLEXITY_PRICES` over it, and the prices
    this process learned from billed runs.

    Raises:
        ConfigurationError: the variable names no readable JSON, or the JSON is not a valid table.
    """
    global _loaded
    table = base or _FALLBACK
    raw = variable(PRICES_ENV)
    if raw:
        with _lock:
            if _loaded is None or _loaded[0] != raw or _loaded[1] is not table:
                _loaded = (raw, table, load_prices(raw, base=table))
            table = _loaded[2]
    with _lock:
        return table.with_learned(_observed)


def load_prices(source: str | os.PathLike[str] | Mapping[str, Any], *, base: PriceTable | None = None) -> PriceTable:
    """`base` (default: the fallback) with a user's table applied: a JSON file, JSON text, or a mapping.

    Raises:
        ConfigurationError: naming `PERPLEXITY_PRICES` and the problem (unreadable, too large, not JSON, not valid).
    """
    table = base or _FALLBACK
    if isinstance(source, Mapping):
        return table.with_overrides(source, origin=PRICES_ENV)
    text = str(source).strip()
    if not text.startswith('{'):
        text = _read_price_file(text)
    elif len(text) > MAX_PRICE_FILE_BYTES:
        raise ConfigurationError(f'{PRICES_ENV}: the prices are larger than 1 MiB.')
    try:
        data = json.loads(text)
    except RecursionError:
        raise ConfigurationError(f'{PRICES_ENV}: the prices are nested too deeply.') from None
    except ValueError as exc:
        raise ConfigurationError(f'{PRICES_ENV}: the prices are not valid JSON ({str(exc)[:120]}).') from None
    if not isinstance(data, dict):
        raise ConfigurationError(f'{PRICES_ENV}: the prices must be a JSON object.')
    return table.with_overrides(cast('dict[str, Any]', data), origin=PRICES_ENV)


def _read_price_file(name: str) -> str:
    """The text of the price file `name` (at most 1 MiB of UTF-8); `ConfigurationError` naming `PERPLEXITY_PRICES`."""
    try:
        with Path(name).expanduser().open('rb') as handle:
            data = handle.read(MAX_PRICE_FILE_BYTES + 1)
    except OSError as exc:
        raise ConfigurationError(f'{PRICES_ENV}: cannot read the price file {name[:200]}: {exc.strerror}.') from None
    if len(data) > MAX_PRICE_FILE_BYTES:
        raise ConfigurationError(f'{PRICES_ENV}: the price file {name[:200]} is larger than 1 MiB.')
    try:
        return data.decode('utf-8')
    except UnicodeDecodeError:
        raise ConfigurationError(f'{PRICES_ENV}: the price file {name[:200]} is not UTF-8 text.') from None


def parse_api_prices(listing: Any) -> dict[str, ModelPrice]:
    """The prices in a `/v1/models` answer (`data[].pricing {input, output, cache_write?}`, USD per 1M tokens).

    Entries without a valid price are skipped; input is priced at the dearer of input and cache write.
    """
    data: Any = cast('Mapping[str, Any]', listing).get('data') if isinstance(listing, Mapping) else listing
    found: dict[str, ModelPrice] = {}
    for entry in cast('list[Any]', data) if isinstance(data, list) else []:
        priced = _api_price(entry)
        if priced is None:
            continue
        found[priced[0]] = priced[1]
        if len(found) >= _MAX_MODELS:
            break
    return found


def _api_price(entry: Any) -> tuple[str, ModelPrice] | None:
    """One `/v1/models` entry's model id and price; None when it has no valid one."""
    if not isinstance(entry, Mapping):
        return None
    item = cast('Mapping[str, Any]', entry)
    model, pricing = item.get('id'), item.get('pricing')
    if not isinstance(model, str) or not MODEL_ID.fullmatch(model) or not isinstance(pricing, Mapping):
        return None
    price = _listed_price(cast('Mapping[str, Any]', pricing))
    return (model, price) if price is not None else None


def _listed_price(price: Mapping[str, Any]) -> ModelPrice | None:
    """A listed `pricing {input, output, cache_write?}` in USD per 1M tokens, input at the dearer of input and cache
    write; None when a value is missing, out of range, or in another unit."""
    unit = price.get('unit', 'usd_per_1m_tokens')
    given: list[Any] = [price.get('input'), price.get('output'), price.get('cache_write') or 0.0]
    if unit != 'usd_per_1m_tokens' or not all(_finite(v) and 0 <= v <= _MAX_PRICE for v in given):
        return None
    values = [float(v) for v in given]
    if values[0] <= 0 or values[1] <= 0:
        return None
    return ModelPrice(max(values[0], values[2]), values[1])


def _api_table(models: Mapping[str, ModelPrice], fetched: datetime) -> PriceTable:
    """The fallback with the API's prices over it, labelled with the day they were read."""
    return replace(_FALLBACK, models={**_FALLBACK.models, **models}, source=f'api@{fetched.date().isoformat()}')


def _cache_path(api: str, directory: Path) -> Path:
    safe = re.sub(r'[^A-Za-z0-9.-]', '_', api)[:100] or 'api'
    return directory / f'prices-{safe}.json'


#: The price cache files read so far, by path: their modification time and the table parsed from them.
_cache_tables: dict[Path, tuple[float, PriceTable]] = {}


def cached_api_prices(api: str, directory: Path, *, max_age_s: float = API_PRICES_MAX_AGE_S) -> PriceTable | None:
    """The API's prices for `api` (host[:port]) cached in `directory` (the state directory), if younger than
    `max_age_s`."""
    path = _cache_path(api, directory)
    try:
        if path.is_symlink():
            return None
        mtime = path.stat().st_mtime
        if time.time() - mtime > max_age_s:
            return None
        with _lock:
            known = _cache_tables.get(path)
        if known is not None and known[0] == mtime:  # read once per version of the file, not on every run
            return known[1]
        data, fetched = _read_cache(path)
    except (OSError, ValueError, RecursionError, TypeError):
        return None
    if fetched is None or fetched.tzinfo is None:
        return None
    models = parse_api_prices(data.get('data'))
    table = _api_table(models, fetched) if models else None
    if table is not None:
        with _lock:
            _cache_tables[path] = (mtime, table)
    return table


def _read_cache(path: Path) -> tuple[dict[str, Any], datetime | None]:
    """A price cache file's content and when its prices were fetched (None when it does not say or is too big)."""
    with path.open('rb') as handle:
        raw = handle.read(MAX_PRICE_FILE_BYTES + 1)
    data: Any = json.loads(raw) if len(raw) <= MAX_PRICE_FILE_BYTES else None
    if not isinstance(data, dict):
        return {}, None
    content = cast('dict[str, Any]', data)
    stamp = content.get('fetched_at')
    return content, datetime.fromisoformat(stamp) if isinstance(stamp, str) else None


def _store_api_prices(api: str, directory: Path, listing: Any, fetched: datetime) -> None:
    from .._base.safe_write import write_text_no_follow

    models = parse_api_prices(listing)
    data = [
        {'id': m, 'pricing': {'input': p.input_per_million, 'output': p.output_per_million}} for m, p in models.items()
    ]
    text = json.dumps({'api': api, 'fetched_at': fetched.isoformat(), 'data': data}, indent=1)
    try:
        write_text_no_follow(_cache_path(api, directory), text)
    except (OSError, ValueError) as exc:  # a cache that cannot be written costs one more read tomorrow, nothing else
        _log.info('The prices read from the API could not be cached: %s', exc)


async def refresh_api_prices(client: PerplexityClient, directory: Path) -> PriceTable | None:
    """The API's prices: the copy cached in `directory` (the state directory) for `client.api` while younger than a
    day, else read from `/v1/models` now (with the key, if any) and cached. None when the API lists no prices (then
    the fallback applies).
    """
    from .._base.errors import PerplexityError

    cached = cached_api_prices(client.api, directory)
    if cached is not None:
        return cached
    with _lock:
        if time.monotonic() < _unpriced.get(client.api, -math.inf):
            return None  # asked lately and found no prices: not asked again on every run
        _unpriced[client.api] = time.monotonic() + API_PRICES_RETRY_S
    try:
        listed = await client.models()
    except PerplexityError as exc:
        _log.info('The prices could not be read from %s/v1/models: %s', client.api, exc)
        return None
    # The client's typed `pricing`, checked again here as a price table (finite, in range, per 1M tokens).
    raw = [{'id': m.id, 'pricing': m.pricing.model_dump(exclude_none=True) if m.pricing else None} for m in listed]
    models = parse_api_prices(raw)
    if not models:
        return None
    fetched = datetime.now(UTC)
    with _lock:
        _unpriced.pop(client.api, None)
    _store_api_prices(client.api, directory, raw, fetched)
    return _api_table(models, fetched)


# --- the request as sent --------------------------------------------------------------------------------------------


def _tools(request: Mapping[str, Any]) -> list[dict[str, Any]]:
    listed = request.get('tools')
    if not isinstance(listed, list | tuple):
        return []
    return [
        {str(k): v for k, v in cast('Mapping[object, Any]', t).items()}
        for t in cast('list[Any]', listed)
        if isinstance(t, Mapping)
    ]


def _int(value: object, low: int, high: int) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        return None
    return value


def _effort_of(request: Mapping[str, Any]) -> str | None:
    effort = request.get('effort') or request.get('preset')
    return effort if isinstance(effort, str) else None


def limit_request(request: Mapping[str, Any], table: PriceTable | None = None) -> dict[str, Any]:
    """`request` with every limit of its effort's profile that it does not set itself: what the API must be sent so
    that it enforces what the reservation assumes. A limit the request sets (validly) is kept."""
    table = table or default_prices()
    sent: dict[str, Any] = dict(request)
    effort = _effort_of(sent)
    bundle = table.bundle(effort)
    if _int(sent.get('max_steps'), 1, 100) is None:
        sent['max_steps'] = bundle.max_steps
    if _int(sent.get('max_output_tokens'), 1, 10**9) is None:
        sent['max_output_tokens'] = bundle.output_tokens
    if _int(sent.get('max_tool_calls'), 0, 10**6) is None:
        sent['max_tool_calls'] = bundle.tool_calls
    tools = _tools(sent)
    web = next((t for t in tools if t.get('type') == 'web_search'), None)
    if web is None and effort is not None:  # an effort searches: its search gets the limits too
        web = dict[str, Any](type='web_search')
        tools.insert(0, web)
    if web is not None:
        if _int(web.get('max_tokens'), 1, 10**9) is None:
            web['max_tokens'] = bundle.search_tokens
        if _int(web.get('max_tokens_per_page'), 1, 10**9) is None:
            web['max_tokens_per_page'] = bundle.search_page_tokens
    fetch = next((t for t in tools if t.get('type') == 'fetch_url'), None)
    if fetch is None and effort is not None and bundle.fetch_urls > 0:
        fetch = dict[str, Any](type='fetch_url')
        tools.append(fetch)
    if fetch is not None and _int(fetch.get('max_urls'), 1, 10) is None:
        fetch['max_urls'] = max(1, bundle.fetch_urls)
    if tools:
        sent['tools'] = tools
    return sent


# --- the reservation ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Reservation:
    """The most a request can cost under a price table, and what that bound assumed."""

    usd: float
    #: The bound before the effort's floor was applied.
    bound_usd: float
    #: The model it was priced at (a `models` list: the dearest of them; none named: the dearest in the table).
    model: str
    steps: int
    input_tokens: int
    output_tokens: int
    #: Tool calls at most (`max_tool_calls`): searches, fetches and remote MCP calls.
    tool_calls: int
    #: Pages fetched at most (tool calls x `max_urls`, when the request lets the run fetch).
    pages: int
    #: Which prices (`PriceTable.source`).
    source: str = 'fallback'
    #: The factor the request's `service_tier` bills tokens at (`SERVICE_TIER_FACTORS`; 1 without a tier).
    tier_factor: float = 1.0

    @property
    def searches(self) -> int:
        """Searches at most (every tool call may be one)."""
        return self.tool_calls

    def describe(self) -> str:
        """The numbers behind the bound, for an error message."""
        return (
            f'at most {self.steps} step{"s" if self.steps != 1 else ""} on {self.model}: {self.input_tokens:,} input '
            f'and {self.output_tokens:,} output tokens, {self.tool_calls} tool call'
            f'{"s" if self.tool_calls != 1 else ""} ({self.pages} fetched page{"s" if self.pages != 1 else ""} at '
            f'most); {self.source} prices'
            + (f', tokens at {self.tier_factor:g}x for the service tier' if self.tier_factor != 1 else '')
        )


def text_tokens(text: str, table: PriceTable | None = None) -> int:
    """An upper bound of the tokens of `text`: its UTF-8 bytes over the table's `bytes_per_token`."""
    size = len(text.encode('utf-8', 'surrogatepass'))
    return math.ceil(size / (table or _FALLBACK).bytes_per_token)


def _json_size(value: Any, table: PriceTable) -> int:
    return text_tokens(json.dumps(value, ensure_ascii=False, default=str), table) if value else 0


#: Tokens one image may put in a model call at most (a ceiling: providers resize an image to a few thousand tokens).
IMAGE_TOKENS = 10_000
#: Tokens one file may put in a model call at most: the context window of the largest models listed (about 1M-2M
#: tokens); a file given by URL, whose size is not known before the run, is priced at this.
FILE_TOKENS = 2_000_000
#: What each `service_tier` bills tokens at, as a factor of the listed prices. Perplexity publishes no tier terms:
#: `flex` is priced at the standard price (its discount is not counted on), `priority` and `auto` (which may pick
#: priority) at twice it (the premium other providers charge); `default` and `fast` (what live runs echo) at 1.
SERVICE_TIER_FACTORS: Mapping[str, float] = {'default': 1.0, 'fast': 1.0, 'flex': 1.0, 'auto': 2.0, 'priority': 2.0}
#: The reasoning ceiling a `reasoning.effort` asks for (reasoning tokens on top of `max_output_tokens`, an
#: assumption like the effort's own ceiling): the run is priced at the larger of the two (a lower one never lowers it).
REASONING_CEILINGS: Mapping[str, int] = {'low': 2_048, 'medium': 4_096, 'high': 8_192, 'xhigh': 16_384}


def _input_text(query: Any) -> str:
    return query if isinstance(query, str) else json.dumps(query, ensure_ascii=False, default=str)


def _part_tokens(part: Mapping[str, Any], table: PriceTable) -> int:
    """The most one content part of the input can put in a model call: text by its bytes, a file by its size (one
    token per byte, at most `FILE_TOKENS`; by URL, `FILE_TOKENS`), an image `IMAGE_TOKENS`."""
    kind = part.get('type')
    if kind == 'input_text':
        return text_tokens(str(part.get('text') or ''), table)
    if kind == 'input_image':
        return IMAGE_TOKENS
    if kind == 'input_file':
        data = part.get('file_data')
        if isinstance(data, str):
            size = len(data) * 3 // 4  # base64: 4 characters carry 3 bytes
            return min(math.ceil(size / table.bytes_per_token), FILE_TOKENS)
        return FILE_TOKENS
    return _json_size(part, table)


def input_tokens(query: Any, table: PriceTable | None = None) -> int:
    """The most the create request's `input` (a question, or messages with files and images) puts in a model call."""
    table = table or _FALLBACK
    if not isinstance(query, list | tuple):
        return text_tokens(_input_text(query), table)
    total = 0
    for item in cast('list[Any]', query):
        content: Any = cast('Mapping[str, Any]', item).get('content') if isinstance(item, Mapping) else None
        if isinstance(content, list):
            parts: list[Any] = [p for p in cast('list[Any]', content) if isinstance(p, Mapping)]
            total += sum(_part_tokens(cast('Mapping[str, Any]', p), table) for p in parts)
        else:
            total += text_tokens(_input_text(content if isinstance(content, str) else item), table)
    return total


def reservation(query: Any, request: Mapping[str, Any], table: PriceTable | None = None) -> Reservation:
    """The most `request` (an Agent API create body without `input`) with input `query` can cost under `table`,
    once `limit_request` has set the limits its effort's profile sends."""
    table = table or default_prices()
    sent = limit_request(request, table)
    bundle = table.bundle(_effort_of(sent))
    listed = sent.get('models')
    fallbacks = [m for m in cast('list[Any]', listed) if isinstance(m, str)] if isinstance(listed, list) else []
    named = sent.get('model') if isinstance(sent.get('model'), str) else None
    models: list[str | None] = list(fallbacks) or [named or bundle.model]
    prices = [table.price(m) for m in models]
    price = ModelPrice(max(p.input_per_million for p in prices), max(p.output_per_million for p in prices))
    priced = next((m for m in models if m is not None and table.known(m) and table.price(m) == price), None)
    shown = priced or next((m for m in models if m is not None), None) or 'the model the API picks'
    if priced is None:
        shown = f'{shown} (priced as the dearest known model)'
    steps = int(sent['max_steps'])
    tools = _tools(sent)
    calls = int(sent['max_tool_calls'])
    if sent.get('tool_choice') == 'none':
        calls = 0
    web = next((t for t in tools if t.get('type') == 'web_search'), None)
    fetch = next((t for t in tools if t.get('type') == 'fetch_url'), None)
    urls = int(fetch['max_urls']) if fetch is not None else 0
    mcp = any(t.get('type') in ('mcp', 'connector') for t in tools)
    offered = {str(t.get('type')) for t in tools}
    per_call_tokens = max(
        int(web['max_tokens']) if web is not None else 0,
        urls * bundle.page_tokens,
        bundle.page_tokens if mcp or offered & set(_PER_CALL_TOOLS) else 0,
    )
    # Any call may be the dearest the request offers: a search, a fetch of `max_urls` pages, or an opt-in tool.
    per_call_usd = max(table.search_usd, urls * table.fetch_usd, *(_PER_CALL_TOOLS.get(t, 0.0) for t in offered))
    # A code sandbox is billed per session, once a run (`xhigh` has one already: its `fixed_usd`).
    fixed_usd = max(bundle.fixed_usd, LIVE_TOOL_FEES['sandbox'] if 'sandbox' in offered else 0.0)
    schema = sent.get('response_format')
    prompt = (
        bundle.system_tokens
        + input_tokens(query, table)
        + text_tokens(str(sent.get('instructions') or ''), table)
        + _json_size(schema, table)
        + _json_size(tools, table)
    )
    reasoning = sent.get('reasoning')
    thinking: Any = cast('Mapping[str, Any]', reasoning).get('effort') if isinstance(reasoning, Mapping) else None
    output = max(16, int(sent['max_output_tokens'])) + max(
        bundle.reasoning_tokens, REASONING_CEILINGS.get(str(thinking), 0)
    )
    read = (steps + 1) * prompt + steps * (calls * per_call_tokens + output)
    tier = sent.get('service_tier')
    factor = SERVICE_TIER_FACTORS.get(tier, max(SERVICE_TIER_FACTORS.values())) if isinstance(tier, str) else 1.0
    bound = (
        factor * read * price.input_per_million / 1_000_000
        + factor * output * price.output_per_million / 1_000_000
        + calls * per_call_usd
        + fixed_usd
    )
    bound = math.ceil(bound * 1e6) / 1e6  # whole micro-dollars, rounded up
    return Reservation(
        usd=max(bound, bundle.floor_usd),
        bound_usd=bound,
        model=shown,
        steps=steps,
        input_tokens=read,
        output_tokens=output,
        tool_calls=calls,
        pages=calls * urls,
        source=table.source,
        tier_factor=factor,
    )


def efforts_that_fit(
    query: Any, request: Mapping[str, Any], remaining_usd: float, table: PriceTable | None = None
) -> list[tuple[str, float]]:
    """Each effort whose run of this request (with that effort's own limits) fits `remaining_usd`, with its
    reservation, cheapest first; empty when none does."""
    table = table or default_prices()
    own = {k: v for k, v in request.items() if k not in _PROFILE_KEYS}
    found: list[tuple[str, float]] = []
    for effort in EFFORTS:
        if effort in table.efforts:
            held = reservation(query, {**own, 'effort': effort}, table)
            if held.usd <= remaining_usd + 1e-9:
                found.append((effort, held.usd))
    return sorted(found, key=lambda f: f[1])


@dataclass(frozen=True)
class Fit:
    """A request tightened to fit a budget (or as far as it goes), its reservation, and what was changed."""

    request: dict[str, Any]
    reservation: Reservation
    #: Each limit lowered, as (what the request would have sent, what it sends).
    changes: dict[str, tuple[int, int]]
    #: Whether the reservation fits; if not, `reservation` is the least this request can be reserved at.
    fits: bool


def fit(query: Any, request: Mapping[str, Any], remaining_usd: float, table: PriceTable | None = None) -> Fit:
    """`request` tightened until its reservation fits `remaining_usd`; `fits` False if no tightening can.

    Lowers, in this order and only as far as needed: the pages per fetch (to 1), the output tokens (halving, down to
    `MIN_OUTPUT_TOKENS`), then the steps (down to 1) with the tool calls in proportion. Each is a limit the request
    sends, so the API enforces it. No tightening goes below the effort's floor.
    """
    table = table or default_prices()
    current = limit_request(request, table)
    changes: dict[str, tuple[int, int]] = {}
    found = reservation(query, current, table)
    if found.usd <= remaining_usd:
        return Fit(current, found, changes, True)
    bundle = table.bundle(_effort_of(current))
    if bundle.floor_usd > remaining_usd:
        return Fit(current, replace(found, usd=bundle.floor_usd), {}, False)

    def attempt(update: dict[str, Any], name: str, before: int, after: int) -> bool:
        nonlocal current, found
        current = {**current, **update}
        changes[name] = (changes.get(name, (before, after))[0], after)
        found = reservation(query, current, table)
        return found.usd <= remaining_usd

    tools = _tools(current)
    fetch = next((t for t in tools if t.get('type') == 'fetch_url'), None)
    if fetch is not None and int(fetch['max_urls']) > 1:
        before = int(fetch['max_urls'])
        fetch['max_urls'] = 1
        if attempt({'tools': tools}, 'fetch_urls', before, 1):
            return Fit(current, found, changes, True)
    output = int(current['max_output_tokens'])
    while output > MIN_OUTPUT_TOKENS:
        before, output = output, max(MIN_OUTPUT_TOKENS, output // 2)
        if attempt({'max_output_tokens': output}, 'max_output_tokens', before, output):
            return Fit(current, found, changes, True)
    # Then steps, one at a time, with the tool calls kept in proportion (a step without tools learns nothing).
    steps, calls = int(current['max_steps']), int(current['max_tool_calls'])
    for fewer in range(steps - 1, 0, -1):
        update = {'max_steps': fewer, 'max_tool_calls': min(calls, max(1, math.ceil(calls * fewer / steps)))}
        current = {**current, **update}
        changes['max_steps'] = (steps, fewer)
        if update['max_tool_calls'] < calls:
            changes['max_tool_calls'] = (calls, update['max_tool_calls'])
        found = reservation(query, current, table)
        if found.usd <= remaining_usd:
            return Fit(current, found, changes, True)
    return Fit(current, found, changes, False)


def effort_table(query: str = 'How do heat pumps work?', table: PriceTable | None = None) -> list[dict[str, Any]]:
    """Each effort's profile and its reservation for `query`: the table in docs/ledger.md."""
    table = table or default_prices()
    rows: list[dict[str, Any]] = []
    for effort in EFFORTS:
        bundle = table.bundle(effort)
        held = reservation(query, {'effort': effort}, table)
        rows.append(
            {
                'effort': effort,
                'model': held.model,
                'steps': bundle.max_steps,
                'output_tokens': bundle.output_tokens,
                'search_tokens': bundle.search_tokens,
                'pages_per_fetch': bundle.fetch_urls,
                'tool_calls': bundle.tool_calls,
                'reserved_usd': held.usd,
            }
        )
    return rows
