"""Lowering what a program waits on: the poller (edition 5; `epoll`, level-triggered, its
program-visible surface `(token, events)` pairs, 1 readable and 2 writable, error and hang-up
read as readable) and signal claims (edition 6; `signalfd`). A claim is a `res` handle of one
i64 leaf, the descriptor with the claim's kernel mask in the high 32 bits; the claimed mask and
the number of running threads (`spawn`/`join` keep it, codegen/threads.py) live in one module
global, and a claim is refused while a thread runs, since that thread would still take the
signal. Built on the socket helpers of codegen/net.py (`Net`); a `Child` is watched through
the pidfd its leaf carries (codegen/process.py's layout).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir

from ..check.builtin_calls import CLAIMABLE_SIGNALS
from ..check.builtins import LOWERINGS
from .layout import I32, I64, PTR
from .net import (BATCH, EBUSY, EINVAL, EPOLL_CLOEXEC, EPOLL_CTL_ADD, EPOLL_CTL_DEL, EPOLL_CTL_MOD,
                  EPOLL_EVENT, EPOLLERR, EPOLLHUP, EPOLLIN, EPOLLOUT, READABLE, SFD_FLAGS, SIG_BLOCK,
                  SIG_UNBLOCK, SIGNAL_RECORDS, SIGNALFD_RECORD, WRITABLE, Net, c32, c64, net, state_global)
from .oscalls import CHILD_PIDFD_SHIFT, SIGNALS

if TYPE_CHECKING:
    from .builtins import BuiltinLowering

# The signals a program may claim, with the bit `signals_pending` answers (std.signals) and the
# Linux number (oscalls.SIGNALS, the one table).
SIGNAL_BITS = {name: SIGNALS[name][0] for name in CLAIMABLE_SIGNALS}
SIGNAL_NUMBERS = {name: SIGNALS[name][1] for name in CLAIMABLE_SIGNALS}


def signal_state(module: ir.Module) -> ir.GlobalVariable:
    """The signal claim's state; word 1 is the running-thread count `spawn`/`join` keep."""
    return state_global(module, "lexs_signal_state", 2)


# ---------------------------------------------------------------- the poller


@LOWERINGS.register("poller_new")
def bi_poller_new(self: "BuiltinLowering", e, args):
    n = net(self)
    fd = self.b.sext(n.c("epoll_create1", [c32(EPOLL_CLOEXEC)]), I64)
    return n.opened(e, fd, n.errno())


def poller_ctl(n: Net, poller: ir.Value, fd: ir.Value, op: int, token: ir.Value, events: ir.Value) -> ir.Value:
    """`epoll_ctl` with the events the program named (1 readable, 2 writable): 0, or the errno."""
    b = n.b
    size, data_at = EPOLL_EVENT
    ev = n.buffer(16)
    rd = b.icmp_unsigned("!=", b.and_(events, c64(READABLE)), c64(0))
    wr = b.icmp_unsigned("!=", b.and_(events, c64(WRITABLE)), c64(0))
    mask = b.or_(b.select(rd, c32(EPOLLIN), c32(0)), b.select(wr, c32(EPOLLOUT), c32(0)))
    n.store_at(ev, 0, mask)
    n.store_at(ev, data_at, token)
    return n.zero_or_errno(n.c("epoll_ctl", [poller, c32(op), fd, ev]))


@LOWERINGS.register("poller_add_listener", "poller_add_child", "poller_add_signals")
def bi_poller_add_readable(self: "BuiltinLowering", e, args):
    """Watch a listener (for connections), a child (its pidfd: readable once it exits) or a
    signal claim (readable while a claimed signal is queued) under `token`."""
    n, b = net(self), self.b
    if e.callee.name == "poller_add_child":
        fd = b.trunc(b.lshr(b.load(args[1], typ=I64), c64(CHILD_PIDFD_SHIFT)), I32)
    else:
        fd = n.handle_fd(args[1])
    return poller_ctl(n, n.handle_fd(args[0]), fd, EPOLL_CTL_ADD, args[2], c64(READABLE))


@LOWERINGS.register("poller_add_conn", "poller_add_udp", "poller_add_pipe", "poller_modify")
def bi_poller_add(self: "BuiltinLowering", e, args):
    n = net(self)
    op = EPOLL_CTL_MOD if e.callee.name == "poller_modify" else EPOLL_CTL_ADD
    return poller_ctl(n, n.handle_fd(args[0]), n.handle_fd(args[1]), op, args[2], args[3])


