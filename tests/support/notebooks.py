"""Execute a notebook with nbclient in a child process: `python notebooks.py IN OUT WORKDIR`.

Each notebook runs in its own process (and kernel), so several run at once and the test process's warning
filters never reach into Jupyter's machinery. The kernel is the venv's (`python3`, whose `python` jupyter_client
resolves to this interpreter) and talks over IPC sockets in WORKDIR. Its environment is this process's, minus any
real key: the notebooks then start the built-in emulator themselves.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

# Run as a script, this folder heads sys.path: its modules (client, tracing, ...) must not shadow anyone's imports.
sys.path[:] = [p for p in sys.path if Path(p or '.').resolve() != Path(__file__).resolve().parent]

#: Emulated seconds run this many times faster than real ones in the kernels (a `medium` run takes 0.6 s).
TIME_SCALE = '0.01'


def kernel_env(state_dir: Path) -> dict[str, str]:
    """The environment for a notebook's kernel: no Perplexity settings but a fresh state directory."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(('PERPLEXITY_', 'OTEL_', 'LOGFIRE_'))}
    env |= {
        'PERPLEXITY_STATE_DIR': str(state_dir),
        'PERPLEXITY_EMULATOR_TIME_SCALE': TIME_SCALE,
        'PYDEVD_DISABLE_FILE_VALIDATION': '1',
        'MPLBACKEND': 'module://matplotlib_inline.backend_inline',
    }
    env.pop('AGENT_MODEL', None)
    return env


def start(notebook: Path, out: Path, workdir: Path) -> subprocess.Popen[bytes]:
    """Start executing `notebook` into `out` in a child process."""
    workdir.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(
        [sys.executable, __file__, str(notebook), str(out), str(workdir)],
        env=kernel_env(workdir / 'state'),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


def _execute(notebook: Path, out: Path, workdir: Path) -> None:
    import nbformat
    from nbclient import NotebookClient
    from traitlets.config import Config

    book = nbformat.read(notebook, as_version=4)
    client = NotebookClient(
        book,
        timeout=90,
        kernel_name='python3',
        resources={'metadata': {'path': str(workdir)}},
        config=Config({'KernelManager': {'transport': 'ipc', 'ip': str(workdir / 'kernel')}}),
    )
    try:
        client.execute()
    finally:
        nbformat.write(book, out)


if __name__ == '__main__':
    _execute(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]))
