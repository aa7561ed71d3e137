"""Lowering processes (edition 7): channels (`pipe_open` and the `Pipe` verbs), starting a
program (`exec_spawn`, `exec_spawn_in`, by `posix_spawn`), waiting for and signalling a child.

Handles: a `Pipe` and a `ChildEnd` are descriptors (i64) of the two ends of an `AF_UNIX` socket
pair, so a write to a reader that has gone answers `EPIPE` (`MSG_NOSIGNAL`) instead of raising
`SIGPIPE`. A `Child` is one word: the pid in the low 32 bits and a pidfd for it
(`pidfd_open`, or -1 where refused) in the high 32, so a poller can wait for its exit beside
descriptors; `child_wait` reaps the pid and closes the pidfd.

The child gets exactly what the call names: its three streams, an environment that is exactly
`env`, every other descriptor closed, an empty signal mask and every signal at its default.
"""

from __future__ import annotations

from llvmlite import ir

from ..check.builtins import LOWERINGS
from ..trapsites import TrapKind
from ..check.types import Ref
from .layout import I8, I32, I64, PTR
from .oscalls import (I16, AF_UNIX, CHILD_PIDFD_SHIFT, EAGAIN, EINTR, EINVAL, F_GETFL, F_SETFL, MSG_NOSIGNAL,
                      O_NONBLOCK, SIGNAL_BITS, SIGSET_WORDS, SOCK_CLOEXEC, SOCK_STREAM, SPAWN_FLAGS,
                      SPAWN_OBJECT_WORDS, SYS_PIDFD_OPEN, answer, c, errno, fd32, i32, i64, os_table, words)

LOADER_PREFIXES = (b"LD_", b"DYLD_")


# ------------------------------------------------------------ channels


@LOWERINGS.register("pipe_open")
def bi_pipe_open(self, e, args):
    """`Ok(parent's end, child's end)` of a close-on-exec socket pair, or `Failed(errno)`."""
    b = self.b
    pair = self.alloca_builder.alloca(ir.ArrayType(I32, 2), name="pair")
    r = c(self, "socketpair", [i32(AF_UNIX), i32(SOCK_STREAM | SOCK_CLOEXEC), i32(0), b.bitcast(pair, PTR)])
    why = errno(self)
    parent = b.sext(b.load(b.gep(pair, [i64(0), i64(0)]), typ=I32), I64)
    child = b.sext(b.load(b.gep(pair, [i64(0), i64(1)]), typ=I32), I64)
    failed = b.icmp_signed("<", r, i32(0))
    return answer(self, e, b.select(failed, i64(1), i64(0)), [b.select(failed, why, parent), child])


@LOWERINGS.register("pipe_read")
def bi_pipe_read(self, e, args):
    """`Data(n)`, `End` at the peer's close, `Again` when non-blocking and empty, `Failed`. An
    empty buffer is `Failed(EINVAL)` and never reaches the kernel: a blocking read of nothing
    would wait, then answer a zero that reads as the peer closing (the socket handles' rule)."""
    b, func = self.b, self.func
    room = b.extract_value(args[1], 1)
    moved = self.alloca_builder.alloca(I64, name="pipe_read.n")
    reason = self.alloca_builder.alloca(I64, name="pipe_read.errno")
    b.store(i64(-1), moved)
    b.store(i64(EINVAL), reason)
    receive = func.append_basic_block("pipe_read.call")
    merge = func.append_basic_block("pipe_read.done")
    b.cbranch(b.icmp_signed("==", room, i64(0)), merge, receive)
    b.position_at_end(receive)
    got = c(self, "read", [fd32(self, args[0], True), b.extract_value(args[1], 0), room])
    b.store(errno(self), reason)
    b.store(got, moved)
    b.branch(merge)
    b.position_at_end(merge)
    n, why = b.load(moved, typ=I64), b.load(reason, typ=I64)
    failed = b.icmp_signed("<", n, i64(0))
    again = b.and_(failed, b.icmp_signed("==", why, i64(EAGAIN)))
    tag = b.select(b.icmp_signed(">", n, i64(0)), i64(0),
                   b.select(b.icmp_signed("==", n, i64(0)), i64(1), b.select(again, i64(2), i64(3))))
    return answer(self, e, tag, [b.select(failed, why, n)])


