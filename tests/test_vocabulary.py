"""One vocabulary: run statuses and efforts are defined once, and every layer (wire, ledger, MCP, CLI, emulator) uses
those definitions instead of spelling its own."""

from __future__ import annotations

import ast
import json
from collections.abc import Callable, Iterator
from datetime import date
from pathlib import Path
from typing import Any, get_args

import httpx2
import pytest

from pydantic_ai_perplexity._base.efforts import (
    DEFAULT_EFFORT,
    EFFORTS,
    LEGACY_PRESETS,
    effort_level,
    normalize_effort,
)
from pydantic_ai_perplexity._base.env import ENV
from pydantic_ai_perplexity._base.errors import InvalidArgumentError
from pydantic_ai_perplexity._base.statuses import (
    CANCELLING,
    END_EVENTS,
    RESERVED,
    ROW_STATUSES,
    SETTLED_STATUSES,
    STARTING,
    TERMINAL_STATUSES,
    UNFINISHED_ROWS,
    UNFINISHED_STATUSES,
    RunStatus,
)
from pydantic_ai_perplexity._core.researcher import Researcher
from pydantic_ai_perplexity._domain.options import ResearchOptions, search_filters
from pydantic_ai_perplexity._domain.pricing import PriceTable
from pydantic_ai_perplexity._domain.settings import Settings
from pydantic_ai_perplexity._ledger import ESTIMATED_COST_USD, estimate_cost
from pydantic_ai_perplexity.client import TERMINAL_STATUSES as WIRE_TERMINAL
from pydantic_ai_perplexity.client import AgentEvent, Response
from pydantic_ai_perplexity.emulator._errors import ApiError
from pydantic_ai_perplexity.emulator._validation import resolve_effort

SRC = Path(__file__).resolve().parents[1] / 'src' / 'pydantic_ai_perplexity'


def test_every_api_status_is_either_terminal_or_unfinished() -> None:
    api = set(get_args(RunStatus))
    assert api == TERMINAL_STATUSES | UNFINISHED_STATUSES and not TERMINAL_STATUSES & UNFINISHED_STATUSES
    assert 'requires_action' in UNFINISHED_STATUSES  # the run goes on once the caller sends its tools' results
    assert SETTLED_STATUSES == TERMINAL_STATUSES | {'requires_action'}
    assert set(END_EVENTS.values()) == TERMINAL_STATUSES
    assert WIRE_TERMINAL is TERMINAL_STATUSES


def test_a_ledger_row_is_unfinished_exactly_when_its_status_is_not_terminal() -> None:
    assert set(UNFINISHED_ROWS) == set(ROW_STATUSES) - TERMINAL_STATUSES
    assert {RESERVED, STARTING, CANCELLING} <= set(UNFINISHED_ROWS) and UNFINISHED_STATUSES <= set(UNFINISHED_ROWS)
    assert len(set(ROW_STATUSES)) == len(ROW_STATUSES) == 10


def test_the_wire_models_read_the_shared_sets() -> None:
    for status in ROW_STATUSES:
        assert Response(id='resp_1', status=status).done is (status in TERMINAL_STATUSES)
    for event in (*END_EVENTS, 'error', 'response.in_progress', 'response.output_text.delta'):
        assert AgentEvent(type=event).is_terminal is (event in END_EVENTS or event == 'error')


#: Statuses that only a definition of "unfinished" (or of "ended") would list together.
_UNFINISHED_WORDS = {*UNFINISHED_ROWS}


def _literal_words(tree: ast.AST, vocabulary: set[str], *, keys: bool) -> Iterator[tuple[int, list[str]]]:
    """The words of `vocabulary` in each set, tuple and list literal (and, with `keys`, each dict's keys), by line.
    `Literal[...]` annotations are types (an output item's status, say), not such collections."""
    typed = {
        id(node.slice) for node in ast.walk(tree) if isinstance(node, ast.Subscript) and 'Literal' in ast.unparse(node)
    }
    for node in ast.walk(tree):
        if id(node) in typed:
            continue
        if isinstance(node, ast.Set | ast.Tuple | ast.List):
            elements = node.elts
        elif isinstance(node, ast.Dict) and keys:
            elements = [key for key in node.keys if key is not None]
        else:
            continue
        yield node.lineno, [e.value for e in elements if isinstance(e, ast.Constant) and e.value in vocabulary]


