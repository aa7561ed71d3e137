"""Lowering a checked program to LLVM IR text with llvmlite's IR builder.

One LLVM function per reachable cancho function (`@lexs_<module.name>`), locals in entry-block
allocas (promoted by O2), traps as inline `ud2` so a trap is SIGILL with nothing flushed, and a C
`main` wrapper that stashes argc/argv and returns `lexs_main`'s result truncated to i32
(runtime.md §0, §3). Capabilities have no run-time representation and are dropped everywhere.

It reads only the checker's typed side table (`check/typed.py`: each expression's type and
resolution), never the tree's own attributes. `FnLowering` dispatches expressions through
EXPR_LOWERINGS (one lowering per node class) and statements by `match`, and is composed of
`agg` (aggregates.py) and `builtins` (builtins.py), which hold a typed reference back to it.
Lowering cannot fail on checked input; if it does, `LoweringFailure` reports it as `internal`
at the innermost statement or expression being lowered.
"""

from __future__ import annotations

import gc
import hashlib
import re
import struct
from contextlib import contextmanager
from typing import TYPE_CHECKING, Callable, Iterator, Optional

from llvmlite import ir

from .. import ast
from ..check.checked import CheckedFn
from ..check.typed import CallKind, CallTarget, FnValue, Local, StaticRef
from ..check.program import CheckedProgram
from ..check.types import (substitute, BOOL, BYTE, CPTR, F32, FLOAT, INT, Ref, Slice, Type)
from ..diagnostics import Diagnostic, Rule
from ..target import HOST, Target
from ..layout import ARENA_BYTES
from .aggregates import AggregateLowering
from .fncache import FnKeys, LoweredFn
from .builtins import BuiltinLowering
from .layout import Layout
from .runtime import Runtime
from ..trapsites import RelativeSite, TrapKind, TrapTable, absolute, site_number

if TYPE_CHECKING:
    from ..modcache import ModuleCache

I1, I8, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(32), ir.IntType(64)
PTR = ir.PointerType()
DOUBLE, FLOATT = ir.DoubleType(), ir.FloatType()
SLICE = ir.LiteralStructType([PTR, I64])


def symbol(key: str) -> str:
    """The LLVM name of a cancho function: `lexs_` + module path + name."""
    module, name = key.split("::")
    return "lexs_" + (module + "." if module else "") + name


LOCAL_NAME_MAX = 64


def local_name(text: str) -> str:
    """An LLVM local value name for a binding: at most ``LOCAL_NAME_MAX`` characters. LLVM cuts
    local names past 1,024 characters, and two cut names then collide when the IR is parsed
    again; the name is for reading the IR only, llvmlite keeps shortened duplicates apart."""
    return text[:LOCAL_NAME_MAX]


# Checks named by the builtin called (`a check of `copy_into` failed`).
CALL_NAMED = frozenset({TrapKind.CHECK, TrapKind.ALLOCATION, TrapKind.CONVERSION})


def site_range(node: ast.Node) -> tuple[int, int]:
    """Where a trap of ``node`` is shown: a binary operator's own characters (found between its
    operands), else the node's span."""
    span = node.span
    if isinstance(node, ast.Binary):
        text = span.source.text
        at = text.find(node.op, node.left.span.end, node.right.span.start)
        if at >= 0:
            return at, at + len(node.op)
    return span.start, span.end


class LoweringFailure(Exception):
    """Lowering failed on a construct the checker accepted: a bug of ours, reported as
    `internal` at that construct (the innermost statement or expression being lowered)."""

    def __init__(self, node: ast.Node, cause: BaseException):
        what = "statement" if isinstance(node, ast.Stmt) else "expression" if isinstance(node, ast.Expr) else "function"
        super().__init__(f"the code generator failed on this {what}: {type(cause).__name__}: {cause}; "
                         "this is a bug in cancho-kernel")
        self.span = node.span


def float_constant(e: ast.FloatLit) -> ir.Constant:
    """A float literal from its IEEE bit pattern (binary32 for `f32`)."""
    if e.is_f32:
        return ir.Constant(FLOATT, struct.unpack("<f", struct.pack("<I", e.bits))[0])
    return ir.Constant(DOUBLE, struct.unpack("<d", struct.pack("<Q", e.bits))[0])


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector for the duration of a build.

    Lowering allocates a few dozen llvmlite objects per statement and frees none of them before
    the module is printed, so every full collection it triggers walks a heap that only grows:
    with the collector running, 16,000 statements took 4.7 s to lower instead of 1.1 s, the
    super-linear step of issue 12 §4. Reference counting still frees what dies meanwhile; the
    collector is restored (if it was on) afterwards."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def lower_program(prog: CheckedProgram, target: Target = HOST, cache: Optional["ModuleCache"] = None
                  ) -> tuple[Optional[str], list[Diagnostic]]:
    """:func:`lower_program_sites` without the trap table."""
    text, diags, _ = lower_program_sites(prog, target, cache)
    return text, diags


