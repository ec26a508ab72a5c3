"""`pydantic-ai-perplexity search`: the Search API's ranked pages, with all of its filters, on the command line."""

from __future__ import annotations

from typing import Any, cast

import click

from ._shared import CONTEXT, endpoint, fail, out, out_json, start_tracing

__all__ = ('search',)


@click.command(context_settings=CONTEXT)
@click.argument('query', nargs=-1, required=True)
@click.option('--max-results', type=int, default=10, show_default=True, help='How many results (1-20).')
@click.option('--domain', 'domains', multiple=True, help='Only this domain (repeatable); "-domain" excludes one.')
@click.option('--recency', help='Only pages from the last hour/day/week/month/year.')
@click.option('--after', help='Only pages published on or after this date (YYYY-MM-DD).')
@click.option('--before', help='Only pages published on or before this date (YYYY-MM-DD).')
@click.option('--updated-after', help='Only pages updated on or after this date (YYYY-MM-DD).')
@click.option('--updated-before', help='Only pages updated on or before this date (YYYY-MM-DD).')
@click.option('--country', help='Results for this country (ISO 3166-1 code, e.g. DE).')
@click.option('--mode', 'search_mode', help='web (default), academic (scholarly sources) or sec (SEC filings).')
@click.option('--fast', is_flag=True, help='The fast search type: quicker, $1 per 1,000 searches instead of $5.')
@click.option('--max-tokens-per-page', type=int, help='Cap on the text of each result, in tokens.')
@click.option('--language', 'languages', multiple=True, help='Only pages in this language (ISO 639-1; repeatable).')
@click.option('--json', 'as_json', is_flag=True, help='Print the results as JSON.')
def search(query: tuple[str, ...], as_json: bool, fast: bool, **given: Any) -> None:
    """Search the web for QUERY (several: one search each, in one request) and print the ranked pages.

    No synthesis and no answer: titles, addresses, dates and snippets. Without PERPLEXITY_API_KEY it searches the
    built-in emulator's pages.

    \b
    Examples:
      pydantic-ai-perplexity search "heat pump efficiency" --country DE --recency year
      pydantic-ai-perplexity search "transformer architecture" --mode academic --fast --json
    """
    import anyio

    start_tracing()
    filters: dict[str, Any] = {}
    for key, value in given.items():
        if value is not None and value != ():
            filters[key] = list(cast('tuple[str, ...]', value)) if isinstance(value, tuple) else value
    if fast:
        filters['search_type'] = 'fast'
    queries: str | list[str] = query[0] if len(query) == 1 else list(query)

    async def go(settings: dict[str, str]) -> Any:
        from .._core.researcher import Researcher

        # The default ledger and the budget of the environment: a search's fee is reserved and recorded as spent.
        async with Researcher(
            origin='cli', api_key=settings.get('api_key'), base_url=settings.get('base_url')
        ) as researcher:
            return await researcher.search(queries, **filters)

    try:
        with endpoint() as settings:
            response = anyio.run(go, settings)
    except Exception as exc:
        fail(exc)
        return
    if as_json:
        out_json(response.model_dump_json(indent=2))
        return
    _print_results(response, out)


def _print_results(response: Any, out: Any) -> None:
    """One numbered block per page: its title, its address whole (never cut), its date and its snippet."""
    from .._present.terminal import line_for_terminal

    if not response.results:
        out('No results.')
        return
    for n, r in enumerate(response.results, 1):
        out(f'[{n}] {line_for_terminal(r.title or r.url)}', wrap=True)
        out(f'    {line_for_terminal(r.url)}')
        if r.date:
            out(f'    {line_for_terminal(r.date)}')
        if r.snippet:
            out(f'    {line_for_terminal(r.snippet)[:300]}', wrap=True)
