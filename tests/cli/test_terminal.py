"""The commands as a person at a terminal sees them: run in a real terminal (tmux), the screen read back."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from tmux_support import Terminal

CLI = str(Path(sys.executable).parent / 'pydantic-ai-perplexity')


def _env(tmp_path: Path) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if k in ('PATH', 'HOME', 'LANG', 'LC_ALL', 'VIRTUAL_ENV')}
    return keep | {'TERM': 'xterm-256color', 'PERPLEXITY_STATE_DIR': str(tmp_path / 'state')}


def test_mcp_at_a_terminal_says_it_waits_for_a_client_and_how_to_try_it(tmp_path: Path):
    with Terminal([CLI, 'mcp'], env=_env(tmp_path)) as term:
        screen = term.wait_for('Ctrl-C ends it.')
        assert 'Waiting for an MCP client on stdio' in screen
        assert 'pydantic-ai-perplexity config claude-desktop' in screen and 'docs/mcp.md' in screen
        term.send('C-d')
        assert '[exit 0]' in term.wait_for('[exit ')
