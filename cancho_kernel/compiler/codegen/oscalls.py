"""The operating system's side of file, directory and process handles: the C functions they
call (declared here, apart from runtime.py's console set), the per-target constants, and the
few shapes every such lowering shares (errno, a `Done`-style answer, a checked name).

Linux only (x86-64 and AArch64, where the open flags and `struct stat` offsets differ); a target
this table does not know is refused when a program uses one of these builtins, never guessed.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Sequence

from llvmlite import ir

from .layout import I8, I32, I64, PTR

if TYPE_CHECKING:
    from .builtins import BuiltinLowering

VOID = ir.VoidType()
I16 = ir.IntType(16)

# Every C function these lowerings call, with the type each call site uses. `openat`, `fcntl`
# and `syscall` are variadic and are declared (and called) as such.
C_FUNCTIONS: dict[str, ir.FunctionType] = {
    "openat": ir.FunctionType(I32, [I32, PTR, I32], var_arg=True),
    "fcntl": ir.FunctionType(I32, [I32, I32], var_arg=True),
    "syscall": ir.FunctionType(I64, [I64], var_arg=True),
    "__errno_location": ir.FunctionType(PTR, []),
    "write": ir.FunctionType(I64, [I32, PTR, I64]),
    "read": ir.FunctionType(I64, [I32, PTR, I64]),
    "pwrite": ir.FunctionType(I64, [I32, PTR, I64, I64]),
    "pread": ir.FunctionType(I64, [I32, PTR, I64, I64]),
    "send": ir.FunctionType(I64, [I32, PTR, I64, I32]),
    "fsync": ir.FunctionType(I32, [I32]),
    "ftruncate": ir.FunctionType(I32, [I32, I64]),
    "lseek": ir.FunctionType(I64, [I32, I64, I32]),
    "flock": ir.FunctionType(I32, [I32, I32]),
    "renameat": ir.FunctionType(I32, [I32, PTR, I32, PTR]),
    "renameat2": ir.FunctionType(I32, [I32, PTR, I32, PTR, I32]),
    "unlinkat": ir.FunctionType(I32, [I32, PTR, I32]),
    "fstatat": ir.FunctionType(I32, [I32, PTR, PTR, I32]),
    "fstat": ir.FunctionType(I32, [I32, PTR]),
    "fdopendir": ir.FunctionType(PTR, [I32]),
    "readdir": ir.FunctionType(PTR, [PTR]),
    "closedir": ir.FunctionType(I32, [PTR]),
    "close32": ir.FunctionType(I32, [I32]),
    "strlen": ir.FunctionType(I64, [PTR]),
    "strncmp": ir.FunctionType(I32, [PTR, PTR, I64]),
    "memchr": ir.FunctionType(PTR, [PTR, I32, I64]),
    "memmove": ir.FunctionType(PTR, [PTR, PTR, I64]),
    "malloc": ir.FunctionType(PTR, [I64]),
    "free": ir.FunctionType(VOID, [PTR]),
    "socketpair": ir.FunctionType(I32, [I32, I32, I32, PTR]),
    "kill": ir.FunctionType(I32, [I32, I32]),
    "waitpid": ir.FunctionType(I32, [I32, PTR, I32]),
    "sigemptyset": ir.FunctionType(I32, [PTR]),
    "sigfillset": ir.FunctionType(I32, [PTR]),
    "posix_spawn": ir.FunctionType(I32, [PTR, PTR, PTR, PTR, PTR, PTR]),
    "posix_spawn_file_actions_init": ir.FunctionType(I32, [PTR]),
    "posix_spawn_file_actions_destroy": ir.FunctionType(I32, [PTR]),
    "posix_spawn_file_actions_addopen": ir.FunctionType(I32, [PTR, I32, PTR, I32, I32]),
    "posix_spawn_file_actions_adddup2": ir.FunctionType(I32, [PTR, I32, I32]),
    "posix_spawn_file_actions_addfchdir_np": ir.FunctionType(I32, [PTR, I32]),
    "posix_spawn_file_actions_addclosefrom_np": ir.FunctionType(I32, [PTR, I32]),
    "posix_spawnattr_init": ir.FunctionType(I32, [PTR]),
    "posix_spawnattr_destroy": ir.FunctionType(I32, [PTR]),
    "posix_spawnattr_setsigmask": ir.FunctionType(I32, [PTR, PTR]),
    "posix_spawnattr_setsigdefault": ir.FunctionType(I32, [PTR, PTR]),
    "posix_spawnattr_setflags": ir.FunctionType(I32, [PTR, I16]),
}
# C symbols whose name differs from the table's key (one symbol, a second call type).
SYMBOL = {"close32": "close"}

EINVAL = 22
EAGAIN = 11
EINTR = 4
ENAMETOOLONG = 36
# What `dir_rename_new` answers where the file system has no no-replace rename (the kernel's
# own `EINVAL` for the flag), so that it is not confused with a refused name (`EINVAL`).
EOPNOTSUPP = 95
NAME_MAX = 255
AT_FDCWD = -100
AT_SYMLINK_NOFOLLOW = 0x100
RENAME_NOREPLACE = 1
LOCK_EX, LOCK_NB = 2, 4
SEEK_CUR, SEEK_END = 1, 2
F_GETFL, F_SETFL = 3, 4
O_NONBLOCK = 0o4000
AF_UNIX, SOCK_STREAM, SOCK_CLOEXEC = 1, 1, 0o2000000
MSG_NOSIGNAL = 0x4000
SYS_PIDFD_OPEN = 434
# `POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK`.
SPAWN_FLAGS = 0x4 | 0x8
SPAWN_OBJECT_WORDS = 64  # 512 bytes: glibc's file actions are 80, its attributes 336
SIGSET_WORDS = 16        # 128 bytes: glibc's sigset_t
# A `Child` is one word: the pid in the low half and its pidfd (or -1) in the high half.
CHILD_PIDFD_SHIFT = 32
# The one table of signals by name: (std.signals bit, Linux number). A program claims the first
# eight (`signals_watch`, codegen/poller.py); `child_kill` sends and `child_wait` reports all nine.
SIGNALS: dict[str, tuple[int, int]] = {"HUP": (1, 1), "INT": (2, 2), "QUIT": (4, 3), "TERM": (8, 15),
                                       "USR1": (16, 10), "USR2": (32, 12), "ALRM": (64, 14),
                                       "WINCH": (128, 28), "KILL": (256, 9)}
SIGNAL_BITS: tuple[tuple[int, int], ...] = tuple(SIGNALS.values())


@dataclass(frozen=True)
class OsTable:
    """The open flags and `struct stat` offsets of one target."""

    o_wronly: int = 0o1
    o_rdwr: int = 0o2
    o_creat: int = 0o100
    o_excl: int = 0o200
    o_trunc: int = 0o1000
    o_append: int = 0o2000
    o_directory: int = 0o200000
    o_nofollow: int = 0o400000
    o_cloexec: int = 0o2000000
    stat_words: int = 18   # 144 bytes
    st_mode: int = 24
    st_size: int = 48
    st_mtime: int = 88
    d_type: int = 18
    d_name: int = 19


def os_table() -> OsTable:
    """This machine's table; refuse (rather than guess) a target it does not describe."""
    machine = platform.machine().lower()
    if platform.system() != "Linux":
        raise NotImplementedError("file, directory and process handles are measured on Linux only")
    if machine in ("x86_64", "amd64"):
        return OsTable()
    if machine in ("aarch64", "arm64"):
        return OsTable(o_directory=0o40000, o_nofollow=0o100000, stat_words=16, st_mode=16)
    raise NotImplementedError(f"file, directory and process handles are not measured on {machine}")


