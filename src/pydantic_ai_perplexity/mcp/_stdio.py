"""Serving MCP over stdio: a guarded wire, an instant handshake, concurrent calls, and a drain on EOF.

- **Only protocol frames on stdout.** First thing, fd 1 is duplicated for the wire and then pointed at stderr,
  and fd 0 at the null device: a stray `print()`, a warning or a child process's output lands on stderr. The
  wire is written only here, one JSON-RPC message per line.
- **Instant handshake.** The MCP SDK takes most of a second to import. While it loads in a background thread, a
  small standard-library front answers `initialize`, `ping` and `tools/list` from `_handshake.json`, which holds
  exactly what the SDK answers (the tests check it). The first other request waits for the SDK, which is then
  handed the handshake to replay (its own answer to it is dropped) and serves everything from there on.
  Requests the front is unsure of (an unknown shape, the 2026-07-28 `server/discover`) go straight to the SDK.
- **Robust.** A line that is not JSON is answered with a JSON-RPC parse error (id null) and reading goes on; unknown
  methods get -32601 from the SDK; notifications get no reply; calls run concurrently.
- **EOF.** When stdin closes, calls in flight finish or hand off (each within its wait budget) and are answered
  before the process exits 0. A run is in the ledger from the moment it starts, whatever happens to the process.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import threading
from pathlib import Path
from types import ModuleType
from typing import IO, Any, cast

__all__ = ('serve_stdio',)

HANDSHAKE_FILE = Path(__file__).with_name('_handshake.json')
_TOOLS_MODULE = 'pydantic_ai_perplexity.mcp._tools'
#: Beyond the wait budget, how long a call in flight at EOF may take to answer (start, render, a cancel).
_DRAIN_MARGIN_SECONDS = 30.0


class _Wire:
    """The protocol's stdin and stdout, moved off fds 0 and 1 so nothing else can write to the wire."""

    def __init__(self, reader: IO[bytes], writer: IO[bytes]) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    def claim(cls) -> _Wire:
        try:
            in_fd, out_fd = sys.stdin.fileno(), sys.stdout.fileno()
        except (AttributeError, OSError, ValueError):  # not real descriptors (embedded use): no guard possible
            return cls(sys.stdin.buffer, sys.stdout.buffer)
        sys.stdout.flush()
        reader = os.fdopen(os.dup(in_fd), 'rb')
        writer = os.fdopen(os.dup(out_fd), 'wb')
        null = os.open(os.devnull, os.O_RDWR)
        try:
            os.dup2(null, in_fd)
            try:
                os.dup2(2, out_fd)
            except OSError:  # no stderr: stray output is dropped instead
                os.dup2(null, out_fd)
        finally:
            os.close(null)
        return cls(reader, writer)

    def send(self, message: dict[str, Any]) -> None:
        self.writer.write(json.dumps(message, separators=(',', ':'), ensure_ascii=False).encode() + b'\n')
        self.writer.flush()


class _Front:
    """Answers the handshake from the snapshot while the SDK loads; remembers what the SDK must replay."""

    def __init__(self, wire: _Wire, snapshot: dict[str, Any] | None) -> None:
        self.wire = wire
        self.snapshot = snapshot
        self.version: str | None = None
        self.replay: list[bytes] = []
        self.drop_ids: list[int | str] = []

    def handle(self, line: bytes) -> bool:
        """Answer or queue `line` here if the front can; False when it needs the SDK now."""
        if self.snapshot is None:
            return False
        parsed = _json(line)
        if parsed is _INVALID:
            self.wire.send({'jsonrpc': '2.0', 'id': None, 'error': {'code': -32700, 'message': 'Parse error'}})
            return True
        message = _object(parsed)
        if message is None or message.get('jsonrpc') != '2.0':
            return False
        method, params, request_id = message.get('method'), message.get('params'), message.get('id')
        if not isinstance(method, str):
            return False
        if 'id' not in message:
            self.replay.append(line)  # a notification: the SDK sees it later, in order
            return True
        if not isinstance(request_id, int | str) or isinstance(request_id, bool):
            return False
        versions: dict[str, Any] = self.snapshot['versions']
        if method == 'initialize' and self.version is None:
            version = self._negotiate(params, versions)
            if version is None:
                return False
            self.version = version
            self.replay.append(line)
            self.drop_ids.append(request_id)
            self._answer(request_id, versions[version]['initialize'])
            return True
        if method == 'ping':
            self._answer(request_id, {})
            return True
        paged = isinstance(params, dict) and 'cursor' in params
        if method == 'tools/list' and self.version is not None and not paged:
            self._answer(request_id, versions[self.version]['tools/list'])
            return True
        return False

    def _negotiate(self, params: Any, versions: dict[str, Any]) -> str | None:
        """The SDK's choice: the requested handshake version if known, else the latest; None if params look off."""
        fields = _object(params) or {}
        requested, info = fields.get('protocolVersion'), _object(fields.get('clientInfo')) or {}
        if not (isinstance(requested, str) and _object(fields.get('capabilities')) is not None):
            return None
        if not (isinstance(info.get('name'), str) and isinstance(info.get('version'), str)):
            return None
        return requested if requested in versions else str(self.snapshot['latest'] if self.snapshot else '')

    def _answer(self, request_id: int | str, result: dict[str, Any]) -> None:
        self.wire.send({'jsonrpc': '2.0', 'id': request_id, 'result': result})


class _Loader(threading.Thread):
    """Imports the SDK and the tools in the background, so the front can answer meanwhile."""

    def __init__(self) -> None:
        super().__init__(name='perplexity-mcp-import', daemon=True)
        self.module: ModuleType | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.module = importlib.import_module(_TOOLS_MODULE)
        except BaseException as exc:
            self.error = exc
            return
        configure_tracing_quietly()

    def result(self) -> ModuleType:
        self.join()
        if self.error is not None:
            raise self.error
        assert self.module is not None
        return self.module


