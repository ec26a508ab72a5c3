"""Each documented way in installs and works in a fresh venv with exactly the extras the README names for it.

Builds the sdist and the wheel (`uv build`), then for each way in makes a new venv (`uv venv`), installs the
package the way the README's Install section says (from the checkout, or from the built wheel, with the named
extras; `uv pip install`, fast from uv's cache) and runs that way in there, offline against the built-in emulator:

- the core from the checkout: the CLI researches; `config claude-desktop` and `config pydantic-deep` name the extra
  to install instead of printing a traceback or a config for a server that cannot start;
- `[pydantic-ai]`: the README's toolset snippet, with a scripted model;
- `[mcp]`: the `config claude-desktop` command, started as a client would, answers the self-test's requests;
- `[pydantic-ai,mcp]`: the README's `perplexity_mcp_toolset()` snippet;
- `[deep]`: `config pydantic-deep` and `perplexity_mcp_config()`.

Run: `python3 scripts/check_installs.py` (CI runs it from `.ci/run`). Needs uv and the package index or uv's cache.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
#: Every step is bounded: an install that hangs on the network fails the check instead of CI.
STEP_TIMEOUT = 240

# Run inside a fresh venv: an emulator on loopback, and everything else configured from it.
_PRELUDE = """
import asyncio, json, os, subprocess, sys
from pydantic_ai_perplexity.emulator import Emulator
emu = Emulator(time_scale=0.01).__enter__()
os.environ.update(PERPLEXITY_BASE_URL=emu.base_url, PERPLEXITY_API_KEY=emu.api_key)
"""

_CORE = """
cli = os.path.join(os.path.dirname(sys.executable), 'pydantic-ai-perplexity')
def run(*args, key=True):
    env = dict(os.environ)
    if not key:
        env.pop('PERPLEXITY_API_KEY'); env.pop('PERPLEXITY_BASE_URL')
    return subprocess.run([cli, *args], capture_output=True, text=True, env=env, timeout=120)
done = run('research', 'How do heat pumps work?', '--effort', 'fast', key=False)
assert done.returncode == 0 and 'heat' in done.stdout.lower(), (done.stdout, done.stderr)
assert 'emulator' in done.stderr.lower(), done.stderr
for client, extra in (('claude-desktop', '[mcp]'), ('pydantic-deep', '[deep]')):
    out = run('config', client)
    assert out.returncode == 1 and not out.stdout, (client, out.stdout, out.stderr)
    assert f'pip install ".{extra}"' in out.stderr and 'Traceback' not in out.stderr, (client, out.stderr)
print('core: the CLI researches; config names the [mcp] and [deep] extras')
"""

_TOOLSET = """
from pydantic_ai import Agent
from pydantic_ai_perplexity import PerplexityToolset
from pydantic_ai_perplexity.testing import scripted_research_model
agent = Agent(scripted_research_model(effort='fast'), toolsets=[PerplexityToolset(budget_usd=5)])
result = asyncio.run(agent.run('What changed in the EU AI Act implementation timeline?'))
assert 'Sources:' in result.output and 'https://' in result.output, result.output
print('[pydantic-ai]: the toolset researched in an agent')
"""

_SERVER = """
cli = os.path.join(os.path.dirname(sys.executable), 'pydantic-ai-perplexity')
snippet = subprocess.run([cli, 'config', 'claude-desktop'], capture_output=True, text=True, check=True).stdout
entry = json.loads(snippet)['mcpServers']['perplexity']
assert entry['command'] == sys.executable, entry
lines = [
    {'jsonrpc': '2.0', 'id': 1, 'method': 'initialize', 'params': {'protocolVersion': '2025-11-25', 'capabilities': {},
     'clientInfo': {'name': 'install-check', 'version': '1'}}},
    {'jsonrpc': '2.0', 'method': 'notifications/initialized'},
    {'jsonrpc': '2.0', 'id': 2, 'method': 'tools/list'},
    {'jsonrpc': '2.0', 'id': 3, 'method': 'tools/call', 'params': {'name': 'perplexity_research',
     'arguments': {'query': 'What does the EU AI Act regulate?', 'effort': 'fast'}}},
]
env = {**entry['env'], 'PATH': os.environ['PATH'], 'PERPLEXITY_API_KEY': emu.api_key,
       'PERPLEXITY_BASE_URL': emu.base_url, 'PERPLEXITY_STATE_DIR': os.environ['PERPLEXITY_STATE_DIR']}
