"""The command as a researcher uses it: real subprocesses, stdout for results, stderr for progress and notices."""

from __future__ import annotations

import contextlib
import json
import re
import socket
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from pydantic_ai_perplexity._domain.pricing import limit_request, reservation
from pydantic_ai_perplexity._ledger import Ledger, RunRecord
from pydantic_ai_perplexity.cli import cli
from pydantic_ai_perplexity.emulator import Emulator
from support.cli import cli_env, run, run_all, run_each
from support.postgres import fresh_schema

ANSI = re.compile(r'\x1b\[[0-9;?]*[A-Za-z]')
STEP_LINE = re.compile(r'^  \[\s*\d+\.\d+s\] ')


@pytest.mark.slow
def test_research_without_a_key_prints_the_answer_on_stdout_and_progress_on_stderr(tmp_path: Path):
    text, as_json, failed, refused = run_all(
        ('research', 'What is the EU AI Act?', '--effort', 'low', '--fetch-pages', '2'),
        ('research', 'What is the EU AI Act?', '--effort', 'fast', '--json'),
        ('research', 'What is the EU AI Act? [[emulate: fail]]', '--effort', 'fast'),
        ('research', 'What is the EU AI Act?', '--budget', '0'),
        env=cli_env(tmp_path),
    )
    assert text.returncode == 0, text.stderr
    err = text.stderr.splitlines()
    assert err[0].startswith('No PERPLEXITY_API_KEY set: using the built-in emulator at http://127.0.0.1:')
    assert sum('PERPLEXITY_API_KEY' in line for line in err) == 1
    steps = [line for line in err if STEP_LINE.match(line)]
    assert any('searching: What is the EU AI Act?' in s for s in steps)
    assert any(re.search(r'fetched \d+ pages?', s) for s in steps) and any('writing the answer' in s for s in steps)
    assert err[-1].startswith('completed in ') and 'searches' in err[-1]
    assert len(err) == len(steps) + 2  # the notice, the steps, the closing line: nothing else
    assert not ANSI.search(text.stdout + text.stderr)

    answer, _, rest = text.stdout.partition('\nSources:\n')
    markers = set(re.findall(r'\[(\d+)\]', answer))
    # Each source: `[n] title` (marked when not cited), then its URL whole on a line of its own, to be copied.
    listed = dict(re.findall(r'^\[(\d+)\] .+\n    (https://\S+)$', rest, flags=re.MULTILINE))
    assert markers and markers <= set(listed)
    footer = text.stdout.strip().splitlines()[-1]
    assert re.fullmatch(r'completed · emulated · low · openai/gpt-6-luna · \$\d+\.\d{4} · resp_[\w-]+', footer)
    assert 'searching' not in text.stdout and 'emulator' not in text.stdout

    assert as_json.returncode == 0, as_json.stderr
    data = json.loads(as_json.stdout)
    assert data['status'] == 'completed' and data['sources'] and data['usage']['cost_usd'] > 0
    assert data['emulated'] is True
    assert any(STEP_LINE.match(line) for line in as_json.stderr.splitlines())

    assert failed.returncode == 1 and 'The run ended failed' in failed.stderr
    assert failed.stdout.strip().splitlines()[-1].startswith('failed · emulated · fast')

    assert refused.returncode == 1 and refused.stdout == ''
    assert 'Budget exceeded' in refused.stderr


def test_on_a_terminal_progress_is_a_live_display_and_stdout_is_unchanged(tmp_path: Path):
    done = run('research', 'What is the EU AI Act?', '--effort', 'medium', env=cli_env(tmp_path), tty=True)
    assert done.returncode == 0, done.stderr
    assert '\x1b[?25l' in done.stderr and '\x1b[?25h' in done.stderr  # the cursor hidden while live, then restored
    assert '\r\x1b[2K' in done.stderr  # the status line redrawn in place
    plain = ANSI.sub('', done.stderr)
    assert 'searching: What is the EU AI Act?' in plain and 'writing the answer' in plain
    assert '✓ completed in' in plain
    assert not any(STEP_LINE.match(line) for line in plain.splitlines())  # not the plain-line format
    assert not ANSI.search(done.stdout)
    assert 'Sources:' in done.stdout and done.stdout.strip().splitlines()[-1].startswith(
        'completed · emulated · medium'
    )


