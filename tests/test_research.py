"""The research core against the emulator: runs, hand-offs, collection, cancel, budget, ledger, options."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import anyio
import pytest
from pydantic import BaseModel

from pydantic_ai_perplexity import (
    BudgetExceededError,
    ConfigurationError,
    InternalServerError,
    InvalidArgumentError,
    Ledger,
    Progress,
    Researcher,
    ResearchResult,
    research,
)
from pydantic_ai_perplexity._domain.pricing import reservation
from pydantic_ai_perplexity._domain.steps import Step
from pydantic_ai_perplexity.emulator import Emulator

pytestmark = pytest.mark.anyio


def researcher_for(emu: Emulator, **kw: object) -> Researcher:
    return Researcher(api_key=emu.api_key, base_url=emu.base_url, **kw)  # type: ignore[arg-type]


async def test_a_run_completes_with_cited_sources_and_is_recorded_with_its_cost(emulator: Emulator):
    async with researcher_for(emulator, effort='fast') as r:
        result = await r.run('What is the EU AI Act?')
        assert result.done and result.status == 'completed'
        assert result.answer and result.sources and result.citations
        assert all(c.source_n is not None for c in result.citations)
        assert result.orphan_markers == []
        assert result.cost_usd is not None and result.cost_usd > 0
        assert result.effort == 'fast' and result.model and '/' in result.model
        await r.flush()  # ledger writes land off the research call's path
        record = r.ledger.get(result.response_id) if r.ledger else None
    assert record is not None
    assert record.status == 'completed' and record.origin == 'api' and record.query == 'What is the EU AI Act?'
    assert record.cost_usd == pytest.approx(result.cost_usd)
    assert record.sources == len(result.sources) and record.cited == len(result.cited_sources)


async def test_progress_is_reported_step_by_step(emulator: Emulator):
    steps: list[str] = []
    snapshots: list[Progress] = []
    run_ids: set[str | None] = set()

    async def on_progress(step: Step) -> None:
        steps.append(step.detail)
        snapshots.append(step.progress)
        run_ids.add(step.response_id)

    async with researcher_for(emulator, effort='low') as r:
        result = await r.run('How do solid-state batteries work?', on_progress=on_progress)
    assert result.done
    assert any(s.startswith('searching') for s in steps)
    assert 'writing the answer' in steps
    assert snapshots[-1].searches >= 1 and snapshots[-1].results_seen >= 1
    assert result.progress.searches == snapshots[-1].searches
    assert run_ids == {result.response_id}  # every step names its run


async def test_a_long_run_hands_off_and_is_collected_later_by_another_researcher(emulator: Emulator, tmp_path: Path):
    ledger_path = tmp_path / 'shared.sqlite3'
    async with researcher_for(emulator, ledger=ledger_path, wait_seconds=0.05) as first:
        handoff = await first.run('Survey of heat pumps in Europe [[emulate: duration=200]]', effort='high')
    assert not handoff.done and handoff.status in ('queued', 'in_progress')
    assert handoff.response_id.startswith('resp_')
    async with researcher_for(emulator, ledger=ledger_path, wait_seconds=30) as second:
        listed = await second.list()
        assert [rec.response_id for rec in listed] == [handoff.response_id]
        result = await second.collect(handoff.response_id)
    assert result.done and result.status == 'completed' and result.sources
    assert result.query == 'Survey of heat pumps in Europe [[emulate: duration=200]]'
    with Ledger(ledger_path) as ledger:
        record = ledger.get(handoff.response_id)
    assert record is not None and record.status == 'completed'


async def test_cancel_stops_a_run_and_the_ledger_says_so(emulator: Emulator):
    async with researcher_for(emulator) as r:
        started = await r.start('A long survey [[emulate: duration=5000]]', effort='xhigh')
        assert not started.done
        cancelled = await r.cancel(started.response_id)
        assert cancelled.status == 'cancelled'
        again = await r.cancel(started.response_id)  # already terminal: reports how it ended
        assert again.status == 'cancelled'
        await r.flush()
        record = r.ledger.get(started.response_id) if r.ledger else None
    assert record is not None and record.status == 'cancelled'


async def test_a_failed_run_is_a_result_not_an_exception(emulator: Emulator):
    async with researcher_for(emulator, effort='fast') as r:
        result = await r.run('Anything [[emulate: fail]]')
        await r.flush()  # ledger writes land off the research call's path
        record = r.ledger.get(result.response_id) if r.ledger else None
    assert result.done and result.status == 'failed' and result.error
    assert record is not None and record.status == 'failed' and record.error == result.error


async def test_the_budget_refuses_a_run_before_it_starts(emulator: Emulator):
    async with researcher_for(emulator, budget_usd=0.05) as r:
        with pytest.raises(BudgetExceededError) as info:
            await r.run('Expensive question', effort='xhigh')
    message = str(info.value)
    assert 'spent' in message and '0.05' in message and 'PERPLEXITY_BUDGET_USD' in message
    assert info.value.cap_usd == 0.05 and info.value.estimate_usd > 0.05
    assert [req for req in emulator.requests if req.method == 'POST'] == []


async def test_spend_accumulates_until_the_cap_refuses(emulator: Emulator):
    # Room for one reservation and a tenth of a cent: once the first run's actual cost replaces its reservation,
    # the next reservation no longer fits.
    cap = reservation('First question', {'effort': 'fast'}).usd + 0.001
    async with researcher_for(emulator, effort='fast', budget_usd=cap) as r:
        first = await r.run('First question')
        assert first.done and first.cost_usd is not None
        refused = 0
        for _ in range(40):  # a live-priced fast run costs about $0.001: the cap takes a score of them
            try:
                await r.run('Another question')
            except BudgetExceededError:
                refused += 1
                break
        assert refused == 1
        await r.flush()
        assert r.ledger is not None and r.ledger.spent_usd() <= cap


async def test_a_create_that_may_have_started_keeps_its_budget_reservation(emulator: Emulator):
    async with researcher_for(emulator, budget_usd=10) as r:
        with pytest.raises(InternalServerError, match='may have started'):
            await r.run('Question [[emulate: 500x1]]', effort='medium')
        await r.flush()
        assert r.ledger is not None and r.ledger.spent_usd() > 0
    posts = [req for req in emulator.requests if req.method == 'POST']
    assert len(posts) == 1


async def test_structured_output_is_parsed_into_the_requested_type(emulator: Emulator):
    class Finding(BaseModel):
        claim: str
        confidence: float

    class Report(BaseModel):
        title: str
        findings: list[Finding]

    async with researcher_for(emulator, effort='fast') as r:
        result = await r.run('Summarise the EU AI Act', output_type=Report)
    assert result.done
    assert isinstance(result.data, Report) and result.data.findings


def test_options_are_checked_and_translated_before_anything_is_sent():
    r = Researcher(api_key='pplx-test', ledger=False)
    request = r.build_request(
        effort='pro-search',
        domains=['https://www.Nature.com/articles', '-reddit.com'],
        after='2026-01-31',
        before=date(2026, 3, 1),
        fetch_pages=3,
    )
    assert request['effort'] == 'low'
    assert request['tools'] == [
        {
            'type': 'web_search',
            'filters': {
                'search_domain_filter': ['nature.com', '-reddit.com'],
                'search_after_date_filter': '01/31/2026',
                'search_before_date_filter': '03/01/2026',
            },
            'max_tokens': 3000,  # the effort's limits ride along (pricing.limit_request)
            'max_tokens_per_page': 1000,
        },
        {'type': 'fetch_url', 'max_urls': 3},
    ]
    assert (request['max_steps'], request['max_output_tokens'], request['max_tool_calls']) == (3, 4096, 3)
    bad = [
        {'effort': 'ultra'},
        {'domains': ['not a domain']},
        {'after': 'last tuesday'},
        {'recency': 'decade'},
        {'recency': 'week', 'after': '2026-01-01'},
        {'model': 'gpt-5'},
        {'max_steps': 0},
    ]
    for options in bad:
        with pytest.raises(InvalidArgumentError) as info:
            r.build_request(**options)  # type: ignore[arg-type]
        assert info.value.argument in options or info.value.argument == 'recency'


def test_settings_come_from_the_environment_at_construction(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv('PERPLEXITY_EFFORT', 'high')
    monkeypatch.setenv('PERPLEXITY_WAIT_SECONDS', '42')
    r = Researcher(api_key='pplx-test', ledger=False)
    assert (r.effort, r.wait_seconds) == ('high', 42.0)
    monkeypatch.setenv('PERPLEXITY_WAIT_SECONDS', 'soon')
    with pytest.raises(ConfigurationError, match='PERPLEXITY_WAIT_SECONDS'):
        Researcher(api_key='pplx-test', ledger=False)
    monkeypatch.setenv('PERPLEXITY_WAIT_SECONDS', '1')
    with pytest.raises(ConfigurationError, match='budget'):
        Researcher(api_key='pplx-test', ledger=False, budget_usd=1)


async def test_concurrent_runs_share_one_client(emulator: Emulator):
    async with researcher_for(emulator, effort='fast') as r:
        client = r.client
        results = []

        async def one(i: int) -> None:
            results.append(await r.run(f'Question number {i} about batteries'))

        async with anyio.create_task_group() as tg:
            for i in range(12):
                tg.start_soon(one, i)
        assert r.client is client
    assert len(results) == 12 and all(res.status == 'completed' for res in results)
    assert len({res.response_id for res in results}) == 12


async def test_research_one_liner_reads_the_environment(emulator_env: Emulator):
    result = await research('What is the EU AI Act?', effort='fast')
    assert result.done and result.sources


async def test_search_returns_ranked_pages(emulator: Emulator):
    async with researcher_for(emulator) as r:
        response = await r.search('EU AI Act', max_results=3, domains=['europa.eu'])
    assert 0 < len(response.results) <= 3
    assert all(res.url for res in response.results)


async def test_a_key_pasted_into_a_question_is_never_stored_in_the_ledger(emulator: Emulator):
    async with researcher_for(emulator, effort='fast') as r:
        result = await r.run(f'Is my key {emulator.api_key} valid?')
        await r.flush()
        record = r.ledger.get(result.response_id) if r.ledger else None
    assert record is not None and emulator.api_key not in record.query
    assert record.query == 'Is my key [redacted] valid?'


async def test_every_result_an_emulator_answers_is_marked_emulated(emulator: Emulator, tmp_path: Path):
    ledger_path = tmp_path / 'emulated.sqlite3'
    async with researcher_for(emulator, ledger=ledger_path, effort='fast', wait_seconds=0.05) as r:
        finished = await r.run('What is the EU AI Act?', wait_seconds=30)
        handoff = await r.run('Survey of heat pumps in Europe [[emulate: duration=200]]', effort='high')
        started = await r.start('A long survey [[emulate: duration=5000]]', effort='xhigh')
    assert finished.done and not handoff.done and not started.done
    async with researcher_for(emulator, ledger=ledger_path, wait_seconds=30) as fresh:  # knows only what it is told
        collected = await fresh.collect(handoff.response_id)
        cancelled = await fresh.cancel(started.response_id)
    assert collected.done and cancelled.status == 'cancelled'
    for result in (finished, handoff, started, collected, cancelled):
        assert result.emulated is True, result.response_id
        assert ResearchResult.model_validate_json(result.model_dump_json()).emulated is True


async def test_a_replayed_recording_is_still_marked_emulated(tmp_path: Path):
    recordings = Path(__file__).parent / 'emulator' / 'recordings'
    with Emulator(replay=recordings, time_scale=0.002) as replayer:
        async with researcher_for(replayer, effort='fast', ledger=tmp_path / 'l.db') as r:
            result = await r.run('What is the EU AI Act?')
            assert r.client.emulated is True
            await r.flush()
            record = r.ledger.get(result.response_id) if r.ledger else None
    assert result.status == 'completed' and result.sources
    assert result.emulated is True
    assert record is not None and record.emulated is True


@pytest.mark.slow
async def test_a_polled_run_reports_the_steps_its_running_snapshots_show(tmp_path: Path):
    """Live fact: cfdude/mcp-perplexity-pro tests/fixtures/agent_background_in_progress.json, captured 2026-10-09: a
    running retrieve carries the search and fetch items reached so far. With no stream (it fails here), the wait polls
    and reports those as progress instead of nothing until the end."""
    steps: list[Step] = []
    with Emulator(time_scale=0.005, partial_output=True) as emu:
        async with researcher_for(emu, effort='medium', ledger=tmp_path / 'runs.db') as r:
            result = await r.run(
                'What is the EU AI Act? [[emulate: 500x3@retrieve, duration=1200]]', on_progress=steps.append
            )
        streamed = [q for q in emu.requests if 'stream=true' in q.query]
    assert result.status == 'completed'
    assert len(streamed) == 3  # the stream failed on every try: the wait polled
    details = [s.detail for s in steps]
    assert any(d.startswith('found ') and d.endswith(' results') for d in details), details
    assert steps[-1].progress.searches >= 1 and steps[-1].progress.results_seen > 0
    assert result.progress.searches >= steps[-1].progress.searches  # nothing counted twice or lost at the end


# -- files, fallback models and tiers (issue 26) ---------------------------------------------------------------


class _Creates:
    """Every create body sent, read from the wire."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, object]] = []

    async def __call__(self, request: object) -> None:
        import json

        import httpx2

        assert isinstance(request, httpx2.Request)
        if request.method == 'POST' and request.url.path.endswith('/v1/agent'):
            self.bodies.append(json.loads(request.content))


