"""Lowering the network (editions 2 and 5), Linux only; the poller and signal claims, which wait
on sockets among other things, are codegen/poller.py, built on the `Net` helpers here.

Sockets are `res` handles of one i64 leaf: the descriptor. Every verb answers a prelude result enum, an
`errno` or a count, never traps, except where the capability's literal bound is checked at run
time (the reference's `net.md` §4.1, `listen.md` §6): a port or a host outside the bound traps.

The reference's constants and contracts, restated: `Again` is its own constructor (EAGAIN), an
empty buffer is `Failed(EINVAL)` without reaching the kernel, writes never raise SIGPIPE
(`MSG_NOSIGNAL`), descriptors are close-on-exec, the poller is level-triggered `epoll` whose
program-visible surface is `(token, events)` pairs (1 readable, 2 writable; error and hang-up
read as readable), and a connection or datagram socket can become an inert ticket (an integer
checked against a per-descriptor epoch) and back, once.

Process state lives in module globals (`state_global`): the descriptor epochs and the ring of
datagram senders `udp_recv_from` tickets (and, in poller.py, the signal claim's).
"""

from __future__ import annotations

import platform
from typing import TYPE_CHECKING, Callable

from llvmlite import ir

from .. import ast
from ..check.builtins import LOWERINGS
from ..trapsites import TrapKind
from ..check.types import Cap, Ref
from .aggregates import as_ptr_to
from .layout import I8, I32, I64, PTR

if TYPE_CHECKING:
    from .builtins import BuiltinLowering

I16 = ir.IntType(16)
VOID = ir.VoidType()

# Linux x86-64 / aarch64 values (the same on both).
AF_INET, AF_INET6 = 2, 10
SOCK_STREAM, SOCK_DGRAM, SOCK_CLOEXEC = 1, 2, 0o2000000
SOL_SOCKET, SO_REUSEADDR, SO_ERROR, SO_REUSEPORT = 1, 2, 4, 15
IPPROTO_TCP, TCP_NODELAY = 6, 1
MSG_TRUNC, MSG_NOSIGNAL = 0x20, 0x4000
F_GETFL, F_SETFL, O_NONBLOCK = 3, 4, 0o4000
EBADF, EAGAIN, EBUSY, EINVAL, EINPROGRESS = 9, 11, 16, 22, 115
EPOLL_CTL_ADD, EPOLL_CTL_DEL, EPOLL_CTL_MOD = 1, 2, 3
EPOLLIN, EPOLLOUT, EPOLLERR, EPOLLHUP, EPOLL_CLOEXEC = 0x1, 0x4, 0x8, 0x10, 0o2000000
SIG_BLOCK, SIG_UNBLOCK = 0, 1
SFD_FLAGS = 0o4000 | 0o2000000  # SFD_NONBLOCK | SFD_CLOEXEC
READABLE, WRITABLE = 1, 2
BATCH = 64  # events one poller_wait reports at most
HOST_MAX = 256  # bytes of a host name, with its NUL
# struct addrinfo (glibc, LP64): ai_addrlen at 16, ai_addr at 24, ai_next at 40; 48 bytes.
AI_FAMILY, AI_SOCKTYPE, AI_ADDRLEN, AI_ADDR, ADDRINFO_SIZE = 4, 8, 16, 24, 48
# epoll_event: packed (12 bytes, data at 4) on x86-64, naturally aligned elsewhere.
EPOLL_EVENT = (12, 4) if platform.machine().lower() in ("x86_64", "amd64") else (16, 8)
SIGNALFD_RECORD, SIGNAL_RECORDS = 128, 8

# Tickets: the descriptor in the low 32 bits, its epoch (odd while a ticket is out) above; a
# datagram socket's ticket also carries UDP_KIND, so neither kind redeems the other's.
EPOCH_SLOTS = 16384
EPOCH_MASK = 0x3FFFFFFF
UDP_KIND = 1 << 62
# The ring of datagram senders: slot = ticket mod PEER_SLOTS; each entry is a sockaddr_in6-sized
# address, the ticket and the socket's descriptor; the last ticket issued follows the ring.
PEER_SLOTS, PEER_STRIDE, PEER_TICKET_AT, PEER_FD_AT = 256, 48, 32, 40


