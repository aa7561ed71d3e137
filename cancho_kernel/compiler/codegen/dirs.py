"""Lowering directory handles (edition 6; modes and `dir_rename_new` edition 7): `open_dir`'s
open, the steps beneath a `Dir` (one checked name each, following no link), listings and status.

A `Dir` is its descriptor (i64). A `DirList` is the address of libc's `DIR` stream (i64), over a
second descriptor of the same directory so two listings of one `Dir` do not share a position.
Kinds are the language's numbers: 1 file, 2 directory, 3 link, 4 other, 0 unknown.
"""

from __future__ import annotations

from llvmlite import ir

from ..check.builtins import LOWERINGS
from .layout import I8, I32, I64, PTR
from .oscalls import (AT_FDCWD, AT_SYMLINK_NOFOLLOW, ENAMETOOLONG, EOPNOTSUPP, EINVAL, RENAME_NOREPLACE,
                      answer, c, errno, fd32, i32, i64, name_checked_call, ok_or_failed, os_table, words)

# Permission bits of a file created beneath a directory (before the umask).
CREATE_MODE = 0o644
S_IFMT, S_IFREG, S_IFDIR, S_IFLNK = 0o170000, 0o100000, 0o40000, 0o120000
DT_DIR, DT_REG, DT_LNK, DT_UNKNOWN = 4, 8, 10, 0


@LOWERINGS.register("open_dir")
def bi_open_dir(self, e, args):
    """The trust anchor: the path checked like `open_read`'s, opened as a directory."""
    t = os_table()
    b = self.b
    cpath = self.path_cstring(e, args[1])
    fd = b.sext(c(self, "openat", [i32(AT_FDCWD), cpath, i32(t.o_directory | t.o_cloexec), i32(0)]), I64)
    why = errno(self)
    self.rt.free(b, cpath)
    return ok_or_failed(self, e, fd, why)


def _open_beneath(flags: int, mode: int):
    def lower(self, e, args):
        fd = fd32(self, args[0], True)
        result, reason = name_checked_call(
            self, [args[1]], lambda names: c(self, "openat", [fd, names[0], i32(flags), i32(mode)]))
        return ok_or_failed(self, e, result, reason)
    return lower


def _register_opens() -> None:
    t = os_table()
    LOWERINGS.register("dir_enter")(_open_beneath(t.o_directory | t.o_nofollow | t.o_cloexec, 0))
    LOWERINGS.register("dir_open_read")(_open_beneath(t.o_nofollow | t.o_cloexec, 0))
    LOWERINGS.register("dir_open_new")(
        _open_beneath(t.o_wronly | t.o_creat | t.o_excl | t.o_nofollow | t.o_cloexec, CREATE_MODE))
    LOWERINGS.register("dir_open_append")(
        _open_beneath(t.o_wronly | t.o_creat | t.o_append | t.o_nofollow | t.o_cloexec, CREATE_MODE))


_register_opens()


@LOWERINGS.register("dir_close")
def bi_dir_close(self, e, args):
    return self.b.sext(c(self, "close32", [fd32(self, args[0], False)]), I64)


@LOWERINGS.register("dir_rename")
def bi_dir_rename(self, e, args):
    """`renameat` within the one directory; both names checked."""
    fd = fd32(self, args[0], True)
    result, reason = name_checked_call(self, [args[1], args[2]],
                                       lambda n: c(self, "renameat", [fd, n[0], fd, n[1]]))
    return ok_or_failed(self, e, result, reason)


@LOWERINGS.register("dir_rename_new")
def bi_dir_rename_new(self, e, args):
    """The rename that refuses to replace (`renameat2(RENAME_NOREPLACE)`): `EEXIST` when `to`
    exists. A file system without the flag answers `EOPNOTSUPP`, never a plain rename; the
    kernel's `EINVAL` for it is mapped so that it stays apart from a refused name."""
    b = self.b
    fd = fd32(self, args[0], True)

    def call(n):
        r = c(self, "renameat2", [fd, n[0], fd, n[1], i32(RENAME_NOREPLACE)])
        # Only a call's EINVAL is the file system's (a refused name makes no call): rewrite it in
        # errno itself, which `name_checked_call` reads straight after this.
        slot = c(self, "__errno_location", [])
        was = b.load(slot, typ=I32)
        unsupported = b.and_(b.icmp_signed("<", r, i32(0)), b.icmp_signed("==", was, i32(EINVAL)))
        b.store(b.select(unsupported, i32(EOPNOTSUPP), was), slot)
        return r
    result, reason = name_checked_call(self, [args[1], args[2]], call)
    return ok_or_failed(self, e, result, reason)


