"""The parts of `durable/` that need no DBOS worker: errors across a checkpoint, rate limits, trace rejoining."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from pydantic_ai_perplexity import Researcher, durable
from pydantic_ai_perplexity._base.errors import (
    AuthenticationError,
    BudgetExceededError,
    ConfigurationError,
    RateLimitError,
)
from pydantic_ai_perplexity.emulator import Emulator


def test_an_error_crosses_the_checkpoint_with_its_type_and_fields() -> None:
    exc = BudgetExceededError('over the cap', spent_usd=1.5, cap_usd=2.0, estimate_usd=0.75)
    failure = pickle.loads(pickle.dumps(durable._failure(exc)))  # DBOS's default serializer is pickle
    with pytest.raises(BudgetExceededError, match='over the cap') as raised:
        durable._raise(failure)
    assert (raised.value.spent_usd, raised.value.cap_usd, raised.value.estimate_usd) == (1.5, 2.0, 0.75)

    limited = RateLimitError('slow down', retry_after=3.0, method='POST', path='/v1/agent', status_code=429)
    with pytest.raises(RateLimitError) as raised_limit:
        durable._raise(pickle.loads(pickle.dumps(durable._failure(limited))))
    assert raised_limit.value.retry_after == 3.0


@pytest.mark.parametrize('tier', sorted(durable.TIER_LIMITS))
def test_the_queue_rate_limit_keeps_each_tier_under_its_limits(tier: int) -> None:
    per_second, per_minute = durable.TIER_LIMITS[tier]
    limit = durable.rate_limit(tier)
    requests = limit['limit'] * durable.REQUESTS_PER_RUN
    assert limit['limit'] >= 1
    assert requests / limit['period'] <= per_second
    assert requests * 60 / limit['period'] <= per_minute


def test_an_unknown_tier_is_refused_with_the_known_ones() -> None:
    with pytest.raises(ConfigurationError, match=r'\[0, 1, 2, 3, 4\]'):
        durable.rate_limit(9)


def test_a_collection_with_nothing_current_continues_the_trace_of_the_span_that_started_the_run() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer('test')
    with tracer.start_as_current_span('perplexity.research') as research:
        ids = research.get_span_context()
    started: durable._Started = {
        'response_id': 'resp_1',
        'trace_id': format(ids.trace_id, '032x'),
        'span_id': format(ids.span_id, '016x'),
    }
    # A recovered workflow: no span is current.
    with durable._rejoin(started), tracer.start_as_current_span('perplexity.collect'):
        pass
    # A live one: the current span stays the parent.
    with tracer.start_as_current_span('agent run') as live:
        with durable._rejoin(started), tracer.start_as_current_span('perplexity.collect'):
            pass
    collect_after_restart, collect_live = [s for s in exporter.get_finished_spans() if s.name == 'perplexity.collect']
    assert collect_after_restart.context is not None and collect_after_restart.parent is not None
    assert collect_after_restart.context.trace_id == ids.trace_id
    assert collect_after_restart.parent.span_id == ids.span_id
    assert collect_live.parent is not None and collect_live.parent.span_id == live.get_span_context().span_id
    assert not trace.get_current_span().get_span_context().is_valid  # nothing left attached


@pytest.mark.anyio
async def test_outside_a_workflow_durable_research_is_a_plain_call_that_waits_to_the_end(tmp_path: Path) -> None:
    pytest.importorskip('dbos')
    assert not durable.active()
    with Emulator(time_scale=0.01) as emu:
        ledger = tmp_path / 'ledger.sqlite3'
        researcher = Researcher(api_key=emu.api_key, base_url=emu.base_url, ledger=ledger, wait_seconds=0.05)
        result = await durable.durable_research('What is the EU AI Act?', researcher=researcher, effort='low')
    assert result.status == 'completed' and result.answer  # handed off at 0.05 s, collected until it ended


@pytest.mark.slow
@pytest.mark.anyio
async def test_research_many_in_a_workflow_gives_each_question_its_own_steps_in_question_order(tmp_path: Path) -> None:
    """Questions wait for a slot in order (concurrency 2 of 5), so their steps are drawn in question order, as a
    replay draws them, however the runs end."""
    pytest.importorskip('dbos')
    from dbos import DBOS, SetWorkflowID

    from pydantic_ai_perplexity._core.batch import research_many

    questions = [f'What is the EU AI Act? (part {i})' for i in range(5)]
    with Emulator(time_scale=0.01) as emu:
        researcher = Researcher(api_key=emu.api_key, base_url=emu.base_url, ledger=tmp_path / 'ledger.sqlite3')

        @DBOS.workflow(name='test.research_many')
        async def batch(qs: list[str]) -> list[str]:
            # Different efforts, so that runs end in another order than they started.
            items = [{'query': q, 'effort': 'medium' if i % 2 else 'fast'} for i, q in enumerate(qs)]
            return [r.response_id for r in await research_many(items, concurrency=2, researcher=researcher)]

        DBOS(config={'name': 'test-batch', 'system_database_url': f'sqlite:///{tmp_path / "dbos.sqlite3"}'})
        DBOS.launch()
        try:
            with SetWorkflowID('batch-1'):
                ids = await batch(questions)
            steps = await DBOS.list_workflow_steps_async('batch-1')
        finally:
            DBOS.destroy()
    ordered = sorted(steps, key=lambda s: s['function_id'])
    starts = [s['output'] for s in ordered if s['function_name'] == durable.START_STEP]
    assert [s['query_digest'] for s in starts] == [durable._digest(q) for q in questions]
    assert [s['response_id'] for s in starts] == ids
    assert sum(1 for r in emu.requests if r.method == 'POST' and r.path == '/v1/agent') == 5


def _queue(name: str, emu: Emulator, ledger: Path, *, tier: int | None, **settings: Any) -> durable.ResearchQueue:
    """A queue whose workers research on `emu` with `ledger` (and `settings`, e.g. a budget), polling often."""
    return durable.ResearchQueue(
        name,
        tier=tier,
        polling_interval_sec=0.05,
        researcher=lambda: Researcher(api_key=emu.api_key, base_url=emu.base_url, ledger=ledger, **settings),
    )


@pytest.mark.slow
@pytest.mark.anyio
async def test_research_many_on_a_queue_answers_in_order_and_a_budget_refusal_comes_back_failed(
    tmp_path: Path,
) -> None:
    pytest.importorskip('dbos')
    from dbos import DBOS

    from pydantic_ai_perplexity._core.batch import research_many

    with Emulator(time_scale=0.01) as emu:
        ledger = tmp_path / 'ledger.sqlite3'
        # fast fits (about $0.22 reserved), xhigh (about $16) does not.
        queue = _queue('test_queue', emu, ledger, tier=4, budget_usd=0.5)
        rejected = durable.ResearchQueue(
            'test_bad_key',
            tier=None,
            polling_interval_sec=0.05,
            researcher=lambda: Researcher(api_key='pplx-not-the-key', base_url=emu.base_url, ledger=ledger),
        )
        DBOS(config={'name': 'test-queue', 'system_database_url': f'sqlite:///{tmp_path / "dbos.sqlite3"}'})
        DBOS.launch()
        seen: list[int] = []
        try:
            questions = ['What is the EU AI Act?', {'query': 'How do heat pumps work?', 'effort': 'xhigh'}]
            results = await research_many(questions, queue=queue, effort='fast', on_result=lambda i, _: seen.append(i))
            # An error every question would meet is raised once, with its type, as research_many does in process.
            with pytest.raises(AuthenticationError):
                await research_many(['What is the EU AI Act?'], queue=rejected)
        finally:
            DBOS.destroy()
    assert queue.limiter == durable.rate_limit(4)
    assert [r.query for r in results] == ['What is the EU AI Act?', 'How do heat pumps work?']
    assert results[0].status == 'completed' and results[0].answer
    assert results[1].status == 'failed' and results[1].response_id == ''  # xhigh's reservation is over the cap
    assert 'refused by the budget' in (results[1].error or '')
    assert seen == [0, 1]


@pytest.mark.anyio
async def test_a_start_step_run_again_finds_its_run_by_key_and_never_creates_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker killed after the create answered but before DBOS checkpointed the step: the retry finds the run."""
    from datetime import UTC, datetime

    from pydantic_ai_perplexity._domain.options import ResearchOptions
    from pydantic_ai_perplexity._ledger import RESERVED, Ledger, RunRecord

    monkeypatch.setattr(durable, '_step_key', lambda: 'dbos:wf-1:1')
    options = ResearchOptions.parse(None, effort='fast')
    with Emulator(time_scale=0.01) as emu:
        ledger = Ledger(tmp_path / 'ledger.sqlite3')
        async with Researcher(api_key=emu.api_key, base_url=emu.base_url, ledger=ledger) as researcher:
            first = await durable._start_step(researcher, 'What is the EU AI Act?', options, None)
            again = await durable._start_step(researcher, 'What is the EU AI Act?', options, None)
            creates = sum(1 for r in emu.requests if r.method == 'POST' and r.path == '/v1/agent')
            assert 'failure' not in first and again['response_id'] == first['response_id']
            assert creates == 1
            assert ledger.get(first['response_id']).request_id == 'dbos:wf-1:1'  # type: ignore[union-attr]

            # Killed while the create was in flight: a reservation with the key and no run id. Refuse, do not guess.
            monkeypatch.setattr(durable, '_step_key', lambda: 'dbos:wf-2:1')
            now = datetime.now(UTC)
            pending = RunRecord(created_at=now, query='q', origin='api', effort='fast', request_id='dbos:wf-2:1')
            token = ledger.reserve(pending, cap_usd=100)
            assert ledger.get(token).status == RESERVED  # type: ignore[union-attr]
            refused = await durable._start_step(researcher, 'q', options, None)
            assert refused['failure']['type'] == 'RunMayHaveStartedError'
            assert sum(1 for r in emu.requests if r.method == 'POST' and r.path == '/v1/agent') == 1


