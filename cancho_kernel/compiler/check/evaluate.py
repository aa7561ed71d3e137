"""Compile-time evaluation of `static` items: an interpreter over the checked AST.

It uses the run-time semantics (consteval.py's arithmetic, bounds checks, and compiler/layout.py's
arena capacity and element strides, which codegen follows too), so a static's value is exactly
what the program would compute; a trap or running out of fuel is a
compile-time refusal (`static-item`), never a run-time fallback (runtime.md §5.4).

The compile-time budget (docs/decisions.md) is per program, shared by all its statics: FUEL steps
(one per statement, expression and loop iteration) and MAX_BYTES of values, counted as 8 bytes a
slice element of a scalar (1 for `byte`; an aggregate its run-time stride) and checked *before* an
allocation is made. Exceeding either is
`static-item` at the static being evaluated, long before the compiler's own memory is at risk.
Scalar slices are held in `array`s, so the evaluator's memory is what the budget counts.

Aggregates are values, as at run time: a tuple is a Python tuple, a struct a `StructV` (its fields
by name) and an enum an `EnumV` (variant and payload); an update through a `&!` replaces the
borrowed binding's whole value, so no two bindings ever share a mutable aggregate.
"""

from __future__ import annotations

import ctypes
import math
import struct
import sys
from array import array
from dataclasses import dataclass
from fractions import Fraction

from .. import ast
from ..diagnostics import Refusal, Rule
from ..layout import ARENA_BYTES, RuntimeLayout
from ..lexer import f32_bits_of
from .builtins import EVALUATIONS
from .checked import CheckedFn
from .typed import CallKind, CallTarget, FnValue, Local, StaticRef
from .consteval import Trap, int_binary, int_neg, wrap
from .types import BOOL, BYTE, F32, FLOAT, INT, STATIC, Region, Type

FUEL = 5_000_000
MASK64 = (1 << 64) - 1
MAX_BYTES = 16 << 20  # 16 MiB of slice elements, for all statics together

# How a scalar slice is stored (machine layout = what codegen emits): typecode by element type.
TYPECODES = {INT: "q", BOOL: "q", FLOAT: "d", BYTE: "B"}


class BudgetExceeded(Exception):
    """The compile-time budget ran out; `run_static` turns it into a refusal at the static."""


@dataclass
class SliceV:
    """A slice value: a window onto a store (a typed array for scalars, else a list)."""

    store: list | array
    start: int
    length: int
    elem: Type

    def items(self) -> list | array:
        return self.store[self.start:self.start + self.length]


def new_store(elem: Type, n: int, fill) -> list | array:
    """n copies of fill: a typed array for scalars (8 bytes an element, 1 for bytes), else a list."""
    code = TYPECODES.get(elem)
    if code is None:
        return [fill] * n
    return array(code, [int(fill) if elem == BOOL else fill]) * n


@dataclass(frozen=True)
class StructV:
    """A struct value: its fields by name, as the literal or the update gave them. Immutable
    (a struct is copied by value, so an update through a reference replaces the whole value)."""

    fields: tuple[tuple[str, object], ...]

    def get(self, name: str):
        for n, v in self.fields:
            if n == name:
                return v
        raise KeyError(name)

    def with_field(self, name: str, value) -> "StructV":
        return StructV(tuple((n, value if n == name else v) for n, v in self.fields))


@dataclass(frozen=True)
class EnumV:
    """An enum value: the variant's name and its payload."""

    tag: str
    payload: tuple


@dataclass
class Cell:
    """A reference to a binding (from `borrow`): reads and writes go to the binding's frame."""

    frame: dict
    key: int


@dataclass
class Arena:
    """An open `region` block at compile time: how many of its ARENA_BYTES are taken."""

    region: Region
    used: int = 0

    def take(self, size: int) -> None:
        self.used += size
        if self.used > ARENA_BYTES:
            raise Trap(f"the {ARENA_BYTES // 1024} KiB arena is exhausted")


class _Return(Exception):
    def __init__(self, value):
        self.value = value


