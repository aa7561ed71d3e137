"""The C boundary on `wasm32-wasip1`: libc's real signatures there, and one adapter per function.

Codegen works in the language's widths: `int` is i64, and `runtime.LIBC` declares libc with
LP64 signatures (`malloc(i64)`, `fwrite(ptr, i64, i64, ptr)`). On wasm32 `size_t`, `ssize_t`,
`int` and `long` are 32 bits, and a WebAssembly call whose type disagrees with the callee's is
not a quiet truncation: `wasm-ld` swaps in a trap (or, with ``--fatal-warnings``, which the link
uses, refuses to link). So on this target each libc function a module uses is declared with its
wasi-libc signature (:data:`WASI_C`) and reached through a small internal adapter with the LP64
signature every call site already uses; O2 inlines it. The adapter is the whole ABI difference,
in one place:

* a ``size`` argument is clamped to the largest 32-bit size rather than truncated, so a request
  too large for the target fails (and traps where a failed allocation traps) instead of asking
  for a few bytes;
* an ``int`` argument is truncated (descriptors and characters fit);
* a ``size`` result is zero-extended, an ``int``/``ssize`` result sign-extended, so ``-1`` stays
  ``-1``.

A libc function with no entry here keeps its LP64 declaration, and the link names it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from llvmlite import ir

I32, I64 = ir.IntType(32), ir.IntType(64)
PTR = ir.PointerType()
VOID = ir.VoidType()


class CType(Enum):
    """How one C parameter or result is passed on wasm32, against the LP64 declaration."""

    SAME = "same"  # the same LLVM type on both (i32 `int`s, pointers)
    SIZE = "size"  # size_t: i64 in codegen, i32 unsigned here
    INT = "int"  # int/long/ssize_t declared as i64 in codegen: i32 signed here
    VOID = "void"


@dataclass(frozen=True)
class CSignature:
    """A libc function's wasm32 result and parameters, each against its LP64 counterpart."""

    ret: CType
    params: tuple[CType, ...]


S, Z, N = CType.SAME, CType.SIZE, CType.INT

WASI_C: dict[str, CSignature] = {
    "putchar": CSignature(S, (S,)),
    "getchar": CSignature(S, ()),
    "putc": CSignature(S, (S, S)),
    "getc": CSignature(S, (S,)),
    "fwrite": CSignature(Z, (S, Z, Z, S)),
    "fflush": CSignature(S, (S,)),
    "ferror": CSignature(S, (S,)),
    "malloc": CSignature(S, (Z,)),
    "calloc": CSignature(S, (Z, Z)),
    "free": CSignature(CType.VOID, (S,)),
    "memmove": CSignature(S, (S, S, Z)),
    "memchr": CSignature(S, (S, S, Z)),
    "strlen": CSignature(Z, (S,)),
    "__errno_location": CSignature(S, ()),
    "memcmp": CSignature(S, (S, S, Z)),
    "memmem": CSignature(S, (S, Z, S, Z)),
    "read": CSignature(N, (N, S, Z)),
    "write": CSignature(N, (N, S, Z)),
    "close": CSignature(S, (N,)),
}

U32_MAX = 0xFFFF_FFFF


def c_type(kind: CType, lp64: ir.Type) -> ir.Type:
    """The wasm32 LLVM type of one slot whose LP64 type is ``lp64``."""
    return I32 if kind in (CType.SIZE, CType.INT) else lp64


def c_function_type(sig: CSignature, lp64: ir.FunctionType) -> ir.FunctionType:
    params = [c_type(k, t) for k, t in zip(sig.params, lp64.args)]
    return ir.FunctionType(c_type(sig.ret, lp64.return_type), params, var_arg=lp64.var_arg)


# WASI's errno numbers (wasi-libc's <wasi/api.h>) -> the language's, which are Linux's, by name;
# read off the two sets of headers. ENOTCAPABLE (76), which Linux has no name for, is EPERM: an
# operation the module was given no right to.
WASI_ERRNO_TO_LINUX: tuple[int, ...] = (
    0, 7, 13, 98, 99, 97, 11, 114, 9, 74, 16, 125, 10, 103, 111, 104, 35, 89, 33, 122, 17, 14, 27,
    113, 43, 84, 115, 4, 22, 5, 106, 21, 40, 24, 31, 90, 72, 36, 100, 102, 101, 23, 105, 19, 2, 8,
    37, 67, 12, 42, 92, 28, 38, 107, 20, 39, 131, 88, 95, 25, 6, 75, 130, 1, 32, 71, 93, 91, 34,
    30, 29, 3, 116, 110, 26, 18, 1,
)