@pytest.mark.anyio
async def test_in_a_workflow_a_hand_off_and_its_later_collection_are_steps_too(tmp_path: Path) -> None:
    """`Researcher.run` past its wait budget hands off (checkpointed); `Researcher.collect` is one more step."""
    pytest.importorskip('dbos')
    from dbos import DBOS, SetWorkflowID

    with Emulator(time_scale=0.01) as emu:
        researcher = Researcher(api_key=emu.api_key, base_url=emu.base_url, ledger=tmp_path / 'ledger.sqlite3')

        @DBOS.workflow(name='test.hand_off')
        async def hand_off(question: str) -> list[str]:
            first = await researcher.run(question, effort='medium', wait_seconds=0.01)
            later = await researcher.collect(first.response_id, wait_seconds=30)
            return [first.status, later.status, first.response_id, later.response_id]

        DBOS(config={'name': 'test-hand-off', 'system_database_url': f'sqlite:///{tmp_path / "dbos.sqlite3"}'})
        DBOS.launch()
        try:
            with SetWorkflowID('hand-off-1'):
                first_status, later_status, first_id, later_id = await hand_off('What is the EU AI Act?')
            steps = await DBOS.list_workflow_steps_async('hand-off-1')
        finally:
            DBOS.destroy()
    assert first_status in ('queued', 'in_progress') and later_status == 'completed' and first_id == later_id
    names = [s['function_name'] for s in sorted(steps, key=lambda s: s['function_id'])]
    assert names == [durable.START_STEP, durable.COLLECT_STEP, durable.COLLECT_STEP]
    assert sum(1 for r in emu.requests if r.method == 'POST' and r.path == '/v1/agent') == 1


