"""Body checks for aggregates: tuples, struct literals, variants, member reads and writes, `match`.

A mixin of `BodyChecker` (body.py), kept apart because these rules (field order, exhaustiveness,
what crosses a reference) are one concern. Reading through a reference never moves: a `val`
member is copied, a `res` member comes back as a reference of the same mode and region.
"""

from __future__ import annotations

from typing import Optional

from .. import ast
from ..resolve import ItemRef
from . import builtins as B
from . import linearity as L
from ..diagnostics import Rule
from .signatures import TypeDecl
from .typetable import PRELUDE_DECLS
from .typed import ArmBinding, LocalKind, MatchShape, Member, MemberMode
from .types import Adt, Ref, Tuple, Type, Var, substitute


class AggregateChecks:
    """Mixin: needs `types`, `expr`, `emit`, `declare`, `fail`, `bind`, ... from BodyChecker."""

    # ------------------------------------------------------------ naming a type

    def type_item(self, qualifier: Optional[ast.Ident], name: ast.Ident) -> tuple[str, TypeDecl]:
        """The declaration a (possibly qualified) struct/enum name refers to here."""
        from .body import Poisoned

        if qualifier is None:
            key = "::" + name.name
            if key in PRELUDE_DECLS and B.prelude_type_visible(name.name, self.edition):
                return key, PRELUDE_DECLS[key]
            item: Optional[ItemRef] = self.module.items.get(name.name)
        else:
            target = self.module.imports.get(qualifier.name)
            if target is None:
                self.fail(Rule.MODULE_NOT_IMPORTED, f"`{qualifier.name}` is not an imported module here", qualifier.span)
            item = self.modules[target].items.get(name.name)
            if item is not None and not item.decl.pub and target != self.item.module:
                self.fail(Rule.NOT_PUBLIC, f"`{name.name}` is private to module `{target}`; mark it `pub` there", name.span)
        if item is None:
            self.fail(Rule.UNKNOWN_NAME, f"no type `{name.name}` in scope", name.span)
        if item.kind not in ("struct", "enum"):
            self.fail(Rule.NOT_A_STRUCT, f"`{name.name}` is a {item.kind}, not a type", name.span)
        if item.sig is None:
            raise Poisoned()
        return item.key, item.sig

    def expect_named(self, qualifier: Optional[ast.Ident], name: ast.Ident, t: Type) -> None:
        """The name written in a pattern must be the scrutinee's / value's own type."""
        if isinstance(t, Adt) and t.key.startswith("::Split"):
            if name.name != "Split" or qualifier is not None:
                self.fail(Rule.TYPE_MISMATCH, f"expected `{name.name}`, found `{t}`", name.span)
            return
        key, _ = self.type_item(qualifier, name)
        if not isinstance(t, Adt) or key != t.key:
            self.fail(Rule.TYPE_MISMATCH, f"expected `{t}`, found `{name.name}`", name.span)

    def fresh_args(self, td: TypeDecl) -> tuple[dict, tuple]:
        vs = tuple(Var() for _ in td.tparams)
        return {("T", p.name): v for p, v in zip(td.tparams, vs)}, vs

    # ------------------------------------------------------------ construction

    def tuple_expr(self, e: ast.TupleExpr) -> Type:
        if len(e.parts) < 2:
            self.fail(Rule.PATTERN_SHAPE, "a tuple has two components or more", e.span)
        return Tuple(tuple(self.expr(p) for p in e.parts))

    def struct_lit(self, e: ast.StructLit) -> Type:
        key, td = self.type_item(e.qualifier, e.name)
        if td.kind != "struct":
            self.fail(Rule.NOT_A_STRUCT, f"`{td.name}` is an enum; build it with `{td.name}::Variant`", e.name.span)
        sub, args = self.fresh_args(td)
        order = {n: i for i, (n, _) in enumerate(td.fields)}
        ftypes = dict(td.fields)
        seen: set[str] = set()
        last = -1
        for fi in e.fields:
            n = fi.name.name
            if n not in order:
                self.fail(Rule.UNKNOWN_NAME, f"`{td.name}` has no field `{n}`", fi.name.span)
            if n in seen:
                self.fail(Rule.DUPLICATE_DECLARATION, f"field `{n}` is given twice", fi.name.span)
            if order[n] < last:
                self.fail(Rule.FIELD_ORDER,
                          f"`{n}` is written after a field declared later; a struct literal's fields are evaluated in "
                          "declaration order, so writing them in another order would hide which expression runs first",
                          fi.name.span)
            last = order[n]
            seen.add(n)
            t = self.expr(fi.value)
            self.bind(substitute(ftypes[n], sub), t, {}, {}, set(), fi.value.span)
        for n, _ in td.fields:
            if n not in seen:
                self.fail(Rule.MISSING_FIELD, f"this `{td.name}` literal does not give field `{n}`; give every field",
                          e.span)
        return Adt(key, td.name, args)

    def variant_expr(self, e: ast.VariantExpr) -> Type:
        key, td = self.type_item(e.qualifier, e.enum)
        if td.kind != "enum":
            self.fail(Rule.NOT_AN_ENUM, f"`{td.name}` is a struct, not an enum; `::` names an enum's variant", e.enum.span)
        variants = dict(td.variants)
        if e.variant.name not in variants:
            self.fail(Rule.UNKNOWN_NAME, f"`{td.name}` has no variant `{e.variant.name}`", e.variant.span)
        payload = variants[e.variant.name]
        args = e.args or []
        if len(args) != len(payload):
            self.fail(Rule.ARITY_MISMATCH,
                      f"`{td.name}::{e.variant.name}` carries {len(payload)} value(s), found {len(args)}", e.span)
        sub, vs = self.fresh_args(td)
        for a, pt in zip(args, payload):
            t = self.expr(a)
            self.bind(substitute(pt, sub), t, {}, {}, set(), a.span)
        return Adt(key, td.name, vs)

    # ------------------------------------------------------------ reading members

    def member(self, e: ast.Expr) -> Type:
        """`e.f` / `e.N`: copy a val member of an owned value; through a reference, copy a val
        member or get a reference to a res member."""
        base = e.base
        loc = self.lookup_local(base.name) if isinstance(base, ast.Name) else None
        if loc is not None and not isinstance(self.zonk(loc.ty), Ref):
            bt = self.zonk(loc.ty)
            self.record(base, bt, loc)
            self.emit(L.Touch(loc, base.span))
        else:
            bt = self.expr(base)
        owned = not isinstance(bt, Ref)
        agg = bt if owned else self.zonk(bt.target)
        idx, ft = self.member_of(agg, e)
        if owned:
            self.emit(L.Read(bt, e.span))
            self.resolved[e] = Member(MemberMode.OWNED, idx)
            return ft
        if self.is_res(ft):
            self.resolved[e] = Member(MemberMode.REF_RES, idx)
            return Ref(bt.region, bt.unique, ft)
        self.resolved[e] = Member(MemberMode.REF_VAL, idx)
        return ft

    def member_of(self, agg: Type, e: ast.Expr) -> tuple[int, Type]:
        """The position and type of `e`'s member (`.field` of a struct, `.N` of a tuple)."""
        if isinstance(e, ast.FieldAccess):
            if not self.types.is_struct(agg):
                self.fail(Rule.NOT_A_STRUCT, f"only a struct has fields; this is `{agg}`", e.base.span)
            idx = self.types.field_index(agg, e.name.name)
            if idx is None:
                self.fail(Rule.UNKNOWN_NAME, f"`{agg}` has no field `{e.name.name}`", e.name.span)
            return idx, self.types.fields(agg)[idx][1]
        if not isinstance(agg, Tuple):
            self.fail(Rule.NOT_A_TUPLE, f"only a tuple has components `.{e.index}`; this is `{agg}`", e.base.span)
        if e.index >= len(agg.parts):
            self.fail(Rule.UNKNOWN_NAME, f"`{agg}` has no component `.{e.index}`", e.span)
        return e.index, agg.parts[e.index]

    def assign_member(self, target: ast.Expr, vt: Type, vspan) -> None:
        """`r.f = v` where `r` is a unique reference to a struct (or tuple)."""
        base = target.base
        loc = self.lookup_local(base.name) if isinstance(base, ast.Name) else None
        if loc is not None and not isinstance(self.zonk(loc.ty), Ref):
            self.fail(Rule.NOT_A_PLACE,
                      f"`{base.name}` is an owned value; a field can be assigned only through a unique reference `&!`",
                      target.span)
        bt = self.expr(base)
        if not isinstance(bt, Ref):
            self.fail(Rule.NOT_A_PLACE, "only a field reached through a unique reference can be assigned", target.span)
        if not bt.unique:
            self.fail(Rule.SHARED_REFERENCE_WRITTEN, f"`{bt}` is a shared reference; writing needs `&!`", target.span)
        idx, ft = self.member_of(self.zonk(bt.target), target)
        if self.is_res(ft):
            self.fail(Rule.LINEAR_VALUE_UNCONSUMED,
                      f"assigning to this field would discard the res value of type `{ft}` it holds", target.span)
        self.coerce(vt, ft, vspan)
        self.record(target, ft, Member(MemberMode.REF_VAL, idx))

    # ------------------------------------------------------------ taking apart

    def let_tuple(self, s: ast.LetTuple) -> None:
        t = self.expr(s.value)
        if not isinstance(t, Tuple):
            self.fail(Rule.NOT_A_TUPLE, f"`let (..)` takes a tuple apart, but this is `{t}`", s.value.span)
        if len(t.parts) != len(s.names):
            self.fail(Rule.ARITY_MISMATCH, f"this tuple has {len(t.parts)} components, the pattern names {len(s.names)}",
                      s.span)
        seen: set[str] = set()
        for n in s.names:
            if n.name in seen:
                self.fail(Rule.DUPLICATE_DECLARATION, f"`{n.name}` is bound twice in this pattern", n.span)
            seen.add(n.name)
        self.bindings[s] = tuple(self.declare(n.name, p, False, n.span, LocalKind.FIELD) for n, p in zip(s.names, t.parts))

    def match_stmt(self, s: ast.Match) -> None:
        st = self.expr(s.scrutinee)
        owned = not isinstance(st, Ref)
        et = st if owned else self.zonk(st.target)
        if not self.types.is_enum(et):
            self.fail(Rule.MATCH_ON_A_NON_ENUM, f"only an enum, or a reference to one, can be matched; this is `{et}`",
                      s.scrutinee.span)
        variants = dict(self.types.variants(et))
        order = [n for n, _ in self.types.variants(et)]
        covered: set[str] = set()
        catch_all = False
        arms: list = []
        for arm in s.arms:
            pat = arm.pattern
            if catch_all:
                self.fail(Rule.MATCH_ARM_UNREACHABLE, "this arm can never run: an earlier `_` arm catches everything",
                          pat.span)
            if isinstance(pat, ast.WildcardPattern):
                catch_all = True
                if len(covered) == len(order):
                    self.fail(Rule.MATCH_ARM_UNREACHABLE, "this `_` arm can never run: every variant is already matched",
                              pat.span)

                def extra(pat=pat):
                    if owned:
                        self.emit(L.Discard(et, pat.span))
                locs: list = []
            else:
                self.expect_named(pat.qualifier, pat.enum, et)
                vname = pat.variant.name
                if vname not in variants:
                    self.fail(Rule.UNKNOWN_NAME, f"`{et}` has no variant `{vname}`", pat.variant.span)
                if vname in covered:
                    self.fail(Rule.MATCH_ARM_UNREACHABLE, f"`{vname}` is already matched by an earlier arm", pat.span)
                covered.add(vname)
                payload = variants[vname]
                binds = pat.bindings or []
                if len(binds) != len(payload):
                    self.fail(Rule.ARITY_MISMATCH,
                              f"`{vname}` carries {len(payload)} value(s), this pattern binds {len(binds)}", pat.span)
                names = [b.name for b in binds if b is not None]
                dup = {n for n in names if names.count(n) > 1}
                if dup:
                    self.fail(Rule.DUPLICATE_DECLARATION, f"`{sorted(dup)[0]}` is bound twice in this pattern", pat.span)
                locs = []

                def extra(binds=binds, payload=payload, locs=locs, pat=pat):
                    for i, (b, pt) in enumerate(zip(binds, payload)):
                        if b is None:
                            if owned:
                                self.emit(L.Discard(pt, pat.span))
                            continue
                        ty = pt if owned else Ref(st.region, st.unique, pt)
                        locs.append((i, self.declare(b.name, ty, False, b.span, LocalKind.FIELD)))
            arms.append(self.scoped_block(arm.body, extra=extra))
            self.bindings[arm] = ArmBinding(tuple(locs))
        if not catch_all:
            missing = [n for n in order if n not in covered]
            if missing:
                self.fail(Rule.MATCH_NOT_EXHAUSTIVE,
                          f"this match does not cover `{missing[0]}`; add an arm for it or a final `_` arm", s.span)
        self.bindings[s] = MatchShape(owned)
        self.emit(L.Branch(arms, s.span))