NET_LIBC: dict[str, ir.FunctionType] = {
    "socket": ir.FunctionType(I32, [I32, I32, I32]),
    "setsockopt": ir.FunctionType(I32, [I32, I32, I32, PTR, I32]),
    "getsockopt": ir.FunctionType(I32, [I32, I32, I32, PTR, PTR]),
    "bind": ir.FunctionType(I32, [I32, PTR, I32]),
    "listen": ir.FunctionType(I32, [I32, I32]),
    "accept": ir.FunctionType(I32, [I32, PTR, PTR]),
    "accept4": ir.FunctionType(I32, [I32, PTR, PTR, I32]),
    "connect": ir.FunctionType(I32, [I32, PTR, I32]),
    "getaddrinfo": ir.FunctionType(I32, [PTR, PTR, PTR, PTR]),
    "freeaddrinfo": ir.FunctionType(VOID, [PTR]),
    "recv": ir.FunctionType(I64, [I32, PTR, I64, I32]),
    "send": ir.FunctionType(I64, [I32, PTR, I64, I32]),
    "recvfrom": ir.FunctionType(I64, [I32, PTR, I64, I32, PTR, PTR]),
    "sendto": ir.FunctionType(I64, [I32, PTR, I64, I32, PTR, I32]),
    "getsockname": ir.FunctionType(I32, [I32, PTR, PTR]),
    "getpeername": ir.FunctionType(I32, [I32, PTR, PTR]),
    "fcntl": ir.FunctionType(I32, [I32, I32], var_arg=True),
    "close": ir.FunctionType(I32, [I64]),
    "read": ir.FunctionType(I64, [I64, PTR, I64]),
    "epoll_create1": ir.FunctionType(I32, [I32]),
    "epoll_ctl": ir.FunctionType(I32, [I32, I32, I32, PTR]),
    "epoll_wait": ir.FunctionType(I32, [I32, PTR, I32, I32]),
    "pthread_sigmask": ir.FunctionType(I32, [I32, PTR, PTR]),
    "signalfd": ir.FunctionType(I32, [I32, PTR, I32]),
    "__errno_location": ir.FunctionType(PTR, []),
}


def c64(n: int) -> ir.Constant:
    return ir.Constant(I64, n)


def c32(n: int) -> ir.Constant:
    return ir.Constant(I32, n)


def state_global(module: ir.Module, name: str, words: int) -> ir.GlobalVariable:
    """A zero-initialised array of `words` i64s shared by every function of the module: the
    epochs (`lexs_net_epochs`), the datagram senders (`lexs_net_peers`), the signal claim
    (`lexs_signal_state`: the claimed kernel mask, then the number of running threads)."""
    g = module.globals.get(name)
    if g is None:
        arr = ir.ArrayType(I64, words)
        g = ir.GlobalVariable(module, arr, name=name)
        g.linkage = "internal"
        g.initializer = ir.Constant(arr, None)
    return g