@pytest.mark.slow
@pytest.mark.anyio
async def test_a_batch_id_reused_for_other_questions_is_an_error_never_another_questions_answer(
    tmp_path: Path,
) -> None:
    pytest.importorskip('dbos')
    from dbos import DBOS

    from pydantic_ai_perplexity._base.errors import InvalidArgumentError

    with Emulator(time_scale=0.01) as emu:
        queue = _queue('test_batches', emu, tmp_path / 'ledger.sqlite3', tier=None)
        DBOS(config={'name': 'test-batches', 'system_database_url': f'sqlite:///{tmp_path / "dbos.sqlite3"}'})
        DBOS.launch()
        try:
            first = await queue.research_many(['What is the EU AI Act?', 'How do heat pumps work?'], batch_id='b1')
            creates = sum(1 for r in emu.requests if r.method == 'POST' and r.path == '/v1/agent')
            # The same batch again: the same runs, nothing created.
            again = await queue.research_many(['What is the EU AI Act?', 'How do heat pumps work?'], batch_id='b1')
            # Other questions, another number of them, or other options under that id: refused before anything queues.
            others = [
                (['What is solar power?', 'How do heat pumps work?'], {}),
                (['What is the EU AI Act?'], {}),
                (['What is the EU AI Act?', 'How do heat pumps work?'], {'effort': 'high'}),
            ]
            for questions, options in others:
                with pytest.raises(InvalidArgumentError, match="batch_id 'b1' was already used") as caught:
                    await queue.research_many(questions, batch_id='b1', **options)
                assert caught.value.argument == 'batch_id'
            # A batch whose id merely starts with the other's is its own batch.
            longer = await queue.research_many(['What is solar power?'], batch_id='b1-2')
        finally:
            DBOS.destroy()
    assert [r.status for r in first] == ['completed', 'completed']
    assert [r.response_id for r in again] == [r.response_id for r in first]
    assert creates == 2
    assert sum(1 for r in emu.requests if r.method == 'POST' and r.path == '/v1/agent') == 3
    assert longer[0].query == 'What is solar power?' and longer[0].status == 'completed'
