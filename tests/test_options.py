"""`ResearchOptions`: one model of the options, checked once, in the project's words, for every way in."""

from __future__ import annotations

import math
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pydantic_ai_perplexity import InvalidArgumentError, PerplexityToolset
from pydantic_ai_perplexity._core.researcher import Researcher
from pydantic_ai_perplexity._domain.options import ResearchOptions, ResearchOptionsDict, check_id, check_wait
from pydantic_ai_perplexity._ledger import Ledger
from pydantic_ai_perplexity.emulator import Emulator
from support.reliability import call_tools, outcome_of, text_of_part

pytestmark = pytest.mark.anyio


def test_the_keywords_and_the_model_name_the_same_options() -> None:
    assert list(ResearchOptionsDict.__annotations__) == list(ResearchOptions.model_fields)


def test_a_misspelt_option_is_refused_by_name() -> None:
    researcher = Researcher(api_key='pplx-test', ledger=False)
    with pytest.raises(InvalidArgumentError) as info:
        researcher.build_request(efort='fast')  # pyright: ignore[reportCallIssue]
    assert info.value.argument == 'efort' and 'Unknown option' in str(info.value) and 'effort' in str(info.value)


@pytest.mark.compat
@pytest.mark.skipif(shutil.which('pyright', path=str(Path(sys.executable).parent)) is None, reason='needs pyright')
def test_a_misspelt_option_is_a_type_error(tmp_path: Path) -> None:
    """Every way to run from Python types its options: a misspelt one or an unknown effort is an error there."""
    source = tmp_path / 'misspelt.py'
    source.write_text(
        'from pydantic_ai_perplexity import research, research_sync\n'
        'from pydantic_ai_perplexity._core.batch import research_many\n'
        'from pydantic_ai_perplexity._core.researcher import Researcher\n\n\n'
        'async def go(r: Researcher) -> None:\n'
        "    await r.run('q', effort='fast', recency='week')\n"
        "    await r.run('q', efort='fast')\n"  # line 8
        "    await r.run('q', effort='lowest')\n"  # 9
        "    await research('q', effort='deep-research', wait_seconds=5, budget_usd=1, previous_response_id='resp_1')\n"
        "    await research('q', recency='weekly')\n"  # 11
        "    await research_many(['q'], effort='low', concurrency=2, wait_seconds=5)\n"
        "    await research_many(['q'], efort='low')\n"  # 13
        "    r.run_sync('q', effort='high', on_started=print)\n"
        "    research_sync('q', domain=['nature.com'])\n",  # 15
        encoding='utf-8',
    )
    pyright = str(Path(sys.executable).parent / 'pyright')
    done = subprocess.run([pyright, str(source)], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 1, done.stdout
    errors = [line for line in done.stdout.splitlines() if ' - error' in line]
    lines = sorted({int(line.split('misspelt.py:')[1].split(':')[0]) for line in errors})
    assert lines == [8, 9, 11, 13, 15], done.stdout
    assert all(word in done.stdout for word in ('efort', 'lowest', 'weekly', 'domain')), done.stdout


@pytest.mark.parametrize(
    ('given', 'argument', 'words'),
    [
        ({'effort': 'deepest'}, 'effort', 'use one of fast, low, medium, high, xhigh'),
        ({'effort': 3}, 'effort', 'effort must be one of fast, low, medium, high, xhigh'),
        ({'fetch_pages': 11}, 'fetch_pages', 'from 1 to 10'),
        ({'fetch_pages': 0}, 'fetch_pages', 'from 1 to 10'),
        ({'max_steps': 101}, 'max_steps', 'from 1 to 100'),
        ({'max_output_tokens': 0}, 'max_output_tokens', '1 or more'),
        ({'recency': 'decade'}, 'recency', 'is not one of hour, day, week, month, year'),
        ({'recency': 'week', 'before': '2026-01-01'}, 'recency', 'cannot be combined'),
        ({'after': '31/01/2026'}, 'after', 'YYYY-MM-DD'),
        ({'domains': ['not a domain']}, 'domains', 'is not a domain'),
        ({'domains': [f'd{i}.com' for i in range(21)]}, 'domains', 'at most 20'),
        ({'model': 'gpt-5'}, 'model', '"provider/model"'),
    ],
)
def test_a_bad_value_reads_in_the_projects_words(given: dict[str, Any], argument: str, words: str) -> None:
    with pytest.raises(InvalidArgumentError) as info:
        ResearchOptions.parse(**given)
    text = str(info.value)
    assert info.value.argument == argument and words in text
    assert 'pydantic' not in text and 'validation error' not in text and 'type=' not in text


def test_normalisation_and_the_wire() -> None:
    options = ResearchOptions.parse(
        effort='Deep-Research', domains='https://www.Nature.com/articles', after='2026-01-31', fetch_pages=True
    )
    assert options.to_request('fast') == {
        'effort': 'medium',
        'tools': [
            {
                'type': 'web_search',
                'filters': {'search_domain_filter': ['nature.com'], 'search_after_date_filter': '01/31/2026'},
            },
            {'type': 'fetch_url', 'max_urls': 5},
        ],
    }
    assert ResearchOptions.parse(fetch_pages=10, max_output_tokens=64).to_request('fast') == {
        'effort': 'fast',
        'max_output_tokens': 64,
        'tools': [{'type': 'fetch_url', 'max_urls': 10}],
    }
    # Keywords win over a given model; unknown keywords are refused, not dropped.
    assert ResearchOptions.parse(ResearchOptions(effort='high'), effort='low').effort == 'low'


@pytest.mark.parametrize('bad', ['x' * 100_000, '', '   ', 'resp_\x00abc', 'resp_\ud800', 'resp_\u202e', 42])
def test_a_bad_response_id_is_refused_clearly(bad: Any) -> None:
    with pytest.raises(InvalidArgumentError) as info:
        check_id(bad)
    assert info.value.argument == 'response_id' and len(str(info.value)) < 300


@pytest.mark.parametrize('bad', [math.nan, math.inf, -math.inf, -1, 'Infinity', 'nan', '1e400', True, 'soon'])
def test_a_bad_wait_is_refused_clearly(bad: Any) -> None:
    with pytest.raises(InvalidArgumentError, match=r'wait_seconds=.* is not a number of seconds'):
        check_wait(bad, cap=55)


def test_a_wait_is_capped_at_the_budget_of_the_way_in() -> None:
    assert check_wait(1e300, cap=55) == 55 and check_wait('3', cap=55) == 3.0 and check_wait(None, cap=55) is None


# -- through the toolset ------------------------------------------------------------------------------------------


@pytest.mark.parametrize('wait', [math.nan, math.inf, 'Infinity', -5])
async def test_the_toolset_asks_the_model_to_fix_a_bad_wait(emulator: Emulator, wait: Any) -> None:
    toolset = PerplexityToolset(api_key=emulator.api_key, base_url=emulator.base_url, wait_seconds=5)
    [part] = await call_tools(
        toolset, [('perplexity_research_result', {'response_id': 'resp_x', 'wait_seconds': wait})]
    )
    text = text_of_part(part)
    assert outcome_of(part) == 'retry' and 'wait_seconds' in text and 'finite' in text, text
    assert not [r for r in emulator.requests if '/v1/agent/' in r.path]  # refused before any request


async def test_a_huge_wait_is_capped_at_the_toolsets_budget(emulator: Emulator) -> None:
    toolset = PerplexityToolset(api_key=emulator.api_key, base_url=emulator.base_url, wait_seconds=0.05)
    async with toolset:
        started = await toolset.researcher.start('A broad survey [[emulate: duration=2000]]', effort='high')
        [part] = await call_tools(
            toolset, [('perplexity_research_result', {'response_id': started.response_id, 'wait_seconds': 1e300})]
        )
        assert outcome_of(part) == 'success' and 'still going' in text_of_part(part)
        await toolset.researcher.cancel(started.response_id)


async def test_a_100000_character_id_through_the_toolset_is_a_retry_prompt(emulator: Emulator) -> None:
    toolset = PerplexityToolset(api_key=emulator.api_key, base_url=emulator.base_url)
    parts = await call_tools(
        toolset,
        [
            ('perplexity_research_result', {'response_id': 'r' * 100_000}),
            ('perplexity_research_cancel', {'response_id': 'r' * 100_000}),
        ],
    )
    for part in parts:
        text = text_of_part(part)
        assert outcome_of(part) == 'retry' and 'response_id is 100000 characters long' in text and len(text) < 400


# -- durability in the core: the id is in the ledger before any waiting -------------------------------------------


async def test_the_runs_id_is_in_the_ledger_before_the_wait_starts(emulator: Emulator, tmp_path: Path) -> None:
    path = tmp_path / 'ledger.sqlite3'
    seen: list[tuple[str, str | None]] = []

    def on_started(response_id: str) -> None:
        other = Ledger(path)  # another connection, as another process would read it
        try:
            record = other.get(response_id)
        finally:
            other.close()
        seen.append((response_id, record.status if record else None))

    async with Researcher(api_key=emulator.api_key, base_url=emulator.base_url, ledger=path) as r:
        result = await r.run('What is the EU AI Act?', effort='fast', on_started=on_started)
    assert result.done and seen == [(result.response_id, 'queued')]


async def test_through_the_toolset_the_id_is_recorded_before_the_first_step(emulator: Emulator, tmp_path: Path) -> None:
    from pydantic_ai import Agent

    from pydantic_ai_perplexity import ResearchProgress
    from pydantic_ai_perplexity.testing import scripted_research_model

    path = tmp_path / 'ledger.sqlite3'
    toolset = PerplexityToolset(api_key=emulator.api_key, base_url=emulator.base_url, ledger=path, effort='high')
    at_first_step: list[list[str]] = []

    async def handler(_: Any, events: Any) -> None:
        async for event in events:
            if isinstance(event, ResearchProgress) and not at_first_step:
                other = Ledger(path)  # another connection, as another process would read it
                try:
                    at_first_step.append([r.status for r in other.list() if r.response_id])
                finally:
                    other.close()

    agent = Agent(scripted_research_model(), toolsets=[toolset])
    await agent.run('A survey of fusion pilot plants [[emulate: duration=300]]', event_stream_handler=handler)
    assert at_first_step in ([['queued']], [['in_progress']])


def test_the_docs_table_is_made_from_the_model() -> None:
    from pydantic_ai_perplexity._domain.options import options_table

    docs = Path(__file__).parents[1] / 'docs' / 'options.md'
    assert docs.read_text(encoding='utf-8') == options_table(), (
        'docs/options.md is stale: run `python -m pydantic_ai_perplexity._domain.options > docs/options.md`'
    )


def test_the_cli_offers_each_option_with_its_limits() -> None:
    from click.testing import CliRunner

    from pydantic_ai_perplexity._domain.options import option_fields
    from pydantic_ai_perplexity.cli import cli

    shown = CliRunner().invoke(cli, ['research', '--help'], terminal_width=200).output
    for _, opt in option_fields().values():
        if opt.cli:
            assert opt.cli in shown
    assert '[1<=x<=10]' in shown and '[1<=x<=100]' in shown
    for args, words in [
        (['--fetch-pages', '11'], '11 is not in the range 1<=x<=10'),
        (['--effort', 'deepest'], "'deepest' is not one of"),
        (['--after', '2026-13-01'], 'is not a date'),
        (['--budget', 'nan'], 'is not a budget'),
        (['--budget', '-1'], 'is not a budget'),
    ]:
        result = CliRunner().invoke(cli, ['research', 'q', *args])
        assert result.exit_code == 2 and words in result.output, result.output


async def test_language_goes_from_each_way_in_to_the_wire(emulator: Emulator) -> None:
    import json

    import httpx2
    from click.testing import CliRunner

    from pydantic_ai_perplexity._core.tool_spec import TOOLS
    from pydantic_ai_perplexity.cli import cli

    bodies: list[dict[str, Any]] = []

    async def keep(request: httpx2.Request) -> None:
        if request.method == 'POST' and request.url.path.endswith('/v1/agent'):
            bodies.append(json.loads(request.content))

    async with httpx2.AsyncClient(event_hooks={'request': [keep]}) as http:
        toolset = PerplexityToolset(api_key=emulator.api_key, base_url=emulator.base_url, http_client=http)
        [part] = await call_tools(
            toolset, [('perplexity_research', {'query': 'What is the EU AI Act?', 'language': 'DE'})]
        )
        [bad] = await call_tools(toolset, [('perplexity_research', {'query': 'q', 'language': 'German'})])
    assert outcome_of(part) == 'success' and [b.get('language_preference') for b in bodies] == ['de']
    assert outcome_of(bad) == 'retry' and 'two-letter ISO 639-1 code' in text_of_part(bad)
    assert 'language' in TOOLS[0].schema['properties']
    assert '--language' in CliRunner().invoke(cli, ['research', '--help']).output
