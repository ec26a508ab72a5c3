"""The emulator's offline world: a small corpus of invented web pages, its BM25 index and its search.

The built-in pages are data files (`corpus/*.md`, in the format of a user's corpus folder, read by the same code);
the model table lives in `_models.py` (re-exported here for older imports), built from the live prices.

Every built-in page is sample data written for the emulator, not a copy of a real page (their URLs merely look
plausible).
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlsplit

from ._files import list_names, open_folder, read_inside
from ._models import EFFORT_MODELS, FETCH_URL_PRICE, MODELS, SEARCH_WEB_PRICE, ModelInfo

__all__ = (
    'CORPUS',
    'DEFAULT_CORPUS',
    'EFFORT_MODELS',
    'FETCH_URL_PRICE',
    'MAX_CORPUS_PAGE_BYTES',
    'MODELS',
    'SEARCH_WEB_PRICE',
    'Corpus',
    'CorpusError',
    'Document',
    'ModelInfo',
    'best_sentences',
    'domain_matches',
    'load_corpus',
    'relevance',
    'search_corpus',
    'terms',
)


@dataclass(frozen=True, slots=True)
class Document:
    """One page of the offline corpus: what a search can find and a fetch can read."""

    url: str
    title: str
    snippet: str
    date: str
    last_updated: str
    text: str

    @property
    def domain(self) -> str:
        """The page's host without a leading `www.`, as domain filters compare it."""
        host = urlsplit(self.url).hostname or ''
        return host.removeprefix('www.')

    @property
    def sentences(self) -> list[str]:
        """The page text split into sentences (used to write answers)."""
        return [s.strip() for s in re.split(r'(?<=[.!?])\s+', self.text) if s.strip()]


def _doc(url: str, title: str, snippet: str, published: str, updated: str, text: str) -> Document:
    return Document(url=url, title=title, snippet=snippet, date=published, last_updated=updated, text=text)


_STOPWORDS = frozenset(
    'a about after all also an and any are as at be been before but by can could did do does for from had has have '
    'how i if in into is it its latest me more most my new no not now of on or our out over say says should so some '
    'than that the their them then there these they this those to up us was we were what when where which while who '
    'why will with would you your cite sources source please tell explain give find show answer question me '
    'help work works use used using way ways get make best good know under between www com org net html https http '
    'wiki en'.split()
)
#: BM25's parameters (the usual ones), the weight of a title term, and the share of the query's terms a page
#: must cover to count as matching at all.
_K1 = 1.2
_B = 0.75
_TITLE_WEIGHT = 3
_MIN_COVERAGE = 0.5


def terms(text: str) -> list[str]:
    """The lower-case search terms of a text (stop words and one-letter words removed), in order."""
    words = re.findall(r'[a-z0-9]+', text.casefold())
    return [w for w in words if len(w) > 1 and w not in _STOPWORDS]


_SUFFIXES = (
    'ations',
    'ation',
    'ments',
    'ment',
    'ings',
    'ing',
    'ables',
    'able',
    'ers',
    'er',
    'ies',
    'ied',
    'ed',
    'es',
    's',
    'ly',
)


