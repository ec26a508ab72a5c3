"""The emulator's model table, in one place: the models `/v1/models` lists, their prices, and the model each
effort level resolves to. A user extends it per emulator with `Emulator(models={...})`.

The table is built from the live facts in `pydantic_ai_perplexity._base.prices` (a live `/v1/models` and the
pricing page, 2026-10-09), so the emulator lists the live models and bills at the live prices.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._base.prices import LIVE_MODELS, LIVE_TOOL_FEES

__all__ = (
    'EFFORT_MODELS',
    'FETCH_READER_MODEL',
    'FETCH_URL_PRICE',
    'MODELS',
    'SEARCH_WEB_PRICE',
    'ModelInfo',
    'ModelSpec',
    'model_table',
)


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """A model the emulator serves, with its prices in USD per million tokens (as `/v1/models` lists them).

    `cache_read_per_million` defaults to the input price and `cache_write_per_million` (`None`: not listed)
    bills cache creation at the input price.
    """

    id: str
    input_per_million: float
    output_per_million: float
    cache_read_per_million: float | None = None
    cache_write_per_million: float | None = None

    @property
    def owned_by(self) -> str:
        """The provider part of the `provider/model` id."""
        return self.id.split('/', 1)[0]

    @property
    def cache_read_price(self) -> float:
        """USD per million cache-read input tokens."""
        return self.input_per_million if self.cache_read_per_million is None else self.cache_read_per_million

    @property
    def cache_write_price(self) -> float:
        """USD per million cache-creation input tokens (the input price when no cache-write price is listed)."""
        return self.input_per_million if self.cache_write_per_million is None else self.cache_write_per_million

    def pricing(self) -> dict[str, Any]:
        """The `pricing` object of this model's `/v1/models` entry (`cache_write` only when listed)."""
        entry: dict[str, Any] = {
            'input': self.input_per_million,
            'output': self.output_per_million,
            'cache_read': self.cache_read_price,
        }
        if self.cache_write_per_million is not None:
            entry['cache_write'] = self.cache_write_per_million
        entry['unit'] = 'usd_per_1m_tokens'
        return entry


#: Every model the live `/v1/models` listed on 2026-10-09, in its order, at its prices.
MODELS: dict[str, ModelInfo] = {
    m.id: ModelInfo(m.id, m.input, m.output, m.cache_read, m.cache_write) for m in LIVE_MODELS
}

#: The model each effort level resolves to. `fast`, `low` and `medium` runs were all answered by
#: `openai/gpt-6-luna` on 2026-10-09 (the captures' final `model`); `high` and `xhigh` were not captured and keep
#: the contract's suggestion (see docs/emulator.md).
EFFORT_MODELS: dict[str, str] = {
    'fast': 'openai/gpt-6-luna',
    'low': 'openai/gpt-6-luna',
    'medium': 'openai/gpt-6-luna',
    'high': 'anthropic/claude-opus-4-7',
    'xhigh': 'anthropic/claude-opus-4-7',
}

#: The model that reads a fetched page; its tokens are billed inside `fetch_url` (live: `openai/gpt-5.6-luna`).
FETCH_READER_MODEL = 'openai/gpt-5.6-luna'

#: Tool fees in USD per call as billed: `search_web` at $0.001 (the pricing page's fast rate, what both the `fast`
#: and the `medium` captures were billed per search) and `fetch_url`'s own fee (its reader's tokens come on top).
SEARCH_WEB_PRICE = LIVE_TOOL_FEES['web_search_fast']
FETCH_URL_PRICE = LIVE_TOOL_FEES['fetch_url']

ModelSpec = Sequence[float] | ModelInfo


def _info(model_id: str, spec: ModelSpec) -> ModelInfo:
    if isinstance(spec, ModelInfo):
        return spec
    prices = [float(p) for p in spec]
    if not 2 <= len(prices) <= 4:
        raise ValueError(
            f'model {model_id!r} needs (input, output[, cache_read[, cache_write]]) prices, got {len(prices)} numbers'
        )
    return ModelInfo(model_id, *prices)


def model_table(extra: Mapping[str, ModelSpec] | None = None) -> dict[str, ModelInfo]:
    """The built-in table plus a user's models: `{'acme/model-1': (input, output[, cache_read[, cache_write]])}`
    in USD per million tokens, or a `ModelInfo`; a user's entry replaces a built-in one of the same id.

    Raises:
        ValueError: an id that is not `provider/model`, a wrong number of prices, or a negative price.
    """
    table = dict(MODELS)
    for model_id, spec in (extra or {}).items():
        info = _info(model_id, spec)
        provider, _, name = model_id.partition('/')
        if not provider or not name or info.id != model_id:
            raise ValueError(f'model id {model_id!r} must be "provider/model"')
        prices = (info.input_per_million, info.output_per_million, info.cache_read_price, info.cache_write_price)
        if any(p < 0 for p in prices):
            raise ValueError(f'model {model_id!r} has a negative price')
        table[model_id] = info
    return table