@LOWERINGS.register("dir_remove")
def bi_dir_remove(self, e, args):
    """`unlinkat(dir, name, 0)`: removes a link itself, never its target."""
    fd = fd32(self, args[0], True)
    result, reason = name_checked_call(self, [args[1]], lambda n: c(self, "unlinkat", [fd, n[0], i32(0)]))
    return ok_or_failed(self, e, result, reason)


@LOWERINGS.register("dir_sync")
def bi_dir_sync(self, e, args):
    r = c(self, "fsync", [fd32(self, args[0], True)])
    return ok_or_failed(self, e, self.b.sext(r, I64), errno(self))


# ------------------------------------------------------------ listing


@LOWERINGS.register("dir_list")
def bi_dir_list(self, e, args):
    """`fdopendir` over a second open of `.` beneath the handle: the stream owns its descriptor."""
    t = os_table()
    b = self.b
    fd = fd32(self, args[0], True)
    dot = self.ml.string(b".\0")
    own = c(self, "openat", [fd, b.extract_value(dot, 0), i32(t.o_directory | t.o_cloexec), i32(0)])
    why_open = errno(self)
    result = self.alloca_builder.alloca(I64, name="dir_list.result")
    reason = self.alloca_builder.alloca(I64, name="dir_list.reason")
    b.store(i64(-1), result)
    b.store(why_open, reason)
    stream_block = self.func.append_basic_block("dir_list.stream")
    done = self.func.append_basic_block("dir_list.done")
    b.cbranch(b.icmp_signed("<", own, i32(0)), done, stream_block)
    b.position_at_end(stream_block)
    stream = c(self, "fdopendir", [own])
    why = errno(self)
    missing = b.icmp_unsigned("==", stream, ir.Constant(PTR, None))
    b.store(b.select(missing, i64(-1), b.ptrtoint(stream, I64)), result)
    b.store(why, reason)
    closing = self.func.append_basic_block("dir_list.close")
    b.cbranch(missing, closing, done)
    b.position_at_end(closing)
    c(self, "close32", [own])
    b.branch(done)
    b.position_at_end(done)
    return ok_or_failed(self, e, b.load(result, typ=I64), b.load(reason, typ=I64))


@LOWERINGS.register("dir_list_close")
def bi_dir_list_close(self, e, args):
    b = self.b
    return b.sext(c(self, "closedir", [b.inttoptr(args[0], PTR)]), I64)


@LOWERINGS.register("dir_next")
def bi_dir_next(self, e, args):
    """The next entry but `.` and `..`: `Name(n, kind)` with the name copied into the front of
    `name`, `End`, or `Failed(errno)`; a name longer than the buffer is `ENAMETOOLONG` and
    nothing is copied. `readdir` reports an error only through errno, cleared before the call."""
    t = os_table()
    b, func = self.b, self.func
    stream = b.inttoptr(b.load(args[0], typ=I64), PTR)
    room_ptr, room_len = b.extract_value(args[1], 0), b.extract_value(args[1], 1)
    tag = self.alloca_builder.alloca(I64, name="dir_next.tag")
    first = self.alloca_builder.alloca(I64, name="dir_next.first")
    second = self.alloca_builder.alloca(I64, name="dir_next.second")
    head = func.append_basic_block("dir_next.read")
    entry_block = func.append_basic_block("dir_next.entry")
    none = func.append_basic_block("dir_next.none")
    named = func.append_basic_block("dir_next.named")
    fits = func.append_basic_block("dir_next.fits")
    long = func.append_basic_block("dir_next.long")
    done = func.append_basic_block("dir_next.done")
    b.branch(head)
    b.position_at_end(head)
    b.store(i32(0), c(self, "__errno_location", []))
    ent = c(self, "readdir", [stream])
    b.cbranch(b.icmp_unsigned("==", ent, ir.Constant(PTR, None)), none, entry_block)

    b.position_at_end(none)
    why = errno(self)
    ended = b.icmp_signed("==", why, i64(0))
    b.store(b.select(ended, i64(1), i64(2)), tag)
    b.store(why, first)
    b.store(i64(0), second)
    b.branch(done)

    b.position_at_end(entry_block)
    name = b.gep(ent, [i64(t.d_name)], source_etype=I8)
    n = c(self, "strlen", [name])
    c0 = b.icmp_unsigned("==", b.load(name, typ=I8), ir.Constant(I8, ord(".")))
    at1 = b.select(b.icmp_signed(">=", n, i64(2)), i64(1), i64(0))
    c1 = b.icmp_unsigned("==", b.load(b.gep(name, [at1], source_etype=I8), typ=I8), ir.Constant(I8, ord(".")))
    dot = b.and_(c0, b.icmp_signed("==", n, i64(1)))
    dotdot = b.and_(b.and_(c0, c1), b.icmp_signed("==", n, i64(2)))
    b.cbranch(b.or_(dot, dotdot), head, named)

    b.position_at_end(named)
    b.cbranch(b.icmp_signed(">", n, room_len), long, fits)

    b.position_at_end(long)
    b.store(i64(2), tag)
    b.store(i64(ENAMETOOLONG), first)
    b.store(i64(0), second)
    b.branch(done)

    b.position_at_end(fits)
    c(self, "memmove", [room_ptr, name, n])
    d_type = b.zext(b.load(b.gep(ent, [i64(t.d_type)], source_etype=I8), typ=I8), I64)
    kind = b.select(b.icmp_signed("==", d_type, i64(DT_REG)), i64(1),
                    b.select(b.icmp_signed("==", d_type, i64(DT_DIR)), i64(2),
                             b.select(b.icmp_signed("==", d_type, i64(DT_LNK)), i64(3),
                                      b.select(b.icmp_signed("==", d_type, i64(DT_UNKNOWN)), i64(0), i64(4)))))
    b.store(i64(0), tag)
    b.store(n, first)
    b.store(kind, second)
    b.branch(done)

    b.position_at_end(done)
    return answer(self, e, b.load(tag, typ=I64), [b.load(first, typ=I64), b.load(second, typ=I64)])


