"""`Settings`: every variable read and checked once, refused the same way by every way in."""

from __future__ import annotations

import ast
import math
import os
import re
from pathlib import Path

import pytest

from pydantic_ai_perplexity import ConfigurationError
from pydantic_ai_perplexity._core.researcher import Researcher
from pydantic_ai_perplexity._domain.settings import (
    DEFAULT_MCP_WAIT_SECONDS,
    DEFAULT_WAIT_SECONDS,
    ENV,
    Settings,
    mcp_heartbeat,
    mcp_lean,
    mcp_shared_list,
    read_on_budget,
    trace_steps,
    variable,
    wait_budget,
)


def test_defaults_and_both_wait_budgets_from_one_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = Settings.load({})
    assert (settings.effort, settings.wait_seconds, settings.mcp_wait_seconds) == (
        'medium',
        DEFAULT_WAIT_SECONDS,
        DEFAULT_MCP_WAIT_SECONDS,
    )
    assert settings.budget_usd is None and settings.api_key is None and settings.trace_steps == 'events'
    settings = Settings.load(
        {'PERPLEXITY_WAIT_SECONDS': ' 42 ', 'PERPLEXITY_BUDGET_USD': '$3', 'PERPLEXITY_EFFORT': 'deep-research'}
    )
    assert (settings.wait_seconds, settings.mcp_wait_seconds, settings.budget_usd) == (42.0, 42.0, 3.0)
    assert settings.effort == 'medium'
    assert Settings.load({'PERPLEXITY_WAIT_SECONDS': 'nan'}, wait_seconds=5).wait_seconds == 5.0


