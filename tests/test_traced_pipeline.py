"""agents/traced_pipeline.py: plan, parallel research with hand-offs, a cited report, all in one trace."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest
from logfire.testing import CaptureLogfire

pytestmark = pytest.mark.anyio


def load_pipeline() -> ModuleType:
    path = Path(__file__).parents[1] / 'agents' / 'traced_pipeline.py'
    spec = importlib.util.spec_from_file_location('traced_pipeline', path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules['traced_pipeline'] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
async def test_the_pipeline_writes_a_cited_report_in_one_trace(
    capfire: CaptureLogfire, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    monkeypatch.setenv('PERPLEXITY_EMULATOR_TIME_SCALE', '0.005')  # a `high` run takes 1.2 s
    pipeline = load_pipeline()
    report = await pipeline.main('How is the EU regulating general-purpose AI?', wait_seconds=0.3)

    # The report cites only sources the research found, and accounts for every run.
    assert len(report.runs) == 3 and report.cost_usd > 0
    numbers = {s.n for s in report.sources}
    text = ' '.join([report.summary, *(s.text for s in report.sections)])
    cited = {int(n) for n in re.findall(r'\[(\d+)\]', text)}
    assert cited and cited <= numbers == set(range(1, len(report.sources) + 1))
    markdown = report.to_markdown()
    assert markdown.startswith('# How is the EU regulating') and all(s.url in markdown for s in report.sources)

    # One trace: the root span holds the planner, every research run and collection, and the writer.
    spans = capfire.exporter.exported_spans_as_dict()
    [root] = [s for s in spans if s['name'] == 'research pipeline']
    assert {s['context']['trace_id'] for s in spans} == {root['context']['trace_id']}
    children = [s['name'] for s in spans if s['parent'] and s['parent']['span_id'] == root['context']['span_id']]
    assert children.count('perplexity.research') == 3
    assert {'invoke_agent planner', 'invoke_agent writer'} <= set(children)
    collects = [s for s in spans if s['name'] == 'perplexity.collect']
    assert len(collects) > 3  # at least one run was handed off and collected again
    started = {s['context']['span_id'] for s in spans if s['name'] == 'perplexity.research'}
    assert all(link['context']['span_id'] in started for c in collects for link in c.get('links', []))
    assert root['attributes']['pipeline.runs'] == 3 and root['attributes']['pipeline.cost_usd'] == report.cost_usd

    # Progress went to stderr, said in plain words.
    err = capsys.readouterr().err
    assert 'built-in emulator' in err and 'still going, handed off' in err