class Net:
    """The helpers every network lowering shares, over one `BuiltinLowering`."""

    def __init__(self, bl: "BuiltinLowering"):
        self.bl = bl
        self.b = bl.b

    # ------------------------------------------------------------ plumbing

    def c(self, name: str, args: list) -> ir.Value:
        return self.bl.rt.call_c(self.b, name, NET_LIBC[name], args)

    def errno(self) -> ir.Value:
        return self.b.sext(self.b.load(self.c("__errno_location", []), typ=I32), I64)

    def cell(self, init: ir.Value | None = None, t: ir.Type = I64) -> ir.Value:
        slot = self.bl.alloca_builder.alloca(t)
        if init is not None:
            self.b.store(init, slot)
        return slot

    def buffer(self, n: int) -> ir.Value:
        return self.bl.alloca_builder.alloca(ir.ArrayType(I8, n))

    def at(self, base: ir.Value, offset: ir.Value | int) -> ir.Value:
        """The byte at `base + offset` (an `i8` pointer)."""
        off = c64(offset) if isinstance(offset, int) else offset
        return self.b.gep(as_ptr_to(self.b, base, I8), [off], inbounds=False, source_etype=I8)

    def store_at(self, base: ir.Value, offset: int, value: ir.Value) -> None:
        self.b.store(value, as_ptr_to(self.b, self.at(base, offset), value.type), align=1)

    def load_at(self, base: ir.Value, offset: ir.Value | int, t: ir.Type) -> ir.Value:
        return self.b.load(as_ptr_to(self.b, self.at(base, offset), t), typ=t, align=1)

    def block(self, name: str) -> ir.Block:
        return self.bl.func.append_basic_block(name)

    def handle_fd(self, ref: ir.Value) -> ir.Value:
        """A borrowed handle's descriptor (the low 32 bits of its leaf)."""
        return self.b.trunc(self.b.load(ref, typ=I64), I32)

    def sel(self, cond: ir.Value, a: ir.Value | int, b: ir.Value | int) -> ir.Value:
        a = c64(a) if isinstance(a, int) else a
        b = c64(b) if isinstance(b, int) else b
        return self.b.select(cond, a, b)

    def variant(self, e: ast.Call, tag: ir.Value, payload: ir.Value) -> ir.Value:
        return self.bl.gen.agg.make_variant(self.bl.gen.ty(e), tag, [payload])

    def literal(self, e: ast.Call) -> str:
        """The literal of the capability the call's first argument borrows."""
        t = self.bl.gen.ty(e.args[0])
        assert isinstance(t, Ref) and isinstance(t.target, Cap), t
        return t.target.literal or ""

    def if_then(self, cond: ir.Value, name: str, body: Callable[[], None]) -> None:
        then, done = self.block(f"{name}.then"), self.block(f"{name}.done")
        self.b.cbranch(cond, then, done)
        self.b.position_at_end(then)
        body()
        self.b.branch(done)
        self.b.position_at_end(done)

    def int_option(self, fd: ir.Value, level: int, name: int) -> ir.Value:
        """`setsockopt(fd, level, name, &1, 4)`: 0, or -1 with errno."""
        one = self.cell(c32(1), I32)
        return self.c("setsockopt", [fd, c32(level), c32(name), one, c32(4)])

    def zero_or_errno(self, result: ir.Value) -> ir.Value:
        """A libc `int` answer turned into the builtin's: 0, or the errno."""
        reason = self.errno()
        return self.sel(self.b.icmp_signed("<", result, c32(0)), reason, 0)

    def set_nonblocking(self, fd: ir.Value) -> ir.Value:
        flags = self.c("fcntl", [fd, c32(F_GETFL)])
        return self.c("fcntl", [fd, c32(F_SETFL), self.b.or_(flags, c32(O_NONBLOCK))])

    # ------------------------------------------------------------ the bound

    def check_port(self, port: ir.Value, digits: str) -> None:
        """A bound's port half, read at compile time: none when empty, else the port the call must
        ask for (text that is not a number reads as -1, which no call asks for): trap otherwise."""
        if not digits:
            return
        try:
            expected = int(digits)
        except ValueError:
            expected = -1
        self.bl.gen.trap_if(self.b.icmp_signed("!=", port, c64(expected)), TrapKind.CHECK)

    def checked_host(self, bound: str, name: ir.Value) -> ir.Value:
        """The dialled name, checked against the bound's host half (it must begin with it, and be
        shorter than HOST_MAX: otherwise trap), as a NUL-terminated copy."""
        b = self.b
        ptr, length = b.extract_value(name, 0), b.extract_value(name, 1)
        self.bl.gen.trap_if(b.icmp_unsigned(">=", length, c64(HOST_MAX)), TrapKind.CHECK)
        if bound:
            data = bound.encode()
            self.bl.gen.trap_if(b.icmp_unsigned("<", length, c64(len(data))), TrapKind.CHECK)
            lit = self.bl.ml.string(data)
            same = self.bl.rt.call_c(b, "memcmp", ir.FunctionType(I32, [PTR, PTR, I64]),
                                     [ptr, b.extract_value(lit, 0), c64(len(data))])
            self.bl.gen.trap_if(b.icmp_signed("!=", same, c32(0)), TrapKind.CHECK)
        buf = self.buffer(HOST_MAX)
        self.bl.rt.call_c(b, "memmove", ir.FunctionType(PTR, [PTR, PTR, I64]), [buf, ptr, length])
        b.store(ir.Constant(I8, 0), self.at(buf, length))
        return buf

    # ------------------------------------------------------------ opening sockets

    def inet_any(self, port: ir.Value) -> ir.Value:
        """A sockaddr_in for every address of the host and `port`."""
        addr = self.buffer(16)
        for off in range(0, 16, 8):
            self.store_at(addr, off, c64(0))
        self.store_port(addr, port)
        self.store_at(addr, 0, ir.Constant(I16, AF_INET))
        return addr

    def store_port(self, addr: ir.Value, port: ir.Value) -> None:
        """The port, big-endian, at bytes 2-3 of a sockaddr_in (or _in6)."""
        b = self.b
        p32 = b.trunc(port, I32)
        self.store_at(addr, 2, b.trunc(b.lshr(p32, c32(8)), I8))
        self.store_at(addr, 3, b.trunc(p32, I8))

    def bound_socket(self, port: ir.Value, kind: int, backlog: ir.Value | None,
                     flags: ir.Value | None) -> tuple[ir.Value, ir.Value]:
        """`socket`, SO_REUSEADDR (and SO_REUSEPORT for bit 1 of `flags`), `bind` to every address
        at `port`, and `listen` for a stream socket: (descriptor or -1, errno or 0). Every failure
        reads errno before the `close` that would overwrite it."""
        b = self.b
        addr = self.inet_any(port)
        fd_cell, err_cell = self.cell(c64(-1)), self.cell(c64(0))
        fd = self.c("socket", [c32(AF_INET), c32(kind | SOCK_CLOEXEC), c32(0)])
        have, done = self.block("sock.have"), self.block("sock.done")
        b.store(self.errno(), err_cell)
        b.cbranch(b.icmp_signed("<", fd, c32(0)), done, have)
        b.position_at_end(have)
        b.store(c64(0), err_cell)
        self.int_option(fd, SOL_SOCKET, SO_REUSEADDR)
        if flags is not None:
            self.if_then(b.icmp_signed("!=", b.and_(flags, c64(1)), c64(0)), "sock.reuseport",
                         lambda: self.int_option(fd, SOL_SOCKET, SO_REUSEPORT))
        result = self.c("bind", [fd, addr, c32(16)])
        if backlog is not None:
            listening = self.block("sock.listen")
            failed = self.block("sock.failed")
            b.cbranch(b.icmp_signed("<", result, c32(0)), failed, listening)
            b.position_at_end(listening)
            result2 = self.c("listen", [fd, b.trunc(backlog, I32)])
            ok = self.block("sock.ok")
            b.cbranch(b.icmp_signed("<", result2, c32(0)), failed, ok)
        else:
            ok, failed = self.block("sock.ok"), self.block("sock.failed")
            b.cbranch(b.icmp_signed("<", result, c32(0)), failed, ok)
        b.position_at_end(failed)
        b.store(self.errno(), err_cell)
        self.c("close", [b.sext(fd, I64)])
        b.branch(done)
        b.position_at_end(ok)
        b.store(b.sext(fd, I64), fd_cell)
        b.branch(done)
        b.position_at_end(done)
        return b.load(fd_cell, typ=I64), b.load(err_cell, typ=I64)

    def dial(self, e: ast.Call, args: list, kind: int, start: bool) -> tuple[ir.Value, ir.Value]:
        """`connect`'s walk: check the port and the name against the bound, resolve the name with
        `getaddrinfo` (IPv4), patch the port in, open a socket and connect it. (descriptor or -1,
        errno; -1 when the name did not resolve). `start`: non-blocking before `connect`, and a
        connection still in progress counts as made."""
        b = self.b
        bound = self.literal(e)
        host_bound, _, digits = bound.rpartition(":") if ":" in bound else (bound, "", "")
        port = args[2]
        self.check_port(port, digits)
        host = self.checked_host(host_bound, args[1])
        hints = self.buffer(ADDRINFO_SIZE)
        for off in range(0, ADDRINFO_SIZE, 8):
            self.store_at(hints, off, c64(0))
        self.store_at(hints, AI_FAMILY, c32(AF_INET))
        self.store_at(hints, AI_SOCKTYPE, c32(kind))
        res_slot = self.cell(ir.Constant(PTR, None), PTR)
        fd_cell, err_cell = self.cell(c64(-1)), self.cell(c64(-1))
        rc = self.c("getaddrinfo", [host, ir.Constant(PTR, None), hints, res_slot])
        resolved, done = self.block("dial.resolved"), self.block("dial.done")
        b.cbranch(b.icmp_signed("!=", rc, c32(0)), done, resolved)
        b.position_at_end(resolved)
        res = b.load(res_slot, typ=PTR)
        addr = self.load_at(res, AI_ADDR, PTR)
        addrlen = self.load_at(res, AI_ADDRLEN, I32)
        self.store_port(addr, port)
        fd = self.c("socket", [c32(AF_INET), c32(kind | SOCK_CLOEXEC), c32(0)])
        have, nosock = self.block("dial.socket"), self.block("dial.nosocket")
        b.cbranch(b.icmp_signed("<", fd, c32(0)), nosock, have)
        b.position_at_end(nosock)
        b.store(self.errno(), err_cell)
        self.c("freeaddrinfo", [res])
        b.branch(done)
        b.position_at_end(have)
        if start:
            self.set_nonblocking(fd)
        result = self.c("connect", [fd, addr, addrlen])
        reason = self.errno()
        ok = b.icmp_signed("==", result, c32(0))
        if start:
            ok = b.or_(ok, b.icmp_signed("==", reason, c64(EINPROGRESS)))
        connected, refused = self.block("dial.connected"), self.block("dial.refused")
        b.cbranch(ok, connected, refused)
        b.position_at_end(refused)
        b.store(reason, err_cell)
        self.c("close", [b.sext(fd, I64)])
        self.c("freeaddrinfo", [res])
        b.branch(done)
        b.position_at_end(connected)
        self.c("freeaddrinfo", [res])
        b.store(b.sext(fd, I64), fd_cell)
        b.store(c64(0), err_cell)
        b.branch(done)
        b.position_at_end(done)
        return b.load(fd_cell, typ=I64), b.load(err_cell, typ=I64)

    def opened(self, e: ast.Call, fd: ir.Value, reason: ir.Value) -> ir.Value:
        """`Ok(handle)` (tag 0) or `Failed(errno)` (tag 1)."""
        failed = self.b.icmp_signed("<", fd, c64(0))
        return self.variant(e, self.sel(failed, 1, 0), self.sel(failed, reason, fd))

    # ------------------------------------------------------------ moving bytes

    def transfer_tag(self, moved: ir.Value, reason: ir.Value, again: int, failed: int,
                     ok: ir.Value) -> ir.Value:
        """The tag of a read's or write's answer: `ok` when `moved` is not negative, else `again`
        for EAGAIN and `failed` for anything else."""
        bad = self.sel(self.b.icmp_signed("==", reason, c64(EAGAIN)), again, failed)
        return self.b.select(self.b.icmp_signed("<", moved, c64(0)), bad, ok)

    def receive(self, fd: ir.Value, buf: ir.Value, flags: int) -> tuple[ir.Value, ir.Value]:
        """One `recv`, or -1 with EINVAL for an empty buffer (which never reaches the kernel: a
        blocking receive of nothing would wait): (count, errno)."""
        b = self.b
        ptr, room = b.extract_value(buf, 0), b.extract_value(buf, 1)
        moved, why = self.cell(c64(-1)), self.cell(c64(EINVAL))
        self.if_then(b.icmp_signed("!=", room, c64(0)), "recv", lambda: (
            b.store(self.c("recv", [fd, ptr, room, c32(flags)]), moved), b.store(self.errno(), why)))
        return b.load(moved, typ=I64), b.load(why, typ=I64)

    def sent(self, e: ast.Call, moved: ir.Value, reason: ir.Value) -> ir.Value:
        """`Sent`: `Wrote(n)` 0, `Again` 1, `Failed(errno)` 2."""
        tag = self.transfer_tag(moved, reason, 1, 2, c64(0))
        return self.variant(e, tag, self.sel(self.b.icmp_signed("<", moved, c64(0)), reason, moved))

    def datagram(self, e: ast.Call, moved: ir.Value, reason: ir.Value, room: ir.Value) -> ir.Value:
        """`Datagram`: `Got(n)` 0, `Truncated(n)` 1 (the datagram's real length), `Again` 2,
        `Failed(errno)` 3."""
        cut = self.sel(self.b.icmp_signed(">", moved, room), 1, 0)
        tag = self.transfer_tag(moved, reason, 2, 3, cut)
        return self.variant(e, tag, self.sel(self.b.icmp_signed("<", moved, c64(0)), reason, moved))

    # ------------------------------------------------------------ tickets

    def epoch_slot(self, fd: ir.Value) -> ir.Value:
        g = state_global(self.bl.ml.module, "lexs_net_epochs", EPOCH_SLOTS)
        return self.b.gep(g, [c64(0), fd], inbounds=True)

    def detach(self, fd: ir.Value, kind: int) -> ir.Value:
        """End a handle and answer a ticket: its descriptor's epoch, moved on to an odd number,
        over the descriptor. A descriptor too large for the table is closed and answers -1."""
        b = self.b
        answer = self.cell(c64(-1))
        big, issue, done = self.block("detach.big"), self.block("detach.issue"), self.block("detach.done")
        b.cbranch(b.icmp_unsigned(">=", fd, c64(EPOCH_SLOTS)), big, issue)
        b.position_at_end(big)
        self.c("close", [fd])
        b.branch(done)
        b.position_at_end(issue)
        slot = self.epoch_slot(fd)
        nxt = b.add(b.load(slot, typ=I64), c64(1))
        b.store(nxt, slot)
        ticket = b.or_(b.shl(b.and_(nxt, c64(EPOCH_MASK)), c64(32)), fd)
        b.store(b.or_(ticket, c64(kind)) if kind else ticket, answer)
        b.branch(done)
        b.position_at_end(done)
        return b.load(answer, typ=I64)

    def attach(self, e: ast.Call, ticket: ir.Value, kind: int) -> ir.Value:
        """Redeem a ticket once: valid only for a descriptor in range whose current epoch is the
        ticket's (odd) one and of this kind; the epoch then moves on. `Ok` 0 or `Failed(EBADF)`."""
        b = self.b
        fd = b.and_(ticket, c64(0xFFFFFFFF))
        epoch = b.and_(b.lshr(ticket, c64(32)), c64(EPOCH_MASK))
        in_range = b.icmp_unsigned("<", fd, c64(EPOCH_SLOTS))
        slot = self.epoch_slot(b.select(in_range, fd, c64(0)))
        current = b.load(slot, typ=I64)
        same = b.icmp_unsigned("==", b.and_(current, c64(EPOCH_MASK)), epoch)
        odd = b.icmp_unsigned("!=", b.and_(epoch, c64(1)), c64(0))
        # The two top bits: the kind, and the sign (no ticket is negative).
        kind_ok = b.icmp_unsigned("==", b.and_(ticket, c64(-UDP_KIND)), c64(kind))
        valid = b.and_(b.and_(in_range, same), b.and_(odd, kind_ok))
        self.if_then(valid, "attach.spend", lambda: b.store(b.add(current, c64(1)), slot))
        return self.variant(e, self.sel(valid, 0, 1), self.sel(valid, fd, EBADF))


