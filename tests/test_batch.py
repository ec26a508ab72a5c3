"""research_many: bounded concurrency, results in order, refusals as results; the table and the spend summary."""

from __future__ import annotations

import re
from pathlib import Path

import anyio
import pytest

from pydantic_ai_perplexity import AuthenticationError, Researcher, ResearchResult
from pydantic_ai_perplexity._core.batch import research_many, results_table, spend_by_effort
from pydantic_ai_perplexity._domain.pricing import reservation
from pydantic_ai_perplexity._ledger import Ledger
from pydantic_ai_perplexity.emulator import Emulator

pytestmark = pytest.mark.anyio


async def test_results_come_back_in_order_with_at_most_concurrency_runs_at_once(emulator: Emulator, tmp_path: Path):
    researcher = Researcher(api_key=emulator.api_key, base_url=emulator.base_url, ledger=tmp_path / 'l.sqlite3')
    in_flight = peak = 0
    real_run = researcher.run

    async def counted(query: str, **options: object) -> ResearchResult:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        try:
            return await real_run(query, **options)  # type: ignore[arg-type]
        finally:
            in_flight -= 1

    researcher.run = counted  # type: ignore[method-assign]
    finished: list[int] = []
    questions = [f'What is the EU AI Act? ({i})' for i in range(7)]
    batch = [*questions[:6], {'query': questions[6], 'effort': 'low'}]
    results = await research_many(
        batch, researcher=researcher, concurrency=3, effort='fast', on_result=lambda i, _: finished.append(i)
    )
    assert [r.query for r in results] == questions
    assert [r.effort for r in results] == ['fast'] * 6 + ['low']
    assert all(r.status == 'completed' and r.response_id for r in results)
    assert peak == 3 and sorted(finished) == list(range(7))


@pytest.mark.slow
async def test_a_budget_refusal_is_a_result_and_the_batch_goes_on(emulator: Emulator, tmp_path: Path):
    ledger = tmp_path / 'l.sqlite3'
    researcher = Researcher(api_key=emulator.api_key, base_url=emulator.base_url, ledger=ledger, budget_usd=0.5)
    batch = [
        {'query': 'What is the EU AI Act?', 'effort': 'fast'},
        {'query': 'A broad survey of heat pumps', 'effort': 'high'},  # reserved at about $4.26: never fits $0.50
        {'query': 'How do heat pumps work?', 'effort': 'fast'},
    ]
    results = await research_many(batch, researcher=researcher, concurrency=1)
    assert [r.status for r in results] == ['completed', 'failed', 'completed']
    refused = results[1]
    assert refused.response_id == '' and refused.error and refused.error.startswith('refused by the budget: ')
    estimate = reservation('A broad survey of heat pumps', {'effort': 'high'}).usd
    assert refused.done and f'refused by the budget: ${estimate:.4f} estimated + ' in refused._repr_html_()
    assert refused.error.count('budget') == 1 and refused.error.endswith('choose a cheaper effort.')

    table = results_table(results)
    assert list(table['status']) == ['completed', 'refused', 'completed']
    assert re.fullmatch(rf'estimate {estimate:.4f} \+ used 0\.\d{{4}} > cap 0\.50 USD', table['error'].iloc[1])
    assert len(table['error'].iloc[1]) <= 50  # pandas shows 50 characters of a cell
    assert table['latency_s'].isna().tolist() == [False, True, False]
    assert table['cost_usd'].iloc[0] == results[0].cost_usd

    with Ledger(ledger) as book:
        spend = spend_by_effort(book)
        assert spend == {'fast': {'runs': 2, 'spent_usd': pytest.approx(book.spent_usd()), 'estimated_usd': 0.0}}


async def test_a_problem_every_question_would_hit_raises_once(emulator: Emulator, tmp_path: Path):
    researcher = Researcher(api_key='pplx-wrong', base_url=emulator.base_url, ledger=tmp_path / 'l.sqlite3')
    with anyio.fail_after(30), pytest.raises(AuthenticationError):
        await research_many([f'q{i}' for i in range(5)], researcher=researcher, concurrency=2, effort='fast')


async def test_without_pandas_the_table_is_a_list_of_dicts(monkeypatch: pytest.MonkeyPatch):
    import sys

    monkeypatch.setitem(sys.modules, 'pandas', None)
    rows = results_table([ResearchResult(response_id='resp_x', status='completed', query='q', effort='fast')])
    assert rows == [
        {
            'query': 'q',
            'effort': 'fast',
            'status': 'completed',
            'cost_usd': None,
            'latency_s': 0.0,
            'sources': 0,
            'cited': 0,
            'searches': 0,
            'pages_fetched': 0,
            'model': None,
            'response_id': 'resp_x',
            'error': None,
        }
    ]


async def test_arguments_are_checked():
    with pytest.raises(ValueError, match='concurrency'):
        await research_many(['q'], concurrency=0)
    with pytest.raises(TypeError, match='query'):
        await research_many([{'effort': 'fast'}])


@pytest.mark.slow
async def test_questions_the_budget_refuses_while_the_batchs_own_runs_hold_it_wait_and_all_finish(
    emulator: Emulator, ledger_target: str
):
    """Eight `medium` questions under a $5 cap: each reservation ($2.79) leaves room for one more at a time, and each
    run costs cents, so all eight fit one after another. Refused while earlier ones hold the budget, a question
    waits for one of them to end and tries again, rather than coming back refused (once 3 of 8)."""
    researcher = Researcher(
        api_key=emulator.api_key, base_url=emulator.base_url, ledger=ledger_target, budget_usd=5.0, wait_seconds=30
    )
    questions = [f'How do heat pumps work? (part {i})' for i in range(8)]
    results = await research_many(questions, researcher=researcher, concurrency=8, effort='medium')
    assert [r.status for r in results] == ['completed'] * 8, [r.error for r in results]
    with Ledger(ledger_target) as ledger:
        rows = ledger.list(limit=20)
        spent = ledger.spent_usd()
    assert sorted(r.response_id for r in rows) == sorted(r.response_id for r in results)
    assert spent <= 5.0


async def test_a_question_that_never_fits_is_still_refused_once_the_batch_has_nothing_in_flight(
    emulator: Emulator, tmp_path: Path
):
    researcher = Researcher(
        api_key=emulator.api_key, base_url=emulator.base_url, ledger=tmp_path / 'l.sqlite3', budget_usd=0.5
    )
    batch = [{'query': f'What is the EU AI Act? ({i})', 'effort': 'fast'} for i in range(3)]
    batch.append({'query': 'A broad survey of heat pumps', 'effort': 'xhigh'})  # more than the whole cap
    with anyio.fail_after(60):  # it must not wait for ever on runs that cannot free enough
        results = await research_many(batch, researcher=researcher, concurrency=4)
    assert [r.status for r in results] == ['completed'] * 3 + ['failed']
    assert (results[3].error or '').startswith('refused by the budget: ')
