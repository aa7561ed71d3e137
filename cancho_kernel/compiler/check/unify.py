"""Type relations for body checking: inference variables, region outlives, and matching an
actual type against a formal one (instantiating a callee's type and region parameters and
allowing the two implicit coercions, unique→shared and a longer-lived region).

One per checked body (`BodyChecker.rel`): it owns the body's inference variables.
"""

from __future__ import annotations

from ..diagnostics import Rule
from typing import TYPE_CHECKING

from ..source import Span
from .refusals import fail, mismatch
from .types import (STATIC, Adt, BoxT, Cap, FnT, Param, Ref, Region, Slice, Tuple, Type, Var,
                    children, map_type, regions_in, substitute, walk)

if TYPE_CHECKING:
    from ..resolve import ItemRef
    from .signatures import FnSig


class TypeRelations:
    """Unification, coercion and the outlives relation within one function (`item`, `sig`)."""

    def __init__(self, item: "ItemRef", sig: "FnSig"):
        self.item = item
        self.sig = sig
        self.subst: dict[int, Type] = {}  # solved inference variables, by uid

    def zonk(self, t: Type) -> Type:
        """Replace solved inference variables throughout t."""
        def solved(x: Type):
            if isinstance(x, Var):
                got = self.subst.get(x.uid)
                return x if got is None else self.zonk(got)
            return None
        return map_type(t, solved)

    def has_var(self, t: Type) -> bool:
        return any(isinstance(x, Var) for x in walk(self.zonk(t)))

    def solve(self, v: Var, t: Type, span: Span) -> None:
        if self.occurs(v, t):
            fail(Rule.TYPE_MISMATCH, "this type would contain itself", span)
        self.subst[v.uid] = t

    def occurs(self, v: Var, t: Type) -> bool:
        return any(x is v for x in walk(self.zonk(t)))

    def outlives(self, a: Region, b: Region) -> bool:
        """Does region a outlive region b (in this function)?"""
        if a is b or a is STATIC:
            return True
        if b is STATIC:
            return False
        if a.kind == "param":
            if b.kind != "param":
                return True
            # where inner <= outer: outer outlives inner; transitive closure.
            seen, todo = set(), [b]
            while todo:
                x = todo.pop()
                if x is a:
                    return True
                if x.uid in seen:
                    continue
                seen.add(x.uid)
                todo += [o for (i, o) in self.sig.where if i is x]
            return False
        if b.kind == "param":
            return False
        return a in b.ancestors

    # ------------------------------------------------------------ type relations

    def bind(self, formal: Type, actual: Type, tsub: dict, rsub: dict, callee_regions: set,
             span: Span, top: bool = True) -> None:
        """Match an actual type against a formal one, instantiating the callee's type and region
        parameters (first argument wins) and allowing the two implicit coercions."""
        formal, actual = self.zonk(formal), self.zonk(actual)
        if isinstance(actual, Var):
            if formal is actual:
                return
            f2 = self.show(formal, tsub, rsub)
            if isinstance(f2, Param) and f2.owner != self.item.key:
                tsub[f2.name] = actual
                return
            self.solve(actual, f2, span)
            return
        if isinstance(formal, Var):
            self.solve(formal, actual, span)
            return
        if isinstance(formal, Param) and formal.owner != self.item.key:
            cur = tsub.get(formal.name)
            if cur is None:
                tsub[formal.name] = actual
                return
            # Already chosen by an earlier argument: the rest must agree (inference variables unify).
            self.bind(cur, actual, tsub, rsub, set(), span, top=False)
            return
        if isinstance(formal, Ref):
            if not isinstance(actual, Ref):
                mismatch(self.show(formal, tsub, rsub), actual, span)
            if formal.unique and not actual.unique:
                mismatch(self.show(formal, tsub, rsub), actual, span)
            if formal.region.uid in callee_regions:
                cur = rsub.get(formal.region.uid)
                if cur is None:
                    rsub[formal.region.uid] = actual.region
                elif not self.outlives(actual.region, cur):
                    fail(Rule.REFERENCE_ESCAPES_REGION,
                              f"`{actual}` does not outlive `{cur.name}`, the region this call already chose for `&{formal.region.name}`",
                              span)
            elif not self.outlives(actual.region, formal.region):
                fail(Rule.REFERENCE_ESCAPES_REGION,
                          f"`{actual}` does not outlive `{formal.region.name}`", span)
            if lends_ffi(self.zonk(actual.target), self.zonk(formal.target)):
                return
            self.bind(formal.target, actual.target, tsub, rsub, callee_regions, span, top=False)
            return
        if isinstance(formal, Slice) and isinstance(actual, Slice):
            self.bind(formal.elem, actual.elem, tsub, rsub, callee_regions, span, top=False)
            return
        if isinstance(formal, Tuple) and isinstance(actual, Tuple) and len(formal.parts) == len(actual.parts):
            for f, a in zip(formal.parts, actual.parts):
                self.bind(f, a, tsub, rsub, callee_regions, span, top=False)
            return
        if isinstance(formal, BoxT) and isinstance(actual, BoxT):
            self.bind(formal.inner, actual.inner, tsub, rsub, callee_regions, span, top=False)
            return
        if isinstance(formal, Adt) and isinstance(actual, Adt) and formal.key == actual.key \
                and len(formal.args) == len(actual.args):
            for f, a in zip(formal.args, actual.args):
                self.bind(f, a, tsub, rsub, callee_regions, span, top=False)
            return
        if isinstance(formal, FnT) and isinstance(actual, FnT) \
                and self.fn_types_match(formal, actual, tsub):
            return
        if formal == actual:
            return
        mismatch(self.show(formal, tsub, rsub), actual, span)

    def foreign_regions(self, t: Type) -> set:
        """Parameter regions in t that belong to another function (a region-polymorphic function
        used as a value): each use may instantiate them."""
        own = {r.uid for r in self.sig.regions.values()}
        return {r.uid for r in regions_in(t) if r.kind == "param" and r.uid not in own}

    def fn_types_match(self, formal: FnT, actual: FnT, tsub: dict | None = None) -> bool:
        """Function types agree up to renaming the actual's foreign region parameters; a callee's
        type parameter inside the formal (`less: fn(T, T) -> [] bool`) is chosen by its first
        occurrence, in `tsub`, and must then agree (no coercion inside a function type)."""
        free = self.foreign_regions(actual)
        mapping: dict[int, object] = {}

        def eq(f: Type, a: Type) -> bool:
            f, a = self.zonk(f), self.zonk(a)
            if isinstance(f, Param) and tsub is not None and f.owner != self.item.key:
                cur = tsub.get(f.name)
                if cur is None:
                    tsub[f.name] = a
                    return True
                return eq(cur, a)
            if isinstance(f, Ref) and isinstance(a, Ref):
                if f.unique != a.unique:
                    return False
                if a.region.uid in free:
                    got = mapping.setdefault(a.region.uid, f.region)
                    if got is not f.region:
                        return False
                elif a.region is not f.region:
                    return False
                return eq(f.target, a.target)
            if isinstance(f, FnT) and isinstance(a, FnT):
                return (len(f.params) == len(a.params) and f.row == a.row
                        and all(eq(x, y) for x, y in zip(f.params, a.params)) and eq(f.ret, a.ret))
            if type(f) is type(a) and isinstance(f, (Slice, Tuple, BoxT, Adt)):
                if isinstance(f, Adt) and f.key != a.key:
                    return False
                fs, as_ = children(f), children(a)
                return len(fs) == len(as_) and all(eq(x, y) for x, y in zip(fs, as_))
            return f == a

        return eq(formal, actual)

    def show(self, t: Type, tsub: dict, rsub: dict) -> Type:
        s = {("T", k): v for k, v in tsub.items()}
        s.update({("R", k): v for k, v in rsub.items()})
        return substitute(t, s)

    def same(self, a: Type, b: Type) -> bool:
        return self.zonk(a) == self.zonk(b)

    def coerce(self, actual: Type, expected: Type, span: Span) -> None:
        """`actual` may be used where `expected` is wanted (unique→shared, outliving regions)."""
        self.bind(expected, actual, {}, {}, set(), span)


def lends_ffi(held: Type, wanted: Type) -> bool:
    """A borrowed `Ffi` over a set of libraries may be lent where a strict subset of them is
    wanted (the reference's foreign-authority rules, docs/decisions.md); never from the root."""
    if not (isinstance(held, Cap) and isinstance(wanted, Cap) and held.kind == wanted.kind == "Ffi"):
        return False
    if not held.literal or not wanted.literal:
        return False
    return set(wanted.literal.split(",")) < set(held.literal.split(","))
