"""Run the `pydantic-ai-perplexity` command as a subprocess, with stderr on a pipe or on a real terminal (a pty)."""

from __future__ import annotations

import fcntl
import os
import queue
import re
import struct
import subprocess
import sys
import termios
import threading
import time
from dataclasses import dataclass
from pathlib import Path

COMMAND = [sys.executable, '-m', 'pydantic_ai_perplexity.cli']
#: Emulated seconds per real second for the built-in emulator the CLI starts without a key.
TIME_SCALE = '0.005'
TIMEOUT = 90


def cli_env(state_dir: Path, **extra: str) -> dict[str, str]:
    """This process's environment without Perplexity or telemetry settings, with a state dir and `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(('PERPLEXITY_', 'OTEL_', 'LOGFIRE_'))}
    env.pop('NO_COLOR', None)
    env |= {'PERPLEXITY_STATE_DIR': str(state_dir), 'PERPLEXITY_EMULATOR_TIME_SCALE': TIME_SCALE}
    return env | extra


@dataclass
class Done:
    """A finished command: exit status, stdout and stderr as text."""

    returncode: int
    stdout: str
    stderr: str


class Running:
    """A started command; `wait()` gives its `Done`. With `tty`, stderr is a 100x24 pseudo-terminal."""

    def __init__(self, args: list[str], env: dict[str, str], *, tty: bool = False) -> None:
        self._chunks: list[bytes] = []
        self._reader: threading.Thread | None = None
        if tty:
            master, slave = os.openpty()
            fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack('HHHH', 24, 100, 0, 0))
            env = env | {'TERM': 'xterm-256color', 'COLUMNS': '100'}
            self.process = subprocess.Popen([*COMMAND, *args], env=env, stdout=subprocess.PIPE, stderr=slave)
            os.close(slave)
            self._reader = threading.Thread(target=self._drain, args=(master,), daemon=True)
            self._reader.start()
        else:
            self.process = subprocess.Popen([*COMMAND, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def _drain(self, master: int) -> None:
        try:
            while True:
                try:
                    data = os.read(master, 65536)
                except OSError:  # EIO: the child closed its end of the terminal
                    return
                if not data:
                    return
                self._chunks.append(data)
        finally:
            os.close(master)

    def wait(self) -> Done:
        out, err = self.process.communicate(timeout=TIMEOUT)
        if self._reader is not None:
            self._reader.join(TIMEOUT)
            err = b''.join(self._chunks)
        return Done(self.process.returncode, out.decode(), (err or b'').decode(errors='replace'))


def run(*args: str, env: dict[str, str], tty: bool = False) -> Done:
    """Run the command to completion."""
    return Running(list(args), env, tty=tty).wait()


def run_all(*commands: tuple[str, ...], env: dict[str, str]) -> list[Done]:
    """Run several independent commands at once, in one environment; their results in order."""
    return run_each(*((args, env) for args in commands))


def run_each(*commands: tuple[tuple[str, ...], dict[str, str]]) -> list[Done]:
    """Run several independent commands at once, each in its own environment; their results in order."""
    started = [Running(list(args), env) for args, env in commands]
    return [r.wait() for r in started]


class StderrLines:
    """A process's stderr read line by line on a thread, so a test can wait for a line with a deadline."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        assert process.stderr is not None
        stream = process.stderr

        def read() -> None:
            for raw in stream:
                self.lines.put(raw.decode('utf-8', 'replace'))
            self.lines.put(None)

        threading.Thread(target=read, daemon=True).start()

    def wait_for(self, pattern: str, deadline: float) -> str:
        while True:
            line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            assert line is not None, f'ended before {pattern!r}: {self.seen}'
            self.seen.append(line)
            if re.search(pattern, line):
                return line

    def rest(self, deadline: float) -> str:
        while (line := self.lines.get(timeout=max(0.0, deadline - time.monotonic()))) is not None:
            self.seen.append(line)
        return ''.join(self.seen)
