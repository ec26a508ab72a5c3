"""What the Search API's country, mode and language filters see of a corpus page, read off its address.

A page's country and language come from its country-code top-level domain (`.de` is German and in DE; `.gov`,
`.mil` and `.edu` are US, in English); a page on a generic domain (`.com`, `.org`, ...) is in English and belongs
to no one country, so a country filter keeps it. Scholarly hosts are `academic`; `sec.gov` is `sec`.
"""

from __future__ import annotations

from collections.abc import Sequence

from ._corpus import Document, domain_matches

__all__ = ('country_of', 'language_of', 'mode_of', 'passes_facets')

#: Top-level domains that name no country (`.io`, `.ai` and friends are used as generic ones).
_GENERIC = frozenset({'ai', 'co', 'io', 'me', 'tv', 'fm', 'ly', 'app', 'dev'})
#: Top-level domains of the US that are not country codes.
_US = frozenset({'gov', 'mil', 'edu'})
#: Country codes whose top-level domain differs from the ISO 3166-1 code.
_ISO = {'uk': 'GB'}
#: The language of a country-code top-level domain, where it is not English.
_LANGUAGE = {
    'de': 'de', 'at': 'de', 'ch': 'de', 'fr': 'fr', 'be': 'fr', 'es': 'es', 'mx': 'es', 'ar': 'es', 'it': 'it',
    'pt': 'pt', 'br': 'pt', 'nl': 'nl', 'se': 'sv', 'no': 'no', 'dk': 'da', 'fi': 'fi', 'pl': 'pl', 'jp': 'ja',
    'cn': 'zh', 'kr': 'ko', 'ru': 'ru',
}  # fmt: skip
#: Hosts of scholarly sources (`search_mode="academic"`), besides every `.edu` host.
_ACADEMIC = (
    'arxiv.org', 'nature.com', 'acm.org', 'ieee.org', 'science.org', 'sciencedirect.com', 'springer.com',
    'nih.gov', 'plos.org', 'doi.org', 'jstor.org', 'wiley.com', 'harvard.edu', 'berkeley.edu',
)  # fmt: skip


def _tld(doc: Document) -> str:
    return doc.domain.rsplit('.', 1)[-1].lower()


def country_of(doc: Document) -> str | None:
    """The ISO 3166-1 code of the page's country, or None for a page on a generic domain."""
    tld = _tld(doc)
    if tld in _US:
        return 'US'
    if len(tld) == 2 and tld not in _GENERIC and tld != 'eu':
        return _ISO.get(tld, tld.upper())
    return None


def language_of(doc: Document) -> str:
    """The ISO 639-1 code of the page's language."""
    return _LANGUAGE.get(_tld(doc), 'en')


def mode_of(doc: Document) -> str:
    """`sec` for SEC filings, `academic` for scholarly sources, `web` for the rest."""
    if domain_matches(doc.domain, 'sec.gov'):
        return 'sec'
    if _tld(doc) == 'edu' or any(domain_matches(doc.domain, host) for host in _ACADEMIC):
        return 'academic'
    return 'web'


def passes_facets(doc: Document, *, country: str | None, mode: str | None, languages: Sequence[str] | None) -> bool:
    """Whether the page passes the request's country, mode and language filters (each optional).

    `web` mode (the default) searches everything; `academic` and `sec` keep only their own sources.
    """
    if country is not None and country_of(doc) not in (None, country.upper()):
        return False
    if mode in ('academic', 'sec') and mode_of(doc) != mode:
        return False
    return not languages or language_of(doc) in {code.lower() for code in languages}
