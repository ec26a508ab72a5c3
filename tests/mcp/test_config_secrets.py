"""`config <client>` and `config pydantic-deep --write` copy no secret, follow no link and touch no file of another
shape (through the command)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest

from pydantic_ai_perplexity.mcp import client_snippet
from pydantic_ai_perplexity.mcp.clients.config import child_environment
from support.cli import COMMAND, TIMEOUT, cli_env, run, run_each

PASSWORD = 'SENTINEL-pw/with-slash'
QUERY_PASSWORD = 'SENTINEL-query-pw'
SSL_PASSWORD = 'SENTINEL-sslpw'
KEYWORD_PASSWORD = 'SENTINEL-keyword pw'
OPTION_SECRET = 'SENTINEL-option-secret'
LEDGER_URLS = {
    'userinfo': f'postgresql://research:{PASSWORD}@db.example:5432/runs?sslmode=require',
    'parameter': f'postgresql://db.example/runs?user=research&password={QUERY_PASSWORD}&sslpassword={SSL_PASSWORD}',
    # The two other forms libpq accepts: a keyword/value string, and a server setting in `options`.
    'keywords': f"host=db.example dbname=runs user=research password='{KEYWORD_PASSWORD}' sslmode=require",
    'options': f'postgresql://research@db.example/runs?options=-c%20app.password%3D{OPTION_SECRET}',
}
SHELL_ONLY = {
    'CURL_CA_BUNDLE': '/tmp/SENTINEL-curl-ca.pem',
    'REQUESTS_CA_BUNDLE': '/tmp/SENTINEL-requests-ca.pem',
    'SSL_CERT_FILE': '/tmp/SENTINEL-cert-file.pem',
    'SSL_CERT_DIR': '/tmp/SENTINEL-cert-dir',
    'PERPLEXITY_EMULATOR_TIME_SCALE': '0.000123',
}
#: How each client refers to PERPLEXITY_LEDGER_URL instead of holding it (None: left out).
REFERENCE = {
    'claude-desktop': '<PERPLEXITY_LEDGER_URL: not copied because it holds a secret; paste its value here>',
    'claude-code': '${PERPLEXITY_LEDGER_URL}',
    'cursor': '${env:PERPLEXITY_LEDGER_URL}',
    'vscode': '${input:perplexity-ledger-url}',
    'pydantic-deep': None,
}


def _env(tmp_path: Path, ledger_url: str) -> dict[str, str]:
    return cli_env(tmp_path, PERPLEXITY_LEDGER_URL=ledger_url, PERPLEXITY_BASE_URL='http://127.0.0.1:8787') | SHELL_ONLY


def _server_env(client: str, stdout: str) -> dict[str, Any]:
    """The env block the client would give the server, read from the printed snippet."""
    if client == 'claude-code':
        add = stdout.strip().rsplit('\n', 1)[-1]
        return json.loads(shlex.split(add)[-1])['env']
    data = json.loads(stdout)
    if client == 'vscode':
        return data['servers']['perplexity']['env']
    if client == 'pydantic-deep':
        return data['user_servers'][0]['env']
    return data['mcpServers']['perplexity']['env']


def _check_snippet(client: str, stdout: str, stderr: str) -> None:
    everything = stdout + stderr
    for secret in (
        PASSWORD,
        QUERY_PASSWORD,
        SSL_PASSWORD,
        'pw/with-slash',
        KEYWORD_PASSWORD,
        'keyword pw',
        OPTION_SECRET,
        *SHELL_ONLY.values(),
    ):
        assert secret not in everything, (client, secret)
    server_env = _server_env(client, stdout)
    assert server_env['PERPLEXITY_BASE_URL'] == 'http://127.0.0.1:8787', client  # a plain setting is copied
    assert not set(SHELL_ONLY) & set(server_env), client
    assert server_env.get('PERPLEXITY_LEDGER_URL') == REFERENCE[client], client
    if client == 'vscode':
        inputs = {i['id']: i for i in json.loads(stdout)['inputs']}
        assert inputs['perplexity-ledger-url']['password'] is True


@pytest.mark.slow
def test_config_commands_refer_to_secrets_and_copy_no_shell_only_setting(tmp_path: Path) -> None:
    env = _env(tmp_path, LEDGER_URLS['parameter'])
    clients = list(REFERENCE)
    done = run_each(*((('config', client), env) for client in clients))
    for client, result in zip(clients, done, strict=True):
        assert result.returncode == 0, (client, result.stderr)
        _check_snippet(client, result.stdout, result.stderr)
    assert 'PERPLEXITY_LEDGER_URL' in done[-1].stderr and 'Not copied' in done[-1].stderr  # pydantic-deep says so


@pytest.mark.slow
@pytest.mark.parametrize('form', ['keywords', 'options'])
def test_a_keyword_string_or_a_secret_option_is_not_copied_either(tmp_path: Path, form: str) -> None:
    env = _env(tmp_path, LEDGER_URLS[form])
    clients = list(REFERENCE)
    done = run_each(*((('config', client), env) for client in clients))
    for client, result in zip(clients, done, strict=True):
        assert result.returncode == 0, (client, result.stderr)
        _check_snippet(client, result.stdout, result.stderr)
    assert 'PERPLEXITY_LEDGER_URL' in done[-1].stderr and 'Not copied' in done[-1].stderr


@pytest.mark.parametrize('client', list(REFERENCE))
def test_a_password_in_the_user_info_is_not_copied_either(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, client: str
) -> None:
    for name in [n for n in os.environ if child_environment(environ={n: 'x'})]:
        monkeypatch.delenv(name)
    for name, value in _env(tmp_path, LEDGER_URLS['userinfo']).items():
        monkeypatch.setenv(name, value)
    _check_snippet(client, client_snippet(client), '')


@pytest.mark.slow
def test_write_for_pydantic_deep_holds_no_secret(tmp_path: Path) -> None:
    env = _env(tmp_path, LEDGER_URLS['parameter'])
    done = _write(tmp_path, env)
    assert done.returncode == 0, done.stderr
    text = (tmp_path / '.pydantic-deep' / 'mcp.json').read_text()
    for secret in (QUERY_PASSWORD, SSL_PASSWORD, *SHELL_ONLY.values()):
        assert secret not in text
    assert 'PERPLEXITY_LEDGER_URL' in done.stderr


def _write(cwd: Path, env: dict[str, str]) -> Any:
    here = Path.cwd()
    os.chdir(cwd)
    try:
        return run('config', 'pydantic-deep', '--write', env=env)
    finally:
        os.chdir(here)


@pytest.mark.slow
def test_write_never_follows_a_planted_link(tmp_path: Path) -> None:
    victim = tmp_path / 'victim.txt'
    victim.write_text('precious\n')
    folder = tmp_path / 'repo' / '.pydantic-deep'
    folder.mkdir(parents=True)
    (folder / 'mcp.json.tmp').symlink_to(victim)  # what a cloned repository could ship
    done = _write(tmp_path / 'repo', cli_env(tmp_path))
    assert done.returncode == 0, done.stderr
    assert victim.read_text() == 'precious\n'
    assert (folder / 'mcp.json.tmp').is_symlink()
    assert json.loads((folder / 'mcp.json').read_text())['user_servers'][0]['name'] == 'perplexity'
    assert sorted(p.name for p in folder.iterdir()) == ['mcp.json', 'mcp.json.tmp']  # no temporary file left


@pytest.mark.parametrize('linked', ['file', 'directory'])
def test_write_refuses_a_target_that_is_a_link(tmp_path: Path, linked: str) -> None:
    elsewhere = tmp_path / 'elsewhere'
    elsewhere.mkdir()
    victim = elsewhere / 'mcp.json'
    victim.write_text('{"user_servers": []}\n')
    repo = tmp_path / 'repo'
    repo.mkdir()
    if linked == 'file':
        (repo / '.pydantic-deep').mkdir()
        (repo / '.pydantic-deep' / 'mcp.json').symlink_to(victim)
    else:
        (repo / '.pydantic-deep').symlink_to(elsewhere, target_is_directory=True)
    done = _write(repo, cli_env(tmp_path))
    assert done.returncode == 1, done.stderr
    assert 'is a symbolic link' in done.stderr and 'Traceback' not in done.stderr
    assert len([line for line in done.stderr.splitlines() if line.startswith('Error:')]) == 1
    assert victim.read_text() == '{"user_servers": []}\n'


DEEP = 1 << 20  # DEEP_CONFIG_MAX_BYTES
#: Files `config pydantic-deep --write` must leave as they are, and the reason it gives (one line, exit 2).
MALFORMED = {
    'servers-a-number': (b'{"user_servers": 5}', '"user_servers" is a number, not a list of servers'),
    'servers-a-string': (b'{"user_servers": "abc"}', '"user_servers" is a string, not a list of servers'),
    'servers-an-object': (b'{"user_servers": {"a": {}}}', '"user_servers" is an object, not a list of servers'),
    'server-not-an-object': (b'{"user_servers": [{"name": "x"}, "y"]}', 'server 2 of "user_servers" is a string'),
    'state-a-list': (b'{"builtin_state": []}', '"builtin_state" is a list, not an object'),
    'not-an-object': (b'[1, 2]', 'does not hold a JSON object (it holds a list)'),
    'not-json': (b'{"user_servers": [', 'is not valid JSON (Expecting value: line 1 column 19'),
    'not-utf8': (b'{"user_servers": ["\xff"]}', 'is not UTF-8 text'),
    'nested-beyond-recursion': (b'{"x": ' + b'[' * 100_000 + b']' * 100_000 + b'}', 'nested too deeply'),
    'nested-deep': (b'{"x": ' + b'[' * 200 + b']' * 200 + b'}', 'is nested deeper than 32 levels'),
    'too-big': (b'{"user_servers": [], "pad": "' + b'x' * DEEP + b'"}', 'is larger than 1,048,576 bytes'),
}


@pytest.mark.slow
@pytest.mark.parametrize('case', list(MALFORMED))
def test_write_leaves_a_file_of_another_shape_as_it_is_and_says_why(tmp_path: Path, case: str) -> None:
    content, reason = MALFORMED[case]
    target = tmp_path / 'repo' / '.pydantic-deep' / 'mcp.json'
    target.parent.mkdir(parents=True)
    target.write_bytes(content)
    done = _write(tmp_path / 'repo', cli_env(tmp_path))
    assert done.returncode == 2, (done.returncode, done.stderr[-500:])
    [line] = done.stderr.splitlines()
    assert line.startswith('Error: .pydantic-deep/mcp.json') and reason in line, line
    assert line.endswith('fix or move it first.') and done.stdout == ''
    assert target.read_bytes() == content
    assert sorted(p.name for p in target.parent.iterdir()) == ['mcp.json']  # nothing written beside it


@pytest.mark.parametrize('kind', ['fifo', 'directory'])
def test_write_reads_only_a_regular_file(tmp_path: Path, kind: str) -> None:
    target = tmp_path / 'repo' / '.pydantic-deep' / 'mcp.json'
    target.parent.mkdir(parents=True)
    if kind == 'fifo':
        os.mkfifo(target)  # with no writer, a plain read would wait for ever
    else:
        target.mkdir()
    # subprocess.run kills the command at the deadline: one that waits on the FIFO fails here and leaves nothing.
    done = subprocess.run(
        [*COMMAND, 'config', 'pydantic-deep', '--write'],
        cwd=tmp_path / 'repo',
        env=cli_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    expected = 'a FIFO' if kind == 'fifo' else 'a directory'
    assert done.stderr == (
        f'Error: .pydantic-deep/mcp.json is {expected}, not a regular file; not reading it: move it away first.\n'
    )
    assert target.is_fifo() if kind == 'fifo' else target.is_dir()


@pytest.mark.slow
def test_write_keeps_the_other_servers_and_settings_of_a_good_file(tmp_path: Path) -> None:
    target = tmp_path / 'repo' / '.pydantic-deep' / 'mcp.json'
    target.parent.mkdir(parents=True)
    other = {'name': 'github', 'transport': 'http', 'url': 'https://example.com/mcp'}
    old = {'name': 'perplexity', 'transport': 'stdio', 'command': 'old'}
    target.write_text(json.dumps({'user_servers': [other, old], 'builtin_state': {'fs': True}, 'theme': 'dark'}))
    done = _write(tmp_path / 'repo', cli_env(tmp_path))
    assert done.returncode == 0, done.stderr
    data = json.loads(target.read_text())
    assert data['user_servers'][0] == other and data['user_servers'][1]['command'] != 'old'
    assert [s['name'] for s in data['user_servers']] == ['github', 'perplexity']
    assert data['builtin_state'] == {'fs': True} and data['theme'] == 'dark'