# ------------------------------------------------------------ status


def _stat_field(self, st: ir.Value, offset: int, width: ir.IntType) -> ir.Value:
    b = self.b
    p = b.gep(b.bitcast(st, PTR), [i64(offset)], source_etype=I8)
    return b.zext(b.load(p, typ=width), I64) if width != I64 else b.load(p, typ=I64)


def _kind_of_mode(self, mode: ir.Value) -> ir.Value:
    b = self.b
    fmt = b.and_(mode, i64(S_IFMT))
    return b.select(b.icmp_signed("==", fmt, i64(S_IFREG)), i64(1),
                    b.select(b.icmp_signed("==", fmt, i64(S_IFDIR)), i64(2),
                             b.select(b.icmp_signed("==", fmt, i64(S_IFLNK)), i64(3), i64(4))))


def _stat_beneath(self, args) -> tuple[ir.Value, ir.Value, ir.Value]:
    """`fstatat(dir, name, AT_SYMLINK_NOFOLLOW)` on one checked name: (result, reason, buffer)."""
    t = os_table()
    st = words(self, t.stat_words, "stat")
    fd = fd32(self, args[0], True)
    result, reason = name_checked_call(
        self, [args[1]], lambda n: c(self, "fstatat", [fd, n[0], self.b.bitcast(st, PTR), i32(AT_SYMLINK_NOFOLLOW)]))
    return result, reason, st


@LOWERINGS.register("dir_stat")
def bi_dir_stat(self, e, args):
    """`Ok(kind, size, mtime)`, never following a link (a link answers kind 3, its own size)."""
    t = os_table()
    b = self.b
    result, reason, st = _stat_beneath(self, args)
    failed = b.icmp_signed("<", result, i64(0))
    mode = _stat_field(self, st, t.st_mode, I32)
    size = _stat_field(self, st, t.st_size, I64)
    mtime = _stat_field(self, st, t.st_mtime, I64)
    zero = i64(0)
    return answer(self, e, b.select(failed, i64(1), zero),
                  [b.select(failed, reason, _kind_of_mode(self, mode)), b.select(failed, zero, size),
                   b.select(failed, zero, mtime)])


def _mode_answer(self, e, result, reason, st) -> ir.Value:
    t = os_table()
    b = self.b
    failed = b.icmp_signed("<", result, i64(0))
    bits = b.and_(_stat_field(self, st, t.st_mode, I32), i64(0o7777))
    return answer(self, e, b.select(failed, i64(1), i64(0)), [b.select(failed, reason, bits)])


@LOWERINGS.register("dir_mode")
def bi_dir_mode(self, e, args):
    """A name's permission bits (`st_mode & 0o7777`), a link's own."""
    result, reason, st = _stat_beneath(self, args)
    return _mode_answer(self, e, result, reason, st)


@LOWERINGS.register("dir_own_mode")
def bi_dir_own_mode(self, e, args):
    """The opened directory's own bits, by `fstat` on its descriptor."""
    t = os_table()
    st = words(self, t.stat_words, "stat")
    b = self.b
    r = b.sext(c(self, "fstat", [fd32(self, args[0], True), b.bitcast(st, PTR)]), I64)
    return _mode_answer(self, e, r, errno(self), st)