@LOWERINGS.register("pipe_write")
def bi_pipe_write(self, e, args):
    """`Wrote(n)` (one `send`, which may take fewer bytes), `Again`, or `Failed` (`EPIPE` when the
    reader has gone, with no signal)."""
    b = self.b
    n = c(self, "send", [fd32(self, args[0], True), b.extract_value(args[1], 0), b.extract_value(args[1], 1),
                         i32(MSG_NOSIGNAL)])
    why = errno(self)
    failed = b.icmp_signed("<", n, i64(0))
    again = b.and_(failed, b.icmp_signed("==", why, i64(EAGAIN)))
    tag = b.select(failed, b.select(again, i64(1), i64(2)), i64(0))
    return answer(self, e, tag, [b.select(failed, why, n)])


@LOWERINGS.register("pipe_nonblocking")
def bi_pipe_nonblocking(self, e, args):
    """Set `O_NONBLOCK`: 0, or the errno."""
    b = self.b
    fd = fd32(self, args[0], True)
    flags = c(self, "fcntl", [fd, i32(F_GETFL)])
    r = c(self, "fcntl", [fd, i32(F_SETFL), b.or_(flags, i32(O_NONBLOCK))])
    why = errno(self)
    failed = b.or_(b.icmp_signed("<", flags, i32(0)), b.icmp_signed("<", r, i32(0)))
    return b.select(failed, why, i64(0))


@LOWERINGS.register("pipe_close", "child_end_close")
def bi_pipe_close(self, e, args):
    return self.b.sext(c(self, "close32", [fd32(self, args[0], False)]), I64)


# ------------------------------------------------------------ starting a program


def _pointer_list(self, text: ir.Value, first: ir.Value | None, environment: bool) -> ir.Value:
    """A NUL-separated list as a malloc'd, NULL-ended array of pointers into it, `first` ahead
    when given. A list that is not empty and does not end in NUL traps; so does an environment
    entry naming a loader variable (`LD_*`, `DYLD_*`)."""
    b, func = self.b, self.func
    base, length = b.extract_value(text, 0), b.extract_value(text, 1)
    zero = i64(0)
    last = b.gep(base, [b.select(b.icmp_signed(">", length, zero), b.sub(length, i64(1)), zero)],
                 source_etype=I8)
    nonempty = b.icmp_signed(">", length, zero)
    # Read the last byte only when there is one.
    check = func.append_basic_block("list.check")
    checked = func.append_basic_block("list.checked")
    b.cbranch(nonempty, check, checked)
    b.position_at_end(check)
    self.gen.trap_if(b.icmp_unsigned("!=", b.load(last, typ=I8), ir.Constant(I8, 0)), TrapKind.CHECK)
    b.branch(checked)
    b.position_at_end(checked)
    # Each entry holds at least its NUL, so `length` entries is a bound; +2 for `first` and NULL.
    slots = b.add(length, i64(2))
    array = self._malloc_checked(b.mul(slots, i64(8)))
    index = self.alloca_builder.alloca(I64, name="list.index")
    cursor = self.alloca_builder.alloca(PTR, name="list.cursor")
    lead = 0
    if first is not None:
        b.store(first, array)
        lead = 1
    b.store(i64(lead), index)
    b.store(base, cursor)
    end_int = b.add(b.ptrtoint(base, I64), length)
    head = func.append_basic_block("list.head")
    body = func.append_basic_block("list.body")
    done = func.append_basic_block("list.done")
    b.branch(head)
    b.position_at_end(head)
    at = b.load(cursor, typ=PTR)
    b.cbranch(b.icmp_unsigned("<", b.ptrtoint(at, I64), end_int), body, done)
    b.position_at_end(body)
    if environment:
        for name in LOADER_PREFIXES:
            lit = self.ml.string(name)
            same = c(self, "strncmp", [at, b.extract_value(lit, 0), i64(len(name))])
            self.gen.trap_if(b.icmp_signed("==", same, i32(0)), TrapKind.CHECK)
    i = b.load(index, typ=I64)
    b.store(at, b.gep(array, [i], source_etype=PTR))
    nul = c(self, "memchr", [at, i32(0), b.sub(end_int, b.ptrtoint(at, I64))])
    b.store(b.gep(nul, [i64(1)], source_etype=I8), cursor)
    b.store(b.add(i, i64(1)), index)
    b.branch(head)
    b.position_at_end(done)
    b.store(ir.Constant(PTR, None), b.gep(array, [b.load(index, typ=I64)], source_etype=PTR))
    return array