def _stem(word: str) -> str:
    """A crude stem, the same for a word's common forms (`computing`, `computers` -> `comput`)."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            break
    return word[:-1] if word.endswith('e') and len(word) > 4 else word


def _stems(text: str) -> list[str]:
    return [_stem(t) for t in terms(text)]


class Corpus:
    """Pages and their BM25 index; title terms count `_TITLE_WEIGHT` times (a one-field BM25F).

    The built-in one is `DEFAULT_CORPUS`; `load_corpus` makes one of a folder of the user's pages.
    """

    def __init__(self, docs: tuple[Document, ...]) -> None:
        self.docs = docs
        self.counts: list[dict[str, int]] = []
        for doc in docs:
            counts: dict[str, int] = {}
            words = _stems(doc.title) * _TITLE_WEIGHT + _stems(
                urlsplit(doc.url).path + ' ' + doc.snippet + ' ' + doc.text
            )
            for word in words:
                counts[word] = counts.get(word, 0) + 1
            self.counts.append(counts)
        self.lengths = [sum(c.values()) for c in self.counts]
        self.average = sum(self.lengths) / max(1, len(self.lengths))
        self.df: dict[str, int] = {}
        for counts in self.counts:
            for word in counts:
                self.df[word] = self.df.get(word, 0) + 1

    def idf(self, word: str) -> float:
        """BM25's IDF (always positive); a word no page has weighs the most."""
        n = self.df.get(word, 0)
        return math.log((len(self.docs) - n + 0.5) / (n + 0.5) + 1)

    def score(self, wanted: list[str], i: int) -> float:
        """The BM25 score of page `i` for the (stemmed, distinct) query terms."""
        counts, norm = self.counts[i], _K1 * (1 - _B + _B * self.lengths[i] / self.average)
        return sum(self.idf(w) * counts[w] * (_K1 + 1) / (counts[w] + norm) for w in wanted if w in counts)

    def coverage(self, wanted: list[str], i: int) -> float:
        """The share of the query's distinct terms that page `i` contains."""
        return sum(w in self.counts[i] for w in wanted) / len(wanted) if wanted else 0.0

    def matches(self, query: str) -> list[tuple[float, int]]:
        """`(score, index)` of the pages that match the query, best first (ties in corpus order).

        A page matches when it holds at least half of the query's distinct terms and scores at least a quarter
        of the best page: a question on a topic the corpus lacks matches nothing.
        """
        wanted = list(dict.fromkeys(_stems(query)))
        scored = [
            (self.score(wanted, i), i) for i in range(len(self.docs)) if self.coverage(wanted, i) >= _MIN_COVERAGE
        ]
        best = max((score for score, _ in scored), default=0.0)
        return sorted(((s, i) for s, i in scored if s >= best / 4), key=lambda pair: (-pair[0], pair[1]))


# ---------------------------------------------------------------------------------------------------------------
# A user's corpus: a folder of pages

#: The most one page file may hold, and the most page files a folder may hold.
MAX_CORPUS_PAGE_BYTES = 1024 * 1024
_MAX_CORPUS_FILES = 10_000
#: The most characters a page's title, snippet and text may have.
_MAX_TITLE = 500
_MAX_TEXT = 200_000
_FRONT_MATTER = re.compile(r'\A---\r?\n(.*?)\r?\n---\r?\n?(.*)\Z', re.DOTALL)


class CorpusError(ValueError):
    """A corpus folder or page the emulator will not serve; the message names the file and says why."""


def load_corpus(directory: str | os.PathLike[str]) -> Corpus:
    """The pages of `directory` as a corpus: every `*.json` and `*.md` file in it, each checked now, not when served.

    A JSON file holds one page or a list of pages, each an object with `url`, `title` and `text` (and optionally
    `snippet`, `date`, `last_updated` as YYYY-MM-DD). A Markdown file is one page: front matter between `---` lines
    with `url:` and `title:` (and optionally `snippet:`, `date:`, `last_updated:`), then the text. Only regular files
    directly inside the folder are read (as for a replay folder), each at most `MAX_CORPUS_PAGE_BYTES`.

    Raises:
        CorpusError: the folder is missing or holds no page, or a file is refused (naming it and saying why).
    """
    path = Path(directory)
    dir_fd = open_folder(path, 'corpus folder', CorpusError)
    docs: list[Document] = []
    try:
        names = list_names(dir_fd, ('.json', '.md'))
        if len(names) > _MAX_CORPUS_FILES:
            raise CorpusError(f'corpus folder {path} holds {len(names)} pages, over {_MAX_CORPUS_FILES}')
        for name in names:
            raw = read_inside(dir_fd, name, MAX_CORPUS_PAGE_BYTES, CorpusError)
            try:
                text = raw.decode('utf-8')
            except UnicodeDecodeError:
                raise CorpusError(f'{name}: is not UTF-8 text') from None
            docs.extend(_json_pages(name, text) if name.endswith('.json') else [_markdown_page(name, text)])
    finally:
        os.close(dir_fd)
    if not docs:
        raise CorpusError(f'corpus folder {path} holds no page (*.json or *.md files with url, title and text)')
    urls: set[str] = set()
    for doc in docs:
        if doc.url in urls:
            raise CorpusError(f'two pages have the URL {doc.url}; keep one of them')
        urls.add(doc.url)
    return Corpus(tuple(docs))