def _spelled_in_src(find: Callable[[ast.AST], list[tuple[int, list[str]]]], home: str) -> dict[str, object]:
    """What `find` reports in each module of the package but `home`, the one that defines the vocabulary."""
    return {
        path.relative_to(SRC).as_posix(): found
        for path in sorted(SRC.rglob('*.py'))
        if path.relative_to(SRC).as_posix() != home
        if (found := find(ast.parse(path.read_text(encoding='utf-8'))))
    }


def _status_sets(tree: ast.AST) -> list[tuple[int, list[str]]]:
    """Literals that spell a set of run statuses: two or more, one of them unfinished, or all four terminal ones."""
    return [
        (line, words)
        for line, words in _literal_words(tree, {*ROW_STATUSES, *END_EVENTS}, keys=True)
        if len(words) >= 2 and (set(words) & _UNFINISHED_WORDS or TERMINAL_STATUSES <= set(words))
    ]


def test_no_module_spells_its_own_set_of_statuses() -> None:
    assert _spelled_in_src(_status_sets, '_base/statuses.py') == {}
    probe = ast.parse(
        "A = ('queued', 'in_progress')\nB: Literal['in_progress', 'completed']\nC = {'failed', 'cancelled'}"
    )
    assert _status_sets(probe) == [(1, ['queued', 'in_progress'])]


# -- efforts ---------------------------------------------------------------------------------------------------------

_NAMES = (*EFFORTS, 'fast@2026-10-16.0', ' High ', *LEGACY_PRESETS, 'XHIGH@2026-01-02.3')


@pytest.mark.parametrize('name', _NAMES)
def test_an_effort_is_read_one_way_everywhere(name: str) -> None:
    level = normalize_effort(name).partition('@')[0]
    assert level in EFFORTS and effort_level(name) == level
    assert PriceTable().bundle(name) is PriceTable().bundle(level)
    assert estimate_cost(name) == ESTIMATED_COST_USD[level]
    assert Settings.load({ENV.EFFORT: name}).effort == normalize_effort(name)
    # The emulator answers as the API: a pinned name is its level; the old preset names only as `preset`.
    wire = name.strip().lower()
    if wire in LEGACY_PRESETS:
        assert resolve_effort(wire, field='preset') == level
        with pytest.raises(ApiError):
            resolve_effort(wire, field='effort')
    else:
        assert resolve_effort(wire, field='effort') == level


@pytest.mark.parametrize('name', ['deepest', 'medium@latest', 'fast-searches', ''])
def test_an_unknown_effort_is_refused_when_given_and_counts_as_the_default_when_recorded(name: str) -> None:
    with pytest.raises(InvalidArgumentError, match=r'Unknown effort .*: use one of fast, low, medium, high, xhigh'):
        normalize_effort(name)
    assert effort_level(name) == DEFAULT_EFFORT and estimate_cost(name) == ESTIMATED_COST_USD[DEFAULT_EFFORT]
    with pytest.raises(ApiError):
        resolve_effort(name, field='preset')


def _effort_lists(tree: ast.AST) -> list[tuple[int, list[str]]]:
    """Set, tuple and list literals that spell three or more efforts (a table keyed by effort is not one)."""
    return [(line, words) for line, words in _literal_words(tree, set(EFFORTS), keys=False) if len(words) >= 3]


def test_no_module_spells_its_own_list_of_efforts() -> None:
    assert _spelled_in_src(_effort_lists, '_base/efforts.py') == {}
    probe = ast.parse("A = ('fast', 'low', 'medium')\nB: Literal['low', 'medium', 'high']\nC = {'low': 1, 'high': 2}")
    assert _effort_lists(probe) == [(1, ['fast', 'low', 'medium'])]


