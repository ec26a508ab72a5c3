"""What a written MCP config may carry from this shell: values that are safe to copy, and references to secrets.

A config file outlives the shell it was made in and is often shared, committed or synced, so:

- a variable that holds a secret (by its name, or a value with a URL password or a secret parameter such as a
  PostgreSQL `?password=` / `sslpassword=`) is never copied: the file gets a reference the client expands
  (`${VAR}` for Claude Code, `${env:VAR}` for Cursor, a VS Code `inputs` prompt), a placeholder to fill in where the
  client expands nothing (Claude Desktop), or nothing at all (pydantic-deep, which expands no variable in its file:
  the command says which were left out);
- a variable that describes this shell rather than the server's needs is not copied either: CA bundles
  (`SSL_CERT_*`, `REQUESTS_CA_BUNDLE`, `CURL_CA_BUNDLE`, often set for a debugging proxy or a test) and the
  emulator's settings (`PERPLEXITY_EMULATOR_*`). Add one to the config by hand when the server needs it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..._base.redact import has_secret

__all__ = ('SHELL_ONLY', 'holds_secret', 'reference', 'split_for_file', 'vscode_input_id')

#: Describes this shell, not what the server needs: never copied into a file.
SHELL_ONLY = re.compile(r'^(SSL_CERT_\w+|REQUESTS_CA_BUNDLE|CURL_CA_BUNDLE|PERPLEXITY_EMULATOR_\w+)$', re.IGNORECASE)
_SECRET_NAME = re.compile(r'(TOKEN|KEY|SECRET|PASSWORD|PASSWD|HEADERS|CREDENTIAL|AUTH)', re.IGNORECASE)
#: A URL with user info (`user@` or `user:password@`): a proxy's credentials.
_USERINFO = re.compile(r'://[^/@\s]+@')


def holds_secret(name: str, value: str) -> bool:
    """Whether a variable may hold a secret: by its name, or by a value with a URL password or secret parameter."""
    return bool(_SECRET_NAME.search(name) or _USERINFO.search(value) or has_secret(value))


def split_for_file(env: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """`env` split into the values safe to write and the names of those holding a secret (shell-only ones dropped)."""
    safe: dict[str, str] = {}
    secret: list[str] = []
    for name, value in sorted(env.items()):
        if SHELL_ONLY.match(name):
            continue
        if holds_secret(name, value):
            secret.append(name)
        else:
            safe[name] = value
    return safe, secret


def vscode_input_id(name: str) -> str:
    """The VS Code input that prompts for the variable `name`, e.g. `perplexity-ledger-url`."""
    return name.lower().replace('_', '-')


def reference(client: str, name: str) -> str | None:
    """How `client`'s config refers to the variable `name` instead of holding its value; None where it cannot."""
    if client == 'claude-code':
        return f'${{{name}}}'
    if client in ('cursor', 'windsurf'):
        return f'${{env:{name}}}'
    if client == 'vscode':
        return f'${{input:{vscode_input_id(name)}}}'
    if client in ('claude-desktop', 'zed'):
        return f'<{name}: not copied because it holds a secret; paste its value here>'
    return None


def vscode_input(name: str, description: str | None = None) -> dict[str, Any]:
    """The `inputs` entry that prompts once for `name` and keeps it in VS Code's secret storage."""
    return {
        'type': 'promptString',
        'id': vscode_input_id(name),
        'description': description or f'{name} (holds a secret, so it is not written in this file)',
        'password': True,
    }
