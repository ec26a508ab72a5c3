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


@pytest.mark.slow
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


# -- files, fallback models, service tier, profile, reasoning, prompt cache key (issue 26) ----------------------


def test_files_in_every_form_become_parts_of_the_user_message(tmp_path: Path) -> None:
    import base64

    from pydantic_ai_perplexity import ResearchFile

    notes = tmp_path / 'notes.md'
    notes.write_text('Heat pumps cut emissions.', encoding='utf-8')
    png = b'\x89PNG\r\n\x1a\n' + b'\x00' * 8
    options = ResearchOptions.parse(
        files=[
            'https://files.example/report.pdf',
            notes,
            str(notes),
            png,
            'data:application/pdf;base64,' + base64.b64encode(b'%PDF-1.4 x').decode(),
            ResearchFile(url='https://img.example/chart.webp'),
        ]
    )
    [message] = options.to_input('What do they say?')
    assert message['role'] == 'user' and message['content'][0] == {'type': 'input_text', 'text': 'What do they say?'}
    assert message['content'][1:] == [
        {'type': 'input_file', 'file_url': 'https://files.example/report.pdf'},
        {
            'type': 'input_file',
            'file_data': base64.b64encode(b'Heat pumps cut emissions.').decode(),
            'filename': 'notes.md',
        },
        {
            'type': 'input_file',
            'file_data': base64.b64encode(b'Heat pumps cut emissions.').decode(),
            'filename': 'notes.md',
        },
        {'type': 'input_image', 'image_url': 'data:image/png;base64,' + base64.b64encode(png).decode()},
        {'type': 'input_file', 'file_data': base64.b64encode(b'%PDF-1.4 x').decode(), 'filename': 'file.pdf'},
        {'type': 'input_image', 'image_url': 'https://img.example/chart.webp'},
    ]
    assert ResearchOptions.parse().to_input('q') == 'q' and 'input' not in options.to_request('fast')


@pytest.mark.parametrize(
    ('files', 'words'),
    [
        (['/no/such/file.pdf'], "No file '/no/such/file.pdf'"),
        (['http://files.example/a.pdf'], 'is not a file URL the API can read: give a public https URL'),
        ([b''], 'is empty'),
        ([b'\xff\xfe\x00\x01binary'], 'The type of the file is unknown: give its media_type'),
        ([{'data': b'MZ...', 'filename': 'setup.exe'}], 'which the API does not read'),
        ([{'url': 'https://a.example/x.pdf', 'data': b'x'}], 'exactly one of them'),
        (['data:application/pdf;base64,***'], 'holds no valid base64 content'),
        (['https://a.example/x.pdf'] * 11, '11 files given; a run reads at most 10'),
        ([b'x' * (20 * 1024 * 1024 + 1)], 'a file may be at most 20.0 MiB'),
        ([b'x' * (12 * 1024 * 1024)] * 2, 'a run takes at most 22.0 MiB'),
        ([42], 'is not a file: give an https URL, a path, bytes'),
    ],
)
def test_a_bad_file_is_refused_before_anything_is_sent(files: list[Any], words: str) -> None:
    with pytest.raises(InvalidArgumentError) as info:
        ResearchOptions.parse(files=files)
    assert info.value.argument == 'files' and words in str(info.value), str(info.value)


def test_the_request_options_on_the_wire() -> None:
    request = ResearchOptions.parse(
        models='openai/gpt-5.4, openai/gpt-5.5',
        service_tier='FLEX',
        profile='prof_nightly@3',
        reasoning_effort='high',
        prompt_cache_key='weekly-report',
    ).to_request('fast')
    assert request == {
        'effort': 'fast',
        'models': ['openai/gpt-5.4', 'openai/gpt-5.5'],
        'service_tier': 'flex',
        'profile': {'type': 'custom', 'id': 'prof_nightly', 'version': '3'},
        'reasoning': {'effort': 'high'},
        'prompt_cache_key': 'weekly-report',
    }
    assert ResearchOptions.parse(profile='p1').to_request('fast')['profile'] == {'type': 'custom', 'id': 'p1'}
    assert ResearchOptions.parse(models=['a/b', 'c/d']).models == ['a/b', 'c/d']


@pytest.mark.parametrize(
    ('given', 'argument', 'words'),
    [
        ({'models': ['gpt-5']}, 'models', 'is not a model id: use "provider/model"'),
        ({'models': [f'openai/m{i}' for i in range(6)]}, 'models', '6 models given; list 1 to 5 fallback models'),
        ({'model': 'openai/a', 'models': ['openai/b']}, 'models', 'model and models cannot be combined'),
        ({'service_tier': 'cheap'}, 'service_tier', 'is not one of auto, default, flex, priority, fast'),
        ({'reasoning_effort': 'max'}, 'reasoning_effort', 'is not one of none, minimal, low, medium, high, xhigh'),
        ({'profile': 'has space'}, 'profile', 'is not a profile id'),
        ({'profile': 'p@'}, 'profile', 'is not a profile id'),
        ({'prompt_cache_key': 'x' * 257}, 'prompt_cache_key', 'at most 256 printable characters'),
        ({'prompt_cache_key': 'a\nb'}, 'prompt_cache_key', 'at most 256 printable characters'),
    ],
)
def test_a_bad_request_option_reads_in_the_projects_words(given: dict[str, Any], argument: str, words: str) -> None:
    with pytest.raises(InvalidArgumentError) as info:
        ResearchOptions.parse(**given)
    assert info.value.argument == argument and words in str(info.value), str(info.value)


