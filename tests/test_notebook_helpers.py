"""The notebook helpers outside a notebook: live progress, the timeline of a real run, span trees."""

from __future__ import annotations

import io
from typing import Any

import pytest

from pydantic_ai_perplexity import Budget, research
from pydantic_ai_perplexity._domain.timeline import Timeline
from pydantic_ai_perplexity.emulator import Emulator
from pydantic_ai_perplexity.notebook import LiveProgress, SpanRecord, SpanTree, compare_traces

pytestmark = pytest.mark.anyio


async def test_the_timeline_of_a_real_run_has_every_kind_of_step(emulator: Emulator):
    timeline = Timeline('EU AI Act')
    result = await research(
        'What is the EU AI Act? [[emulate: mcp]]',
        effort='medium',
        fetch_pages=2,
        on_progress=timeline,
        api_key=emulator.api_key,
        base_url=emulator.base_url,
    )
    timeline.finish(result)
    kinds = [s.kind for s in timeline.steps]
    assert 'other' not in kinds  # every step the research core reports is understood
    assert {'search', 'results', 'fetch', 'fetched', 'mcp', 'answer'} <= set(kinds)
    bars = timeline.bars()
    assert [b.lane for b in bars if b.lane == 'search'] == ['search'] * result.progress.searches
    assert all(b.start_s <= b.end_s <= timeline.elapsed_s for b in bars)
    assert bars[0].lane == 'run' and bars[0].label == 'completed'
    # In a notebook: inline-styled boxes (kept by an untrusted notebook's sanitizer, unlike SVG), a bar per step.
    page = timeline._repr_html_()
    assert 'class="pplx-timeline' in page and '<svg' not in page and '<style' not in page
    assert page.count('class="pplx-step pplx-search"') == result.progress.searches
    assert 'writing the answer' in page and '<svg' in timeline.to_svg()
    markdown = timeline._repr_markdown_()
    assert markdown.startswith(f'**{timeline.title} · completed**') and '| at | kind | step |' in markdown
    assert markdown.count('\n| ') == len(timeline.steps) + 1  # the header row and a row per step


async def test_live_progress_prints_one_line_per_step_without_a_notebook(emulator: Emulator):
    out = io.StringIO()
    async with LiveProgress('q', file=out) as live:
        result = await research(
            'What is the EU AI Act?',
            effort='low',
            on_progress=live,
            api_key=emulator.api_key,
            base_url=emulator.base_url,
        )
        live.finish(result)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith('  [') and 'searching: What is the EU AI Act?' in lines[0]
    assert len(lines) == len(live.timeline.steps) + 1
    assert lines[-1].startswith('completed in ') and str(live) == lines[-1]


async def test_in_a_notebook_one_display_is_updated_in_place(monkeypatch: pytest.MonkeyPatch):
    import IPython.display

    shown: list[tuple[str, Any]] = []

    class Handle:
        def update(self, obj: Any) -> None:
            shown.append(('update', obj.data))

    def display(obj: Any, display_id: bool = False) -> Handle:
        shown.append(('display', obj.data))
        assert display_id
        return Handle()

    monkeypatch.setattr(IPython.display, 'display', display)
    live = LiveProgress('A question', refresh_s=0)
    live._rich = True  # as in a kernel
    from pydantic_ai_perplexity._domain.steps import Progress, Step

    with live:
        live(
            Step(
                kind='search', detail='searching: a <b> query', queries=('a <b> query',), progress=Progress(searches=1)
            )
        )
        live(Step(kind='results', detail='found 4 results', end=True, progress=Progress(searches=1, results_seen=4)))
    assert [kind for kind, _ in shown] == ['display', 'update', 'update', 'update']
    assert 'searching: a &lt;b&gt; query' in shown[-1][1] and 'done in' in shown[-1][1]


async def test_live_progress_shows_a_budget_warning_above_the_steps(emulator: Emulator, tmp_path: Any):
    out = io.StringIO()
    async with LiveProgress('q', file=out) as live:
        result = await research(
            'What is the EU AI Act?',
            effort='fast',
            on_progress=live,
            on_budget_warning=live.budget_warning,
            budget=Budget(day=1.0, warn_at='$0.000001'),  # crossed by the first run of the day
            ledger=tmp_path / 'ledger.sqlite3',
            api_key=emulator.api_key,
            base_url=emulator.base_url,
        )
        live.finish(result)
    lines = out.getvalue().splitlines()
    assert len(live.warnings) == 1 and live.warnings[0].limit.window == 'day'
    assert lines[0] == f'  ⚠ {live.warnings[0].message}' and 'the daily limit is' in lines[0]
    assert lines[1].startswith('  [') and lines[-1].startswith('completed in ')
    assert 'pplx-budget-warning' in live._repr_html_() and 'the daily limit is' in live._repr_html_()


def _span(name: str, span_id: str, parent: str | None, start: int, end: int, **kw: Any) -> SpanRecord:
    return SpanRecord(name, 'a' * 32, span_id, parent, start, end, kw.pop('service', 'notebook'), 'INTERNAL', **kw)


def test_span_trees_show_nesting_events_and_other_processes():
    spans = [
        _span('pipeline', '1', None, 0, 3_000_000_000),
        _span('execute_tool perplexity_research', '2', '1', 100, 2_000_000_000),
        _span(
            'perplexity.research',
            '3',
            '2',
            200,
            1_900_000_000,
            service='perplexity-mcp',
            remote=True,
            events=[('perplexity.search', 500_000_200)],
        ),
        _span('chat', '4', '1', 2_000_000_000, 2_500_000_000),
    ]
    tree = SpanTree(spans)
    assert tree.names() == ['pipeline', 'execute_tool perplexity_research', 'perplexity.research', 'chat']
    assert str(tree).splitlines() == [
        'pipeline',
        'pipeline                               3.000 s',
        '├─ execute_tool perplexity_research    2.000 s',
        '│  └─ perplexity.research              1.900 s  [perplexity-mcp]',
        '│        · perplexity.search        @  0.500 s  [perplexity-mcp]',
        '└─ chat                                0.500 s',
    ]
    page = compare_traces({'one': tree, 'two': SpanTree([])})._repr_html_()
    assert page.count('<pre') == 2 and '[perplexity-mcp]' in page
