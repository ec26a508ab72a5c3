"""Configs that plug the Perplexity MCP server into pydantic-deep, pydantic-ai and MCP desktop clients.

**The command.** By default the server runs as this interpreter's absolute path with `-m pydantic_ai_perplexity.mcp`:
it works wherever this package is installed (a venv, `pip install --user`, the environment `uvx` made), needs no
console script on `PATH`, and skips the CLI's imports. `launcher='uvx'` gives
`uvx --from "pydantic-ai-perplexity[mcp]" pydantic-ai-perplexity mcp` instead, for a config that must not name an
interpreter path (a shared dotfile, another machine); its first start downloads and takes seconds, and it works
only once the package is published on the package index (`UVX_NOTE`).

**The environment.** Clients start stdio servers with a minimal environment (`HOME`, `PATH`, ...), so the child is
given what it needs explicitly: the non-secret `PERPLEXITY_*` settings, OpenTelemetry/Logfire settings and
proxy/certificate variables present here. Never `PERPLEXITY_API_KEY` in a written file: pydantic-deep adds it from
your environment at start (`MCPAuth(kind='env')`), and client snippets reference it the way each client expands
variables (or leave a placeholder where a client cannot). No other secret is written either (a ledger URL with a
password, a proxy's credentials: referenced the same way, or left out), nor settings that describe only this shell
(CA bundles, the emulator's settings): see `_config_env`. `PERPLEXITY_WAIT_SECONDS` is not passed on (it is the
in-process budget); the server answers within 55 s unless you pass `wait_seconds`.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shlex
import stat
import sys
import urllib.parse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

from ..._base.env import ENV
from ..._base.errors import install_hint
from ..._base.safe_write import refuse_link, write_text_no_follow
from ..._domain.settings import DEFAULT_MCP_WAIT_SECONDS, variable
from ._config_env import reference, split_for_file, vscode_input

if TYPE_CHECKING:
    from pydantic_deep.mcp import MCPServerConfig  # pyright: ignore[reportMissingTypeStubs]

    from ._toolset import PerplexityMCPToolset

__all__ = (
    'ConfigFileError',
    'add_to_pydantic_deep',
    'child_environment',
    'client_snippet',
    'install_links',
    'missing_extra',
    'perplexity_mcp_config',
    'perplexity_mcp_toolset',
    'secret_variables',
    'server_command',
)

Launcher = Literal['python', 'uvx']
Client = Literal['claude-desktop', 'claude-code', 'cursor', 'vscode', 'codex', 'windsurf', 'zed', 'pydantic-deep']
#: Every client `client_snippet` knows, in the order help texts list them.
CLIENTS: tuple[str, ...] = (
    'claude-desktop',
    'claude-code',
    'cursor',
    'vscode',
    'codex',
    'windsurf',
    'zed',
    'pydantic-deep',
)

SERVER_NAME = 'perplexity'
KEY_ENV = ENV.API_KEY
#: The server's own wait budget (what a call waits before handing back the run's id).
SERVER_WAIT_SECONDS = DEFAULT_MCP_WAIT_SECONDS
#: Covers a first start after install, when Python compiles the MCP SDK before the server can answer.
INIT_TIMEOUT_SECONDS = 30.0
#: pydantic-deep cannot raise the 300 s per-call deadline of the toolsets it builds; stay well under it.
_DEEP_MAX_WAIT_SECONDS = 240.0
_DESCRIPTION = 'Web research with Perplexity: cited answers, page search, and long runs collected by id.'
#: Codex ends a call after 60 s by default; the server answers within its wait budget, so leave room above it.
CODEX_TOOL_TIMEOUT_SECONDS = 120
#: The most a pydantic-deep config file may hold (it lists a few servers); a bigger one is not read.
DEEP_CONFIG_MAX_BYTES = 1 << 20
#: The deepest nesting a pydantic-deep config file may have (its entries are a few levels deep).
DEEP_CONFIG_MAX_DEPTH = 32

_PASSED = re.compile(
    r'^(PERPLEXITY_\w+|OTEL_\w+|LOGFIRE_\w+|(HTTPS?|ALL|NO)_PROXY|(https?|all|no)_proxy'
    r'|SSL_CERT_(FILE|DIR)|REQUESTS_CA_BUNDLE|CURL_CA_BUNDLE)$'
)
#: Never passed on: the key (added by the client's auth), the in-process wait budget, the HTTP transport's tokens.
_NOT_PASSED = frozenset({KEY_ENV, ENV.WAIT_SECONDS, ENV.MCP_TOKEN, ENV.MCP_TOKENS, ENV.MCP_TOKENS_FILE})


#: What `launcher='uvx'` needs, said next to a snippet that uses it.
UVX_NOTE = (
    'The uvx form installs pydantic-ai-perplexity[mcp] from the package index when the client starts it, so it works '
    'once the package is published there; until then use the default launcher (this interpreter).'
)


def missing_extra(client: Client | str, launcher: Launcher = 'python') -> str | None:
    """Why a config for `client` would not work from this environment (which extra to install), or None if it would.

    A snippet with the default launcher starts the server with this interpreter, which then needs the `mcp` extra;
    pydantic-deep's config is built with pydantic-deep, so it needs the `deep` extra whatever the launcher.
    """
    from importlib.util import find_spec

    if client == 'pydantic-deep' and find_spec('pydantic_deep') is None:
        return (
            'A pydantic-deep config needs pydantic-deep and the MCP server: install the deep extra into this '
            f'environment ({install_hint("deep")}), then run this command again.'
        )
    if launcher == 'python' and find_spec('mcp') is None:
        return (
            f'The {client} config starts the MCP server, which needs the MCP SDK: install the mcp extra into this '
            f'environment ({install_hint("mcp")}), then run this command again.'
        )
    return None


def server_command(launcher: Launcher = 'python') -> tuple[str, list[str]]:
    """The stdio command and arguments that start the server (see the module docstring)."""
    if launcher == 'uvx':
        return 'uvx', ['--from', 'pydantic-ai-perplexity[mcp]', 'pydantic-ai-perplexity', 'mcp']
    if launcher != 'python':
        raise ValueError(f'launcher={launcher!r}: use "python" or "uvx".')
    return sys.executable, ['-m', 'pydantic_ai_perplexity.mcp']


def child_environment(
    *,
    wait_seconds: float | None = None,
    environ: Mapping[str, str] | None = None,
    for_file: bool = False,
) -> dict[str, str]:
    """The environment the server child needs, taken from `environ` (default `os.environ`).

    With `for_file`, anything that may carry a secret (tokens, OTLP headers, proxy credentials, a database URL with
    a password) and anything that describes only this shell (CA bundles, emulator settings) is left out, since the
    result is meant to be written to a config file (see `_config_env`).
    """
    source = os.environ if environ is None else environ
    env: dict[str, str] = {}
    for name, value in sorted(source.items()):
        if not _PASSED.match(name) or name in _NOT_PASSED:
            continue
        env[name] = value
    if for_file:
        env = split_for_file(env)[0]
    if wait_seconds is not None:
        if wait_seconds < 0:
            raise ValueError(f'wait_seconds must be 0 or more, not {wait_seconds}.')
        env[ENV.WAIT_SECONDS] = f'{wait_seconds:g}'
    return env


def secret_variables(environ: Mapping[str, str] | None = None) -> list[str]:
    """The variables the server would get that hold a secret: a config file refers to them or leaves them out."""
    return split_for_file(child_environment(environ=environ))[1]


def perplexity_mcp_config(
    *, wait_seconds: float | None = None, launcher: Launcher = 'python', **overrides: Any
) -> MCPServerConfig:
    """A pydantic-deep `MCPServerConfig` for the Perplexity MCP server over stdio.

    ```python
    from pydantic_deep import create_deep_agent
    from pydantic_deep.mcp import MCPRegistry
    from pydantic_ai_perplexity import perplexity_mcp_config

    agent = create_deep_agent(mcp_servers=MCPRegistry([perplexity_mcp_config()]).build_active())
    ```

    The key comes from `PERPLEXITY_API_KEY` through `MCPAuth(kind='env')`; no `tool_prefix` (the tools are already
    named `perplexity_*`, and a prefix breaks `probe_mcp_server`); `init_timeout` covers a first, compiling start;
    `include_skills` surfaces the research skill. `overrides` replace any `MCPServerConfig` field (`name`, `env`,
    `enabled`, ...); `env` given there is merged over the computed one. `wait_seconds` (at most 240, under
    pydantic-deep's fixed 300 s call deadline) sets the server's wait budget.
    """
    try:
        from pydantic_deep.mcp import MCPAuth, MCPServerConfig  # pyright: ignore[reportMissingTypeStubs]
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(f'perplexity_mcp_config needs pydantic-deep: install it ({install_hint("deep")}).') from exc
    if wait_seconds is not None and wait_seconds > _DEEP_MAX_WAIT_SECONDS:
        raise ValueError(
            f'wait_seconds={wait_seconds:g} is too long for pydantic-deep, which ends every MCP call at 300 s: '
            f'use at most {_DEEP_MAX_WAIT_SECONDS:g} (long runs hand off and are collected anyway).'
        )
    if overrides.get('tool_prefix'):
        raise ValueError(
            'tool_prefix is not supported: the tools are already named perplexity_*, and pydantic-deep cannot probe a '
            'prefixed server. Rename the server with name=... instead.'
        )
    command, args = server_command(launcher)
    env = child_environment(wait_seconds=wait_seconds) | dict(overrides.pop('env', None) or {})
    fields: dict[str, Any] = {
        'name': SERVER_NAME,
        'transport': 'stdio',
        'command': command,
        'args': args,
        'env': env,
        'description': _DESCRIPTION,
        'auth': MCPAuth(
            secret_key=KEY_ENV,
            kind='env',
            instructions='Create a key at https://www.perplexity.ai/account/api and set PERPLEXITY_API_KEY.',
        ),
        'init_timeout': INIT_TIMEOUT_SECONDS,
        'include_skills': True,
    }
    fields.update(overrides)
    return MCPServerConfig(**fields)


def perplexity_mcp_toolset(
    *,
    wait_seconds: float | None = None,
    read_timeout: float | None = None,
    init_timeout: float = INIT_TIMEOUT_SECONDS,
    api_key: str | None = None,
    env: Mapping[str, str] | None = None,
    launcher: Launcher = 'python',
    command: str | None = None,
    args: Sequence[str] | None = None,
    keep_alive: bool = False,
    optional: bool = False,
    id: str = SERVER_NAME,
    **toolset_kwargs: Any,
) -> PerplexityMCPToolset:
    """A pydantic-ai `MCPToolset` running the Perplexity MCP server over stdio, for `Agent(toolsets=[...])` or
    `create_deep_agent(mcp_servers=[...])`.

    - `read_timeout` (the per-request deadline, which progress does not extend) defaults to the wait budget plus
      two minutes, so a call always answers (result or hand-off) before the client gives up on it.
    - Errors are terminal (`tool_error_behavior='failed'`) and a failed research call is never turned into a retry
      prompt, so nothing invites the model to pay for the same run twice.
    - A server that cannot start fails the agent run with a `ConfigurationError` saying why; with `optional=True`
      it contributes no tools instead (one warning) and the agent runs on without research.
    - The key is `api_key`, else `PERPLEXITY_API_KEY` from this process, given to the child only.
    - `keep_alive=False`: the server process ends when the toolset is exited (e.g. at the end of `async with agent`).

    `env` adds variables for the child; `command`/`args` replace the launcher's; other keyword arguments go to
    `MCPToolset` (e.g. `progress_handler`, `max_retries`).
    """
    try:
        from fastmcp.client.transports import StdioTransport

        from ._toolset import PerplexityMCPToolset
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            'perplexity_mcp_toolset needs pydantic-ai and the MCP extra: install them '
            f'({install_hint("pydantic-ai,mcp")}).'
        ) from exc
    budget = SERVER_WAIT_SECONDS if wait_seconds is None else wait_seconds
    child_env = child_environment(wait_seconds=wait_seconds) | dict(env or {})
    key = api_key if api_key is not None else variable(KEY_ENV)
    if key:
        child_env[KEY_ENV] = key
    default_command, default_args = server_command(launcher)
    transport = StdioTransport(
        command or default_command,
        list(args) if args is not None else default_args,
        env=child_env,
        keep_alive=keep_alive,
    )
    toolset_kwargs.setdefault('tool_error_behavior', 'failed')
    toolset = PerplexityMCPToolset(
        transport,
        id=id,
        init_timeout=init_timeout,
        read_timeout=read_timeout if read_timeout is not None else budget + 120.0,
        **toolset_kwargs,
    )
    toolset.optional = optional
    return toolset


# -- client snippets ---------------------------------------------------------------------------------------------


def client_snippet(
    client: Client | str, *, launcher: Launcher = 'python', environ: Mapping[str, str] | None = None
) -> str:
    """A ready config snippet for `client` (claude-desktop, claude-code, cursor, vscode, codex, windsurf, zed or
    pydantic-deep), from `environ` (default `os.environ`).

    Paths are absolute; no secret is included: each snippet references `PERPLEXITY_API_KEY` (and any other variable
    holding a secret, such as a ledger URL with a password) the way that client expands variables, or (Claude
    Desktop and Zed, which expand none) holds a placeholder to replace. Codex forwards them from its own
    environment (`env_vars`). pydantic-deep expands nothing: `secret_variables()` names what it leaves out.
    """
    if client == 'claude-desktop':
        return _json({'mcpServers': {SERVER_NAME: _entry(client, launcher, environ)}})
    if client == 'claude-code':
        entry = _entry(client, launcher, environ)
        add = shlex.join(['claude', 'mcp', 'add-json', '--scope', 'user', SERVER_NAME, json.dumps(entry)])
        return (
            f'# Save as .mcp.json in a project (Claude Code expands ${{{KEY_ENV}}} when it starts the server):\n'
            f'{_json({"mcpServers": {SERVER_NAME: entry}})}\n\n# or, for every project:\n{add}'
        )
    if client in ('cursor', 'windsurf'):  # ~/.cursor/mcp.json, ~/.codeium/windsurf/mcp_config.json
        return _json({'mcpServers': {SERVER_NAME: _entry(client, launcher, environ)}})
    if client == 'vscode':
        return _json({'inputs': _vscode_inputs(environ), 'servers': {SERVER_NAME: _entry(client, launcher, environ)}})
    if client == 'zed':  # Zed's settings.json
        return _json({'context_servers': {SERVER_NAME: _entry(client, launcher, environ)}})
    if client == 'codex':  # ~/.codex/config.toml
        return _codex_toml(_entry(client, launcher, environ))
    if client == 'pydantic-deep':
        return _json({'builtin_state': {}, 'user_servers': [_deep_entry(launcher)]})
    raise ValueError(f'Unknown client {client!r}: use {", ".join(CLIENTS[:-1])} or {CLIENTS[-1]}.')


def install_links(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """One-click install links for Cursor and VS Code (their documented deeplinks), with the `uvx` launcher.

    A link carries no interpreter path, so it is the same on every machine (and works once the package is
    published: `UVX_NOTE`). Each decodes to the server entry `client_snippet(client, launcher='uvx')` holds:
    Cursor's is `cursor://anysphere.cursor-deeplink/mcp/install?name=...&config=<base64 JSON>`, VS Code's is
    `vscode:mcp/install?<URL-encoded JSON>` (the entry with its `name` and the `inputs` that prompt for the key),
    and `vscode-web` that link through VS Code's redirect, for a page (a GitHub README) that links only to https.
    """
    cursor = json.dumps(_entry('cursor', 'uvx', environ), separators=(',', ':'))
    encoded = urllib.parse.quote(base64.b64encode(cursor.encode()).decode('ascii'), safe='')
    vscode = {'name': SERVER_NAME, **_entry('vscode', 'uvx', environ), 'inputs': _vscode_inputs(environ)}
    vscode_link = 'vscode:mcp/install?' + urllib.parse.quote(json.dumps(vscode, separators=(',', ':')), safe='')
    return {
        'cursor': f'cursor://anysphere.cursor-deeplink/mcp/install?name={SERVER_NAME}&config={encoded}',
        'vscode': vscode_link,
        # GitHub renders no `vscode:` link; VS Code's documented redirect opens the same one from a web page.
        'vscode-web': 'https://insiders.vscode.dev/redirect?url=' + urllib.parse.quote(vscode_link, safe=''),
    }


def _entry(client: str, launcher: Launcher, environ: Mapping[str, str] | None) -> dict[str, Any]:
    """The one server entry of `client`'s config: the command, and an environment that holds no secret."""
    command, args = server_command(launcher)
    env = child_environment(for_file=True, environ=environ)
    if client == 'codex':  # forwarded from Codex's environment by name: no value is written
        secrets = [KEY_ENV, *secret_variables(environ)]
        return {'command': command, 'args': args, 'env': env, 'env_vars': secrets}
    key = {
        'claude-desktop': '<your Perplexity API key>',
        'zed': '<your Perplexity API key>',
        'claude-code': f'${{{KEY_ENV}}}',
        'cursor': f'${{env:{KEY_ENV}}}',
        'windsurf': f'${{env:{KEY_ENV}}}',
        'vscode': '${input:perplexity-key}',
    }[client]
    entry: dict[str, Any] = {
        'command': command,
        'args': args,
        'env': {KEY_ENV: key, **env, **_references(client, environ)},
    }
    if client in ('claude-code', 'vscode'):
        entry = {'type': 'stdio', **entry}
    return entry


def _vscode_inputs(environ: Mapping[str, str] | None) -> list[dict[str, Any]]:
    """VS Code's `inputs`: a prompt for the key, and one per other variable holding a secret."""
    key = {'type': 'promptString', 'id': 'perplexity-key', 'description': 'Perplexity API key', 'password': True}
    return [key, *(vscode_input(name) for name in secret_variables(environ))]


def _codex_toml(entry: dict[str, Any]) -> str:
    """Codex's `[mcp_servers.perplexity]` table (TOML strings written as JSON strings, which TOML reads the same)."""
    table = f'mcp_servers.{SERVER_NAME}'
    lines = [
        f'# ~/.codex/config.toml (Codex passes {", ".join(entry["env_vars"])} on from its own environment)',
        f'[{table}]',
        f'command = {json.dumps(entry["command"])}',
        f'args = [{", ".join(json.dumps(a) for a in entry["args"])}]',
        f'env_vars = [{", ".join(json.dumps(n) for n in entry["env_vars"])}]',
        f'startup_timeout_sec = {INIT_TIMEOUT_SECONDS:g}',
        f'tool_timeout_sec = {CODEX_TOOL_TIMEOUT_SECONDS}',
    ]
    if entry['env']:
        lines += ['', f'[{table}.env]', *(f'{name} = {json.dumps(value)}' for name, value in entry['env'].items())]
    return '\n'.join(lines)


def add_to_pydantic_deep(
    path: str | os.PathLike[str] = '.pydantic-deep/mcp.json', *, launcher: Launcher = 'python'
) -> Path:
    """Add (or replace) the `perplexity` server in pydantic-deep's CLI config file; the key is never written.

    Other servers and settings in the file are kept. No secret is written (`secret_variables()` names those left
    out), and no link is followed: a target or directory that is a symlink raises `UnsafePathError` (a `ValueError`).
    A file of another shape is left as it is: `ConfigFileError` (a `ValueError`) says why (see `_read_deep_config`).
    Returns the file's path.
    """
    target = Path(path)
    refuse_link(target)
    data = _read_deep_config(target)
    existing: list[dict[str, Any]] = data.get('user_servers') or []
    servers = [s for s in existing if s.get('name') != SERVER_NAME]
    servers.append(_deep_entry(launcher))
    data['user_servers'] = servers
    data.setdefault('builtin_state', {})
    # A new file made exclusively next to the target, then renamed over it: no planted link is ever followed.
    return write_text_no_follow(target, _json(data) + '\n')


class ConfigFileError(ValueError):
    """A config file this package will not touch: not a regular file, too big, not JSON, or not the shape expected."""


def _read_deep_config(target: Path) -> dict[str, Any]:
    """pydantic-deep's config file, read only if it is a regular file of at most `DEEP_CONFIG_MAX_BYTES` holding a
    JSON object whose `user_servers` is a list of objects and `builtin_state` an object (each may be absent), nested
    at most `DEEP_CONFIG_MAX_DEPTH` deep; `{}` if there is no file. Anything else raises `ConfigFileError`."""
    raw = _read_regular_file(target)
    if raw is None:
        return {}
    data = _config_object(raw, target)
    _check_config_shape(data, target)
    return data


#: How a refusal to touch pydantic-deep's config file ends.
_FIX = 'fix or move it first.'


def _read_regular_file(target: Path) -> bytes | None:
    """The bytes of `target` if it is a regular file (no link followed, a FIFO never waited on) of at most
    `DEEP_CONFIG_MAX_BYTES`; None if there is none."""
    try:  # non-blocking: opening a FIFO waits for no writer; no link is followed
        fd = os.open(target, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, 'O_CLOEXEC', 0))
    except FileNotFoundError:
        return None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = 'a directory' if stat.S_ISDIR(mode) else 'a FIFO' if stat.S_ISFIFO(mode) else 'a special file'
            raise ConfigFileError(f'{target} is {kind}, not a regular file; not reading it: move it away first.')
        chunks: list[bytes] = []
        size = 0
        while size <= DEEP_CONFIG_MAX_BYTES and (chunk := os.read(fd, 65536)):
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    if size > DEEP_CONFIG_MAX_BYTES:
        raise ConfigFileError(f'{target} is larger than {DEEP_CONFIG_MAX_BYTES:,} bytes, too big for a config; {_FIX}')
    return b''.join(chunks)


