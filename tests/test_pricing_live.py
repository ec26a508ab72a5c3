"""The budget against the live API: live prices, a bound made only of limits the request sends, prices read from the
API and learned from bills, and price tables that can be refused but never lower a reservation by accident.

Every live fact here is encoded in our own data and names its source: the captures of the live API published with
the test fixtures of the open-source `cfdude/mcp-perplexity-pro` server (2026-10-09).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from pydantic_ai_perplexity import BudgetExceededError, Researcher
from pydantic_ai_perplexity._base.errors import ConfigurationError
from pydantic_ai_perplexity._core.reconcile import learn_from
from pydantic_ai_perplexity._domain.pricing import (
    ModelPrice,
    PriceTable,
    cached_api_prices,
    fallback_prices,
    limit_request,
    load_prices,
    parse_api_prices,
    refresh_api_prices,
    reservation,
)
from pydantic_ai_perplexity._domain.results import ResearchResult, Usage
from pydantic_ai_perplexity._ledger import Ledger, RunRecord
from pydantic_ai_perplexity.client import PerplexityClient
from pydantic_ai_perplexity.emulator import Emulator
from support.postgres import ledger_target

pytestmark = pytest.mark.anyio

SHORT = 'How do heat pumps work?'
RECORDINGS = Path(__file__).parent / 'emulator' / 'recordings'


@pytest.fixture(autouse=True)
def no_learned_prices(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts from the shipped prices: nothing learned, no API remembered as unpriced, by an earlier test."""
    from pydantic_ai_perplexity._domain import pricing

    monkeypatch.setattr(pricing, '_observed', {})
    monkeypatch.setattr(pricing, '_unpriced', {})


@pytest.fixture(params=['sqlite', 'postgres'])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with ledger_target(request.param, tmp_path) as where:
        yield where


# --- the fallback is the live table ---------------------------------------------------------------------------------


def test_the_shipped_prices_are_the_live_ones_and_an_unknown_model_costs_the_dearest() -> None:
    # Live fact: cfdude/mcp-perplexity-pro tests/fixtures/models.json, captured 2026-10-09 (pricing per 1M tokens).
    table = fallback_prices()
    assert table.source == 'fallback'
    assert table.price('openai/gpt-5.5') == ModelPrice(5, 30)
    assert table.price('openai/gpt-5.4') == ModelPrice(2.5, 15)
    # Input is billed as cache writes (live `usage.cost`: input_cost 0, cache_creation_cost ...), so input is priced
    # at the dearer of input and cache_write: $12.50 for the $10 / $50 models.
    assert table.price('openai/gpt-6-astra') == table.price('anthropic/claude-fable-5') == ModelPrice(12.5, 50)
    assert table.price('acme/never-heard-of') == table.dearest() == ModelPrice(12.5, 50)
    assert len(table.models) == 52


def test_a_5_dollar_cap_admits_one_untightened_high_run_and_20_dollars_one_xhigh() -> None:
    # Live fact: cfdude/mcp-perplexity-pro tests/fixtures/models.json, captured 2026-10-09: the dearest model is
    # $10 / $50 (cache write $12.50), and an effort's model is the API's choice, so effort runs are priced at it.
    high, xhigh = reservation(SHORT, {'effort': 'high'}), reservation(SHORT, {'effort': 'xhigh'})
    assert 1.0 < high.usd <= 5.0 < xhigh.usd <= 20.0
    medium = reservation(SHORT, {'effort': 'medium'})
    assert medium.usd < high.usd and 'dearest' in medium.model


# --- a bound made of enforced limits --------------------------------------------------------------------------------