async def test_a_local_file_is_read_here_sent_as_content_and_cited_in_the_answer(emulator: Emulator, tmp_path: Path):
    import httpx2

    notes = tmp_path / 'notes.md'
    notes.write_text('Field notes. The pilot heat pumps cut household emissions by forty percent.', encoding='utf-8')
    creates = _Creates()
    async with (
        httpx2.AsyncClient(event_hooks={'request': [creates]}) as http,
        researcher_for(emulator, effort='fast', ledger=tmp_path / 'l.sqlite3', http_client=http) as r,
    ):
        result = await r.run('What do my notes say about heat pumps?', files=[notes])
        await r.flush()
        assert r.ledger is not None
        record = r.ledger.get(result.response_id)
    assert result.status == 'completed'
    assert 'From the attached file notes.md: Field notes. The pilot heat pumps cut household emissions' in (
        result.answer or ''
    )
    [body] = creates.bodies
    parts = body['input'][0]['content']  # type: ignore[index]
    assert parts[1]['filename'] == 'notes.md' and 'file_url' not in parts[1]  # the path never leaves this machine
    assert record is not None and record.query == 'What do my notes say about heat pumps?'


async def test_a_fallback_model_answers_when_the_first_is_unavailable(emulator: Emulator):
    async with researcher_for(emulator, effort='fast', ledger=False) as r:
        result = await r.run(
            'What is solar power? [[emulate: unavailable]]', models=['openai/gpt-5.4', 'openai/gpt-5.5']
        )
    assert result.status == 'completed' and result.model == 'openai/gpt-5.5'


