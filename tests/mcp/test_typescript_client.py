"""The official TypeScript MCP SDK as an outside client, over stdio and Streamable HTTP (what Claude Desktop, Cursor
and VS Code are built on): it connects, lists the tools, gets a research result that passes its own `outputSchema`
validation, and reads a proper JSON-RPC error for an unknown prompt.

The SDK is installed once with npm into a cached folder (about 10 s); without Node, npm or the registry the tests skip.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp_support import DEADLINE, SERVER, server_env
from test_http import HttpServer

from pydantic_ai_perplexity.emulator import Emulator

SDK = '@modelcontextprotocol/sdk@1.32.2'
CACHE = Path(tempfile.gettempdir()) / 'pydantic-ai-perplexity-ts-sdk-1.32.2'
TOKEN = secrets.token_urlsafe(24)

CLIENT = r"""
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const [mode, target, token] = process.argv.slice(2);
const client = new Client({ name: 'ts-outside-client', version: '1.0.0' });
const headers = { Authorization: `Bearer ${token}` };
const transport = mode === 'stdio'
  ? new StdioClientTransport({ ...JSON.parse(target), stderr: 'ignore' })
  : new StreamableHTTPClientTransport(new URL(target), { requestInit: { headers } });
await client.connect(transport);
const tools = (await client.listTools()).tools.map((t) => t.name);
const result = await client.callTool({
  name: 'perplexity_research',
  arguments: { query: 'What does the EU AI Act regulate?', effort: 'fast' },
});
let prompt = null;
try {
  await client.getPrompt({ name: 'no-such-prompt' });
} catch (error) {
  prompt = { code: error.code, message: error.message };
}
console.log(JSON.stringify({ version: client.getServerVersion(), tools, result, prompt }));
await client.close();
"""


@pytest.fixture(scope='module')
def sdk() -> Path:
    """A folder with the TypeScript SDK installed and the client script in it."""
    node, npm = shutil.which('node'), shutil.which('npm')
    if node is None or npm is None:
        pytest.skip('Node.js and npm are needed for the TypeScript SDK client')
    if not (CACHE / 'node_modules' / '@modelcontextprotocol' / 'sdk' / 'package.json').exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        (CACHE / 'package.json').write_text('{"private": true, "type": "module"}\n', encoding='utf-8')
        try:
            done = subprocess.run(
                [npm, 'install', '--no-audit', '--no-fund', '--silent', SDK],
                cwd=CACHE,
                capture_output=True,
                timeout=300,
            )
        except subprocess.TimeoutExpired:
            pytest.skip('npm install timed out (no registry?)')
        if done.returncode != 0:
            pytest.skip(f'npm install {SDK} failed (no registry?): {done.stderr.decode(errors="replace")[-300:]}')
    (CACHE / 'client.mjs').write_text(CLIENT, encoding='utf-8')
    return CACHE


@pytest.fixture(scope='module')
def http(emu: Emulator, state_dir: Path) -> Iterator[HttpServer]:
    server = HttpServer(server_env(emu, state_dir, PERPLEXITY_MCP_TOKEN=TOKEN, PERPLEXITY_WAIT_SECONDS='20'))
    yield server
    server.stop()


def run_client(sdk: Path, *args: str) -> dict[str, Any]:
    node = shutil.which('node')
    assert node is not None
    done = subprocess.run(
        [node, str(sdk / 'client.mjs'), *args], cwd=sdk, capture_output=True, timeout=DEADLINE, env=dict(os.environ)
    )
    assert done.returncode == 0, done.stderr.decode(errors='replace')[-3000:]
    return json.loads(done.stdout.decode().strip().splitlines()[-1])


def check(outcome: dict[str, Any]) -> None:
    assert outcome['version']['name'] == 'perplexity'
    assert outcome['tools'] == [
        'perplexity_research',
        'perplexity_research_result',
        'perplexity_research_cancel',
        'perplexity_research_list',
        'perplexity_search',
    ]
    result = outcome['result']
    assert result.get('isError') is not True
    assert result['structuredContent']['status'] == 'completed' and result['structuredContent']['sources']
    assert 'Sources:' in result['content'][0]['text']
    assert outcome['prompt']['code'] == -32602 and 'no-such-prompt' in outcome['prompt']['message']


def test_the_typescript_sdk_client_over_stdio(sdk: Path, emu: Emulator, state_dir: Path) -> None:
    env = server_env(emu, state_dir, PERPLEXITY_WAIT_SECONDS='20')
    params = {'command': sys.executable, 'args': SERVER[1:], 'env': env}
    check(run_client(sdk, 'stdio', json.dumps(params)))


def test_the_typescript_sdk_client_over_http(sdk: Path, http: HttpServer) -> None:
    check(run_client(sdk, 'http', http.url, TOKEN))
    assert not any(b'Traceback' in line for line in http.stderr)