@pytest.mark.slow
def test_jobs_list_show_wait_and_cancel_runs_started_by_another_process(emulator: Emulator, tmp_path: Path):
    env = cli_env(tmp_path, PERPLEXITY_API_KEY=emulator.api_key, PERPLEXITY_BASE_URL=emulator.base_url)
    quick, slow = run_all(
        ('research', 'What is the EU AI Act?', '--effort', 'fast', '--no-wait'),
        ('research', 'A long survey of fusion energy [[emulate: duration=6000]]', '--effort', 'high', '--no-wait'),
        env=env,
    )
    quick_id, slow_id = quick.stdout.strip(), slow.stdout.strip()
    for started in (quick, slow):
        assert started.returncode == 0, started.stderr
        assert re.fullmatch(r'resp_[\w-]+', started.stdout.strip())
        assert f'jobs wait {started.stdout.strip()}' in started.stderr and 'emulator' not in started.stderr
        assert started.stderr.startswith('Started (emulated): ')

    listed, shown, missing, waited = run_all(
        ('jobs', 'list'),
        ('jobs', 'show', slow_id),
        ('jobs', 'show', 'resp_nope'),
        ('jobs', 'wait', quick_id),
        env=env,
    )
    # After the others: a cancelled emulated run is settled at no cost, which `jobs show` would otherwise race.
    cancelled = run('jobs', 'cancel', slow_id, env=env)
    assert listed.returncode == 0 and quick_id in listed.stdout and slow_id in listed.stdout
    costs = {line.split()[0]: line.split()[4] for line in listed.stdout.splitlines()[1:]}  # run status date time cost
    assert costs[quick_id] == costs[slow_id] == 'emulated'  # never read as real spend
    assert 'A long survey of fusion energy' in listed.stdout
    assert shown.returncode == 0 and re.search(rf'^run:\s+{slow_id}$', shown.stdout, flags=re.MULTILINE)
    assert re.search(r'^status:\s+\w+ \(emulated: not Perplexity\)$', shown.stdout, flags=re.MULTILINE)
    # Until its actual cost is known, a run counts the most its request can cost (it was a flat $1.00 per `high`).
    sent = limit_request({'effort': 'high'})  # the request as sent: with the limits its reservation assumes
    most = reservation('A long survey of fusion energy [[emulate: duration=6000]]', sent).usd
    assert re.search(rf'^cost:\s+~\${most:.4f} \(estimate\)$', shown.stdout, flags=re.MULTILINE)
    assert waited.returncode == 0, waited.stderr
    assert 'Sources:' in waited.stdout and waited.stdout.strip().splitlines()[-1].startswith(
        'completed · emulated · fast'
    )
    assert cancelled.returncode == 0 and cancelled.stdout.strip() == f'{slow_id} cancelled'

    assert missing.returncode == 1 and "No run 'resp_nope'" in missing.stderr

    records = {r['response_id']: r for r in json.loads(run('jobs', 'list', '--json', env=env).stdout)}
    assert {k: r['status'] for k, r in records.items()} == {quick_id: 'completed', slow_id: 'cancelled'}
    assert records[quick_id]['cost_usd'] > 0 and records[quick_id]['origin'] == 'cli'
    assert records[quick_id]['query'] == 'What is the EU AI Act?'
    assert all(r['emulated'] is True for r in records.values())
    shown_json, waited_json = run_all(
        ('jobs', 'show', quick_id, '--json'), ('jobs', 'wait', quick_id, '--json'), env=env
    )
    assert json.loads(shown_json.stdout)['emulated'] is True and json.loads(waited_json.stdout)['emulated'] is True


def test_a_replayed_recording_is_marked_emulated_in_the_footer_and_the_json(tmp_path: Path):
    with Emulator(replay=Path(__file__).parent.parent / 'emulator' / 'recordings', time_scale=0.002) as replayer:
        env = cli_env(tmp_path, PERPLEXITY_API_KEY=replayer.api_key, PERPLEXITY_BASE_URL=replayer.base_url)
        text, as_json = run_all(
            ('research', 'What is the EU AI Act?', '--effort', 'fast'),
            ('research', 'What is the EU AI Act?', '--effort', 'fast', '--json'),
            env=env,
        )
    assert text.returncode == 0, text.stderr
    assert text.stdout.strip().splitlines()[-1].startswith('completed · emulated · fast · ')
    assert as_json.returncode == 0 and json.loads(as_json.stdout)['emulated'] is True