def net(bl: "BuiltinLowering") -> Net:
    return Net(bl)


# ---------------------------------------------------------------- edition 2


@LOWERINGS.register("connect")
def bi_connect(self: "BuiltinLowering", e, args):
    fd, _ = net(self).dial(e, args, SOCK_STREAM, start=False)
    return fd


@LOWERINGS.register("bind")
def bi_bind(self: "BuiltinLowering", e, args):
    n = net(self)
    n.check_port(args[1], n.literal(e))
    fd, _ = n.bound_socket(args[1], SOCK_STREAM, None, None)
    return fd


@LOWERINGS.register("listen")
def bi_listen(self: "BuiltinLowering", e, args):
    b = self.b
    return b.sext(net(self).c("listen", [b.trunc(args[0], I32), b.trunc(args[1], I32)]), I64)


@LOWERINGS.register("accept")
def bi_accept(self: "BuiltinLowering", e, args):
    b = self.b
    null = ir.Constant(PTR, None)
    return b.sext(net(self).c("accept", [b.trunc(args[0], I32), null, null]), I64)


# ---------------------------------------------------------------- TCP (edition 5)


@LOWERINGS.register("tcp_listen")
def bi_tcp_listen(self: "BuiltinLowering", e, args):
    n = net(self)
    n.check_port(args[1], n.literal(e))
    fd, reason = n.bound_socket(args[1], SOCK_STREAM, args[2], args[3])
    return n.opened(e, fd, reason)


