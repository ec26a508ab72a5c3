"""The team topology as plain processes: MCP server instances on one PostgreSQL ledger, nginx in front, an emulator.

- **Instances**: `python -m pydantic_ai_perplexity.mcp --transport http --port 0`, each a subprocess with a minimal
  environment (the emulator, the ledger URL, tokens, and what the test adds).
- **nginx**: Debian's package, run as a plain process (`daemon off`, everything under a temporary prefix) with
  `deploy/nginx.conf` itself: only the upstream addresses, the port and the writable paths are swapped in, so the
  proxy settings the tests prove are the ones that ship.
- **Client**: raw JSON-RPC over HTTP (httpx2), in either protocol era; an SSE answer is read event by event, so a
  call's progress (`started research run resp_...`) is seen as it comes.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2

ROOT = Path(__file__).resolve().parents[2]
NGINX_CONF = ROOT / 'deploy' / 'nginx.conf'
SERVER = [sys.executable, '-m', 'pydantic_ai_perplexity.mcp']
PYCACHE = Path(tempfile.gettempdir()) / 'pydantic-ai-perplexity-test-pycache'
START_DEADLINE = 60.0
LEGACY = '2025-11-25'
MODERN = '2026-07-28'
CREATE_PATHS = ('/v1/agent', '/v1/responses')


# -- nginx ----------------------------------------------------------------------------------------------------------


def find_nginx(*, install: bool) -> str | None:
    """The nginx binary; installed from Debian's package first when missing, `install` is set and we are root."""
    search = f'{os.environ.get("PATH", "")}:/usr/sbin:/sbin'
    found = shutil.which('nginx', path=search)
    if found or not install or os.geteuid() != 0 or shutil.which('apt-get') is None:
        return found
    env = {**os.environ, 'DEBIAN_FRONTEND': 'noninteractive'}
    subprocess.run(['apt-get', 'update', '-qq'], env=env, check=False, capture_output=True, timeout=300)
    subprocess.run(['apt-get', 'install', '-y', '-qq', 'nginx'], env=env, check=False, capture_output=True, timeout=600)
    return shutil.which('nginx', path=search)


def _once(pattern: str, repl: str, text: str, flags: int = 0) -> str:
    """`text` with the one match of `pattern` replaced; fails loudly if deploy/nginx.conf no longer has it."""
    new, count = re.subn(pattern, lambda _: repl, text, flags=flags)
    assert count == 1, f'deploy/nginx.conf: expected one match of {pattern!r}, found {count}'
    return new


def nginx_config(template: str, *, port: int, upstreams: list[int], prefix: Path) -> str:
    """`deploy/nginx.conf` for a plain process on loopback: these upstreams and port, every path under `prefix`."""
    pattern = r'^([ \t]*)server mcp\d+:8000([^;]*);[ \t]*\n'
    found = re.findall(pattern, template, flags=re.MULTILINE)
    assert found, 'deploy/nginx.conf: no "server mcpN:8000 ...;" upstream lines'
    indent, options = found[0]
    block = ''.join(f'{indent}server 127.0.0.1:{p}{options};\n' for p in upstreams)
    parts = re.split(pattern, template, flags=re.MULTILINE)
    # re.split keeps the two groups of each match: text, indent, options, text, ...; the first match gets the block.
    text = parts[0] + block + ''.join(parts[3::3])
    text = _once(r'listen 8080;', f'listen 127.0.0.1:{port};', text)
    # Which instance served each request (several, comma-separated, when nginx passed it on), for the tests to read.
    log_format = 'log_format scale \'$request_method $request_uri $status "$upstream_addr"\';'
    log = f'{log_format}\n    access_log {prefix}/access.log scale;'
    text = _once(r'access_log off;', log, text)
    text = _once(r'worker_processes auto;', 'worker_processes 2;', text)
    text = _once(r'error_log /dev/stderr warn;', f'error_log {prefix}/error.log warn;', text)
    user = f'user {_user_and_group()};\n' if os.geteuid() == 0 else ''
    head = f'daemon off;\nmaster_process on;\npid {prefix}/nginx.pid;\n{user}'
    temp = ''.join(
        f'    {kind}_temp_path {prefix}/{kind}_temp;\n' for kind in ('client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi')
    )
    text = _once(r'http \{\n', 'http {\n' + temp, text)
    return head + text


def _user_and_group() -> str:
    import grp
    import pwd

    return f'{pwd.getpwuid(os.getuid()).pw_name} {grp.getgrgid(os.getgid()).gr_name}'


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def wait_for_port(port: int, deadline: float) -> None:
    while True:
        try:
            with socket.create_connection(('127.0.0.1', port), timeout=0.5):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)


