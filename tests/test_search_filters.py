"""The Search API's own filters: one request builder, its fee, and their effect through every way in.

Each way in (`Researcher.search`, the pydantic-ai toolset, MCP, the CLI) goes to the emulator, whose `/search`
honours country, mode and language (read off each page's address: `_facets.py`) and the date filters.
"""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from pydantic_ai_perplexity import BudgetExceededError, InvalidArgumentError, PerplexityError, Researcher
from pydantic_ai_perplexity._base.prices import LIVE_SEARCH_API_FEES
from pydantic_ai_perplexity._core import tool_spec
from pydantic_ai_perplexity._domain.search_filters import SEARCH_MODEL, search_fee, search_request
from pydantic_ai_perplexity.emulator import Emulator
from pydantic_ai_perplexity.emulator._corpus import Document
from pydantic_ai_perplexity.emulator._facets import country_of, language_of, mode_of, passes_facets

pytestmark = pytest.mark.anyio

#: A question the built-in corpus answers from energy.gov (US), nature.com (academic) and global pages.
ENERGY = 'energy'


def researcher_for(emu: Emulator) -> Researcher:
    return Researcher(api_key=emu.api_key, base_url=emu.base_url, ledger=False)


# -- the one builder --------------------------------------------------------------------------------------------


def test_every_filter_goes_on_the_wire_in_the_apis_words() -> None:
    body = search_request(
        max_results=7,
        domains=['https://www.Nature.com/x', '-reddit.com'],
        after='2026-01-31',
        before=date(2026, 3, 1),
        updated_after='2026-02-01',
        updated_before='2026-02-28',
        country=' de ',
        search_mode='Academic',
        search_type='fast',
        max_tokens_per_page=512,
        languages=['DE', 'en', 'de'],
    )
    assert body == {
        'max_results': 7,
        'search_domain_filter': ['nature.com', '-reddit.com'],
        'search_after_date_filter': '01/31/2026',
        'search_before_date_filter': '03/01/2026',
        'last_updated_after_filter': '02/01/2026',
        'last_updated_before_filter': '02/28/2026',
        'country': 'DE',
        'search_mode': 'academic',
        'search_type': 'fast',
        'max_tokens_per_page': 512,
        'search_language_filter': ['de', 'en'],
    }
    assert search_request() == {'max_results': 10}


@pytest.mark.parametrize(
    ('given', 'argument', 'words'),
    [
        ({'country': 'Germany'}, 'country', 'two-letter ISO 3166-1 code'),
        ({'search_mode': 'news'}, 'search_mode', 'not one of web, academic, sec'),
        ({'search_type': 'slow'}, 'search_type', 'not one of web, fast'),
        ({'max_tokens_per_page': 0}, 'max_tokens_per_page', 'from 1 to 1,000,000'),
        ({'max_tokens_per_page': True}, 'max_tokens_per_page', 'out of range'),
        ({'languages': ['german']}, 'languages', 'two-letter ISO 639-1 codes'),
        ({'languages': [f'{a}{b}' for a in 'ab' for b in 'abcdef']}, 'languages', 'at most 10'),
        ({'updated_after': '31/01/2026'}, 'updated_after', 'YYYY-MM-DD'),
        ({'recency': 'week', 'after': '2026-01-01'}, 'recency', 'cannot be combined'),
        ({'max_results': 21}, 'max_results', 'out of range 1..20'),
    ],
)
def test_a_bad_filter_is_refused_naming_it(given: dict[str, Any], argument: str, words: str) -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        search_request(**given)
    assert caught.value.argument == argument and words in str(caught.value)


def test_the_fee_is_the_pricing_pages_per_request_and_fast_is_a_fifth() -> None:
    # Live fact: cfdude/mcp-perplexity-pro tests/fixtures/pricing_page.json, captured 2026-10-09
    # (Search API $5 per 1,000 requests, $1 per 1,000 with search_type "fast").
    assert search_fee(search_request()) == LIVE_SEARCH_API_FEES['standard'] == 0.005
    assert search_fee(search_request(search_type='fast')) == LIVE_SEARCH_API_FEES['fast'] == 0.001
    assert search_fee(search_request(search_type='fast'), queries=3) == 0.003
    assert search_fee(search_request(search_type='web'), queries=2) == 0.01


# -- the emulator's facets ------------------------------------------------------------------------------------


def _page(url: str) -> Document:
    return Document(url=url, title='t', snippet='s', date='2026-01-01', last_updated='2026-01-01', text='x')


