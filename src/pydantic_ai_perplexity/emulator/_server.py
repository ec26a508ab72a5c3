"""`Emulator`: the app under uvicorn on loopback, in a background thread; and `serve()` for the CLI."""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Self

import anyio.to_thread
import uvicorn
from uvicorn.config import LOGGING_CONFIG

from .._base.env import ENV, OFFLINE_TIME_SCALE
from .._base.net import is_loopback
from ._app import DEFAULT_UPSTREAM, EmulatorState, RecordedRequest, create_app, new_api_key
from ._faults import FaultPlan
from ._models import ModelSpec

__all__ = ('Emulator', 'check_host', 'serve')

_START_TIMEOUT = 10.0
_STOP_TIMEOUT = 5.0


class _Server(uvicorn.Server):
    """uvicorn's server, reporting when it listens and which loop it runs on."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = threading.Event()
        self.loop: asyncio.AbstractEventLoop | None = None

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        self.loop = asyncio.get_running_loop()
        await super().startup(sockets)
        self.ready.set()


def _config(app: object, host: str, port: int, *, quiet: bool) -> uvicorn.Config:
    return uvicorn.Config(
        app,  # pyright: ignore[reportArgumentType]
        host=host,
        port=port,
        log_config=None if quiet else LOGGING_CONFIG,
        log_level=None if quiet else 'info',
        access_log=False,
        lifespan='off',
        ws='none',
        http='h11',
        loop='asyncio',
        timeout_graceful_shutdown=1,
    )


def check_host(host: str, *, allow_remote: bool) -> None:
    """Refuse to serve off loopback unless asked to: its key and whatever it records would be open to the network.

    Raises:
        ValueError: `host` is not a loopback address and `allow_remote` is false (checked before anything binds).
    """
    if not allow_remote and not is_loopback(host):
        raise ValueError(
            f'the emulator binds to loopback only (127.0.0.1, ::1, localhost), not {host!r}: other machines could '
            'use it. To serve the network on purpose, allow it explicitly (--allow-remote, or allow_remote=True) '
            'and give the key yourself.'
        )


def _bind(host: str, port: int) -> socket.socket:
    """A bound socket for the server, so that a busy port fails here, at once and clearly."""
    family = socket.AF_INET6 if ':' in host else socket.AF_INET
    # IPPROTO_TCP explicitly: asyncio only turns Nagle off (TCP_NODELAY) for sockets that say they are TCP,
    # and with Nagle on, every small response waits ~40 ms for a delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise RuntimeError(f'the emulator could not start on {host}:{port}: {exc.strerror or exc}') from None
    return sock


class Emulator:
    """An offline emulator of Perplexity's Agent API: a real HTTP server on loopback, for tests, demos and notebooks.

    Use it as a context manager (`with Emulator() as emu:` or `async with`), point a client at `emu.base_url`
    with `emu.api_key`. It serves `/v1/agent` and `/v1/responses` (create, background, stream, resume, cancel),
    `/search` and `/v1/models`, validates strictly, bills deterministically, and takes fault directives
    (`[[emulate: 429x2]]` in the query, or `emu.faults.add(...)`). `time_scale` is real seconds per emulated
    second: a `medium` run (60 emulated seconds) takes 0.6 s at the default 0.01.
    """

    def __init__(
        self,
        *,
        api_key: str | None = None,
        time_scale: float = 0.01,
        faults: FaultPlan | str | Iterable[str] | None = None,
        partial_output: bool = True,
        retention_seconds: float | None = None,
        host: str = '127.0.0.1',
        port: int = 0,
        resume_window_seconds: float | None = 600.0,
        models: Mapping[str, ModelSpec] | None = None,
        blocked_keys: Iterable[str] = (),
        record: str | Path | None = None,
        replay: str | Path | None = None,
        upstream: str = DEFAULT_UPSTREAM,
        allow_remote: bool = False,
        corpus: str | Path | None = None,
    ) -> None:
        """Configure (nothing starts until `start()` or entering the context).

        Args:
            api_key: The one key accepted; a random `pplx-emulator-<hex>` if not given.
            time_scale: Real seconds per emulated second (0 makes every run finish at once).
            faults: Directives queued for upcoming creates (a `FaultPlan`, a spec string, or several).
            partial_output: Whether an in-progress retrieve shows the search and fetch items reached so far, as
                the live API does (the default); `False` shows `output: []` until the run ends.
            retention_seconds: Real seconds a finished run stays retrievable (None = forever).
            host: Interface to bind; loopback by default (another one needs `allow_remote`).
            port: Port to bind; 0 picks a free one.
            resume_window_seconds: Real seconds after a run ends during which its stream can be resumed.
            models: Models to serve besides the built-in (live) table, `{'acme/model-1': (input, output)}` in USD
                per 1M tokens, optionally followed by cache-read and cache-write prices.
            blocked_keys: Keys answered with 403 `forbidden` (a blocked key), to exercise that path.
            record: A directory to record into: the emulator becomes a proxy to `upstream` that stores every
                run, search and model list (secrets removed) and forwards the client's own key.
            replay: A directory of recordings to serve instead of the corpus, matched by request.
            upstream: The API a recording proxy forwards to: `https://`, or `http://` to loopback only.
            allow_remote: Allow a `host` that is not loopback (other machines can then reach it).
            corpus: A folder of pages (`*.md` with front matter, `*.json`; each with url, title and text) to search
                instead of the built-in corpus; default: the `PERPLEXITY_EMULATOR_CORPUS` variable, else built-in.

        Raises:
            ValueError: an unsafe setting (`host` off loopback without `allow_remote`, a plain-http or non-HTTP
                `upstream`), a replay directory holding a bad recording (`RecordingError`, naming the file), or a
                corpus folder holding a bad page (`CorpusError`, naming the file).
        """
        check_host(host, allow_remote=allow_remote)
        self.app = create_app(
            api_key=api_key,
            time_scale=time_scale,
            faults=faults,
            partial_output=partial_output,
            retention_seconds=retention_seconds,
            resume_window_seconds=resume_window_seconds,
            models=models,
            blocked_keys=blocked_keys,
            record=record,
            replay=replay,
            upstream=upstream,
            corpus=corpus,
        )
        self._state: EmulatorState = self.app.state.emulator
        self.host = host
        self._port = port
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def api_key(self) -> str:
        """The key the emulator accepts (`Authorization: Bearer <key>`)."""
        return self._state.api_key

    @property
    def faults(self) -> FaultPlan:
        """Faults queued for upcoming creates: `emu.faults.add('429x2')`, `emu.faults.add('fail', match='text')`."""
        return self._state.faults

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request answered so far (method, path, query, status; never headers). Clear it with `.clear()`."""
        return self._state.requests

    @property
    def port(self) -> int:
        """The port the server listens on (known once started)."""
        return self._port

    @property
    def base_url(self) -> str:
        """`http://<host>:<port>`, the base URL to give a client."""
        if self._server is None:
            raise RuntimeError('the emulator is not running: use it as a context manager or call start() first')
        host = f'[{self.host}]' if ':' in self.host else self.host
        return f'http://{host}:{self._port}'

    @property
    def running(self) -> bool:
        """Whether the server thread is up."""
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> Self:
        """Bind the port, start the server thread, and wait (with a deadline) until it serves.

        Raises:
            RuntimeError: the port could not be bound or the server did not start in time.
        """
        if self._server is not None:
            return self
        sock = _bind(self.host, self._port)
        self._state.reopen()
        server = _Server(_config(self.app, self.host, self._port, quiet=True))
        failure: list[BaseException] = []

        def run() -> None:
            try:
                server.run(sockets=[sock])
            except BaseException as exc:  # reported by start(), never lost in the thread
                failure.append(exc)

        thread = threading.Thread(target=run, name=f'perplexity-emulator-{id(self):x}', daemon=True)
        thread.start()
        deadline = time.monotonic() + _START_TIMEOUT
        while not (server.ready.wait(0.02) and server.started):
            if not thread.is_alive() or time.monotonic() > deadline:
                server.should_exit = True
                thread.join(_STOP_TIMEOUT)
                sock.close()
                raise RuntimeError(f'the emulator could not start on {self.host}:{self._port}: {failure!r}')
        self._port = sock.getsockname()[1]
        self._server = server
        self._thread = thread
        return self

    def stop(self) -> None:
        """Stop the server promptly: wake waiting streams, ask uvicorn to exit, join the thread."""
        server, thread = self._server, self._thread
        if server is None or thread is None:
            return
        if server.loop is not None and not server.loop.is_closed():
            try:
                server.loop.call_soon_threadsafe(self._state.close)
            except RuntimeError:  # the loop closed meanwhile
                pass
        server.should_exit = True
        thread.join(_STOP_TIMEOUT)
        if thread.is_alive():  # pragma: no cover - uvicorn did not stop within its graceful timeout
            server.force_exit = True
            thread.join(_STOP_TIMEOUT)
        self._server = None
        self._thread = None

    def __enter__(self) -> Self:
        """Start the server."""
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        """Stop the server."""
        self.stop()

    async def __aenter__(self) -> Self:
        """Start the server without blocking the event loop."""
        return await anyio.to_thread.run_sync(self.start)

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        """Stop the server without blocking the event loop."""
        await anyio.to_thread.run_sync(self.stop)

    def __repr__(self) -> str:
        """Where it listens; never the key."""
        where = f'{self.host}:{self._port}' if self._server is not None else 'not running'
        return f'<Emulator {where}>'