def _json_pages(name: str, text: str) -> list[Document]:
    try:
        data: Any = json.loads(text)
    except RecursionError:
        raise CorpusError(f'{name}: JSON nested too deeply') from None
    except ValueError as exc:
        raise CorpusError(f'{name}: is not valid JSON ({exc})') from None
    items: list[Any] = cast('list[Any]', data) if isinstance(data, list) else [data]
    pages: list[Document] = []
    for n, item in enumerate(items):
        where = f'{name}' if not isinstance(data, list) else f'{name}[{n}]'
        if not isinstance(item, dict):
            raise CorpusError(f'{where}: a page is an object with url, title and text')
        page = cast('dict[str, Any]', item)
        pages.append(_page(where, {k: v for k, v in page.items() if isinstance(v, str)}, set(page)))
    return pages


def _markdown_page(name: str, text: str) -> Document:
    found = _FRONT_MATTER.match(text)
    if found is None:
        raise CorpusError(f'{name}: a Markdown page starts with front matter between --- lines (url:, title:)')
    fields: dict[str, str] = {}
    for line in found.group(1).splitlines():
        key, sep, value = line.partition(':')
        if line.strip() and not sep:
            raise CorpusError(f'{name}: front matter line {line.strip()[:40]!r} is not "key: value"')
        if sep:
            fields[key.strip()] = value.strip()
    fields['text'] = found.group(2)
    return _page(name, fields, set(fields))


def _page_url(where: str, url: str) -> str:
    """A page's URL, which must be http(s) with a host and no space."""
    parts = urlsplit(url)
    if parts.scheme not in ('http', 'https') or not parts.hostname or any(c.isspace() for c in url):
        raise CorpusError(f'{where}: "url" {url[:80]!r} is not an http(s) URL with a host')
    return url


def _page_date(where: str, key: str, value: str) -> str:
    """A page's date field as YYYY-MM-DD; 2026-01-01 when it has none."""
    value = value.strip() or '2026-01-01'
    try:
        date.fromisoformat(value)
    except ValueError:
        raise CorpusError(f'{where}: "{key}" {value[:40]!r} is not a date (YYYY-MM-DD)') from None
    return value


def _page(where: str, fields: dict[str, str], keys: set[str]) -> Document:
    """A page from its fields, each checked: a refusal names the page and the field."""
    unknown = keys - {'url', 'title', 'text', 'snippet', 'date', 'last_updated'}
    if unknown:
        raise CorpusError(f'{where}: unknown field {sorted(unknown)[0]!r} (a page has url, title, text, snippet, date)')
    for key in ('url', 'title', 'text'):
        if not fields.get(key, '').strip():
            raise CorpusError(f'{where}: "{key}" is missing or empty (a page needs url, title and text)')
    url = _page_url(where, fields['url'].strip())
    title, text = ' '.join(fields['title'].split()), ' '.join(fields['text'].split())
    if len(title) > _MAX_TITLE or len(text) > _MAX_TEXT:
        raise CorpusError(f'{where}: the title (at most {_MAX_TITLE}) or text (at most {_MAX_TEXT}) is too long')
    dates = {key: _page_date(where, key, fields.get(key, '')) for key in ('date', 'last_updated')}
    snippet = ' '.join(fields.get('snippet', '').split()) or text[:200]
    return _doc(url, title, snippet, dates['date'], dates['last_updated'], text)


# ---------------------------------------------------------------------------------------------------------------
# The built-in corpus

#: The folder of the built-in pages, one Markdown file each in the format a user's corpus has, read in name order.
#: Topics: the EU AI Act, Python typing and async, renewable energy (and perovskite solar cells), space exploration,
#: nutrition and sleep (and jet lag), quantum computing, electric vehicles and batteries, computing awards, AI agents,
#: and a few general pages.
BUILTIN_CORPUS_FOLDER = Path(__file__).parent / 'corpus'
#: The built-in corpus, indexed: used unless an emulator is given its own.
DEFAULT_CORPUS = load_corpus(BUILTIN_CORPUS_FOLDER)
#: The invented pages of the built-in corpus.
CORPUS: tuple[Document, ...] = DEFAULT_CORPUS.docs


# ---------------------------------------------------------------------------------------------------------------
# Searching a corpus


def relevance(query: str, corpus: Corpus = DEFAULT_CORPUS) -> dict[str, float]:
    """The BM25 score of each corpus page that matches `query`, by URL (pages that do not match are absent)."""
    return {corpus.docs[i].url: score for score, i in corpus.matches(query)}