@pytest.mark.parametrize('effort', ['fast', 'low', 'medium', 'high', 'xhigh'])
def test_every_limit_the_reservation_assumes_is_in_the_request_sent(effort: str) -> None:
    # Live fact: cfdude/mcp-perplexity-pro tests/fixtures/agent_low_fetch_url.json, captured 2026-10-09: the API
    # echoes `max_output_tokens`, `max_tool_calls` and the `fetch_url` tool's `max_urls`; the SDK's `web_search` tool
    # takes `max_tokens` and `max_tokens_per_page` (perplexity-api.md §L).
    sent = Researcher(api_key='pplx-test', ledger=False).build_request(effort=effort)
    profile = fallback_prices().bundle(effort)
    assert (sent['max_steps'], sent['max_output_tokens'], sent['max_tool_calls']) == (
        profile.max_steps,
        profile.output_tokens,
        profile.tool_calls,
    )
    tools = {t['type']: t for t in sent['tools']}
    assert tools['web_search'] == {
        'type': 'web_search',
        'max_tokens': profile.search_tokens,
        'max_tokens_per_page': 1000,
    }
    assert ('fetch_url' in tools) == (profile.fetch_urls > 0)
    held = reservation(SHORT, sent)
    assert (held.steps, held.tool_calls) == (profile.max_steps, profile.tool_calls)
    # Each limit moves the bound: what is sent is what is priced.
    for change in (
        {'max_steps': profile.max_steps + 1},
        {'max_output_tokens': profile.output_tokens * 2},
        {'max_tool_calls': profile.tool_calls + 2},
    ):
        assert reservation(SHORT, {**sent, **change}).usd > held.usd, change
    bigger = [dict(t, max_tokens=profile.search_tokens * 4) if t['type'] == 'web_search' else t for t in sent['tools']]
    assert reservation(SHORT, {**sent, 'tools': bigger}).usd > held.usd
    assert limit_request(sent) == sent  # applying the limits twice changes nothing


def test_what_the_caller_sets_is_kept_and_priced() -> None:
    sent = Researcher(api_key='pplx-test', ledger=False).build_request(
        effort='high', max_steps=2, max_output_tokens=500, fetch_pages=4
    )
    assert (sent['max_steps'], sent['max_output_tokens']) == (2, 500)
    assert {'type': 'fetch_url', 'max_urls': 4} in sent['tools']
    held = reservation(SHORT, sent)
    assert held.steps == 2 and held.pages == 4 * held.tool_calls


@pytest.mark.slow
async def test_the_emulator_honours_the_limits_and_bills_under_the_reservation(emulator: Emulator) -> None:
    async with Researcher(api_key=emulator.api_key, base_url=emulator.base_url, ledger=False) as r:
        for effort in ('fast', 'low', 'high'):
            result = await r.run(SHORT, effort=effort, wait_seconds=30)
            bound = reservation(SHORT, {'effort': effort})
            assert result.cost_usd is not None and 0 < result.cost_usd <= bound.bound_usd
            assert result.progress.searches + result.progress.pages_fetched <= bound.tool_calls


# --- prices read from the API ---------------------------------------------------------------------------------------


def _models_recording(directory: Path, data: list[dict[str, Any]]) -> Path:
    """A replay directory whose `/v1/models` lists `data` (our own entries, in the live shape)."""
    directory.mkdir(parents=True, exist_ok=True)
    recording = json.loads((RECORDINGS / 'models-models-d9bf4e65e9.json').read_text(encoding='utf-8'))
    recording['response']['body'] = {'object': 'list', 'data': data}
    (directory / 'models.json').write_text(json.dumps(recording), encoding='utf-8')
    shutil.copy(RECORDINGS / 'run-what-is-the-eu-ai-act-2c713eef2f.json', directory)
    return directory


#: `/v1/models` entries in the live shape (cfdude/mcp-perplexity-pro tests/fixtures/models.json, 2026-10-09:
#: `pricing {input, output, cache_read, cache_write?, unit: "usd_per_1m_tokens"}`); `acme/pricey-1` is ours.
LISTED = [
    {'id': 'openai/gpt-5.5', 'object': 'model', 'created': 0, 'owned_by': 'openai',
     'pricing': {'input': 5, 'output': 30, 'cache_read': 0.5, 'unit': 'usd_per_1m_tokens'}},
    {'id': 'acme/pricey-1', 'object': 'model', 'created': 0, 'owned_by': 'acme',
     'pricing': {'input': 40, 'output': 200, 'cache_read': 4, 'cache_write': 50, 'unit': 'usd_per_1m_tokens'}},
    {'id': 'acme/broken', 'pricing': {'input': 'free', 'output': -1}},
    {'id': 'acme/other-unit', 'pricing': {'input': 1, 'output': 1, 'unit': 'usd_per_token'}},
]  # fmt: skip


def test_a_models_listing_is_read_defensively() -> None:
    found = parse_api_prices({'object': 'list', 'data': LISTED})
    assert found == {'openai/gpt-5.5': ModelPrice(5, 30), 'acme/pricey-1': ModelPrice(50, 200)}
    for junk in (None, [], {'data': 'x'}, {'data': [1, None, {'id': 5}]}, [{'id': 'a/b', 'pricing': {'input': 1e400}}]):
        assert parse_api_prices(junk) == {}