@LOWERINGS.register("poller_remove")
def bi_poller_remove(self: "BuiltinLowering", e, args):
    n = net(self)
    ev = n.buffer(16)
    return n.zero_or_errno(n.c("epoll_ctl", [n.handle_fd(args[0]), c32(EPOLL_CTL_DEL), n.handle_fd(args[1]), ev]))


@LOWERINGS.register("poller_wait")
def bi_poller_wait(self: "BuiltinLowering", e, args):
    """Wait (a negative timeout: for ever), then write `(token, events)` pairs into the slice, at
    most BATCH and at most as many as fit: how many, -errno, or -EINVAL for a slice too short
    for one pair."""
    n, b = net(self), self.b
    size, data_at = EPOLL_EVENT
    out, room = b.extract_value(args[1], 0), b.extract_value(args[1], 1)
    pairs = b.udiv(room, c64(2))
    most = b.select(b.icmp_unsigned("<", pairs, c64(BATCH)), pairs, c64(BATCH))
    events = n.buffer(size * BATCH)
    answer = n.cell(c64(-EINVAL))
    index = n.cell(c64(0))
    call, done = n.block("wait.call"), n.block("wait.done")
    b.cbranch(b.icmp_unsigned("==", most, c64(0)), done, call)
    b.position_at_end(call)
    got = n.c("epoll_wait", [n.handle_fd(args[0]), events, b.trunc(most, I32), b.trunc(args[2], I32)])
    reason = n.errno()
    failed, head = n.block("wait.failed"), n.block("wait.head")
    b.cbranch(b.icmp_signed("<", got, c32(0)), failed, head)
    b.position_at_end(failed)
    b.store(b.neg(reason), answer)
    b.branch(done)
    b.position_at_end(head)
    count = b.sext(got, I64)
    i = b.load(index, typ=I64)
    body, finished = n.block("wait.body"), n.block("wait.finished")
    b.cbranch(b.icmp_signed("<", i, count), body, finished)
    b.position_at_end(body)
    entry = n.at(events, b.mul(i, c64(size)))
    mask = n.load_at(entry, 0, I32)
    token = n.load_at(entry, data_at, I64)
    rd = b.icmp_unsigned("!=", b.and_(mask, c32(EPOLLIN | EPOLLERR | EPOLLHUP)), c32(0))
    wr = b.icmp_unsigned("!=", b.and_(mask, c32(EPOLLOUT)), c32(0))
    ev = b.or_(n.sel(rd, READABLE, 0), n.sel(wr, WRITABLE, 0))
    slot = b.mul(i, c64(2))
    b.store(token, b.gep(out, [slot], inbounds=True, source_etype=I64))
    b.store(ev, b.gep(out, [b.add(slot, c64(1))], inbounds=True, source_etype=I64))
    b.store(b.add(i, c64(1)), index)
    b.branch(head)
    b.position_at_end(finished)
    b.store(count, answer)
    b.branch(done)
    b.position_at_end(done)
    return b.load(answer, typ=I64)


# ---------------------------------------------------------------- signals (edition 6)


def native_mask(names: str) -> int:
    """The kernel mask (bit n-1 for signal n) of a checked signal-set literal."""
    mask = 0
    for name in names.split(","):
        mask |= 1 << (SIGNAL_NUMBERS[name] - 1)
    return mask


def sigset(n: Net, native: ir.Value) -> ir.Value:
    """A 128-byte sigset_t holding `native` in its first word."""
    s = n.buffer(128)
    for off in range(8, 128, 8):
        n.store_at(s, off, c64(0))
    n.store_at(s, 0, native)
    return s


