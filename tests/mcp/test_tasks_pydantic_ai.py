"""pydantic-ai's `MCPToolset` with its task support installed (`pydantic-ai-slim[mcp-tasks]`) runs our research as a
task (2026-07-28 tasks extension), over Streamable HTTP.

`pydantic-ai-slim[mcp-tasks]` 2.68 resolves to `fastmcp-slim` 4.1.4 and `fastmcp-tasks` 4.1.4, which this project's
lock cannot take (it has `fastmcp-slim` 4.2.3; see docs/decisions.md). So the client runs from a throwaway venv,
made once with uv into a cached folder (about 30 s); without uv or the registry the test skips.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from pydantic_ai_perplexity._ledger import Ledger
from pydantic_ai_perplexity.emulator import Emulator
from support.mcp_servers import DEADLINE, HttpServer, server_env

# A throwaway venv, installed with uv from the registry.
pytestmark = pytest.mark.compat

PINS = ['pydantic-ai-slim[mcp-tasks]==2.68.0', 'fastmcp-tasks==4.1.4', 'fastmcp-slim==4.1.4']
VENV = Path(tempfile.gettempdir()) / 'pydantic-ai-perplexity-mcp-tasks-venv'
TOKEN = 'tasks-' + os.urandom(18).hex()

CLIENT = r"""
import asyncio, json, sys
from pydantic_ai.mcp import MCPToolset

async def main(url, token):
    toolset = MCPToolset(url, auth=token, read_timeout=60)
    async with toolset:
        out = {'modern': toolset.client.initialize_result is None}
        question = {'query': 'What does the EU AI Act regulate? [[emulate: duration=400]]', 'effort': 'fast'}
        out['task'] = await toolset.direct_call_tool('perplexity_research', question, use_task=True)
        out['call'] = await toolset.direct_call_tool('perplexity_research', question)
    print(json.dumps(out))

asyncio.run(main(*sys.argv[1:]))
"""


@pytest.fixture(scope='module')
def python() -> Path:
    """The throwaway venv's Python, with pydantic-ai's MCP task support installed."""
    uv = shutil.which('uv')
    if uv is None:
        pytest.skip('uv is needed to make the throwaway venv')
    executable = VENV / 'bin' / 'python'
    if not (VENV / 'ready').exists():
        shutil.rmtree(VENV, ignore_errors=True)
        try:
            subprocess.run([uv, 'venv', '-q', '-p', '3.11', str(VENV)], check=True, capture_output=True, timeout=120)
            done = subprocess.run(
                [uv, 'pip', 'install', '-q', '--python', str(executable), *PINS], capture_output=True, timeout=300
            )
        except (subprocess.TimeoutExpired, subprocess.CalledProcessError) as exc:
            pytest.skip(f'could not make the throwaway venv (no registry?): {exc}')
        if done.returncode != 0:
            pytest.skip(f'uv pip install failed (no registry?): {done.stderr.decode(errors="replace")[-300:]}')
        (VENV / 'ready').write_text('ok\n', encoding='utf-8')
    return executable


def test_pydantic_ai_mcp_toolset_with_mcp_tasks_runs_research_as_a_task(
    python: Path, emu: Emulator, tmp_path: Path
) -> None:
    server = HttpServer(server_env(emu, tmp_path, PERPLEXITY_WAIT_SECONDS='20', PERPLEXITY_MCP_TOKEN=TOKEN))
    try:
        done = subprocess.run(
            [str(python), '-c', CLIENT, server.url, TOKEN], capture_output=True, timeout=DEADLINE * 2, cwd=tmp_path
        )
    finally:
        server.stop()
    assert done.returncode == 0, done.stderr.decode(errors='replace')[-3000:]
    out = json.loads(done.stdout.decode().strip().splitlines()[-1])
    assert out['modern']
    for result in (out['task'], out['call']):
        assert result['status'] == 'completed' and result['sources'], result
    with Ledger(tmp_path / 'ledger.sqlite3') as ledger:
        rows = {r.response_id: r for r in ledger.list(limit=10)}
    # Both calls ran as tasks: fastmcp-tasks declares the extension on every request, and the server decides.
    assert {out['task']['response_id'], out['call']['response_id']} == set(rows)
    assert all(r.request_id == 'mcp:task' and r.status == 'completed' for r in rows.values())