@pytest.mark.parametrize(
    ('name', 'value'),
    [
        ('PERPLEXITY_WAIT_SECONDS', 'nan'),
        ('PERPLEXITY_WAIT_SECONDS', 'inf'),
        ('PERPLEXITY_WAIT_SECONDS', '-Infinity'),
        ('PERPLEXITY_WAIT_SECONDS', '-1'),
        ('PERPLEXITY_WAIT_SECONDS', 'soon'),
        ('PERPLEXITY_BUDGET_USD', 'NaN'),
        ('PERPLEXITY_BUDGET_USD', '-0.5'),
        ('PERPLEXITY_BUDGET_USD', 'inf'),
        ('PERPLEXITY_EFFORT', 'deepest'),
        ('PERPLEXITY_TRACE_STEPS', 'loud'),
        ('PERPLEXITY_BASE_URL', 'http://example.com'),
    ],
)
def test_a_bad_value_is_refused_with_the_variable_and_an_example(name: str, value: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        Settings.load({name: value})
    text = str(info.value)
    assert name in text
    assert 'e.g.' in text or 'Use https://' in text


@pytest.mark.parametrize('value', [math.nan, math.inf, -1.0])
def test_an_argument_is_checked_like_its_variable(value: float) -> None:
    with pytest.raises(ConfigurationError, match=r'wait_seconds must be a number of seconds, 0 or more, e\.g\.'):
        Settings.load({}, wait_seconds=value)
    with pytest.raises(ConfigurationError, match=r'budget_usd must be a non-negative number of US dollars'):
        Settings.load({}, budget_usd=value)


def test_the_key_and_tokens_never_show(monkeypatch: pytest.MonkeyPatch) -> None:
    env = {
        'PERPLEXITY_API_KEY': 'pplx-secret-key-1234',
        'PERPLEXITY_MCP_TOKEN': 'tok-secret-5678',
        'PERPLEXITY_LEDGER_URL': 'postgresql://u:hunter2@db/x',
    }
    settings = Settings.load(env)
    assert settings.api_key is not None and settings.api_key.get_secret_value() == 'pplx-secret-key-1234'
    for text in (repr(settings), str(settings)):
        assert 'pplx-secret' not in text and 'tok-secret' not in text and 'hunter2' not in text
    with pytest.raises(ConfigurationError) as info:
        Settings.load({'PERPLEXITY_API_KEY': 'pplx-bad key\u00e9'})
    assert 'pplx-bad' not in str(info.value) and 'PERPLEXITY_API_KEY' in str(info.value)


def test_the_mcp_budget_is_55_seconds_unless_set() -> None:
    assert wait_budget({}, mcp=True) == 55.0 and wait_budget({}) == 600.0
    assert wait_budget({'PERPLEXITY_WAIT_SECONDS': '3'}, mcp=True) == 3.0
    assert wait_budget({'PERPLEXITY_WAIT_SECONDS': '3'}, 7, mcp=True) == 7.0


@pytest.mark.anyio
async def test_nan_wait_is_refused_by_the_researcher_and_doctor_with_the_same_words(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pydantic_ai_perplexity._core.doctor import Check, run_checks

    monkeypatch.setenv('PERPLEXITY_WAIT_SECONDS', 'nan')
    with pytest.raises(ConfigurationError) as info:
        Researcher(api_key='pplx-test', ledger=False)
    checks: list[Check] = []
    monkeypatch.setenv('PERPLEXITY_BASE_URL', 'http://127.0.0.1:9')
    await run_checks(checks.append)
    settings = next(c for c in checks if c.name == 'research settings')
    assert not settings.ok and settings.detail == str(info.value)
    assert (
        "PERPLEXITY_WAIT_SECONDS must be a number of seconds, 0 or more, e.g. PERPLEXITY_WAIT_SECONDS=600; got 'nan'."
        == settings.detail
    )


@pytest.mark.parametrize(('raw', 'lean'), [('', False), ('0', False), ('off', False), ('1', True), (' TRUE ', True)])
def test_the_mcp_lean_setting(raw: str, lean: bool) -> None:
    assert mcp_lean(environ={'PERPLEXITY_MCP_LEAN': raw}) is lean
    assert mcp_lean(True, environ={'PERPLEXITY_MCP_LEAN': 'nonsense'}) is True  # given wins, unread


def test_the_mcp_heartbeat_setting() -> None:
    assert mcp_heartbeat(environ={}) == 15.0
    assert mcp_heartbeat(environ={'PERPLEXITY_MCP_HEARTBEAT_SECONDS': ' 0.5 '}) == 0.5
    assert mcp_heartbeat(2.0, environ={'PERPLEXITY_MCP_HEARTBEAT_SECONDS': 'x'}) == 2.0
    for raw in ('0', '-1', 'soon', 'inf'):
        with pytest.raises(ConfigurationError, match='PERPLEXITY_MCP_HEARTBEAT_SECONDS must be a number of seconds'):
            mcp_heartbeat(environ={'PERPLEXITY_MCP_HEARTBEAT_SECONDS': raw})
    with pytest.raises(ConfigurationError, match='heartbeat_seconds must be'):
        mcp_heartbeat(0.0)


SRC = Path(__file__).resolve().parents[1] / 'src' / 'pydantic_ai_perplexity'
_NAME = re.compile(r'PERPLEXITY_[A-Z0-9_]*[A-Z0-9]')


def _src_texts() -> dict[str, str]:
    """Every text file of the package (code, the MCP skill, the handshake snapshot), by its path under src/."""
    return {
        str(path.relative_to(SRC)): path.read_text(encoding='utf-8')
        for path in sorted(SRC.rglob('*'))
        if path.is_file() and path.suffix in ('.py', '.md', '.json', '.txt', '.toml')
    }


def test_every_variable_named_in_src_is_in_the_one_list() -> None:
    """A new `PERPLEXITY_*` variable must be added to `ENV` (and so is cleared by conftest and read by Settings)."""
    prefix = ENV.EMULATOR_PREFIX.rstrip('_')  # `PERPLEXITY_EMULATOR_\w+`: the emulator's variables as a family
    found: dict[str, set[str]] = {}
    for where, text in _src_texts().items():
        for name in _NAME.findall(text):
            found.setdefault(name, set()).add(where)
    unlisted = {name: sorted(where) for name, where in found.items() if name not in ENV.ALL and name != prefix}
    assert unlisted == {}
    assert len(found) >= 25  # the scan reads the package, not an empty folder
    assert len(set(ENV.ALL)) == len(ENV.ALL) and all(name.startswith('PERPLEXITY_') for name in ENV.ALL)


def test_every_listed_variable_is_used() -> None:
    """The list holds no stale name: each is referred to (as `ENV.<NAME>`) outside the module that lists it."""
    texts = '\n'.join(text for where, text in _src_texts().items() if where != '_base/env.py')
    unused = [attr for attr, value in vars(ENV).items() if value in ENV.ALL and f'ENV.{attr}' not in texts]
    assert unused == []


def _environ_reads(tree: ast.AST) -> list[tuple[int, str]]:
    """Each read of `environ.get(X)`, `getenv(X)` or `environ[X]` whose X names one of our variables."""
    reads: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        arg: ast.expr | None = None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            owner = ast.unparse(node.func.value)
            if (node.func.attr == 'get' and owner.endswith('environ')) or node.func.attr == 'getenv':
                arg = node.args[0]
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            if ast.unparse(node.value).endswith('environ'):
                arg = node.slice
        if arg is not None:
            text = ast.unparse(arg)
            if 'PERPLEXITY_' in text or 'ENV' in text:
                reads.append((node.lineno, text))
    return reads


#: Where a variable may be read directly: `Settings` itself; the wire, for a bare `PerplexityClient()` (it may not
#: import the domain); the emulator, a separate server with its own variables.
_READERS = ('_domain/settings.py', 'client/_settings.py', 'emulator/')


def test_only_settings_reads_the_variables() -> None:
    reads = {
        where: found
        for where, text in _src_texts().items()
        if where.endswith('.py') and not where.startswith(_READERS)
        if (found := _environ_reads(ast.parse(text)))
    }
    assert reads == {}
    probe = ast.parse("os.environ.get(ENV.API_KEY)\nos.environ['PERPLEXITY_X']\nos.getenv(LEDGER_URL_ENV)")
    assert [text for _, text in _environ_reads(probe)] == ['ENV.API_KEY', "'PERPLEXITY_X'", 'LEDGER_URL_ENV']


def test_variable_reads_only_listed_names() -> None:
    assert variable(ENV.EFFORT, {ENV.EFFORT: '  high \n'}) == 'high'
    assert variable(ENV.EFFORT, {}) == ''
    with pytest.raises(ValueError, match=r'PERPLEXITY_NOT_LISTED is not one of the variables in ENV\.ALL'):
        variable('PERPLEXITY_NOT_LISTED', {'PERPLEXITY_NOT_LISTED': 'x'})


def test_the_live_readers_parse_one_way() -> None:
    assert trace_steps({}) == 'events' and trace_steps({ENV.TRACE_STEPS: ' Spans '}) == 'spans'
    assert read_on_budget({}) == 'refuse' and read_on_budget({ENV.ON_BUDGET: 'TIGHTEN'}) == 'tighten'
    with pytest.raises(ConfigurationError, match=r'PERPLEXITY_ON_BUDGET must be "refuse" .* or "tighten", e\.g\.'):
        read_on_budget({ENV.ON_BUDGET: 'maybe'})
    assert Settings.load({ENV.ON_BUDGET: 'maybe'}, on_budget='tighten').on_budget == 'tighten'  # given wins, unread
    assert [mcp_shared_list({ENV.MCP_SHARED_LIST: v}) for v in ('', '0', 'yes', ' 1 ')] == [False, False, True, True]
    assert Settings.load({ENV.PRICES: ' prices.json '}).prices == 'prices.json'


def test_the_researcher_takes_on_budget_from_its_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV.ON_BUDGET, 'tighten')
    assert Researcher(api_key='pplx-test', ledger=False).on_budget == 'tighten'
    monkeypatch.setenv(ENV.ON_BUDGET, 'sometimes')
    with pytest.raises(ConfigurationError, match=r"PERPLEXITY_ON_BUDGET must be .* got 'sometimes'"):
        Researcher(api_key='pplx-test', ledger=False)


def test_conftest_clears_the_one_list() -> None:
    """The autouse fixture ran before this test: no variable of the list is set but the state directory it gives."""
    assert [name for name in ENV.ALL if name in os.environ] == [ENV.STATE_DIR]
