"""Lowering builtin calls: console, conversions, floats, slices and memory moves, the heap,
command-line arguments and `flush_out` (runtime.md §1).

Held by `FnLowering` (lower.py), with a typed reference back to it. Every check that can trap branches to the function's `ud2` block.
"""

from __future__ import annotations

import platform
import struct
from typing import TYPE_CHECKING, Optional

from llvmlite import ir

from .. import ast
from ..check.builtins import LOWERINGS
from ..trapsites import TrapKind
from ..check.types import Slice
from .layout import DOUBLE, FLOATT, I1, I8, I32, I64, PTR, SLICE

TWO63 = 9223372036854775808.0
# glibc's FILE layout is part of its ABI (the getc_unlocked macro in <stdio.h> reads it).
GLIBC_STDIO = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc" \
    and struct.calcsize("P") == 8
CANONICAL_NAN = 0x7FF8000000000000
CANONICAL_NAN32 = 0x7FC00000


if TYPE_CHECKING:
    from .lower import FnLowering


class BuiltinLowering:
    """Builtin calls of one function body, lowered for (and through) the `FnLowering` that owns
    them; a registered lowering is called with this object as `self`."""

    def __init__(self, gen: "FnLowering"):
        self.gen = gen
        self.b = gen.b
        self.rt = gen.rt
        self.func = gen.func
        self.layout = gen.layout
        self.alloca_builder = gen.alloca_builder
        self.ml = gen.ml

    def builtin(self, name: str, e: ast.Call) -> Optional[ir.Value]:
        """Lower a builtin call through its registered lowering (check/builtins.py's registry:
        the checker refuses, at the call, every builtin that has none)."""
        lowering = LOWERINGS.get(name)
        if lowering is None:
            raise NotImplementedError(f"the builtin `{name}` has no lowering although the checker accepted it")
        return lowering(self, e, [self.gen.expr(a) for a in e.args])

    # ------------------------------------------------------------ capabilities, console, integers

    @LOWERINGS.register("split", "narrow")
    def bi_capability(self, e, args):
        return None  # capabilities have no run-time value

    @LOWERINGS.register("release")
    def bi_release(self, e, args):
        return ir.Constant(I64, 0)

    @LOWERINGS.register("putchar")
    def bi_putchar(self, e, args):
        # `putc(c, stdout)` is what C's own `putchar` becomes at -O2 with glibc's headers: the
        # same stream and result, without the stream lock a single-threaded program never needs.
        b, rt = self.b, self.rt
        stream = b.load(rt.stream("stdout"), typ=PTR)
        return b.sext(b.call(rt.libc("putc"), [b.trunc(args[1], I32), stream]), I64)

    @LOWERINGS.register("getchar")
    def bi_getchar(self, e, args):
        return self.getchar()

    @LOWERINGS.register("write_bytes", "write_err")
    def bi_write(self, e, args):
        b, rt = self.b, self.rt
        s = args[1]
        stream = b.load(rt.stream("stdout" if e.callee.name == "write_bytes" else "stderr"), typ=PTR)
        return b.call(rt.libc("fwrite"), [b.extract_value(s, 0), ir.Constant(I64, 1), b.extract_value(s, 1), stream])

    @LOWERINGS.register("len")
    def bi_len(self, e, args):
        return self.b.extract_value(args[0], 1)

    @LOWERINGS.register("byte_of")
    def bi_byte_of(self, e, args):
        b = self.b
        self.gen.trap_if(b.icmp_unsigned(">", args[0], ir.Constant(I64, 255)), TrapKind.BYTE_OF)
        return b.trunc(args[0], I8)

    @LOWERINGS.register("int_of")
    def bi_int_of(self, e, args):
        return self.b.zext(args[0], I64)

    @LOWERINGS.register("wrapping_add")
    def bi_wrapping_add(self, e, args):
        return self.b.add(args[0], args[1])

    @LOWERINGS.register("wrapping_sub")
    def bi_wrapping_sub(self, e, args):
        return self.b.sub(args[0], args[1])

    @LOWERINGS.register("wrapping_mul")
    def bi_wrapping_mul(self, e, args):
        return self.b.mul(args[0], args[1])

    @LOWERINGS.register("value_barrier")
    def bi_value_barrier(self, e, args):
        asm = ir.InlineAsm(ir.FunctionType(I64, [I64]), "", "=r,0", side_effect=False)
        return self.b.call(asm, [args[0]])

    @LOWERINGS.register("trap")
    def bi_trap(self, e, args):
        self.rt.trap(self.b, self.gen.trap_site(TrapKind.EXPLICIT))
        self.b.position_at_end(self.func.append_basic_block("after.trap"))
        return ir.Constant(I64, 0)

    def getchar(self) -> ir.Value:
        """One byte of stdin, -1 at the end. On glibc this is the body of `getc_unlocked`, as C's
        own headers expand it: take the next byte of the stream's buffer, or call `__uflow` to
        refill it (which also reports the end and sets the stream's flags). A cancho program is
        single-threaded, so the stream lock C's `getchar` checks for is never needed."""
        b, rt = self.b, self.rt
        stream = b.load(rt.stream("stdin"), typ=PTR)
        if not GLIBC_STDIO or rt.target.is_wasi:  # wasi-libc's FILE is musl's, not glibc's
            return b.sext(b.call(rt.libc("getc"), [stream]), I64)
        ptr_slot = b.gep(stream, [ir.Constant(I64, 8)], inbounds=True, source_etype=I8)   # _IO_read_ptr
        end_slot = b.gep(stream, [ir.Constant(I64, 16)], inbounds=True, source_etype=I8)  # _IO_read_end
        cur = b.load(ptr_slot, typ=PTR)
        end = b.load(end_slot, typ=PTR)
        fast = self.func.append_basic_block("getchar.fast")
        slow = self.func.append_basic_block("getchar.refill")
        done = self.func.append_basic_block("getchar.done")
        b.cbranch(b.icmp_unsigned("<", b.ptrtoint(cur, I64), b.ptrtoint(end, I64)), fast, slow)
        b.position_at_end(fast)
        byte = b.zext(b.load(cur, typ=I8), I64)
        b.store(b.gep(cur, [ir.Constant(I64, 1)], inbounds=True, source_etype=I8), ptr_slot)
        b.branch(done)
        b.position_at_end(slow)
        refilled = b.sext(b.call(rt.libc("__uflow"), [stream]), I64)
        b.branch(done)
        b.position_at_end(done)
        phi = b.phi(I64)
        phi.add_incoming(byte, fast)
        phi.add_incoming(refilled, slow)
        return phi

    # ------------------------------------------------------------ opaque pointers, clocks

    @LOWERINGS.register("null_ptr")
    def bi_null_ptr(self, e, args):
        return ir.Constant(PTR, None)

    @LOWERINGS.register("fork_clock")
    def bi_fork_clock(self, e, args):
        return None

    def _clock(self, which: int) -> ir.Value:
        """Milliseconds from clock_gettime (CLOCK_REALTIME 0, CLOCK_MONOTONIC 1)."""
        b = self.b
        ts = self.alloca_builder.alloca(ir.ArrayType(I64, 2), name="timespec")
        if self.rt.target.is_wasi:
            from .wasi import clock_ms
            return clock_ms(b, self.rt, ts, which)
        self.c("clock_gettime", [ir.Constant(I32, which), ts])
        sec = b.load(b.gep(ts, [ir.Constant(I64, 0), ir.Constant(I64, 0)], inbounds=True), typ=I64)
        nsec = b.load(b.gep(ts, [ir.Constant(I64, 0), ir.Constant(I64, 1)], inbounds=True), typ=I64)
        return b.add(b.mul(sec, ir.Constant(I64, 1000)), b.sdiv(nsec, ir.Constant(I64, 1000000)))

    @LOWERINGS.register("clock_ms")
    def bi_clock_ms(self, e, args):
        return self._clock(1)

    @LOWERINGS.register("clock_unix_ms")
    def bi_clock_unix_ms(self, e, args):
        return self._clock(0)

    # ------------------------------------------------------------ floats

    @LOWERINGS.register("float_of")
    def bi_float_of(self, e, args):
        return self.b.sitofp(args[0], DOUBLE)

    @LOWERINGS.register("truncate")
    def bi_truncate(self, e, args):
        """Traps on NaN and on any magnitude at or past 2^63; never `fptosi.sat`."""
        return self.checked_to_int(args[0], DOUBLE)

    def checked_to_int(self, x, fty):
        """A float of type `fty` to `int`, trapping on NaN and at or past ±2^63 (the one rule of
        `truncate` and `int_of_f32`)."""
        b = self.b
        bad = b.or_(b.fcmp_unordered("uno", x, x),
                    b.or_(b.fcmp_ordered(">=", x, ir.Constant(fty, TWO63)),
                          b.fcmp_ordered("<=", x, ir.Constant(fty, -TWO63))))
        self.gen.trap_if(bad, TrapKind.CONVERSION)
        return b.fptosi(x, I64)

    @LOWERINGS.register("is_nan")
    def bi_is_nan(self, e, args):
        return self.b.fcmp_unordered("uno", args[0], args[0])

    @LOWERINGS.register("sqrt")
    def bi_sqrt(self, e, args):
        f = self.rt.module.declare_intrinsic("llvm.sqrt", [DOUBLE])
        return self.b.call(f, [args[0]])

    @LOWERINGS.register("bits_of")
    def bi_bits_of(self, e, args):
        b, x = self.b, args[0]
        bits = b.bitcast(x, I64)
        return b.select(b.fcmp_unordered("uno", x, x), ir.Constant(I64, CANONICAL_NAN), bits)

    @LOWERINGS.register("float_of_bits")
    def bi_float_of_bits(self, e, args):
        return self.b.bitcast(args[0], DOUBLE)

    # ------------------------------------------------------------ f32 (edition 6)

    @LOWERINGS.register("f32_of")
    def bi_f32_of(self, e, args):
        return self.b.fptrunc(args[0], FLOATT)  # nearest, ties to even; too large is infinity

    @LOWERINGS.register("float_of32")
    def bi_float_of32(self, e, args):
        return self.b.fpext(args[0], DOUBLE)  # exact

    @LOWERINGS.register("bits_of32")
    def bi_bits_of32(self, e, args):
        b, x = self.b, args[0]
        bits = b.select(b.fcmp_unordered("uno", x, x), ir.Constant(I32, CANONICAL_NAN32), b.bitcast(x, I32))
        return b.zext(bits, I64)

    @LOWERINGS.register("f32_of_bits")
    def bi_f32_of_bits(self, e, args):
        return self.b.bitcast(self.b.trunc(args[0], I32), FLOATT)

    @LOWERINGS.register("sqrt32")
    def bi_sqrt32(self, e, args):
        f = self.rt.module.declare_intrinsic("llvm.sqrt", [FLOATT])
        return self.b.call(f, [args[0]])

    @LOWERINGS.register("f32_of_int")
    def bi_f32_of_int(self, e, args):
        return self.b.sitofp(args[0], FLOATT)  # one rounding, from the integer

    @LOWERINGS.register("int_of_f32")
    def bi_int_of_f32(self, e, args):
        """`truncate`'s three traps at f32: NaN, at or above 2^63, at or below -2^63."""
        return self.checked_to_int(args[0], FLOATT)

    # ------------------------------------------------------------ bits (edition 8)

    def _bit_intrinsic(self, name: str, x: ir.Value, poison_flag: bool = True) -> ir.Value:
        full = f"llvm.{name}.i64"
        f = self.rt.module.globals.get(full)
        if f is None:
            params = [I64, I1] if poison_flag else [I64]
            f = ir.Function(self.rt.module, ir.FunctionType(I64, params), name=full)
        return self.b.call(f, [x, ir.Constant(I1, 0)] if poison_flag else [x])

    @LOWERINGS.register("trailing_zeros")
    def bi_trailing_zeros(self, e, args):
        return self._bit_intrinsic("cttz", args[0])

    @LOWERINGS.register("leading_zeros")
    def bi_leading_zeros(self, e, args):
        return self._bit_intrinsic("ctlz", args[0])

    @LOWERINGS.register("popcount")
    def bi_popcount(self, e, args):
        return self._bit_intrinsic("ctpop", args[0], poison_flag=False)

    # ------------------------------------------------------------ wide words (edition 7)

    def _word_pair(self, e: ast.Call, first: ir.Value, second: ir.Value) -> ir.Value:
        """The `(int, int)` result of a wide-word builtin, in the tuple's own layout."""
        return self.gen.agg.build_record(self.gen.ty(e), [first, second])

    @LOWERINGS.register("mul_wide")
    def bi_mul_wide(self, e, args):
        """The exact unsigned 128-bit product as (hi, lo): one `mul i128`, which never traps."""
        b = self.b
        i128 = ir.IntType(128)
        p = b.mul(b.zext(args[0], i128), b.zext(args[1], i128))
        hi = b.trunc(b.lshr(p, ir.Constant(i128, 64)), I64)
        return self._word_pair(e, hi, b.trunc(p, I64))

    def _with_overflow(self, op: str, x: ir.Value, y: ir.Value) -> tuple[ir.Value, ir.Value]:
        full = f"llvm.{op}.with.overflow.i64"
        f = self.rt.module.globals.get(full)
        if f is None:
            f = ir.Function(self.rt.module, ir.FunctionType(ir.LiteralStructType([I64, I1]), [I64, I64]), name=full)
        r = self.b.call(f, [x, y])
        return self.b.extract_value(r, 0), self.b.extract_value(r, 1)

    @LOWERINGS.register("add_carry", "sub_borrow")
    def bi_carry_chain(self, e, args):
        """a +/- b +/- (carry != 0) on unsigned words, as (low word, carry or borrow out 0/1);
        the two overflow bits cannot both be set, so `or` is their sum."""
        b = self.b
        op = "uadd" if e.callee.name == "add_carry" else "usub"
        first, o1 = self._with_overflow(op, args[0], args[1])
        carry = b.zext(b.icmp_unsigned("!=", args[2], ir.Constant(I64, 0)), I64)
        word, o2 = self._with_overflow(op, first, carry)
        return self._word_pair(e, word, b.zext(b.or_(o1, o2), I64))

    # ------------------------------------------------------------ slices and memory moves

    @LOWERINGS.register("copy_within")
    def bi_copy_within(self, e, args):
        b = self.b
        s, dst, src, n = args
        length = b.extract_value(s, 1)
        zero = ir.Constant(I64, 0)
        bad = b.or_(b.or_(b.icmp_signed("<", dst, zero), b.icmp_signed("<", src, zero)),
                    b.icmp_signed("<", n, zero))
        self.gen.trap_if(bad, TrapKind.CHECK)
        # n <= len - dst and n <= len - src, with the differences formed only when safe.
        self.gen.trap_if(b.or_(b.icmp_signed(">", dst, length), b.icmp_signed(">", src, length)), TrapKind.CHECK)
        self.gen.trap_if(b.or_(b.icmp_signed(">", n, b.sub(length, dst)), b.icmp_signed(">", n, b.sub(length, src))), TrapKind.CHECK)
        base = b.extract_value(s, 0)
        d = b.gep(base, [dst], inbounds=True, source_etype=I8)
        r = b.gep(base, [src], inbounds=True, source_etype=I8)
        b.call(self.rt.libc("memmove"), [d, r, n])
        return ir.Constant(I64, 0)

    @LOWERINGS.register("copy_into")
    def bi_copy_into(self, e, args):
        b = self.b
        dst, src = args
        n = b.extract_value(src, 1)
        self.gen.trap_if(b.icmp_signed(">", n, b.extract_value(dst, 1)), TrapKind.CHECK)
        b.call(self.rt.libc("memmove"), [b.extract_value(dst, 0), b.extract_value(src, 0), n])
        return n

    @LOWERINGS.register("index_of_byte")
    def bi_index_of_byte(self, e, args):
        b = self.b
        s, byte = args
        p = b.extract_value(s, 0)
        hit = b.call(self.rt.libc("memchr"), [p, b.zext(byte, I32), b.extract_value(s, 1)])
        off = b.sub(b.ptrtoint(hit, I64), b.ptrtoint(p, I64))
        return b.select(b.icmp_unsigned("==", hit, ir.Constant(PTR, None)), ir.Constant(I64, -1), off)

    @LOWERINGS.register("load_le64")
    def bi_load_le64(self, e, args):
        b = self.b
        s, at = args
        length = b.extract_value(s, 1)
        self.gen.trap_if(b.or_(b.icmp_signed("<", at, ir.Constant(I64, 0)),
                           b.icmp_signed(">", at, b.sub(length, ir.Constant(I64, 8)))), TrapKind.CHECK)
        p = b.gep(b.extract_value(s, 0), [at], inbounds=True, source_etype=I8)
        return b.load(p, typ=I64, align=1)

    @LOWERINGS.register("byte_mask64")
    def bi_byte_mask64(self, e, args):
        """Bit k set when `text[at + k] == b`, k in 0..64 (runtime.md §1): one unaligned
        64-byte vector load, a lane-wise compare against `b` and the 64 lanes read as an int."""
        b = self.b
        s, at, byte = args
        length = b.extract_value(s, 1)
        self.gen.trap_if(b.or_(b.icmp_signed("<", at, ir.Constant(I64, 0)),
                           b.icmp_signed(">", at, b.sub(length, ir.Constant(I64, 64)))), TrapKind.CHECK)
        vec = ir.VectorType(I8, 64)
        p = b.gep(b.extract_value(s, 0), [at], inbounds=True, source_etype=I8)
        lanes = b.load(p, typ=vec, align=1)
        one = b.insert_element(ir.Constant(vec, ir.Undefined), byte, ir.Constant(I32, 0))
        splat = b.shuffle_vector(one, ir.Constant(vec, ir.Undefined), ir.Constant(ir.VectorType(I32, 64), [0] * 64))
        return b.bitcast(b.icmp_unsigned("==", lanes, splat), I64)

    # ------------------------------------------------------------ command line

    @LOWERINGS.register("arg_count")
    def bi_arg_count(self, e, args):
        return self.b.load(self.rt.argc, typ=I64)

    @LOWERINGS.register("arg")
    def bi_arg(self, e, args):
        b = self.b
        n = args[1]
        self.gen.trap_if(b.icmp_unsigned(">=", n, b.load(self.rt.argc, typ=I64)), TrapKind.CHECK)
        argv = b.load(self.rt.argv, typ=PTR)
        p = b.load(b.gep(argv, [n], inbounds=True, source_etype=PTR), typ=PTR)
        length = b.call(self.rt.libc("strlen"), [p])
        r = b.insert_value(ir.Constant(SLICE, ir.Undefined), p, 0)
        return b.insert_value(r, length, 1)

    # ------------------------------------------------------------ the heap

    def _malloc_checked(self, size: ir.Value) -> ir.Value:
        p = self.rt.malloc(self.b, size)
        self.gen.trap_if(self.b.icmp_unsigned("==", p, ir.Constant(PTR, None)), TrapKind.ALLOCATION)
        return p

    @LOWERINGS.register("box")
    def bi_box(self, e, args):
        t = self.gen.ty(e.args[1])
        lt = self.gen.lty(t)
        size = self.layout.size(lt) if lt is not None else 1
        p = self._malloc_checked(ir.Constant(I64, max(size, 1)))
        if lt is not None:
            self.b.store(args[1], p)
        return p

    @LOWERINGS.register("unbox")
    def bi_unbox(self, e, args):
        lt = self.gen.lty(self.gen.ty(e))
        v = None if lt is None else self.b.load(args[1], typ=lt)
        self.rt.free(self.b, args[1])
        return v

    @LOWERINGS.register("contents")
    def bi_contents(self, e, args) -> Optional[ir.Value]:
        """`contents(&b)`: the reference to a box's contents (one load; a boxed slice is already
        its (ptr, len) pair)."""
        ref = args[0]
        box_t = self.gen.ty(e.args[0]).target
        inner = box_t.inner
        if isinstance(inner, Slice):
            return self.b.load(ref, typ=SLICE)
        if self.gen.lty(inner) is None:
            return None
        return self.b.load(ref, typ=PTR)

    @LOWERINGS.register("box_slice")
    def bi_box_slice(self, e, args):
        b = self.b
        n, fill = args[1], args[2]
        elem = self.gen.ty(e.args[2])
        store_t, stride = self.layout.elem_storage(elem)
        self.gen.trap_if(b.icmp_signed("<", n, ir.Constant(I64, 0)), TrapKind.ALLOCATION)
        mul = b.call(self.rt.intrinsic("llvm.smul.with.overflow", I64), [n, ir.Constant(I64, stride)])
        self.gen.trap_if(b.extract_value(mul, 1), TrapKind.ALLOCATION)
        size = b.extract_value(mul, 0)
        p = self._malloc_checked(b.select(b.icmp_signed("==", size, ir.Constant(I64, 0)), ir.Constant(I64, 1), size))
        self.gen.fill_loop(p, n, fill, elem, stride)
        r = b.insert_value(ir.Constant(SLICE, ir.Undefined), p, 0)
        return b.insert_value(r, n, 1)

    @LOWERINGS.register("unbox_slice")
    def bi_unbox_slice(self, e, args):
        s = args[1]
        self.rt.free(self.b, self.b.extract_value(s, 0))
        return self.b.extract_value(s, 1)

    # ------------------------------------------------------------ checked output (edition 5)

    @LOWERINGS.register("flush_out")
    def bi_flush_out(self, e, args):
        """`fflush(stdout)` then `ferror(stdout)`: Ok(0), Failed(errno) when the flush failed,
        Failed(5) (EIO) when an earlier write already failed; the error flag stays set."""
        b, rt = self.b, self.rt
        stream = b.load(rt.stream("stdout"), typ=PTR)
        rc = b.call(rt.libc("fflush"), [stream])
        errno = b.sext(b.load(b.call(rt.libc("__errno_location"), []), typ=I32), I64)
        err = b.call(rt.libc("ferror"), [stream])
        failed_flush = b.icmp_signed("!=", rc, ir.Constant(I32, 0))
        failed_before = b.icmp_signed("!=", err, ir.Constant(I32, 0))
        code = b.select(failed_flush, errno, ir.Constant(I64, 5))
        failed = b.or_(failed_flush, failed_before)
        return self.gen.agg.make_variant(self.gen.ty(e), b.select(failed, ir.Constant(I64, 1), ir.Constant(I64, 0)),
                                 [b.select(failed, code, ir.Constant(I64, 0))])

    # ------------------------------------------------------------ files (edition 1)

    def c(self, name: str, args: list) -> ir.Value:
        from .runtime import LIBC
        return self.rt.call_c(self.b, name, LIBC[name], args)

    def path_cstring(self, e: ast.Call, path: ir.Value) -> ir.Value:
        """Check a path against the capability's prefix (ending there or continuing at `/`, and
        no `..` anywhere: otherwise trap) and return a NUL-terminated malloc'd copy."""
        return self.prefixed_cstring(self.gen.res(e).prefix, path)

    def prefixed_cstring(self, prefix: str, path: ir.Value) -> ir.Value:
        """`path_cstring` against a given prefix (an `Exec`'s, which its type carries)."""
        b = self.b
        ptr, length = b.extract_value(path, 0), b.extract_value(path, 1)
        dots = self.ml.string(b"..")
        hit = self.c("memmem", [ptr, length, b.extract_value(dots, 0), ir.Constant(I64, 2)])
        self.gen.trap_if(b.icmp_unsigned("!=", hit, ir.Constant(PTR, None)), TrapKind.CHECK)
        if prefix:
            data = prefix.encode()
            plen = ir.Constant(I64, len(data))
            self.gen.trap_if(b.icmp_unsigned("<", length, plen), TrapKind.CHECK)
            lit = self.ml.string(data)
            same = self.c("memcmp", [ptr, b.extract_value(lit, 0), plen])
            self.gen.trap_if(b.icmp_signed("!=", same, ir.Constant(I32, 0)), TrapKind.CHECK)
            if not prefix.endswith("/"):
                # Either the path is exactly the prefix, or it continues at a `/`.
                exact = b.icmp_unsigned("==", length, plen)
                at = b.gep(ptr, [b.select(exact, ir.Constant(I64, 0), plen)], inbounds=False, source_etype=I8)
                ch = b.load(at, typ=I8)
                ok = b.or_(exact, b.icmp_unsigned("==", ch, ir.Constant(I8, ord("/"))))
                self.gen.trap_if(b.xor(ok, ir.Constant(I1, 1)), TrapKind.CHECK)
        buf = self._malloc_checked(b.add(length, ir.Constant(I64, 1)))
        b.call(self.rt.libc("memmove"), [buf, ptr, length])
        b.store(ir.Constant(I8, 0), b.gep(buf, [length], inbounds=True, source_etype=I8))
        return buf

    def open_path(self, e: ast.Call, path: ir.Value, flags: int) -> tuple[ir.Value, ir.Value]:
        """openat(AT_FDCWD, path, flags | O_CLOEXEC, 0644) through the variadic declaration;
        returns (fd as i64, errno as i64)."""
        b = self.b
        cpath = self.path_cstring(e, path)
        at, oflags = -100, flags | 0o2000000  # AT_FDCWD, O_CLOEXEC
        if self.rt.target.is_wasi:
            from .wasi import AT_FDCWD, open_flags
            at, oflags = AT_FDCWD, open_flags(flags)
        fd = self.c("openat", [ir.Constant(I32, at), cpath, ir.Constant(I32, oflags), ir.Constant(I32, 0o644)])
        errno = b.sext(b.load(self.c("__errno_location", []), typ=I32), I64)
        self.rt.free(b, cpath)
        return b.sext(fd, I64), errno

    @LOWERINGS.register("open_read")
    def bi_open_read(self, e, args):
        b = self.b
        fd, errno = self.open_path(e, args[1], 0)
        failed = b.icmp_signed("<", fd, ir.Constant(I64, 0))
        return self.gen.agg.make_variant(self.gen.ty(e), b.select(failed, ir.Constant(I64, 1), ir.Constant(I64, 0)),
                                 [b.select(failed, errno, fd)])

    @LOWERINGS.register("file_read")
    def bi_file_read(self, e, args):
        b = self.b
        handle, buf = args
        fd = b.load(handle, typ=I64)  # `&!x File`: the descriptor lives in the caller's binding
        n = self.c("read", [fd, b.extract_value(buf, 0), b.extract_value(buf, 1)])
        errno = b.sext(b.load(self.c("__errno_location", []), typ=I32), I64)
        tag = b.select(b.icmp_signed(">", n, ir.Constant(I64, 0)), ir.Constant(I64, 0),
                       b.select(b.icmp_signed("==", n, ir.Constant(I64, 0)), ir.Constant(I64, 1), ir.Constant(I64, 2)))
        payload = b.select(b.icmp_signed("<", n, ir.Constant(I64, 0)), errno, n)
        return self.gen.agg.make_variant(self.gen.ty(e), tag, [payload])

    @LOWERINGS.register("file_close")
    def bi_file_close(self, e, args):
        return self.b.sext(self.c("close", [args[0]]), I64)

    @LOWERINGS.register("fs_read")
    def bi_fs_read(self, e, args):
        """Read as much of the file as fits in `into`; the count, or -1."""
        fd, _ = self.open_path(e, args[1], 0)
        return self.transfer(fd, args[2], "read", "fs_read")

    @LOWERINGS.register("fs_write")
    def bi_fs_write(self, e, args):
        """Create/truncate the file and write all of `bytes`; the count, or -1."""
        fd, _ = self.open_path(e, args[1], 0o1 | 0o100 | 0o1000)
        return self.transfer(fd, args[2], "write", "fs_write")

    def transfer(self, fd: ir.Value, data: ir.Value, call: str, label: str) -> ir.Value:
        """Move the whole slice through `read`/`write` on fd (if it opened), then close it.
        The result is the byte count, or -1 when the open or a transfer failed. A `read` of 0
        is the end of the file; a `write` of 0 is a failure."""
        b = self.b
        result = self.alloca_builder.alloca(I64, name=f"{label}.result")
        done_count = self.alloca_builder.alloca(I64, name=f"{label}.count")
        b.store(ir.Constant(I64, -1), result)
        opened = self.func.append_basic_block(f"{label}.opened")
        done = self.func.append_basic_block(f"{label}.done")
        b.cbranch(b.icmp_signed("<", fd, ir.Constant(I64, 0)), done, opened)
        b.position_at_end(opened)
        b.store(ir.Constant(I64, 0), done_count)
        head = self.func.append_basic_block(f"{label}.loop")
        body = self.func.append_basic_block(f"{label}.body")
        close = self.func.append_basic_block(f"{label}.close")
        b.branch(head)
        b.position_at_end(head)
        have = b.load(done_count, typ=I64)
        left = b.sub(b.extract_value(data, 1), have)
        b.cbranch(b.icmp_signed(">", left, ir.Constant(I64, 0)), body, close)
        b.position_at_end(body)
        p = b.gep(b.extract_value(data, 0), [have], inbounds=True, source_etype=I8)
        n = self.c(call, [fd, p, left])
        stop = b.icmp_signed("<=", n, ir.Constant(I64, 0))
        failed = b.icmp_signed("<", n, ir.Constant(I64, 0)) if call == "read" else stop
        b.store(b.select(failed, ir.Constant(I64, -1), b.add(have, b.select(stop, ir.Constant(I64, 0), n))),
                done_count)
        b.cbranch(stop, close, head)
        b.position_at_end(close)
        self.c("close", [fd])
        b.store(b.load(done_count, typ=I64), result)
        b.branch(done)
        b.position_at_end(done)
        return b.load(result, typ=I64)


# Lowerings kept in modules of their own (registered on import).
from . import crypto, dirs, files, net, poller, process, threads  # noqa: E402,F401
