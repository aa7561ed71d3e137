"""Confining what a program reaches on disk (safe mode): Linux Landlock, applied in the program's
own process after ``fork`` and before it runs, so the confinement holds whatever paths the
program computes (a directive's path can be screened; a path a program builds cannot).

Why Landlock: it needs no privilege (an ordinary user restricts its own process), it is
inherited across ``execve`` and by every descendant, and it cannot be lifted. It resolves the
path the kernel actually opens, so ``..``, an absolute path and a symbolic link planted inside
the allowed directory all end where they point, and are refused there when that is outside.

One C function, :data:`C_SOURCE`'s ``cancho_confine``, is shared by both ways a program starts:
the exe backend's launcher (measure.py) includes it and calls it in the child before
``execv``; the JIT's C child (mcjit.py) can include it the same way before calling ``main``.
The roots travel as strings: ``w/path`` (read, write, create, remove beneath) or ``r/path``
(read and execute beneath). A root that does not exist is skipped.

Where Landlock is missing (Linux before 5.13, or disabled at boot) :func:`landlock_abi` says so
and the caller decides; the kernel warns once and runs unconfined (docs/teaching.md).
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

# What any dynamically linked program needs to start: the loader and libraries, and the
# loader's cache. Read and execute only.
SYSTEM_ROOTS: tuple[str, ...] = ("/usr", "/lib", "/lib64", "/etc/ld.so.cache")
# Writable device files a program may open by name without reaching anyone's data.
DEVICE_FILES: tuple[str, ...] = ("/dev/null",)


@dataclass(frozen=True)
class Confinement:
    """The directories a confined program may reach: ``writable`` (read, write, create, remove
    beneath) and ``readable`` (read and execute beneath); nothing else on disk."""

    writable: tuple[str, ...]
    readable: tuple[str, ...] = SYSTEM_ROOTS

    @classmethod
    def for_directory(cls, root: str | os.PathLike) -> "Confinement":
        """A notebook's confinement: its directory writable, the system's start-up files
        readable."""
        return cls(writable=(os.path.realpath(os.fspath(root)), *DEVICE_FILES))

    def with_readable(self, *paths: str) -> "Confinement":
        """Also readable beneath ``paths`` (the directory holding the program's executable)."""
        return Confinement(self.writable, (*self.readable, *(os.path.realpath(p) for p in paths)))

    def roots(self) -> list[str]:
        """The roots as ``cancho_confine`` takes them (``w/…``, ``r/…``)."""
        return [f"w{p}" for p in self.writable] + [f"r{p}" for p in self.readable]


_NR_LANDLOCK_CREATE_RULESET = 444  # the same number on every Linux architecture
_LANDLOCK_CREATE_RULESET_VERSION = 1


@lru_cache(maxsize=1)
def landlock_abi() -> int:
    """The Landlock ABI version this Linux offers (7 on 6.15+), or 0 when it has none."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        v = libc.syscall(ctypes.c_long(_NR_LANDLOCK_CREATE_RULESET), None, ctypes.c_size_t(0),
                         ctypes.c_uint32(_LANDLOCK_CREATE_RULESET_VERSION))
    except (OSError, AttributeError):
        return 0
    return max(0, int(v))


def available() -> bool:
    """Whether runs can be confined on this machine."""
    return landlock_abi() > 0


UNAVAILABLE_WARNING = (
    "warning: safe mode cannot confine programs to the notebook's directory here (this Linux "
    "kernel has no Landlock, which needs Linux 5.13 or later with Landlock enabled): a program "
    "holding Fs can read and write any file this server's user can (docs/teaching.md)\n")


@dataclass(frozen=True)
class ConfinePlan:
    """What safe mode does about the disk on this machine: the confinement every run gets, or
    ``None`` with the warning the kernel shows once."""

    confine: Confinement | None
    warning: str | None


def plan_for(root: str | os.PathLike) -> ConfinePlan:
    """Safe mode's confinement for a notebook directory, or why there is none."""
    if not available():
        return ConfinePlan(None, UNAVAILABLE_WARNING)
    return ConfinePlan(Confinement.for_directory(root), None)


def launcher_args(confine: Confinement | None) -> list[str]:
    """The launcher's CONFINE count and roots (measure.SOURCE): ``["-"]`` when unconfined."""
    if confine is None:
        return ["-"]
    roots = confine.roots()
    return [str(len(roots)), *roots]


def encode_roots(roots: Sequence[str]) -> list[bytes]:
    """The roots as C strings (for a ctypes caller such as the JIT's child)."""
    return [r.encode("utf-8", "surrogateescape") for r in roots]


# The C side. Self-contained (its own constants and structures, so older kernel headers build
# it); static, so each including file gets its own copy. Call it in the child after fork.
C_SOURCE = r"""
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define CANCHO_LL_CREATE 444
#define CANCHO_LL_ADD_RULE 445
#define CANCHO_LL_RESTRICT 446
#define CANCHO_LL_VERSION 1u
#define CANCHO_LL_RULE_PATH_BENEATH 1
#define CANCHO_LL_EXECUTE (1ull << 0)
#define CANCHO_LL_WRITE_FILE (1ull << 1)
#define CANCHO_LL_READ_FILE (1ull << 2)
#define CANCHO_LL_READ_DIR (1ull << 3)
#define CANCHO_LL_REFER (1ull << 13)
#define CANCHO_LL_TRUNCATE (1ull << 14)
#define CANCHO_LL_IOCTL_DEV (1ull << 15)
/* The rights that apply to a regular file (the rest are about directories). */
#define CANCHO_LL_FILE_RIGHTS (CANCHO_LL_EXECUTE | CANCHO_LL_WRITE_FILE | CANCHO_LL_READ_FILE \
                               | CANCHO_LL_TRUNCATE | CANCHO_LL_IOCTL_DEV)

#define CANCHO_LL_SCOPE_ABSTRACT_UNIX_SOCKET (1ull << 0)
#define CANCHO_LL_SCOPE_SIGNAL (1ull << 1)

struct cancho_ll_ruleset_attr {
    uint64_t handled_access_fs;
    uint64_t handled_access_net;  /* ABI 4; left unhandled: the network is not confined */
    uint64_t scoped;              /* ABI 6 */
};
struct cancho_ll_path_beneath { uint64_t allowed_access; int32_t parent_fd; }
    __attribute__((packed));

/* Confine this process and all it will start to ROOTS ("w/path": everything beneath;
   "r/path": read and execute beneath). A root that does not exist is skipped. From ABI 6 it
   may also signal, and connect to abstract Unix sockets of, only processes in its own
   confinement (its own descendants), not the kernel's or another student's. Returns 0, or
   -errno (-ENOSYS / -EOPNOTSUPP: no Landlock here). */
static int cancho_confine(int n, char *const *roots) {
    long abi = syscall(CANCHO_LL_CREATE, NULL, 0, CANCHO_LL_VERSION);
    if (abi < 0) return -errno;
    uint64_t handled = (1ull << 13) - 1;  /* ABI 1: execute .. make_sym */
    if (abi >= 2) handled |= CANCHO_LL_REFER;
    if (abi >= 3) handled |= CANCHO_LL_TRUNCATE;
    if (abi >= 5) handled |= CANCHO_LL_IOCTL_DEV;
    struct cancho_ll_ruleset_attr attr = {handled, 0, 0};
    size_t attr_size = sizeof attr.handled_access_fs;  /* what every ABI understands */
    if (abi >= 6) {
        attr.scoped = CANCHO_LL_SCOPE_ABSTRACT_UNIX_SOCKET | CANCHO_LL_SCOPE_SIGNAL;
        attr_size = sizeof attr;
    }
    int ruleset = (int)syscall(CANCHO_LL_CREATE, &attr, attr_size, 0);
    if (ruleset < 0) return -errno;
    for (int i = 0; i < n; i++) {
        const char *root = roots[i];
        uint64_t allowed = root[0] == 'w' ? handled
            : (CANCHO_LL_EXECUTE | CANCHO_LL_READ_FILE | CANCHO_LL_READ_DIR);
        int fd = open(root + 1, O_PATH | O_CLOEXEC);
        if (fd < 0) {
            if (errno == ENOENT || errno == ENOTDIR) continue;
            int e = errno;
            close(ruleset);
            return -e;
        }
        struct stat st;
        if (fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode)) allowed &= CANCHO_LL_FILE_RIGHTS;
        struct cancho_ll_path_beneath rule = {allowed, fd};
        long r = syscall(CANCHO_LL_ADD_RULE, ruleset, CANCHO_LL_RULE_PATH_BENEATH, &rule, 0);
        int e = errno;
        close(fd);
        if (r < 0) { close(ruleset); return -e; }
    }
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
        || syscall(CANCHO_LL_RESTRICT, ruleset, 0) != 0) {
        int e = errno;
        close(ruleset);
        return -e;
    }
    close(ruleset);
    return 0;
}
"""
