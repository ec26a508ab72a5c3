"""Serving MCP over stdio: a guarded wire, an instant handshake, concurrent calls, and a drain on EOF.

- **Only protocol frames on stdout.** First thing, fd 1 is duplicated for the wire and then pointed at stderr,
  and fd 0 at the null device: a stray `print()`, a warning or a child process's output lands on stderr. The
  wire is written only here, one JSON-RPC message per line.
- **Instant handshake.** The MCP SDK takes most of a second to import. While it loads in a background thread, a
  small standard-library front answers `initialize`, `ping` and `tools/list` from `_handshake.json`, which holds
  exactly what the SDK answers (the tests check it). The first other request waits for the SDK, which is then
  handed the handshake to replay (its own answer to it is dropped) and serves everything from there on.
  Requests the front is unsure of (an unknown shape, the 2026-07-28 `server/discover`) go straight to the SDK.
  The snapshot records the MCP SDK versions it was made with (`_snapshot.py`); with any other SDK installed, the
  front stays out of the way and the SDK answers the handshake itself.
- **Robust.** A line that is not JSON is answered with a JSON-RPC parse error (id null) and reading goes on; a
  request whose id can be read is answered with that id, even when the rest of its envelope is wrong (`params` that
  is not an object, say); unknown methods get -32601 from the SDK; notifications get no reply; calls run
  concurrently; a handler's unexpected failure is a JSON-RPC error, never a traceback (`_sdk.answer_errors_cleanly`).
- **EOF.** When stdin closes, calls in flight finish or hand off (each within its wait budget) and are answered
  before the process exits 0. A run is in the ledger from the moment it starts, whatever happens to the process.
- **SIGINT or SIGTERM.** Reading stops, every research call in flight answers at once with its hand-off (the
  `response_id`, in the ledger since the run started), queued ledger writes land, and the process exits (0 after
  SIGTERM, 130 after SIGINT: `_exit.py`), within
  `SHUTDOWN_GRACE_SECONDS`; a watchdog ends it at `SHUTDOWN_DEADLINE_SECONDS` whatever is stuck, and a second signal
  at once. A run is never cancelled by a shutdown.
"""

from __future__ import annotations

import importlib
import os
import signal
import sys
import threading
from pathlib import Path
from types import ModuleType
from typing import IO, TYPE_CHECKING, Any, cast

from . import _jsonrpc
from ._sdk import installed_sdk, lowlevel

if TYPE_CHECKING:
    from anyio.streams.memory import MemoryObjectSendStream
    from mcp.server.lowlevel import Server
    from mcp.server.mcpserver import MCPServer

__all__ = ('SHUTDOWN_DEADLINE_SECONDS', 'SHUTDOWN_GRACE_SECONDS', 'serve_stdio')

HANDSHAKE_FILE = Path(__file__).with_name('_handshake.json')
_TOOLS_MODULE = 'pydantic_ai_perplexity.mcp.server._tools'
#: Beyond the wait budget, how long a call in flight at EOF may take to answer (start, render, a cancel).
_DRAIN_MARGIN_SECONDS = 30.0
#: After SIGINT or SIGTERM, how long the calls in flight (handed off at once) have to be answered.
SHUTDOWN_GRACE_SECONDS = 5.0
#: When a shutdown that is still not done ends the process anyway (exit code 1).
SHUTDOWN_DEADLINE_SECONDS = 10.0


class _Wire:
    """The protocol's stdin and stdout, moved off fds 0 and 1 so nothing else can write to the wire."""

    def __init__(self, reader: IO[bytes], writer: IO[bytes], fds: tuple[int, int] | None = None) -> None:
        self.reader = reader
        self.writer = writer
        self._fds = fds

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
        return cls(reader, writer, (in_fd, out_fd))

    def release(self) -> None:
        """Point fds 0 and 1 at the wire again (for the SDK's own stdio server, which claims them itself)."""
        if self._fds is not None:
            os.dup2(self.reader.fileno(), self._fds[0])
            os.dup2(self.writer.fileno(), self._fds[1])

    def send(self, message: dict[str, Any]) -> None:
        self.writer.write(_jsonrpc.dumps(message) + b'\n')
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
        try:
            parsed = _jsonrpc.loads(line)
        except _jsonrpc.TooDeep:  # its id may be readable: the SDK's path answers it
            return False
        except ValueError:
            self.wire.send(_jsonrpc.error(None, _jsonrpc.PARSE_ERROR, 'Parse error'))
            return True
        refusal = _jsonrpc.refusal_for(parsed)
        if refusal is not None:  # the SDK would answer it with id null: answered here with its id
            self.wire.send(refusal)
            return True
        message = _object(parsed)
        if message is None or message.get('jsonrpc') != '2.0':
            return False
        method = message.get('method')
        if not isinstance(method, str):
            return False
        if 'id' not in message:
            self.replay.append(line)  # a notification: the SDK sees it later, in order
            return True
        request_id = _jsonrpc.readable_id(message)  # None: not an integer or string id
        if request_id is None:
            return False
        return self._answer_request(line, method, message.get('params'), request_id, self.snapshot['versions'])

    def _answer_request(
        self, line: bytes, method: str, params: Any, request_id: int | str, versions: dict[str, Any]
    ) -> bool:
        """Answer a request from the snapshot if it can be (the handshake, ping, the tool list); False otherwise."""
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
        from ..._core.tracing import configure_tracing

        configure_tracing()
    except Exception as exc:
        print(f'Tracing is not configured: {type(exc).__name__}: {exc}', file=sys.stderr)


