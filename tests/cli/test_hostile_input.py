"""The command against hostile and careless input: bad values, terminal escapes, secrets in URLs, Ctrl-C.

Everything runs the real command in a subprocess (argv as bytes where it matters), with the built-in emulator or a
loopback one, and reads what a terminal would be sent.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from pydantic_ai_perplexity._ledger import Ledger
from pydantic_ai_perplexity._ledger._sqlite import LEDGER_FILENAME
from pydantic_ai_perplexity.emulator import Emulator
from support.cli import COMMAND, TIMEOUT, StderrLines, cli_env, run, run_each

#: Sets the terminal's title when printed raw.
TITLE_SET = '\x1b]0;PWNED-TITLE\x07'
#: An OSC 8 hyperlink whose text hides where it goes.
HYPERLINK = '\x1b]8;;https://evil.example/\x1b\\innocent link\x1b]8;;\x1b\\'
#: Characters a terminal would act on, or that hide text: ESC, BEL, CSI (8-bit), zero-width, bidi, BOM.
FORBIDDEN = re.compile('[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]')


def _forbidden(text: str) -> list[str]:
    return sorted({hex(ord(c)) for c in FORBIDDEN.findall(text)})


# --- bad values -------------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_bad_values_get_a_one_line_error_and_exit_status_2(tmp_path: Path) -> None:
    env = cli_env(tmp_path)
    long_id = 'r' * 70_000
    cases = [
        ('jobs', 'wait', long_id),
        ('jobs', 'show', long_id),
        ('jobs', 'cancel', long_id),
        ('jobs', 'wait', 'resp_\x1b[2J'),
        ('research', '--budget', '-1', 'q'),
        ('research', '--budget', 'nan', 'q'),
        ('research', '--budget', 'inf', 'q'),
        ('research', '--wait', 'nan', 'q'),
        ('research', '--fetch-pages', '11', 'q'),
        ('jobs', 'wait', '--timeout', 'nan', 'resp_1'),
    ]
    done = run_each(*((case, env) for case in cases))
    for case, result in zip(cases, done, strict=True):
        shown = ' '.join(a[:40] for a in case)
        assert result.returncode == 2, (shown, result.stderr[-500:])
        assert 'Traceback' not in result.stderr, shown
        errors = [line for line in result.stderr.splitlines() if line.startswith('Error:')]
        assert len(errors) == 1 and len(errors[0]) < 300, (shown, result.stderr[-500:])
        assert long_id not in result.stderr and not _forbidden(result.stderr), shown
    assert 'too long for a run id' in done[0].stderr
    assert 'is not a budget' in done[4].stderr and 'is not a budget' in done[5].stderr
    assert '1<=x<=10' in done[8].stderr


def test_invalid_utf8_in_argv_is_one_clear_line_not_a_traceback(tmp_path: Path) -> None:
    done = subprocess.run(
        [*(a.encode() for a in COMMAND), b'research', b'what \xff is'],
        env=cli_env(tmp_path),
        capture_output=True,
        timeout=TIMEOUT,
        check=False,
    )
    stderr = done.stderr.decode('utf-8', 'replace')
    assert done.returncode == 2, stderr
    assert stderr.strip() == (
        'Error: an argument is not valid UTF-8 text: "what \\xff is". '
        "Pass text in UTF-8 (check the terminal's encoding)."
    )
    assert done.stdout == b''


# --- terminals --------------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_nothing_from_a_caller_or_the_web_reaches_the_terminal_raw(tmp_path: Path) -> None:
    question = f'{TITLE_SET}What is {HYPERLINK} about heat\u200b pumps\u202e? [[emulate: inject]]'
    env = cli_env(tmp_path)
    research, research_json = run_each((('research', question), env), (('research', question, '--json'), env))
    assert research.returncode == 0, research.stderr
    assert research_json.returncode == 0 and not _forbidden(research_json.stdout + research_json.stderr)
    as_json = json.loads(research_json.stdout)
    assert '\u200b' in json.dumps(as_json['answer'], ensure_ascii=False)  # the web's text, kept exactly in JSON
    # The emulator's injected page carries zero-width characters in its title and snippet: they reached stdout raw.
    assert 'forum post titled' in research.stdout and 'Research tips thread' in research.stdout
    for text in (research.stdout, research.stderr):
        assert not _forbidden(text), _forbidden(text)
        assert 'PWNED-TITLE' not in text and 'evil.example' not in text
    assert 'innocent link' in research.stdout or 'innocent link' in research.stderr
    response_id = research.stdout.strip().rsplit(' · ', 1)[-1]

    listed, shown, listed_json, shown_json = run_each(
        (('jobs', 'list'), env),
        (('jobs', 'show', response_id), env),
        (('jobs', 'list', '--json'), env),
        (('jobs', 'show', response_id, '--json'), env),
    )
    for done in (listed, shown, listed_json, shown_json):
        assert done.returncode == 0, done.stderr
        assert not _forbidden(done.stdout + done.stderr), _forbidden(done.stdout + done.stderr)
    assert 'PWNED-TITLE' not in listed.stdout + shown.stdout
    assert 'What is innocent link about heat pumps?' in listed.stdout
    assert 'What is innocent link about heat pumps?' in shown.stdout
    # JSON keeps the exact values: the characters are escaped, not dropped.
    assert json.loads(listed_json.stdout)[0]['query'] == question
    assert json.loads(shown_json.stdout)['query'] == question


@pytest.mark.slow
def test_a_live_display_on_a_terminal_gets_no_escape_from_the_question(tmp_path: Path) -> None:
    done = run('research', f'{TITLE_SET}heat pumps \x1b[2J\u200b', env=cli_env(tmp_path), tty=True)
    assert done.returncode == 0, done.stderr
    assert 'PWNED-TITLE' not in done.stderr and '\x1b[2J' not in done.stderr and '\x07' not in done.stderr
    assert '\u200b' not in done.stderr and not _forbidden(done.stdout)


# --- secrets ----------------------------------------------------------------------------------------------------------


def test_doctor_shows_no_credentials_and_blames_the_key_not_the_base_url(emulator: Emulator, tmp_path: Path) -> None:
    env = cli_env(
        tmp_path,
        PERPLEXITY_API_KEY='pplx-abc def-whitespace',
        PERPLEXITY_BASE_URL=emulator.base_url,
        OTEL_EXPORTER_OTLP_ENDPOINT='https://collector-user:otel-pw/9@collector.invalid:4318/v1?api_key=otel-key-77',
    )
    done = run('doctor', env=env)
    lines = {line.split(':', 1)[0]: line for line in done.stdout.splitlines()}
    assert done.returncode == 1
    assert lines['[FAIL] PERPLEXITY_API_KEY is set'].count('whitespace') == 1
    assert '[pass] base URL is safe' in lines, done.stdout
    assert '[pass] API reachable' in lines, done.stdout
    assert 'fix PERPLEXITY_API_KEY first' in lines['[FAIL] key accepted']
    tracing = lines['[pass] tracing']
    assert 'https://collector-user:***@collector.invalid:4318/v1?api_key=***' in tracing
    for secret in ('otel-pw', 'otel-key-77', 'abc def', 'pplx-abc'):
        assert secret not in done.stdout + done.stderr


# --- Ctrl-C -----------------------------------------------------------------------------------------------------------


@pytest.mark.compat  # signals or kills a process
@pytest.mark.parametrize('tty', [False, True], ids=['pipe', 'terminal'])
def test_ctrl_c_during_research_says_how_to_collect_or_cancel_the_run(tmp_path: Path, tty: bool) -> None:
    with Emulator(time_scale=0.1) as slow:  # a `high` run takes several seconds: time enough for Ctrl-C
        env = cli_env(tmp_path, PERPLEXITY_API_KEY=slow.api_key, PERPLEXITY_BASE_URL=slow.base_url)
        returncode, stdout, stderr = _interrupt(['research', 'solid-state batteries', '--effort', 'high'], env, tty=tty)
        assert returncode == 130, stderr
        assert 'Aborted!' not in stderr and 'Traceback' not in stderr
        found = re.search(r'Collect it: pydantic-ai-perplexity jobs wait (\S+)', stderr)
        assert found, stderr
        response_id = found.group(1)
        assert f'Cancel it:  pydantic-ai-perplexity jobs cancel {response_id}' in stderr
        assert stdout == ''
        # The run goes on: its row is left as it was (for reconciling), and the printed command cancels it.
        with Ledger(tmp_path / LEDGER_FILENAME) as ledger:
            record = ledger.get(response_id)
        assert record is not None and record.status in ('queued', 'in_progress'), record
        cancelled = run('jobs', 'cancel', response_id, env=env)
        assert cancelled.returncode == 0, cancelled.stderr
        assert cancelled.stdout.split()[0] == response_id
        assert cancelled.stdout.split()[1] in ('cancelled', 'cancelling')


def _interrupt(args: list[str], env: dict[str, str], *, tty: bool) -> tuple[int, str, str]:
    """Start the command, wait (with a deadline) for its first research step on stderr, send SIGINT, collect it all."""
    deadline = time.monotonic() + TIMEOUT
    master = slave = -1
    if tty:
        master, slave = os.openpty()
        env = env | {'TERM': 'xterm-256color', 'COLUMNS': '100'}
    with subprocess.Popen(
        [*COMMAND, *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=slave if tty else subprocess.PIPE,
    ) as process:
        if tty:
            os.close(slave)
            try:
                seen = _read_pty_until(master, rb'\d+\.\ds', deadline)  # a step line (elapsed seconds) is drawn
                process.send_signal(signal.SIGINT)
                process.wait(timeout=TIMEOUT)
                stderr = (seen + _read_pty_until(master, None, deadline)).decode('utf-8', 'replace')
            finally:
                os.close(master)
        else:
            lines = StderrLines(process)
            lines.wait_for(r'^\s+\[\s*\d+\.\d+s\] ', deadline)  # a research step: the run's id is known
            process.send_signal(signal.SIGINT)
            process.wait(timeout=TIMEOUT)
            stderr = lines.rest(deadline)
        assert process.stdout is not None
        stdout = process.stdout.read().decode()
    return process.returncode, stdout, stderr


def _read_pty_until(master: int, pattern: bytes | None, deadline: float) -> bytes:
    """Read a pseudo-terminal until `pattern` appears (or, with None, until the other side closes)."""
    import select

    data = b''
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            break
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            return data
        if not chunk:
            return data
        data += chunk
        if pattern is not None and re.search(pattern, data):
            return data
    assert pattern is None, f'no {pattern!r} before the deadline: {data[-500:]!r}'
    return data


@pytest.mark.slow
def test_waiting_zero_seconds_for_a_run_that_never_existed_says_so(emulator: Emulator, tmp_path: Path) -> None:
    env = cli_env(tmp_path, PERPLEXITY_API_KEY=emulator.api_key, PERPLEXITY_BASE_URL=emulator.base_url)
    never, real = run_each(
        # Well formed: the live API answers a malformed id with a 400, not a 404.
        (('jobs', 'wait', '--timeout', '0', 'resp_00000000-0000-0000-0000-000000000000'), env),
        (('research', 'heat pumps [[emulate: duration=9000]]', '--no-wait'), env),
    )
    assert never.returncode == 1 and 'Still going' not in never.stderr and never.stdout == ''
    assert '404' in never.stderr and 'not found' in never.stderr
    # A run that exists is still handed back at once, as going.
    response_id = real.stdout.strip()
    going = run('jobs', 'wait', '--timeout', '0', response_id, env=env)
    assert going.returncode == 0 and going.stdout.strip() == response_id, going.stderr
    assert 'Still going' in going.stderr
