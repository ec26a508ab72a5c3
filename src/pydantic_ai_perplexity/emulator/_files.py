"""Reading the files of a folder a user gives the emulator (recordings to replay, corpus pages), safely.

Only regular files directly inside the folder are read, through the folder's descriptor without following links: a
symbolic link, a directory, a FIFO or a device is refused, and so is a file over the size limit (checked before and
while reading). Each refusal names the file and says why, as an error of the caller's class.
"""

from __future__ import annotations

import errno
import os
import stat

__all__ = ('list_names', 'open_folder', 'read_inside')


def open_folder(directory: os.PathLike[str] | str, what: str, error: type[ValueError]) -> int:
    """A descriptor of `directory` to read its files through; `error` naming `what` it is if it cannot be opened."""
    try:
        return os.open(directory, os.O_RDONLY | os.O_DIRECTORY | getattr(os, 'O_CLOEXEC', 0))
    except FileNotFoundError:
        raise error(f'{what} {directory} does not exist') from None
    except OSError as exc:
        raise error(f'{what} {directory} cannot be read: {exc.strerror or exc}') from None


def list_names(dir_fd: int, suffixes: tuple[str, ...]) -> list[str]:
    """The names in the folder ending in one of `suffixes`, sorted; hidden files (`.name`) are skipped."""
    return sorted(n for n in os.listdir(dir_fd) if n.endswith(suffixes) and not n.startswith('.'))


def read_inside(dir_fd: int, name: str, limit: int, error: type[ValueError]) -> bytes:
    """The bytes of `name`, a regular file directly inside the folder `dir_fd`, at most `limit` bytes long."""
    try:
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError as exc:
        raise error(f'{name}: cannot be read: {exc.strerror or exc}') from None
    if stat.S_ISLNK(info.st_mode):
        raise error(f'{name}: is a symbolic link; only regular files inside the folder are read')
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, 'O_CLOEXEC', 0)
    try:
        fd = os.open(name, flags, dir_fd=dir_fd)  # non-blocking: opening a FIFO must not wait for a writer
    except OSError as exc:
        reason = 'is a symbolic link' if exc.errno == errno.ELOOP else f'cannot be read: {exc.strerror or exc}'
        raise error(f'{name}: {reason}') from None
    try:
        data = _read_regular(fd, name, limit, error)
    except OSError as exc:
        raise error(f'{name}: cannot be read: {exc.strerror or exc}') from None
    finally:
        os.close(fd)
    if len(data) > limit:
        raise error(f'{name}: grew over the {limit}-byte limit while it was read')
    return data


def _read_regular(fd: int, name: str, limit: int, error: type[ValueError]) -> bytes:
    """The bytes of the open `fd` if it is a regular file of at most `limit` bytes (a little more if it grew)."""
    info = os.fstat(fd)  # of what was opened, not of what the name pointed to a moment before
    if not stat.S_ISREG(info.st_mode):
        what = 'a directory' if stat.S_ISDIR(info.st_mode) else 'a FIFO, socket or device'
        raise error(f'{name}: is {what}, not a regular file')
    if info.st_size > limit:
        raise error(f'{name}: {info.st_size} bytes, over the {limit}-byte limit')
    os.set_blocking(fd, True)
    chunks: list[bytes] = []
    size = 0
    while size <= limit and (chunk := os.read(fd, 1 << 20)):
        chunks.append(chunk)
        size += len(chunk)
    return b''.join(chunks)