def test_the_emulator_reads_country_language_and_mode_off_a_pages_address() -> None:
    assert [country_of(_page(u)) for u in ('https://www.nasa.gov/', 'https://spiegel.de/', 'https://bbc.co.uk/')] == [
        'US',
        'DE',
        'GB',
    ]
    assert country_of(_page('https://example.com/')) is None and country_of(_page('https://x.eu/')) is None
    assert language_of(_page('https://spiegel.de/')) == 'de' and language_of(_page('https://nasa.gov/')) == 'en'
    assert mode_of(_page('https://www.sec.gov/cgi-bin/browse-edgar')) == 'sec'
    assert mode_of(_page('https://arxiv.org/abs/1')) == mode_of(_page('https://cs.stanford.edu/')) == 'academic'
    assert mode_of(_page('https://www.reuters.com/')) == 'web'
    nasa = _page('https://mars.nasa.gov/')
    assert passes_facets(nasa, country='us', mode='web', languages=['en'])
    assert not passes_facets(nasa, country='DE', mode=None, languages=None)
    assert not passes_facets(nasa, country=None, mode='academic', languages=None)
    assert not passes_facets(nasa, country=None, mode=None, languages=['de'])
    assert passes_facets(_page('https://example.com/'), country='DE', mode=None, languages=None)  # no one country's


# -- through each way in ----------------------------------------------------------------------------------------


async def test_researcher_search_filters_by_country_mode_language_and_date(emulator: Emulator) -> None:
    async with researcher_for(emulator) as r:
        plain = await r.search(ENERGY, max_results=10)
        us = await r.search(ENERGY, country='US', search_type='fast')
        german = await r.search(ENERGY, country='DE')
        academic = await r.search(ENERGY, search_mode='academic')
        sec = await r.search(ENERGY, search_mode='sec')
        in_german = await r.search(ENERGY, languages=['de'])
        old = await r.search(ENERGY, updated_before='2000-01-01')
        short = await r.search(ENERGY, max_tokens_per_page=10)
    hosts = {res.url.split('/')[2] for res in plain.results}
    assert {'www.energy.gov', 'www.nature.com'} <= hosts, hosts
    assert [res.url for res in us.results] == [res.url for res in plain.results]  # every page is US or global
    assert german.results and not any('energy.gov' in res.url for res in german.results)
    assert academic.results and all(mode_of(_page(res.url)) == 'academic' for res in academic.results)
    assert sec.results == [] and in_german.results == [] and old.results == []
    assert short.results and all(len(res.snippet) <= 40 for res in short.results)  # 10 tokens of 4 characters


async def test_a_bad_filter_is_refused_before_any_request(emulator: Emulator) -> None:
    async with researcher_for(emulator) as r:
        with pytest.raises(InvalidArgumentError, match='country='):
            await r.search(ENERGY, country='Deutschland')
    assert not [req for req in emulator.requests if req.path == '/search']


async def test_the_search_tool_takes_the_filters_through_the_toolset(emulator: Emulator) -> None:
    from pydantic_ai_perplexity import PerplexityToolset

    schema = tool_spec.SEARCH.args.model_json_schema()['properties']
    for name in ('country', 'search_mode', 'search_type', 'max_tokens_per_page', 'languages', 'updated_after'):
        assert name in schema, name
    toolset = PerplexityToolset(researcher=researcher_for(emulator))
    async with toolset.researcher:
        args = tool_spec.SEARCH.parse({'query': ENERGY, 'country': 'DE', 'search_mode': 'web', 'max_results': 10})
        ret = await toolset._search(None, args)  # type: ignore[arg-type]  # pyright: ignore[reportPrivateUsage]
    found = ret.metadata['search']  # type: ignore[index]
    assert found.results and not any('energy.gov' in res.url for res in found.results)


async def test_the_search_tool_filters_over_mcp_and_refuses_a_bad_filter(emulator_env: Emulator) -> None:
    from mcp.client import Client

    from pydantic_ai_perplexity.mcp.server import _tools

    async with Client(_tools.build_server()) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}['perplexity_search']
        assert {'country', 'search_mode', 'search_type', 'languages'} <= set(listed.input_schema['properties'])
        plain = await client.call_tool('perplexity_search', {'query': ENERGY, 'max_results': 10})
        german = await client.call_tool('perplexity_search', {'query': ENERGY, 'country': 'DE', 'max_results': 10})
        sec = await client.call_tool('perplexity_search', {'query': ENERGY, 'search_mode': 'sec'})
        bad = await client.call_tool('perplexity_search', {'query': ENERGY, 'search_mode': 'news'})
    text = [r.content[0].text for r in (plain, german, sec, bad)]  # type: ignore[union-attr]
    assert 'energy.gov' in text[0] and 'energy.gov' not in text[1] and not german.is_error
    assert 'energy.gov' not in text[2] and not sec.is_error
    assert bad.is_error and 'search_mode' in text[3] and 'web, academic, sec' in text[3], text[3]


