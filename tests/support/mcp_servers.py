"""Helpers for the MCP server tests: server environments and a raw JSON-RPC pipe client.

Every server runs as a real subprocess (`python -m pydantic_ai_perplexity.mcp`) against the emulator, with the
minimal environment MCP clients give stdio servers plus what the test names. Compiled bytecode is shared between
those processes (`PYTHONPYCACHEPREFIX`), so only the first one pays for compiling the MCP SDK.
"""

from __future__ import annotations

import json
import os
import queue
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2
import pytest

from pydantic_ai_perplexity.emulator import Emulator

SERVER = [sys.executable, '-m', 'pydantic_ai_perplexity.mcp']
PYCACHE = Path(tempfile.gettempdir()) / 'pydantic-ai-perplexity-test-pycache'
DEADLINE = 45.0  # generous: a first start compiles the MCP SDK, and CI machines are busy
#: The headers of an MCP request over Streamable HTTP.
MCP_HEADERS = {'Content-Type': 'application/json', 'Accept': 'application/json, text/event-stream'}
#: A strong bearer token for the HTTP servers of a test session.
TOKEN = secrets.token_urlsafe(24)


#: The TypeScript MCP SDK (v1) the client tests run, and the cached folder it is installed in.
TS_SDK = '@modelcontextprotocol/sdk@1.32.2'
TS_SDK_FOLDER = 'pydantic-ai-perplexity-ts-sdk-1.32.2'


def ts_sdk_folder() -> Path:
    """The cached folder with the TypeScript MCP SDK (v1) installed (`npm_folder`)."""
    return npm_folder(TS_SDK_FOLDER, [TS_SDK], '@modelcontextprotocol/sdk/package.json')


def npm_folder(name: str, packages: list[str], probe: str) -> Path:
    """A cached folder (in the temp dir, named `name`) with `packages` installed by npm, once (`probe` is a path
    under `node_modules` that exists once they are). Skipped, with the reason, without Node, npm or the registry."""
    node, npm = shutil.which('node'), shutil.which('npm')
    if node is None or npm is None:
        pytest.skip(f'Node.js and npm are needed for {", ".join(packages)}')
    folder = Path(tempfile.gettempdir()) / name
    if not (folder / 'node_modules' / probe).exists():
        folder.mkdir(parents=True, exist_ok=True)
        (folder / 'package.json').write_text('{"private": true, "type": "module"}\n', encoding='utf-8')
        try:
            done = subprocess.run(
                [npm, 'install', '--no-audit', '--no-fund', '--silent', *packages],
                cwd=folder,
                capture_output=True,
                timeout=300,
            )
        except subprocess.TimeoutExpired:
            pytest.skip(f'npm install {" ".join(packages)} timed out (no registry?)')
        if done.returncode != 0:
            err = done.stderr.decode(errors='replace')[-300:]
            pytest.skip(f'npm install {" ".join(packages)} failed (no registry?): {err}')
    return folder


def server_env(emu: Emulator | None, state_dir: Path, **extra: str) -> dict[str, str]:
    """The environment of a server subprocess: what stdio clients pass on, the emulator, a state dir, `extra`."""
    env = {k: v for k, v in os.environ.items() if k in ('HOME', 'LOGNAME', 'PATH', 'SHELL', 'TERM', 'USER')}
    env['PYTHONPYCACHEPREFIX'] = str(PYCACHE)
    env['PERPLEXITY_STATE_DIR'] = str(state_dir)
    if emu is not None:
        env['PERPLEXITY_API_KEY'] = emu.api_key
        env['PERPLEXITY_BASE_URL'] = emu.base_url
    env.update(extra)
    return env