def configure_tracing_quietly() -> None:
    """Configure tracing for this entry point (only when there is somewhere to send spans); never fatal."""
    try:
        from ..tracing import configure_tracing

        configure_tracing()
    except Exception as exc:
        print(f'Tracing is not configured: {type(exc).__name__}: {exc}', file=sys.stderr)


_INVALID = object()


def _json(data: bytes | str) -> Any:
    try:
        return json.loads(data)
    except (ValueError, RecursionError):  # RecursionError: nesting deeper than the interpreter's stack
        return _INVALID


def _object(value: Any) -> dict[str, Any] | None:
    return cast('dict[str, Any]', value) if isinstance(value, dict) else None


def _load_snapshot() -> dict[str, Any] | None:
    try:
        snapshot = _object(_json(HANDSHAKE_FILE.read_bytes()))
    except OSError:
        return None
    return snapshot if snapshot is not None and 'versions' in snapshot else None


def serve_stdio(*, wait_seconds: float | None = None, drain_seconds: float) -> None:
    """Serve MCP on this process's stdin/stdout until EOF (see the module docstring)."""
    wire = _Wire.claim()
    loader = _Loader()
    loader.start()
    front = _Front(wire, _load_snapshot())
    pending: list[bytes] = []
    while not pending:
        line = wire.reader.readline()
        if not line:  # EOF during the handshake: nothing is in flight
            wire.writer.flush()
            if loader.is_alive():
                sys.stderr.flush()
                os._exit(0)  # the import thread holds nothing worth waiting for
            return
        if line.strip() and not front.handle(line):
            pending.append(line)
    tools = loader.result()
    import anyio

    anyio.run(_serve, tools, wire, [*front.replay, *pending], front.drop_ids, wait_seconds, drain_seconds)


class _Calls:
    """Requests read from the client and not yet answered, so EOF can wait for them."""

    def __init__(self) -> None:
        import anyio

        self._ids: set[str] = set()
        self._idle = anyio.Event()
        self._idle.set()

    def start(self, request_id: Any) -> None:
        import anyio

        if not self._ids:
            self._idle = anyio.Event()
        self._ids.add(str(request_id))

    def end(self, request_id: Any) -> None:
        self._ids.discard(str(request_id))
        if not self._ids:
            self._idle.set()

    def abandon(self) -> None:
        self._ids.clear()
        self._idle.set()

    async def idle(self) -> None:
        while self._ids:
            await self._idle.wait()


async def _serve(
    tools: ModuleType,
    wire: _Wire,
    replay: list[bytes],
    drop_ids: list[int | str],
    wait_seconds: float | None,
    drain_seconds: float,
) -> None:
    import anyio
    from mcp.shared.message import SessionMessage
    from mcp_types import (
        INVALID_REQUEST,
        PARSE_ERROR,
        ErrorData,
        JSONRPCError,
        JSONRPCNotification,
        JSONRPCRequest,
        JSONRPCResponse,
        jsonrpc_message_adapter,
    )
    from pydantic import ValidationError

    server = tools.build_server(wait_seconds=wait_seconds)
    lowlevel = server._lowlevel_server  # the SDK's own `Client` reaches an MCPServer's runner the same way
    to_server, server_in = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    server_out, from_server = anyio.create_memory_object_stream[SessionMessage](0)
    calls = _Calls()
    reader = anyio.wrap_file(wire.reader)
    writer = anyio.wrap_file(wire.writer)
    replies = server_out.clone()

    async def feed(line: bytes) -> None:
        if not line.strip():
            return
        try:
            message = jsonrpc_message_adapter.validate_json(line, by_name=False)
        except ValidationError as exc:
            parse = any(e['type'] == 'json_invalid' for e in exc.errors())
            error = ErrorData(code=PARSE_ERROR, message='Parse error') if parse else None
            error = error or ErrorData(code=INVALID_REQUEST, message='Invalid Request')
            await replies.send(SessionMessage(JSONRPCError(jsonrpc='2.0', id=None, error=error)))
            return
        if isinstance(message, JSONRPCRequest):
            calls.start(message.id)
        elif isinstance(message, JSONRPCNotification) and message.method == 'notifications/cancelled':
            cancelled = (message.params or {}).get('requestId')
            if cancelled is not None:
                calls.end(cancelled)  # the SDK never answers a cancelled request
        await to_server.send(SessionMessage(message))

    async def read() -> None:
        async with to_server, replies:
            for line in replay:
                await feed(line)
            async for line in reader:
                await feed(line)
            with anyio.move_on_after(drain_seconds):
                await calls.idle()

    async def write() -> None:
        broken = False
        async with from_server:
            async for session_message in from_server:
                message = session_message.message
                if isinstance(message, JSONRPCResponse | JSONRPCError) and message.id is not None:
                    calls.end(message.id)
                    if message.id in drop_ids:  # the SDK's own answer to the handshake the front gave
                        drop_ids.remove(message.id)
                        if isinstance(message, JSONRPCError):
                            print(f'MCP handshake replay failed: {message.error.message}', file=sys.stderr)
                        continue
                if broken:
                    continue
                data = message.model_dump_json(by_alias=True, exclude_unset=True)
                try:
                    await writer.write(data.encode() + b'\n')
                    await writer.flush()
                except OSError:  # the client closed its end: runs go on (they are in the ledger)
                    broken = True
                    calls.abandon()

    async with anyio.create_task_group() as tg:
        tg.start_soon(read)
        tg.start_soon(write)
        await lowlevel.run(server_in, server_out, lowlevel.create_initialization_options())
