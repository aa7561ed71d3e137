"""Which bindings may reach one object through a reference, for the thread leases.

A `&!r T` is `val`: every copy reaches the same object, and a copy can hide inside any value — a
tuple, a struct field, an enum payload, a `var` assigned later, a function's result or a
parameter given the same reference twice. A `spawn` that lends a unique reference must lend every
binding that may reach the same object, or the spawning thread writes it while the worker does
(docs/decisions.md, "A `&!` lent to a thread, through every alias"). So the body checker records
an `Alias` event for every binding, assignment, borrow, parameter pair and call through which two
bindings may come to reach one object, and the linearity replay joins them into one class,
flow-insensitively (sound for every branch and loop iteration at once; linearity.py).

Two bindings may reach one object only if a reference inside one may point into what a reference
inside the other points to: their referent types contain one another (a `&!i Io` never reaches a
`Counter`). A type parameter or an unsolved type may be anything.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Iterable, Iterator

from .. import ast
from . import linearity as L
from .typed import Local
from .types import STATIC, FnT, Param, Ref, Type, Var, children, map_type

if TYPE_CHECKING:
    from .body import BodyChecker

THREAD_KEY = "::Thread"


def is_thread(t: Type) -> bool:
    """Is `t` a thread handle `Thread[T, R]`?"""
    return getattr(t, "key", None) == THREAD_KEY


def ast_nodes(e: object) -> Iterator[ast.Node]:
    """Every node of an expression, itself included."""
    stack: list[object] = [e]
    while stack:
        x = stack.pop()
        if isinstance(x, ast.Node):
            yield x
            stack.extend(getattr(x, f.name) for f in dataclasses.fields(x) if f.name != "span")
        elif isinstance(x, (list, tuple)):
            stack.extend(x)


def named_locals(e: object, chk: "BodyChecker") -> Iterator[Local]:
    """Every local an already-checked expression names, in any position."""
    for x in ast_nodes(e):
        if isinstance(x, ast.Name):
            r = chk.resolved.get(x)
            if isinstance(r, Local):
                yield r


class Aliases:
    """The `Alias` events of one body, decided by the types of what is bound."""

    def __init__(self, chk: "BodyChecker"):
        self.chk = chk
        self.rel = chk.rel
        self._contains: dict[tuple[Type, Type], bool] = {}

    # ------------------------------------------------------------ types

    def refs(self, t: Type) -> list[Ref]:
        """The references a value of type `t` holds: a captureless function value holds none,
        and a thread's handle none the spawning thread can reach (`join` gives its result back)."""
        out: list[Ref] = []
        stack = [self.rel.zonk(t)]
        while stack:
            x = stack.pop()
            if isinstance(x, FnT) or is_thread(x):
                continue
            if isinstance(x, Ref):
                out.append(x)
            stack.extend(children(x))
        return out

    def holds_ref(self, t: Type) -> bool:
        return bool(self.refs(t))

    def holds_unique(self, t: Type) -> bool:
        return any(r.unique for r in self.refs(t))

    def contains(self, outer: Type, inner: Type) -> bool:
        """May a value of type `inner` live inside one of type `outer` (or be it)?"""
        if isinstance(outer, (Param, Var)) or isinstance(inner, (Param, Var)) or outer == inner:
            return True
        key = (outer, inner)
        got = self._contains.get(key)
        if got is not None:
            return got
        self._contains[key] = False  # a cycle through declarations adds nothing
        parts = list(children(outer))
        types = self.chk.types
        if types.is_struct(outer):
            parts += [ft for _, ft in types.fields(outer)]
        elif types.is_enum(outer):
            parts += [p for _, ps in types.variants(outer) for p in ps]
        got = any(self.contains(self.erased(p), inner) for p in parts)
        self._contains[key] = got
        return got

    def erased(self, t: Type) -> Type:
        """`t` with every region made one: a value may be seen under a shorter region than the
        one it was made with, so regions never tell two objects apart."""
        return map_type(self.rel.zonk(t), lambda x: None, lambda r: STATIC)

    def may_overlap(self, a: Type, b: Type) -> bool:
        """May a reference inside `a` and one inside `b` reach the same object?"""
        return any(self.contains(self.erased(x.target), self.erased(y.target)) or
                   self.contains(self.erased(y.target), self.erased(x.target))
                   for x in self.refs(a) for y in self.refs(b))

    # ------------------------------------------------------------ events

    def sources(self, values: Iterable[object], like: Type, exclude: object = None) -> tuple[Local, ...]:
        """The locals named in `values` that may reach what a value of type `like` reaches; a
        thread's handle stands for what its lease lent (`let q = join(t)` gets it back)."""
        found: list[Local] = []
        for v in values:
            for s in named_locals(v, self.chk):
                for x in self.chk.builtin_calls.threads.lent_through(s):
                    if x is not exclude and x not in found and self.may_overlap(x.ty, like):
                        found.append(x)
        return tuple(found)

    def bind(self, slot: Local, *values: object) -> None:
        """`slot` now holds (part of) `values`: a `let`, a pattern, an arm binding, `x = v`.
        A thread's handle is followed by its lease instead (check/threads.py)."""
        if not self.holds_ref(slot.ty):
            return
        found = self.sources(values, slot.ty, slot)
        if found:
            self.chk.emit(L.Alias(slot, found))

    def borrowed(self, ref: Local, owner: Local) -> None:
        """`borrow x as &r`: `r` reaches every reference `x` holds."""
        if self.holds_ref(owner.ty) and self.may_overlap(ref.ty, owner.ty):
            self.chk.emit(L.Alias(ref, (owner,)))

    def place(self, target: ast.Expr, value: ast.Expr, ty: Type) -> None:
        """`r.f = v`, `*r = v`, `s[i] = v`: what the place is reached from now reaches `v` too."""
        if not self.holds_ref(ty):
            return
        for s in dict.fromkeys(named_locals(target, self.chk)):
            self.bind(s, value)

    def params(self, params: list[Local]) -> None:
        """Two parameters may be one reference given twice (`both(p, p)`)."""
        for i, a in enumerate(params):
            found = tuple(b for b in params[:i] if (self.holds_unique(a.ty) or self.holds_unique(b.ty))
                          and self.may_overlap(a.ty, b.ty))
            if found:
                self.chk.emit(L.Alias(a, found))

    def call(self, args: list[ast.Expr]) -> None:
        """A call may store one argument's reference through another that is a `&!` to something
        holding references; the two are one class from then on."""
        holders = [a for a in args if a in self.chk.expr_types and
                   any(r.unique and self.holds_ref(r.target) for r in self.refs(self.chk.expr_types[a]))]
        for h in holders:
            for s in dict.fromkeys(named_locals(h, self.chk)):
                self.bind(s, *[a for a in args if a is not h])
