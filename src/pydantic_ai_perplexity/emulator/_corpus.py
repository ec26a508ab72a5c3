"""The emulator's offline world: a small corpus of invented web pages and its BM25 index.

The model table lives in `_models.py` (re-exported here for older imports), built from the live prices.

Everything here is sample data written for the emulator. The pages are not copies of real pages (their URLs
merely look plausible).
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


#: The invented pages. Topics: the EU AI Act, Python typing and async, renewable energy (and perovskite solar
#: cells), space exploration, nutrition and sleep (and jet lag), quantum computing, electric vehicles and batteries,
#: computing awards, and AI agents.
CORPUS: tuple[Document, ...] = (
    # --- EU AI Act
    _doc(
        'https://digital-strategy.ec.europa.eu/en/policies/regulatory-framework-ai',
        "AI Act | Shaping Europe's digital future",
        'The AI Act is a legal framework for artificial intelligence in the EU that sorts AI systems by risk.',
        '2024-08-01',
        '2026-09-20',
        'The AI Act entered into force on 1 August 2024 and applies in stages. '
        'Prohibited practices were the first obligations to apply, followed by rules for general-purpose AI models. '
        'Most obligations for high-risk AI systems apply later, after a transition period. '
        'National authorities and the European AI Office share the work of enforcement.',
    ),
    _doc(
        'https://www.reuters.com/technology/eu-ai-act-timeline-2026-09-18/',
        'EU lawmakers agree changes to AI Act deadlines',
        'Negotiators agreed to adjust the application date for some high-risk obligations of the AI Act.',
        '2026-09-18',
        '2026-09-19',
        'EU negotiators agreed to move some high-risk obligations of the AI Act to a later date. '
        'Supporters said companies needed more time to prepare technical standards. '
        'Critics warned that delays weaken protections for citizens. '
        'The change still needs formal approval by the Parliament and the Council.',
    ),
    _doc(
        'https://artificialintelligenceact.eu/high-level-summary/',
        'High-level summary of the AI Act',
        'A plain-language summary of the AI Act: risk categories, obligations for providers and deployers.',
        '2024-02-27',
        '2026-05-30',
        'The AI Act classifies AI systems into unacceptable, high, limited and minimal risk. '
        'Providers of high-risk systems must run risk management, keep logs and ensure human oversight. '
        'Limited-risk systems such as chatbots carry transparency duties. '
        'General-purpose AI models have their own obligations, stricter for models with systemic risk.',
    ),
    _doc(
        'https://www.euractiv.com/section/tech/news/ai-act-codes-of-practice/',
        'What the AI Act codes of practice mean for model providers',
        "Codes of practice translate the AI Act's rules for general-purpose AI into concrete commitments.",
        '2025-07-10',
        '2026-01-15',
        'Codes of practice give providers of general-purpose AI models a way to show compliance with the AI Act. '
        'They cover transparency, copyright policies and safety for the most capable models. '
        'Signing a code is voluntary but gives providers a presumption of conformity.',
    ),
    # --- Python typing, pydantic, async
    _doc(
        'https://docs.python.org/3/whatsnew/3.14.html',
        "What's New In Python 3.14",
        'The Python 3.14 release: deferred annotations, template strings and a supported free-threaded build.',
        '2025-10-07',
        '2026-02-03',
        'The Python 3.14 release changed how annotations are evaluated: they are now deferred until first read. '
        'It adds template string literals, t-strings, which give the parts of a string to the code that renders it. '
        'The free-threaded build, without the global interpreter lock, became officially supported in this release.',
    ),
    _doc(
        'https://docs.python.org/3/library/asyncio.html',
        'asyncio — Asynchronous I/O',
        'asyncio is a library to write concurrent code using the async/await syntax.',
        '2023-10-02',
        '2026-06-11',
        'asyncio is used as a foundation for Python asynchronous frameworks such as web servers and database drivers. '
        'It provides high-level APIs to run coroutines concurrently and control their execution. '
        'Task groups offer structured concurrency: a group waits for all its tasks and cancels the rest on error.',
    ),
    _doc(
        'https://docs.pydantic.dev/latest/concepts/models/',
        'Models - Pydantic Validation',
        'Pydantic models are classes that inherit from BaseModel and define fields as annotated attributes.',
        '2024-03-15',
        '2026-08-02',
        'Pydantic models validate data against type annotations and return instances with guaranteed types. '
        'Validation errors list every problem with its location in the input. '
        'Models can forbid unknown fields with the extra setting, which makes typos fail loudly. '
        'JSON schema generation lets other tools understand the same model.',
    ),
    _doc(
        'https://peps.python.org/pep-0484/',
        'PEP 484 - Type Hints',
        'PEP 484 introduced a standard syntax for type annotations of Python functions.',
        '2014-09-29',
        '2025-02-01',
        'PEP 484 defined a standard vocabulary for type hints in Python. '
        'Type hints are not enforced at runtime; static checkers such as mypy and pyright use them. '
        'Gradual typing lets a code base adopt annotations one module at a time.',
    ),
    _doc(
        'https://realpython.com/python-concurrency/',
        'Speed Up Your Python Program With Concurrency',
        'A comparison of threading, asyncio and multiprocessing for I/O-bound and CPU-bound Python programs.',
        '2023-11-20',
        '2026-03-04',
        'Threads and asyncio help most with I/O-bound programs that spend time waiting on the network. '
        'CPU-bound work benefits from multiple processes because of the global interpreter lock. '
        'Async code needs libraries that are async themselves, such as async HTTP clients.',
    ),
    # --- Renewable energy and climate
    _doc(
        'https://www.iea.org/reports/renewables-2025',
        'Renewables 2025 - Analysis',
        'Global renewable capacity additions reached a new record, led by solar photovoltaics.',
        '2025-10-07',
        '2026-02-12',
        'Solar photovoltaics accounted for most new renewable capacity added worldwide. '
        'Wind power grew more slowly because of supply chain and permitting constraints. '
        'Grid connection queues are now a major bottleneck for new solar and wind projects. '
        'Renewables are expected to overtake coal as the largest source of electricity generation.',
    ),
    _doc(
        'https://www.irena.org/Publications/2025/Renewable-power-generation-costs',
        'Renewable Power Generation Costs in 2024',
        'The cost of electricity from new solar and onshore wind continued to fall in most markets.',
        '2025-07-22',
        '2025-09-30',
        'Most new solar and onshore wind projects produce electricity more cheaply than new fossil fuel plants. '
        'Battery storage costs fell sharply, which makes solar power available after sunset. '
        'Financing costs remain the largest difference between projects in rich and poor countries.',
    ),
    _doc(
        'https://climate.copernicus.eu/global-climate-highlights-2025',
        'Global Climate Highlights 2025',
        'The past year ranked among the warmest on record, with sea surface temperatures near record levels.',
        '2026-01-09',
        '2026-01-20',
        'Global average temperatures stayed well above pre-industrial levels. '
        'Sea surface temperatures remained near record highs for much of the year. '
        'Heatwaves, droughts and floods affected every continent.',
    ),
    _doc(
        'https://www.carbonbrief.org/analysis-heat-pumps-europe/',
        'Analysis: how heat pumps are changing home heating in Europe',
        'Heat pump sales in Europe recovered after a slump, helped by new subsidies and lower power prices.',
        '2026-04-03',
        '2026-04-05',
        'Heat pumps move heat rather than generate it, so they use far less energy than gas boilers. '
        'Sales in Europe depend strongly on subsidies and on the price of electricity relative to gas. '
        'Installer shortages slow adoption in several countries.',
    ),
    _doc(
        'https://www.nrel.gov/pv/perovskite-solar-cells.html',
        'Perovskite solar cells: efficiency and stability',
        'Perovskite cells rival silicon in efficiency; their stability outdoors is the open problem.',
        '2025-02-11',
        '2026-08-27',
        'Perovskite solar cells reached efficiencies close to those of silicon cells within a decade of research. '
        'Their main weakness is stability: moisture, heat and light degrade the perovskite layer over time. '
        'Encapsulation and more stable compositions have extended the lifetimes of test cells to thousands of '
        'hours. '
        'Tandem cells stack a perovskite layer on silicon to convert more of the spectrum.',
    ),
    # --- Space exploration
    _doc(
        'https://science.nasa.gov/mission/webb/',
        'James Webb Space Telescope - NASA Science',
        'Webb is the largest and most powerful space telescope, observing the universe in infrared light.',
        '2022-07-12',
        '2026-07-01',
        'The James Webb Space Telescope observes in infrared light from an orbit around the second Lagrange point. '
        'It has found galaxies that formed within a few hundred million years after the Big Bang. '
        'Webb also studies the atmospheres of exoplanets by watching starlight pass through them.',
    ),
    _doc(
        'https://www.nasa.gov/humans-in-space/artemis/',
        'Artemis - NASA',
        'With Artemis, NASA plans to return astronauts to the Moon and build a long-term presence there.',
        '2023-04-03',
        '2026-08-19',
        'The Artemis program aims to land astronauts near the lunar south pole. '
        'Artemis II is a crewed flight around the Moon that tests the Orion spacecraft with people aboard. '
        'Later missions rely on commercial landers and a small station in lunar orbit called Gateway.',
    ),
    _doc(
        'https://mars.nasa.gov/mars2020/',
        'Mars 2020 Perseverance Rover',
        'Perseverance searches for signs of ancient microbial life and collects rock samples on Mars.',
        '2021-02-18',
        '2026-05-27',
        'Perseverance landed in Jezero Crater, the site of an ancient lake and river delta. '
        'The rover collects rock cores in sealed tubes for a possible future return to Earth. '
        'Its helicopter companion Ingenuity showed that powered flight is possible on Mars.',
    ),
    _doc(
        'https://www.esa.int/Science_Exploration/Space_Science/Euclid',
        'Euclid - ESA',
        'Euclid maps the shapes and distances of billions of galaxies to study dark matter and dark energy.',
        '2023-07-01',
        '2026-03-19',
        'Euclid is a European space telescope that maps the large-scale structure of the universe. '
        'By measuring how galaxies are distorted, it traces the distribution of dark matter. '
        'Its survey covers about a third of the sky.',
    ),
    # --- Nutrition, sleep, health
    _doc(
        'https://www.nih.gov/news-events/nih-research-matters/coffee-health',
        'Coffee drinking and health outcomes',
        'Moderate coffee consumption is linked to lower risk of several diseases in large observational studies.',
        '2024-06-10',
        '2025-11-02',
        'Large observational studies link moderate coffee drinking with a lower risk of type 2 diabetes. '
        'Caffeine can disturb sleep when consumed late in the day. '
        'Observational results cannot prove that coffee itself causes the benefits.',
    ),
    _doc(
        'https://www.sleepfoundation.org/how-sleep-works/how-much-sleep-do-we-really-need',
        'How Much Sleep Do You Need?',
        'Most adults need seven to nine hours of sleep per night, according to expert panels.',
        '2023-09-14',
        '2026-02-22',
        'Expert panels recommend seven to nine hours of sleep for most adults. '
        'Teenagers need more sleep than adults, and their body clocks shift later. '
        'Regular sleep and wake times support better sleep quality.',
    ),
    _doc(
        'https://www.who.int/news-room/fact-sheets/detail/physical-activity',
        'Physical activity - WHO fact sheet',
        'Adults should do at least 150 to 300 minutes of moderate-intensity aerobic activity a week.',
        '2024-06-26',
        '2026-01-30',
        'The WHO recommends 150 to 300 minutes of moderate aerobic activity per week for adults. '
        'Muscle-strengthening activities on two or more days a week add further health benefits. '
        'Any physical activity is better than none.',
    ),
    _doc(
        'https://www.hsph.harvard.edu/nutritionsource/healthy-eating-plate/',
        'Healthy Eating Plate',
        'A guide to building healthy, balanced meals based on vegetables, whole grains and healthy proteins.',
        '2023-01-18',
        '2025-12-08',
        'A healthy plate is about half vegetables and fruits. '
        'Whole grains are preferred over refined grains. '
        'Water, tea or coffee are better drinks than sugary beverages.',
    ),
    _doc(
        'https://www.cdc.gov/yellow-book/hcp/travel-air-sea/jet-lag.html',
        'Jet lag: the body clock, light and melatonin',
        'Melatonin taken near bedtime at the destination can ease jet lag, most of all after flights east.',
        '2025-04-23',
        '2026-03-05',
        'Jet lag happens when the body clock is out of step with local time after a flight across several time '
        'zones. '
        'Melatonin taken close to bedtime at the destination can reduce jet lag, especially after eastward flights. '
        'Bright light at the right time of day shifts the body clock faster than melatonin alone. '
        'Melatonin is a hormone the body makes in the evening; supplements are sold over the counter in some '
        'countries and need a prescription in others.',
    ),
    # --- Quantum computing
    _doc(
        'https://www.nature.com/articles/quantum-error-correction-milestone',
        'Quantum error correction below threshold',
        'A superconducting processor showed logical qubits whose error rate falls as the code grows.',
        '2024-12-09',
        '2025-06-01',
        'Quantum error correction encodes one logical qubit in many physical qubits. '
        'Below a threshold error rate, larger codes give more reliable logical qubits. '
        'Demonstrating this scaling is a key step toward useful fault-tolerant quantum computers.',
    ),
    _doc(
        'https://www.ibm.com/quantum/roadmap',
        'IBM Quantum roadmap',
        'IBM plans modular quantum processors and error-corrected systems later this decade.',
        '2025-06-10',
        '2026-06-30',
        'Quantum roadmaps now focus on error-corrected logical qubits rather than raw qubit counts. '
        'Modular designs link several chips together to build larger machines. '
        'Useful quantum advantage is expected first in chemistry and materials simulation.',
    ),
    _doc(
        'https://csrc.nist.gov/projects/post-quantum-cryptography',
        'Post-Quantum Cryptography | NIST',
        'NIST standardised quantum-resistant algorithms for key establishment and digital signatures.',
        '2024-08-13',
        '2026-04-21',
        'NIST published standards for post-quantum key encapsulation and digital signatures. '
        'Organisations are advised to inventory their use of public-key cryptography now. '
        'Data encrypted today could be decrypted later by a large quantum computer.',
    ),
    # --- Electric vehicles and batteries
    _doc(
        'https://www.iea.org/reports/global-ev-outlook-2026',
        'Global EV Outlook 2026',
        'Electric car sales kept growing, and more than one in five new cars sold worldwide was electric.',
        '2026-05-14',
        '2026-05-20',
        'More than one in five new cars sold worldwide was electric. '
        'China remained the largest market for electric cars, followed by Europe. '
        'Falling battery prices brought cheaper models to more markets.',
    ),
    _doc(
        'https://www.energy.gov/eere/vehicles/batteries',
        'Batteries for electric vehicles',
        'Lithium-ion batteries dominate electric vehicles; research targets lower cost and faster charging.',
        '2024-03-01',
        '2026-02-14',
        'Lithium-ion batteries power nearly all electric vehicles today. '
        'Lithium iron phosphate cells are cheaper and last longer but store less energy per kilogram. '
        'Solid-state batteries promise higher energy density but are not yet produced at scale.',
    ),
    _doc(
        'https://www.nature.com/articles/solid-state-batteries-explained',
        'How solid-state batteries work',
        'A solid-state battery replaces the liquid electrolyte of a lithium-ion cell with a solid one.',
        '2025-10-02',
        '2026-07-15',
        'A solid-state battery replaces the flammable liquid electrolyte of a lithium-ion cell with a solid '
        'electrolyte, such as a ceramic, a glass or a polymer. '
        'The solid electrolyte makes a lithium-metal anode possible, which stores more energy per kilogram. '
        'Carmakers test solid-state cells for electric vehicles, but thin, defect-free solid layers are still hard '
        'to make at low cost, so they are not yet produced at scale.',
    ),
    _doc(
        'https://www.theverge.com/transportation/ev-charging-networks',
        'The state of EV charging networks',
        'Fast-charging networks are growing, but reliability and payment remain common complaints.',
        '2026-03-11',
        '2026-03-12',
        'Public fast chargers are growing quickly along major highways. '
        'Drivers still report broken chargers and confusing payment systems. '
        'A common plug standard is simplifying charging in North America.',
    ),
    _doc(
        'https://amturing.acm.org/about-the-award',
        'About the A.M. Turing Award | ACM',
        'The ACM A.M. Turing Award honours lasting contributions to computing; it is announced each spring.',
        '2024-03-05',
        '2026-04-02',
        "The ACM's Turing Award is given each year for contributions of lasting importance to computing. "
        'It is often called the highest honour in computer science and carries a prize of one million US dollars. '
        'The ACM announces each award in the spring, and this page names no winner: check the ACM news page for '
        'the latest award.',
    ),
    # --- AI agents, LLMs, tooling
    _doc(
        'https://modelcontextprotocol.io/docs/getting-started/intro',
        'Introduction - Model Context Protocol',
        'MCP is an open protocol that standardises how applications provide context and tools to language models.',
        '2024-11-25',
        '2026-07-28',
        'The Model Context Protocol connects language model applications to tools and data sources. '
        'Servers expose tools, resources and prompts; clients such as desktop assistants call them. '
        'Transports include standard input and output for local servers and HTTP for remote ones.',
    ),
    _doc(
        'https://ai.pydantic.dev/agents/',
        'Agents - Pydantic AI',
        "Agents are Pydantic AI's primary interface for interacting with language models and tools.",
        '2024-12-02',
        '2026-08-30',
        'An agent combines a model, instructions, tools and an output type. '
        "Tools are plain Python functions whose arguments are validated from the model's call. "
        'Structured output is validated against a Pydantic model before it reaches the application.',
    ),
    _doc(
        'https://arxiv.org/abs/2403.14720',
        'Defending Against Indirect Prompt Injection Attacks With Spotlighting',
        'Spotlighting marks untrusted input so that a language model can tell data from instructions.',
        '2024-03-20',
        '2024-03-20',
        'Indirect prompt injection hides instructions in data that a language model reads, such as web pages. '
        'Spotlighting transforms untrusted text so that the model keeps track of its provenance. '
        'Delimiting, datamarking and encoding are three variants with different strength.',
    ),
    _doc(
        'https://docs.perplexity.ai/docs/agent-api/overview',
        'Agent API overview',
        'The Agent API runs web research with a choice of models, tools and effort levels.',
        '2026-02-10',
        '2026-09-26',
        'The Agent API combines web search, page fetching and a language model in one request. '
        'Effort levels bundle a model, tools and a step budget, from fast to xhigh. '
        'Long runs can be started in background mode and polled or streamed until they finish.',
    ),
    # --- General pages used when nothing matches
    _doc(
        'https://en.wikipedia.org/wiki/Research',
        'Research - Wikipedia',
        'Research is creative and systematic work undertaken to increase the stock of knowledge.',
        '2001-10-15',
        '2026-09-01',
        'Research is systematic work to increase knowledge and to use it in new ways. '
        'It usually starts with a question and a review of what is already known. '
        'Good research states its methods so that others can check and repeat it.',
    ),
    _doc(
        'https://guides.lib.berkeley.edu/evaluating-resources',
        'Evaluating Resources - Library Guides',
        'How to judge whether a source is reliable: authority, purpose, evidence and date.',
        '2019-08-20',
        '2026-01-11',
        'A reliable source names its author and explains how it knows what it claims. '
        'Check the date, because facts in fast-moving fields go out of date quickly. '
        'Compare several independent sources before trusting a surprising claim.',
    ),
    _doc(
        'https://www.britannica.com/topic/scientific-method',
        'Scientific method | Definition, Steps, & Application',
        'The scientific method is a way of investigating questions through observation and experiment.',
        '2024-05-02',
        '2026-04-14',
        'The scientific method tests ideas against observations and experiments. '
        'Hypotheses that fail their tests are revised or discarded. '
        'Results become trustworthy when independent groups reproduce them.',
    ),
)

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


#: The built-in corpus (`CORPUS`, indexed), used unless an emulator is given its own.
DEFAULT_CORPUS = Corpus(CORPUS)


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
    published = date.fromisoformat(doc.date)
    updated = date.fromisoformat(doc.last_updated)
    if after and published < _parse_filter_date(after):
        return False
    if before and published > _parse_filter_date(before):
        return False
    if updated_after and updated < _parse_filter_date(updated_after):
        return False
    return not (updated_before and updated > _parse_filter_date(updated_before))


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
    allow = [p for p in domain_filter or () if not p.startswith('-')]
    deny = [p[1:] for p in domain_filter or () if p.startswith('-')]
    matched = [corpus.docs[i] for _, i in corpus.matches(query)]
    docs = [doc for doc in matched if _passes(doc, allow, deny, after, before, updated_after, updated_before)]
    if fill and matched and allow and len(docs) < limit:
        pool = [p.casefold().removeprefix('www.') for p in allow if not any(domain_matches(p, d) for d in deny)]
        n = 0
        while len(docs) < limit and pool:
            docs.append(_synthetic(pool[n % len(pool)], query, n // len(pool)))
            n += 1
    return docs[:limit]


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


def _page(where: str, fields: dict[str, str], keys: set[str]) -> Document:
    """A page from its fields, each checked: a refusal names the page and the field."""
    unknown = keys - {'url', 'title', 'text', 'snippet', 'date', 'last_updated'}
    if unknown:
        raise CorpusError(f'{where}: unknown field {sorted(unknown)[0]!r} (a page has url, title, text, snippet, date)')
    for key in ('url', 'title', 'text'):
        if not fields.get(key, '').strip():
            raise CorpusError(f'{where}: "{key}" is missing or empty (a page needs url, title and text)')
    url = fields['url'].strip()
    parts = urlsplit(url)
    if parts.scheme not in ('http', 'https') or not parts.hostname or any(c.isspace() for c in url):
        raise CorpusError(f'{where}: "url" {url[:80]!r} is not an http(s) URL with a host')
    title, text = ' '.join(fields['title'].split()), ' '.join(fields['text'].split())
    if len(title) > _MAX_TITLE or len(text) > _MAX_TEXT:
        raise CorpusError(f'{where}: the title (at most {_MAX_TITLE}) or text (at most {_MAX_TEXT}) is too long')
    dates: dict[str, str] = {}
    for key in ('date', 'last_updated'):
        value = fields.get(key, '').strip() or '2026-01-01'
        try:
            date.fromisoformat(value)
        except ValueError:
            raise CorpusError(f'{where}: "{key}" {value[:40]!r} is not a date (YYYY-MM-DD)') from None
        dates[key] = value
    snippet = ' '.join(fields.get('snippet', '').split()) or text[:200]
    return _doc(url, title, snippet, dates['date'], dates['last_updated'], text)
