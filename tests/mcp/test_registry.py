"""Found and installed: the MCP Registry's server.json, the server's identity in `initialize` and its card, and the
configs and install links of each client.

server.json is checked against a JSON Schema written here from the registry's documentation of the 2025-12-11
format (`https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json`: the required fields, the
name pattern, the 100-character description, a fixed package version, the stdio transport, the environment
variables' shape), since the published schema cannot be fetched offline.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tomllib
import urllib.parse
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import jsonschema
import pytest

from pydantic_ai_perplexity import __version__
from pydantic_ai_perplexity._domain.settings import ENV
from pydantic_ai_perplexity.emulator import Emulator
from pydantic_ai_perplexity.mcp.clients.config import client_snippet, install_links, server_command
from pydantic_ai_perplexity.mcp.server import _identity as identity
from support.mcp_servers import MCP_HEADERS, TOKEN, HttpServer, RawServer, server_env

ROOT = Path(__file__).parents[2]
SERVER_JSON = json.loads((ROOT / 'server.json').read_text(encoding='utf-8'))
PYPROJECT = tomllib.loads((ROOT / 'pyproject.toml').read_text(encoding='utf-8'))['project']
#: The bundler build_mcpb.sh packs with (the same pin).
MCPB = '@anthropic-ai/mcpb@2.1.2'
SECRETS = {ENV.API_KEY, ENV.LEDGER_URL, ENV.MCP_TOKEN, ENV.MCP_TOKENS}

_INPUT = {
    'type': 'object',
    'required': ['name'],
    'properties': {
        'name': {'type': 'string', 'minLength': 1},
        'description': {'type': 'string'},
        'isRequired': {'type': 'boolean'},
        'isSecret': {'type': 'boolean'},
        'value': {'type': 'string'},
        'default': {'type': 'string'},
    },
}
_ARGUMENT = {
    'type': 'object',
    'required': ['type'],
    'properties': {'type': {'enum': ['positional', 'named']}, 'name': {'type': 'string'}, 'value': {'type': 'string'}},
    'if': {'properties': {'type': {'const': 'named'}}},
    'then': {'required': ['name']},
    'else': {'anyOf': [{'required': ['value']}, {'required': ['valueHint']}]},
}
#: The 2025-12-11 server.json format as its documentation describes it (written here; see the module docstring).
SCHEMA: dict[str, Any] = {
    '$schema': 'https://json-schema.org/draft/2020-12/schema',
    'type': 'object',
    'required': ['name', 'description', 'version'],
    'properties': {
        '$schema': {'const': 'https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json'},
        'name': {'type': 'string', 'minLength': 3, 'maxLength': 200, 'pattern': '^[a-zA-Z0-9.-]+/[a-zA-Z0-9._-]+$'},
        'title': {'type': 'string', 'minLength': 1, 'maxLength': 100},
        'description': {'type': 'string', 'minLength': 1, 'maxLength': 100},
        'version': {'type': 'string', 'maxLength': 255, 'not': {'pattern': r'^[\^~<>=]|\.[x*]|^latest$'}},
        'websiteUrl': {'type': 'string', 'pattern': '^https://'},
        'repository': {
            'type': 'object',
            'required': ['url', 'source'],
            'properties': {'url': {'type': 'string', 'pattern': '^https://'}, 'source': {'type': 'string'}},
        },
        'icons': {
            'type': 'array',
            'items': {
                'type': 'object',
                'required': ['src'],
                'properties': {
                    'src': {'type': 'string', 'pattern': '^https://', 'maxLength': 255},
                    'mimeType': {'enum': ['image/png', 'image/jpeg', 'image/jpg', 'image/svg+xml', 'image/webp']},
                    'sizes': {'type': 'array', 'items': {'type': 'string', 'pattern': r'^(\d+x\d+|any)$'}},
                },
            },
        },
        'packages': {
            'type': 'array',
            'items': {
                'type': 'object',
                'required': ['registryType', 'identifier', 'transport'],
                'properties': {
                    'registryType': {'type': 'string'},
                    'registryBaseUrl': {'type': 'string', 'pattern': '^https://'},
                    'identifier': {'type': 'string'},
                    'version': {'type': 'string', 'minLength': 1, 'not': {'const': 'latest'}},
                    'runtimeHint': {'type': 'string'},
                    'runtimeArguments': {'type': 'array', 'items': _ARGUMENT},
                    'packageArguments': {'type': 'array', 'items': _ARGUMENT},
                    'transport': {
                        'type': 'object',
                        'required': ['type'],
                        'properties': {'type': {'enum': ['stdio', 'streamable-http', 'sse']}},
                    },
                    'environmentVariables': {'type': 'array', 'items': _INPUT},
                },
            },
        },
    },
}


# -- server.json ---------------------------------------------------------------------------------------------------


def test_server_json_follows_the_registry_format() -> None:
    jsonschema.Draft202012Validator(SCHEMA).validate(SERVER_JSON)


def test_the_schema_refuses_what_the_registry_refuses() -> None:
    """The local schema can fail: a long description, a version range, a name without a namespace."""
    validator = jsonschema.Draft202012Validator(SCHEMA)
    for bad in ({'description': 'x' * 101}, {'version': '^0.1.0'}, {'name': 'pydantic-ai-perplexity'}):
        assert not validator.is_valid(SERVER_JSON | bad), bad


def test_server_json_says_what_pyproject_and_the_identity_say() -> None:
    (package,) = SERVER_JSON['packages']
    assert SERVER_JSON['name'] == identity.REGISTRY_NAME
    assert SERVER_JSON['description'] == PYPROJECT['description'] == identity.DESCRIPTION
    assert SERVER_JSON['version'] == package['version'] == PYPROJECT['version'] == __version__
    assert SERVER_JSON['title'] == identity.TITLE
    homepage = PYPROJECT['urls']['Homepage']
    assert SERVER_JSON['websiteUrl'] == SERVER_JSON['repository']['url'] == homepage == identity.WEBSITE
    # The registry proves ownership of io.github.<owner>/ by the GitHub namespace of the repository.
    owner = homepage.removeprefix('https://github.com/').split('/')[0]
    assert SERVER_JSON['name'].startswith(f'io.github.{owner}/')
    assert package['identifier'] == PYPROJECT['name'] == identity.PACKAGE
    (icon,) = SERVER_JSON['icons']
    assert icon['src'].endswith('/' + identity.ICON_FILE.relative_to(ROOT).as_posix())


def test_server_json_starts_the_server_the_way_the_uvx_launcher_does() -> None:
    (package,) = SERVER_JSON['packages']
    assert (package['registryType'], package['runtimeHint'], package['transport']) == ('pypi', 'uvx', {'type': 'stdio'})
    runtime = [part for arg in package['runtimeArguments'] for part in (arg['name'], arg['value'])]
    command = [
        package['runtimeHint'],
        *runtime,
        package['identifier'],
        *(a['value'] for a in package['packageArguments']),
    ]
    uvx, args = server_command('uvx')
    # The same command, with the version pinned to this release.
    assert command == [uvx, *args] or command == [uvx, args[0], f'{args[1]}=={__version__}', *args[2:]]


def test_server_json_lists_every_variable_the_settings_read() -> None:
    (package,) = SERVER_JSON['packages']
    variables = {v['name']: v for v in package['environmentVariables']}
    # Every variable of the one list but the emulator's, which configure the separate emulator, not this server.
    names = {name for name in ENV.ALL if not name.startswith(ENV.EMULATOR_PREFIX)}
    assert set(variables) == names and len(names) == 26
    assert {n for n, v in variables.items() if v['isSecret']} == SECRETS
    assert {n for n, v in variables.items() if v['isRequired']} == {ENV.API_KEY}
    assert all(v['description'] for v in variables.values())


def test_the_readme_names_the_server_for_the_registry() -> None:
    """The registry reads `mcp-name: <name>` from the package's README on PyPI (the package's long description)."""
    readme = (ROOT / PYPROJECT['readme']).read_text(encoding='utf-8')
    assert f'mcp-name: {identity.REGISTRY_NAME}' in readme


# -- initialize and the card ---------------------------------------------------------------------------------------


def test_the_icon_is_a_small_svg_given_inline() -> None:
    svg = identity.ICON_FILE.read_bytes()
    assert svg.startswith(b'<svg') and len(svg) < 2048 and b'<script' not in svg
    assert base64.b64decode(identity.icon_data_uri().split(',', 1)[1]) == svg


@pytest.mark.parametrize('version', ['2025-11-25', '2024-11-05'])
def test_stdio_initialize_names_the_server(emu: Emulator, state_dir: Path, version: str) -> None:
    server = RawServer(server_env(emu, state_dir))
    try:
        reply = server.initialize(version)
    finally:
        server.close()
    assert reply['result']['serverInfo'] == identity.implementation()


@pytest.mark.slow
def test_stdio_discover_names_the_server_in_the_2026_era(emu: Emulator, state_dir: Path) -> None:
    server = RawServer(server_env(emu, state_dir))
    try:
        meta = {
            'io.modelcontextprotocol/protocolVersion': '2026-07-28',
            'io.modelcontextprotocol/clientCapabilities': {},
            'io.modelcontextprotocol/clientInfo': {'name': 't', 'version': '1'},
        }
        reply = server.request('server/discover', {'_meta': meta})
    finally:
        server.close()
    assert identity.implementation() in _values(reply), reply


@pytest.fixture(scope='module')
def http_server(emu: Emulator, state_dir: Path) -> Iterator[HttpServer]:
    server = HttpServer(server_env(emu, state_dir, PERPLEXITY_MCP_TOKEN=TOKEN))
    yield server
    server.stop()


@pytest.mark.slow
def test_http_initialize_names_the_server_in_both_eras(http_server: HttpServer) -> None:
    auth = {'Authorization': f'Bearer {TOKEN}'}
    legacy = {
        'jsonrpc': '2.0',
        'id': 1,
        'method': 'initialize',
        'params': {'protocolVersion': '2025-11-25', 'capabilities': {}, 'clientInfo': {'name': 't', 'version': '1'}},
    }
    reply = httpx2.post(http_server.url, json=legacy, headers={**MCP_HEADERS, **auth}, timeout=30)
    events = [json.loads(line[5:]) for line in reply.text.splitlines() if line.startswith('data:')]
    assert events[-1]['result']['serverInfo'] == identity.implementation()
    meta = {
        'io.modelcontextprotocol/protocolVersion': '2026-07-28',
        'io.modelcontextprotocol/clientCapabilities': {},
        'io.modelcontextprotocol/clientInfo': {'name': 't', 'version': '1'},
    }
    modern = {'jsonrpc': '2.0', 'id': 2, 'method': 'server/discover', 'params': {'_meta': meta}}
    headers = {**MCP_HEADERS, **auth, 'MCP-Protocol-Version': '2026-07-28', 'Mcp-Method': 'server/discover'}
    reply = httpx2.post(http_server.url, json=modern, headers=headers, timeout=30)
    if reply.headers.get('content-type', '').startswith('text/event-stream'):
        body = [json.loads(line[5:]) for line in reply.text.splitlines() if line.startswith('data:')][-1]
    else:
        body = reply.json()
    assert identity.implementation() in _values(body), body


def _values(value: Any) -> Iterator[Any]:
    """Every value nested in `value`, itself included."""
    yield value
    if isinstance(value, dict):
        for item in value.values():  # pyright: ignore[reportUnknownVariableType]
            yield from _values(item)
    elif isinstance(value, list):
        for item in value:  # pyright: ignore[reportUnknownVariableType]
            yield from _values(item)


def test_the_server_card_is_public_complete_and_holds_no_secret(http_server: HttpServer, emu: Emulator) -> None:
    base = http_server.url.removesuffix('/mcp')
    reply = httpx2.get(f'{base}/.well-known/mcp/server-card.json', timeout=30)  # no token
    assert reply.status_code == 200 and reply.headers['access-control-allow-origin'] == '*'
    card = reply.json()
    assert {k: card[k] for k in ('name', 'title', 'description', 'version', 'websiteUrl')} == {
        'name': identity.REGISTRY_NAME,
        'title': identity.TITLE,
        'description': identity.DESCRIPTION,
        'version': __version__,
        'websiteUrl': identity.WEBSITE,
    }
    assert card['serverInfo'] == identity.implementation() and card['icons'] == identity.icons()
    assert card['remotes'] == [{'type': 'streamable-http', 'url': http_server.url}]
    assert card['authentication'] == {'required': True, 'schemes': ['bearer']}
    assert 'tools' in card['capabilities'] and '2025-11-25' in card['protocolVersions']
    names = [t['name'] for t in card['tools']]
    assert 'perplexity_research' in names and all(t['description'] for t in card['tools'])
    for secret in (TOKEN, emu.api_key, emu.base_url):
        assert secret not in reply.text
    # What the card would not answer: a Host the server does not serve, a write.
    assert httpx2.get(f'{base}/.well-known/mcp/server-card.json', headers={'Host': 'evil.example'}).status_code == 421
    assert httpx2.post(f'{base}/.well-known/mcp/server-card.json', timeout=30).status_code == 405
    assert httpx2.get(f'{base}/healthz', timeout=30).status_code == 200  # still serving


# -- client configs and install links ------------------------------------------------------------------------------


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in os.environ if n.startswith(('PERPLEXITY_', 'OTEL_', 'LOGFIRE_'))]:
        monkeypatch.delenv(name)
    monkeypatch.setenv('PERPLEXITY_LEDGER_URL', 'postgresql://alice:ledger-secret@db.internal/research')
    monkeypatch.setenv('PERPLEXITY_EFFORT', 'low')


def test_codex_windsurf_and_zed_snippets_parse_and_hold_no_secret(clean_env: None) -> None:
    codex = tomllib.loads(client_snippet('codex'))['mcp_servers']['perplexity']
    assert codex['env_vars'] == ['PERPLEXITY_API_KEY', 'PERPLEXITY_LEDGER_URL']  # forwarded by name
    assert codex['env'] == {'PERPLEXITY_EFFORT': 'low'} and codex['tool_timeout_sec'] > 55
    windsurf = json.loads(client_snippet('windsurf'))['mcpServers']['perplexity']
    assert windsurf['env']['PERPLEXITY_API_KEY'] == '${env:PERPLEXITY_API_KEY}'
    assert windsurf['env']['PERPLEXITY_LEDGER_URL'] == '${env:PERPLEXITY_LEDGER_URL}'
    zed = json.loads(client_snippet('zed'))['context_servers']['perplexity']
    assert zed['env']['PERPLEXITY_API_KEY'].startswith('<')
    command, args = server_command()
    for entry in (codex, windsurf, zed):
        assert [entry['command'], *entry['args']] == [command, *args]
    for client in ('codex', 'windsurf', 'zed'):
        assert 'ledger-secret' not in client_snippet(client, launcher='uvx')


def test_install_links_decode_to_the_config_the_config_command_prints(clean_env: None) -> None:
    links = install_links()
    cursor = urllib.parse.urlsplit(links['cursor'])
    assert (cursor.scheme, cursor.netloc, cursor.path) == ('cursor', 'anysphere.cursor-deeplink', '/mcp/install')
    query = urllib.parse.parse_qs(cursor.query)
    assert query['name'] == ['perplexity']
    decoded = json.loads(base64.b64decode(query['config'][0]))
    assert decoded == json.loads(client_snippet('cursor', launcher='uvx'))['mcpServers']['perplexity']
    prefix = 'vscode:mcp/install?'
    assert links['vscode'].startswith(prefix)
    vscode = json.loads(urllib.parse.unquote(links['vscode'].removeprefix(prefix)))
    snippet = json.loads(client_snippet('vscode', launcher='uvx'))
    assert vscode.pop('name') == 'perplexity' and vscode.pop('inputs') == snippet['inputs']
    assert vscode == snippet['servers']['perplexity']
    web = urllib.parse.urlsplit(links['vscode-web'])
    assert (web.scheme, web.netloc, web.path) == ('https', 'insiders.vscode.dev', '/redirect')
    assert urllib.parse.parse_qs(web.query)['url'] == [links['vscode']]
    assert 'ledger-secret' not in links['cursor'] + links['vscode'] + base64.b64decode(query['config'][0]).decode()


def test_the_readme_links_are_the_ones_install_links_makes() -> None:
    readme = (ROOT / 'README.md').read_text(encoding='utf-8')
    links = install_links(environ={})
    for name in ('cursor', 'vscode-web'):  # GitHub links only to https, so VS Code's through its redirect
        assert f']({links[name]})' in readme, name


# -- the Claude Desktop bundle ---------------------------------------------------------------------------------------


def test_the_bundle_manifest_says_what_pyproject_and_the_identity_say() -> None:
    manifest = json.loads((ROOT / 'manifest.json').read_text(encoding='utf-8'))
    assert (manifest['name'], manifest['version']) == (PYPROJECT['name'], PYPROJECT['version'])
    assert manifest['description'] == identity.DESCRIPTION and manifest['display_name'] == identity.TITLE
    assert manifest['server']['type'] == 'uv' and (ROOT / manifest['server']['entry_point']).is_file()
    assert manifest['server']['mcp_config']['env'] == {'PERPLEXITY_API_KEY': '${user_config.api_key}'}
    assert manifest['user_config']['api_key']['sensitive'] is True
    assert f'MCPB="{MCPB}"' in (ROOT / 'scripts' / 'build_mcpb.sh').read_text(encoding='utf-8')


@pytest.mark.compat
@pytest.mark.skipif(shutil.which('npx') is None, reason='the bundle is packed with npx (Node.js)')
def test_the_built_bundle_is_a_zip_whose_manifest_validates(tmp_path: Path) -> None:
    done = subprocess.run(['bash', 'scripts/build_mcpb.sh'], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    bundle = ROOT / done.stdout.strip().splitlines()[-1]
    with zipfile.ZipFile(bundle) as archive:
        names = set(archive.namelist())
        assert {'manifest.json', 'pyproject.toml', 'uv.lock', 'src/pydantic_ai_perplexity/mcp/__main__.py'} <= names
        assert not any('__pycache__' in n for n in names)
        packed = json.loads(archive.read('manifest.json'))
        archive.extract('manifest.json', tmp_path)
    assert packed == json.loads((ROOT / 'manifest.json').read_text(encoding='utf-8'))
    env = {**os.environ, 'npm_config_cache': str(ROOT / 'build' / 'npm-cache')}
    check = subprocess.run(
        ['npx', '--yes', MCPB, 'validate', str(tmp_path / 'manifest.json')],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert check.returncode == 0 and 'validation passes' in check.stdout, check.stdout + check.stderr
    if shutil.which('uv') is not None:  # the bundle starts as Claude Desktop starts it, from its unpacked folder
        _starts_from_the_unpacked_bundle(bundle, tmp_path / 'unpacked')


def _starts_from_the_unpacked_bundle(bundle: Path, folder: Path) -> None:
    """Run the manifest's command in the unpacked bundle (uv installs the locked dependencies from its cache) and
    check the server answers `initialize` with its identity."""
    with zipfile.ZipFile(bundle) as archive:
        archive.extractall(folder)
    config = json.loads((folder / 'manifest.json').read_text(encoding='utf-8'))['server']['mcp_config']
    args = [a.replace('${__dirname}', str(folder)) for a in config['args']]
    initialize = {
        'jsonrpc': '2.0',
        'id': 1,
        'method': 'initialize',
        'params': {'protocolVersion': '2025-11-25', 'capabilities': {}, 'clientInfo': {'name': 't', 'version': '1'}},
    }
    done = subprocess.run(
        [config['command'], *args],
        input=json.dumps(initialize) + '\n',
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, 'UV_OFFLINE': '1', 'UV_PROJECT_ENVIRONMENT': str(folder / '.venv')},
    )
    first = json.loads(done.stdout.splitlines()[0]) if done.stdout else {}
    assert first.get('result', {}).get('serverInfo') == identity.implementation(), done.stderr[-2000:]