@pytest.mark.slow
def test_jobs_wait_times_steps_from_the_runs_start_and_marks_replayed_ones_earlier(emulator: Emulator, tmp_path: Path):
    env = cli_env(tmp_path, PERPLEXITY_API_KEY=emulator.api_key, PERPLEXITY_BASE_URL=emulator.base_url)
    question = 'How do heat pumps work? [[emulate: duration=2000]]'  # about 10 s: still going when the wait begins
    handed_off = run('research', question, '--effort', 'low', '--wait', '1', env=env)
    assert handed_off.returncode == 0 and 'Still going' in handed_off.stderr, handed_off.stderr
    seen_before = [line.split('] ', 1)[1] for line in handed_off.stderr.splitlines() if STEP_LINE.match(line)]
    assert seen_before  # the run had done something before the wait: the wait's stream replays it

    waited = run('jobs', 'wait', handed_off.stdout.strip(), env=env)
    assert waited.returncode == 0, waited.stderr
    steps = [re.match(r'^  \[(earlier|\s*\d+s)\] (.*)$', line) for line in waited.stderr.splitlines()[:-1]]
    assert steps and all(steps), waited.stderr  # every step line says when (or `earlier`), nothing else is printed
    whens = [m.group(1).strip() for m in steps if m]
    details = [m.group(2) for m in steps if m]
    earlier = whens.index(next(w for w in whens if w != 'earlier'))  # the replayed burst comes first, untimed
    assert earlier >= len(seen_before) and details[: len(seen_before)] == seen_before
    timed = [int(w.removesuffix('s')) for w in whens[earlier:]]
    assert 'earlier' not in whens[earlier:] and timed == sorted(timed)
    assert timed[0] >= 1  # seconds since the run started (it was over 1 s old when the wait began), not 0.0s
    assert re.match(r'^completed in \d+s \(waited \d+\.\d+s here\): ', waited.stderr.splitlines()[-1])


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def _checks(stdout: str) -> dict[str, str]:
    lines = stdout.strip().splitlines()
    for line in lines:
        assert re.match(r'^\[(pass|FAIL)\] ', line), line
        if line.startswith('[FAIL]'):
            assert ' — fix: ' in line, line
    return {re.sub(r'^\[\w+\] ([^:]+).*$', r'\1', line): line for line in lines}


