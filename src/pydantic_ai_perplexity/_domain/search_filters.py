"""The Search API's request (`POST /search`), built in one place from checked filters, and what it costs.

`Researcher.search`, the `perplexity_search` tool (pydantic-ai and MCP) and the CLI's `search` command all call
`search_request`, so a filter reads and fails the same way everywhere. Fees are the pricing page's (`prices.py`):
$5 per 1,000 requests, $1 per 1,000 with `search_type="fast"`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import date
from typing import TYPE_CHECKING, Literal, Unpack, cast, get_args

from typing_extensions import TypedDict

from .._base.errors import InvalidArgumentError
from .._base.prices import LIVE_SEARCH_API_FEES
from .options import search_filters, wire_date

if TYPE_CHECKING:
    from ..client._params import SearchRequest
else:  # the client package imports the HTTP stack, which the CLI must not load to list its options
    SearchRequest = dict

__all__ = (
    'MAX_LANGUAGES',
    'SEARCH_MODEL',
    'SEARCH_MODES',
    'SEARCH_TYPES',
    'SearchFilters',
    'SearchMode',
    'SearchType',
    'search_fee',
    'search_request',
)

SearchMode = Literal['web', 'academic', 'sec']
#: Where the Search API looks: the web, scholarly sources, or SEC filings.
SEARCH_MODES: tuple[str, ...] = get_args(SearchMode)
SearchType = Literal['web', 'fast']
#: How the Search API searches: `web` (standard, $5 per 1,000) or `fast` ($1 per 1,000).
SEARCH_TYPES: tuple[str, ...] = get_args(SearchType)
#: The most language codes one request may filter on (the Search API's documented limit).
MAX_LANGUAGES = 10
#: The most tokens one page may put in a result (the Search API's `max_tokens` ceiling).
_MAX_PAGE_TOKENS = 1_000_000


class SearchFilters(TypedDict, total=False):
    """The Search API's filters as keywords (`Researcher.search(query, country="DE")`): a misspelt one is a type error.

    `domains` (a leading "-" excludes one), `recency` or published `after`/`before`, last `updated_after`/
    `updated_before` (ISO dates), `country` (ISO 3166-1 alpha-2), `search_mode`, `search_type`, `max_tokens_per_page`,
    `languages` (ISO 639-1) and `max_results` (1-20, default 10).
    """

    max_results: int
    domains: Sequence[str] | str | None
    recency: str | None
    after: str | date | None
    before: str | date | None
    updated_after: str | date | None
    updated_before: str | date | None
    country: str | None
    search_mode: SearchMode | None
    search_type: SearchType | None
    max_tokens_per_page: int | None
    languages: Sequence[str] | str | None


def search_request(**given: Unpack[SearchFilters]) -> SearchRequest:
    """The body of a Search API request (less `query`), every filter checked; `InvalidArgumentError` names the one
    to fix. Dates are ISO (`YYYY-MM-DD`) and go out as the API's `MM/DD/YYYY`."""
    max_results: object = given.get('max_results', 10)
    if not isinstance(max_results, int) or isinstance(max_results, bool) or not 1 <= max_results <= 20:
        raise InvalidArgumentError(f'max_results={max_results!r} is out of range 1..20.', argument='max_results')
    domains, recency, after, before = (given.get(k) for k in ('domains', 'recency', 'after', 'before'))
    updated_after, updated_before = given.get('updated_after'), given.get('updated_before')
    country, search_mode, search_type = given.get('country'), given.get('search_mode'), given.get('search_type')
    max_tokens_per_page, languages = given.get('max_tokens_per_page'), given.get('languages')
    if recency and (after or before):
        raise InvalidArgumentError(
            'recency cannot be combined with after/before: use one or the other.', argument='recency'
        )
    # the filters a research run's web search shares come from the one builder of them
    shared = search_filters(domains=domains, recency=recency, after=after, before=before)
    body: SearchRequest = {'max_results': max_results, **shared}
    for value, key, name in (
        (updated_after, 'last_updated_after_filter', 'updated_after'),
        (updated_before, 'last_updated_before_filter', 'updated_before'),
    ):
        if value:
            body[key] = wire_date(value, name)
    if country:
        body['country'] = _country(country)
    if search_mode:
        body['search_mode'] = cast('SearchMode', _choice(search_mode, 'search_mode', SEARCH_MODES))
    if search_type:
        body['search_type'] = cast('SearchType', _choice(search_type, 'search_type', SEARCH_TYPES))
    if max_tokens_per_page is not None:
        body['max_tokens_per_page'] = _page_tokens(max_tokens_per_page)
    if languages:
        body['search_language_filter'] = _languages(languages)
    return body


#: The `model` of a Search API request's row in the ledger: a completed run whose cost is the request's fee.
SEARCH_MODEL = 'search-api'


def search_fee(request: SearchRequest, queries: int = 1) -> float:
    """What a Search API request costs, in USD: the pricing page's fee per request, times its queries."""
    fee = LIVE_SEARCH_API_FEES['fast' if request.get('search_type') == 'fast' else 'standard']
    return round(fee * max(1, queries), 6)


def _choice(value: object, argument: str, choices: tuple[str, ...]) -> str:
    text = value.strip().lower() if isinstance(value, str) else ''
    if text not in choices:
        raise InvalidArgumentError(f'{argument}={value!r} is not one of {", ".join(choices)}.', argument=argument)
    return text


def _country(value: object) -> str:
    code = value.strip().upper() if isinstance(value, str) else ''
    if not re.fullmatch(r'[A-Z]{2}', code):
        raise InvalidArgumentError(
            f'country={value!r} is not a country code: give a two-letter ISO 3166-1 code, e.g. "US" or "DE".',
            argument='country',
        )
    return code


def _page_tokens(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= _MAX_PAGE_TOKENS:
        raise InvalidArgumentError(
            f'max_tokens_per_page={value!r} is out of range: give a whole number from 1 to {_MAX_PAGE_TOKENS:,}.',
            argument='max_tokens_per_page',
        )
    return value


def _languages(value: Sequence[str] | str) -> list[str]:
    given = [value] if isinstance(value, str) else list(value)
    codes: list[str] = []
    for raw in given:
        code = raw.strip().lower() if isinstance(raw, str) else ''  # pyright: ignore[reportUnnecessaryIsInstance]
        if not re.fullmatch(r'[a-z]{2}', code):
            raise InvalidArgumentError(
                f'{raw!r} is not a language code: give two-letter ISO 639-1 codes, e.g. ["en", "de"].',
                argument='languages',
            )
        if code not in codes:
            codes.append(code)
    if len(codes) > MAX_LANGUAGES:
        raise InvalidArgumentError(
            f'{len(codes)} languages given; at most {MAX_LANGUAGES} are allowed.', argument='languages'
        )
    return codes
