"""Prices learnt from what runs were billed read the bill as the live API makes it."""

from __future__ import annotations

import pytest

from pydantic_ai_perplexity._domain import pricing
from support.live_shapes import fetch_usage


def _billed(input_usd: float, output_usd: float) -> dict[str, object]:
    """A live-shaped usage of 1,000 input and 100 output tokens, the input billed as cache writes and reads only."""
    usage = fetch_usage()
    usage['input_tokens'], usage['output_tokens'] = 1_000, 100
    tools = usage['cost']['tool_calls_cost']
    usage['cost'] |= {
        'input_cost': 0,
        'cache_creation_cost': input_usd * 0.8,
        'cache_read_cost': input_usd * 0.2,
        'output_cost': output_usd,
        'total_cost': input_usd + output_usd + tools,
    }
    return usage


def test_a_bill_above_the_table_in_cache_costs_alone_raises_the_price(monkeypatch: pytest.MonkeyPatch) -> None:
    """Live fact: cfdude/mcp-perplexity-pro tests/fixtures/agent_low_fetch_url.json, captured 2026-10-09: input is
    billed as cache_creation_cost + cache_read_cost with input_cost 0, so what the tokens cost is the total less the
    tool fees; reading `input_cost` alone would see a free input and learn nothing."""
    monkeypatch.setattr(pricing, '_observed', {})
    model = 'openai/gpt-5.5'  # $5 in, $30 out per 1M in the live table: 1,000 + 100 tokens are $0.008
    assert pricing.default_prices().price(model) == pricing.ModelPrice(5.0, 30.0)
    raised = pricing.observe_usage(model, _billed(input_usd=0.02, output_usd=0.012))  # $0.032: 4x the table
    assert raised == pricing.ModelPrice(pytest.approx(20.0), pytest.approx(120.0))  # pyright: ignore[reportArgumentType]
    assert pricing.default_prices().price(model).input_per_million == pytest.approx(20.0)


def test_a_bill_at_the_table_teaches_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pricing, '_observed', {})
    assert pricing.observe_usage('openai/gpt-5.5', _billed(input_usd=0.005, output_usd=0.003)) is None
    assert pricing.default_prices().price('openai/gpt-5.5') == pricing.ModelPrice(5.0, 30.0)