class Evaluator:
    """Evaluates static bodies and the pure functions they call."""

    def __init__(self, fns: dict[str, CheckedFn], statics: dict[str, "SliceV"], layout: RuntimeLayout):
        self.fns = fns
        self.statics = statics
        self.layout = layout
        self.fuel = FUEL
        self.bytes = 0
        self.frames: list[dict] = []
        self.arenas: list[Arena] = []  # the open `region` blocks, innermost last

    def tick(self, span) -> None:
        self.fuel -= 1
        if self.fuel <= 0:
            raise BudgetExceeded(f"it needs more than {FUEL:,} evaluation steps (line {span.line})")

    def arena(self, region: Region, span) -> Arena:
        """The open arena an allocation names (not merely the innermost one)."""
        for a in reversed(self.arenas):
            if a.region is region:
                return a
        raise Refusal(Rule.STATIC_ITEM, f"a static cannot allocate in `{region}` here", span)

    def charge(self, n: int, elem: Type, span) -> None:
        """Count n new elements against MAX_BYTES before they are made."""
        self.bytes += n * self.layout.stride(elem)
        if self.bytes > MAX_BYTES:
            raise BudgetExceeded(f"it needs more than {MAX_BYTES >> 20} MiB of values "
                                 f"(the allocation at line {span.line})")

    # ------------------------------------------------------------ entry

    def run_static(self, checked: CheckedFn) -> SliceV:
        name = checked.item.decl.name
        try:
            return self.call_fn(checked, [])
        except Trap as t:
            raise Refusal(Rule.STATIC_ITEM, f"evaluating `{name.name}` traps: {t.reason}", name.span)
        except BudgetExceeded as b:
            raise Refusal(Rule.STATIC_ITEM, f"`{name.name}` cannot be computed within the compile-time budget: {b}",
                          name.span)

    def call_fn(self, fn: CheckedFn, args: list):
        frame: dict = {}
        for loc, v in zip(fn.params, args):
            frame[loc.uid] = v
        self.frames.append(frame)
        try:
            self.block(fn.item.decl.body, fn)
        except _Return as r:
            return r.value
        finally:
            self.frames.pop()
        raise Trap("the function ended without returning")

    # ------------------------------------------------------------ statements

    def block(self, block: ast.Block, fn: CheckedFn) -> None:
        defers: list[ast.Expr] = []
        try:
            for s in block.stmts:
                self.stmt(s, fn, defers)
        finally:
            for d in reversed(defers):
                self.expr(d, fn)

    def set_local(self, loc: Local, v) -> None:
        self.frames[-1][loc.uid] = v

    def stmt(self, s: ast.Stmt, fn: CheckedFn, defers: list) -> None:
        self.tick(s.span)
        match s:
            case ast.Let():
                self.set_local(fn.typed.bindings[s], self.expr(s.value, fn))
            case ast.ExprStmt():
                self.expr(s.expr, fn)
            case ast.Assign():
                self.assign(s, fn)
            case ast.If():
                if self.expr(s.cond, fn):
                    self.block(s.then, fn)
                elif isinstance(s.else_, ast.If):
                    self.stmt(s.else_, fn, defers)
                elif s.else_ is not None:
                    self.block(s.else_, fn)
            case ast.While():
                while self.expr(s.cond, fn):
                    self.tick(s.span)
                    self.block(s.body, fn)
            case ast.Return():
                raise _Return(self.expr(s.value, fn))
            case ast.LetTuple():
                for loc, part in zip(fn.typed.bindings[s], self.expr(s.value, fn)):
                    self.set_local(loc, part)
            case ast.LetStruct():
                whole = self.expr(s.value, fn)
                for f, loc in zip(s.fields, fn.typed.bindings[s]):
                    self.set_local(loc, whole.get(f.name))
            case ast.Defer():
                defers.append(s.expr)
            case ast.Borrow():
                b = fn.typed.bindings[s]
                self.set_local(b.ref, Cell(self.frames[-1], b.target.uid))
                self.block(s.body, fn)
            case ast.RegionStmt():
                self.arenas.append(Arena(fn.typed.regions[s]))
                try:
                    self.block(s.body, fn)
                finally:
                    self.arenas.pop()
            case ast.Match():
                self.match(s, fn)
            case _:
                raise Refusal(Rule.STATIC_ITEM, f"a static cannot evaluate `{type(s).__name__}`", s.span)

    def assign(self, s: ast.Assign, fn: CheckedFn) -> None:
        v = self.expr(s.value, fn)
        t = s.target
        match t:
            case ast.Name():
                self.set_local(fn.typed.res(t), v)
            case ast.Index():
                sl = self.expr(t.base, fn)
                i = self.expr(t.index, fn)
                if not 0 <= i < sl.length:
                    raise Trap(f"index {i} is out of range for a slice of length {sl.length}")
                sl.store[sl.start + i] = v
            case ast.Unary(op="*"):
                c = self.expr(t.operand, fn)
                c.frame[c.key] = v
            case ast.FieldAccess() | ast.TupleIndex():
                c = self.expr(t.base, fn)  # a `&!` (type-checked): the binding it borrows
                if not isinstance(c, Cell):
                    raise Refusal(Rule.STATIC_ITEM, "a static cannot evaluate this assignment", s.span)
                c.frame[c.key] = self.updated(c.frame[c.key], t, v, fn)
            case _:
                raise Refusal(Rule.STATIC_ITEM, "a static cannot evaluate this assignment", s.span)

    def updated(self, whole, t: ast.FieldAccess | ast.TupleIndex, v, fn: CheckedFn):
        """`whole` with the member `t` names replaced by `v`."""
        if isinstance(t, ast.FieldAccess):
            return whole.with_field(t.name.name, v)
        idx = fn.typed.res(t).index
        return whole[:idx] + (v,) + whole[idx + 1:]

    def match(self, s: ast.Match, fn: CheckedFn) -> None:
        v = self.expr(s.scrutinee, fn)
        if isinstance(v, Cell):
            v = v.frame[v.key]
        for arm in s.arms:
            pat = arm.pattern
            if isinstance(pat, ast.VariantPattern) and pat.variant.name != v.tag:
                continue
            for i, loc in fn.typed.bindings[arm].binds:
                self.set_local(loc, v.payload[i])
            self.block(arm.body, fn)
            return

    # ------------------------------------------------------------ expressions

    def expr(self, e: ast.Expr, fn: CheckedFn):
        """Evaluate one expression through EXPR_EVALUATIONS (one per node class)."""
        self.tick(e.span)
        evaluation = EXPR_EVALUATIONS.get(type(e))
        if evaluation is None:
            raise Refusal(Rule.STATIC_ITEM, f"a static cannot evaluate `{type(e).__name__}`", e.span)
        return evaluation(self, e, fn)

    def index(self, e: ast.Index, fn: CheckedFn):
        sl = self.expr(e.base, fn)
        i = self.expr(e.index, fn)
        if not 0 <= i < sl.length:
            raise Trap(f"index {i} is out of range for a slice of length {sl.length}")
        return sl.store[sl.start + i]

    def member(self, e: ast.FieldAccess | ast.TupleIndex, fn: CheckedFn):
        v = self.expr(e.base, fn)
        if isinstance(v, Cell):
            v = v.frame[v.key]
        if isinstance(e, ast.FieldAccess):
            return v.get(e.name.name)
        return v[fn.typed.res(e).index]

    def str_lit(self, e: ast.StrLit, fn: CheckedFn) -> "SliceV":
        self.charge(len(e.value), BYTE, e.span)
        return SliceV(array("B", e.value), 0, len(e.value), BYTE)

    def slice_expr(self, e: ast.SliceExpr, fn: CheckedFn) -> "SliceV":
        sl = self.expr(e.base, fn)
        lo, hi = self.expr(e.lo, fn), self.expr(e.hi, fn)
        if not 0 <= lo <= hi <= sl.length:
            raise Trap(f"the range {lo}..{hi} does not fit a slice of length {sl.length}")
        return SliceV(sl.store, sl.start + lo, hi - lo, sl.elem)

    def name(self, e: ast.Name, fn: CheckedFn):
        r = fn.typed.res(e)
        if isinstance(r, StaticRef):
            return self.statics[r.item.key]
        if isinstance(r, FnValue):
            raise Refusal(Rule.STATIC_ITEM, "a static cannot use function values", e.span)
        return self.frames[-1][r.uid]

    def unary(self, e: ast.Unary, fn: CheckedFn):
        v = self.expr(e.operand, fn)
        if e.op == "-":
            return int_neg(v) if fn.typed.ty(e) == INT else -v
        if e.op == "!":
            return not v
        if e.op == "~":
            return ~v
        return v.frame[v.key]

    def alloc_slice(self, e: ast.AllocSlice, fn: CheckedFn) -> SliceV:
        n = self.expr(e.count, fn)
        fill = self.expr(e.fill, fn)
        ty = fn.typed.ty(e)
        elem = ty.target.elem
        if n < 0:
            raise Trap(f"`alloc_slice` of {n} elements")
        if ty.region != STATIC:  # the arena is checked first, as the run-time bump is
            self.arena(ty.region, e.span).take(n * self.layout.stride(elem))
        self.charge(n, elem, e.span)
        return SliceV(new_store(elem, n, fill), 0, n, elem)

    def binary(self, e: ast.Binary, fn: CheckedFn):
        if e.op == "&&":
            return self.expr(e.left, fn) and self.expr(e.right, fn)
        if e.op == "||":
            return self.expr(e.left, fn) or self.expr(e.right, fn)
        a, b = self.expr(e.left, fn), self.expr(e.right, fn)
        t = fn.typed.ty(e.left)
        if t == INT:
            return int_binary(e.op, a, b)
        if t == FLOAT:
            return float_binary(e.op, a, b)
        if t == F32:  # exact in binary64, so one rounding to binary32 is the f32 operation's
            r = float_binary(e.op, a, b)
            return to_f32(r) if isinstance(r, float) else r
        if e.op == "==":
            return a == b
        if e.op == "!=":
            return a != b
        raise Refusal(Rule.STATIC_ITEM, f"a static cannot evaluate `{e.op}` on `{t}`", e.span)

    def call(self, e: ast.Call, fn: CheckedFn):
        target: CallTarget = fn.typed.res(e)
        args = [self.expr(a, fn) for a in e.args]
        if target.kind is CallKind.FN:
            callee = self.fns.get(target.item.key)
            if callee is None or callee.sig.tparams:
                raise Refusal(Rule.STATIC_ITEM, f"a static cannot call `{target.name}` here", e.span)
            return self.call_fn(callee, args)
        if target.kind is CallKind.BUILTIN:
            return builtin(target.name, args, e)
        raise Refusal(Rule.STATIC_ITEM, f"a static cannot call `{target.name}`", e.span)


