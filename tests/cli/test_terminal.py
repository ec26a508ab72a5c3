"""The commands as a person at a terminal sees them: run in a real terminal (tmux), the screen read back."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.tmux import Terminal

CLI = str(Path(sys.executable).parent / 'pydantic-ai-perplexity')
# CI installs tmux (.ci/run); elsewhere these tests skip without it, and say so (in CI a skip fails: support.skips).
pytestmark = [
    pytest.mark.compat,
    pytest.mark.skipif(shutil.which('tmux') is None, reason='needs tmux: apt-get install tmux'),
]


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


def _lines(screen: str) -> list[str]:
    """The screen's lines up to the exit line, trailing blanks dropped (capture-pane -J: as the program wrote them)."""
    return screen.split('[exit ', 1)[0].rstrip('\n').splitlines()


def test_jobs_list_shows_date_status_effort_cost_and_more_of_the_question_on_wider_terminals(
    ledger_with_runs: dict[str, str],
):
    shown: dict[int, str] = {}
    for width in (80, 120):
        with Terminal([CLI, 'jobs', 'list'], env=ledger_with_runs, width=width) as term:
            lines = _lines(term.wait_for('[exit 0]'))
        assert all(len(line) <= width for line in lines), (width, lines)
        # Two lines per run: the id (whole, to copy), status and cost; then the date, the effort and the question.
        assert lines[0].split() == ['run', 'status', 'cost'] and lines[1].split() == ['started', 'effort', 'question']
        rows = lines[2:]
        assert len(rows) == 4
        for first, second in zip(rows[::2], rows[1::2], strict=True):
            assert re.fullmatch(r'resp_[\w-]{36}  completed +emulated', first), first
            assert re.match(r'  \d{4}-\d\d-\d\d \d\d:\d\d  fast +\S', second), second
        long_row = next(row for row in rows if 'What does' in row)
        question = long_row.split('fast', 1)[1].strip()
        assert question.endswith('…') and LONG_QUESTION.startswith(question[:-1])
        assert LONG_QUESTION[len(question) - 1] == ' '  # cut between words, never inside one
        shown[width] = question
    assert len(shown[120]) > len(shown[80]) + 30  # a wider terminal shows more of the question


def _piped_answer(env: dict[str, str], question: str) -> str:
    """The answer as `research` prints it piped: never wrapped (what a terminal shows must be the same words)."""
    done = subprocess.run([CLI, 'research', question, '--effort', 'fast'], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize('width', [80, 120])
def test_research_wraps_the_answer_between_words_and_prints_every_url_whole(
    ledger_with_runs: dict[str, str], width: int
):
    piped = _piped_answer(ledger_with_runs, LONG_QUESTION)
    with Terminal([CLI, 'research', LONG_QUESTION, '--effort', 'fast'], env=ledger_with_runs, width=width) as term:
        lines = _lines(term.wait_for('[exit 0]'))
    # Nothing the terminal had to wrap itself (that splits words): every line fits as written.
    assert all(len(line) <= width for line in lines), [line for line in lines if len(line) > width]
    screen = '\n'.join(lines)
    answer = screen.split('searching', 1)[1].split('\n', 1)[1]  # after the progress lines
    answer = answer[answer.index('Here is') :].split('\nSources:\n')[0]
    # The same words as piped, only the line breaks moved: no word, marker or id was split.
    assert answer.split() == piped.split('\nSources:\n')[0].split()
    urls = re.findall(r'^    (https://\S+)$', piped, re.MULTILINE)
    assert urls
    for url in urls:  # each URL whole on a line of its own, to be copied
        assert f'    {url}' in lines
    assert not any('…' in line for line in lines if 'https://' in line)
    footer = screen.rsplit('\n\n', 1)[1]
    [run_id] = re.findall(r'\bresp_[\w-]+', footer)
    assert len(run_id) == len('resp_') + 36 and run_id in footer.split()  # the id whole


@pytest.mark.parametrize('width', [80, 120])
def test_the_live_progress_line_keeps_its_timer_and_says_the_question_once(tmp_path: Path, width: int):
    env = _env(tmp_path) | {'PERPLEXITY_EMULATOR_TIME_SCALE': '0.05'}
    question = LONG_QUESTION.replace('?', ' [[emulate: duration=200]]?')
    timer = re.compile(r'^\S \d:\d\d:\d\d (.+)$')  # spinner, elapsed time, then the step and the counts
    with Terminal([CLI, 'research', question, '--effort', 'high'], env=env, width=width) as term:
        end = time.monotonic() + 60
        while True:  # poll (with a deadline) until the live line shows a step after the first search
            live = [m for line in _lines(term.screen()) if (m := timer.match(line))]
            if live and 'search' in live[-1].group(1):
                break
            assert time.monotonic() < end, term.screen()
            time.sleep(0.05)
        line = live[-1].group(0)
        assert len(line) <= width, line
        assert line.count(LONG_QUESTION[:25]) <= 1  # the step says it (searching: ...); no title repeats it
        assert '[exit 0]' in term.wait_for('[exit ')


def test_a_run_that_found_nothing_says_so_in_yellow_and_strict_makes_it_fail(tmp_path: Path):
    env = _env(tmp_path) | {'PERPLEXITY_EMULATOR_TIME_SCALE': '0.01'}
    question = 'What is the airspeed velocity of an unladen zorblax?'
    with Terminal([CLI, 'research', question, '--effort', 'fast'], env=env, width=80) as term:
        screen = term.wait_for('[exit ')
        coloured = term.screen_with_colours()
    assert '[exit 0]' in screen and '✓' not in screen  # not the green mark of a success
    assert re.search(r'\x1b\[33m!', coloured) and re.search(r'\x1b\[33mFound nothing: ', coloured)
    strict = subprocess.run(
        [CLI, 'research', question, '--effort', 'fast', '--strict'], capture_output=True, text=True, env=env
    )
    assert strict.returncode == 3 and 'Found nothing: the run completed without a single source' in strict.stderr
    found = subprocess.run(
        [CLI, 'research', 'How do heat pumps work?', '--effort', 'fast', '--strict'],
        capture_output=True,
        text=True,
        env=env,
    )
    assert found.returncode == 0 and 'Found nothing' not in found.stderr