_INVALID = object()


def _json(data: bytes | str) -> Any:
    try:
        return _jsonrpc.loads(data)
    except ValueError:
        return _INVALID


def _object(value: Any) -> dict[str, Any] | None:
    return cast('dict[str, Any]', value) if isinstance(value, dict) else None


def _load_snapshot() -> dict[str, Any] | None:
    """The shipped handshake snapshot, if it was made with the MCP SDK installed here (else the SDK answers)."""
    try:
        snapshot = _object(_json(HANDSHAKE_FILE.read_bytes()))
    except OSError:
        return None
    if snapshot is None or 'versions' not in snapshot:
        return None
    installed = installed_sdk()
    return snapshot if installed is not None and snapshot.get('sdk') == installed else None


def _front_handshake(wire: _Wire, front: _Front, loader: _Loader) -> list[bytes] | None:
    """Let the front answer from its snapshot while the SDK imports; the lines it left for the SDK, or None at EOF."""
    pending: list[bytes] = []
    while front.snapshot is not None and not pending:
        line = wire.reader.readline()
        if not line:  # EOF during the handshake: nothing is in flight
            wire.writer.flush()
            if loader.is_alive():
                sys.stderr.flush()
                os._exit(0)  # the import thread holds nothing worth waiting for
            return None
        if line.strip() and not front.handle(line):
            pending.append(line)
    return pending


def serve_stdio(*, wait_seconds: float | None = None, drain_seconds: float, lean: bool = False) -> int | None:
    """Serve MCP on this process's stdin/stdout until EOF or a signal (see the module docstring); the signal that
    stopped it, or None (stdin closed). The snapshot holds the full tool list: a `lean` server lets the SDK answer.
    """
    wire = _Wire.claim()
    loader = _Loader()
    loader.start()
    front = _Front(wire, None if lean else _load_snapshot())
    pending = _front_handshake(wire, front, loader)
    if pending is None:  # EOF during the handshake
        return None
    tools = loader.result()
    import anyio

    drain = tools.Drain()
    from ..._base.env import ENV
    from ..._domain.settings import variable

    root = variable(ENV.MCP_FILES_ROOT) or None  # paths in `files` only inside it, over stdio
    server: MCPServer[Any] = tools.build_server(wait_seconds=wait_seconds, drain=drain, lean=lean, files_root=root)
    runner = lowlevel(server)
    if runner is None:
        _serve_with_the_sdk(server, wire, consumed=bool(front.replay or pending))
        return None
    from ._sdk import answer_errors_cleanly

    answer_errors_cleanly(server)
    # The event loop's signal handlers replace these while it serves and leave the defaults behind (SIGTERM would
    # then kill the process outright as it finishes): put back what was there.
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        return anyio.run(_serve, runner, wire, [*front.replay, *pending], front.drop_ids, drain, drain_seconds)
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def _serve_with_the_sdk(server: MCPServer[Any], wire: _Wire, *, consumed: bool) -> None:
    """Fallback for an MCP SDK whose runner is not where `_sdk` looks: its own stdio server, without the extras."""
    import anyio

    print('This MCP SDK keeps its server runner elsewhere: serving with its own stdio transport.', file=sys.stderr)
    if consumed:  # the front already answered from a snapshot of this very SDK version: cannot happen unpatched
        raise SystemExit('The MCP handshake was answered from a snapshot this SDK cannot continue; exiting.')
    wire.release()
    anyio.run(server.run_stdio_async)


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


class _Out:
    """The wire's writing end, shared by the SDK's answers and the guard's own, one whole line at a time."""

    def __init__(self, writer: IO[bytes], calls: _Calls) -> None:
        import anyio

        self._file = anyio.wrap_file(writer)
        self._lock = anyio.Lock()
        self._calls = calls
        self.broken = False

    async def line(self, data: bytes) -> None:
        async with self._lock:
            if self.broken:
                return
            try:
                await self._file.write(data + b'\n')
                await self._file.flush()
            except OSError:  # the client closed its end: runs go on (they are in the ledger)
                self.broken = True
                self._calls.abandon()