def lower_program_sites(prog: CheckedProgram, target: Target = HOST, cache: Optional["ModuleCache"] = None
                        ) -> tuple[Optional[str], list[Diagnostic], TrapTable]:
    """LLVM IR text for an accepted program, or an `internal` diagnostic located at the construct
    whose lowering failed (never an exception: lowering cannot fail on checked input, so a
    failure is a bug of ours). With ``cache``, function instances lowered before (by key,
    ``fncache.py``) are put back instead of lowered; the text is the same either way. The cache
    holds host lowerings only: another target is always lowered afresh."""
    try:
        with collector_paused():
            if cache is not None and target == HOST:
                try:
                    ml = ModuleLowering(prog, target, cache)
                    return ml.lower(), [], ml.traps
                except KeptTextsDisagree:
                    pass  # two kept texts declare one symbol differently: lower it all afresh
            ml = ModuleLowering(prog, target)
            return ml.lower(), [], ml.traps
    except LoweringFailure as e:
        return None, [Diagnostic(Rule.INTERNAL, str(e), e.span)], TrapTable()


class KeptTextsDisagree(Exception):
    """Two functions' records name one global with different texts (a kept record made in
    another program, e.g. a C symbol declared with another type): the module is lowered afresh."""


# A global's name in llvmlite's text (always quoted) and a named type's.
_GLOBAL_REF = re.compile(r'@"([^"\\]*)"')
_TYPE_REF = re.compile(r'%"([^"\\]*)"')