def _config_object(raw: bytes, target: Path) -> dict[str, Any]:
    """The config file's bytes as a JSON object (empty text: `{}`), nested at most `DEEP_CONFIG_MAX_DEPTH` deep."""
    try:
        loaded: Any = json.loads(raw.decode('utf-8') or '{}')
    except UnicodeDecodeError:
        raise ConfigFileError(f'{target} is not UTF-8 text; {_FIX}') from None
    except RecursionError:
        raise ConfigFileError(f'{target} is nested too deeply to be a config; {_FIX}') from None
    except ValueError as exc:
        raise ConfigFileError(f'{target} is not valid JSON ({exc}); {_FIX}') from None
    if _depth(loaded) > DEEP_CONFIG_MAX_DEPTH:
        raise ConfigFileError(f'{target} is nested deeper than {DEEP_CONFIG_MAX_DEPTH} levels; {_FIX}')
    if not isinstance(loaded, dict):
        raise ConfigFileError(f'{target} does not hold a JSON object (it holds {_json_kind(loaded)}); {_FIX}')
    return cast('dict[str, Any]', loaded)


def _check_config_shape(data: dict[str, Any], target: Path) -> None:
    """`user_servers` is a list of objects and `builtin_state` an object, where the config has them."""
    servers = data.get('user_servers')
    if servers is not None and not isinstance(servers, list):
        raise ConfigFileError(f'{target}: "user_servers" is {_json_kind(servers)}, not a list of servers; {_FIX}')
    for i, entry in enumerate(cast('list[Any]', servers or []), start=1):
        if not isinstance(entry, dict):
            raise ConfigFileError(
                f'{target}: server {i} of "user_servers" is {_json_kind(entry)}, not an object; {_FIX}'
            )
    state = data.get('builtin_state')
    if state is not None and not isinstance(state, dict):
        raise ConfigFileError(f'{target}: "builtin_state" is {_json_kind(state)}, not an object; {_FIX}')


def _depth(value: Any) -> int:
    """How deeply JSON `value` nests (a scalar is 0), found without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, level + 1)
            children = cast('dict[str, Any]', item).values() if isinstance(item, dict) else cast('list[Any]', item)
            stack.extend((child, level + 1) for child in children)
    return deepest


def _json_kind(value: Any) -> str:
    """A JSON value's kind as a message names it: `a string`, `a number`, `null` ..."""
    if value is None:
        return 'null'
    kinds = (
        (bool, 'true or false'),
        (int | float, 'a number'),
        (str, 'a string'),
        (list, 'a list'),
        (dict, 'an object'),
    )
    return next(name for kind, name in kinds if isinstance(value, kind))


def _references(client: str, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """For each variable holding a secret, the client's reference to it (none for a client that expands nothing)."""
    refs = {name: reference(client, name) for name in secret_variables(environ)}
    return {name: ref for name, ref in refs.items() if ref is not None}


def _deep_entry(launcher: Launcher) -> dict[str, Any]:
    config = perplexity_mcp_config(launcher=launcher)
    config.env = child_environment(for_file=True)
    return config.to_dict()


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)
