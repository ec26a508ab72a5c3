"""Write a file without following links: a planted symlink never redirects the write to another file.

A cloned repository can ship `.pydantic-deep/mcp.json.tmp -> ~/.bashrc`; a plain `write_text` on that name then
overwrites the link's target. Here the directory is opened with `O_NOFOLLOW`, the temporary file is created in it
exclusively (`O_CREAT | O_EXCL | O_NOFOLLOW`, under a fresh random name), synced, and renamed over the target
(`os.replace`, which replaces a name and never follows one). A target or directory that is itself a symlink is
refused with a message saying so: writing through it is what an attacker would want, and replacing it would
silently break a link the user made on purpose.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path

__all__ = ('UnsafePathError', 'refuse_link', 'write_text_no_follow')

_DEFAULT_MODE = 0o644


class UnsafePathError(ValueError):
    """The file or its directory is a symbolic link (or not a regular file), so it is not written."""


def refuse_link(path: Path) -> None:
    """Raise `UnsafePathError` when `path` or its directory is a symlink (checked before reading what is replaced)."""
    for candidate, what in ((path.parent, 'directory'), (path, 'file')):
        if candidate.is_symlink():
            raise UnsafePathError(
                f'{candidate} is a symbolic link (to {os.readlink(candidate)}); not writing through it. Replace the '
                f'link with a real {what}, or write the file elsewhere.'
            )


def write_text_no_follow(target: str | os.PathLike[str], text: str) -> Path:
    """Replace `target` with `text` (UTF-8) atomically, never following a link; returns the path written.

    Raises `UnsafePathError` when `target` or its directory is a symlink, or `target` is not a regular file.
    """
    path = Path(target)
    directory = path.parent
    directory.mkdir(parents=True, exist_ok=True)
    try:
        dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as exc:
        if directory.is_symlink():
            raise UnsafePathError(
                f'{directory} is a symbolic link (to {os.readlink(directory)}); not writing through it. '
                'Make it a real directory, or write the file elsewhere.'
            ) from None
        raise exc
    try:
        mode = _mode_of(path, dir_fd)
        tmp_name = _write_temporary(dir_fd, path.name, text.encode('utf-8'), mode)
        try:
            os.replace(tmp_name, path.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp_name, dir_fd=dir_fd)
            raise
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return path


def _mode_of(path: Path, dir_fd: int) -> int:
    """The existing file's permissions (kept on replace), or the default; refuses a link or a non-regular file."""
    try:
        info = os.stat(path.name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return _DEFAULT_MODE
    if stat.S_ISLNK(info.st_mode):
        raise UnsafePathError(
            f'{path} is a symbolic link (to {os.readlink(path.name, dir_fd=dir_fd)}); not writing through it. '
            'Remove the link (or replace it with a copy of the file) and run this again.'
        )
    if not stat.S_ISREG(info.st_mode):
        raise UnsafePathError(f'{path} is not a regular file; not replacing it.')
    return stat.S_IMODE(info.st_mode)


def _write_temporary(dir_fd: int, name: str, data: bytes, mode: int) -> str:
    """A new file next to `name`, created exclusively under a random name (never an existing file or link)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, 'O_CLOEXEC', 0)
    for _ in range(10):
        tmp_name = f'.{name}.{secrets.token_hex(6)}.tmp'
        try:
            fd = os.open(tmp_name, flags, 0o600, dir_fd=dir_fd)
        except FileExistsError:
            continue
        try:
            os.fchmod(fd, mode)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(tmp_name, dir_fd=dir_fd)
            raise
        os.close(fd)
        return tmp_name
    raise FileExistsError(f'could not create a temporary file next to {name}')  # pragma: no cover - 10 collisions