def test_a_tool_reads_local_paths_only_inside_its_root(tmp_path: Path) -> None:
    from pydantic_ai_perplexity._domain.options import tool_files

    root, outside = tmp_path / 'root', tmp_path / 'outside'
    (root / 'sub').mkdir(parents=True)
    outside.mkdir()
    (root / 'sub' / 'notes.txt').write_text('inside', encoding='utf-8')
    (outside / 'secret.txt').write_text('secret', encoding='utf-8')
    (root / 'escape.txt').symlink_to(outside / 'secret.txt')
    (root / 'linked').symlink_to(outside)

    [inside] = tool_files(['sub/notes.txt'], root)
    assert inside.data == b'inside' and inside.filename == 'notes.txt'
    for given in ['../outside/secret.txt', str(outside / 'secret.txt'), 'escape.txt', 'linked/secret.txt']:
        with pytest.raises(InvalidArgumentError, match='outside the folder this server reads files from'):
            tool_files([given], root)
    with pytest.raises(InvalidArgumentError, match='is not an https URL: this tool reads files by https URL'):
        tool_files(['sub/notes.txt'])  # no root: a model's argument never reads a local file
    with pytest.raises(InvalidArgumentError, match='which is not a folder'):
        tool_files(['notes.txt'], tmp_path / 'missing')
    [url, data] = tool_files(['https://files.example/a.pdf', 'data:text/plain;base64,aGk='])
    assert url.url == 'https://files.example/a.pdf' and data.data == b'hi'


async def test_files_and_default_options_through_the_toolset(emulator: Emulator) -> None:
    import json

    import httpx2

    from pydantic_ai_perplexity._core.tool_spec import TOOLS, tool_specs

    bodies: list[dict[str, Any]] = []

    async def keep(request: httpx2.Request) -> None:
        if request.method == 'POST' and request.url.path.endswith('/v1/agent'):
            bodies.append(json.loads(request.content))

    defaults = ResearchOptions(service_tier='flex', models=['openai/gpt-5.4', 'openai/gpt-5.5'])
    async with httpx2.AsyncClient(event_hooks={'request': [keep]}) as http:
        toolset = PerplexityToolset(
            api_key=emulator.api_key, base_url=emulator.base_url, http_client=http, options=defaults
        )
        url = {'query': 'Summarise the report.', 'files': ['https://files.example/report.pdf']}
        [by_url] = await call_tools(toolset, [('perplexity_research', url)])
        [local] = await call_tools(toolset, [('perplexity_research', {'query': 'q', 'files': ['/etc/passwd']})])
        [not_a_list] = await call_tools(toolset, [('perplexity_research', {'query': 'q', 'files': 42})])
        tier = {'query': 'What is solar power?', 'service_tier': 'priority'}
        [unoffered] = await call_tools(toolset, [('perplexity_research', tier)])
    assert outcome_of(by_url) == 'success' and 'The attached file https://files.example/report.pdf' in text_of_part(
        by_url
    )
    [body] = bodies  # the local path and the unoffered option sent nothing
    assert body['input'][0]['content'][1] == {'type': 'input_file', 'file_url': 'https://files.example/report.pdf'}
    assert body['service_tier'] == 'flex' and body['models'] == ['openai/gpt-5.4', 'openai/gpt-5.5']
    assert outcome_of(local) == 'retry' and 'is not an https URL' in text_of_part(local)
    assert outcome_of(not_a_list) == 'retry' and 'files must be a list of https URLs' in text_of_part(not_a_list)
    assert outcome_of(unoffered) == 'retry' and 'Unknown argument' in text_of_part(unoffered)
    # Offered to models: files only (as https URLs or data: URIs); tiers, fallbacks and the rest are the caller's.
    offered = set(TOOLS[0].schema['properties'])
    assert 'files' in offered and not offered & {'models', 'service_tier', 'profile', 'reasoning_effort'}
    assert TOOLS[0].schema['properties']['files']['anyOf'][0] == {'items': {'type': 'string'}, 'type': 'array'}
    assert 'files' not in tool_specs(lean=True)[0].schema['properties']


def test_every_sdk_request_field_is_an_option_or_named_in_the_decisions() -> None:
    """`perplexityai` 0.46.1 `ResponsesRequestInput`: each field is made by the options (all set) or is named, with
    why, among the fields left out in docs/decisions.md."""
    import re

    from perplexity.generated.api import ResponsesRequestInput

    options = ResearchOptions.parse(
        effort='fast',
        models=['openai/gpt-5.4'],
        instructions='i',
        domains=['nature.com'],
        fetch_pages=2,
        max_steps=2,
        max_output_tokens=100,
        language='de',
        previous_response_id='resp_1',
        output_type={'type': 'object', 'properties': {}},
        files=['https://files.example/a.pdf'],
        service_tier='flex',
        profile='p',
        reasoning_effort='low',
        prompt_cache_key='k',
    )
    made = {'input', 'model', *options.to_request('fast')}  # `model` is the option beside `models`
    decisions = (Path(__file__).parents[1] / 'docs' / 'decisions.md').read_text(encoding='utf-8')
    left_out = decisions.split('Left out (each still reachable through `extra=`):', 1)[1].split('\n\n', 2)[1]
    named = set(re.findall(r'`(\w+)`', ''.join(re.findall(r'^- \*\*(.*?)\*\*', left_out, re.MULTILINE))))
    sdk = set(ResponsesRequestInput.model_fields)
    assert sdk - made == named, (sdk - made, named)
    assert not made & named