class _LineReader(threading.Thread):
    """Reads the wire's lines into the event loop; a daemon, so a shutdown never waits for the client's next line."""

    def __init__(self, reader: IO[bytes], into: MemoryObjectSendStream[bytes], token: Any) -> None:
        super().__init__(name='perplexity-mcp-stdin', daemon=True)
        self._reader = reader
        self._into = into
        self._token = token

    def run(self) -> None:
        import anyio.from_thread

        try:
            for line in iter(self._reader.readline, b''):
                anyio.from_thread.run(self._into.send, line, token=self._token)
        except Exception:  # the loop is gone or stopped listening: nothing left to read for
            return
        finally:
            try:
                anyio.from_thread.run_sync(self._into.close, token=self._token)
            except Exception:  # noqa: S110 (the loop may be gone already)
                pass


def _refusal(line: bytes, json_invalid: bool) -> bytes:
    """The answer to a line the SDK could not read as a JSON-RPC message: with the request's id when it has one."""
    deep = False
    try:
        parsed = _jsonrpc.loads(line)
    except _jsonrpc.TooDeep as exc:
        parsed, deep = exc.members, True
    except ValueError:
        parsed = _INVALID
    request_id = _jsonrpc.readable_id(parsed)
    if request_id is not None:
        if deep:
            why = 'Invalid Request: nested too deeply'
        elif json_invalid:
            why = 'Invalid Request: not valid Unicode JSON (a lone surrogate escape?)'
        else:
            why = 'Invalid Request'
        frame = _jsonrpc.refusal_for(parsed) or _jsonrpc.error(request_id, _jsonrpc.INVALID_REQUEST, why)
    elif json_invalid or parsed is _INVALID:
        frame = _jsonrpc.error(None, _jsonrpc.PARSE_ERROR, 'Parse error')
    else:
        frame = _jsonrpc.error(None, _jsonrpc.INVALID_REQUEST, 'Invalid Request')
    return _jsonrpc.dumps(frame)


async def _serve(
    runner: Server[Any],
    wire: _Wire,
    replay: list[bytes],
    drop_ids: list[int | str],
    drain: Any,
    drain_seconds: float,
) -> int | None:
    import anyio
    import anyio.lowlevel
    from mcp.shared.message import SessionMessage
    from mcp_types import JSONRPCError, JSONRPCNotification, JSONRPCRequest, JSONRPCResponse, jsonrpc_message_adapter
    from pydantic import ValidationError

    to_server, server_in = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    server_out, from_server = anyio.create_memory_object_stream[SessionMessage](0)
    lines_in, lines = anyio.create_memory_object_stream[bytes](0)
    calls = _Calls()
    out = _Out(wire.writer, calls)
    stop_reading = anyio.CancelScope()
    stopping: list[int] = []
    _LineReader(wire.reader, lines_in, anyio.lowlevel.current_token()).start()

    async def feed(line: bytes) -> None:
        if not line.strip():
            return
        try:
            message = jsonrpc_message_adapter.validate_json(line, by_name=False)
        except ValidationError as exc:
            await out.line(_refusal(line, any(e['type'] == 'json_invalid' for e in exc.errors())))
            return
        if isinstance(message, JSONRPCRequest):
            calls.start(message.id)
        elif isinstance(message, JSONRPCNotification) and message.method == 'notifications/cancelled':
            cancelled = (message.params or {}).get('requestId')
            if cancelled is not None:
                calls.end(cancelled)  # the SDK never answers a cancelled request
        await to_server.send(SessionMessage(message))

    async def read() -> None:
        async with to_server, lines:
            with stop_reading:
                for line in replay:
                    await feed(line)
                async for line in lines:
                    await feed(line)
            with anyio.move_on_after(SHUTDOWN_GRACE_SECONDS if stopping else drain_seconds):
                await calls.idle()

    async def write() -> None:
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
                await out.line(message.model_dump_json(by_alias=True, exclude_unset=True).encode())

    listening = anyio.CancelScope()

    async def on_signals() -> None:
        with listening, anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for signum in signals:
                if stopping:  # a second signal: no more waiting
                    _give_up(f'{_signal_name(signum)} again')
                stopping.append(signum)
                name = _signal_name(signum)
                sys.stderr.write(f'Perplexity MCP server: {name}, handing off the calls in flight and shutting down\n')
                sys.stderr.flush()
                watchdog = threading.Timer(SHUTDOWN_DEADLINE_SECONDS, _give_up, args=('still not shut down',))
                watchdog.daemon = True
                watchdog.start()
                drain.start()
                stop_reading.cancel()

    async with anyio.create_task_group() as tg:
        tg.start_soon(on_signals)
        tg.start_soon(read)
        tg.start_soon(write)  # ends once the runner closes its side, after its last answer is written
        await runner.run(server_in, server_out, runner.create_initialization_options())
        listening.cancel()
    return stopping[0] if stopping else None


def _signal_name(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f'signal {sig}'


def _give_up(why: str) -> None:
    sys.stderr.write(f'Perplexity MCP server: {why}, exiting now\n')
    sys.stderr.flush()
    os._exit(1)
