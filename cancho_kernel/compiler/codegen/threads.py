"""Lowering `spawn`, `join` and `fork_heap` (runtime.md §1, threads): real OS threads through
`pthread_create`/`pthread_join`, on both backends (glibc has both in libc since 2.34).

`spawn` puts the function value and the payload in a `malloc`'d block and starts the thread on
a thunk made once per (payload, result) machine type: it reads the block, frees it, calls the
worker and hands its result back as the thread's `void *` (every result that crosses is one
pointer-width leaf or none, check/threads.py). A `Thread` is the `pthread_t`; `join` waits and
converts the `void *` back. Either call failing traps, and a trap in a worker is `ud2` like any
other, which ends the whole process. `fork_heap` makes a capability, which has no run-time value.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from llvmlite import ir

from ..check.builtins import LOWERINGS
from ..trapsites import TrapKind
from .layout import I32, I64, PTR

if TYPE_CHECKING:
    from .builtins import BuiltinLowering

PTHREAD_CREATE = ir.FunctionType(I32, [PTR, PTR, PTR, PTR])
PTHREAD_JOIN = ir.FunctionType(I32, [I64, PTR])
THUNK = ir.FunctionType(PTR, [PTR])


def as_word(b: ir.IRBuilder, v: Optional[ir.Value], t: Optional[ir.Type]) -> ir.Value:
    """A leaf (or nothing) as the `void *` a thread returns."""
    if t is None:
        return ir.Constant(PTR, None)
    if t == PTR:
        return v
    if t != I64:
        v = b.zext(v, I64)
    return b.inttoptr(v, PTR)


def from_word(b: ir.IRBuilder, p: ir.Value, t: Optional[ir.Type]) -> Optional[ir.Value]:
    """The inverse of `as_word`."""
    if t is None:
        return None
    if t == PTR:
        return p
    w = b.ptrtoint(p, I64)
    return w if t == I64 else b.trunc(w, t)


def block_type(payload: Optional[ir.Type]) -> ir.LiteralStructType:
    """What a thread starts with: the worker's address and its payload."""
    return ir.LiteralStructType([PTR] if payload is None else [PTR, payload])


def thunk(gen: "BuiltinLowering", payload: Optional[ir.Type], result: Optional[ir.Type]) -> ir.Function:
    """The start routine for workers of this machine signature, made once per module."""
    module = gen.ml.module
    name = f"lexs.thread_start.{payload or 'none'}.{result or 'none'}"
    existing = module.globals.get(name)
    if existing is not None:
        return existing
    f = ir.Function(module, THUNK, name=name)
    f.linkage = "internal"
    b = ir.IRBuilder(f.append_basic_block("entry"))
    blk = block_type(payload)
    arg = f.args[0]
    fp = b.load(b.gep(arg, [ir.Constant(I32, 0), ir.Constant(I32, 0)], inbounds=True, source_etype=blk), typ=PTR)
    args = []
    if payload is not None:
        args.append(b.load(b.gep(arg, [ir.Constant(I32, 0), ir.Constant(I32, 1)], inbounds=True, source_etype=blk),
                           typ=payload))
    gen.rt.free(b, arg)
    worker_ty = ir.FunctionType(result if result is not None else I64, [payload] if payload is not None else [])
    slot = b.alloca(PTR)  # a typed view of the pointer, as an indirect call makes (lower.py)
    b.store(fp, slot)
    r = b.call(b.load(slot, typ=worker_ty.as_pointer()), args)
    b.ret(as_word(b, r, result))
    return f


@LOWERINGS.register("spawn")
def bi_spawn(self: "BuiltinLowering", e, args):
    b, gen = self.b, self.gen
    payload_t = gen.lty(gen.ty(e.args[0]))
    result_t = gen.lty(gen.ty(e).args[1])
    blk = block_type(payload_t)
    size = b.ptrtoint(b.gep(ir.Constant(PTR, None), [ir.Constant(I32, 1)], source_etype=blk), I64)
    mem = self.rt.malloc(b, size)
    gen.trap_if(b.icmp_unsigned("==", mem, ir.Constant(PTR, None)), TrapKind.ALLOCATION)
    b.store(args[1], b.gep(mem, [ir.Constant(I32, 0), ir.Constant(I32, 0)], inbounds=True, source_etype=blk))
    if payload_t is not None:
        b.store(args[0], b.gep(mem, [ir.Constant(I32, 0), ir.Constant(I32, 1)], inbounds=True, source_etype=blk))
    tid = self.alloca_builder.alloca(I64, name="thread")
    count_running(self, +1)
    rc = self.rt.call_c(b, "pthread_create", PTHREAD_CREATE,
                        [tid, ir.Constant(PTR, None), thunk(self, payload_t, result_t), mem])
    gen.trap_if(b.icmp_unsigned("!=", rc, ir.Constant(I32, 0)), TrapKind.CHECK)
    return b.load(tid, typ=I64)


def count_running(self: "BuiltinLowering", delta: int) -> None:
    """Keep the number of running threads where a signal claim looks for it (codegen/net.py:
    a claim is refused while a thread runs, since a thread's mask would still take the signal)."""
    from .poller import signal_state

    word = self.b.gep(signal_state(self.ml.module), [ir.Constant(I64, 0), ir.Constant(I64, 1)], inbounds=True)
    self.b.atomic_rmw("add", word, ir.Constant(I64, delta), "seq_cst")


@LOWERINGS.register("join")
def bi_join(self: "BuiltinLowering", e, args):
    b, gen = self.b, self.gen
    out = self.alloca_builder.alloca(PTR, name="joined")
    rc = self.rt.call_c(b, "pthread_join", PTHREAD_JOIN, [args[0], out])
    gen.trap_if(b.icmp_unsigned("!=", rc, ir.Constant(I32, 0)), TrapKind.CHECK)
    count_running(self, -1)
    return from_word(b, b.load(out, typ=PTR), gen.lty(gen.ty(e)))


@LOWERINGS.register("fork_heap")
def bi_fork_heap(self: "BuiltinLowering", e, args):
    return None  # a `Heap` has no run-time value: malloc and free need none