@LOWERINGS.register("tcp_connect", "tcp_connect_start")
def bi_tcp_connect(self: "BuiltinLowering", e, args):
    n = net(self)
    fd, reason = n.dial(e, args, SOCK_STREAM, start=e.callee.name == "tcp_connect_start")
    return n.opened(e, fd, reason)


@LOWERINGS.register("tcp_accept")
def bi_tcp_accept(self: "BuiltinLowering", e, args):
    """`Accepted`: `Ok(conn)` 0, `Again` 1, `Failed(errno)` 2; the connection arrives blocking."""
    n, b = net(self), self.b
    null = ir.Constant(PTR, None)
    conn = b.sext(n.c("accept4", [n.handle_fd(args[0]), null, null, c32(SOCK_CLOEXEC)]), I64)
    reason = n.errno()
    tag = n.transfer_tag(conn, reason, 1, 2, c64(0))
    return n.variant(e, tag, n.sel(b.icmp_signed("<", conn, c64(0)), reason, conn))


@LOWERINGS.register("conn_read")
def bi_conn_read(self: "BuiltinLowering", e, args):
    """`Received`: `Data(n)` 0, `End` 1, `Again` 2, `Failed(errno)` 3."""
    n, b = net(self), self.b
    moved, reason = n.receive(n.handle_fd(args[0]), args[1], 0)
    tag = n.transfer_tag(moved, reason, 2, 3, n.sel(b.icmp_signed("==", moved, c64(0)), 1, 0))
    return n.variant(e, tag, n.sel(b.icmp_signed("<", moved, c64(0)), reason, moved))


