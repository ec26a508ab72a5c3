"""Perplexity's live prices, as facts: the one table the price fallback and the emulator's `/v1/models` are built from.

Source: a live `GET /v1/models` and Perplexity's pricing page, both captured on 2026-10-09 and published with the test
fixtures of the open-source `cfdude/mcp-perplexity-pro` server (`tests/fixtures/models.json`,
`tests/fixtures/pricing_page.json`). Prices are USD per million tokens (the API's `unit: "usd_per_1m_tokens"`); a
model without `cache_write` has none listed. Tool fees are USD per call (per session for `sandbox`).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ('CAPTURED_ON', 'LIVE_MODELS', 'LIVE_SEARCH_API_FEES', 'LIVE_TOOL_FEES', 'LiveModelPrice')

#: The day the facts below were read off the live API.
CAPTURED_ON = '2026-10-09'


@dataclass(frozen=True, slots=True)
class LiveModelPrice:
    """One `/v1/models` entry's `pricing`, in USD per million tokens."""

    id: str
    input: float
    output: float
    cache_read: float
    cache_write: float | None = None


#: The 52 models a live `/v1/models` listed on 2026-10-09, in its order, with their prices.
LIVE_MODELS: tuple[LiveModelPrice, ...] = (
    LiveModelPrice('anthropic/claude-fable-5', 10, 50, 1, 12.5),
    LiveModelPrice('anthropic/claude-fable-5-1', 10, 50, 0.25, 12.5),
    LiveModelPrice('anthropic/claude-haiku-4-5', 1, 5, 0.1, 1.25),
    LiveModelPrice('anthropic/claude-haiku-5-5', 0.1, 0.5, 0.01, 0.125),
    LiveModelPrice('anthropic/claude-opus-4-5', 5, 25, 0.5, 6.25),
    LiveModelPrice('anthropic/claude-opus-4-6', 5, 25, 0.5, 6.25),
    LiveModelPrice('anthropic/claude-opus-4-7', 5, 25, 0.5, 6.25),
    LiveModelPrice('anthropic/claude-opus-4-8', 5, 25, 0.5, 6.25),
    LiveModelPrice('anthropic/claude-opus-5', 5, 25, 0.5, 6.25),
    LiveModelPrice('anthropic/claude-opus-5-5', 4, 20, 0.2, 5),
    LiveModelPrice('anthropic/claude-sonnet-4-5', 3, 15, 0.3, 3.75),
    LiveModelPrice('anthropic/claude-sonnet-4-6', 3, 15, 0.3, 3.75),
    LiveModelPrice('anthropic/claude-sonnet-5', 2, 10, 0.2, 2.5),
    LiveModelPrice('anthropic/claude-sonnet-5-5', 2, 10, 0.2, 2.5),
    LiveModelPrice('google/gemini-3-flash-preview', 0.5, 3, 0.05),
    LiveModelPrice('google/gemini-3.1-flash-lite', 0.25, 1.5, 0.025),
    LiveModelPrice('google/gemini-3.1-pro-preview', 2, 12, 0.2),
    LiveModelPrice('google/gemini-3.5-flash', 1.5, 9, 0.15),
    LiveModelPrice('google/gemini-3.5-flash-lite', 0.3, 2.5, 0.03),
    LiveModelPrice('google/gemini-3.6-flash', 1.5, 7.5, 0.15),
    LiveModelPrice('google/gemini-3.7-flash', 0.75, 3.75, 0.075),
    LiveModelPrice('google/gemini-3.8-flash', 0.75, 3.75, 0.075),
    LiveModelPrice('openai/gpt-5', 1.25, 10, 0.125),
    LiveModelPrice('openai/gpt-5-mini', 0.25, 2, 0.025),
    LiveModelPrice('openai/gpt-5-nano', 0.05, 0.4, 0.005),
    LiveModelPrice('openai/gpt-5.1', 1.25, 10, 0.125),
    LiveModelPrice('openai/gpt-5.2', 1.75, 14, 0.175),
    LiveModelPrice('openai/gpt-5.3-codex', 3.5, 28, 0.35),
    LiveModelPrice('openai/gpt-5.4', 2.5, 15, 0.25),
    LiveModelPrice('openai/gpt-5.4-mini', 0.75, 4.5, 0.075),
    LiveModelPrice('openai/gpt-5.4-nano', 0.2, 1.25, 0.02),
    LiveModelPrice('openai/gpt-5.5', 5, 30, 0.5),
    LiveModelPrice('openai/gpt-5.6-luna', 0.2, 1.2, 0.02, 0.25),
    LiveModelPrice('openai/gpt-5.6-sol', 4, 20, 0.4, 5),
    LiveModelPrice('openai/gpt-5.6-terra', 2, 12, 0.2, 2.5),
    LiveModelPrice('openai/gpt-6-astra', 10, 50, 1, 12.5),
    LiveModelPrice('openai/gpt-6-luna', 0.1, 0.5, 0.01, 0.125),
    LiveModelPrice('openai/gpt-6-sol', 2, 10, 0.2, 2.5),
    LiveModelPrice('openai/gpt-6.1-sol', 2, 10, 0.1, 2.5),
    LiveModelPrice('perplexity/deepseek-v4-pro-0813', 1.32, 3.96, 0.044),
    LiveModelPrice('perplexity/glm-5.3', 1.4, 4.4, 0.26),
    LiveModelPrice('perplexity/glm-5.3-flash', 0.15, 0.5, 0.03),
    LiveModelPrice('perplexity/kimi-k3', 3, 15, 0.3),
    LiveModelPrice('perplexity/nemotron-3-ultra-550b-a55b', 0.25, 2.5, 0.25),
    LiveModelPrice('perplexity/sonar', 0.25, 2.5, 0.0625),
    LiveModelPrice('xai/grok-4.20-multi-agent', 1.25, 2.5, 0.2),
    LiveModelPrice('xai/grok-4.20-non-reasoning', 1.25, 2.5, 0.2),
    LiveModelPrice('xai/grok-4.20-reasoning', 1.25, 2.5, 0.2),
    LiveModelPrice('xai/grok-4.3', 1.25, 2.5, 0.2),
    LiveModelPrice('xai/grok-4.5', 2, 6, 0.3),
    LiveModelPrice('xai/grok-4.6', 2, 6, 0.5),
    LiveModelPrice('xai/grok-4.7', 2, 6, 0.5, 2),
)

#: Tool fees from the pricing page (USD per call; `sandbox` per session). `web_search` is $0.0025 at the standard
#: search type and $0.001 at `fast` (what a `fast` run was billed as `search_web`); a fetch's own fee is $0.0005, and
#: live runs bill about $0.0035 per fetch once the tokens of the model that reads the page are added.
LIVE_TOOL_FEES: dict[str, float] = {
    'web_search': 0.0025,
    'web_search_fast': 0.001,
    'fetch_url': 0.0005,
    'image_search': 0.0025,
    'people_search': 0.005,
    'finance_search': 0.005,
    'sandbox': 0.03,
}

#: The Search API (`POST /search`), USD per request: $5 per 1,000, or $1 per 1,000 with `search_type: "fast"`.
LIVE_SEARCH_API_FEES: dict[str, float] = {'standard': 0.005, 'fast': 0.001}