def build_errno_adapter(module: ir.Module) -> ir.Function:
    """``cancho.wasi.__errno_location``: a pointer to the current errno in the language's
    numbering. Codegen only ever reads errno after a failed call, so the adapter translates
    wasi-libc's value into a copy of its own and answers the copy's address; a number outside
    the table passes through. wasi-libc (single-threaded) keeps errno in the global `errno`
    and, in Debian's 2022 build, has no `__errno_location` function to ask."""
    real = module.globals.get("errno")
    if real is None:
        real = ir.GlobalVariable(module, I32, name="errno")
        real.linkage = "external"
    table_t = ir.ArrayType(I32, len(WASI_ERRNO_TO_LINUX))
    table = ir.GlobalVariable(module, table_t, name="cancho.wasi.errno_table")
    table.linkage, table.global_constant = "internal", True
    table.initializer = ir.Constant(table_t, [ir.Constant(I32, n) for n in WASI_ERRNO_TO_LINUX])
    copy = ir.GlobalVariable(module, I32, name="cancho.wasi.errno")
    copy.linkage, copy.initializer = "internal", ir.Constant(I32, 0)
    adapter = ir.Function(module, ir.FunctionType(PTR, []), name="cancho.wasi.__errno_location")
    adapter.linkage = "internal"
    b = ir.IRBuilder(adapter.append_basic_block("entry"))
    raw = b.load(real, typ=I32)
    known = b.icmp_unsigned("<", raw, ir.Constant(I32, len(WASI_ERRNO_TO_LINUX)))
    index = b.select(known, raw, ir.Constant(I32, 0))
    mapped = b.load(b.gep(table, [ir.Constant(I32, 0), index], inbounds=True), typ=I32)
    b.store(b.select(known, mapped, raw), copy)
    b.ret(copy)
    return adapter


def build_adapter(module: ir.Module, name: str, lp64: ir.FunctionType) -> ir.Function:
    """``cancho.wasi.<name>``: the LP64 signature outside, wasi-libc's ``name`` inside."""
    if name == "__errno_location":
        return build_errno_adapter(module)
    sig = WASI_C[name]
    real = module.globals.get(name)
    cty = c_function_type(sig, lp64)
    if real is None:
        real = ir.Function(module, cty, name=name)
    adapter = ir.Function(module, lp64, name=f"cancho.wasi.{name}")
    adapter.linkage = "internal"
    adapter.attributes.add("alwaysinline")
    b = ir.IRBuilder(adapter.append_basic_block("entry"))
    args = [_narrow(b, kind, a) for kind, a in zip(sig.params, adapter.args)]
    callee = real if real.function_type == cty else _view(real, cty)
    r = b.call(callee, args)
    if sig.ret is CType.VOID:
        b.ret_void()
    elif sig.ret is CType.SIZE:
        b.ret(b.zext(r, I64))
    elif sig.ret is CType.INT:
        b.ret(b.sext(r, I64))
    else:
        b.ret(r)
    return adapter


def _narrow(b: ir.IRBuilder, kind: CType, v: ir.Value) -> ir.Value:
    if kind is CType.SIZE:
        big = b.icmp_unsigned(">", v, ir.Constant(I64, U32_MAX))
        return b.trunc(b.select(big, ir.Constant(I64, U32_MAX), v), I32)
    if kind is CType.INT:
        return b.trunc(v, I32)
    return v


def _view(f: ir.Function, fnty: ir.FunctionType) -> ir.Value:
    from .runtime import FunctionView

    return FunctionView(f, fnty)


# wasi-libc's clock ids are the addresses of these objects, not small integers.
WASI_CLOCKS = {0: "_CLOCK_REALTIME", 1: "_CLOCK_MONOTONIC"}


def clock_ms(b: ir.IRBuilder, rt, ts: ir.Value, which: int) -> ir.Value:
    """Milliseconds from wasi-libc's ``clock_gettime`` (``which``: 0 realtime, 1 monotonic, the
    Linux numbers codegen uses). ``ts`` is 16 bytes: WASI's ``timespec`` is an i64 ``tv_sec``
    and a 32-bit ``tv_nsec`` at offset 8."""
    name = WASI_CLOCKS[which]
    clock = rt.module.globals.get(name)
    if clock is None:
        clock = ir.GlobalVariable(rt.module, ir.IntType(8), name=name)
        clock.linkage = "external"
        clock.global_constant = True
    rt.call_c(b, "clock_gettime", ir.FunctionType(I32, [PTR, PTR]), [clock, ts])
    sec = b.load(b.gep(ts, [ir.Constant(I64, 0), ir.Constant(I64, 0)], inbounds=True), typ=I64)
    nsec_at = b.gep(ts, [ir.Constant(I64, 0), ir.Constant(I64, 1)], inbounds=True)
    nsec = b.sext(b.load(nsec_at, typ=I32), I64)
    return b.add(b.mul(sec, ir.Constant(I64, 1000)), b.sdiv(nsec, ir.Constant(I64, 1_000_000)))


# Opening a path: the constants codegen writes are Linux's; wasi-libc's differ (its headers'
# `__header_fcntl.h`): no close-on-exec (a module cannot exec), a read-only open is a right of
# its own rather than 0, and the working directory is descriptor -2.
AT_FDCWD = -2
_ACCESS = {0: 0x0400_0000, 1: 0x1000_0000, 2: 0x1400_0000}  # O_RDONLY, O_WRONLY, O_RDWR
_LINUX_TO_WASI = {0o100: 0x1000, 0o200: 0x4000, 0o1000: 0x8000, 0o2000: 0x1}  # CREAT EXCL TRUNC APPEND


def open_flags(linux: int) -> int:
    """wasi-libc's `open` flags for Linux's ``linux`` (without O_CLOEXEC, which WASI lacks)."""
    out = _ACCESS[linux & 3]
    rest = linux & ~3
    for bit, wasi_bit in _LINUX_TO_WASI.items():
        if rest & bit:
            out |= wasi_bit
            rest &= ~bit
    if rest:
        raise NotImplementedError(f"open flags {rest:#o} have no wasm32-wasip1 mapping in cancho-kernel")
    return out