@LOWERINGS.register("conn_write", "udp_send")
def bi_conn_write(self: "BuiltinLowering", e, args):
    n, b = net(self), self.b
    data = args[1]
    moved = n.c("send", [n.handle_fd(args[0]), b.extract_value(data, 0), b.extract_value(data, 1),
                         c32(MSG_NOSIGNAL)])
    return n.sent(e, moved, n.errno())


@LOWERINGS.register("conn_nonblocking", "listener_nonblocking", "udp_nonblocking")
def bi_nonblocking(self: "BuiltinLowering", e, args):
    n = net(self)
    return n.zero_or_errno(n.set_nonblocking(n.handle_fd(args[0])))


@LOWERINGS.register("conn_nodelay")
def bi_conn_nodelay(self: "BuiltinLowering", e, args):
    n = net(self)
    return n.zero_or_errno(n.int_option(n.handle_fd(args[0]), IPPROTO_TCP, TCP_NODELAY))


@LOWERINGS.register("conn_connect_status")
def bi_conn_connect_status(self: "BuiltinLowering", e, args):
    """SO_ERROR: 0 once a started connection is made, the errno it failed with, or getsockopt's."""
    n, b = net(self), self.b
    value, length = n.cell(c32(0), I32), n.cell(c32(4), I32)
    rc = n.c("getsockopt", [n.handle_fd(args[0]), c32(SOL_SOCKET), c32(SO_ERROR), value, length])
    reason = n.errno()
    return n.sel(b.icmp_signed("<", rc, c32(0)), reason, b.sext(b.load(value, typ=I32), I64))