def best_sentences(doc: Document, query: str, n: int) -> list[str]:
    """The `n` sentences of `doc` holding the most of the query's terms, in page order (the first ones on a tie):
    an answer on solid-state batteries quotes the page's solid-state sentence, not its opening line."""
    wanted = set(_stems(query))
    sentences = doc.sentences
    ranked = sorted(range(len(sentences)), key=lambda i: (-len(wanted & set(_stems(sentences[i]))), i))
    return [sentences[i] for i in sorted(ranked[:n])]


def domain_matches(domain: str, pattern: str) -> bool:
    """Whether a page's domain is `pattern` or one of its subdomains (`europa.eu` matches `ec.europa.eu`)."""
    pattern = pattern.casefold().removeprefix('www.').strip('.')
    domain = domain.casefold()
    return domain == pattern or domain.endswith('.' + pattern)


def _parse_filter_date(value: str) -> date:
    return datetime.strptime(value, '%m/%d/%Y').date()  # noqa: DTZ007 - a calendar date, no time zone involved


def _passes(
    doc: Document,
    allow: list[str],
    deny: list[str],
    after: str | None,
    before: str | None,
    updated_after: str | None,
    updated_before: str | None,
) -> bool:
    if allow and not any(domain_matches(doc.domain, p) for p in allow):
        return False
    if any(domain_matches(doc.domain, p) for p in deny):
        return False
    return _within(date.fromisoformat(doc.date), after, before) and _within(
        date.fromisoformat(doc.last_updated), updated_after, updated_before
    )


def _within(day: date, after: str | None, before: str | None) -> bool:
    """Whether `day` is on or after `after` and on or before `before` (MM/DD/YYYY filters; an unset one holds)."""
    if after and day < _parse_filter_date(after):
        return False
    return not (before and day > _parse_filter_date(before))


def _synthetic(domain: str, query: str, n: int) -> Document:
    """A stand-in page on an allowed domain when the corpus has none there (keeps domain filters honest)."""
    topic = ' '.join(query.split()[:8]) or 'this topic'
    slug = '-'.join(terms(query)[:6]) or 'overview'
    return _doc(
        f'https://{domain}/{slug}' + (f'-{n}' if n else ''),
        f'{topic[:1].upper()}{topic[1:]} | {domain}',
        f'An overview page on {domain} about {topic}.',
        '2026-01-01',
        '2026-06-01',
        f'This page on {domain} gives an overview of {topic}. '
        f'It summarises the main facts and points to further reading. '
        f'The emulator generated it because no stored page matched the domain filter.',
    )


def search_corpus(
    query: str,
    *,
    domain_filter: list[str] | None = None,
    after: str | None = None,
    before: str | None = None,
    updated_after: str | None = None,
    updated_before: str | None = None,
    limit: int = 10,
    fill: bool = True,
    corpus: Corpus = DEFAULT_CORPUS,
) -> list[Document]:
    """The corpus pages that match `query`, best first (BM25), honouring domain (`-x` denies) and date filters.

    Only matching pages are returned: a question the corpus knows nothing about gets no pages at all. With
    `fill`, when the corpus knows the topic but no matching page lies on an allow-listed domain, stand-in pages
    on the allowed domains fill the list (so that domain filters are honoured, not ignored).
    """
    allow, deny = _split_filter(domain_filter or [])
    matched = [corpus.docs[i] for _, i in corpus.matches(query)]
    docs = [doc for doc in matched if _passes(doc, allow, deny, after, before, updated_after, updated_before)]
    if fill and matched and allow and len(docs) < limit:
        docs += _stand_ins(query, allow, deny, limit - len(docs))
    return docs[:limit]


def _split_filter(domain_filter: list[str]) -> tuple[list[str], list[str]]:
    """The allowed domains and the denied ones (written `-domain`) of a domain filter."""
    allow = [p for p in domain_filter if not p.startswith('-')]
    deny = [p[1:] for p in domain_filter if p.startswith('-')]
    return allow, deny


def _stand_ins(query: str, allow: list[str], deny: list[str], wanted: int) -> list[Document]:
    """`wanted` stand-in pages spread over the allowed domains that no denied one covers (none if every one is)."""
    pool = [p.casefold().removeprefix('www.') for p in allow if not any(domain_matches(p, d) for d in deny)]
    if not pool:
        return []
    return [_synthetic(pool[n % len(pool)], query, n // len(pool)) for n in range(wanted)]