class ModuleLowering:
    """Builds the LLVM module for one program: each function instance lowered (or, with a
    cache, put back from a :class:`fncache.LoweredFn`) into a record of its own text and what it
    names, and the module's text assembled from the records in one canonical order."""

    def __init__(self, prog: CheckedProgram, target: Target = HOST, cache: Optional["ModuleCache"] = None):
        from ..backends import native

        self.prog = prog
        self.module = ir.Module(name="cancho", context=ir.Context())  # its own named types
        self.module.triple = native.target_triple(target)
        self.module.data_layout = native.data_layout(target)
        self.rt = Runtime(self.module, target)
        self.layout = Layout(prog.types, self.module.data_layout, self.module.context)
        self.functions: dict[tuple, ir.Function] = {}
        self.by_name: dict[str, ir.Function] = {}  # instances by LLVM name, in creation order
        self.pending: list[tuple[str, dict, ir.Function]] = []
        self.records: dict[str, LoweredFn] = {}
        self.requests: Optional[list[tuple[str, tuple]]] = None  # instances the current body asks for
        self.cache = cache.lowered if cache is not None else None
        self.keys = FnKeys(prog, cache) if cache is not None else None
        self.debug = None  # a listing's `debuglines.DebugLines`: statements tagged with their lines
        self.key_of: dict[str, str] = {}  # LLVM name -> cancho function key
        self.traps = TrapTable()  # filled by `lower`, from every record's sites

    def lower(self) -> str:
        main = self.instance(self.prog.main, {})
        while self.pending:
            key, tsub, func = self.pending.pop()
            ck = self.keys.key(key, tsub, func.name) if self.keys is not None else None
            rec = self.cache.get(ck) if self.cache is not None and ck is not None else None
            if rec is not None:
                for callee, targs in rec.callees:
                    self.instance(callee, dict(targs))
            else:
                rec = self.lower_fn(key, tsub, func)
                if self.cache is not None:
                    if ck is not None:
                        self.cache.put(ck, func.name, rec)
                    else:
                        self.cache.note_lowered(func.name)
            self.records[func.name] = rec
        text = self.assemble(self.rt.entry_wrapper(main))
        self.traps = self.trap_table()
        return text

    def trap_table(self) -> TrapTable:
        """Every function's trap sites placed in its declaration as the program has it now
        (a kept record's sites are relative to its declaration, `trapsites.RelativeSite`)."""
        table = TrapTable()
        for name, rec in self.records.items():
            decl = self.prog.fns[self.key_of[name]].item.decl
            for rel in rec.traps:
                table.add(rel.number, absolute(rel, decl.span))
        return table

    def lower_fn(self, key: str, tsub: dict, func: ir.Function) -> LoweredFn:
        """Lower one instance and make its record."""
        fn = self.prog.fns[key]
        self.requests = []
        lowering = FnLowering(self, fn, func, tsub)
        try:
            lowering.lower()
        except (LoweringFailure, RecursionError):
            raise
        except Exception as x:  # outside any statement: the signature or the frame
            raise LoweringFailure(fn.item.decl.name, x) from x
        callees, self.requests = tuple(self.requests), None
        text = str(func)
        globals_ = self.named_globals(text)
        return LoweredFn(text, callees, tuple(globals_.items()),
                         tuple(self.named_types([text, *globals_.values()]).items()), tuple(lowering.sites))

    def named_globals(self, text: str) -> dict[str, str]:
        """The globals this text names that are not function instances, with what they name in
        turn (a helper's body, such as a thread's start routine, names `free`): name -> text."""
        found: dict[str, str] = {}
        todo = _GLOBAL_REF.findall(text)
        while todo:
            name = todo.pop(0)
            if name in self.by_name or name in found:
                continue
            found[name] = str(self.module.globals[name])
            todo += _GLOBAL_REF.findall(found[name])
        return found

    def named_types(self, texts: list[str]) -> dict[str, str]:
        """The named struct types these texts use, with the ones their bodies use: name -> text."""
        known = self.module.context.identified_types
        found: dict[str, str] = {}
        todo = [n for t in texts for n in _TYPE_REF.findall(t)]
        while todo:
            n = todo.pop()
            if n in found or n not in known:
                continue
            found[n] = known[n].get_declaration()
            todo += _TYPE_REF.findall(found[n].split("=", 1)[1])
        return dict(sorted(found.items()))

    def assemble(self, entry: ir.Function) -> str:
        """The module's text: header, named types and globals (each sorted by name), then the
        function definitions in the order they were first asked for, then the C entry (`main`,
        or the target's own, with whatever it names)."""
        types: dict[str, str] = {}
        globals_: dict[str, str] = {g.name: str(g) for g in (self.rt.argc, self.rt.argv)}
        entry_text = str(entry)
        globals_.update((n, t) for n, t in self.named_globals(entry_text).items() if n != entry.name)
        defs: list[str] = []
        for name in self.by_name:
            rec = self.records[name]
            defs.append(rec.text)
            for table, entries in ((types, rec.types), (globals_, rec.globals)):
                for n, text in entries:
                    if table.setdefault(n, text) != text:
                        raise KeptTextsDisagree(n)
        ordered = sorted(globals_.items(), key=lambda kv: (0 if kv[1].startswith("@") else 1, kv[0]))
        head = [f'; ModuleID = "{self.module.name}"', f'target triple = "{self.module.triple}"',
                f'target datalayout = "{self.module.data_layout}"', ""]
        tail = [self.debug.module_text()] if self.debug is not None else []
        return "\n".join([*head, *(types[n] for n in sorted(types)), *(t for _, t in ordered), *defs, entry_text,
                          *tail])

    def static(self, item) -> ir.Value:
        """A static's value: `@lexs_static_<name>`, its compile-time bytes; (ptr, count)."""
        from ..check.evaluate import encode
        value = self.prog.statics[item.key]
        name = "lexs_static_" + (item.module + "." if item.module else "") + item.name
        g = self.module.globals.get(name)
        if g is None:
            data = encode(value) or b"\0"
            arr = ir.ArrayType(I8, len(data))
            g = ir.GlobalVariable(self.module, arr, name=name)
            g.linkage = "private"
            g.global_constant = True
            g.unnamed_addr = True
            g.initializer = ir.Constant(arr, bytearray(data))
        return ir.Constant.literal_struct([g, ir.Constant(I64, value.length)])

    def instance(self, key: str, tsub: dict) -> ir.Function:
        """The LLVM function for one instantiation of a cancho function (monomorphisation):
        declared on first request and queued for lowering. One function per LLVM name (a kept
        record calls its callees by name)."""
        fn = self.prog.fns[key]
        targs = tuple(tsub[("T", n)] for n in fn.sig.tparams)
        if self.requests is not None:
            self.requests.append((key, tuple(tsub.items())))
        got = self.functions.get((key, targs))
        if got is not None:
            return got
        name = symbol(key) + ("[" + ", ".join(map(str, targs)) + "]" if targs else "")
        got = self.by_name.get(name)
        if got is not None:
            self.functions[(key, targs)] = got
            return got
        params = [self.layout.lty(substitute(t, tsub)) for _, t in fn.sig.params]
        ret = self.layout.lty(substitute(fn.sig.ret, tsub))
        fnty = ir.FunctionType(ret if ret is not None else I64, [p for p in params if p is not None])
        f = ir.Function(self.module, fnty, name=name)
        f.linkage = "internal"
        self.functions[(key, targs)] = f
        self.by_name[name] = f
        self.key_of[name] = key
        self.pending.append((key, tsub, f))
        return f

    def string(self, data: bytes) -> ir.Value:
        """A string literal: a private constant named by its content (so a function's text does
        not depend on the strings before it), no NUL; value (ptr, len)."""
        body = data if data else b"\0"
        arr = ir.ArrayType(I8, len(body))
        name = "str." + hashlib.sha256(data).hexdigest()[:16]
        g = self.module.globals.get(name)
        if g is None:
            g = ir.GlobalVariable(self.module, arr, name=name)
            g.linkage = "private"
            g.global_constant = True
            g.unnamed_addr = True
            g.initializer = ir.Constant(arr, bytearray(body))
        return ir.Constant.literal_struct([g, ir.Constant(I64, len(data))])


