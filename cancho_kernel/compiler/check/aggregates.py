"""Body checks for aggregates: tuples, struct literals, variants, member reads and writes, `match`.

Held by `BodyChecker` (body.py), with a typed reference back to it, and kept apart because these
rules (field order, exhaustiveness, what crosses a reference) are one concern. Reading through a reference never moves: a `val`
member is copied, a `res` member comes back as a reference of the same mode and region.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from .. import ast
from ..resolve import ItemRef
from . import builtins as B
from . import linearity as L
from ..diagnostics import Rule
from .signatures import TypeDecl
from .typetable import PRELUDE_DECLS
from .refusals import fail
from .typed import ArmBinding, LocalKind, MatchShape, Member, MemberMode
from .types import Adt, Ref, Tuple, Type, Var, substitute

if TYPE_CHECKING:
    from .body import BodyChecker


class AggregateChecks:
    """The aggregate rules of one body, checked for (and through) the `BodyChecker` that owns them."""

    def __init__(self, chk: "BodyChecker"):
        self.chk = chk
        self.rel = chk.rel

    # ------------------------------------------------------------ naming a type

    def type_item(self, qualifier: Optional[ast.Ident], name: ast.Ident) -> tuple[str, TypeDecl]:
        """The declaration a (possibly qualified) struct/enum name refers to here."""
        from .body import Poisoned

        if qualifier is None:
            key = "::" + name.name
            if key in PRELUDE_DECLS and B.prelude_type_visible(name.name, self.chk.edition):
                return key, PRELUDE_DECLS[key]
            item: Optional[ItemRef] = self.chk.module.items.get(name.name)
        else:
            target = self.chk.module.imports.get(qualifier.name)
            if target is None:
                fail(Rule.MODULE_NOT_IMPORTED, f"`{qualifier.name}` is not an imported module here", qualifier.span)
            item = self.chk.modules[target].items.get(name.name)
            if item is not None and not item.decl.pub and target != self.chk.item.module:
                fail(Rule.NOT_PUBLIC, f"`{name.name}` is private to module `{target}`; mark it `pub` there", name.span)
        if item is None:
            fail(Rule.UNKNOWN_NAME, f"no type `{name.name}` in scope", name.span)
        if item.kind not in ("struct", "enum"):
            fail(Rule.NOT_A_STRUCT, f"`{name.name}` is a {item.kind}, not a type", name.span)
        if item.sig is None:
            raise Poisoned()
        return item.key, item.sig

    def expect_named(self, qualifier: Optional[ast.Ident], name: ast.Ident, t: Type) -> None:
        """The name written in a pattern must be the scrutinee's / value's own type."""
        if isinstance(t, Adt) and t.key.startswith("::Split"):
            if name.name != "Split" or qualifier is not None:
                fail(Rule.TYPE_MISMATCH, f"expected `{name.name}`, found `{t}`", name.span)
            return
        key, _ = self.type_item(qualifier, name)
        if not isinstance(t, Adt) or key != t.key:
            fail(Rule.TYPE_MISMATCH, f"expected `{t}`, found `{name.name}`", name.span)

    def fresh_args(self, td: TypeDecl) -> tuple[dict, tuple]:
        vs = tuple(Var() for _ in td.tparams)
        return {("T", p.name): v for p, v in zip(td.tparams, vs)}, vs

    # ------------------------------------------------------------ construction

    def tuple_expr(self, e: ast.TupleExpr) -> Type:
        if len(e.parts) < 2:
            fail(Rule.PATTERN_SHAPE, "a tuple has two components or more", e.span)
        return Tuple(tuple(self.chk.expr(p) for p in e.parts))

    def struct_lit(self, e: ast.StructLit) -> Type:
        key, td = self.type_item(e.qualifier, e.name)
        if td.kind != "struct":
            fail(Rule.NOT_A_STRUCT, f"`{td.name}` is an enum; build it with `{td.name}::Variant`", e.name.span)
        sub, args = self.fresh_args(td)
        order = {n: i for i, (n, _) in enumerate(td.fields)}
        ftypes = dict(td.fields)
        seen: set[str] = set()
        last = -1
        for fi in e.fields:
            n = fi.name.name
            if n not in order:
                fail(Rule.UNKNOWN_NAME, f"`{td.name}` has no field `{n}`", fi.name.span)
            if n in seen:
                fail(Rule.DUPLICATE_DECLARATION, f"field `{n}` is given twice", fi.name.span)
            if order[n] < last:
                fail(Rule.FIELD_ORDER,
                          f"`{n}` is written after a field declared later; a struct literal's fields are evaluated in "
                          "declaration order, so writing them in another order would hide which expression runs first",
                          fi.name.span)
            last = order[n]
            seen.add(n)
            t = self.chk.expr(fi.value)
            self.rel.bind(substitute(ftypes[n], sub), t, {}, {}, set(), fi.value.span)
        for n, _ in td.fields:
            if n not in seen:
                fail(Rule.MISSING_FIELD, f"this `{td.name}` literal does not give field `{n}`; give every field",
                          e.span)
        return Adt(key, td.name, args)

    def variant_expr(self, e: ast.VariantExpr) -> Type:
        key, td = self.type_item(e.qualifier, e.enum)
        if td.kind != "enum":
            fail(Rule.NOT_AN_ENUM, f"`{td.name}` is a struct, not an enum; `::` names an enum's variant", e.enum.span)
        variants = dict(td.variants)
        if e.variant.name not in variants:
            fail(Rule.UNKNOWN_NAME, f"`{td.name}` has no variant `{e.variant.name}`", e.variant.span)
        payload = variants[e.variant.name]
        args = e.args or []
        if len(args) != len(payload):
            fail(Rule.ARITY_MISMATCH,
                      f"`{td.name}::{e.variant.name}` carries {len(payload)} value(s), found {len(args)}", e.span)
        sub, vs = self.fresh_args(td)
        for a, pt in zip(args, payload):
            t = self.chk.expr(a)
            self.rel.bind(substitute(pt, sub), t, {}, {}, set(), a.span)
        return Adt(key, td.name, vs)

    # ------------------------------------------------------------ reading members

    def member(self, e: ast.Expr) -> Type:
        """`e.f` / `e.N`: copy a val member of an owned value; through a reference, copy a val
        member or get a reference to a res member."""
        base = e.base
        loc = self.chk.lookup_local(base.name) if isinstance(base, ast.Name) else None
        if loc is not None and not isinstance(self.rel.zonk(loc.ty), Ref):
            bt = self.rel.zonk(loc.ty)
            self.chk.record(base, bt, loc)
            self.chk.emit(L.Touch(loc, base.span))
        else:
            bt = self.chk.expr(base)
        owned = not isinstance(bt, Ref)
        agg = bt if owned else self.rel.zonk(bt.target)
        idx, ft = self.member_of(agg, e)
        if owned:
            self.chk.emit(L.Read(bt, e.span))
            self.chk.resolved[e] = Member(MemberMode.OWNED, idx)
            return ft
        if self.chk.is_res(ft):
            self.chk.resolved[e] = Member(MemberMode.REF_RES, idx)
            return Ref(bt.region, bt.unique, ft)
        self.chk.resolved[e] = Member(MemberMode.REF_VAL, idx)
        return ft

    def member_of(self, agg: Type, e: ast.Expr) -> tuple[int, Type]:
        """The position and type of `e`'s member (`.field` of a struct, `.N` of a tuple)."""
        if isinstance(e, ast.FieldAccess):
            if not self.chk.types.is_struct(agg):
                fail(Rule.NOT_A_STRUCT, f"only a struct has fields; this is `{agg}`", e.base.span)
            idx = self.chk.types.field_index(agg, e.name.name)
            if idx is None:
                fail(Rule.UNKNOWN_NAME, f"`{agg}` has no field `{e.name.name}`", e.name.span)
            return idx, self.chk.types.fields(agg)[idx][1]
        if not isinstance(agg, Tuple):
            fail(Rule.NOT_A_TUPLE, f"only a tuple has components `.{e.index}`; this is `{agg}`", e.base.span)
        if e.index >= len(agg.parts):
            fail(Rule.UNKNOWN_NAME, f"`{agg}` has no component `.{e.index}`", e.span)
        return e.index, agg.parts[e.index]

    def assign_member(self, target: ast.Expr, vt: Type, vspan) -> None:
        """`r.f = v` where `r` is a unique reference to a struct (or tuple)."""
        base = target.base
        loc = self.chk.lookup_local(base.name) if isinstance(base, ast.Name) else None
        if loc is not None and not isinstance(self.rel.zonk(loc.ty), Ref):
            fail(Rule.NOT_A_PLACE,
                      f"`{base.name}` is an owned value; a field can be assigned only through a unique reference `&!`",
                      target.span)
        bt = self.chk.expr(base)
        if not isinstance(bt, Ref):
            fail(Rule.NOT_A_PLACE, "only a field reached through a unique reference can be assigned", target.span)
        if not bt.unique:
            fail(Rule.SHARED_REFERENCE_WRITTEN, f"`{bt}` is a shared reference; writing needs `&!`", target.span)
        idx, ft = self.member_of(self.rel.zonk(bt.target), target)
        if self.chk.is_res(ft):
            fail(Rule.LINEAR_VALUE_UNCONSUMED,
                      f"assigning to this field would discard the res value of type `{ft}` it holds", target.span)
        self.rel.coerce(vt, ft, vspan)
        self.chk.record(target, ft, Member(MemberMode.REF_VAL, idx))

    # ------------------------------------------------------------ taking apart

    def let_tuple(self, s: ast.LetTuple) -> None:
        t = self.chk.expr(s.value)
        if not isinstance(t, Tuple):
            fail(Rule.NOT_A_TUPLE, f"`let (..)` takes a tuple apart, but this is `{t}`", s.value.span)
        if len(t.parts) != len(s.names):
            fail(Rule.ARITY_MISMATCH, f"this tuple has {len(t.parts)} components, the pattern names {len(s.names)}",
                      s.span)
        seen: set[str] = set()
        for n in s.names:
            if n.name in seen:
                fail(Rule.DUPLICATE_DECLARATION, f"`{n.name}` is bound twice in this pattern", n.span)
            seen.add(n.name)
        self.chk.bindings[s] = tuple(self.chk.declare(n.name, p, False, n.span, LocalKind.FIELD) for n, p in zip(s.names, t.parts))
        for loc in self.chk.bindings[s]:
            self.chk.builtin_calls.threads.bound(s.value, loc)
            self.chk.aliases.bind(loc, s.value)

    def match_stmt(self, s: ast.Match) -> None:
        st = self.chk.expr(s.scrutinee)
        owned = not isinstance(st, Ref)
        et = st if owned else self.rel.zonk(st.target)
        if not self.chk.types.is_enum(et):
            fail(Rule.MATCH_ON_A_NON_ENUM, f"only an enum, or a reference to one, can be matched; this is `{et}`",
                      s.scrutinee.span)
        variants = dict(self.chk.types.variants(et))
        order = [n for n, _ in self.chk.types.variants(et)]
        covered: set[str] = set()
        catch_all = False
        arms: list = []
        for arm in s.arms:
            pat = arm.pattern
            if catch_all:
                fail(Rule.MATCH_ARM_UNREACHABLE, "this arm can never run: an earlier `_` arm catches everything",
                          pat.span)
            if isinstance(pat, ast.WildcardPattern):
                catch_all = True
                if len(covered) == len(order):
                    fail(Rule.MATCH_ARM_UNREACHABLE, "this `_` arm can never run: every variant is already matched",
                              pat.span)

                def extra(pat=pat):
                    if owned:
                        self.chk.emit(L.Discard(et, pat.span))
                locs: list = []
            else:
                self.expect_named(pat.qualifier, pat.enum, et)
                vname = pat.variant.name
                if vname not in variants:
                    fail(Rule.UNKNOWN_NAME, f"`{et}` has no variant `{vname}`", pat.variant.span)
                if vname in covered:
                    fail(Rule.MATCH_ARM_UNREACHABLE, f"`{vname}` is already matched by an earlier arm", pat.span)
                covered.add(vname)
                payload = variants[vname]
                binds = pat.bindings or []
                if len(binds) != len(payload):
                    fail(Rule.ARITY_MISMATCH,
                              f"`{vname}` carries {len(payload)} value(s), this pattern binds {len(binds)}", pat.span)
                names = [b.name for b in binds if b is not None]
                dup = {n for n in names if names.count(n) > 1}
                if dup:
                    fail(Rule.DUPLICATE_DECLARATION, f"`{sorted(dup)[0]}` is bound twice in this pattern", pat.span)
                locs = []

                def extra(binds=binds, payload=payload, locs=locs, pat=pat):
                    for i, (b, pt) in enumerate(zip(binds, payload)):
                        if b is None:
                            if owned:
                                self.chk.emit(L.Discard(pt, pat.span))
                            continue
                        ty = pt if owned else Ref(st.region, st.unique, pt)
                        locs.append((i, self.chk.declare(b.name, ty, False, b.span, LocalKind.FIELD)))
                        self.chk.builtin_calls.threads.bound(s.scrutinee, locs[-1][1])
                        self.chk.aliases.bind(locs[-1][1], s.scrutinee)
            arms.append(self.chk.scoped_block(arm.body, extra=extra))
            self.chk.bindings[arm] = ArmBinding(tuple(locs))
        if not catch_all:
            missing = [n for n in order if n not in covered]
            if missing:
                fail(Rule.MATCH_NOT_EXHAUSTIVE,
                          f"this match does not cover `{missing[0]}`; add an arm for it or a final `_` arm", s.span)
        self.chk.bindings[s] = MatchShape(owned)
        self.chk.emit(L.Branch(arms, s.span))
