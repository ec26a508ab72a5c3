"""The emulator's model table, in one place: the models `/v1/models` lists, their emulated prices, and the model
each effort level resolves to. A user extends it per emulator with `Emulator(models={...})`.

The ids are the ones Perplexity's own documents and guides use; the prices are the emulator's, not Perplexity's
(only `perplexity/sonar` and `openai/gpt-5.2` match a published figure): real prices are read from `usage.cost`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ('EFFORT_MODELS', 'FETCH_URL_PRICE', 'MODELS', 'SEARCH_WEB_PRICE', 'ModelInfo', 'model_table')


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """A model the emulator serves, with its emulated prices in USD per million tokens."""

    id: str
    input_per_million: float
    output_per_million: float

    @property
    def owned_by(self) -> str:
        """The provider part of the `provider/model` id."""
        return self.id.split('/', 1)[0]


#: Every model the emulator knows, with its emulated price (USD per 1M tokens, in / out). Sources of the ids:
#: the Agent API migration guide (`perplexity/sonar`, `openai/gpt-5.1`, `anthropic/claude-sonnet-4-5`,
#: `google/gemini-3-flash-preview`), the old presets table (`openai/gpt-5.1`, `openai/gpt-5.2`,
#: `xai/grok-4-1-fast-non-reasoning`), Perplexity's guides (`anthropic/claude-opus-4-6`,
#: `google/gemini-3.1-flash-lite`, `nvidia/nemotron-3-super-120b-a12b`), and the newest live capture
#: (`openai/gpt-6-luna` for `fast`, priced roughly from that capture's costs).
MODELS: dict[str, ModelInfo] = {
    m.id: m
    for m in (
        ModelInfo('perplexity/sonar', 0.25, 2.50),
        ModelInfo('openai/gpt-6-luna', 0.12, 0.50),
        ModelInfo('openai/gpt-5.5', 1.75, 14.00),
        ModelInfo('openai/gpt-5.4', 1.25, 10.00),
        ModelInfo('openai/gpt-5.2', 1.75, 14.00),
        ModelInfo('openai/gpt-5.1', 1.25, 10.00),
        ModelInfo('openai/gpt-5-mini', 0.25, 2.00),
        ModelInfo('anthropic/claude-opus-4-7', 5.00, 25.00),
        ModelInfo('anthropic/claude-opus-4-6', 5.00, 25.00),
        ModelInfo('anthropic/claude-sonnet-4-6', 3.00, 15.00),
        ModelInfo('anthropic/claude-sonnet-4-5', 3.00, 15.00),
        ModelInfo('anthropic/claude-haiku-4-5', 1.00, 5.00),
        ModelInfo('google/gemini-3.1-pro-preview', 2.00, 12.00),
        ModelInfo('google/gemini-3-flash-preview', 0.50, 3.00),
        ModelInfo('google/gemini-3.1-flash-lite', 0.25, 1.50),
        ModelInfo('nvidia/nemotron-3-super-120b-a12b', 0.10, 0.50),
        ModelInfo('xai/grok-4-1-fast-non-reasoning', 0.20, 0.50),
    )
}

#: The model each effort level resolves to: `fast` as in the newest live capture (`openai/gpt-6-luna`), the others
#: after the old presets table and the contract's suggestions (the live mapping moves; see docs/emulator.md).
EFFORT_MODELS: dict[str, str] = {
    'fast': 'openai/gpt-6-luna',
    'low': 'openai/gpt-5.4',
    'medium': 'openai/gpt-5.5',
    'high': 'anthropic/claude-opus-4-7',
    'xhigh': 'anthropic/claude-opus-4-7',
}

#: Emulated tool fees in USD per call (Perplexity's documented list prices for these tools).
SEARCH_WEB_PRICE = 0.005
FETCH_URL_PRICE = 0.0005


def model_table(extra: Mapping[str, tuple[float, float] | ModelInfo] | None = None) -> dict[str, ModelInfo]:
    """The built-in table plus a user's models (`{'acme/model-1': (in_per_million, out_per_million)}`).

    Raises:
        ValueError: an id that is not `provider/model`, or a negative price.
    """
    table = dict(MODELS)
    for model_id, spec in (extra or {}).items():
        info = spec if isinstance(spec, ModelInfo) else ModelInfo(model_id, float(spec[0]), float(spec[1]))
        provider, _, name = model_id.partition('/')
        if not provider or not name or info.id != model_id:
            raise ValueError(f'model id {model_id!r} must be "provider/model"')
        if info.input_per_million < 0 or info.output_per_million < 0:
            raise ValueError(f'model {model_id!r} has a negative price')
        table[model_id] = info
    return table