def test_the_cli_search_command_filters_and_prints_json(emulator_env: Emulator) -> None:
    from pydantic_ai_perplexity.cli import cli

    runner = CliRunner()
    plain = runner.invoke(cli, ['search', ENERGY, '--json'])
    german = runner.invoke(cli, ['search', ENERGY, '--country', 'DE', '--fast', '--language', 'en', '--json'])
    academic = runner.invoke(cli, ['search', ENERGY, '--mode', 'academic'])
    bad = runner.invoke(cli, ['search', ENERGY, '--mode', 'news'])
    assert plain.exit_code == 0 and german.exit_code == 0 and academic.exit_code == 0, plain.output + german.output
    plain_urls = [r['url'] for r in json.loads(plain.stdout)['results']]
    german_urls = [r['url'] for r in json.loads(german.stdout)['results']]
    assert any('energy.gov' in u for u in plain_urls) and not any('energy.gov' in u for u in german_urls)
    assert '[1] ' in academic.stdout and 'energy.gov' not in academic.stdout
    assert bad.exit_code == 1 and 'search_mode=' in bad.output and 'Traceback' not in bad.output


# -- the Search API's spend, in the ledger ---------------------------------------------------------------------


def searches_in(ledger: Any) -> list[Any]:
    return [row for row in ledger.list(limit=100) if row.model == SEARCH_MODEL]


async def test_a_search_is_reserved_then_recorded_as_spent(emulator: Emulator, tmp_path: Path) -> None:
    async with Researcher(api_key=emulator.api_key, base_url=emulator.base_url, ledger=tmp_path / 'l.sqlite3') as r:
        await r.search(ENERGY)
        await r.search(ENERGY, search_type='fast')
        await r.search([ENERGY, 'heat pumps'])  # two queries in one request: two fees
        await r.flush()
        assert r.ledger is not None
        rows = searches_in(r.ledger)
        spend = {line.window: line for line in await r.spend() if line.caller is None and line.scope is None}
        spent = r.ledger.spent_usd(emulated=True)
    assert sorted(row.cost_usd for row in rows) == [0.001, 0.005, 0.01]
    assert all(row.status == 'completed' and row.emulated and row.response_id.startswith('search_') for row in rows)
    assert {row.query for row in rows} == {ENERGY, f'{ENERGY} | heat pumps'}
    assert spent == pytest.approx(0.016) and spend['total'].spent_usd == pytest.approx(0.016)


async def test_a_search_that_does_not_fit_the_budget_is_refused_before_it_is_sent(
    emulator: Emulator, tmp_path: Path
) -> None:
    settings: dict[str, Any] = {'api_key': emulator.api_key, 'base_url': emulator.base_url}
    async with Researcher(**settings, ledger=tmp_path / 'l.sqlite3', budget_usd=0.0065) as r:
        await r.search(ENERGY)  # $0.005 of $0.0065
        sent = len([req for req in emulator.requests if req.path == '/search'])
        with pytest.raises(BudgetExceededError) as refused:
            await r.search(ENERGY)  # another $0.005 does not fit
        assert len([req for req in emulator.requests if req.path == '/search']) == sent  # never sent
        await r.search(ENERGY, search_type='fast')  # $0.001 fits
        await r.flush()
        assert r.ledger is not None
        rows = searches_in(r.ledger)
    assert refused.value.estimate_usd == pytest.approx(0.005) and 'Budget exceeded' in str(refused.value)
    assert sorted(row.cost_usd for row in rows) == [0.001, 0.005]  # the refused one left no row


async def test_a_search_the_api_refuses_gives_its_reservation_back(emulator: Emulator, tmp_path: Path) -> None:
    async with Researcher(api_key='pplx-wrong', base_url=emulator.base_url, ledger=tmp_path / 'l.sqlite3') as r:
        with pytest.raises(PerplexityError):
            await r.search(ENERGY)
        await r.flush()
        assert r.ledger is not None
        assert searches_in(r.ledger) == [] and r.ledger.list(limit=100) == []


def test_the_cli_search_spend_shows_in_jobs_spend(emulator_env: Emulator) -> None:
    from pydantic_ai_perplexity.cli import cli

    runner = CliRunner()
    assert runner.invoke(cli, ['search', ENERGY, '--fast', '--json']).exit_code == 0
    spend = runner.invoke(cli, ['jobs', 'spend', '--all', '--json'])
    assert spend.exit_code == 0, spend.output
    lines = {(line['caller'], line['window']): line for line in json.loads(spend.stdout)}
    assert lines[None, 'total']['spent_usd'] == pytest.approx(0.001)


def test_the_cli_refuses_a_search_over_the_budget(emulator_env: Emulator, monkeypatch: pytest.MonkeyPatch) -> None:
    from pydantic_ai_perplexity.cli import cli

    monkeypatch.setenv('PERPLEXITY_BUDGET_USD', '0.003')
    runner = CliRunner()
    refused = runner.invoke(cli, ['search', ENERGY, '--json'])  # $0.005
    fits = runner.invoke(cli, ['search', ENERGY, '--fast', '--json'])  # $0.001
    assert refused.exit_code == 1 and 'Budget exceeded' in refused.output and 'Traceback' not in refused.output
    assert fits.exit_code == 0, fits.output