def serve(
    host: str = '127.0.0.1',
    port: int = 8787,
    api_key: str | None = None,
    time_scale: float = OFFLINE_TIME_SCALE,
    *,
    on_ready: Callable[[str, str], None] | None = None,
    record: str | Path | None = None,
    replay: str | Path | None = None,
    upstream: str = DEFAULT_UPSTREAM,
    allow_remote: bool = False,
    corpus: str | Path | None = None,
) -> None:
    """Run the emulator in the foreground until interrupted (for `pydantic-ai-perplexity emulator --port N`).

    `on_ready(base_url, api_key)` is called once it listens; without it, the URL (and the key, when one was
    generated and the server is on loopback) is logged on uvicorn's logger so that it shows on stderr.

    Raises:
        ValueError: an unsafe setting (see `Emulator`); off loopback, an emulator (not a recording proxy) also
            needs `api_key`, as a generated key is never shown there. Raised before anything binds.
    """
    check_host(host, allow_remote=allow_remote)
    if allow_remote and record is None and not api_key:
        raise ValueError(
            'an emulator reachable from other machines never shows its key: give one (--api-key, or the '
            f'{ENV.EMULATOR_API_KEY} variable)'
        )
    key = api_key or new_api_key()
    app = create_app(api_key=key, time_scale=time_scale, record=record, replay=replay, upstream=upstream, corpus=corpus)
    server = _Server(_config(app, host, port, quiet=False))

    def announce() -> None:
        server.ready.wait()
        servers = getattr(server, 'servers', None)
        if not servers:
            return
        bound = servers[0].sockets[0].getsockname()[1]
        shown = f'[{host}]' if ':' in host else host
        base_url = f'http://{shown}:{bound}'
        if on_ready is not None:
            on_ready(base_url, key)
        elif record is not None:
            logging.getLogger('uvicorn.error').info(
                'Recording proxy at %s -> %s, into %s (use your own key; it is forwarded, never stored)',
                base_url,
                upstream,
                record,
            )
        elif api_key is None and not allow_remote:
            logging.getLogger('uvicorn.error').info('Perplexity emulator at %s, API key %s', base_url, key)
        else:
            logging.getLogger('uvicorn.error').info('Perplexity emulator at %s', base_url)

    threading.Thread(target=announce, name='perplexity-emulator-announce', daemon=True).start()
    try:
        server.run()
    except KeyboardInterrupt:  # uvicorn re-raises Ctrl-C after its graceful shutdown: the normal way out here
        pass
    finally:
        server.ready.set()