class Nginx:
    """nginx in the foreground, on loopback, with the shipped config adapted by `nginx_config`."""

    def __init__(self, binary: str, prefix: Path, upstreams: list[int]) -> None:
        prefix.mkdir(parents=True, exist_ok=True)
        self.prefix = prefix
        self.port = free_port()
        conf = prefix / 'nginx.conf'
        conf.write_text(nginx_config(NGINX_CONF.read_text(), port=self.port, upstreams=upstreams, prefix=prefix))
        self.log = (prefix / 'stderr.log').open('wb')
        self.proc = subprocess.Popen(
            [binary, '-c', str(conf), '-p', str(prefix), '-e', str(prefix / 'error.log')],
            stdin=subprocess.DEVNULL,
            stdout=self.log,
            stderr=self.log,
        )
        try:
            wait_for_port(self.port, time.monotonic() + START_DEADLINE)
        except OSError:
            self.stop()
            raise RuntimeError(f'nginx did not start: {self.errors()}') from None

    @property
    def url(self) -> str:
        return f'http://127.0.0.1:{self.port}/mcp'

    def access(self) -> list[tuple[str, str, int, list[int]]]:
        """Each request so far: method, path, status, and the upstream ports nginx tried, in order."""
        entries: list[tuple[str, str, int, list[int]]] = []
        path = self.prefix / 'access.log'
        for line in path.read_text().splitlines() if path.exists() else []:
            method, uri, status, upstreams = line.split(' ', 3)
            ports = [int(a.rsplit(':', 1)[1]) for a in upstreams.strip('"').split(', ') if ':' in a]
            entries.append((method, uri, int(status), ports))
        return entries

    def errors(self) -> str:
        logs = [self.prefix / 'error.log', self.prefix / 'stderr.log']
        return '\n'.join(p.read_text(errors='replace') for p in logs if p.exists())

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # fast shutdown: the master stops its workers
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.log.close()


# -- server instances -----------------------------------------------------------------------------------------------


def instance_env(base_url: str, api_key: str, state_dir: Path, **extra: str) -> dict[str, str]:
    """A server instance's environment: minimal, the emulator, its own state dir (unused with PostgreSQL), `extra`."""
    env = {k: v for k, v in os.environ.items() if k in ('HOME', 'LOGNAME', 'PATH', 'SHELL', 'TERM', 'USER', 'LANG')}
    env['PYTHONPYCACHEPREFIX'] = str(PYCACHE)
    env['PERPLEXITY_STATE_DIR'] = str(state_dir)
    env['PERPLEXITY_API_KEY'] = api_key
    env['PERPLEXITY_BASE_URL'] = base_url
    env.update(extra)
    return env


class Instance:
    """One `python -m pydantic_ai_perplexity.mcp --transport http` process; stderr kept for failure messages."""

    def __init__(self, env: dict[str, str], *args: str) -> None:
        self.proc = subprocess.Popen(
            [*SERVER, '--transport', 'http', '--port', '0', *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=env,
        )
        self.stderr: list[str] = []
        self.port = 0
        self._listening = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for raw in iter(self.proc.stderr.readline, b''):
            line = raw.decode(errors='replace')
            self.stderr.append(line)
            if 'listening on http://' in line and not self.port:
                self.port = int(line.rsplit(':', 1)[1].split('/', 1)[0])
                self._listening.set()
        self.proc.stderr.close()
        self._listening.set()  # exited: wait_listening stops waiting (and reports the failure)

    def wait_listening(self, timeout: float = START_DEADLINE) -> None:
        if not self._listening.wait(timeout) or not self.port:
            raise RuntimeError(f'an MCP server instance did not start: {"".join(self.stderr)[-2000:]}')

    @property
    def url(self) -> str:
        return f'http://127.0.0.1:{self.port}/mcp'

    @property
    def health_url(self) -> str:
        return f'http://127.0.0.1:{self.port}/healthz'

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)

    def stop(self, timeout: float = 15.0) -> int | None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return self.proc.returncode


class Topology:
    """`count` instances sharing one ledger, with nginx in front; a context manager that stops everything."""

    def __init__(
        self, workdir: Path, *, base_url: str, api_key: str, ledger_url: str, count: int = 3, nginx: str, **env: str
    ) -> None:
        self.workdir = workdir
        self.ledger_url = ledger_url
        common = {'PERPLEXITY_LEDGER_URL': ledger_url, **env}
        self.instances = [
            Instance(instance_env(base_url, api_key, workdir / f'state-{i}', **common)) for i in range(count)
        ]
        self.nginx: Nginx | None = None
        try:
            for instance in self.instances:
                instance.wait_listening()
            self.nginx = Nginx(nginx, workdir / 'nginx', [i.port for i in self.instances])
        except BaseException:
            self.stop()
            raise

    @property
    def url(self) -> str:
        assert self.nginx is not None
        return self.nginx.url

    @property
    def health_url(self) -> str:
        return self.url.removesuffix('/mcp') + '/healthz'

    def stop(self) -> None:
        if self.nginx is not None:
            self.nginx.stop()
        for instance in self.instances:
            instance.stop()

    def __enter__(self) -> Topology:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