@pytest.mark.slow
def test_doctor_passes_against_the_emulator_and_says_how_to_fix_each_failure(emulator: Emulator, tmp_path: Path):
    base = cli_env(tmp_path)
    good, no_key, unsafe, wrong_key, unreachable = run_each(
        (('doctor',), base | {'PERPLEXITY_API_KEY': emulator.api_key, 'PERPLEXITY_BASE_URL': emulator.base_url}),
        (('doctor',), base | {'PERPLEXITY_BASE_URL': emulator.base_url}),
        (('doctor',), base | {'PERPLEXITY_API_KEY': emulator.api_key, 'PERPLEXITY_BASE_URL': 'http://example.com'}),
        (('doctor',), base | {'PERPLEXITY_API_KEY': 'pplx-wrong', 'PERPLEXITY_BASE_URL': emulator.base_url}),
        (
            ('doctor',),
            base | {'PERPLEXITY_API_KEY': 'pplx-x', 'PERPLEXITY_BASE_URL': f'http://127.0.0.1:{_closed_port()}'},
        ),
    )
    checks = _checks(good.stdout)
    assert good.returncode == 0, good.stdout
    assert all(line.startswith('[pass]') for line in checks.values())
    assert set(checks) == {
        'PERPLEXITY_API_KEY is set',
        'base URL is safe',
        'API reachable',
        'key accepted',
        'research settings',
        'ledger writable',
        'ledger private',
        'tracing',
    }
    assert str(tmp_path) in checks['ledger writable']
    # Eight passes against an emulator must not read as a working Perplexity setup: it says what answered.
    assert good.stderr.strip() == '8 passed, 0 failed. The API checks ran against an emulator, not Perplexity.'
    assert 'an emulator answered (x-pplx-emulator header), not Perplexity' in checks['API reachable']
    assert 'by the emulator, not Perplexity' in checks['key accepted']
    as_json = run_each(
        (
            ('doctor', '--json'),
            base | {'PERPLEXITY_API_KEY': emulator.api_key, 'PERPLEXITY_BASE_URL': emulator.base_url},
        )
    )[0]
    marked = {c['name']: c['emulator'] for c in json.loads(as_json.stdout)}
    assert marked['API reachable'] is True and marked['key accepted'] is True and marked['tracing'] is False

    checks = _checks(no_key.stdout)
    assert no_key.returncode == 1
    assert checks['PERPLEXITY_API_KEY is set'].startswith('[FAIL]') and 'export PERPLEXITY_API_KEY' in no_key.stdout
    assert checks['API reachable'].startswith('[pass]') and checks['key accepted'].startswith('[FAIL]')

    checks = _checks(unsafe.stdout)
    assert unsafe.returncode == 1
    assert checks['base URL is safe'].startswith('[FAIL]') and 'clear text' in checks['base URL is safe']
    assert 'fix the base URL first' in checks['API reachable']

    checks = _checks(wrong_key.stdout)
    assert wrong_key.returncode == 1 and checks['key accepted'].startswith('[FAIL]')
    assert checks['API reachable'].startswith('[pass]')

    checks = _checks(unreachable.stdout)
    assert unreachable.returncode == 1 and checks['API reachable'].startswith('[FAIL]')
    assert 'make the API reachable first' in checks['key accepted']
    for done in (good, no_key, unsafe, wrong_key, unreachable):
        assert 'pplx-wrong' not in done.stdout + done.stderr and emulator.api_key not in done.stdout + done.stderr


COMMANDS = [
    (),
    ('research',),
    ('jobs',),
    ('jobs', 'list'),
    ('jobs', 'show'),
    ('jobs', 'wait'),
    ('jobs', 'cancel'),
    ('doctor',),
    ('config',),
    ('mcp',),
    ('emulator',),
]


@pytest.mark.parametrize('command', COMMANDS, ids=lambda c: ' '.join(c) or 'top')
def test_every_command_has_help_with_examples(command: tuple[str, ...]):
    result = CliRunner().invoke(cli, [*command, '--help'])
    assert result.exit_code == 0, result.output
    assert re.search(r'^\s+Examples?:$', result.output, flags=re.MULTILINE)
    assert f'pydantic-ai-perplexity {" ".join(command)}'.strip() in result.output


