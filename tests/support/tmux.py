"""A real terminal for tests: a command in a detached tmux session, its screen read with capture-pane."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import time
import uuid
from collections.abc import Mapping

DEADLINE_S = 60.0


class Terminal:
    """One tmux session of `width` x `height` running `argv` in `env`; ended on `close()`."""

    def __init__(self, argv: list[str], *, env: Mapping[str, str], width: int = 120, height: int = 40) -> None:
        if shutil.which('tmux') is None:
            raise RuntimeError('tmux is needed for terminal tests (apt-get install tmux)')
        self.name = f'pplx-{uuid.uuid4().hex[:10]}'
        exports = ' '.join(f'{k}={shlex.quote(v)}' for k, v in env.items())
        # The exit status is printed after the command, and the pane stays until the test reads it.
        script = f'env -i {exports} {shlex.join(argv)}; echo "[exit $?]"; sleep 600'
        new = ['tmux', 'new-session', '-d', '-s', self.name, '-x', str(width), '-y', str(height), 'sh', '-c', script]
        for attempt in range(3):  # the shared tmux server may be exiting as its last session ends: start it again
            started = subprocess.run(new, capture_output=True, text=True)
            if started.returncode == 0:
                break
            if attempt == 2:
                raise RuntimeError(f'tmux new-session failed: {started.stderr.strip()}')

    def screen(self) -> str:
        """What the terminal shows now, long lines joined as the program wrote them (-J)."""
        out = subprocess.run(['tmux', 'capture-pane', '-p', '-J', '-t', self.name], capture_output=True, text=True)
        return out.stdout

    def screen_with_colours(self) -> str:
        """The screen with its escape sequences (-e): colours show as SGR codes."""
        out = subprocess.run(['tmux', 'capture-pane', '-p', '-e', '-t', self.name], capture_output=True, text=True)
        return out.stdout

    def send(self, *keys: str) -> None:
        subprocess.run(['tmux', 'send-keys', '-t', self.name, *keys], check=True)

    def wait_for(self, text: str, *, deadline_s: float = DEADLINE_S) -> str:
        """Poll the screen until `text` appears (fails with the screen after `deadline_s`)."""
        end = time.monotonic() + deadline_s
        while True:
            screen = self.screen()
            if text in screen:
                return screen
            if time.monotonic() > end:
                raise AssertionError(f'{text!r} did not appear within {deadline_s} s; the screen:\n{screen}')
            time.sleep(0.05)

    def close(self) -> None:
        subprocess.run(['tmux', 'kill-session', '-t', self.name], capture_output=True)

    def __enter__(self) -> Terminal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