async def test_reuse_tells_runs_apart_by_the_files_they_read(emulator: Emulator, tmp_path: Path):
    async with researcher_for(emulator, effort='fast', ledger=tmp_path / 'l.sqlite3', reuse_within=600) as r:
        first = await r.run('What does this say?', files=[b'Solar panels convert light.'])
        same = await r.run('What does this say?', files=[b'Solar panels convert light.'])
        other = await r.run('What does this say?', files=[b'Wind turbines convert wind.'])
    assert same.reused and same.response_id == first.response_id
    assert not other.reused and other.response_id != first.response_id


async def test_a_nightly_batch_runs_at_the_flex_tier(emulator: Emulator, tmp_path: Path):
    import httpx2

    from pydantic_ai_perplexity._core.batch import research_many

    creates = _Creates()
    async with (
        httpx2.AsyncClient(event_hooks={'request': [creates]}) as http,
        researcher_for(emulator, effort='fast', ledger=tmp_path / 'l.sqlite3', http_client=http) as r,
    ):
        results = await research_many(
            ['What is solar power?', 'What is wind power?'], researcher=r, service_tier='flex', concurrency=2
        )
    assert [res.status for res in results] == ['completed', 'completed']
    assert [b['service_tier'] for b in creates.bodies] == ['flex', 'flex']