async def test_prices_are_read_from_the_api_cached_a_day_and_read_again_when_stale(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv('PERPLEXITY_STATE_DIR', str(tmp_path / 'state'))
    replay = _models_recording(tmp_path / 'replay', LISTED)
    with Emulator(replay=replay) as emu:
        async with PerplexityClient(api_key=emu.api_key, base_url=emu.base_url) as client:
            table = await refresh_api_prices(client, tmp_path / 'state')
            api = client.api
    assert table is not None and table.source == f'api@{datetime.now(UTC).date().isoformat()}'
    assert table.price('acme/pricey-1') == ModelPrice(50, 200) == table.dearest()  # now the dearest known
    assert table.price('openai/gpt-6-luna') == fallback_prices().price('openai/gpt-6-luna')  # not listed: fallback
    (cache,) = (tmp_path / 'state').glob('prices-*.json')
    cached = cached_api_prices(api, tmp_path / 'state')
    assert cached is not None and cached.price('acme/pricey-1') == ModelPrice(50, 200)  # the emulator is gone
    stale = time.time() - 25 * 3600
    os.utime(cache, (stale, stale))
    assert cached_api_prices(api, tmp_path / 'state') is None  # older than a day: read again


async def test_each_reservation_records_which_prices_it_came_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: str
) -> None:
    monkeypatch.setenv('PERPLEXITY_STATE_DIR', str(tmp_path / 'state'))
    replay = _models_recording(tmp_path / 'replay', LISTED)
    with Emulator(replay=replay) as emu:
        async with Researcher(api_key=emu.api_key, base_url=emu.base_url, ledger=target, budget_usd=50) as r:
            result = await r.run('What is the EU AI Act?', effort='fast', wait_seconds=30)
            await r.flush()
            assert r.ledger is not None
            row = r.ledger.get(result.response_id)
    assert row is not None and row.price_source == f'api@{datetime.now(UTC).date().isoformat()}'
    monkeypatch.setenv('PERPLEXITY_PRICES', json.dumps({'models': {'acme/x': [1, 2]}}))
    with Ledger(target) as ledger:
        admitted = ledger.admit(RunRecord(query='q', origin='api'), 'q', {'effort': 'fast'}, cap_usd=None)
        assert admitted.record.price_source == 'user file'


# --- learned prices -------------------------------------------------------------------------------------------------


def test_a_live_bill_below_the_table_teaches_nothing() -> None:
    # Live fact: cfdude/mcp-perplexity-pro tests/fixtures/agent_low_fetch_url.json, captured 2026-10-09: 3,271 input
    # and 80 output tokens on openai/gpt-6-luna, total_cost $0.00386 of which tool_calls_cost $0.00359 (one fetch).
    usage = {
        'input_tokens': 3271,
        'output_tokens': 80,
        'cost': {'input_cost': 0, 'total_cost': 0.00386, 'tool_calls_cost': 0.00359},
    }
    assert fallback_prices().observe('openai/gpt-6-luna', usage) is None


def test_a_run_billed_above_its_table_raises_the_price_for_every_process_sharing_the_ledger(target: str) -> None:
    before = reservation(SHORT, {'effort': 'high', 'model': 'openai/gpt-5.5'})
    result = ResearchResult(
        response_id='resp_dear',
        status='completed',
        model='openai/gpt-5.5',
        usage=Usage(input_tokens=100_000, output_tokens=10_000, cost_usd=4.0, tool_calls_cost_usd=0.0),
    )  # $4 for tokens the table prices at $0.80: 5x
    with Ledger(target) as one, Ledger(target) as other:  # two processes' views of one ledger
        learn_from(one, result)
        learned = other.learned_prices()
        assert learned['openai/gpt-5.5'] == ModelPrice(25, 150)
        admitted = other.admit(
            RunRecord(query=SHORT, origin='api'), SHORT, {'effort': 'high', 'model': 'openai/gpt-5.5'}, cap_usd=None
        )
        assert admitted.reservation.usd == pytest.approx(
            reservation(SHORT, {'effort': 'high', 'model': 'openai/gpt-5.5'}, PriceTable().with_learned(learned)).usd
        )
        assert admitted.reservation.usd > before.usd * 4
        one.learn_price('openai/gpt-5.5', ModelPrice(1, 1))  # a cheaper bill never lowers it
        assert other.learned_prices()['openai/gpt-5.5'] == ModelPrice(25, 150)


