"""Lowering the write side of file handles (edition 5): the opens that append, create and
update, one system call per verb on an open `File`, and the path verbs `fs_rename` and
`fs_remove`. The read side (`open_read`, `file_read`) is in builtins.py.

A `File` is its descriptor (i64). Each answer is the prelude's `Done` or `Read`, with the errno
read straight after the call. Paths go through `path_cstring` (prefix and `..` traps).
"""

from __future__ import annotations

from llvmlite import ir

from ..check.builtins import LOWERINGS
from .layout import I64
from .oscalls import (LOCK_EX, LOCK_NB, SEEK_CUR, SEEK_END, AT_FDCWD, answer, c, errno, fd32, i32, i64,
                      ok_or_failed, os_table)

# The new file's permission bits before the umask: `fopen`'s, which the reference opens with.
FOPEN_MODE = 0o666


def _open_flags(name: str) -> int:
    """`fopen`'s modes as open flags: "ab", "wb", "wbx", "r+b"."""
    t = os_table()
    return {"open_append": t.o_wronly | t.o_creat | t.o_append,
            "open_write": t.o_wronly | t.o_creat | t.o_trunc,
            "open_new": t.o_wronly | t.o_creat | t.o_excl | t.o_trunc,
            "open_rw": t.o_rdwr}[name] | t.o_cloexec


@LOWERINGS.register("open_append", "open_write", "open_new", "open_rw")
def bi_open_mode(self, e, args):
    b = self.b
    cpath = self.path_cstring(e, args[1])
    fd = b.sext(c(self, "openat", [i32(AT_FDCWD), cpath, i32(_open_flags(e.callee.name)), i32(FOPEN_MODE)]), I64)
    why = errno(self)
    self.rt.free(b, cpath)
    return ok_or_failed(self, e, fd, why)


@LOWERINGS.register("file_write")
def bi_file_write(self, e, args):
    """One `write(2)`: how many bytes it took, which can be fewer than asked."""
    b = self.b
    n = c(self, "write", [fd32(self, args[0], True), b.extract_value(args[1], 0), b.extract_value(args[1], 1)])
    return ok_or_failed(self, e, n, errno(self))


@LOWERINGS.register("file_pwrite")
def bi_file_pwrite(self, e, args):
    b = self.b
    handle, at, data = args
    n = c(self, "pwrite", [fd32(self, handle, True), b.extract_value(data, 0), b.extract_value(data, 1), at])
    return ok_or_failed(self, e, n, errno(self))


@LOWERINGS.register("file_pread")
def bi_file_pread(self, e, args):
    """One `pread(2)` sorted into `Read`: a count is `Got`, zero `End`, negative `Failed`."""
    b = self.b
    handle, at, room = args
    n = c(self, "pread", [fd32(self, handle, True), b.extract_value(room, 0), b.extract_value(room, 1), at])
    why = errno(self)
    tag = b.select(b.icmp_signed(">", n, i64(0)), i64(0),
                   b.select(b.icmp_signed("==", n, i64(0)), i64(1), i64(2)))
    return answer(self, e, tag, [b.select(b.icmp_signed("<", n, i64(0)), why, n)])


def _status(self, e, r: ir.Value) -> ir.Value:
    """`Done` from a C int result: `Ok(0)` or `Failed(errno)`."""
    return ok_or_failed(self, e, self.b.sext(r, I64), errno(self))


@LOWERINGS.register("file_sync")
def bi_file_sync(self, e, args):
    return _status(self, e, c(self, "fsync", [fd32(self, args[0], True)]))


@LOWERINGS.register("file_truncate")
def bi_file_truncate(self, e, args):
    return _status(self, e, c(self, "ftruncate", [fd32(self, args[0], True), args[1]]))


@LOWERINGS.register("file_lock")
def bi_file_lock(self, e, args):
    """`flock(LOCK_EX | LOCK_NB)`: exclusive, advisory, never waits, gone with the process."""
    return _status(self, e, c(self, "flock", [fd32(self, args[0], True), i32(LOCK_EX | LOCK_NB)]))


@LOWERINGS.register("file_size")
def bi_file_size(self, e, args):
    """The end by `lseek`, with the cursor put back where it was."""
    b = self.b
    fd = fd32(self, args[0], True)
    here = c(self, "lseek", [fd, i64(0), i32(SEEK_CUR)])
    end = c(self, "lseek", [fd, i64(0), i32(SEEK_END)])
    why = errno(self)
    failed = b.or_(b.icmp_signed("<", here, i64(0)), b.icmp_signed("<", end, i64(0)))
    back = self.func.append_basic_block("file_size.back")
    done = self.func.append_basic_block("file_size.done")
    b.cbranch(b.icmp_signed(">=", here, i64(0)), back, done)
    b.position_at_end(back)
    c(self, "lseek", [fd, here, i32(0)])
    b.branch(done)
    b.position_at_end(done)
    return answer(self, e, b.select(failed, i64(1), i64(0)), [b.select(failed, why, end)])


@LOWERINGS.register("fs_rename")
def bi_fs_rename(self, e, args):
    """Both paths checked against the prefix (a rename out of it is a write outside it)."""
    b = self.b
    src = self.path_cstring(e, args[1])
    dst = self.path_cstring(e, args[2])
    r = c(self, "renameat", [i32(AT_FDCWD), src, i32(AT_FDCWD), dst])
    why = errno(self)
    self.rt.free(b, src)
    self.rt.free(b, dst)
    return ok_or_failed(self, e, b.sext(r, I64), why)


@LOWERINGS.register("fs_remove")
def bi_fs_remove(self, e, args):
    """`unlink`: a file or a link, never a directory."""
    b = self.b
    path = self.path_cstring(e, args[1])
    r = c(self, "unlinkat", [i32(AT_FDCWD), path, i32(0)])
    why = errno(self)
    self.rt.free(b, path)
    return ok_or_failed(self, e, b.sext(r, I64), why)
