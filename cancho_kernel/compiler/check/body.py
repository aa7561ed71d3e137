"""Checking one function body: types, places, regions, effects performed, constant folding.

The walk types every expression (one rule per node class: EXPR_RULES) and records what each
name, call and member resolved to in a typed side table (`typed.py`; the syntax tree is never
written), and records the linearity event tree (`linearity.py`) at the same time, so the replay
sees exactly the evaluation order the code generator will emit. The checker is composed of
parts that hold a typed reference back to it: `rel` (unification and the outlives relation,
owning the body's inference variables), `agg` (aggregates and `match`) and `builtin_calls`.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Callable, Optional

from .. import ast
from ..diagnostics import Refusal, Rule
from ..resolve import ItemRef, ModuleScope
from ..source import Span
from . import builtins as B
from . import linearity as L
from .consteval import Trap, int_binary, int_neg
from .refusals import fail, mismatch
from .signatures import (FnSig, TypeResolver)
from .aggregates import AggregateChecks
from .checked import CheckedFn, Poisoned  # noqa: F401 - re-exported
from .typed import (ArmBinding, BorrowBinding, CallKind, CallTarget, FnValue, Local, LocalKind, MatchShape,  # noqa: F401
                    NodeMap, StaticRef, TypedBody)
from .aliasing import Aliases
from .builtin_calls import BuiltinCalls
from .unify import TypeRelations
from .typetable import TypeTable
from .types import (substitute, BOOL, BYTE, CINT, F32, FLOAT, INT, STATIC, UNIT, Adt, BoxT, Cap, FnT, Handle, Param, Prim,
                    Ref, Region, Slice, Type, Var, children, regions_in)


ARITH = {"+", "-", "*", "/"}
COMPARE = {"<", "<=", ">", ">="}
EQUALITY = {"==", "!="}
BITS = {"|", "^", "&", "<<", ">>"}
LOGIC = {"&&", "||"}
EQ_SCALARS = {INT, BOOL, BYTE, FLOAT, F32, Prim("c_ptr")}


def unsolved(t: Type) -> bool:
    """Does this type hold an inference variable (solved or not)?"""
    stack = [t]
    while stack:
        x = stack.pop()
        if isinstance(x, Var):
            return True
        stack.extend(children(x))
    return False


def arity_message(name: str, want: int, got: int) -> str:
    return (f"`{name}` takes {want} argument{'' if want == 1 else 's'}, but {got} "
            f"{'was' if got == 1 else 'were'} given")


# The builtin that ends each handle (runtime.md §1): what a refusal to take one apart names.
HANDLE_ENDERS = {
    "File": "file_close", "Listener": "listener_close", "Conn": "conn_close", "Udp": "udp_close",
    "Poller": "poller_close", "Dir": "dir_close", "DirList": "dir_list_close", "SignalWatch": "signals_close",
    "Child": "child_wait", "Pipe": "pipe_close", "ChildEnd": "child_end_close",
}

class BodyChecker:
    """Checks one `fn` body against its signature."""

    def __init__(self, item: ItemRef, sig: FnSig, modules: dict[str, ModuleScope], types: TypeTable):
        self.item = item
        self.sig = sig
        self.modules = modules
        self.module = modules[item.module]
        self.edition = item.edition
        self.types = types
        # The parts of the checker, composed (each holds a typed reference back to this one).
        self.rel = TypeRelations(item, sig)
        self.agg = AggregateChecks(self)
        self.builtin_calls = BuiltinCalls(self)
        self.aliases = Aliases(self)
        self.defers: list[list[list]] = []  # per open block: the event lists of its defers
        # What the walk learns, keyed by node (never written into the tree); settled into a
        # frozen TypedBody when the body is done.
        self.expr_types: NodeMap = NodeMap()
        self.resolved: NodeMap = NodeMap()
        self.bindings: NodeMap = NodeMap()
        self.regions: NodeMap = NodeMap()
        self.params: list[Local] = []
        self.performed: set = set()
        # Calls of builtins checked but not lowered (name, span): refused once all else passes.
        self.unlowered: list[tuple[str, Span]] = []
        self.callees: list[ItemRef] = []
        self.generic_calls: list[ast.Call] = []
        self.folded_operators = 0
        self.folded_calls = 0
        self.all_locals: list[Local] = []
        self.scopes: list[dict[str, Local]] = [{}]
        self.open_regions: list[Region] = []  # borrow/arena regions, innermost last
        self.region_names: list[dict[str, Region]] = [dict(sig.regions)]
        self.arenas: list[Region] = []
        self.ev: list = []
        self.consts: NodeMap = NodeMap()  # expression -> its value, for literal trees

    # ------------------------------------------------------------ helpers

    def is_res(self, t: Type) -> bool:
        return self.types.is_res(self.rel.zonk(t))

    def emit(self, ev) -> None:
        self.ev.append(ev)

    def sub_events(self, fn: Callable[[], object]) -> tuple[list, object]:
        saved = self.ev
        self.ev = []
        try:
            r = fn()
            return self.ev, r
        finally:
            self.ev = saved

    def lookup_local(self, name: str) -> Optional[Local]:
        for sc in reversed(self.scopes):
            if name in sc:
                return sc[name]
        return None

    def lookup_region(self, name: str) -> Optional[Region]:
        if name == "static":
            return STATIC
        for env in reversed(self.region_names):
            if name in env:
                return env[name]
        return None

    def declare(self, name: str, ty: Type, mutable: bool, span: Span, kind: LocalKind) -> Local:
        loc = Local(name, ty, mutable, span, kind, tuple(self.open_regions))
        self.all_locals.append(loc)
        # Only a binding of the same scope is shadowed (params share the body's top scope); an
        # inner block may reuse a live outer name, as in the reference (docs/decisions.md).
        shadows = self.scopes[-1].get(name)
        self.scopes[-1][name] = loc
        self.emit(L.Declare(loc, shadows, span))
        return loc

    def record(self, e: ast.Expr, t: Type, res=None) -> None:
        """Note an expression's type (and what it resolved to) without walking it again."""
        self.expr_types[e] = t
        if res is not None:
            self.resolved[e] = res

    def resolver(self) -> TypeResolver:
        env: dict[str, Region] = {}
        for e in self.region_names:
            env.update(e)
        return TypeResolver(self.modules, self.item.module, self.edition, env, self.sig.tparams)

    # ------------------------------------------------------------ entry

    def check(self, decl: ast.FnDecl) -> CheckedFn:
        for (name, ty), p in zip(self.sig.params, getattr(decl, "params", [])):
            loc = self.declare(name, ty, False, p.name.span, LocalKind.PARAM)
            self.params.append(loc)
        self.aliases.params(self.params)
        body_events, _ = self.sub_events(lambda: self.block_stmts(decl.body))
        return self.settle(self.ev + [L.Scope(body_events, decl.body.span)])

    def settle(self, events: list) -> CheckedFn:
        """Inference is over: every type must be known (else `ambiguous-type`). The result is
        frozen: locals, call targets and types with every inference variable replaced."""
        zonk = self.rel.zonk
        final: dict[int, Local] = {}
        for loc in self.all_locals:
            if unsolved(loc.ty):  # most types were known when recorded: only these are rebuilt
                t = zonk(loc.ty)
                if unsolved(t):
                    fail(Rule.AMBIGUOUS_TYPE,
                         f"cannot tell the type of `{loc.name}`: write it, e.g. `let {loc.name}: T = ...`", loc.span)
                loc = Local(loc.name, t, loc.mutable, loc.span, loc.kind, loc.open_regions, loc.uid)
            final[loc.uid] = loc

        def settled_type(e: ast.Expr, t: Type) -> Type:
            if unsolved(t):
                t = zonk(t)
                if unsolved(t):
                    fail(Rule.AMBIGUOUS_TYPE, f"cannot tell the full type of this expression (`{t}`)", e.span)
            return t
        typed = TypedBody(self.expr_types.mapped(settled_type),
                          self.resolved.mapped(lambda _, r: self.settled(r, final)),
                          self.bindings.mapped(lambda _, b: self.settled(b, final)),
                          self.regions.mapped(lambda _, reg: reg))
        typed.freeze()
        return CheckedFn(self.item, self.sig, tuple(final[p.uid] for p in self.params), typed, tuple(events),
                         frozenset(self.performed), tuple(self.callees), tuple(self.generic_calls),
                         self.folded_operators, self.folded_calls, self.frozen_consts())

    def frozen_consts(self) -> NodeMap:
        """The literal trees' values, read-only, for the call evaluator (`callfold.py`)."""
        self.consts.freeze()
        return self.consts

    def settled(self, r, final: dict[int, Local]):
        """A resolution or binding record with its locals and type arguments settled."""
        if isinstance(r, Local):
            return final.get(r.uid, r)
        if isinstance(r, CallTarget):
            if not r.subst:
                return r
            zonk = self.rel.zonk
            subst = {k: zonk(v) if isinstance(v, Type) and unsolved(v) else v for k, v in r.subst.items()}
            return CallTarget(r.kind, r.name, r.item, r.sig, MappingProxyType(subst), r.prefix)
        if isinstance(r, BorrowBinding):
            return BorrowBinding(final[r.target.uid], final[r.ref.uid])
        if isinstance(r, ArmBinding):
            return ArmBinding(tuple((i, final[loc.uid]) for i, loc in r.binds))
        if isinstance(r, tuple):
            return tuple(final[loc.uid] for loc in r)
        return r

    def block_stmts(self, block: ast.Block) -> None:
        """A block's statements; its `defer`s run (as events) when control falls off its end."""
        self.defers.append([])
        try:
            for s in block.stmts:
                self.stmt(s)
            for evs in reversed(self.defers[-1]):
                self.ev.extend(evs)
        finally:
            self.defers.pop()

    def scoped_block(self, block: ast.Block, extra: Optional[Callable[[], None]] = None,
                     region: Optional[tuple[str, Region]] = None) -> list:
        """Check a block in a new scope; returns its events wrapped in one Scope event."""
        self.scopes.append({})
        if region is not None:
            self.region_names.append({region[0]: region[1]})
            self.open_regions.append(region[1])
        try:
            def run():
                if extra is not None:
                    extra()
                self.block_stmts(block)
            evs, _ = self.sub_events(run)
        finally:
            self.scopes.pop()
            if region is not None:
                self.region_names.pop()
                self.open_regions.pop()
        return [L.Scope(evs, block.span)]

    # ------------------------------------------------------------ statements

    def stmt(self, s: ast.Stmt) -> None:
        match s:
            case ast.Let():
                self.let(s)
            case ast.ExprStmt():
                t = self.expr(s.expr)
                self.emit(L.Discard(t, s.span))
            case ast.Assign():
                self.assign(s)
            case ast.If():
                self.if_stmt(s)
            case ast.While():
                self.while_stmt(s)
            case ast.Return():
                self.return_stmt(s)
            case ast.LetStruct():
                self.let_struct(s)
            case ast.LetTuple():
                self.agg.let_tuple(s)
            case ast.Match():
                self.agg.match_stmt(s)
            case ast.Borrow():
                self.borrow(s)
            case ast.RegionStmt():
                self.region(s)
            case ast.Defer():
                def deferred():
                    t = self.expr(s.expr)
                    self.emit(L.Discard(t, s.span))
                evs, _ = self.sub_events(deferred)
                self.defers[-1].append(evs)
            case _:
                fail(Rule.INTERNAL, f"unexpected statement {type(s).__name__}", s.span)

    def let(self, s: ast.Let) -> None:
        t = self.expr(s.value)
        if s.ty is not None:
            tr = self.resolver()
            want = tr.resolve(s.ty)
            self.types.check_bounds(tr.instances)
            self.rel.coerce(t, want, s.value.span)
            t = want
        if t == UNIT:
            fail(Rule.TYPE_MISMATCH, "this expression has no value to bind", s.value.span)
        loc = self.declare(s.name.name, t, s.mutable, s.name.span, LocalKind.VAR if s.mutable else LocalKind.LET)
        self.bindings[s] = loc
        self.builtin_calls.threads.bound(s.value, loc)  # a thread's handle
        self.aliases.bind(loc, s.value)  # a copy of a reference, anywhere inside the value

    def while_stmt(self, s: ast.While) -> None:
        def loop():
            self.cond(s.cond)
            self.ev.extend(self.scoped_block(s.body))
        evs, _ = self.sub_events(loop)
        # The condition is evaluated before the first iteration as well.
        self.cond(s.cond)
        self.emit(L.Loop(evs, s.span))

    def return_stmt(self, s: ast.Return) -> None:
        t = self.expr(s.value)
        for r in regions_in(t):
            if r.kind in ("borrow", "arena"):
                fail(Rule.REFERENCE_ESCAPES_REGION,
                          f"this returns `{t}`, a reference into `{r.name}`, which ends before the function returns: "
                          "a reference may not outlive its region",
                          s.value.span)
        self.rel.coerce(t, self.sig.ret, s.value.span)
        # The value is evaluated first, then every enclosing block's defers, innermost first.
        for frame in reversed(self.defers):
            for evs in reversed(frame):
                self.ev.extend(evs)
        self.emit(L.Return(s.span))

    def region(self, s: ast.RegionStmt) -> None:
        if self.lookup_region(s.name.name) is not None:
            fail(Rule.DUPLICATE_DECLARATION, f"region `{s.name.name}` is already in scope", s.name.span)
        reg = Region(s.name.name, "arena", tuple(reversed(self.open_regions)))
        self.regions[s] = reg
        self.arenas.append(reg)
        try:
            self.ev.extend(self.scoped_block(s.body, region=(s.name.name, reg)))
        finally:
            self.arenas.pop()

    def take_apart_refusal(self, t: Type, span: Span):
        """A capability, a box or a handle cannot be destructured; say what ends each."""
        if isinstance(t, BoxT):
            fail(Rule.LINEAR_VALUE_TAKEN_APART, f"`{t}` cannot be taken apart: a box is ended by `unbox`", span)
        if isinstance(t, Handle):
            fail(Rule.LINEAR_VALUE_TAKEN_APART,
                 f"`{t}` owns an open descriptor and is ended by `{HANDLE_ENDERS.get(t.name, 'its close')}`, "
                 "not by being taken apart", span)
        fail(Rule.CAPABILITY_MISUSED, f"`{t}` is a capability: it cannot be taken apart, only lent, narrowed or released",
                  span)

    def unsupported(self, what: str, span: Span):
        """A construct the language has and this implementation does not: refused where it is
        written, under its own rule (never `internal`, which is a bug of ours)."""
        fail(Rule.UNSUPPORTED_ON_TARGET, f"{what} is not supported by cancho-kernel", span)

    def cond(self, e: ast.Expr) -> None:
        t = self.expr(e)
        if t != BOOL:
            mismatch(BOOL, t, e.span)

    def if_stmt(self, s: ast.If) -> None:
        self.cond(s.cond)
        then = self.scoped_block(s.then)
        if s.else_ is None:
            other: list = []
        elif isinstance(s.else_, ast.If):
            other, _ = self.sub_events(lambda: self.if_stmt(s.else_))
        else:
            other = self.scoped_block(s.else_)
        self.emit(L.Branch([then, other], s.span))

    def let_struct(self, s: ast.LetStruct) -> None:
        t = self.expr(s.value)
        if isinstance(t, Cap) or isinstance(t, Handle) or isinstance(t, BoxT):
            self.take_apart_refusal(t, s.span)
        if not self.types.is_struct(t):
            fail(Rule.NOT_A_STRUCT, f"`let {s.struct.name} {{ .. }}` takes a struct apart, but this is `{t}`", s.value.span)
        self.agg.expect_named(s.qualifier, s.struct, t)
        fields = self.types.fields(t)
        if isinstance(t, Adt) and t.key.startswith("::Split") and len(s.fields) != len(fields):
            fail(Rule.ARITY_MISMATCH,  # the reference's signals.md §4: a Split pattern of another edition
                 f"`Split` at edition {self.edition} has {len(fields)} fields "
                 f"({', '.join(n for n, _ in fields)}); this pattern names {len(s.fields)}", s.span)
        names = {n for n, _ in fields}
        seen: set[str] = set()
        for f in s.fields:
            if f.name not in names:
                fail(Rule.UNKNOWN_NAME, f"`{t}` has no field `{f.name}`", f.span)
            if f.name in seen:
                fail(Rule.DUPLICATE_DECLARATION, f"field `{f.name}` is named twice", f.span)
            seen.add(f.name)
        missing = [n for n, _ in fields if n not in seen]
        if missing:
            fail(Rule.MISSING_FIELD,
                      f"destructuring takes the whole value apart: name every field of `{t}`; missing `{missing[0]}`",
                      s.span)
        ftypes = dict(fields)
        self.bindings[s] = tuple(self.declare(f.name, ftypes[f.name], False, f.span, LocalKind.FIELD) for f in s.fields)
        for loc in self.bindings[s]:
            self.builtin_calls.threads.bound(s.value, loc)
            self.aliases.bind(loc, s.value)

    def assign(self, s: ast.Assign) -> None:
        """`place = value`: the value first, then the place (a `var`, `s[i]`, `*r`, `r.f`)."""
        target = s.target
        vt = self.expr(s.value)
        match target:
            case ast.Name():
                self.assign_local(target, vt, s.value.span)
                self.aliases.bind(self.resolved[target], s.value)
            case ast.Index():
                bt = self.sliced(target.base, [target.index], "indexed")
                if not bt.unique:
                    fail(Rule.SHARED_REFERENCE_WRITTEN,
                         f"`{bt}` is a shared slice; writing needs a unique reference `&!`", target.span)
                self.rel.coerce(vt, bt.target.elem, s.value.span)
                self.record(target, bt.target.elem)
            case ast.Unary(op="*"):
                rt = self.expr(target.operand)
                if not isinstance(rt, Ref):
                    fail(Rule.NOT_A_REFERENCE, f"only a reference can be dereferenced; this is `{rt}`", target.operand.span)
                if not rt.unique:
                    fail(Rule.SHARED_REFERENCE_WRITTEN, f"`{rt}` is a shared reference; writing needs `&!`", target.span)
                if self.is_res(rt.target):
                    fail(Rule.LINEAR_VALUE_UNCONSUMED, f"`*r = ..` would overwrite a res value of type `{rt.target}`", target.span)
                self.rel.coerce(vt, rt.target, s.value.span)
                self.record(target, rt.target)
            case ast.FieldAccess() | ast.TupleIndex():
                self.agg.assign_member(target, vt, s.value.span)
            case _:
                fail(Rule.NOT_A_PLACE,
                     "only a `var`, `s[i]` through a unique slice, a field through a unique reference, or `*r` can be assigned",
                     target.span)
        if not isinstance(target, ast.Name):
            self.aliases.place(target, s.value, vt)

    def assign_local(self, target: ast.Name, vt: Type, vspan: Span) -> None:
        loc = self.lookup_local(target.name)
        if loc is None:
            if target.name in self.module.items:
                fail(Rule.NOT_A_PLACE, f"`{target.name}` is not a variable; only `var` bindings can be assigned", target.span)
            fail(Rule.UNKNOWN_NAME, f"`{target.name}` is not in scope", target.span)
        if not loc.mutable:
            fail(Rule.ASSIGN_TO_IMMUTABLE,
                 f"`{target.name}` is not a `var`; declare it with `var {target.name} = ...` to assign to it", target.span)
        for r in regions_in(vt):
            if r.kind in ("borrow", "arena") and r not in loc.open_regions:
                fail(Rule.REFERENCE_ESCAPES_REGION, f"`{target.name}` outlives region `{r.name}`, so it cannot hold `{vt}`", vspan)
        self.rel.coerce(vt, loc.ty, vspan)
        self.record(target, loc.ty, loc)
        self.emit(L.Assign(loc, target.span))

    def borrow(self, s: ast.Borrow) -> None:
        loc = self.lookup_local(s.target.name)
        if loc is None:
            fail(Rule.UNKNOWN_NAME, f"`{s.target.name}` is not in scope; `borrow` takes a binding name", s.target.span)
        if s.mutable != s.unique:
            want = "borrow mut x as &!r" if s.mutable else "borrow x as &r"
            fail(Rule.TYPE_MISMATCH, f"`mut` and `&!` go together: write `{want}`", s.span)
        if self.lookup_region(s.region.name) is not None:
            fail(Rule.DUPLICATE_DECLARATION, f"region `{s.region.name}` is already in scope", s.region.span)
        if isinstance(loc.ty, Ref):
            pass  # a reference to a reference: legal, if unusual
        reg = Region(s.region.name, "borrow", tuple(reversed(self.open_regions)))
        self.regions[s] = reg
        self.emit(L.Freeze(loc, s.unique, s.target.span))

        def bind_ref():
            self.bindings[s] = BorrowBinding(loc, self.declare(s.region.name, Ref(reg, s.unique, loc.ty), False,
                                                               s.region.span, LocalKind.BORROW))
            self.aliases.borrowed(self.bindings[s].ref, loc)
        self.ev.extend(self.scoped_block(s.body, extra=bind_ref, region=(s.region.name, reg)))
        self.emit(L.Thaw(loc, s.unique))

    # ------------------------------------------------------------ expressions

    def expr(self, e: ast.Expr) -> Type:
        """Type an expression (through EXPR_RULES, one rule per node class) and record it."""
        rule = EXPR_RULES.get(type(e))
        if rule is None:
            fail(Rule.INTERNAL, f"unexpected expression {type(e).__name__}", e.span)
        t = self.rel.zonk(rule(self, e))
        self.expr_types[e] = t
        return t

    def literal(self, e: ast.IntLit | ast.BoolLit) -> Type:
        self.consts[e] = e.value
        return INT if isinstance(e, ast.IntLit) else BOOL

    def float_lit(self, e: ast.FloatLit) -> Type:
        if e.is_f32 and self.edition < 6:
            fail(Rule.LITERAL_FORM, "an `f32` literal needs `edition 6;` or later: before it, `f32` is no type",
                 e.span)
        return F32 if e.is_f32 else FLOAT

    def alloc(self, e: ast.Alloc) -> Type:
        reg = self.arena(e.region)
        vt = self.expr(e.value)
        if self.is_res(vt):
            fail(Rule.MODE_BOUND_VIOLATED, f"an arena holds only val data; `{vt}` is res", e.value.span)
        return Ref(reg, True, vt)

    def struct_lit(self, e: ast.StructLit) -> Type:
        n = e.name.name
        # A prelude name the edition does not have yet may be a user type (docs/decisions.md).
        if e.qualifier is None and n in B.CAPABILITY_KINDS | B.HANDLE_TYPES | {"Split"} \
                and B.prelude_type_visible(n, self.edition) and n not in self.module.items:
            source = (f"the builtin that opens a `{n}`" if n in B.HANDLE_TYPES else "`split`")
            fail(Rule.CAPABILITY_MISUSED, f"`{n}` is a capability and has no literal form: it comes only from "
                 f"{source}", e.span)
        return self.agg.struct_lit(e)

    def alloc_slice(self, e: ast.AllocSlice) -> Type:
        reg = self.arena(e.region)
        ct = self.expr(e.count)
        ft = self.expr(e.fill)
        if ct != INT:
            mismatch(INT, ct, e.count.span)
        if self.is_res(ft):
            fail(Rule.MODE_BOUND_VIOLATED, f"an arena holds only val data; `{ft}` is res", e.fill.span)
        if ft == UNIT:
            mismatch("a value", ft, e.fill.span)
        return Ref(reg, True, Slice(ft))

    def sliced(self, base: ast.Expr, positions: list, what: str) -> Ref:
        """Type `base[i]` / `base[lo..hi]`: the base must be a slice reference, positions `int`
        (evaluated left to right after the base)."""
        bt = self.expr(base)
        pts = [self.expr(p) for p in positions]
        if not (isinstance(bt, Ref) and isinstance(bt.target, Slice)):
            fail(Rule.NOT_A_SLICE, f"only a slice can be {what}; this is `{bt}`", base.span)
        for p, pt in zip(positions, pts):
            if pt != INT:
                mismatch(INT, pt, p.span)
        return bt

    def arena(self, ident: ast.Ident) -> Region:
        if ident.name == "static" and self.sig.kind == "static":
            return STATIC
        if ident.name == "static":
            fail(Rule.STATIC_ITEM, "`alloc_slice[static]` and `alloc[static]` are only legal inside a `static` item's body",
                      ident.span)
        for r in reversed(self.arenas):
            if r.name == ident.name:
                if self.lookup_region(ident.name) is r:
                    return r
        r = self.lookup_region(ident.name)
        if r is None:
            fail(Rule.REGION_NOT_IN_SCOPE, f"region `{ident.name}` is not in scope; open it with `region {ident.name} {{ .. }}`",
                      ident.span)
        fail(Rule.REGION_MISMATCH, f"`{ident.name}` is not an arena open in this function; only `region {ident.name} {{ .. }}` can be allocated in",
                  ident.span)

    def name(self, e: ast.Name) -> Type:
        loc = self.lookup_local(e.name)
        if loc is not None:
            self.resolved[e] = loc
            self.emit(L.Use(loc, e.span))
            return loc.ty
        item = self.module.items.get(e.name)
        if item is not None:
            if item.kind == "fn":
                if item.sig is None:
                    raise Poisoned()
                if item.sig.tparams:
                    fail(Rule.NO_FUNCTION_VALUES, f"`{e.name}` is generic, so it cannot be a value", e.span)
                self.resolved[e] = FnValue(item)
                self.callees.append(item)
                sig = item.sig
                return FnT(tuple(t for _, t in sig.params), sig.row, sig.ret)
            if item.kind == "extern":
                fail(Rule.NO_FUNCTION_VALUES, f"`{e.name}` is a foreign function, so it cannot be a value", e.span)
            if item.kind == "static":
                return self.static_ref(e, item)
            fail(Rule.TYPE_MISMATCH, f"`{e.name}` is a type, not a value", e.span)
        if B.builtin_visible(e.name, self.edition):
            fail(Rule.NO_FUNCTION_VALUES, f"`{e.name}` is a builtin, so it cannot be a value", e.span)
        fail(Rule.UNKNOWN_NAME, f"`{e.name}` is not in scope", e.span)

    def static_ref(self, e: ast.Name, item: ItemRef) -> Type:
        """A static's name is a `&static [T]`. Inside a static, only earlier statics are known."""
        if item.sig is None:
            raise Poisoned()
        if self.sig.kind == "static":
            order = list(self.module.items)
            if item.key == self.item.key or order.index(item.name) > order.index(self.item.name):
                fail(Rule.STATIC_ITEM, f"`{item.name}` is declared after `{self.item.name}`; a static reads only earlier statics",
                          e.span)
        self.resolved[e] = StaticRef(item)
        return item.sig.ret

    def unary(self, e: ast.Unary) -> Type:
        if e.op == "*":
            t = self.expr(e.operand)
            if not isinstance(t, Ref):
                fail(Rule.NOT_A_REFERENCE, f"only a reference can be dereferenced; this is `{t}`", e.operand.span)
            if isinstance(t.target, Slice):
                fail(Rule.TYPE_MISMATCH, f"`*` reads one value; `{t}` is a slice, index it instead", e.span)
            if self.is_res(t.target):
                fail(Rule.LINEAR_VALUE_TAKEN_APART, f"`*` would copy a res value of type `{t.target}`", e.span)
            return t.target
        t = self.expr(e.operand)
        c = self.consts.get(e.operand)
        if e.op == "-":
            if t not in (INT, FLOAT, F32):
                fail(Rule.OPERATOR_TYPE_MISMATCH, f"`{t}` cannot be negated (`int`, `float` and `f32` can)",
                     e.operand.span)
            if t == INT and c is not None:
                self.fold(e, lambda: int_neg(c))
            return t
        if e.op == "!":
            if t != BOOL:
                mismatch(BOOL, t, e.operand.span)
            if c is not None:
                self.consts[e] = not c
            return BOOL
        if e.op == "~":
            if t != INT:
                mismatch(INT, t, e.operand.span)
            if c is not None:
                self.consts[e] = ~c
            return INT
        fail(Rule.INTERNAL, f"unknown unary operator {e.op}", e.span)

    def fold(self, e: ast.Expr, compute: Callable[[], object], call: bool = False) -> None:
        try:
            v = compute()
        except Trap as t:
            fail(Rule.CONSTANT_TRAPS, str(t), e.span)
        self.consts[e] = v
        if call:
            self.folded_calls += 1
        else:
            self.folded_operators += 1

    def binary(self, e: ast.Binary) -> Type:
        """Both operands must have one type first (`type-mismatch`); then `%`, the bit operators
        and `&&`/`||` want `int`/`bool` (`type-mismatch`), while arithmetic, ordering and `==` on a
        type without them are `operator-type-mismatch` — the reference's order and tags
        (docs/decisions.md)."""
        op = e.op
        lt = self.expr(e.left)
        if op in LOGIC:
            right_events, rt = self.sub_events(lambda: self.expr(e.right))
            if rt != lt:
                mismatch(lt, rt, e.right.span)
            if lt != BOOL:
                mismatch(BOOL, lt, e.left.span)
            self.emit(L.Branch([right_events, []], e.span))
            return BOOL
        rt = self.expr(e.right)
        if rt != lt:
            mismatch(lt, rt, e.right.span)
        result = self.operator_result(op, lt, e)
        a, b = self.consts.get(e.left), self.consts.get(e.right)
        if a is not None and b is not None and lt in (INT, BOOL):
            if lt == INT:
                self.fold(e, lambda: int_binary(op, a, b))
            elif op in EQUALITY:
                self.consts[e] = (a == b) if op == "==" else (a != b)
        return result

    @staticmethod
    def operator_result(op: str, lt: Type, e: ast.Binary) -> Type:
        """The result of a binary operator whose operands both have type `lt`, or its refusal."""
        if op in ("%", *BITS):
            if lt != INT:
                mismatch(INT, lt, e.left.span)
            return INT
        if op in ARITH:
            if lt not in (INT, FLOAT, F32):
                fail(Rule.OPERATOR_TYPE_MISMATCH, f"`{lt}` has no arithmetic (`int`, `float` and `f32` do)",
                     e.left.span)
            return lt
        if op in COMPARE:
            if lt not in (INT, FLOAT, F32):
                fail(Rule.OPERATOR_TYPE_MISMATCH, f"`{lt}` has no ordering (`int`, `float` and `f32` do)",
                     e.left.span)
            return BOOL
        if op in EQUALITY:
            if lt not in EQ_SCALARS:
                fail(Rule.OPERATOR_TYPE_MISMATCH,
                     f"`{lt}` cannot be compared with `==`: equality is for the scalars and `c_ptr`", e.left.span)
            return BOOL
        fail(Rule.INTERNAL, f"unknown operator {op}", e.span)

    # ------------------------------------------------------------ calls

    def call(self, e: ast.Call) -> Type:
        callee = e.callee
        if isinstance(callee, ast.Name):
            loc = self.lookup_local(callee.name)
            if loc is not None:
                ft = self.rel.zonk(loc.ty)
                if isinstance(ft, FnT):
                    return self.call_value(e, loc, ft)
                fail(Rule.NOT_A_FUNCTION, f"`{callee.name}` is a local binding, not a function", callee.span)
            item = self.module.items.get(callee.name)
            if item is not None:
                return self.call_item(e, item)
            if B.builtin_visible(callee.name, self.edition):
                return self.builtin_calls.call_builtin(e, callee.name)
            fail(Rule.NOT_A_FUNCTION, f"`{callee.name}` is not a function in this program", callee.span)
        if isinstance(callee, ast.QualifiedName):
            q = callee.qualifier.name
            target = self.module.imports.get(q)
            if target is None:
                fail(Rule.MODULE_NOT_IMPORTED,
                          f"`{q}` is not an imported module here; add `import ... {q};` (a qualified call never names a local)",
                          callee.qualifier.span)
            item = self.modules[target].items.get(callee.name.name)
            if item is None or item.kind not in ("fn", "extern"):
                fail(Rule.NOT_A_FUNCTION, f"`{q}.{callee.name.name}` is not a function in module `{target}`", callee.name.span)
            if not item.decl.pub and item.kind != "extern" and target != self.item.module:
                fail(Rule.NOT_PUBLIC, f"`{callee.name.name}` is private to module `{target}`; mark it `pub` there",
                          callee.name.span)
            return self.call_item(e, item)
        t = self.expr(callee)
        fail(Rule.NOT_A_FUNCTION, f"a value of type `{t}` cannot be called", callee.span)

    def call_value(self, e: ast.Call, loc: Local, ft: FnT) -> Type:
        """A call through a local of function type: performs exactly the row of the type."""
        self.expr(e.callee)
        if len(e.args) != len(ft.params):
            fail(Rule.ARITY_MISMATCH, arity_message(loc.name, len(ft.params), len(e.args)), e.span)
        free = self.rel.foreign_regions(ft)
        rsub: dict = {}
        for a, p in zip(e.args, ft.params):
            self.rel.bind(p, self.expr(a), {}, rsub, free, a.span)
        self.resolved[e] = CallTarget(CallKind.INDIRECT, loc.name)
        self.performed |= set(ft.row)
        self.aliases.call(e.args)
        return ft.ret

    def call_item(self, e: ast.Call, item: ItemRef) -> Type:
        if item.kind not in ("fn", "extern"):
            fail(Rule.NOT_A_FUNCTION, f"`{item.name}` is a {item.kind}, not a function", e.callee.span)
        if item.sig is None:
            raise Poisoned()
        sig: FnSig = item.sig
        ret, subst = self.call_sig(sig, e)
        if ret == CINT:
            ret = INT  # a C `int` result is an `int` to the program
        self.resolved[e] = CallTarget(CallKind(item.kind), item.name, item, sig, subst)
        self.performed |= set(sig.row)
        self.callees.append(item)
        if sig.tparams and item.kind == "fn":
            self.generic_calls.append(e)
        self.aliases.call(e.args)
        return ret

    def call_sig(self, sig: FnSig, e: ast.Call, first: Optional[Type] = None) -> tuple[Type, dict]:
        """Type a call against a signature; `first` is the first argument's type when the
        caller already checked it (a capability verb reads its literal before the signature)."""
        if len(e.args) != len(sig.params):
            fail(Rule.ARITY_MISMATCH,
                      arity_message(sig.name, len(sig.params), len(e.args)), e.span)
        tsub: dict = {}
        rsub: dict = {}
        callee_regions = {r.uid for r in sig.regions.values()}
        # The callee's type parameters, renamed for this call (a recursive call must not mistake
        # them for the caller's own).
        # Shown as `?0`, `?1`, ... in messages while they are still unknown.
        alias = {n: f"?{i}" for i, n in enumerate(sig.tparams)}
        fresh = {("T", n): Param(alias[n], sig.key + "@call", p.bound_val) for n, p in sig.tparams.items()}
        for i, (arg, (pname, pty)) in enumerate(zip(e.args, sig.params)):
            at = first if i == 0 and first is not None else self.expr(arg)
            self.rel.bind(substitute(pty, fresh), at, tsub, rsub, callee_regions, arg.span)
        for inner, outer in sig.where:
            ri, ro = rsub.get(inner.uid), rsub.get(outer.uid)
            if ri is not None and ro is not None and not self.rel.outlives(ro, ri):
                fail(Rule.REFERENCE_ESCAPES_REGION,
                          f"`{sig.name}` requires `{inner.name} <= {outer.name}` ({outer.name} outlives {inner.name}), but `{ro.name}` does not outlive `{ri.name}`",
                          e.span)
        for name, p in sig.tparams.items():
            if alias[name] not in tsub:
                fail(Rule.AMBIGUOUS_TYPE,
                          f"cannot tell what `{name}` is in this call to `{sig.name}`: it is not determined by the arguments",
                          e.span)
            got = tsub[alias[name]]
            if p.bound_val and self.is_res(got):
                fail(Rule.MODE_BOUND_VIOLATED, f"`{sig.name}` needs `{name}` to be `val`, and `{got}` is `res`", e.span)
        ret = self.rel.show(substitute(sig.ret, fresh), tsub, rsub)
        for r in regions_in(ret):
            if r.kind == "param" and r.uid in callee_regions:
                ret = self.rel.show(ret, {}, {r.uid: STATIC})
        subst = {("T", n): tsub[alias[n]] for n in sig.tparams}
        subst.update({("R", k): v for k, v in rsub.items()})
        return ret, subst


