"""The official TypeScript MCP SDK as an outside client, over stdio and Streamable HTTP (what Claude Desktop, Cursor
and VS Code are built on): it connects, lists the tools, gets a research result that passes its own `outputSchema`
validation, and reads a proper JSON-RPC error for an unknown prompt. Beside it, the split v2 SDK's client
(`@modelcontextprotocol/client`): the same research, and the skill through its `SkillsClient` (SEP-2640), which checks
the listed size, digest and frontmatter against the resource it reads.

Each SDK is installed once with npm into a cached folder (about 10 s); without Node, npm or the registry the tests
skip (and fail in CI).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pydantic_ai_perplexity._core.tool_spec import TOOLS
from pydantic_ai_perplexity.emulator import Emulator
from support.mcp_servers import DEADLINE, SERVER, HttpServer, npm_folder, server_env, ts_sdk_folder

# The TypeScript SDKs are installed with npm (Node.js).
pytestmark = pytest.mark.compat

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

SDK_V2 = '@modelcontextprotocol/client@2.4.0'
CACHE_V2 = 'pydantic-ai-perplexity-ts-client-2.4.0'
CLIENT_V2 = r"""
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { SkillsClient } from '@modelcontextprotocol/client/ext/skills';

const [mode, target, token] = process.argv.slice(2);
const client = new Client({ name: 'ts-v2-client', version: '1.0.0' });
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
const skills = new SkillsClient(client);
const listing = await skills.list();
let skill = null;
if (listing.skills.length) {
  const file = await skills.read(listing.skills[0]);
  skill = { uri: file.uri, verified: file.verified, name: file.frontmatter?.name, body: file.body?.slice(0, 60) };
}
console.log(JSON.stringify({
  protocol: client.getNegotiatedProtocolVersion(), version: client.getServerVersion(), tools, result,
  skillsSupported: skills.supported, skills: listing.skills.map((s) => s.uri), skill,
}));
await client.close();
"""


@pytest.fixture(scope='module')
def sdk() -> Path:
    """A folder with the TypeScript SDK installed and the client script in it."""
    folder = ts_sdk_folder()
    (folder / 'client.mjs').write_text(CLIENT, encoding='utf-8')
    return folder


@pytest.fixture(scope='module')
def sdk_v2() -> Path:
    """A folder with the v2 TypeScript client installed and its client script in it."""
    folder = npm_folder(CACHE_V2, [SDK_V2], '@modelcontextprotocol/client/package.json')
    (folder / 'client.mjs').write_text(CLIENT_V2, encoding='utf-8')
    return folder


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


def check_v2(outcome: dict[str, Any]) -> None:
    assert outcome['version']['name'] == 'perplexity'
    assert outcome['tools'] == [spec.name for spec in TOOLS]
    result = outcome['result']
    assert result.get('isError') is not True
    assert result['structuredContent']['status'] == 'completed' and result['structuredContent']['sources']
    assert outcome['skillsSupported'] is True and outcome['skills'] == ['skill://perplexity-research/SKILL.md']
    skill = outcome['skill']  # read and verified by the client: listed, size, digest and frontmatter all match
    assert skill['verified'] is True and skill['name'] == 'perplexity-research'
    assert skill['body'].lstrip().startswith('# Researching with Perplexity')


def test_the_v2_typescript_client_over_stdio(sdk_v2: Path, emu: Emulator, state_dir: Path) -> None:
    env = server_env(emu, state_dir, PERPLEXITY_WAIT_SECONDS='20')
    params = {'command': sys.executable, 'args': SERVER[1:], 'env': env}
    check_v2(run_client(sdk_v2, 'stdio', json.dumps(params)))


def test_the_v2_typescript_client_over_http(sdk_v2: Path, http: HttpServer) -> None:
    check_v2(run_client(sdk_v2, 'http', http.url, TOKEN))
    assert not any(b'Traceback' in line for line in http.stderr)