class FnLowering:
    """Lowers one function body."""

    def __init__(self, ml: ModuleLowering, fn: CheckedFn, func: ir.Function, tsub: dict):
        self.ml = ml
        self.layout = ml.layout
        self.tsub = tsub  # this instance's type arguments: {("T", name): type}
        self.rt = ml.rt
        self.fn = fn
        self.typed = fn.typed
        self.func = func
        self.entry = self.func.append_basic_block("entry")
        self.alloca_builder = ir.IRBuilder(self.entry)
        body = self.func.append_basic_block("body")
        self.b = ir.IRBuilder(body)
        # The parts of the lowering, composed (each holds a typed reference back to this one).
        self.agg = AggregateLowering(self)
        self.builtins = BuiltinLowering(self)
        self.slots: dict[int, ir.Value] = {}  # Local.uid -> alloca
        self.arenas: list[tuple[ir.Value, ir.Value]] = []  # (base slot, bump slot), innermost last
        self.arena_regions: list = []  # the checker's Region of each open arena, parallel to arenas
        self.sites: list[RelativeSite] = []  # this function's trap sites, in order
        self.at: Optional[ast.Node] = None  # the innermost statement or expression being lowered
        self.frames: list[dict] = []  # open blocks, innermost last: their defers and arenas

    # ------------------------------------------------------------ plumbing

    def T(self, t: Type) -> Type:
        """A type of the checked body, with this instance's type arguments substituted."""
        return substitute(t, self.tsub) if self.tsub else t

    def lty(self, t: Type) -> Optional[ir.Type]:
        return self.layout.lty(self.T(t))

    def ty(self, e: ast.Expr) -> Type:
        """A checked expression's type in this instance."""
        t = self.typed.types[e]
        return substitute(t, self.tsub) if self.tsub else t

    def res(self, e: ast.Expr):
        """What the checker resolved a name, call or member expression to."""
        return self.typed.resolved[e]

    def lower(self) -> None:
        if self.ml.debug is not None:  # a listing: the prologue at the declaration's line
            self.b.debug_metadata = self.ml.debug.at(self.func, self.fn.item.decl.name.span)
        args = iter(self.func.args)
        for loc in self.fn.params:
            t = self.lty(self.T(loc.ty))
            if t is None:
                continue
            slot = self.slot(loc)
            self.b.store(next(args), slot)
        self.block(self.fn.item.decl.body)
        if not self.b.block.is_terminated:
            self.b.unreachable()
        self.alloca_builder.branch(self.func.blocks[1])

    def slot(self, loc: Local) -> Optional[ir.Value]:
        t = self.lty(self.T(loc.ty))
        if t is None:
            return None
        s = self.slots.get(loc.uid)
        if s is None:
            s = self.alloca_builder.alloca(t, name=local_name(loc.name))
            self.slots[loc.uid] = s
        return s

    def trap_site(self, kind: TrapKind, detail: str = "") -> int:
        """Record a trap site at the construct being lowered; its number (`trapsites.py`)."""
        number = site_number(self.func.name, len(self.sites))
        if not detail and kind in CALL_NAMED and isinstance(self.at, ast.Call):
            sp = self.at.callee.span
            detail = sp.source.text[sp.start:sp.end]
        start, end = site_range(self.at) if self.at is not None else (0, 0)
        base = self.fn.item.decl.span.start
        self.sites.append(RelativeSite(number, kind, detail, start - base, end - base))
        return number

    def trap_block(self, kind: TrapKind, detail: str = "") -> ir.Block:
        """A block of its own for one trap site: its own trap instruction, so no two checks are
        merged and the site is known from the faulting address."""
        block = self.func.append_basic_block("trap")
        self.rt.trap(ir.IRBuilder(block), self.trap_site(kind, detail))
        return block

    def trap_if(self, cond: ir.Value, kind: TrapKind, detail: str = "") -> None:
        """Branch to a trap of this site when cond holds; continue otherwise."""
        ok = self.func.append_basic_block("ok")
        self.b.cbranch(cond, self.trap_block(kind, detail), ok)
        self.b.position_at_end(ok)

    def fresh_if_terminated(self) -> None:
        if self.b.block.is_terminated:
            self.b.position_at_end(self.func.append_basic_block("dead"))

    # ------------------------------------------------------------ statements

    def block(self, block: ast.Block, arena: Optional[tuple] = None) -> None:
        """Lower a block. Its frame holds its `defer`s and, for a `region` body, its arena; both
        are unwound when control falls off the end (and by `return`, for every open frame)."""
        frame = {"defers": [], "arena": arena}
        self.frames.append(frame)
        for s in block.stmts:
            self.fresh_if_terminated()
            self.stmt(s)
        self.frames.pop()
        if not self.b.block.is_terminated:
            self.unwind(frame)

    def unwind(self, frame: dict) -> None:
        for d in reversed(frame["defers"]):
            self.fresh_if_terminated()
            self.expr(d)
        if frame["arena"] is not None:
            self.rt.free(self.b, self.b.load(frame["arena"][0], typ=PTR))

    def stmt(self, s: ast.Stmt) -> None:
        """Lower one statement. Lowering cannot fail on checked input; if it does, the failure is
        reported at the innermost statement or expression being lowered (`LoweringFailure`)."""
        if self.ml.debug is not None and s.span is not None:
            self.b.debug_metadata = self.ml.debug.at(self.func, s.span)
        outer, self.at = self.at, s
        try:
            match s:
                case ast.Let():
                    v = self.expr(s.value)
                    slot = self.slot(self.typed.bindings[s])
                    if slot is not None:
                        self.b.store(v, slot)
                case ast.LetStruct() | ast.LetTuple():
                    v = self.expr(s.value)
                    self.agg.let_parts(s, self.ty(s.value), v, self.typed.bindings[s])
                case ast.ExprStmt():
                    self.expr(s.expr)
                case ast.Assign():
                    self.assign(s)
                case ast.If():
                    self.if_stmt(s)
                case ast.While():
                    self.while_stmt(s)
                case ast.Return():
                    self.return_stmt(s)
                case ast.Match():
                    self.agg.match_stmt(s)
                case ast.Defer():
                    self.frames[-1]["defers"].append(s.expr)
                case ast.Borrow():
                    bb = self.typed.bindings[s]
                    slot = self.slot(bb.ref)
                    if slot is not None:
                        self.b.store(self.slot(bb.target), slot)
                    self.block(s.body)
                case ast.RegionStmt():
                    self.region(s)
                case _:
                    raise TypeError(f"no lowering for the statement {type(s).__name__}")
        except (LoweringFailure, RecursionError):
            raise
        except Exception as x:
            raise LoweringFailure(s, x) from x
        finally:
            self.at = outer

    def while_stmt(self, s: ast.While) -> None:
        cond_bb = self.func.append_basic_block("while.cond")
        body_bb = self.func.append_basic_block("while.body")
        end_bb = self.func.append_basic_block("while.end")
        self.b.branch(cond_bb)
        self.b.position_at_end(cond_bb)
        c = self.expr(s.cond)
        self.b.cbranch(c, body_bb, end_bb)
        self.b.position_at_end(body_bb)
        self.block(s.body)
        if not self.b.block.is_terminated:
            self.b.branch(cond_bb)
        self.b.position_at_end(end_bb)

    def return_stmt(self, s: ast.Return) -> None:
        """The value first, then every open frame's defers and arenas, innermost first."""
        v = self.expr(s.value)
        saved = list(self.frames)
        for frame in reversed(saved):
            self.frames = saved[:saved.index(frame)]
            self.unwind(frame)
        self.frames = saved
        self.b.ret(v if v is not None else ir.Constant(I64, 0))

    def region(self, s: ast.RegionStmt) -> None:
        """`region a { .. }`: one ARENA_BYTES `malloc` (trapping when it fails), freed on every exit."""
        base_slot = self.alloca_builder.alloca(PTR, name=local_name(f"arena.{s.name.name}") + ".base")
        bump_slot = self.alloca_builder.alloca(PTR, name=local_name(f"arena.{s.name.name}") + ".bump")
        base = self.rt.malloc(self.b, ir.Constant(I64, ARENA_BYTES))
        self.trap_if(self.b.icmp_unsigned("==", base, ir.Constant(PTR, None)), TrapKind.ALLOCATION, "region")
        self.b.store(base, base_slot)
        self.b.store(base, bump_slot)
        self.arenas.append((base_slot, bump_slot))
        self.arena_regions.append(self.typed.regions[s])
        self.block(s.body, arena=(base_slot, bump_slot))
        self.arenas.pop()
        self.arena_regions.pop()

    def if_stmt(self, s: ast.If) -> None:
        c = self.expr(s.cond)
        then_bb = self.func.append_basic_block("if.then")
        else_bb = self.func.append_basic_block("if.else")
        end_bb = self.func.append_basic_block("if.end")
        self.b.cbranch(c, then_bb, else_bb)
        self.b.position_at_end(then_bb)
        self.block(s.then)
        if not self.b.block.is_terminated:
            self.b.branch(end_bb)
        self.b.position_at_end(else_bb)
        if isinstance(s.else_, ast.If):
            self.if_stmt(s.else_)
        elif s.else_ is not None:
            self.block(s.else_)
        if not self.b.block.is_terminated:
            self.b.branch(end_bb)
        self.b.position_at_end(end_bb)

    def assign(self, s: ast.Assign) -> None:
        v = self.expr(s.value)
        t = s.target
        match t:
            case ast.Name():
                slot = self.slot(self.res(t))
                if slot is not None:
                    self.b.store(v, slot)
            case ast.Index():
                self.store_elem(v, self.element_ptr(t), self.ty(t))
            case ast.Unary(op="*"):
                p = self.expr(t.operand)
                if p is not None:
                    self.b.store(v, p)
            case ast.FieldAccess() | ast.TupleIndex():
                self.agg.assign_member(t, v)
            case _:
                raise TypeError(f"no lowering for an assignment to {type(t).__name__}")

    # ------------------------------------------------------------ expressions

    def expr(self, e: ast.Expr) -> Optional[ir.Value]:
        """Lower one expression (through EXPR_LOWERINGS, one per node class) to its value, None
        for a value with no run-time representation; a failure of ours is reported at the
        innermost expression (`LoweringFailure`)."""
        outer, self.at = self.at, e
        try:
            return EXPR_LOWERINGS[type(e)](self, e)
        except (LoweringFailure, RecursionError):
            raise
        except Exception as x:
            raise LoweringFailure(e, x) from x
        finally:
            self.at = outer

    def name(self, e: ast.Name) -> Optional[ir.Value]:
        r = self.res(e)
        if isinstance(r, FnValue):
            return self.ml.instance(r.item.key, {})
        if isinstance(r, StaticRef):
            return self.ml.static(r.item)
        slot = self.slot(r)
        return None if slot is None else self.b.load(slot, typ=self.lty(r.ty))

    def slice_expr(self, e: ast.SliceExpr) -> ir.Value:
        """`s[lo..hi]`: traps unless lo <= hi <= len(s)."""
        s = self.expr(e.base)
        lo = self.expr(e.lo)
        hi = self.expr(e.hi)
        length = self.b.extract_value(s, 1)
        bad = self.b.or_(self.b.icmp_unsigned(">", hi, length), self.b.icmp_unsigned(">", lo, hi))
        self.trap_if(bad, TrapKind.SLICE)
        _, stride = self.layout.elem_storage(self.ty(e).target.elem)
        p = self.b.gep(self.b.extract_value(s, 0), [self.b.mul(lo, ir.Constant(I64, stride))], inbounds=True,
                       source_etype=I8)
        r = self.b.insert_value(ir.Constant(SLICE, ir.Undefined), p, 0)
        return self.b.insert_value(r, self.b.sub(hi, lo), 1)

    def element_ptr(self, e: ast.Index) -> ir.Value:
        s = self.expr(e.base)
        i = self.expr(e.index)
        self.trap_if(self.b.icmp_unsigned(">=", i, self.b.extract_value(s, 1)), TrapKind.INDEX)
        store_t, stride = self.layout.elem_storage(self.ty(e))
        off = i if stride == 1 else self.b.mul(i, ir.Constant(I64, stride))
        return self.b.gep(self.b.extract_value(s, 0), [off], inbounds=True, source_etype=I8)

    def load_elem(self, ptr: ir.Value, t: Type) -> ir.Value:
        store_t, _ = self.layout.elem_storage(t)
        v = self.b.load(ptr, typ=store_t, align=1)
        return self.b.trunc(v, I1) if t == BOOL else v

    def store_elem(self, v: ir.Value, ptr: ir.Value, t: Type) -> None:
        if t == BOOL:
            v = self.b.zext(v, I64)
        self.b.store(v, ptr, align=1)

    def alloc_slice(self, e: ast.AllocSlice) -> ir.Value:
        n = self.expr(e.count)
        fill = self.expr(e.fill)
        ty = self.ty(e)
        elem = ty.target.elem
        store_t, stride = self.layout.elem_storage(elem)
        b = self.b
        self.trap_if(b.icmp_signed("<", n, ir.Constant(I64, 0)), TrapKind.ALLOCATION, "alloc_slice")
        mul = b.call(self.rt.intrinsic("llvm.smul.with.overflow", I64), [n, ir.Constant(I64, stride)])
        self.trap_if(b.extract_value(mul, 1), TrapKind.ARENA)
        size = b.extract_value(mul, 0)
        at = self.bump(self.arena_slots(ty.region), size)
        self.fill_loop(at, n, fill, elem, stride)
        r = b.insert_value(ir.Constant(SLICE, ir.Undefined), at, 0)
        return b.insert_value(r, n, 1)

    def bump(self, slots: tuple, size: ir.Value) -> ir.Value:
        """Take `size` bytes from an arena (no alignment rounding); trap past its 64 KiB."""
        b = self.b
        base_slot, bump_slot = slots
        at = b.load(bump_slot, typ=PTR)
        at_i = b.ptrtoint(at, I64)
        next_i = b.add(at_i, size)
        end_i = b.add(b.ptrtoint(b.load(base_slot, typ=PTR), I64), ir.Constant(I64, ARENA_BYTES))
        self.trap_if(b.or_(b.icmp_unsigned(">", next_i, end_i), b.icmp_unsigned("<", next_i, at_i)), TrapKind.ARENA)
        b.store(b.gep(at, [size], inbounds=True, source_etype=I8), bump_slot)
        return at

    def alloc_one(self, e: ast.Alloc) -> Optional[ir.Value]:
        v = self.expr(e.value)
        lt = self.lty(self.ty(e.value))
        if lt is None:
            return None
        size = self.layout.runtime.alloc_size(self.ty(e.value))  # a word a leaf (compiler/layout.py)
        at = self.bump(self.arena_slots(self.ty(e).region), ir.Constant(I64, size))
        self.b.store(v, at, align=1)
        return at

    def fill_loop(self, at: ir.Value, n: ir.Value, fill: ir.Value, elem: Type, stride: int) -> None:
        """Store `fill` into n consecutive elements starting at `at` (a real loop)."""
        b = self.b
        head = self.func.append_basic_block("fill.head")
        body = self.func.append_basic_block("fill.body")
        done = self.func.append_basic_block("fill.done")
        pre = b.block
        b.branch(head)
        b.position_at_end(head)
        k = b.phi(I64)
        k.add_incoming(ir.Constant(I64, 0), pre)
        b.cbranch(b.icmp_signed("<", k, n), body, done)
        b.position_at_end(body)
        off = k if stride == 1 else b.mul(k, ir.Constant(I64, stride))
        self.store_elem(fill, b.gep(at, [off], inbounds=True, source_etype=I8), elem)
        k.add_incoming(b.add(k, ir.Constant(I64, 1)), b.block)
        b.branch(head)
        b.position_at_end(done)

    def arena_slots(self, target) -> tuple[ir.Value, ir.Value]:
        """The slots of the open arena the checker resolved `alloc[a]`/`alloc_slice[a]` to."""
        for idx in range(len(self.arena_regions) - 1, -1, -1):
            if self.arena_regions[idx] is target:
                return self.arenas[idx]
        raise NotImplementedError(f"arena `{target.name}` is not open here")

    def unary(self, e: ast.Unary) -> ir.Value:
        v = self.expr(e.operand)
        t = self.ty(e)
        if e.op == "-":
            if t == INT:
                r = self.b.call(self.rt.intrinsic("llvm.ssub.with.overflow", I64), [ir.Constant(I64, 0), v])
                self.trap_if(self.b.extract_value(r, 1), TrapKind.NEGATION)
                return self.b.extract_value(r, 0)
            return self.b.fneg(v)
        if e.op == "!":
            return self.b.xor(v, ir.Constant(I1, 1))
        if e.op == "~":
            return self.b.xor(v, ir.Constant(I64, -1))
        if e.op == "*":
            return self.b.load(v, typ=self.lty(t))
        raise NotImplementedError(e.op)

    def binary(self, e: ast.Binary) -> ir.Value:
        op = e.op
        b = self.b
        if op in ("&&", "||"):
            left = self.expr(e.left)
            start = b.block
            rhs = self.func.append_basic_block("logic.rhs")
            end = self.func.append_basic_block("logic.end")
            if op == "&&":
                b.cbranch(left, rhs, end)
            else:
                b.cbranch(left, end, rhs)
            b.position_at_end(rhs)
            right = self.expr(e.right)
            rhs_end = self.b.block
            self.b.branch(end)
            self.b.position_at_end(end)
            phi = self.b.phi(I1)
            phi.add_incoming(ir.Constant(I1, 0 if op == "&&" else 1), start)
            phi.add_incoming(right, rhs_end)
            return phi
        lt = self.ty(e.left)
        a = self.expr(e.left)
        c = self.expr(e.right)
        b = self.b
        if lt in (FLOAT, F32):
            if op == "+":
                return b.fadd(a, c)
            if op == "-":
                return b.fsub(a, c)
            if op == "*":
                return b.fmul(a, c)
            if op == "/":
                return b.fdiv(a, c)
            # Ordered predicates, except `!=`, which is unordered (true when either side is NaN).
            return b.fcmp_unordered(op, a, c) if op == "!=" else b.fcmp_ordered(op, a, c)
        if op in ("+", "-", "*"):
            name = {"+": "llvm.sadd.with.overflow", "-": "llvm.ssub.with.overflow", "*": "llvm.smul.with.overflow"}[op]
            r = b.call(self.rt.intrinsic(name, I64), [a, c])
            self.trap_if(b.extract_value(r, 1), TrapKind.OVERFLOW, op)
            return b.extract_value(r, 0)
        if op in ("/", "%"):
            return self.divide(op, a, c)
        if op in ("<<", ">>"):
            return self.shift(op, a, c)
        if op == "&":
            return b.and_(a, c)
        if op == "|":
            return b.or_(a, c)
        if op == "^":
            return b.xor(a, c)
        if op in ("==", "!="):
            return b.icmp_unsigned(op, a, c) if lt in (BOOL, BYTE, CPTR) else b.icmp_signed(op, a, c)
        if op in ("<", "<=", ">", ">="):
            return b.icmp_signed(op, a, c)
        raise NotImplementedError(op)

    def shift(self, op: str, a: ir.Value, c: ir.Value) -> ir.Value:
        """Checked shift: an amount outside 0..63 traps (one unsigned compare also catches
        negatives). Only a constant amount known to be in range skips the check; a constant
        amount out of range traps unconditionally — `shl`/`ashr` by it would be poison, and the
        checker folds only all-literal operations, so `x << 64` reaches us (issue 12)."""
        b = self.b
        if isinstance(c, ir.Constant) and 0 <= c.constant < 64:
            return b.shl(a, c) if op == "<<" else b.ashr(a, c)
        if isinstance(c, ir.Constant):
            b.branch(self.trap_block(TrapKind.SHIFT, op))
            b.position_at_end(self.func.append_basic_block("after.shift.trap"))
            return ir.Constant(I64, 0)  # never observed: the block above has no predecessor
        self.trap_if(b.icmp_unsigned(">=", c, ir.Constant(I64, 64)), TrapKind.SHIFT, op)
        return b.shl(a, c) if op == "<<" else b.ashr(a, c)

    def divide(self, op: str, a: ir.Value, c: ir.Value) -> ir.Value:
        """Checked division: zero divisor traps; a divisor of -1 takes a real branch so that
        `sdiv MIN, -1` / `srem MIN, -1` are never reached (MIN / -1 traps, x % -1 is 0)."""
        b = self.b
        self.trap_if(b.icmp_signed("==", c, ir.Constant(I64, 0)),
                     TrapKind.DIVISION if op == "/" else TrapKind.REMAINDER, op)
        minus_one = self.func.append_basic_block("div.minus_one")
        normal = self.func.append_basic_block("div.normal")
        end = self.func.append_basic_block("div.end")
        b.cbranch(b.icmp_signed("==", c, ir.Constant(I64, -1)), minus_one, normal)
        b.position_at_end(minus_one)
        if op == "/":
            self.trap_if(b.icmp_signed("==", a, ir.Constant(I64, -(1 << 63))), TrapKind.OVERFLOW, op)
            special = b.sub(ir.Constant(I64, 0), a)
        else:
            special = ir.Constant(I64, 0)
        special_end = b.block
        b.branch(end)
        b.position_at_end(normal)
        plain = b.sdiv(a, c) if op == "/" else b.srem(a, c)
        b.branch(end)
        b.position_at_end(end)
        phi = b.phi(I64)
        phi.add_incoming(special, special_end)
        phi.add_incoming(plain, normal)
        return phi

    # ------------------------------------------------------------ calls

    def call(self, e: ast.Call) -> Optional[ir.Value]:
        target: CallTarget = self.res(e)
        if self.fn.evaluated is not None and e in self.fn.evaluated:
            return self.evaluated_value(e)
        if target.kind is CallKind.FN:
            args = [self.expr(a) for a in e.args]
            tsub = {k: self.T(v) for k, v in target.subst.items() if k[0] == "T"}
            f = self.ml.instance(target.item.key, tsub)
            return self.b.call(f, [a for a in args if a is not None])
        if target.kind is CallKind.BUILTIN:
            return self.builtins.builtin(target.name, e)
        if target.kind is CallKind.INDIRECT:
            fp = self.expr(e.callee)
            ft = self.ty(e.callee)
            args = [self.expr(a) for a in e.args]
            params = [self.lty(p) for p in ft.params]
            ret = self.lty(ft.ret)
            fnty = ir.FunctionType(ret if ret is not None else I64, [p for p in params if p is not None])
            # A typed view of the pointer so llvmlite knows the callee's function type: stored and
            # read back through a slot (its builder folds a bitcast between pointers away, as
            # they are all `ptr`); SROA removes the slot.
            slot = self.alloca_builder.alloca(PTR, name="fnptr")
            self.b.store(fp, slot)
            callee = self.b.load(slot, typ=fnty.as_pointer())
            return self.b.call(callee, [a for a in args if a is not None])
        if target.kind is CallKind.EXTERN:
            return self.foreign_call(target, e)
        raise NotImplementedError(f"calls of kind {target.kind} are not supported yet by cancho-kernel's code generator")

    def evaluated_value(self, e: ast.Call) -> ir.Value:
        """A pure call the checker evaluated (check/callfold.py): its scalar value, no call."""
        v = self.fn.evaluated[e]
        lt = self.lty(self.ty(e))
        if isinstance(v, float):
            return ir.Constant(lt, v)
        return ir.Constant(lt, int(v) & ((1 << lt.width) - 1) if not isinstance(v, bool) else int(v))

    def foreign_call(self, target: CallTarget, e: ast.Call) -> ir.Value:
        """A C call: capabilities dropped, a byte slice as (pointer, length), `bool` as i8,
        `c_int` read as i32 and sign-extended (runtime.md §6)."""
        from ..check.types import CINT
        cargs, ctypes_ = [], []
        for a in e.args:
            v = self.expr(a)
            t = self.ty(a)
            if v is None:
                continue
            if isinstance(t, Ref) and isinstance(t.target, Slice):
                cargs += [self.b.extract_value(v, 0), self.b.extract_value(v, 1)]
                ctypes_ += [PTR, I64]
            elif t == BOOL:
                cargs.append(self.b.zext(v, I8))
                ctypes_.append(I8)
            else:
                cargs.append(v)
                ctypes_.append(v.type)
        ret_t = target.sig.ret
        cret = I32 if ret_t == CINT else (I8 if ret_t == BOOL else self.lty(ret_t))
        r = self.rt.call_c(self.b, target.item.name, ir.FunctionType(cret, ctypes_), cargs)
        if ret_t == CINT:
            return self.b.sext(r, I64)
        if ret_t == BOOL:
            return self.b.icmp_unsigned("!=", r, ir.Constant(I8, 0))
        return r