def c(low: "BuiltinLowering", name: str, args: Sequence[ir.Value]) -> ir.Value:
    """Call the C function `name` with this table's type for it."""
    return low.rt.call_c(low.b, SYMBOL.get(name, name), C_FUNCTIONS[name], list(args))


def i32(n: int) -> ir.Constant:
    return ir.Constant(I32, n)


def i64(n: int) -> ir.Constant:
    return ir.Constant(I64, n)


def errno(low: "BuiltinLowering") -> ir.Value:
    """The calling thread's `errno`, widened."""
    return low.b.sext(low.b.load(c(low, "__errno_location", []), typ=I32), I64)


def fd32(low: "BuiltinLowering", handle: ir.Value, borrowed: bool) -> ir.Value:
    """The descriptor of a handle: a borrowed one arrives as the address of its binding."""
    word = low.b.load(handle, typ=I64) if borrowed else handle
    return low.b.trunc(word, I32)


def words(low: "BuiltinLowering", count: int, name: str) -> ir.Value:
    """A stack cell of `count` 64-bit words in the function's entry block."""
    return low.alloca_builder.alloca(ir.ArrayType(I64, count), name=name)


def answer(low: "BuiltinLowering", e, tag: ir.Value, payload: Sequence[ir.Value]) -> ir.Value:
    """The call's result enum with a run-time tag; `payload` fills the first variant's shape,
    whose leading words every other variant's payload shares."""
    return low.gen.agg.make_variant(low.gen.ty(e), tag, list(payload))