def _qualified_name(c: BodyChecker, e: ast.QualifiedName) -> Type:
    fail(Rule.NOT_A_FUNCTION, f"`{e.qualifier.name}.{e.name.name}` can only be called", e.span)


# How each expression node class is typed: one rule per class, looked up by the node's own
# class (the dispatch of `BodyChecker.expr`; codegen and the evaluator keep tables alike).
EXPR_RULES: dict[type, Callable[[BodyChecker, ast.Expr], Type]] = {
    ast.Name: BodyChecker.name,
    ast.IntLit: BodyChecker.literal,
    ast.BoolLit: BodyChecker.literal,
    ast.Call: BodyChecker.call,
    ast.Binary: BodyChecker.binary,
    ast.Index: lambda c, e: c.sliced(e.base, [e.index], "indexed").target.elem,
    ast.FieldAccess: lambda c, e: c.agg.member(e),
    ast.TupleIndex: lambda c, e: c.agg.member(e),
    ast.Unary: BodyChecker.unary,
    ast.FloatLit: BodyChecker.float_lit,
    ast.StrLit: lambda c, e: Ref(STATIC, False, Slice(BYTE)),
    ast.SliceExpr: lambda c, e: c.sliced(e.base, [e.lo, e.hi], "sliced"),
    ast.AllocSlice: BodyChecker.alloc_slice,
    ast.Alloc: BodyChecker.alloc,
    ast.TupleExpr: lambda c, e: c.agg.tuple_expr(e),
    ast.StructLit: BodyChecker.struct_lit,
    ast.VariantExpr: lambda c, e: c.agg.variant_expr(e),
    ast.QualifiedName: _qualified_name,
}