# How each expression node class is lowered, looked up by the node's own class (the dispatch
# of `FnLowering.expr`; the checker and the static evaluator keep tables alike).
EXPR_LOWERINGS: dict[type, Callable[[FnLowering, ast.Expr], Optional[ir.Value]]] = {
    ast.Name: FnLowering.name,
    ast.IntLit: lambda g, e: ir.Constant(I64, e.value),
    ast.Call: FnLowering.call,
    ast.Binary: FnLowering.binary,
    ast.Index: lambda g, e: g.load_elem(g.element_ptr(e), g.ty(e)),
    ast.FieldAccess: lambda g, e: g.agg.member(e),
    ast.TupleIndex: lambda g, e: g.agg.member(e),
    ast.Unary: FnLowering.unary,
    ast.BoolLit: lambda g, e: ir.Constant(I1, int(e.value)),
    ast.FloatLit: lambda g, e: float_constant(e),
    ast.StrLit: lambda g, e: g.ml.string(e.value),
    ast.SliceExpr: FnLowering.slice_expr,
    ast.AllocSlice: FnLowering.alloc_slice,
    ast.Alloc: FnLowering.alloc_one,
    ast.TupleExpr: lambda g, e: g.agg.tuple_expr(e),
    ast.StructLit: lambda g, e: g.agg.struct_lit(e),
    ast.VariantExpr: lambda g, e: g.agg.variant_expr(e),
}