def ok_or_failed(low: "BuiltinLowering", e, result: ir.Value, reason: ir.Value) -> ir.Value:
    """`Ok(result)` when `result` (i64) is not negative, else `Failed(reason)`: the shape of
    `Done`, `Opened`, `DirOpened`, `Listing` and `Spawned`."""
    b = low.b
    failed = b.icmp_signed("<", result, i64(0))
    return answer(low, e, b.select(failed, i64(1), i64(0)), [b.select(failed, reason, result)])


def name_checked_call(low: "BuiltinLowering", names: Sequence[ir.Value],
                      call: Callable[[list[ir.Value]], ir.Value]) -> tuple[ir.Value, ir.Value]:
    """Check each name as one path component (non-empty, at most NAME_MAX bytes, not `.` or
    `..`, no `/`, no NUL), copy it NUL-terminated onto the stack, then make `call` on the
    copies; `call` answers an i32 or i64, negative for a failure. A refused name answers
    (-1, EINVAL) and no call is made. Returns (result, reason) as i64."""
    b, func = low.b, low.func
    result = low.alloca_builder.alloca(I64, name="dir.result")
    reason = low.alloca_builder.alloca(I64, name="dir.reason")
    refused = func.append_basic_block("name.refused")
    merge = func.append_basic_block("name.merge")
    copies = []
    for name in names:
        ptr, length = b.extract_value(name, 0), b.extract_value(name, 1)
        copy = low.alloca_builder.alloca(ir.ArrayType(I8, NAME_MAX + 1), name="name.copy")
        body = func.append_basic_block("name.body")
        good = func.append_basic_block("name.good")
        bad = b.or_(b.icmp_signed("<=", length, i64(0)), b.icmp_signed(">", length, i64(NAME_MAX)))
        b.cbranch(bad, refused, body)
        b.position_at_end(body)
        slash = b.icmp_unsigned("!=", c(low, "memchr", [ptr, i32(ord("/")), length]), ir.Constant(PTR, None))
        nul = b.icmp_unsigned("!=", c(low, "memchr", [ptr, i32(0), length]), ir.Constant(PTR, None))
        first = b.icmp_unsigned("==", b.load(ptr, typ=I8), ir.Constant(I8, ord(".")))
        # The second byte is read only when there is one (index 1 if the name is long enough).
        at = b.select(b.icmp_signed(">=", length, i64(2)), i64(1), i64(0))
        second = b.icmp_unsigned("==", b.load(b.gep(ptr, [at], source_etype=I8), typ=I8), ir.Constant(I8, ord(".")))
        dot = b.and_(first, b.icmp_signed("==", length, i64(1)))
        dotdot = b.and_(b.and_(first, second), b.icmp_signed("==", length, i64(2)))
        b.cbranch(b.or_(b.or_(slash, nul), b.or_(dot, dotdot)), refused, good)
        b.position_at_end(good)
        start = b.gep(copy, [i64(0), i64(0)])
        c(low, "memmove", [start, ptr, length])
        b.store(ir.Constant(I8, 0), b.gep(start, [length], source_etype=I8))
        copies.append(start)
    r = call(copies)
    why = errno(low)
    b.store(b.sext(r, I64) if r.type == I32 else r, result)
    b.store(why, reason)
    b.branch(merge)
    b.position_at_end(refused)
    b.store(i64(-1), result)
    b.store(i64(EINVAL), reason)
    b.branch(merge)
    b.position_at_end(merge)
    return b.load(result, typ=I64), b.load(reason, typ=I64)