# How each expression node class is evaluated, looked up by the node's own class (the
# dispatch of `Evaluator.expr`; the checker and codegen keep tables alike). A class missing
# here (`alloc`, an indirect call's callee) is refused as `static-item`.
EXPR_EVALUATIONS = {
    ast.Name: Evaluator.name,
    ast.IntLit: lambda ev, e, fn: e.value,
    ast.BoolLit: lambda ev, e, fn: e.value,
    ast.Call: Evaluator.call,
    ast.Binary: Evaluator.binary,
    ast.Index: Evaluator.index,
    ast.FieldAccess: Evaluator.member,
    ast.TupleIndex: Evaluator.member,
    ast.Unary: Evaluator.unary,
    ast.FloatLit: lambda ev, e, fn: (struct.unpack("<f", struct.pack("<I", e.bits))[0] if e.is_f32
                                     else struct.unpack("<d", struct.pack("<Q", e.bits))[0]),
    ast.StrLit: Evaluator.str_lit,
    ast.SliceExpr: Evaluator.slice_expr,
    ast.AllocSlice: Evaluator.alloc_slice,
    ast.TupleExpr: lambda ev, e, fn: tuple(ev.expr(p, fn) for p in e.parts),
    ast.StructLit: lambda ev, e, fn: StructV(tuple((f.name.name, ev.expr(f.value, fn)) for f in e.fields)),
    ast.VariantExpr: lambda ev, e, fn: EnumV(e.variant.name, tuple(ev.expr(a, fn) for a in (e.args or []))),
}