def test_the_console_script_answers_help_and_imports_only_what_a_command_needs(tmp_path: Path):
    script = Path(sys.executable).parent / 'pydantic-ai-perplexity'
    probe = (
        'import sys; import pydantic_ai_perplexity.cli; '
        'print(sorted({m.split(".")[0] for m in sys.modules} & {"rich", "httpx2", "pydantic_ai", "mcp", "logfire"}), '
        '"pydantic_ai_perplexity._core.researcher" in sys.modules)'
    )
    done = subprocess.run([str(script), '--help'], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0 and 'Examples:' in done.stdout
    imported = subprocess.run(
        [sys.executable, '-c', probe], capture_output=True, text=True, timeout=60, check=False, env=cli_env(tmp_path)
    )
    assert imported.stdout.strip() == '[] False', imported.stderr


def test_research_no_wait_on_the_built_in_emulator_says_the_run_cannot_be_collected(tmp_path: Path):
    """The built-in emulator stops with the command: the notice must not offer a `jobs wait` that cannot work."""
    env = cli_env(tmp_path)
    started = run('research', 'What is the EU AI Act?', '--effort', 'fast', '--no-wait', env=env)
    assert started.returncode == 0, started.stderr
    response_id = started.stdout.strip()
    assert response_id.startswith('resp_')
    assert 'cannot be collected' in started.stderr and 'jobs wait' not in started.stderr
    listed = run('jobs', 'list', '--json', env=env)
    [row] = [r for r in json.loads(listed.stdout) if r['response_id'] == response_id]
    assert row['emulated'] is True  # never counted against a budget for the real API


@pytest.mark.slow
@pytest.mark.parametrize('engine', ['sqlite', 'postgres'])
def test_jobs_spend_shows_spent_held_and_left_per_window_and_caller(tmp_path: Path, engine: str):
    with contextlib.ExitStack() as stack:
        url = stack.enter_context(fresh_schema()) if engine == 'postgres' else None
        extra = {'PERPLEXITY_LEDGER_URL': url} if url else {}
        target = url or tmp_path / 'state' / 'ledger.sqlite3'
        now = datetime.now(UTC)
        with Ledger(target) as ledger:
            for record in (
                RunRecord(query='a', origin='mcp', caller='alice', estimate_usd=1.0, cost_usd=0.4, status='completed'),
                RunRecord(query='b', origin='mcp', caller='alice', estimate_usd=0.3, status='in_progress'),
                RunRecord(query='c', origin='mcp', caller='bob', estimate_usd=0.2, cost_usd=0.1, status='completed'),
                RunRecord(query='d', origin='cli', estimate_usd=5.0, emulated=True, status='completed', cost_usd=5.0),
                RunRecord(query='e', origin='cli', estimate_usd=2.0, cost_usd=2.0, created_at=now - timedelta(days=40)),
            ):
                ledger.record_start(record)
        env = cli_env(
            tmp_path / 'state',
            PERPLEXITY_BUDGET_DAY_USD='5',
            PERPLEXITY_BUDGET_USD='20',
            PERPLEXITY_BUDGET_PER_CALLER='alice:day=1;*:day=2',
            **extra,
        )
        as_json, real_and_emulated, table, bob_only = run_all(
            ('jobs', 'spend', '--json'),
            ('jobs', 'spend', '--json', '--all'),
            ('jobs', 'spend'),
            ('jobs', 'spend', '--caller', 'bob'),
            env=env,
        )
        bad_env = run('jobs', 'spend', env=env | {'PERPLEXITY_BUDGET_PER_CALLER': 'alice:week=1'})
    assert as_json.returncode == 0, as_json.stderr
    lines = {(line['caller'], line['window']): line for line in json.loads(as_json.stdout)}
    assert set(lines) == {(who, w) for who in (None, 'alice', 'bob') for w in ('day', 'month', 'total')}
    day, alice, bob = lines[None, 'day'], lines['alice', 'day'], lines['bob', 'day']
    assert (day['spent_usd'], day['held_usd'], day['cap_usd'], day['left_usd']) == (0.5, 0.3, 5.0, 4.2)
    assert (alice['spent_usd'], alice['held_usd'], alice['cap_usd'], alice['left_usd']) == (0.4, 0.3, 1.0, 0.3)
    assert (bob['spent_usd'], bob['cap_usd'], bob['left_usd']) == (0.1, 2.0, 1.9)
    assert lines[None, 'total']['spent_usd'] == 2.5 and lines[None, 'total']['left_usd'] == 17.2
    assert day['since'] == f'{now:%Y-%m-%d}T00:00:00+00:00'
    every = {(line['caller'], line['window']): line for line in json.loads(real_and_emulated.stdout)}
    assert every[None, 'day']['spent_usd'] == 5.5  # the emulated run too
    assert table.returncode == 0, table.stderr
    assert table.stdout.splitlines()[0].split() == ['for', 'window', 'since', 'spent', 'held', 'limit', 'left']
    assert any(
        line.split()[:3] == ['caller', 'alice', 'day'] and line.endswith('$0.3000')
        for line in table.stdout.splitlines()
    )
    assert 'real runs only' in table.stderr
    assert bob_only.returncode == 0 and 'alice' not in bob_only.stdout and 'caller bob' in bob_only.stdout
    assert bad_env.returncode != 0 and "PERPLEXITY_BUDGET_PER_CALLER: 'week=1' for caller 'alice'" in bad_env.stderr


def test_research_budget_day_refuses_and_names_the_flag(tmp_path: Path):
    refused = run('research', 'What is the EU AI Act?', '--effort', 'fast', '--budget-day', '0', env=cli_env(tmp_path))
    assert refused.returncode != 0
    assert 'the daily limit is $0.00' in refused.stderr and '--budget-day' in refused.stderr
    assert 'Budget(' not in refused.stderr


@pytest.mark.slow
def test_jobs_show_lists_what_a_running_run_found_and_the_answer_and_billed_parts_of_a_finished_one(tmp_path: Path):
    """Live fact: cfdude/mcp-perplexity-pro tests/fixtures/agent_background_in_progress.json, captured 2026-10-09: a
    running run's retrieve carries the search and fetch items reached so far (the emulator's `partial_output`)."""
    import time

    with Emulator(time_scale=0.005, partial_output=True) as emu:
        env = cli_env(tmp_path, PERPLEXITY_API_KEY=emu.api_key, PERPLEXITY_BASE_URL=emu.base_url)
        quick, slow = run_all(
            ('research', 'What is the EU AI Act?', '--effort', 'fast'),
            ('research', 'A long survey of fusion energy [[emulate: duration=4000]]', '--effort', 'high', '--no-wait'),
            env=env,
        )
        assert quick.returncode == 0 and slow.returncode == 0, quick.stderr + slow.stderr
        quick_id = quick.stdout.strip().split(' · ')[-1]
        slow_id = slow.stdout.strip()
        deadline = time.monotonic() + 60
        while True:  # poll (each a real command) until the run's snapshot shows a search with its results
            (shown,) = run_all(('jobs', 'show', slow_id), env=env)
            assert shown.returncode == 0, shown.stderr
            found = re.search(r'^found:\s+so far: (\d+) search(?:es)?, (\d+) results', shown.stdout, re.MULTILINE)
            if found and int(found.group(2)) > 0:
                break
            assert time.monotonic() < deadline, shown.stdout
        assert re.search(r'^status:\s+in_progress', shown.stdout, re.MULTILINE)
        assert re.search(r'^  \[1\] .+ — https?://\S+$', shown.stdout, re.MULTILINE)
        assert '(estimate)' in shown.stdout and 'billed:' not in shown.stdout
        (finished,) = run_all(('jobs', 'show', quick_id), env=env)
        assert finished.returncode == 0, finished.stderr
        billed = re.search(r'^billed:\s+(.+)$', finished.stdout, re.MULTILINE)
        assert billed is not None and 'input $' in billed.group(1) and 'search_web ' in billed.group(1)
        assert 'found:' not in finished.stdout and re.search(r'^sources:\s+\d+ \(\d+ cited\)$', finished.stdout, re.M)
        # A finished run shows its answer and numbered sources as `research` printed them, each URL whole.
        answer = quick.stdout.split('\nSources:\n')[0].strip()
        urls = re.findall(r'^    (https://\S+)$', quick.stdout, re.MULTILINE)
        assert answer and answer in finished.stdout and '\nSources:\n[1] ' in finished.stdout
        assert urls and re.findall(r'^    (https://\S+)$', finished.stdout, re.MULTILINE) == urls
        # Without the key, the answer is not made up or left silently out: it says where it is kept.
        no_key = {k: v for k, v in env.items() if k != 'PERPLEXITY_API_KEY'}
        (keyless,) = run_all(('jobs', 'show', quick_id), env=no_key)
        assert keyless.returncode == 0 and 'Sources:' not in keyless.stdout
        assert re.search(
            rf'^answer:\s+not kept in the ledger; the emulator at {emu.base_url.removeprefix("http://")}',
            keyless.stdout,
            re.M,
        )


def test_jobs_cancel_says_plainly_what_happened(emulator: Emulator, tmp_path: Path):
    """Live fact: cfdude/mcp-perplexity-pro tests/fixtures/agent_cancel_unknown_400.json and
    agent_cancel_terminal_400.meta.json, captured 2026-10-09: the API answers a cancel of an unknown or a finished id
    alike ("the run is already terminal"); the command tells them apart and never passes that sentence on."""
    env = cli_env(tmp_path, PERPLEXITY_API_KEY=emulator.api_key, PERPLEXITY_BASE_URL=emulator.base_url)
    done = run('research', 'What is the EU AI Act?', '--effort', 'fast', env=env)
    done_id = done.stdout.strip().split(' · ')[-1]
    unknown_id = 'resp_00000000-0000-4000-8000-000000000000'
    finished, unknown = run_all(('jobs', 'cancel', done_id), ('jobs', 'cancel', unknown_id), env=env)
    assert finished.returncode == 0 and finished.stdout.strip() == f'{done_id} completed'
    assert 'The run had already ended (completed); nothing to cancel.' in finished.stderr
    assert unknown.returncode == 1 and unknown.stdout == ''
    assert f"Nothing was cancelled: no run '{unknown_id}' was started here" in unknown.stderr
    assert 'terminal' not in unknown.stderr


@pytest.mark.slow
def test_a_run_over_the_budget_is_refused_unless_tighten_is_asked_and_then_says_what_was_lowered(tmp_path: Path):
    cap = 1.0
    assert reservation('How do heat pumps work?', {'effort': 'medium'}).usd > cap  # medium does not fit $1
    asked = ('research', 'How do heat pumps work?', '--effort', 'medium', '--budget', str(cap))
    refused, tightened, as_json, helped = run_each(  # each with a ledger of its own: no run holds budget for another
        (asked, cli_env(tmp_path / 'refused')),
        ((*asked, '--tighten'), cli_env(tmp_path / 'tightened')),
        ((*asked, '--tighten', '--json'), cli_env(tmp_path / 'json')),
        (('research', '--help'), cli_env(tmp_path / 'help')),
    )
    assert refused.returncode == 1 and refused.stdout == ''
    message = ' '.join(refused.stderr.split())
    assert 'Budget exceeded' in message and 'Efforts that fit what is left: fast ($' in message
    assert 'With --tighten it would run with lower limits' in message and 'on_budget' not in message
    assert 'the --budget option' in message

    assert tightened.returncode == 0, tightened.stderr
    note = re.search(r'This run was tightened to fit the budget \((.+?)\)', ' '.join(tightened.stdout.split()))
    assert note and 'max_output_tokens 6,144 ->' in note.group(1)

    assert as_json.returncode == 0, as_json.stderr
    lowered = json.loads(as_json.stdout)['tightened']
    assert lowered['max_output_tokens'][0] == 6144 and lowered['max_output_tokens'][1] < 6144

    text = ' '.join(helped.stdout.split())
    assert '--tighten' in text and 'lifetime cap' in text and 'all time' in text


def test_research_reads_files_and_takes_the_request_options(emulator: Emulator, tmp_path: Path):
    import httpx2

    notes = tmp_path / 'notes.md'
    notes.write_text('Field notes. The pilot heat pumps cut household emissions by forty percent.', encoding='utf-8')
    env = cli_env(tmp_path, PERPLEXITY_API_KEY=emulator.api_key, PERPLEXITY_BASE_URL=emulator.base_url)
    options = ['--effort', 'fast', '--models', 'openai/gpt-5.4,openai/gpt-5.5', '--service-tier', 'flex']
    options += ['--reasoning-effort', 'low', '--profile', 'prof_1@2', '--prompt-cache-key', 'notes', '--json']
    done, missing, bad_tier, both = run_all(
        ('research', 'What do my notes say? [[emulate: unavailable]]', '--file', str(notes), *options),
        ('research', 'q', '--file', str(tmp_path / 'missing.pdf')),
        ('research', 'q', '--service-tier', 'cheap'),
        ('research', 'q', '--model', 'openai/gpt-5.4', '--models', 'openai/gpt-5.5'),
        env=env,
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data['model'] == 'openai/gpt-5.5'  # the first fallback was unavailable
    echoed = httpx2.get(
        f'{emulator.base_url}/v1/agent/{data["response_id"]}', headers={'Authorization': f'Bearer {emulator.api_key}'}
    ).json()
    assert echoed['service_tier'] == 'flex' and echoed['reasoning'] == {'effort': 'low'}
    assert echoed['prompt_cache_key'] == 'notes'
    assert 'From the attached file notes.md: Field notes. The pilot heat pumps' in data['answer']
    assert missing.returncode == 2 and "Invalid value for --file: No file '" in missing.stderr
    assert bad_tier.returncode == 2 and "'cheap' is not one of 'auto', 'default', 'flex'" in bad_tier.stderr
    assert both.returncode == 2 and 'model and models cannot be combined' in both.stderr
    assert [q for q in emulator.requests if q.method == 'POST' and q.path == '/v1/agent'][1:] == []  # one run only