# -- search filters --------------------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_run_and_the_search_api_send_the_same_filters() -> None:
    """Both are built by `search_filters`: the `web_search` tool's filters of a run equal the Search API's body."""
    given = {'domains': ['https://www.Nature.com/x', '-reddit.com'], 'after': '2026-01-31', 'before': date(2026, 3, 1)}
    bodies: list[dict[str, Any]] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        bodies.append(json.loads(request.content))
        return httpx2.Response(200, json={'id': 'search_1', 'results': []})

    async with httpx2.AsyncClient(transport=httpx2.MockTransport(handler)) as http:
        async with Researcher(api_key='pplx-test', ledger=False, http_client=http) as researcher:
            await researcher.search('q', max_results=3, **given)
            await researcher.search('q', recency='week')
    tool = ResearchOptions.model_validate(given).to_request('fast')['tools'][0]
    expected = {
        'search_domain_filter': ['nature.com', '-reddit.com'],
        'search_after_date_filter': '01/31/2026',
        'search_before_date_filter': '03/01/2026',
    }
    assert (
        tool
        == {'type': 'web_search', 'filters': expected}
        == {'type': 'web_search', 'filters': search_filters(**given)}
    )
    assert bodies == [
        {'query': 'q', 'max_results': 3, **expected},
        {'query': 'q', 'max_results': 10, 'search_recency_filter': 'week'},
    ]
    with pytest.raises(InvalidArgumentError, match='recency'):
        search_filters(recency='fortnight')


# -- MCP arguments ---------------------------------------------------------------------------------------------------


def test_an_mcp_call_and_an_mcp_task_read_arguments_one_way() -> None:
    """`ToolSpec.parse_mcp` is the one reading (the plain call's and the task's): a null is an argument left out."""
    from pydantic_ai_perplexity._core.tool_spec import RESEARCH, SEARCH

    given = {'query': 'q', 'effort': None, 'domains': None, 'recency': 'week'}
    assert RESEARCH.parse_mcp(given) == RESEARCH.parse({'query': 'q', 'recency': 'week'})
    assert SEARCH.parse_mcp({'query': 'q', 'max_results': None}) == SEARCH.parse({'query': 'q'})  # the default
    with pytest.raises(InvalidArgumentError, match='effort'):
        RESEARCH.parse_mcp({'query': 'q', 'effort': 'deepest'})
    users = [
        path.name
        for path in sorted((SRC / 'mcp' / 'server').glob('*.py'))
        if '.parse_mcp(' in path.read_text(encoding='utf-8')
    ]
    assert users == ['_tasks.py', '_tools.py']
    assert not any('.parse({' in path.read_text(encoding='utf-8') for path in (SRC / 'mcp').rglob('*.py'))


# -- the emulator's pace ---------------------------------------------------------------------------------------------


def test_every_watched_emulator_takes_its_pace_from_one_constant(monkeypatch: pytest.MonkeyPatch) -> None:
    """`serve`, the `emulator` command and the stand-in for the API (CLI, `mcp --emulator`, scripts) agree."""
    import inspect

    from pydantic_ai_perplexity._base.env import OFFLINE_TIME_SCALE
    from pydantic_ai_perplexity.cli import cli
    from pydantic_ai_perplexity.emulator import serve
    from pydantic_ai_perplexity.emulator._offline import offline_time_scale

    assert inspect.signature(serve).parameters['time_scale'].default == OFFLINE_TIME_SCALE
    command = cli.commands['emulator']
    (option,) = [p for p in command.params if p.name == 'time_scale']
    assert option.default == OFFLINE_TIME_SCALE and option.envvar == ENV.EMULATOR_TIME_SCALE
    assert offline_time_scale() == OFFLINE_TIME_SCALE and offline_time_scale(0.5) == 0.5
    monkeypatch.setenv(ENV.EMULATOR_TIME_SCALE, ' 0.2 ')
    assert offline_time_scale() == 0.2 and offline_time_scale(0.0) == 0.0
    for bad in ('fast', '-1', 'nan', 'inf'):
        monkeypatch.setenv(ENV.EMULATOR_TIME_SCALE, bad)
        with pytest.raises(ValueError, match=rf"PERPLEXITY_EMULATOR_TIME_SCALE must be .*; got '{bad}'"):
            offline_time_scale()
    sources = '\n'.join(path.read_text(encoding='utf-8') for path in SRC.rglob('*.py'))
    assert 'EMULATOR_TIME_SCALE) or' not in sources and "'0.05'" not in sources