# --- user tables ----------------------------------------------------------------------------------------------------


def test_a_user_table_may_raise_prices_but_lowering_them_needs_negotiated_prices() -> None:
    with pytest.raises(ConfigurationError, match=r'PERPLEXITY_PRICES.*below the known.*"negotiated": true'):
        load_prices({'models': {'openai/gpt-5.5': [1, 2]}})
    with pytest.raises(ConfigurationError, match='negotiated'):
        load_prices({'efforts': {'high': {'page_tokens': 10}}})  # a ceiling lowered
    raised = load_prices({'models': {'openai/gpt-5.5': [6, 40]}})
    assert raised.source == 'user file' and raised.price('openai/gpt-5.5') == ModelPrice(6, 40)
    negotiated = load_prices({'negotiated': True, 'models': {'openai/gpt-5.5': [1, 2]}})
    assert negotiated.source == 'negotiated' and negotiated.price('openai/gpt-5.5') == ModelPrice(1, 2)
    # Limits the request sends may go either way: the API enforces them.
    assert load_prices({'efforts': {'high': {'max_steps': 3}}}).bundle('high').max_steps == 3


async def test_an_unknown_model_under_a_cap_is_refused_saying_how_to_price_it(emulator: Emulator, target: str) -> None:
    async with Researcher(api_key=emulator.api_key, base_url=emulator.base_url, ledger=target, budget_usd=0.5) as r:
        with pytest.raises(BudgetExceededError) as refused:
            await r.run(SHORT, effort='high', model='acme/new-model')
    assert 'PERPLEXITY_PRICES' in str(refused.value) and 'acme/new-model' in str(refused.value)


def test_a_refusal_says_what_is_spent_held_left_needed_and_what_fits(target: str) -> None:
    with Ledger(target) as ledger:
        ledger.record_start(
            RunRecord(response_id='resp_done', query='a', origin='api', cost_usd=1.0, status='completed')
        )
        ledger.record_start(RunRecord(response_id='resp_going', query='b', origin='api', estimate_usd=2.0))
        with pytest.raises(BudgetExceededError) as caught:
            ledger.admit(RunRecord(query=SHORT, origin='api', effort='high'), SHORT, {'effort': 'high'}, cap_usd=5.0)
    error = caught.value
    assert (error.spent_usd, error.held_usd, error.left_usd) == (3.0, 2.0, 2.0)
    assert error.estimate_usd == reservation(SHORT, {'effort': 'high'}).usd
    assert [effort for effort, _ in error.fits] == ['fast', 'low'] and error.cheapest_effort == 'fast'
    text = str(error)
    for part in (
        '$1.00 spent',
        '$2.00 held by 1 run in flight',
        '$2.00 is left',
        f'fast (${error.fits[0][1]:.2f})',
        'on_budget="tighten"',
    ):
        assert part in text, part


async def test_a_model_is_told_not_to_call_again_only_when_nothing_fits() -> None:
    from pydantic_ai_perplexity._present.model_text import error_for_model

    fits = BudgetExceededError('x', spent_usd=1, cap_usd=2, estimate_usd=4, fits=(('fast', 0.2), ('low', 0.9)))
    text, retry = error_for_model(fits)
    assert 'effort="low"' in text and 'Do not call' not in text and retry is False
    text, _ = error_for_model(BudgetExceededError('x', spent_usd=2, cap_usd=2, estimate_usd=4))
    assert 'Do not call perplexity_research again' in text


async def test_an_api_that_lists_no_prices_is_not_asked_again_on_every_run(tmp_path: Path) -> None:
    unpriced = [{'id': 'openai/gpt-5.5', 'object': 'model', 'created': 0, 'owned_by': 'openai'}]  # no `pricing`
    with Emulator(replay=_models_recording(tmp_path / 'replay', unpriced)) as emulator:
        async with PerplexityClient(api_key=emulator.api_key, base_url=emulator.base_url) as client:
            for _ in range(3):
                assert await refresh_api_prices(client, tmp_path / 'state') is None  # it lists no prices
        asked = [q for q in emulator.requests if q.method == 'GET' and q.path == '/v1/models']
    assert len(asked) == 1
    assert not (tmp_path / 'state').exists()  # nothing cached