def peer_form(n: Net, out: ir.Value, family: int, addr: ir.Value, at: int, port: tuple[ir.Value, ir.Value]) -> None:
    """Write std.addr's form into `out`: the family (4 or 6), the address bytes found in the
    sockaddr at `at` (4 or 16 of them), the port's two bytes at 17 and 18."""
    b = n.b
    b.store(ir.Constant(I8, family), n.at(out, 0))
    for i in range(4 if family == 4 else 16):
        b.store(n.load_at(addr, at + i, I8), n.at(out, 1 + i))
    b.store(port[0], n.at(out, 17))
    b.store(port[1], n.at(out, 18))


@LOWERINGS.register("conn_peer")
def bi_conn_peer(self: "BuiltinLowering", e, args):
    """The peer's address in std.addr's 19-byte form (family 4 or 6, sixteen address bytes, the
    port big-endian), IPv4-mapped IPv6 written as IPv4: 0, the errno of getpeername, or EINVAL
    for a buffer shorter than 19 bytes or a peer that is not IP."""
    n, b = net(self), self.b
    out = b.extract_value(args[1], 0)
    answer = n.cell(c64(EINVAL))
    ask, done = n.block("peer.ask"), n.block("peer.done")
    b.cbranch(b.icmp_signed("<", b.extract_value(args[1], 1), c64(19)), done, ask)
    b.position_at_end(ask)
    addr = n.buffer(128)
    length = n.cell(c32(128), I32)
    rc = n.c("getpeername", [n.handle_fd(args[0]), addr, length])
    reason = n.errno()
    got, failed = n.block("peer.got"), n.block("peer.failed")
    b.cbranch(b.icmp_signed("<", rc, c32(0)), failed, got)
    b.position_at_end(failed)
    b.store(reason, answer)
    b.branch(done)
    b.position_at_end(got)
    for i in range(19):
        b.store(ir.Constant(I8, 0), n.at(out, i))
    family = n.load_at(addr, 0, I16)
    port_hi, port_lo = n.load_at(addr, 2, I8), n.load_at(addr, 3, I8)
    v4, v6 = n.block("peer.v4"), n.block("peer.v6")
    b.cbranch(b.icmp_unsigned("==", family, ir.Constant(I16, AF_INET)), v4, v6)
    b.position_at_end(v4)
    peer_form(n, out, 4, addr, 4, (port_hi, port_lo))
    b.store(c64(0), answer)
    b.branch(done)
    b.position_at_end(v6)
    is6, other = n.block("peer.in6"), n.block("peer.other")
    b.cbranch(b.icmp_unsigned("==", family, ir.Constant(I16, AF_INET6)), is6, other)
    b.position_at_end(other)
    b.store(c64(EINVAL), answer)
    b.branch(done)
    b.position_at_end(is6)
    # sockaddr_in6: the address at 8..24; a mapped IPv4 address (::ffff:a.b.c.d) as IPv4.
    head = n.load_at(addr, 8, I64)
    mid = n.load_at(addr, 16, I32)
    mapped = b.and_(b.icmp_unsigned("==", head, c64(0)),
                    b.icmp_unsigned("==", mid, c32(0xFFFF0000)))  # bytes 00 00 ff ff, little-endian
    plain4, plain6 = n.block("peer.mapped"), n.block("peer.plain6")
    b.cbranch(mapped, plain4, plain6)
    b.position_at_end(plain4)
    peer_form(n, out, 4, addr, 20, (port_hi, port_lo))
    b.store(c64(0), answer)
    b.branch(done)
    b.position_at_end(plain6)
    peer_form(n, out, 6, addr, 8, (port_hi, port_lo))
    b.store(c64(0), answer)
    b.branch(done)
    b.position_at_end(done)
    return b.load(answer, typ=I64)


@LOWERINGS.register("conn_close", "listener_close", "udp_close", "poller_close")
def bi_close_handle(self: "BuiltinLowering", e, args):
    return self.b.sext(net(self).c("close", [self.b.and_(args[0], c64(0xFFFFFFFF))]), I64)


@LOWERINGS.register("conn_detach")
def bi_conn_detach(self: "BuiltinLowering", e, args):
    return net(self).detach(args[0], 0)


@LOWERINGS.register("udp_detach")
def bi_udp_detach(self: "BuiltinLowering", e, args):
    return net(self).detach(args[0], UDP_KIND)


@LOWERINGS.register("conn_attach")
def bi_conn_attach(self: "BuiltinLowering", e, args):
    return net(self).attach(e, args[0], 0)


@LOWERINGS.register("udp_attach")
def bi_udp_attach(self: "BuiltinLowering", e, args):
    return net(self).attach(e, args[0], UDP_KIND)


# ---------------------------------------------------------------- UDP (edition 5)


@LOWERINGS.register("udp_bind")
def bi_udp_bind(self: "BuiltinLowering", e, args):
    n = net(self)
    n.check_port(args[1], n.literal(e))
    fd, reason = n.bound_socket(args[1], SOCK_DGRAM, None, args[2])
    return n.opened(e, fd, reason)


