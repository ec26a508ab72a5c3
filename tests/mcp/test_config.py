"""The configs and snippets, the tools' words against the toolset's, and what importing the package costs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pydantic_deep.mcp import MCPServerConfig

from pydantic_ai_perplexity._ledger import RunRecord
from pydantic_ai_perplexity.mcp import add_to_pydantic_deep, client_snippet, perplexity_mcp_config
from pydantic_ai_perplexity.mcp.clients.config import CLIENTS, child_environment, server_command
from support.mcp_servers import DEADLINE, SERVER, server_env

SENTINEL = 'pplx-sentinel-key-never-written-0123456789'


@pytest.fixture
def parent_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if child_environment(environ={name: 'x'}):
            monkeypatch.delenv(name)
    for name, value in {
        'PERPLEXITY_API_KEY': SENTINEL,
        'PERPLEXITY_BASE_URL': 'http://127.0.0.1:8787',
        'PERPLEXITY_WAIT_SECONDS': '600',
        'PERPLEXITY_MCP_TOKEN': 'http-token-not-for-stdio',
        'OTEL_EXPORTER_OTLP_ENDPOINT': 'http://collector:4318',
        'OTEL_EXPORTER_OTLP_HEADERS': 'authorization=Bearer otel-secret',
        'LOGFIRE_TOKEN': 'logfire-secret',
        'HTTPS_PROXY': 'http://proxy.internal:3128',
        'HTTP_PROXY': 'http://user:proxy-secret@proxy.internal:3128',
        'SSL_CERT_FILE': '/etc/ssl/corp.pem',
        'PERPLEXITY_STATE_DIR': '/var/lib/research',
        'UNRELATED': 'not passed',
    }.items():
        monkeypatch.setenv(name, value)


def test_the_pydantic_deep_config_is_safe_and_complete(parent_env: None) -> None:
    config = perplexity_mcp_config()
    assert (config.name, config.transport, config.tool_prefix) == ('perplexity', 'stdio', None)
    assert config.command == sys.executable and config.args == ['-m', 'pydantic_ai_perplexity.mcp']
    assert config.auth is not None and (config.auth.kind, config.auth.secret_key) == ('env', 'PERPLEXITY_API_KEY')
    assert config.init_timeout is not None and config.init_timeout >= 20
    assert config.include_skills is True
    assert config.env == {
        'HTTPS_PROXY': 'http://proxy.internal:3128',
        'HTTP_PROXY': 'http://user:proxy-secret@proxy.internal:3128',
        'LOGFIRE_TOKEN': 'logfire-secret',
        'OTEL_EXPORTER_OTLP_ENDPOINT': 'http://collector:4318',
        'OTEL_EXPORTER_OTLP_HEADERS': 'authorization=Bearer otel-secret',
        'PERPLEXITY_BASE_URL': 'http://127.0.0.1:8787',
        'PERPLEXITY_STATE_DIR': '/var/lib/research',
        'SSL_CERT_FILE': '/etc/ssl/corp.pem',
    }
    assert SENTINEL not in json.dumps(config.to_dict())


def test_config_overrides_and_refusals(parent_env: None) -> None:
    config = perplexity_mcp_config(name='research', wait_seconds=30, env={'EXTRA': '1'}, enabled=False)
    assert (config.name, config.enabled) == ('research', False)
    assert config.env['PERPLEXITY_WAIT_SECONDS'] == '30' and config.env['EXTRA'] == '1'
    with pytest.raises(ValueError, match='tool_prefix'):
        perplexity_mcp_config(tool_prefix='px')
    with pytest.raises(ValueError, match='300 s'):
        perplexity_mcp_config(wait_seconds=600)
    assert server_command('uvx') == ('uvx', ['--from', 'pydantic-ai-perplexity[mcp]', 'pydantic-ai-perplexity', 'mcp'])


def test_environment_for_a_file_leaves_out_anything_secret(parent_env: None) -> None:
    env = child_environment(for_file=True)
    # SSL_CERT_FILE describes this shell (a CA bundle set for a proxy or a test), so a file does not pin it.
    assert env == {
        'HTTPS_PROXY': 'http://proxy.internal:3128',
        'OTEL_EXPORTER_OTLP_ENDPOINT': 'http://collector:4318',
        'PERPLEXITY_BASE_URL': 'http://127.0.0.1:8787',
        'PERPLEXITY_STATE_DIR': '/var/lib/research',
    }


@pytest.mark.parametrize('client', CLIENTS)
def test_client_snippets_name_the_interpreter_and_never_hold_a_secret(parent_env: None, client: str) -> None:
    snippet = client_snippet(client)
    assert json.dumps(sys.executable)[1:-1] in snippet and 'pydantic_ai_perplexity.mcp' in snippet
    for secret in (SENTINEL, 'otel-secret', 'logfire-secret', 'proxy-secret', 'http-token-not-for-stdio'):
        assert secret not in snippet
    if client == 'codex':
        tomllib.loads(snippet)
    elif client != 'claude-code':
        json.loads(snippet)
    expected_key = {
        'codex': 'env_vars = ["PERPLEXITY_API_KEY"',
        'windsurf': '${env:PERPLEXITY_API_KEY}',
        'zed': '<your Perplexity API key>',
        'claude-desktop': '<your Perplexity API key>',
        'claude-code': '${PERPLEXITY_API_KEY}',
        'cursor': '${env:PERPLEXITY_API_KEY}',
        'vscode': '${input:perplexity-key}',
        'pydantic-deep': '"secret_key": "PERPLEXITY_API_KEY"',
    }[client]
    assert expected_key in snippet
    with pytest.raises(ValueError, match='Unknown client'):
        client_snippet('emacs')


def test_the_config_command_gives_the_uvx_form_only_when_asked_and_says_what_it_needs(parent_env: None) -> None:
    from click.testing import CliRunner

    from pydantic_ai_perplexity.cli import cli

    default = CliRunner().invoke(cli, ['config', 'cursor'])
    assert default.exit_code == 0 and 'uvx' not in default.output
    assert json.loads(default.stdout)['mcpServers']['perplexity']['command'] == sys.executable
    uvx = CliRunner().invoke(cli, ['config', 'cursor', '--launcher', 'uvx'])
    assert uvx.exit_code == 0, uvx.output
    assert json.loads(uvx.stdout)['mcpServers']['perplexity']['command'] == 'uvx'
    assert 'once the package is published' in uvx.stderr and 'default launcher' in uvx.stderr


def test_add_to_pydantic_deep_keeps_other_servers_and_never_writes_the_key(parent_env: None, tmp_path: Path) -> None:
    path = tmp_path / '.pydantic-deep' / 'mcp.json'
    path.parent.mkdir()
    other = {'name': 'github', 'transport': 'http', 'url': 'https://example.com/mcp'}
    path.write_text(json.dumps({'builtin_state': {'github': {'enabled': False}}, 'user_servers': [other]}))
    assert add_to_pydantic_deep(path) == path
    assert add_to_pydantic_deep(path) == path  # adding again replaces, never duplicates
    text = path.read_text(encoding='utf-8')
    data = json.loads(text)
    assert [s['name'] for s in data['user_servers']] == ['github', 'perplexity']
    assert data['builtin_state'] == {'github': {'enabled': False}}
    assert SENTINEL not in text and 'otel-secret' not in text
    restored = MCPServerConfig.from_dict(data['user_servers'][1])
    assert restored.command == sys.executable and restored.include_skills and restored.auth is not None


def test_the_run_list_is_one_line_per_run_with_a_sanitised_bounded_query() -> None:
    from pydantic_ai_perplexity._present.model_text import runs_for_model

    now = datetime.now(UTC)
    records = [
        RunRecord(
            response_id='resp_a', query='What is\nthe EU AI Act?', origin='mcp', status='completed', cost_usd=0.01
        ),
        RunRecord(response_id='resp_b', query='x' * 300, origin='toolset', created_at=now - timedelta(hours=3)),
    ]
    first, second = runs_for_model(records).splitlines()
    assert first.startswith('resp_a | completed | ') and first.endswith('| $0.0100 | - | What is the EU AI Act?')
    assert second.startswith('resp_b | queued | 3h ago | cost pending |') and second.endswith('x' * 99 + '…')
    assert runs_for_model([]) == 'No research runs recorded yet.'


def test_importing_the_package_loads_no_mcp_sdk_pydantic_ai_or_pydantic_deep() -> None:
    code = (
        'import sys, pydantic_ai_perplexity.mcp, pydantic_ai_perplexity.mcp.server._build\n'
        'import pydantic_ai_perplexity.mcp.clients.config\n'
        'heavy = ("mcp", "mcp_types", "pydantic_ai", "pydantic_deep", "fastmcp", "logfire", "httpx2", "pydantic")\n'
        'print([name for name in heavy if name in sys.modules])\n'
    )
    done = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=DEADLINE, check=True)
    assert done.stdout.strip() == '[]'


def test_an_unknown_transport_is_refused(tmp_path: Path) -> None:
    done = subprocess.run(
        [*SERVER, '--transport', 'carrier-pigeon'],
        env=server_env(None, tmp_path),
        capture_output=True,
        timeout=DEADLINE,
    )
    assert done.returncode == 2 and done.stdout == b''


def test_the_config_command_offers_every_client_the_snippets_know() -> None:
    import click

    from pydantic_ai_perplexity.cli import config

    (client,) = [p for p in config.params if p.name == 'client']
    assert isinstance(client.type, click.Choice) and tuple(client.type.choices) == CLIENTS
