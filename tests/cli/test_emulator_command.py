"""`pydantic-ai-perplexity emulator` against hostile replay folders and unsafe settings.

Each refusal comes before anything binds: a one-line `Error: ...` on stderr, exit status 2, no traceback and no
key. The only non-loopback address used is 0.0.0.0, to prove that it is refused.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import httpx2
import pytest

from pydantic_ai_perplexity.emulator import Emulator
from support.cli import COMMAND, TIMEOUT, StderrLines, cli_env, run_each
from support.live_recording import QUESTION, live_recording, write_live_recording


def _refused(done_stderr: str) -> list[str]:
    """The stderr lines of a refusal (uvicorn never started, so there is nothing else)."""
    return [line for line in done_stderr.splitlines() if line.strip()]


@pytest.mark.slow
def test_a_hostile_replay_folder_is_refused_naming_the_file(tmp_path: Path) -> None:
    folders: dict[str, tuple[Path, str]] = {}

    def folder(kind: str, name: str) -> Path:
        path = tmp_path / kind.replace(' ', '-')
        write_live_recording(path)  # a good recording beside the bad one
        folders[kind] = (path, name)
        return path

    (tmp_path / 'secret.json').write_text(json.dumps(live_recording()))
    (folder('symlink out', 'evil.json') / 'evil.json').symlink_to(tmp_path / 'secret.json')
    (folder('device', 'zero.json') / 'zero.json').symlink_to('/dev/zero')
    os.mkfifo(folder('fifo', 'pipe.json') / 'pipe.json')
    (folder('directory', 'x.json') / 'x.json').mkdir()
    (folder('deep nesting', 'deep.json') / 'deep.json').write_text('[' * 100_000 + ']' * 100_000)
    bad = live_recording()
    bad['run']['events'][0]['at'] = 'soon'
    (folder('malformed field', 'bad.json') / 'bad.json').write_text(json.dumps(bad))

    reasons = {
        'symlink out': 'is a symbolic link',
        'device': 'is a symbolic link',
        'fifo': 'not a regular file',
        'directory': 'is a directory',
        'deep nesting': 'nested deeper than',
        'malformed field': '"run.events[0].at" is \'soon\'',
    }
    env = cli_env(tmp_path)
    commands = [(('emulator', '--replay', str(path), '--port', '0'), env) for path, _ in folders.values()]
    for (kind, (_, name)), done in zip(folders.items(), run_each(*commands), strict=True):
        assert done.returncode == 2, (kind, done.stderr[-800:])
        assert 'Traceback' not in done.stderr, kind
        [line] = _refused(done.stderr)
        assert line.startswith(f'Error: {name}: ') and reasons[kind] in line, (kind, line)


@pytest.mark.slow
def test_unsafe_recorder_and_bind_settings_are_refused_before_binding(tmp_path: Path) -> None:
    recordings = str(tmp_path / 'recordings')
    cases = {
        'plain http upstream': (
            ('--record', recordings, '--upstream', 'http://api.perplexity.example'),
            'clear text',
        ),
        'file upstream': (('--record', recordings, '--upstream', 'file:///etc/passwd'), "scheme 'file'"),
        'remote host': (('--host', '0.0.0.0'), '--allow-remote'),
        'remote host, no key': (('--host', '0.0.0.0', '--allow-remote'), 'never shows its key'),
    }
    env = cli_env(tmp_path)
    done = run_each(*((('emulator', '--port', '0', *args), env) for args, _ in cases.values()))
    for (case, (_, reason)), result in zip(cases.items(), done, strict=True):
        assert result.returncode == 2, (case, result.stderr[-800:])
        [line] = _refused(result.stderr)
        assert line.startswith('Error: ') and reason in line, (case, line)
        assert 'pplx-emulator' not in result.stderr + result.stdout, case
    assert not (tmp_path / 'recordings').exists()


def test_allow_remote_never_prints_the_key(tmp_path: Path) -> None:
    """With --allow-remote the key is the one given, and is never shown (on loopback here: no test binds off it)."""
    key = 'pplx-emulator-given-key-for-remote-0123'
    env = cli_env(tmp_path, PERPLEXITY_EMULATOR_API_KEY=key)
    deadline = time.monotonic() + TIMEOUT
    args = ['emulator', '--port', '0', '--allow-remote', '--time-scale', '0']
    with subprocess.Popen([*COMMAND, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as process:
        lines = StderrLines(process)
        try:
            announced = lines.wait_for(r'Perplexity emulator at http://127\.0\.0\.1:\d+', deadline)
            base_url = announced.split(' at ', 1)[1].split()[0].rstrip(',')
            with httpx2.Client(base_url=base_url, headers={'Authorization': f'Bearer {key}'}, timeout=30) as c:
                answer = c.post('/v1/agent', json={'input': QUESTION, 'effort': 'fast'})
                assert answer.status_code == 200, answer.text
                assert (
                    c.post(
                        '/v1/agent', json={'input': QUESTION, 'effort': 'fast'}, headers={'Authorization': 'Bearer x'}
                    ).status_code
                    == 401
                )
        finally:
            process.send_signal(signal.SIGINT)
            process.wait(timeout=TIMEOUT)
        stderr = lines.rest(deadline)
        assert process.stdout is not None
        stdout = process.stdout.read().decode()
    assert key not in stderr + stdout and 'API key' not in stderr


def test_recording_through_the_command_neither_follows_a_planted_link_nor_keeps_a_credential(tmp_path: Path) -> None:
    """`emulator --record` in a cloned folder holding `<recording>.json.tmp -> victim`, with a credentialed MCP URL."""
    secret = 'ZjQ2ZTk4NTgtYmMxNS00YjQ1LWE5OGQt'
    body = {
        'input': QUESTION,
        'effort': 'fast',
        'tools': [{'type': 'mcp', 'server_label': 'z', 'server_url': f'https://mcp.zapier.com/api/mcp/s/{secret}/mcp'}],
    }
    victim, folder = tmp_path / 'victim.txt', tmp_path / 'cloned'
    victim.write_text('untouched\n')
    with Emulator(time_scale=0.001) as upstream:
        # The name a recording of `body` gets, learnt from a first recording; then planted as a link's name.
        with Emulator(record=tmp_path / 'probe', upstream=upstream.base_url) as probe:
            httpx2.post(
                f'{probe.base_url}/v1/agent', json=body, headers={'Authorization': f'Bearer {upstream.api_key}'}
            )
        [name] = [p.name for p in (tmp_path / 'probe').glob('*.json')]
        folder.mkdir()
        (folder / f'{name}.tmp').symlink_to(victim)

        args = ['emulator', '--record', str(folder), '--upstream', upstream.base_url, '--port', '0']
        deadline = time.monotonic() + TIMEOUT
        with subprocess.Popen([*COMMAND, *args], env=cli_env(tmp_path), stderr=subprocess.PIPE) as process:
            lines = StderrLines(process)
            try:
                announced = lines.wait_for(r'Recording proxy at http://127\.0\.0\.1:\d+', deadline)
                proxy_url = announced.split(' at ', 1)[1].split()[0]
                headers = {'Authorization': f'Bearer {upstream.api_key}'}
                answer = httpx2.post(f'{proxy_url}/v1/agent', json=body, headers=headers, timeout=30)
                assert answer.status_code == 200, answer.text
            finally:
                process.send_signal(signal.SIGINT)
                process.wait(timeout=TIMEOUT)
            stderr = lines.rest(deadline)
    assert victim.read_text() == 'untouched\n' and (folder / f'{name}.tmp').is_symlink()
    written = (folder / name).read_text()
    assert json.loads(written)['run']['final']['status'] == 'completed'
    assert secret not in written and upstream.api_key not in written and upstream.api_key not in stderr
