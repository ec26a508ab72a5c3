"""Prices learnt from what runs were billed read the input spend as the live API bills it."""

from __future__ import annotations

import pytest

from live_shapes import fetch_usage
from pydantic_ai_perplexity import pricing


def test_observed_input_price_counts_cache_writes_and_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Live fact: cfdude/mcp-perplexity-pro tests/fixtures/agent_low_fetch_url.json, captured 2026-10-09: input is
    billed as cache_creation_cost + cache_read_cost with input_cost 0, so the input price must come from all three."""
    monkeypatch.setattr(pricing, '_observed', {})
    model = 'acme/observed-1'  # not in the table: the observation alone prices it
    usage = fetch_usage()
    usage['input_tokens'] = 1_000
    usage['cost'] |= {'input_cost': 0, 'cache_creation_cost': 0.008, 'cache_read_cost': 0.002}  # $10 per 1M in all
    pricing.observe_usage(model, usage)
    assert pricing.default_prices().price(model).input_per_million == pytest.approx(10.0)


def test_observed_usage_without_cache_costs_reads_input_cost(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pricing, '_observed', {})
    pricing.observe_usage('acme/observed-2', {'input_tokens': 1_000, 'cost': {'input_cost': 0.012}})  # $12 per 1M
    assert pricing.default_prices().price('acme/observed-2').input_per_million == pytest.approx(12.0)
