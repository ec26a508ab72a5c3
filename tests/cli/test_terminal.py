"""The commands as a person at a terminal sees them: run in a real terminal (tmux), the screen read back."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tmux_support import Terminal

CLI = str(Path(sys.executable).parent / 'pydantic-ai-perplexity')
# CI installs tmux (.ci/run); elsewhere these tests need it too, and say so instead of failing.
pytestmark = pytest.mark.skipif(
    shutil.which('tmux') is None and not os.environ.get('CI'), reason='needs tmux: apt-get install tmux'
)


def _env(tmp_path: Path) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if k in ('PATH', 'HOME', 'LANG', 'LC_ALL', 'VIRTUAL_ENV')}
    return keep | {'TERM': 'xterm-256color', 'PERPLEXITY_STATE_DIR': str(tmp_path / 'state')}


def test_mcp_at_a_terminal_says_it_waits_for_a_client_and_how_to_try_it(tmp_path: Path):
    with Terminal([CLI, 'mcp'], env=_env(tmp_path)) as term:
        screen = term.wait_for('Ctrl-C ends it.')
        assert 'Waiting for an MCP client on stdio' in screen
        assert 'pydantic-ai-perplexity config claude-desktop' in screen and 'docs/mcp.md' in screen
        term.send('C-d')
        assert '[exit 0]' in term.wait_for('[exit ')


def test_doctor_colours_its_verdicts_on_a_terminal_and_says_the_reachability_fix_once(tmp_path: Path):
    env = _env(tmp_path) | {'PERPLEXITY_API_KEY': 'pplx-not-a-real-key', 'PERPLEXITY_BASE_URL': 'http://127.0.0.1:9'}
    with Terminal([CLI, 'doctor'], env=env) as term:
        term.wait_for('[exit 1]')
        coloured = term.screen_with_colours()
        screen = term.screen()
    assert '\x1b[32m[pass]' in coloured and re.search(r'\x1b\[(1;31|31;1|31)m\[FAIL\]', coloured)
    [reachable] = [line for line in screen.splitlines() if line.startswith('[FAIL] API reachable')]
    assert reachable.count('PERPLEXITY_BASE_URL') == 1 and reachable.count('Check the network') == 0
    assert 'fix: make sure http://127.0.0.1:9 is up' in reachable


def test_piped_output_has_no_colour_and_messages_name_flags(tmp_path: Path):
    env = _env(tmp_path) | {'PERPLEXITY_EMULATOR_TIME_SCALE': '0.01'}
    piped = subprocess.run([CLI, 'research', 'q', '--after', 'yesterday'], capture_output=True, text=True, env=env)
    assert piped.returncode == 2 and "Invalid value for --after: 'yesterday' is not a date" in piped.stderr
    refused = subprocess.run(
        [CLI, 'research', 'What is the EU AI Act?', '--effort', 'fast', '--budget', '0.0001'],
        capture_output=True,
        text=True,
        env=env,
    )
    assert refused.returncode != 0 and 'raise the cap with the --budget option' in refused.stderr
    assert 'budget_usd' not in refused.stderr and '\x1b[' not in refused.stderr
    collect = subprocess.run([CLI, 'jobs', 'wait', 'resp_x'], capture_output=True, text=True, env=env)
    assert 'export the key the run was started with' in collect.stderr and 'api_key=' not in collect.stderr
    doctor = subprocess.run([CLI, 'doctor'], capture_output=True, text=True, env=env)
    assert '[pass]' in doctor.stdout and '\x1b[' not in doctor.stdout + doctor.stderr


def test_mcp_emulator_flag_at_a_terminal_says_where_research_goes(tmp_path: Path):
    with Terminal([CLI, 'mcp', '--emulator'], env=_env(tmp_path)) as term:
        screen = term.wait_for('Ctrl-C ends it.')
        assert '--emulator: research runs on the built-in emulator' in screen
        term.send('C-d')
        assert '[exit 0]' in term.wait_for('[exit ')


@pytest.fixture(scope='module')
def ledger_with_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A state directory whose ledger holds two runs, one with a long question; the environment to read it."""
    env = _env(tmp_path_factory.mktemp('runs')) | {'PERPLEXITY_EMULATOR_TIME_SCALE': '0.01'}
    for question in (LONG_QUESTION, 'How do heat pumps work?'):
        done = subprocess.run([CLI, 'research', question, '--effort', 'fast'], capture_output=True, text=True, env=env)
        assert done.returncode == 0, done.stderr
    return env


LONG_QUESTION = (
    'What does the EU AI Act require of providers of general-purpose AI models, and since when does it apply?'
)


@pytest.mark.parametrize('width', [80, 120])
def test_jobs_list_is_a_table_with_a_header_that_never_breaks_a_word(ledger_with_runs: dict[str, str], width: int):
    with Terminal([CLI, 'jobs', 'list'], env=ledger_with_runs, width=width) as term:
        screen = term.wait_for('[exit 0]')
    lines = [line for line in screen.splitlines() if line.strip()][:-1]  # the rows, without the exit line
    header, *rows = lines
    assert header.split()[:2] == ['run', 'status'] and header.split()[-1] == 'question'
    assert len(rows) == 2 and all(len(line) <= width for line in lines)
    for row in rows:  # one line per run: the id whole, the question whole or ending in …
        assert re.match(r'resp_[\w-]{20,} ', row)
    long_row = next(row for row in rows if 'What does' in row)  # 80 columns leave it 'What does the E…'
    assert long_row.endswith((LONG_QUESTION, '…'))
    assert (width == 120) == ('started' in header)  # narrow terminals leave out the date and the effort


@pytest.mark.parametrize('width', [80, 120])
def test_the_sources_are_a_table_whose_cells_never_wrap(ledger_with_runs: dict[str, str], width: int):
    with Terminal([CLI, 'research', LONG_QUESTION, '--effort', 'fast'], env=ledger_with_runs, width=width) as term:
        screen = term.wait_for('[exit 0]')
    table = screen.split('Sources:\n', 1)[1].split('\n\n', 1)[0].splitlines()
    assert table[0].split() == ['#', 'source', 'url', 'cited']
    for row in table[1:]:
        assert len(row) <= width and re.match(r'\[\d+\] ', row) and re.search(r' (yes|no)$', row)
        assert re.search(r' https://\S+ ', row)  # the URL whole, or ending in … on a narrow terminal