# -- the client -----------------------------------------------------------------------------------------------------


@dataclass
class Outcome:
    """What one `tools/call` over HTTP came to: the HTTP status, the result (or None), the progress messages."""

    status: int
    result: dict[str, Any] | None = None
    error: str | None = None
    progress: list[str] = field(default_factory=list[str])

    @property
    def ok(self) -> bool:
        return self.status == 200 and self.result is not None and not self.result.get('isError')

    @property
    def structured(self) -> dict[str, Any]:
        assert self.result is not None, self
        return self.result.get('structuredContent') or {}

    @property
    def text(self) -> str:
        assert self.result is not None, self
        return '\n'.join(b.get('text', '') for b in self.result.get('content', []))

    @property
    def started_id(self) -> str | None:
        """The run's id from the progress notification that said it started, if one came."""
        for message in self.progress:
            if message.startswith('started research run '):
                return message.removeprefix('started research run ')
        return None


def _request(
    name: str, arguments: dict[str, Any], *, era: str, progress: str | None, token: str | None
) -> tuple[dict[str, Any], dict[str, str]]:
    params: dict[str, Any] = {'name': name, 'arguments': arguments}
    meta: dict[str, Any] = {}
    if progress is not None:
        meta['progressToken'] = progress
    headers = {'Content-Type': 'application/json', 'Accept': 'application/json, text/event-stream'}
    if token is not None:
        headers['Authorization'] = f'Bearer {token}'
    if era == MODERN:
        meta['io.modelcontextprotocol/protocolVersion'] = MODERN
        meta['io.modelcontextprotocol/clientCapabilities'] = {}
        meta['io.modelcontextprotocol/clientInfo'] = {'name': 'scale-test', 'version': '1'}
        headers.update({'MCP-Protocol-Version': MODERN, 'Mcp-Method': 'tools/call', 'Mcp-Name': name})
    else:
        headers['MCP-Protocol-Version'] = LEGACY
    if meta:
        params['_meta'] = meta
    return {'jsonrpc': '2.0', 'id': 1, 'method': 'tools/call', 'params': params}, headers


async def call_tool(
    client: httpx2.AsyncClient,
    url: str,
    name: str,
    arguments: dict[str, Any],
    *,
    token: str | None = None,
    era: str = LEGACY,
    progress: str | None = None,
    on_progress: Callable[[str], Awaitable[None] | None] | None = None,
) -> Outcome:
    """One `tools/call` as a stateless POST; transport failures come back as an `Outcome` with `error` set."""
    body, headers = _request(name, arguments, era=era, progress=progress, token=token)
    outcome = Outcome(status=0)
    try:
        async with client.stream('POST', url, content=json.dumps(body), headers=headers) as reply:
            outcome.status = reply.status_code
            if reply.status_code != 200:
                outcome.error = (await reply.aread()).decode(errors='replace')[:500]
                return outcome
            if reply.headers.get('content-type', '').startswith('application/json'):
                message = json.loads(await reply.aread())
                outcome.result = message.get('result')
                outcome.error = json.dumps(message['error']) if 'error' in message else None
                return outcome
            async for line in reply.aiter_lines():
                if not line.startswith('data:'):
                    continue
                message = json.loads(line[5:])
                if message.get('method') == 'notifications/progress':
                    text = message['params'].get('message') or ''
                    outcome.progress.append(text)
                    if on_progress is not None:
                        maybe = on_progress(text)
                        if maybe is not None:
                            await maybe
                elif message.get('id') == 1:
                    outcome.result = message.get('result')
                    outcome.error = json.dumps(message['error']) if 'error' in message else None
                    return outcome
            outcome.error = 'the answer stream ended without a result'
    except httpx2.HTTPError as exc:
        outcome.error = f'{type(exc).__name__}: {exc}'
    return outcome


def creates(requests: list[Any]) -> int:
    """How many runs the emulator created (answered creates)."""
    return sum(1 for r in requests if r.method == 'POST' and r.path in CREATE_PATHS and r.status == 200)


def ledger_rows(url: str) -> list[dict[str, Any]]:
    """Every row of the ledger's `runs` table (response_id, status, caller, origin, estimate_usd, cost_usd)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        cursor = conn.execute('SELECT response_id, status, caller, origin, estimate_usd, cost_usd FROM runs')
        names = [c.name for c in cursor.description or ()]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def write_atomically(path: Path, text: str) -> None:
    """Replace `path` as deployment tools do (write aside, then rename), so a reader never sees half a file."""
    aside = path.with_name(path.name + '.new')
    aside.write_text(text)
    os.replace(aside, path)
