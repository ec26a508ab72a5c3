"""The copy-paste self-test of `docs/mcp.md`, run as written against an emulator."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pydantic_ai_perplexity.emulator import Emulator
from support.mcp_servers import DEADLINE, server_env

DOC = Path(__file__).parents[2] / 'docs' / 'mcp.md'


def self_test_block() -> str:
    text = DOC.read_text(encoding='utf-8')
    match = re.search(r'<!-- self-test:[^>]*-->\s*```sh\n(.*?)```', text, re.DOTALL)
    assert match, 'docs/mcp.md has no self-test block'
    return match.group(1)


@pytest.mark.slow
def test_the_documented_self_test_works(emu: Emulator, tmp_path: Path) -> None:
    script = self_test_block().replace('http://127.0.0.1:8787', emu.base_url).replace('<the printed key>', emu.api_key)
    env = server_env(None, tmp_path)
    env['PATH'] = os.path.dirname(sys.executable) + os.pathsep + env.get('PATH', '')  # `python` is this venv's
    done = subprocess.run(['bash', '-c', script], env=env, capture_output=True, timeout=DEADLINE)
    assert done.returncode == 0, done.stderr.decode()
    replies = [json.loads(line) for line in done.stdout.decode().splitlines()]
    assert [r['id'] for r in replies] == [1, 2, 3]
    assert replies[0]['result']['serverInfo']['name'] == 'perplexity'
    assert len(replies[1]['result']['tools']) == 5
    result = replies[2]['result']
    assert result['structuredContent']['status'] == 'completed'
    assert 'Sources:' in result['content'][0]['text']


def test_the_tool_table_names_each_tools_arguments_as_the_spec_does() -> None:
    """The table of tools in docs/mcp.md is written by hand: it must list the arguments `tool_spec.py` declares."""
    from pydantic_ai_perplexity._core.tool_spec import TOOLS

    rows = dict(re.findall(r'^\| `(perplexity_\w+)\(([^)]*)\)` \|', DOC.read_text(encoding='utf-8'), re.MULTILINE))
    assert set(rows) == {spec.name for spec in TOOLS}
    for spec in TOOLS:
        documented = [name.strip() for name in rows[spec.name].split(',') if name.strip()]
        assert documented == list(spec.schema['properties']), spec.name