@LOWERINGS.register("signals_watch")
def bi_signals_watch(self: "BuiltinLowering", e, args):
    """Claim the capability's signals: block them and read them through a signalfd. Refused
    with EBUSY (and nothing changed) while another claim holds one of them or a spawned thread
    runs (it would not have them blocked). `Watching`: `Ok(handle)` 0, `Failed(errno)` 1."""
    n, b = net(self), self.b
    native = native_mask(n.literal(e))
    state = signal_state(self.ml.module)
    claimed_at = b.gep(state, [c64(0), c64(0)], inbounds=True)
    threads_at = b.gep(state, [c64(0), c64(1)], inbounds=True)
    claimed = b.load(claimed_at, typ=I64)
    busy = b.or_(b.icmp_unsigned("!=", b.and_(claimed, c64(native)), c64(0)),
                 b.icmp_unsigned("!=", b.load(threads_at, typ=I64), c64(0)))
    tag, value = n.cell(c64(1)), n.cell(c64(EBUSY))
    grant, done = n.block("watch.grant"), n.block("watch.done")
    b.cbranch(busy, done, grant)
    b.position_at_end(grant)
    s = sigset(n, c64(native))
    n.c("pthread_sigmask", [c32(SIG_BLOCK), s, ir.Constant(PTR, None)])
    fd = n.c("signalfd", [c32(-1), s, c32(SFD_FLAGS)])
    reason = n.errno()
    ok, bad = n.block("watch.ok"), n.block("watch.bad")
    b.cbranch(b.icmp_signed("<", fd, c32(0)), bad, ok)
    b.position_at_end(bad)
    n.c("pthread_sigmask", [c32(SIG_UNBLOCK), s, ir.Constant(PTR, None)])
    b.store(reason, value)
    b.branch(done)
    b.position_at_end(ok)
    b.store(b.or_(claimed, c64(native)), claimed_at)
    b.store(c64(0), tag)
    b.store(b.or_(c64(native << 32), b.zext(fd, I64)), value)
    b.branch(done)
    b.position_at_end(done)
    return n.variant(e, b.load(tag, typ=I64), b.load(value, typ=I64))


@LOWERINGS.register("signals_pending")
def bi_signals_pending(self: "BuiltinLowering", e, args):
    """The std.signals bits of the claimed signals queued since the last call, taken off the
    queue. Never waits (the signalfd is non-blocking)."""
    n, b = net(self), self.b
    buf = n.buffer(SIGNALFD_RECORD * SIGNAL_RECORDS)
    got = n.c("read", [b.sext(n.handle_fd(args[0]), I64), buf, c64(SIGNALFD_RECORD * SIGNAL_RECORDS)])
    count = b.sdiv(got, c64(SIGNALFD_RECORD))  # -1 (nothing queued) is no record
    index, seen = n.cell(c64(0)), n.cell(c64(0))
    head, body, done = n.block("pending.head"), n.block("pending.body"), n.block("pending.done")
    b.branch(head)
    b.position_at_end(head)
    i = b.load(index, typ=I64)
    b.cbranch(b.icmp_signed("<", i, count), body, done)
    b.position_at_end(body)
    number = b.zext(n.load_at(buf, b.mul(i, c64(SIGNALFD_RECORD)), I32), I64)
    below = b.sub(number, c64(1))
    in_range = b.icmp_unsigned("<", below, c64(31))
    bit = b.select(in_range, b.shl(c64(1), b.select(in_range, below, c64(0))), c64(0))
    b.store(b.or_(b.load(seen, typ=I64), bit), seen)
    b.store(b.add(i, c64(1)), index)
    b.branch(head)
    b.position_at_end(done)
    native = b.load(seen, typ=I64)
    bits: ir.Value = c64(0)
    for name, number in SIGNAL_NUMBERS.items():
        on = b.icmp_unsigned("!=", b.and_(native, c64(1 << (number - 1))), c64(0))
        bits = b.or_(bits, n.sel(on, SIGNAL_BITS[name], 0))
    return bits


@LOWERINGS.register("signals_close")
def bi_signals_close(self: "BuiltinLowering", e, args):
    """End the claim: unblock its signals (one still queued is delivered now, with the default
    action), close the descriptor, and free the signals for another claim. `close`'s answer."""
    n, b = net(self), self.b
    native = b.lshr(args[0], c64(32))
    n.c("pthread_sigmask", [c32(SIG_UNBLOCK), sigset(n, native), ir.Constant(PTR, None)])
    answer = b.sext(n.c("close", [b.and_(args[0], c64(0xFFFFFFFF))]), I64)
    claimed_at = b.gep(signal_state(self.ml.module), [c64(0), c64(0)], inbounds=True)
    b.store(b.and_(b.load(claimed_at, typ=I64), b.not_(native)), claimed_at)
    return answer