@LOWERINGS.register("udp_connect")
def bi_udp_connect(self: "BuiltinLowering", e, args):
    n = net(self)
    fd, reason = n.dial(e, args, SOCK_DGRAM, start=False)
    return n.opened(e, fd, reason)


@LOWERINGS.register("udp_recv")
def bi_udp_recv(self: "BuiltinLowering", e, args):
    n, b = net(self), self.b
    moved, reason = n.receive(n.handle_fd(args[0]), args[1], MSG_TRUNC)
    return n.datagram(e, moved, reason, b.extract_value(args[1], 1))


def peer_entry(n: Net, ticket: ir.Value) -> ir.Value:
    g = state_global(n.bl.ml.module, "lexs_net_peers", PEER_SLOTS * PEER_STRIDE // 8 + 1)
    slot = n.b.and_(ticket, c64(PEER_SLOTS - 1))
    return n.at(g, n.b.mul(slot, c64(PEER_STRIDE)))


@LOWERINGS.register("udp_recv_from")
def bi_udp_recv_from(self: "BuiltinLowering", e, args):
    """`udp_recv` that also remembers the sender in the next entry of the ring and writes a ticket
    for it into the first cell of `ticket`; an empty buffer or ticket slice is Failed(EINVAL)."""
    n, b = net(self), self.b
    fd = n.handle_fd(args[0])
    buf, cells = args[1], args[2]
    ptr, room = b.extract_value(buf, 0), b.extract_value(buf, 1)
    counter = as_ptr_to(b, n.at(state_global(n.bl.ml.module, "lexs_net_peers", PEER_SLOTS * PEER_STRIDE // 8 + 1),
                                PEER_SLOTS * PEER_STRIDE), I64)
    ticket = b.add(b.load(counter, typ=I64), c64(1))
    entry = peer_entry(n, ticket)
    length = n.cell(c32(28), I32)
    moved, why = n.cell(c64(-1)), n.cell(c64(EINVAL))
    refused = b.or_(b.icmp_signed("==", room, c64(0)), b.icmp_signed("==", b.extract_value(cells, 1), c64(0)))
    n.if_then(b.not_(refused), "recvfrom", lambda: (
        b.store(n.c("recvfrom", [fd, ptr, room, c32(MSG_TRUNC), entry, length]), moved),
        b.store(n.errno(), why)))
    got, reason = b.load(moved, typ=I64), b.load(why, typ=I64)

    def record() -> None:
        n.store_at(entry, PEER_TICKET_AT, ticket)
        n.store_at(entry, PEER_FD_AT, b.sext(fd, I64))
        b.store(ticket, counter)
        b.store(ticket, b.extract_value(cells, 0))
    n.if_then(b.icmp_signed(">=", got, c64(0)), "recvfrom.record", record)
    return n.datagram(e, got, reason, room)


@LOWERINGS.register("udp_send_to")
def bi_udp_send_to(self: "BuiltinLowering", e, args):
    """`sendto` the sender a ticket names, if it is still the one its ring entry holds and was
    issued to this socket; otherwise Failed(EBADF) and nothing is sent."""
    n, b = net(self), self.b
    fd = n.handle_fd(args[0])
    data, ticket = args[1], args[2]
    entry = peer_entry(n, ticket)
    valid = b.and_(b.and_(b.icmp_signed(">", ticket, c64(0)),
                          b.icmp_signed("==", n.load_at(entry, PEER_TICKET_AT, I64), ticket)),
                   b.icmp_signed("==", n.load_at(entry, PEER_FD_AT, I64), b.sext(fd, I64)))
    moved, why = n.cell(c64(-1)), n.cell(c64(EBADF))
    n.if_then(valid, "sendto", lambda: (
        b.store(n.c("sendto", [fd, b.extract_value(data, 0), b.extract_value(data, 1), c32(MSG_NOSIGNAL),
                               entry, c32(28)]), moved),
        b.store(n.errno(), why)))
    return n.sent(e, b.load(moved, typ=I64), b.load(why, typ=I64))


@LOWERINGS.register("udp_local_port")
def bi_udp_local_port(self: "BuiltinLowering", e, args):
    """The port the kernel chose (getsockname), or -errno."""
    n, b = net(self), self.b
    addr = n.buffer(128)
    length = n.cell(c32(128), I32)
    rc = n.c("getsockname", [n.handle_fd(args[0]), addr, length])
    reason = n.errno()
    port = b.or_(b.shl(b.zext(n.load_at(addr, 2, I8), I64), c64(8)), b.zext(n.load_at(addr, 3, I8), I64))
    return n.sel(b.icmp_signed("<", rc, c32(0)), b.neg(reason), port)
