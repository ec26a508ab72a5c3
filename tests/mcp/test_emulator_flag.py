"""Offline on purpose: `--emulator` runs the server's research on the built-in emulator, and says so; without a key
and without the flag, the server says at start that research is unavailable and names the flag."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

LINES = [
    {
        'jsonrpc': '2.0',
        'id': 1,
        'method': 'initialize',
        'params': {'protocolVersion': '2025-11-25', 'capabilities': {}, 'clientInfo': {'name': 't', 'version': '1'}},
    },
    {'jsonrpc': '2.0', 'method': 'notifications/initialized'},
    {
        'jsonrpc': '2.0',
        'id': 2,
        'method': 'tools/call',
        'params': {'name': 'perplexity_research', 'arguments': {'query': 'What is the EU AI Act?', 'effort': 'fast'}},
    },
]


def _serve(tmp_path: Path, *args: str) -> tuple[dict[str, object], str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(('PERPLEXITY_', 'OTEL_', 'LOGFIRE_'))}
    env |= {'PERPLEXITY_STATE_DIR': str(tmp_path / 'state'), 'PERPLEXITY_EMULATOR_TIME_SCALE': '0.01'}
    done = subprocess.run(
        [sys.executable, '-m', 'pydantic_ai_perplexity.mcp', *args],
        input=''.join(json.dumps(line) + '\n' for line in LINES),
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    answers = {m['id']: m for m in map(json.loads, done.stdout.splitlines())}
    return answers[2]['result'], done.stderr


@pytest.mark.slow
def test_the_emulator_flag_serves_offline_research_and_says_so(tmp_path: Path):
    result, stderr = _serve(tmp_path, '--emulator')
    assert not result.get('isError'), result
    assert 'completed' in json.dumps(result) and 'https://' in json.dumps(result)
    assert '--emulator: research runs on the built-in emulator' in stderr and 'canned answers' in stderr


@pytest.mark.slow
def test_without_a_key_the_server_says_research_is_unavailable_and_names_the_flag(tmp_path: Path):
    result, stderr = _serve(tmp_path)
    assert result.get('isError') and 'No Perplexity API key' in json.dumps(result)
    assert 'pydantic-ai-perplexity mcp --emulator' in json.dumps(result)
    assert 'No PERPLEXITY_API_KEY' in stderr and 'add --emulator to try it offline' in stderr