def to_f32(x: float) -> float:
    """x rounded to binary32 (nearest, ties to even; past the largest finite is infinity), as
    C's conversion does it; struct's "f" would refuse an out-of-range value instead."""
    return ctypes.c_float(x).value


def float_binary(op: str, a: float, b: float):
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "/":
        if b == 0.0:
            if a == 0.0 or math.isnan(a):
                return math.nan
            return math.copysign(math.inf, a) * math.copysign(1.0, b)
        return a / b
    return {"==": a == b, "!=": not (a == b), "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]


def builtin(name: str, args: list, e: ast.Call):
    """A builtin call at compile time, through its registered evaluation (check/builtins.py)."""
    evaluation = EVALUATIONS.get(name)
    if evaluation is None:
        raise Refusal(Rule.STATIC_ITEM, f"a static cannot call the builtin `{name}`", e.span)
    return evaluation(args, e)


@EVALUATIONS.register("putchar", "write_bytes", "write_err", "getchar", "flush_out", "split", "narrow",
                      "contents", "box", "unbox", "box_slice", "unbox_slice", "arg_count", "arg",
                      "fs_read", "fs_write", "open_read", "file_read", "file_close", "clock_ms",
                      "clock_unix_ms", "fork_clock", "fork_heap")
def _needs_capability(args: list, e: ast.Call):
    """These take a capability, a handle or a box, and a static has none to give (its body takes
    no parameters and performs nothing), so the checker has refused the static before this."""
    raise Refusal(Rule.STATIC_ITEM, f"a static cannot call `{e.callee.name}`: it needs a capability", e.span)


@EVALUATIONS.register("spawn", "join")
def _threads(args: list, e: ast.Call):
    """A static is evaluated by the compiler, on no thread of the program's: it starts none."""
    raise Refusal(Rule.STATIC_ITEM, f"a static cannot call `{e.callee.name}`: it starts or joins a thread", e.span)


@EVALUATIONS.register("connect", "bind", "listen", "accept", "tcp_listen", "tcp_connect", "tcp_connect_start",
                      "tcp_accept", "conn_read", "conn_write", "conn_nonblocking", "conn_nodelay", "conn_peer",
                      "conn_connect_status", "conn_detach", "conn_attach", "conn_close", "listener_nonblocking",
                      "listener_close", "udp_connect", "udp_bind", "udp_recv", "udp_recv_from", "udp_send",
                      "udp_send_to", "udp_local_port", "udp_nonblocking", "udp_close", "udp_detach", "udp_attach",
                      "poller_new", "poller_add_listener", "poller_add_conn", "poller_add_udp", "poller_add_pipe",
                      "poller_add_child", "poller_add_signals", "poller_modify", "poller_remove", "poller_wait",
                      "poller_close", "signals_watch", "signals_pending", "signals_close")
def _reaches_the_system(args: list, e: ast.Call):
    """Sockets, pollers and signal claims exist only while a program runs: a static's value is
    computed when the program is compiled, so it cannot open, wait on or redeem one (even the
    verbs that take a bare descriptor or ticket, which name the running process's state)."""
    raise Refusal(Rule.STATIC_ITEM, f"a static cannot call `{e.callee.name}`: it needs the running program's "
                  "sockets, pollers or signals", e.span)


@EVALUATIONS.register("len")
def _len(args: list, e: ast.Call) -> int:
    return args[0].length


@EVALUATIONS.register("byte_of")
def _eval_byte_of(args: list, e: ast.Call) -> int:
    return _byte_of(args[0])


@EVALUATIONS.register("int_of", "value_barrier")
def _identity(args: list, e: ast.Call) -> int:
    return args[0]


@EVALUATIONS.register("wrapping_add")
def _wrapping_add(args: list, e: ast.Call) -> int:
    return wrap(args[0] + args[1])


@EVALUATIONS.register("wrapping_sub")
def _wrapping_sub(args: list, e: ast.Call) -> int:
    return wrap(args[0] - args[1])


@EVALUATIONS.register("wrapping_mul")
def _wrapping_mul(args: list, e: ast.Call) -> int:
    return wrap(args[0] * args[1])


@EVALUATIONS.register("float_of")
def _float_of(args: list, e: ast.Call) -> float:
    return float(args[0])


@EVALUATIONS.register("truncate")
def _truncate(args: list, e: ast.Call) -> int:
    x = args[0]
    if math.isnan(x) or x >= 2.0 ** 63 or x <= -(2.0 ** 63):
        raise Trap(f"`truncate({x})` is out of range")
    return int(x)


@EVALUATIONS.register("is_nan")
def _is_nan(args: list, e: ast.Call) -> bool:
    return math.isnan(args[0])


@EVALUATIONS.register("sqrt")
def _sqrt(args: list, e: ast.Call) -> float:
    return math.sqrt(args[0]) if args[0] >= 0 else math.nan


@EVALUATIONS.register("bits_of")
def _bits_of(args: list, e: ast.Call) -> int:
    x = args[0]
    if math.isnan(x):
        return 0x7FF8000000000000
    return struct.unpack("<q", struct.pack("<d", x))[0]


@EVALUATIONS.register("float_of_bits")
def _float_of_bits(args: list, e: ast.Call) -> float:
    return struct.unpack("<d", struct.pack("<q", args[0]))[0]


@EVALUATIONS.register("f32_of")
def _f32_of(args: list, e: ast.Call) -> float:
    return to_f32(args[0])


@EVALUATIONS.register("float_of32")
def _float_of32(args: list, e: ast.Call) -> float:
    return args[0]  # an f32 is held as the double it widens to exactly


@EVALUATIONS.register("bits_of32")
def _bits_of32(args: list, e: ast.Call) -> int:
    x = args[0]
    if math.isnan(x):
        return 0x7FC00000
    return struct.unpack("<I", struct.pack("<f", x))[0]


@EVALUATIONS.register("f32_of_bits")
def _f32_of_bits(args: list, e: ast.Call) -> float:
    return struct.unpack("<f", struct.pack("<I", args[0] & 0xFFFFFFFF))[0]


@EVALUATIONS.register("sqrt32")
def _sqrt32(args: list, e: ast.Call) -> float:
    return to_f32(_sqrt(args, e))  # the double root rounds to the correctly rounded f32 one


@EVALUATIONS.register("f32_of_int")
def _f32_of_int(args: list, e: ast.Call) -> float:
    n = args[0]
    bits = f32_bits_of(Fraction(abs(n)))  # one rounding from the integer, never through binary64
    x = struct.unpack("<f", struct.pack("<I", bits))[0]
    return -x if n < 0 else x


@EVALUATIONS.register("int_of_f32")
def _int_of_f32(args: list, e: ast.Call) -> int:
    x = args[0]
    if math.isnan(x) or x >= 2.0 ** 63 or x <= -(2.0 ** 63):
        raise Trap(f"`int_of_f32({x})` is out of range")
    return int(x)


@EVALUATIONS.register("trap")
def _trap(args: list, e: ast.Call):
    raise Trap("`trap()` was called")


@EVALUATIONS.register("release", "null_ptr")
def _zero(args: list, e: ast.Call) -> int:
    return 0


@EVALUATIONS.register("trailing_zeros")
def _trailing_zeros(args: list, e: ast.Call) -> int:
    x = args[0] & MASK64
    return 64 if x == 0 else (x & -x).bit_length() - 1


@EVALUATIONS.register("leading_zeros")
def _leading_zeros(args: list, e: ast.Call) -> int:
    return 64 - (args[0] & MASK64).bit_length()


@EVALUATIONS.register("popcount")
def _popcount(args: list, e: ast.Call) -> int:
    return (args[0] & MASK64).bit_count()


@EVALUATIONS.register("copy_within")
def _copy_within(args: list, e: ast.Call) -> int:
    s, dst, src, n = args
    if min(dst, src, n) < 0 or max(dst, src) > s.length or n > s.length - max(dst, src):
        raise Trap(f"`copy_within` of {n} bytes from {src} to {dst} does not fit a slice of length {s.length}")
    s.store[s.start + dst:s.start + dst + n] = s.store[s.start + src:s.start + src + n]
    return 0


@EVALUATIONS.register("copy_into")
def _copy_into(args: list, e: ast.Call) -> int:
    dst, src = args
    if src.length > dst.length:
        raise Trap(f"`copy_into` of {src.length} bytes into a slice of length {dst.length}")
    dst.store[dst.start:dst.start + src.length] = src.items()
    return src.length


@EVALUATIONS.register("index_of_byte")
def _index_of_byte(args: list, e: ast.Call) -> int:
    s, b = args
    return bytes(s.items()).find(b)


@EVALUATIONS.register("load_le64")
def _load_le64(args: list, e: ast.Call) -> int:
    s, at = args
    if not 0 <= at <= s.length - 8:
        raise Trap(f"`load_le64` at {at} does not fit a slice of length {s.length}")
    return int.from_bytes(bytes(s.store[s.start + at:s.start + at + 8]), "little", signed=True)


@EVALUATIONS.register("byte_mask64")
def _byte_mask64(args: list, e: ast.Call) -> int:
    s, at, b = args
    if not 0 <= at <= s.length - 64:
        raise Trap(f"`byte_mask64` at {at} does not fit a slice of length {s.length}")
    window = s.store[s.start + at:s.start + at + 64]
    return wrap(sum(1 << k for k, x in enumerate(window) if x == b))


@EVALUATIONS.register("mul_wide")
def _mul_wide(args: list, e: ast.Call) -> tuple[int, int]:
    p = (args[0] & MASK64) * (args[1] & MASK64)
    return wrap(p >> 64), wrap(p)


@EVALUATIONS.register("add_carry")
def _add_carry(args: list, e: ast.Call) -> tuple[int, int]:
    total = (args[0] & MASK64) + (args[1] & MASK64) + (args[2] != 0)
    return wrap(total), total >> 64


@EVALUATIONS.register("sub_borrow")
def _sub_borrow(args: list, e: ast.Call) -> tuple[int, int]:
    diff = (args[0] & MASK64) - (args[1] & MASK64) - (args[2] != 0)
    return wrap(diff), int(diff < 0)


def _byte_of(n: int) -> int:
    if not 0 <= n <= 255:
        raise Trap(f"`byte_of({n})` is outside 0..255")
    return n


def encode(v: SliceV) -> bytes:
    """A static's bytes as emitted: little-endian, stride 1 for byte and 8 otherwise."""
    items = v.items()
    if isinstance(items, array) and sys.byteorder == "little":
        return items.tobytes()
    out = bytearray()
    for x in v.items():
        if v.elem == BYTE:
            out.append(x)
        elif v.elem == BOOL:
            out += struct.pack("<q", 1 if x else 0)
        elif v.elem == FLOAT:
            out += struct.pack("<d", x)
        else:
            out += struct.pack("<q", x)
    return bytes(out)


@EVALUATIONS.register("open_append", "open_write", "open_new", "open_rw", "fs_rename", "fs_remove",
                      "file_write", "file_pwrite", "file_pread", "file_sync", "file_truncate",
                      "file_size", "file_lock", "open_dir", "dir_enter", "dir_open_read", "dir_close",
                      "dir_list", "dir_next", "dir_list_close", "dir_stat", "dir_open_new",
                      "dir_open_append", "dir_rename", "dir_rename_new", "dir_remove", "dir_sync",
                      "dir_mode", "dir_own_mode", "exec_spawn", "exec_spawn_in", "pipe_open",
                      "child_wait", "child_kill", "pipe_read", "pipe_write", "pipe_nonblocking",
                      "pipe_close", "child_end_close")
def _needs_the_system(args: list, e: ast.Call):
    """Files, directories and processes are the operating system's, which a program being
    compiled does not have: a static is data, so these are refused (and most need a capability
    or a handle, which a static's body cannot hold anyway)."""
    raise Refusal(Rule.STATIC_ITEM, f"a static cannot call `{e.callee.name}`: it needs the operating system at run time",
                  e.span)


@EVALUATIONS.register("hw_aes_gcm")
def _hw_aes_gcm(args: list, e: ast.Call):
    """The answer is the CPU's the program runs on (codegen/crypto_hw.py), which compiling
    cannot know: a static holding it would be the compiling machine's."""
    raise Refusal(Rule.STATIC_ITEM, "a static cannot call `hw_aes_gcm`: it answers for the CPU the program "
                  "runs on", e.span)


@EVALUATIONS.register("aes_encrypt_block", "ghash_update", "aes_ctr32", "ghash_powers", "gcm_tag")
def _writes_its_output(args: list, e: ast.Call):
    """These write into a unique slice, which a static's evaluation never holds."""
    raise Refusal(Rule.STATIC_ITEM, f"a static cannot call `{e.callee.name}`: it writes into a buffer", e.span)


@EVALUATIONS.register("gcm_tag_diff")
def _needs_the_cpu(args: list, e: ast.Call):
    """The CPU's instructions only (codegen/crypto_hw.py): nothing for compiling to run."""
    raise Refusal(Rule.STATIC_ITEM, "a static cannot call `gcm_tag_diff`: it runs on the CPU's AES "
                  "instructions, at run time", e.span)
