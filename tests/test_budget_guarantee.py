"""The budget cap holds by construction, on both ledger engines, against hostile requests and at random.

Each run reserves the most its request can cost (`pricing.reservation`: its text in tokens, the model's prices, its
steps, output tokens, searches and pages), so recorded spend never exceeds the cap unless the API bills a run above
its reservation. The emulator bills by its own table; these tests check that it never does, so that against it the
spend stays under the cap, always. The three overruns once found (five 800 KB `fast` runs under $0.05, a 900 KB
query under $0.01, `fast` on a dear model with 200k characters of instructions and 10 fetched pages) are each a test.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from pydantic_ai_perplexity import Researcher
from pydantic_ai_perplexity._base.errors import BudgetExceededError, InvalidArgumentError
from pydantic_ai_perplexity._core.reconcile import reconcile
from pydantic_ai_perplexity._domain.pricing import ModelPrice, PriceTable, fit, load_prices, reservation, text_tokens
from pydantic_ai_perplexity._ledger import EPSILON_USD, Ledger, RunRecord
from pydantic_ai_perplexity.emulator import EMULATOR_HEADER, Emulator

pytestmark = pytest.mark.anyio


@pytest.fixture
def target(ledger_target: str) -> str:
    """The ledger of the test, on each engine (`ledger_target`)."""
    return ledger_target


class Bodies:
    """Every create body sent, read from the wire by an httpx event hook."""

    def __init__(self) -> None:
        self.creates: list[dict[str, Any]] = []

    async def __call__(self, request: httpx2.Request) -> None:
        if request.method == 'POST' and request.url.path.endswith('/v1/agent'):
            self.creates.append(json.loads(request.content))


def researcher(emu: Emulator, target: str, cap: float | None, bodies: Bodies | None = None, **kw: Any) -> Researcher:
    http = httpx2.AsyncClient(event_hooks={'request': [bodies]}) if bodies is not None else None
    return Researcher(api_key=emu.api_key, base_url=emu.base_url, ledger=target, budget_usd=cap, http_client=http, **kw)


async def spent(target: str) -> float:
    with Ledger(target) as ledger:
        return ledger.spent_usd()


# --- the overruns once found ----------------------------------------------------------------------------------------


async def test_five_concurrent_fast_runs_with_800_kb_queries_stay_under_a_5_cent_cap(
    emulator: Emulator, target: str
) -> None:
    cap = 0.05
    outcomes: list[str] = []
    async with researcher(emulator, target, cap, effort='fast', wait_seconds=30) as r:

        async def one(n: int) -> None:
            try:
                result = await r.run(f'Summarise this: {"solar power " * 70_000} ({n})')
                outcomes.append(result.status)
            except BudgetExceededError as exc:
                outcomes.append('refused')
                assert exc.cap_usd == cap and exc.estimate_usd > cap - exc.spent_usd
                assert 'input' in str(exc) and 'tokens' in str(exc)  # the numbers behind the estimate

        async with anyio.create_task_group() as tg:
            for n in range(5):
                tg.start_soon(one, n)
        await r.flush()
    assert len(outcomes) == 5
    assert await spent(target) <= cap + EPSILON_USD  # was $0.226, 4.5x the cap


async def test_a_900_kb_query_under_a_1_cent_cap_is_refused_before_anything_starts(
    emulator: Emulator, target: str
) -> None:
    async with researcher(emulator, target, 0.01, effort='fast') as r:
        with pytest.raises(BudgetExceededError) as refused:
            await r.run('x' * 900_000)
    assert refused.value.estimate_usd >= reservation('x' * 900_000, {'effort': 'fast'}).bound_usd - 0.01
    assert [q for q in emulator.requests if q.method == 'POST'] == []  # was: started, and recorded $0.050
    assert await spent(target) == 0.0


async def test_a_dear_model_long_instructions_and_ten_fetched_pages_are_priced_in(
    emulator: Emulator, target: str
) -> None:
    options: dict[str, Any] = {
        'effort': 'fast',
        'model': 'openai/gpt-5.5',
        'instructions': 'Be thorough. ' * 16_000,  # about 200k characters
        'fetch_pages': 10,
    }
    async with researcher(emulator, target, 0.10) as r:
        with pytest.raises(BudgetExceededError, match=r'openai/gpt-5\.5'):
            await r.run('What is solar power?', **options)  # was: admitted at $0.01, recorded $0.096
    assert await spent(target) == 0.0
    # The prompt is read by every model call (two for one step), and ten pages per fetch each put up to a page's
    # ceiling in the context: about $2.42 at gpt-5.5's live $5/$30 per 1M tokens.
    async with researcher(emulator, target, 3.00) as r:
        result = await r.run('What is solar power?', **options)
        await r.flush()
        assert r.ledger is not None
        record = r.ledger.get(result.response_id)
    assert record is not None and record.cost_usd is not None and result.cost_usd is not None
    assert record.cost_usd <= 3.00 and await spent(target) <= 3.00 + EPSILON_USD


async def test_a_request_is_tightened_to_fit_what_is_left_and_the_api_gets_the_limits(
    emulator: Emulator, target: str
) -> None:
    bodies = Bodies()
    cap = 1.00
    assert reservation('How do heat pumps work?', {'effort': 'medium'}).usd > cap
    async with researcher(emulator, target, cap, bodies, effort='medium', wait_seconds=30, on_budget='tighten') as r:
        result = await r.run('How do heat pumps work?')
        await r.flush()
    assert result.status == 'completed'
    (body,) = bodies.creates
    tightened = fit('How do heat pumps work?', {'effort': 'medium'}, cap)
    assert tightened.fits and tightened.changes
    assert result.tightened == tightened.changes  # the result says what was lowered, from what to what
    for name in ('max_steps', 'max_output_tokens', 'max_tool_calls'):  # the limits assumed are sent, so they hold
        assert body.get(name) == tightened.request.get(name)
    assert await spent(target) <= cap + EPSILON_USD


# --- at random ------------------------------------------------------------------------------------------------------

# Models the live `/v1/models` listed on 2026-10-09 (`xai/grok-4-1-fast-non-reasoning` no longer is).
MODELS = [None, 'openai/gpt-5.5', 'openai/gpt-5.4', 'perplexity/sonar', 'openai/gpt-6-luna']


def hostile_options(rnd: random.Random) -> tuple[str, dict[str, Any]]:
    query = 'What is solar power? ' + rnd.choice(['', 'é' * 2_000, 'x' * 60_000, '日本' * 40_000])
    options: dict[str, Any] = {'effort': rnd.choice(['fast', 'fast', 'low', 'medium', 'high'])}
    if model := rnd.choice(MODELS):
        options['model'] = model
    if rnd.random() < 0.3:
        options['instructions'] = 'Cite primary sources. ' * rnd.choice([10, 2_000, 9_000])
    if rnd.random() < 0.3:
        options['fetch_pages'] = rnd.randint(1, 10)
    if rnd.random() < 0.2:
        options['max_steps'] = rnd.randint(1, 12)
    if rnd.random() < 0.2:
        options['max_output_tokens'] = rnd.choice([16, 500, 4_000])
    return query, options


@pytest.mark.slow
@pytest.mark.parametrize('seed', [1, 2, 3, 4])
async def test_random_requests_at_random_concurrency_never_spend_over_the_cap(
    emulator: Emulator, target: str, seed: int
) -> None:
    rnd = random.Random(seed)
    cap = rnd.choice([0.5, 3.0, 15.0])  # live prices: a short `fast` run is reserved at about $0.22
    over: list[tuple[float, float]] = []
    admitted: list[float] = []
    refused: list[str] = []
    cancelled: list[str] = []
    async with researcher(emulator, target, cap, wait_seconds=30) as r:
        for round_ in range(4):  # rounds of concurrent runs, as callers arrive in bursts
            width = rnd.randint(2, 6)

            async def one(query: str, options: dict[str, Any], fate: str) -> None:
                if fate == 'surrogate':  # unsendable text: refused before anything is reserved
                    with pytest.raises(InvalidArgumentError, match='lone surrogate'):
                        await r.run(query + ' \udcff', **options)
                    return
                if fate in ('cancel', 'wait_for'):  # the caller gives up while the create is in flight
                    slowed = f'{query} [[emulate: slow=0.3]]'
                    try:
                        if fate == 'cancel':
                            with anyio.move_on_after(0.05):
                                await r.run(slowed, **options)
                        else:
                            with contextlib.suppress(TimeoutError):
                                await asyncio.wait_for(r.run(slowed, **options), timeout=0.05)
                    except BudgetExceededError:
                        refused.append(options['effort'])
                        return
                    cancelled.append(fate)
                    return
                try:
                    result = await r.run(query, **options)
                except BudgetExceededError:
                    refused.append(options['effort'])
                    return
                admitted.append(result.cost_usd or 0.0)
                bound = reservation(query, {**options, 'effort': options['effort']}).bound_usd
                if result.cost_usd is not None and result.cost_usd > bound:
                    over.append((result.cost_usd, bound))

            async with anyio.create_task_group() as tg:
                if round_ < 3:
                    for _ in range(width):
                        tg.start_soon(one, *hostile_options(rnd), 'run')
                else:  # callers that give up while their create is in flight, and text that cannot be sent
                    for fate in ('cancel', 'wait_for', 'surrogate'):
                        tg.start_soon(one, 'What is solar power?', {'effort': 'fast'}, fate)
            await r.flush()
            assert await spent(target) <= cap + EPSILON_USD
            # Nothing lost, nothing phantom: every create the API answered is bound to its id, no reservation is left.
            with Ledger(target) as ledger:
                rows = ledger.list(limit=1000)
            answered = sum(
                1 for q in emulator.requests if q.method == 'POST' and q.path == '/v1/agent' and q.status == 200
            )
            assert [row.status for row in rows if not row.response_id.startswith('resp_')] == []
            assert len(rows) == answered
    assert over == []  # the emulator never bills a run above its reservation: the guarantee's premise
    assert admitted and refused  # both sides of the cap were exercised
    assert sorted(cancelled) == ['cancel', 'wait_for']  # and callers that gave up mid-create


# --- emulated is never real -----------------------------------------------------------------------------------------


async def test_runs_record_their_api_and_emulated_runs_do_not_use_up_the_real_budget(
    emulator: Emulator, target: str
) -> None:
    async with researcher(emulator, target, None, effort='fast') as r:
        result = await r.run('What is solar power?')
        await r.flush()
        assert r.client.emulated is True and r.client.api == emulator.base_url.split('://')[1]
    assert EMULATOR_HEADER == 'x-pplx-emulator'
    with Ledger(target) as ledger:
        record = ledger.get(result.response_id)
        assert record is not None and record.emulated and record.api == r.client.api
        ledger.record_start(RunRecord(query='canned', origin='cli', emulated=True, estimate_usd=1.00))
        assert ledger.spent_usd(emulated=False) == 0.0 and ledger.spent_usd(emulated=True) > 1.0
        # A real run under a $0.10 cap is not refused for the emulator's "$1.00 already spent"...
        token = ledger.reserve(RunRecord(query='real', origin='cli', estimate_usd=0.05), cap_usd=0.10)
        # ...while an emulated one is checked against everything.
        with pytest.raises(BudgetExceededError):
            ledger.reserve(RunRecord(query='canned', origin='cli', emulated=True, estimate_usd=0.01), cap_usd=0.10)
        ledger.release(token)


# --- reconcile ------------------------------------------------------------------------------------------------------


async def test_a_run_left_queued_ends_with_its_real_cost_once_reconciled(emulator: Emulator, target: str) -> None:
    async with researcher(emulator, target, None, effort='fast') as r:
        started = await r.start('What is solar power?')  # and never collected: Ctrl-C, a client that left
        await r.flush()
        assert r.ledger is not None
        before = r.ledger.get(started.response_id)
        assert before is not None and before.status == 'queued' and before.cost_usd is None
        with anyio.fail_after(30):
            while (await r.client.retrieve(started.response_id)).status != 'completed':
                await anyio.sleep(0.05)
        updated = await reconcile(r.ledger, r.client)
        after = r.ledger.get(started.response_id)
    assert set(updated) == {started.response_id}
    assert after is not None and after.status == 'completed' and after.cost_usd is not None and after.cost_usd > 0
    assert after.cost_usd != before.estimate_usd  # the actual cost replaced the reservation


async def test_a_run_is_found_by_the_callers_json_rpc_request_id(target: str) -> None:
    with Ledger(target) as ledger:
        ledger.record_start(RunRecord(response_id='resp_a', query='q', origin='mcp', caller='alice', request_id='7'))
        ledger.record_start(RunRecord(response_id='resp_b', query='q', origin='mcp', caller='bob', request_id='7'))
        found = ledger.find_by_request('alice', 7)
        assert found is not None and found.response_id == 'resp_a'
        assert ledger.find_by_request('carol', 7) is None
        assert [r.response_id for r in ledger.list(caller='bob')] == ['resp_b']


# --- the price table ------------------------------------------------------------------------------------------------


def test_text_is_counted_at_a_token_per_byte_so_no_text_is_undercounted() -> None:
    assert text_tokens('abcd') == 4 and text_tokens('é') == 2 and text_tokens('日本') == 6
    small = reservation('q', {'effort': 'fast'})
    big = reservation('q' * 100_000, {'effort': 'fast'})
    dearest = PriceTable().dearest().input_per_million
    # One step is two model calls (the step and the answer), each reading the whole question, at the dearest price:
    # the API picks the effort's model.
    assert big.bound_usd - small.bound_usd == pytest.approx(2 * 99_999 * dearest / 1_000_000, abs=1e-5)
    assert small.usd == small.bound_usd > 0.01  # above the effort's floor
    assert reservation('q', {'effort': 'fast', 'model': 'no/such-model'}).bound_usd == small.bound_usd  # dearest
    assert reservation('q', {'effort': 'fast', 'model': 'perplexity/sonar'}).bound_usd < small.bound_usd


def test_the_price_table_can_be_overridden_and_is_checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pydantic_ai_perplexity._base.errors import ConfigurationError
    from pydantic_ai_perplexity._domain.pricing import default_prices

    prices = tmp_path / 'prices.json'
    prices.write_text(json.dumps({'models': {'acme/x': [10, 20]}, 'efforts': {'fast': {'max_steps': 2}}}))
    monkeypatch.setenv('PERPLEXITY_PRICES', str(prices))
    table = default_prices()
    assert table.price('acme/x').output_per_million == 20 and table.bundle('fast').max_steps == 2
    assert reservation('q', {'effort': 'fast'}, table).steps == 2
    for bad in ({'models': {'acme/x': [-1, 2]}}, {'nope': 1}, {'efforts': {'fast': {'max_stpes': 2}}}):
        with pytest.raises(ConfigurationError):
            load_prices(bad)
    monkeypatch.setenv('PERPLEXITY_PRICES', '{not json')
    with pytest.raises(ConfigurationError, match='PERPLEXITY_PRICES'):
        default_prices()


def test_a_finished_run_that_billed_more_raises_the_price_never_lowers_it() -> None:
    table = PriceTable()  # openai/gpt-5.5 at its live $5 / $30
    # Live, input is billed as cache_creation_cost with input_cost 0: the tokens' cost is the total less tool fees.
    usage = {
        'input_tokens': 1_000_000,
        'output_tokens': 0,
        'cost': {'input_cost': 0.0, 'total_cost': 10.5, 'tool_calls_cost': 0.5},
    }
    seen = table.observe('openai/gpt-5.5', usage)
    assert seen is not None and seen.input_per_million == pytest.approx(10.0) and seen.output_per_million == 60.0
    raised = table.with_learned({'openai/gpt-5.5': seen})
    assert raised.price('openai/gpt-5.5') == seen
    cheaper = {'input_tokens': 1_000_000, 'output_tokens': 0, 'cost': {'total_cost': 0.1}}
    assert raised.observe('openai/gpt-5.5', cheaper) is None
    assert raised.with_learned({'openai/gpt-5.5': ModelPrice(1, 1)}).price('openai/gpt-5.5') == seen  # never lowered


async def test_listing_refreshes_a_run_the_ledger_still_shows_as_unfinished(emulator: Emulator, target: str) -> None:
    async with researcher(emulator, target, None, effort='fast') as r:
        started = await r.start('What is solar power?')
        with anyio.fail_after(30):
            while (await r.client.retrieve(started.response_id)).status != 'completed':
                await anyio.sleep(0.05)
        (listed,) = await r.list()
    assert (listed.response_id, listed.status) == (started.response_id, 'completed')
    assert listed.cost_usd is not None and listed.cost_usd > 0


def test_jobs_reconcile_records_how_an_abandoned_run_ended(
    emulator: Emulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from pydantic_ai_perplexity.cli import cli

    monkeypatch.setenv('PERPLEXITY_API_KEY', emulator.api_key)
    monkeypatch.setenv('PERPLEXITY_BASE_URL', emulator.base_url)
    monkeypatch.setenv('PERPLEXITY_STATE_DIR', str(tmp_path))

    async def abandon() -> str:
        async with Researcher(origin='cli', effort='fast') as r:
            started = await r.start('What is solar power?')
            with anyio.fail_after(30):
                while (await r.client.retrieve(started.response_id)).status != 'completed':
                    await anyio.sleep(0.05)
            return started.response_id

    response_id = anyio.run(abandon)
    with Ledger() as ledger:
        before = ledger.get(response_id)
    assert before is not None and before.status == 'queued'
    done = CliRunner().invoke(cli, ['jobs', 'reconcile'])
    assert done.exit_code == 0, done.output
    assert response_id in done.output and 'completed' in done.output
    with Ledger() as ledger:
        after = ledger.get(response_id)
    assert after is not None and after.status == 'completed' and after.cost_usd is not None


def test_a_model_billed_above_the_table_is_priced_higher_for_later_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    from pydantic_ai_perplexity._domain import pricing

    monkeypatch.setattr(pricing, '_observed', {})
    before = reservation('q', {'effort': 'medium'}).bound_usd
    billed = {'input_tokens': 1_000, 'output_tokens': 0, 'cost': {'total_cost': 0.02}}  # $20 per 1M, 4x the table
    pricing.observe_usage('openai/gpt-5.5', billed)
    assert pricing.default_prices().price('openai/gpt-5.5').input_per_million == pytest.approx(20.0)
    # Now the dearest model: an effort's run (the API picks its model) is priced higher too.
    assert reservation('q', {'effort': 'medium'}).bound_usd > before


# --- the request options in the reservation (issue 26) -------------------------------------------------------------


def test_each_request_option_is_priced_from_its_own_terms() -> None:
    from pydantic_ai_perplexity._domain.options import ResearchOptions
    from pydantic_ai_perplexity._domain.pricing import FILE_TOKENS, IMAGE_TOKENS

    table = PriceTable(models={'cheap/a': ModelPrice(1.0, 2.0), 'dear/b': ModelPrice(10.0, 50.0)})

    def held(query: Any = 'What is solar power?', **options: Any) -> Any:
        parsed = ResearchOptions.parse(**options)
        return reservation(parsed.to_input(query if isinstance(query, str) else 'q'), parsed.to_request('fast'), table)

    plain = held(model='cheap/a')
    # Fallback models: priced at the dearest of the list, whichever answers.
    assert held(models=['cheap/a', 'dear/b']).usd == held(model='dear/b').usd > plain.usd
    # Tiers: flex at the listed price (its discount is not counted on), priority and auto at twice the tokens.
    fees = plain.tool_calls * table.search_usd
    assert held(model='cheap/a', service_tier='flex').usd == plain.usd
    assert held(model='cheap/a', service_tier='default').usd == plain.usd
    for tier in ('priority', 'auto'):
        doubled = held(model='cheap/a', service_tier=tier)
        assert doubled.usd == pytest.approx(2 * (plain.bound_usd - fees) + fees, abs=2e-6)
        assert 'tokens at 2x for the service tier' in doubled.describe()
    # Files: content counts a token per byte, a file by URL (size unknown) and an image at their ceilings.
    data = b'x' * 300_000
    with_data = held(model='cheap/a', files=[data])
    assert with_data.input_tokens - plain.input_tokens == (plain.steps + 1) * len(data)
    by_url = held(model='cheap/a', files=['https://files.example/a.pdf'])
    assert by_url.input_tokens - plain.input_tokens == (plain.steps + 1) * FILE_TOKENS
    image = held(model='cheap/a', files=['https://img.example/a.png'])
    assert image.input_tokens - plain.input_tokens == (plain.steps + 1) * IMAGE_TOKENS
    # A reasoning effort is priced at its reasoning ceiling at least (`fast` assumes none); `none` adds nothing.
    assert held(model='cheap/a', reasoning_effort='none').usd == plain.usd
    assert held(model='cheap/a', reasoning_effort='xhigh').output_tokens == plain.output_tokens + 16_384
    assert held(model='cheap/a', effort='high', reasoning_effort='low').output_tokens == (
        held(model='cheap/a', effort='high').output_tokens  # `high` assumes more than `low` asks: never lowered
    )
    # A profile or a cache key changes nothing the bound depends on (the request still sends every limit).
    assert held(model='cheap/a', profile='p1', prompt_cache_key='k').usd == plain.usd


async def test_a_large_file_under_a_small_cap_is_refused_before_anything_is_sent(
    emulator: Emulator, target: str
) -> None:
    async with researcher(emulator, target, 0.05, effort='fast') as r:
        with pytest.raises(BudgetExceededError) as refused:
            await r.run('Summarise this file.', files=[b'solar power ' * 100_000], model='openai/gpt-5.4')
    assert refused.value.estimate_usd > 0.05
    assert [q for q in emulator.requests if q.method == 'POST'] == []
    assert await spent(target) == 0.0


async def test_runs_with_files_tiers_and_fallbacks_are_billed_within_their_reservation(
    emulator: Emulator, target: str
) -> None:
    from pydantic_ai_perplexity._domain.options import ResearchOptions

    cases: list[dict[str, Any]] = [
        {'files': [b'Solar panels convert light into electricity. ' * 2_000], 'model': 'openai/gpt-5.4'},
        {'service_tier': 'priority', 'models': ['openai/gpt-5.4', 'openai/gpt-5.5']},
        {'service_tier': 'flex', 'reasoning_effort': 'high', 'prompt_cache_key': 'k', 'model': 'openai/gpt-5.4'},
        {'service_tier': 'auto', 'files': ['https://files.example/a.pdf'], 'model': 'openai/gpt-6-luna'},
    ]
    cap = 30.0
    async with researcher(emulator, target, cap, effort='fast', wait_seconds=30) as r:
        for options in cases:
            question = 'What is solar power? [[emulate: unavailable]]'
            result = await r.run(question, **options)
            await r.flush()
            assert r.ledger is not None
            record = r.ledger.get(result.response_id)
            parsed = ResearchOptions.parse(**options)
            bound = reservation(parsed.to_input(question), parsed.to_request('fast')).usd
            assert result.status == 'completed' and result.cost_usd is not None
            assert record is not None and record.cost_usd == pytest.approx(result.cost_usd)
            assert result.cost_usd <= bound, (options, result.cost_usd, bound)
    assert await spent(target) <= cap + EPSILON_USD
