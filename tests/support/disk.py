"""A real small filesystem for the ledger to meet a full disk on: the `small_disk` fixture's mount, and `fill`."""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def mounted_small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 1 MiB filesystem (tmpfs), so that a write can meet a full disk; skips without the right to mount."""
    mount = tmp_path / 'disk'
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip('mounting a small filesystem needs root')
    done = subprocess.run(['mount', '-t', 'tmpfs', '-o', 'size=1m,mode=0755', 'tmpfs', str(mount)], check=False)
    if done.returncode != 0:
        pytest.skip('cannot mount a tmpfs here')
    try:
        yield mount
    finally:
        subprocess.run(['umount', '-l', str(mount)], check=False)


def fill(directory: Path) -> Path:
    """Fill the filesystem of `directory` to the last byte; returns the file to delete to free it."""
    filler = directory / 'filler'
    with filler.open('wb', buffering=0) as out:
        for size in (65536, 4096, 512, 1):
            while True:
                try:
                    out.write(b'\0' * size)
                except OSError as exc:
                    assert exc.errno == errno.ENOSPC
                    break
    return filler
