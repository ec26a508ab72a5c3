"""The MCP conformance suite (`@modelcontextprotocol/conformance` 0.1.16, its server scenarios) against the Streamable
HTTP server on loopback, with the committed list of expected failures and why (`conformance-expected-failures.yml`).

The suite runs through npx from a cached npm folder, with Node 22 from npm (it needs `fs.globSync`); without Node,
npm or the registry the test skips (and fails in CI). A scenario that fails and is not listed, or passes and is
listed, fails the test.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from pydantic_ai_perplexity.emulator import Emulator
from support.mcp_servers import HttpServer, npm_folder, server_env

# The conformance suite runs with npx (Node.js).
pytestmark = pytest.mark.compat

SUITE = '@modelcontextprotocol/conformance@0.1.16'
NODE = 'node@22'
CACHE = 'pydantic-ai-perplexity-mcp-conformance-0.1.16'
EXPECTED = Path(__file__).with_name('conformance-expected-failures.yml')


@pytest.fixture(scope='module')
def suite() -> Path:
    return npm_folder(CACHE, [SUITE, NODE], '@modelcontextprotocol/conformance/package.json')


@pytest.fixture(scope='module')
def http(emu: Emulator, state_dir: Path) -> Iterator[HttpServer]:
    server = HttpServer(server_env(emu, state_dir, PERPLEXITY_WAIT_SECONDS='20'))
    yield server
    server.stop()


def test_the_conformance_suite_passes_but_for_the_expected_failures(
    suite: Path, http: HttpServer, tmp_path: Path
) -> None:
    npx = shutil.which('npx')
    if npx is None:
        pytest.skip('npx is needed for the conformance suite')
    env = dict(os.environ, PATH=f'{suite / "node_modules" / ".bin"}{os.pathsep}{os.environ.get("PATH", "")}')
    command = [npx, '--no-install', 'conformance', 'server', '--url', http.url, '--expected-failures', str(EXPECTED)]
    done = subprocess.run([*command, '-o', str(tmp_path)], cwd=suite, capture_output=True, timeout=600, env=env)
    out = done.stdout.decode(errors='replace') + done.stderr.decode(errors='replace')
    assert done.returncode == 0, out[-4000:]
    assert '✓ server-initialize' in out and '✓ tools-list' in out and '✓ dns-rebinding-protection' in out
    assert list(tmp_path.glob('server-tools-list-*/checks.json'))
    assert not any(b'Traceback' in line for line in http.stderr)  # every scenario answered cleanly
    http.stop()
    assert http.proc.returncode == 0
