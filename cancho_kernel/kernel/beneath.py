"""Opening a file beneath a directory in one step, so that what was checked is what is opened.

A directive's path (``%load``, ``%%file``, ``--stdin-file``, ``--stdout file:``) used to be
resolved, checked to be inside the notebook's directory, then opened again by name: a symlink
swapped in between made the kernel open another file. Here the check *is* the open:
``openat2(2)`` with ``RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`` relative to a directory
descriptor, or — where the kernel has no ``openat2`` (Linux before 5.6: ``ENOSYS``) — a walk
one component at a time with ``O_NOFOLLOW | O_DIRECTORY`` and ``O_NOFOLLOW`` on the last one,
which refuses the same paths (a symlink anywhere, ``..``, an absolute path). Every function
returns a descriptor, never a path to be opened later (docs/teaching.md, safe mode).
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import platform
import stat
from dataclasses import dataclass
from enum import Enum

# <linux/openat2.h>
RESOLVE_NO_XDEV = 0x01
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_BENEATH = 0x08
_SYS_OPENAT2 = {"x86_64": 437, "aarch64": 437}


class _OpenHow(ctypes.Structure):
    """``struct open_how`` (three u64: flags, mode, resolve)."""

    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


class Refusal(Enum):
    """Why a path was not opened."""

    LEAVES = "it is outside"
    LINK = "it goes through a symbolic link"


class PathRefused(Exception):
    """The path does not stay beneath the directory, or names a symlink on its way."""

    def __init__(self, reason: Refusal, rel: str) -> None:
        super().__init__(f"`{rel}`: {reason.value}")
        self.reason = reason


@dataclass(frozen=True)
class Beneath:
    """A directory opened once (``fd``, an ``O_PATH`` descriptor) under which paths are opened."""

    fd: int
    where: str

    @classmethod
    def open(cls, directory: str) -> "Beneath":
        return cls(os.open(directory, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC), directory)


@functools.lru_cache(maxsize=8)
def directory(path: str) -> Beneath:
    """The directory ``path`` opened once for the life of the process (the notebook's, or ``/``)."""
    return Beneath.open(path)


@functools.lru_cache(maxsize=1)
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _openat2(base: int, rel: str, flags: int, mode: int) -> int:
    """The raw syscall; raises OSError (ENOSYS where it does not exist)."""
    number = _SYS_OPENAT2.get(platform.machine())
    if number is None:
        raise OSError(errno.ENOSYS, os.strerror(errno.ENOSYS))
    creates = flags & os.O_CREAT or flags & os.O_TMPFILE == os.O_TMPFILE  # O_TMPFILE includes O_DIRECTORY
    how = _OpenHow(flags | os.O_CLOEXEC, mode if creates else 0,
                   RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)
    syscall = _libc().syscall
    syscall.restype = ctypes.c_long
    fd = syscall(ctypes.c_long(number), ctypes.c_int(base), ctypes.c_char_p(os.fsencode(rel)),
                 ctypes.byref(how), ctypes.c_size_t(ctypes.sizeof(how)))
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), rel)
    return int(fd)


def _walk(base: int, rel: str, flags: int, mode: int) -> int:
    """The same refusal without openat2: each directory opened with ``O_NOFOLLOW|O_DIRECTORY``
    from the one before, the last component with ``O_NOFOLLOW``; ``..`` and absolute paths
    are refused before any open."""
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if rel.startswith("/") or ".." in parts:
        raise OSError(errno.EXDEV, "the path leaves the directory", rel)
    if not parts:
        parts = ["."]
    cur = base
    try:
        for part in parts[:-1]:
            try:
                nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=cur)
            except NotADirectoryError:
                if stat.S_ISLNK(os.stat(part, dir_fd=cur, follow_symlinks=False).st_mode):
                    raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), rel) from None
                raise
            if cur != base:
                os.close(cur)
            cur = nxt
        return os.open(parts[-1], flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=cur)
    finally:
        if cur != base:
            os.close(cur)


@functools.lru_cache(maxsize=1)
def has_openat2() -> bool:
    """Whether this kernel has openat2 (probed once on ``/``)."""
    try:
        os.close(_openat2(directory("/").fd, ".", os.O_PATH, 0))
    except OSError as e:
        return e.errno != errno.ENOSYS
    return True


def open_beneath(base: Beneath, rel: str, flags: int, mode: int = 0o644, *,
                 walk: bool | None = None) -> int:
    """A descriptor for ``rel`` opened beneath ``base`` with ``flags`` (close-on-exec), no
    symlink followed and no component leaving ``base``. ``walk`` forces one implementation
    (tests run both); by default openat2 where the kernel has it. Raises :class:`PathRefused`
    for an escape or a symlink, OSError for anything else (ENOENT, EISDIR, ...)."""
    use_walk = not has_openat2() if walk is None else walk
    try:
        return (_walk if use_walk else _openat2)(base.fd, rel, flags, mode)
    except OSError as e:
        if e.errno == errno.EXDEV:
            raise PathRefused(Refusal.LEAVES, rel) from None
        if e.errno == errno.ELOOP:
            raise PathRefused(Refusal.LINK, rel) from None
        raise

