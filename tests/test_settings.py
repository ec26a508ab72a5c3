"""`Settings`: every variable read and checked once, refused the same way by every way in."""

from __future__ import annotations

import math

import pytest

from pydantic_ai_perplexity import ConfigurationError
from pydantic_ai_perplexity._core.researcher import Researcher
from pydantic_ai_perplexity._domain.settings import (
    DEFAULT_MCP_WAIT_SECONDS,
    DEFAULT_WAIT_SECONDS,
    Settings,
    mcp_heartbeat,
    mcp_lean,
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