def _stream_fd(self, stdio: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(is it `Null`, the descriptor it holds otherwise) of a `Stdio` value."""
    b = self.b
    tag = b.extract_value(stdio, 0)
    word = b.extract_value(stdio, [1, 0])
    return b.icmp_signed("==", tag, i64(0)), b.trunc(word, I32)


def _spawn(self, e, args, in_dir: bool):
    b, func = self.b, self.func
    at = 2 if in_dir else 1
    path, arg_text, env_text = args[at], args[at + 1], args[at + 2]
    streams = args[at + 3:at + 6]
    cap = self.gen.ty(e.args[0])
    prefix = (cap.target.literal if isinstance(cap, Ref) else None) or ""
    program = self.prefixed_cstring(prefix, path)
    argv = _pointer_list(self, arg_text, program, False)
    envp = _pointer_list(self, env_text, None, True)

    actions = words(self, SPAWN_OBJECT_WORDS, "spawn.actions")
    attrs = words(self, SPAWN_OBJECT_WORDS, "spawn.attrs")
    ap, tp = b.bitcast(actions, PTR), b.bitcast(attrs, PTR)
    c(self, "posix_spawn_file_actions_init", [ap])
    null_device = self.ml.string(b"/dev/null\0")
    os_t = os_table()
    for target, stdio in enumerate(streams):
        is_null, fd = _stream_fd(self, stdio)
        opened = func.append_basic_block("stdio.null")
        given = func.append_basic_block("stdio.given")
        nxt = func.append_basic_block("stdio.next")
        b.cbranch(is_null, opened, given)
        b.position_at_end(opened)
        c(self, "posix_spawn_file_actions_addopen", [ap, i32(target), b.extract_value(null_device, 0),
                                                      i32(os_t.o_rdwr), i32(0)])
        b.branch(nxt)
        b.position_at_end(given)
        c(self, "posix_spawn_file_actions_adddup2", [ap, fd, i32(target)])
        b.branch(nxt)
        b.position_at_end(nxt)
    if in_dir:
        # Before `addclosefrom`, which would close the directory's descriptor first.
        refused = c(self, "posix_spawn_file_actions_addfchdir_np", [ap, fd32(self, args[1], True)])
        self.gen.trap_if(b.icmp_signed("!=", refused, i32(0)), TrapKind.CHECK)
    c(self, "posix_spawn_file_actions_addclosefrom_np", [ap, i32(3)])
    c(self, "posix_spawnattr_init", [tp])
    empty = words(self, SIGSET_WORDS, "sigset.empty")
    full = words(self, SIGSET_WORDS, "sigset.full")
    c(self, "sigemptyset", [b.bitcast(empty, PTR)])
    c(self, "posix_spawnattr_setsigmask", [tp, b.bitcast(empty, PTR)])
    c(self, "sigfillset", [b.bitcast(full, PTR)])
    c(self, "posix_spawnattr_setsigdefault", [tp, b.bitcast(full, PTR)])
    c(self, "posix_spawnattr_setflags", [tp, ir.Constant(I16, SPAWN_FLAGS)])
    pid_cell = self.alloca_builder.alloca(I32, name="spawn.pid")
    b.store(i32(0), pid_cell)
    error = c(self, "posix_spawn", [pid_cell, program, ap, tp, argv, envp])
    c(self, "posix_spawn_file_actions_destroy", [ap])
    c(self, "posix_spawnattr_destroy", [tp])
    for p in (argv, envp, program):
        self.rt.free(b, p)
    # What was handed to the child is the parent's no longer, started or not.
    for stdio in streams:
        is_null, fd = _stream_fd(self, stdio)
        close = func.append_basic_block("stdio.close")
        kept = func.append_basic_block("stdio.kept")
        b.cbranch(is_null, kept, close)
        b.position_at_end(close)
        c(self, "close32", [fd])
        b.branch(kept)
        b.position_at_end(kept)
    pid = b.load(pid_cell, typ=I32)
    failed = b.icmp_signed("!=", error, i32(0))
    word = _child_word(self, pid, failed)
    return answer(self, e, b.select(failed, i64(1), i64(0)), [b.select(failed, b.sext(error, I64), word)])


def _child_word(self, pid: ir.Value, failed: ir.Value) -> ir.Value:
    """pid | pidfd << 32, the pidfd opened only for a started child (-1 where refused)."""
    b, func = self.b, self.func
    cell = self.alloca_builder.alloca(I64, name="child.pidfd")
    b.store(i64(-1), cell)
    opening = func.append_basic_block("child.pidfd")
    done = func.append_basic_block("child.word")
    b.cbranch(failed, done, opening)
    b.position_at_end(opening)
    fd = c(self, "syscall", [i64(SYS_PIDFD_OPEN), b.sext(pid, I64), i64(0)])
    b.store(b.select(b.icmp_signed("<", fd, i64(0)), i64(-1), fd), cell)
    b.branch(done)
    b.position_at_end(done)
    high = b.shl(b.zext(b.trunc(b.load(cell, typ=I64), I32), I64), i64(CHILD_PIDFD_SHIFT))
    return b.or_(b.zext(pid, I64), high)


@LOWERINGS.register("exec_spawn")
def bi_exec_spawn(self, e, args):
    return _spawn(self, e, args, in_dir=False)


@LOWERINGS.register("exec_spawn_in")
def bi_exec_spawn_in(self, e, args):
    """`exec_spawn`, the child starting in the borrowed directory (`addfchdir_np`)."""
    return _spawn(self, e, args, in_dir=True)


# ------------------------------------------------------------ a child


def _bit_of_signal(self, number: ir.Value) -> ir.Value:
    b = self.b
    bit = i64(0)
    for wanted, native in SIGNAL_BITS:
        bit = b.select(b.icmp_signed("==", number, i64(native)), i64(wanted), bit)
    return bit


@LOWERINGS.register("child_wait")
def bi_child_wait(self, e, args):
    """`waitpid` on this child alone (again after `EINTR`): `Code(n)`, `Signaled(bit)` in
    std.signals' bits (0 for a signal with none), or `Failed(errno)`; then the pidfd is closed."""
    b, func = self.b, self.func
    word = args[0]
    pid = b.trunc(word, I32)
    status = self.alloca_builder.alloca(I32, name="wait.status")
    b.store(i32(0), status)
    again = func.append_basic_block("wait.again")
    after = func.append_basic_block("wait.after")
    b.branch(again)
    b.position_at_end(again)
    r = c(self, "waitpid", [pid, status, i32(0)])
    why = errno(self)
    failed = b.icmp_signed("<", r, i32(0))
    b.cbranch(b.and_(failed, b.icmp_signed("==", why, i64(EINTR))), again, after)
    b.position_at_end(after)
    c(self, "close32", [b.trunc(b.lshr(word, i64(CHILD_PIDFD_SHIFT)), I32)])
    st = b.zext(b.load(status, typ=I32), I64)
    signal = b.and_(st, i64(127))
    code = b.and_(b.lshr(st, i64(8)), i64(255))
    exited = b.icmp_signed("==", signal, i64(0))
    tag = b.select(failed, i64(2), b.select(exited, i64(0), i64(1)))
    payload = b.select(failed, why, b.select(exited, code, _bit_of_signal(self, signal)))
    return answer(self, e, tag, [payload])


@LOWERINGS.register("child_kill")
def bi_child_kill(self, e, args):
    """Send one signal named by its std.signals bit (or KILL, 256): 0 or the errno; any other
    number is `EINVAL` with no call. The child is unreaped, so its pid is still its own."""
    b, func = self.b, self.func
    pid = b.trunc(b.load(args[0], typ=I64), I32)
    native = i64(0)
    for wanted, number in SIGNAL_BITS:
        native = b.select(b.icmp_signed("==", args[1], i64(wanted)), i64(number), native)
    result = self.alloca_builder.alloca(I64, name="kill.result")
    b.store(i64(EINVAL), result)
    send = func.append_basic_block("kill.send")
    done = func.append_basic_block("kill.done")
    b.cbranch(b.icmp_signed("!=", native, i64(0)), send, done)
    b.position_at_end(send)
    r = c(self, "kill", [pid, b.trunc(native, I32)])
    why = errno(self)
    b.store(b.select(b.icmp_signed("<", r, i32(0)), why, i64(0)), result)
    b.branch(done)
    b.position_at_end(done)
    return b.load(result, typ=I64)