served = subprocess.run([entry['command'], *entry['args']], input=''.join(json.dumps(l) + '\\n' for l in lines),
                        capture_output=True, text=True, env=env, timeout=120)
answers = {m['id']: m for m in map(json.loads, served.stdout.splitlines())}
assert len(answers[2]['result']['tools']) == 5, (served.stdout, served.stderr)
assert not answers[3]['result'].get('isError') and 'completed' in json.dumps(answers[3]), answers[3]
print('[mcp]: the claude-desktop config starts a server that answers the self-test')
"""

_MCP_TOOLSET = """
from pydantic_ai import Agent
from pydantic_ai_perplexity.mcp import perplexity_mcp_toolset
from pydantic_ai_perplexity.testing import scripted_research_model
async def main():
    agent = Agent(scripted_research_model(effort='fast'), toolsets=[perplexity_mcp_toolset()])
    async with agent:
        return await agent.run('What is the EU AI Act?')
result = asyncio.run(main())
assert 'Sources:' in result.output and 'https://' in result.output, result.output
print('[pydantic-ai,mcp]: perplexity_mcp_toolset() researched over stdio')
"""

_DEEP = """
from pydantic_ai_perplexity.mcp import perplexity_mcp_config
assert perplexity_mcp_config().command == sys.executable
cli = os.path.join(os.path.dirname(sys.executable), 'pydantic-ai-perplexity')
out = subprocess.run([cli, 'config', 'pydantic-deep'], capture_output=True, text=True, timeout=120)
assert out.returncode == 0 and json.loads(out.stdout)['user_servers'][0]['name'] == 'perplexity', out.stderr
print('[deep]: config pydantic-deep and perplexity_mcp_config()')
"""


def _run(args: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, check=True, text=True, capture_output=True, timeout=STEP_TIMEOUT, **kwargs)


def check(name: str, requirement: str, program: str, work: Path) -> float:
    """Install `requirement` into a new venv and run `program` there; the seconds it took."""
    started = time.perf_counter()
    venv = work / name.replace('[', '').replace(']', '').replace(',', '-')
    _run(['uv', 'venv', '--quiet', str(venv)])
    python = venv / 'bin' / 'python'
    _run(['uv', 'pip', 'install', '--quiet', '--python', str(python), requirement])
    env = {k: v for k, v in os.environ.items() if not k.startswith(('PERPLEXITY_', 'OTEL_', 'LOGFIRE_', 'VIRTUAL_ENV'))}
    env['PERPLEXITY_STATE_DIR'] = str(venv / 'state')
    try:
        out = _run([str(python), '-c', _PRELUDE + program], env=env, cwd=work)
    except subprocess.CalledProcessError as exc:
        sys.exit(f'FAIL {name} ({requirement}):\n{exc.stdout}\n{exc.stderr}')
    elapsed = time.perf_counter() - started
    print(f'ok   {out.stdout.strip()} ({elapsed:.1f} s)')
    return elapsed


def main() -> None:
    if shutil.which('uv') is None:
        sys.exit('uv is needed: pip install uv')
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix='install-check-') as tmp:
        work = Path(tmp)
        dist = work / 'dist'
        _run(['uv', 'build', '--quiet', '--out-dir', str(dist), str(ROOT)])
        [wheel] = dist.glob('*.whl')
        [sdist] = dist.glob('*.tar.gz')
        print(f'built {wheel.name} and {sdist.name}')
        check('checkout', str(ROOT), _CORE, work)
        check('pydantic-ai', f'{wheel}[pydantic-ai]', _TOOLSET, work)
        check('mcp', f'{wheel}[mcp]', _SERVER, work)
        check('pydantic-ai,mcp', f'{wheel}[pydantic-ai,mcp]', _MCP_TOOLSET, work)
        check('deep', f'{wheel}[deep]', _DEEP, work)
    print(f'every way in installed and worked ({time.perf_counter() - started:.0f} s)')


if __name__ == '__main__':
    main()