class RawServer:
    """A server subprocess spoken to in raw JSON-RPC lines over its stdin/stdout (no MCP client library)."""

    def __init__(self, env: dict[str, str], args: list[str] | None = None) -> None:
        self.proc = subprocess.Popen(
            [*SERVER, *(args or [])], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        self.raw_stdout: list[bytes] = []
        self.stderr: list[bytes] = []
        self._seen: list[dict[str, Any]] = []
        self._next_id = 100
        threading.Thread(target=self._pump, args=(self.proc.stdout, self.lines), daemon=True).start()
        threading.Thread(target=self._drain_stderr, daemon=True).start()

    def _pump(self, stream: Any, out: queue.Queue[bytes]) -> None:
        try:
            for line in iter(stream.readline, b''):
                self.raw_stdout.append(line)
                out.put(line)
        except (OSError, ValueError):  # the test closed our end (a client going away)
            return

    def _drain_stderr(self) -> None:
        assert self.proc.stderr is not None
        try:
            for line in iter(self.proc.stderr.readline, b''):
                self.stderr.append(line)
        except (OSError, ValueError):
            return

    def send(self, message: dict[str, Any] | bytes) -> None:
        assert self.proc.stdin is not None
        data = message if isinstance(message, bytes) else json.dumps(message).encode() + b'\n'
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def next_message(self, timeout: float = DEADLINE) -> dict[str, Any]:
        line = self.lines.get(timeout=timeout)
        message = json.loads(line)
        self._seen.append(message)
        return message

    def wait_for(self, predicate: Callable[[dict[str, Any]], bool], timeout: float = DEADLINE) -> dict[str, Any]:
        """The first message (already seen or arriving before the deadline) that satisfies `predicate`."""
        for message in self._seen:
            if predicate(message):
                return message
        deadline = time.monotonic() + timeout
        while True:
            message = self.next_message(timeout=max(0.0, deadline - time.monotonic()))
            if predicate(message):
                return message

    def request(self, method: str, params: dict[str, Any] | None = None, timeout: float = DEADLINE) -> dict[str, Any]:
        self._next_id += 1
        request_id = self._next_id
        message: dict[str, Any] = {'jsonrpc': '2.0', 'id': request_id, 'method': method}
        if params is not None:
            message['params'] = params
        self.send(message)
        return self.wait_for(lambda m: m.get('id') == request_id and 'method' not in m, timeout)

    def initialize(self, version: str = '2025-06-18') -> dict[str, Any]:
        reply = self.request(
            'initialize',
            {'protocolVersion': version, 'capabilities': {}, 'clientInfo': {'name': 'raw-test', 'version': '1'}},
        )
        self.send({'jsonrpc': '2.0', 'method': 'notifications/initialized'})
        return reply

    def call(self, name: str, arguments: dict[str, Any], *, progress: str | None = None) -> dict[str, Any]:
        params: dict[str, Any] = {'name': name, 'arguments': arguments}
        if progress is not None:
            params['_meta'] = {'progressToken': progress}
        return self.request('tools/call', params)['result']

    def close(self, timeout: float = DEADLINE) -> int:
        """Close stdin (EOF) and wait for the exit code."""
        assert self.proc.stdin is not None
        if not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            return self.proc.wait(timeout=timeout)
        finally:
            self._close_readers()

    def vanish(self, timeout: float = DEADLINE) -> int:
        """Close both ends of the pipe, as a client that went away does, and wait for the exit code."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        self.proc.stdout.close()
        try:
            return self.proc.wait(timeout=timeout)
        finally:
            self._close_readers()

    def _close_readers(self) -> None:
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None and not stream.closed:
                stream.close()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.close()


def text_of(result: dict[str, Any]) -> str:
    """The text blocks of a `tools/call` result, joined."""
    return '\n'.join(block['text'] for block in result['content'] if block.get('type') == 'text')


def eventually(check: Callable[[], Any], timeout: float = DEADLINE) -> Any:
    """Poll `check` until it returns something truthy, or fail at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f'condition not met within {timeout} s')
        time.sleep(0.05)


def mcp_research_model(effort: str | None = None, max_collects: int = 50) -> Any:
    """A `FunctionModel` that researches the question through the MCP tools, collects hand-offs, then answers.

    It reads the tool results as MCP clients give them to pydantic-ai: the `structuredContent` dict.
    """
    from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, UserPromptPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        parts = [p for m in messages if isinstance(m, ModelRequest) for p in m.parts]
        returned = [p for p in parts if p.part_kind in ('tool-return', 'retry-prompt')]
        if not returned:
            prompt = next(p.content for p in parts if isinstance(p, UserPromptPart))
            args: dict[str, Any] = {'query': str(prompt)}
            if effort:
                args['effort'] = effort
            return ModelResponse(parts=[ToolCallPart('perplexity_research', args)])
        content: Any = getattr(returned[-1], 'content', None)
        if isinstance(content, dict) and 'next' in content and len(returned) <= max_collects:
            collect = {'response_id': content['response_id']}
            return ModelResponse(parts=[ToolCallPart('perplexity_research_result', collect)])
        if isinstance(content, dict) and content.get('answer'):
            sources = '\n'.join(f'[{s["n"]}] {s["url"]}' for s in content.get('sources', []))
            return ModelResponse(parts=[TextPart(f'{content["answer"]}\n\nSources:\n{sources}')])
        return ModelResponse(parts=[TextPart(str(content))])

    return FunctionModel(respond, model_name='mcp-researcher')


def upstream_status(emu: Emulator, response_id: str) -> str:
    """The run's status as the API (the emulator) has it."""
    reply = httpx2.get(
        f'{emu.base_url}/v1/responses/{response_id}', headers={'Authorization': f'Bearer {emu.api_key}'}, timeout=10
    )
    return reply.json()['status']


class HttpServer:
    """`python -m pydantic_ai_perplexity.mcp --transport http` on a free loopback port; its output kept for reading."""

    def __init__(self, env: dict[str, str], *args: str, **popen: Any) -> None:
        """`popen`: more `subprocess.Popen` arguments (a `preexec_fn` lowering a limit, say)."""
        self.proc = subprocess.Popen(
            [*SERVER, '--transport', 'http', '--port', '0', *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            **popen,
        )
        self.stderr: list[bytes] = []
        self.stdout: list[bytes] = []
        self._url = threading.Event()
        self.url = ''
        self._drains = [
            threading.Thread(target=self._drain, args=(self.proc.stderr, self.stderr), daemon=True),
            threading.Thread(target=self._drain, args=(self.proc.stdout, self.stdout), daemon=True),
        ]
        for drain in self._drains:
            drain.start()
        if not self._url.wait(DEADLINE):
            self.stop()
            raise AssertionError(f'the HTTP server did not start: {b"".join(self.stderr)[-2000:]!r}')

    def _drain(self, stream: Any, into: list[bytes]) -> None:
        for line in iter(stream.readline, b''):
            into.append(line)
            if b'listening on ' in line and not self._url.is_set():
                self.url = line.decode().split('listening on ', 1)[1].strip()
                self._url.set()
        stream.close()

    @property
    def port(self) -> int:
        return int(self.url.rsplit(':', 1)[1].split('/', 1)[0])

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=DEADLINE)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=DEADLINE)
        for drain in self._drains:  # the last lines of output, read to the end
            drain.join(DEADLINE)
