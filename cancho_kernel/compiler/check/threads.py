"""Checking `spawn`, `join` and `fork_heap` (edition 4, runtime.md §1; the reference's
docs/threads.md and docs/parallelism.md §8).

`spawn(payload, body)` runs the captureless function value `body` on a real OS thread with
`payload` as its one argument and gives back a `Thread[T, R]`: `T` is the payload's type,
carried only so a handle whose payload borrows cannot outlive that borrow (the ordinary
escape check walks type arguments), `R` is what `join` gives back. Both cross `pthread`'s one
pointer, so each must be one pointer-width leaf or none (`thread-payload-type`). The call
performs `conc` and the worker's own row.

A reference given to a thread is lent to it until the handle is joined: the body checker
records a `Lease` that the linearity replay follows (linearity.py), together with the `Alias`
events (aliasing.py) through which other bindings may reach the same object; a handle joined by
name or a `spawn` joined where it is made ends the lease. A handle that comes back from a call
(a function that spawns and returns the thread) lends that call's arguments the same way.

Held by `BuiltinCalls` (builtin_calls.py), with a typed reference back to the body checker.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import ast
from ..diagnostics import Rule
from . import linearity as L
from .aliasing import THREAD_KEY, ast_nodes, is_thread, named_locals
from .refusals import fail, mismatch
from .typed import CallKind, CallTarget, Local
from .types import BOOL, BYTE, CPTR, INT, UNIT, Adt, Cap, FnT, Handle, LabelT, Ref, Slice, Type, walk

if TYPE_CHECKING:
    from .body import BodyChecker

# Owned capabilities with no run-time leaf that may move into a thread (the reference's allowlist:
# `World` and `Split` are the root and the bundle, and stay with `main`).
CROSSING_CAPS = frozenset({"Io", "Ffi", "Fs", "Args", "Heap", "Net", "Clock"})
CROSSING_HANDLES = frozenset({"File"})
CONC = LabelT("conc")


def thread_type(payload: Type, result: Type) -> Adt:
    """The handle type `Thread[T, R]`."""
    return Adt(THREAD_KEY, "Thread", (payload, result))


def crosses(t: Type) -> bool:
    """Is `t` one pointer-width leaf (or none), so it fits `pthread`'s `void *` either way?
    `float` is one leaf too, but of the wrong register class; a slice reference is two."""
    if t in (UNIT, INT, BYTE, BOOL, CPTR) or isinstance(t, FnT):
        return True
    if isinstance(t, Ref):
        return not isinstance(t.target, Slice)
    if isinstance(t, Cap):
        return t.kind in CROSSING_CAPS
    if isinstance(t, Handle):
        return t.name in CROSSING_HANDLES
    return False


class ThreadCalls:
    """`spawn`, `join` and `fork_heap` of one body, and the leases they make."""

    def __init__(self, chk: "BodyChecker"):
        self.chk = chk
        self.rel = chk.rel
        # The lease each `spawn` call made (none for a payload that is no unique reference).
        self.leases: dict[int, L.Lease] = {}
        # Leases of handles given back by other calls (a function that spawns and returns).
        self.call_leases: list[L.Lease] = []

    def spawn(self, e: ast.Call) -> Type:
        chk = self.chk
        if len(e.args) != 2:
            fail(Rule.ARITY_MISMATCH,
                 f"`spawn` takes 2 arguments (the payload and the function value to run), found {len(e.args)}", e.span)
        payload, body = e.args
        pt = self.rel.zonk(chk.expr(payload))
        bt = self.rel.zonk(chk.expr(body))
        if not isinstance(bt, FnT):
            fail(Rule.NOT_A_FUNCTION,
                 f"`spawn` runs a function value (`let w = worker;`), and `{bt}` is not one", body.span)
        if len(bt.params) != 1:
            fail(Rule.ARITY_MISMATCH,
                 f"the function `spawn` runs takes exactly one parameter, the payload; this one takes {len(bt.params)}",
                 body.span)
        self.rel.bind(bt.params[0], pt, {}, {}, self.rel.foreign_regions(bt), payload.span)
        if not crosses(pt):
            fail(Rule.THREAD_PAYLOAD_TYPE, f"`spawn`'s payload has type `{pt}`, which cannot cross to a real thread yet "
                 "(one `int`, `bool`, `byte`, `c_ptr`, function value, non-slice reference, or an owned `File`, "
                 "`Io`, `Ffi`, `Fs`, `Args`, `Heap`, `Net` or `Clock`)", payload.span)
        ret = self.rel.zonk(bt.ret)
        if not crosses(ret):
            fail(Rule.THREAD_PAYLOAD_TYPE,
                 f"the function `spawn` runs returns `{ret}`, which cannot cross back from a real thread yet", body.span)
        if isinstance(pt, Ref):
            self.lend(e, chk.aliases.sources([payload], pt), not pt.unique)
        chk.performed |= {CONC, *bt.row}
        chk.resolved[e] = CallTarget(CallKind.BUILTIN, "spawn")
        return thread_type(pt, ret)

    def join(self, e: ast.Call) -> Type:
        chk = self.chk
        if len(e.args) != 1:
            fail(Rule.ARITY_MISMATCH, f"`join` takes 1 argument, a thread handle, found {len(e.args)}", e.span)
        (h,) = e.args
        ht = self.rel.zonk(chk.expr(h))
        if not is_thread(ht):
            fail(Rule.TYPE_MISMATCH, f"`join` takes a thread handle made by `spawn`, and `{ht}` is not one", h.span)
        if isinstance(h, ast.Name) and isinstance(chk.resolved.get(h), Local):
            chk.emit(L.Join(chk.resolved[h], None))
        elif isinstance(h, ast.Call) and id(h) in self.leases:
            chk.emit(L.Join(None, self.leases[id(h)]))
        chk.resolved[e] = CallTarget(CallKind.BUILTIN, "join")
        return ht.args[1]

    def lend(self, e: ast.Call, sources: tuple, shared: bool) -> None:
        if sources:
            lease = L.Lease(sources, e.span, shared=shared)
            self.leases[id(e)] = lease
            self.chk.emit(lease)

    def all_leases(self) -> list[L.Lease]:
        return [*self.leases.values(), *self.call_leases]

    def lent_through(self, loc: Local) -> tuple:
        """What a read of `loc` may reach: a handle stands for what its thread was lent."""
        if not is_thread(self.rel.zonk(loc.ty)):
            return (loc,)
        return tuple(s for lease in self.all_leases() if lease.handle is loc for s in lease.sources)

    def threads_in(self, t: Type) -> list[Adt]:
        """The thread handle types a value of type `t` holds (itself, or inside a tuple, ...)."""
        return [x for x in walk(self.rel.zonk(t)) if is_thread(x)]

    def bound(self, value: ast.Expr, loc: Local) -> None:
        """`loc` is bound from `value` (a `let`, a pattern, an arm): if it holds a thread's
        handle, it takes over the lease of a `spawn` inside `value` or of the binding it is moved
        from; a handle that a call gives back lends that call's arguments until it is joined."""
        if not self.threads_in(loc.ty):
            return
        named = list(named_locals(value, self.chk))
        calls = [x for x in ast_nodes(value) if isinstance(x, ast.Call)]
        made_here = {id(c) for c in calls}
        taken = False
        for key, lease in self.leases.items():
            if (lease.handle is None and key in made_here) or any(lease.handle is n for n in named):
                lease.handle, taken = loc, True
        for lease in self.call_leases:
            if any(lease.handle is n for n in named):
                lease.handle, taken = loc, True
        if taken:
            return
        aliases = self.chk.aliases
        for c in calls:
            if id(c) in self.leases or c not in self.chk.expr_types:
                continue
            for th in self.threads_in(self.chk.expr_types[c]):
                payload = th.args[0]
                found = aliases.sources(c.args, payload) if aliases.holds_ref(payload) else ()
                if found:
                    lease = L.Lease(found, c.span, loc, shared=not aliases.holds_unique(payload))
                    self.call_leases.append(lease)
                    self.chk.emit(lease)

    def fork_heap(self, e: ast.Call) -> Type:
        """`fork_heap(h: &!x Heap) -> [heap] Heap`: a second owned `Heap` for a worker."""
        chk = self.chk
        if len(e.args) != 1:
            fail(Rule.ARITY_MISMATCH, f"`fork_heap` takes 1 argument, a `&!` borrow of a `Heap`, found {len(e.args)}",
                 e.span)
        t = self.rel.zonk(chk.expr(e.args[0]))
        target = self.rel.zonk(t.target) if isinstance(t, Ref) else None
        if not (isinstance(target, Cap) and target.kind == "Heap"):
            mismatch("a `&!` borrow of a `Heap`", t, e.args[0].span)
        if not t.unique:
            fail(Rule.CAPABILITY_MISUSED, f"`{t}` is not a uniquely borrowed `Heap`: forking one needs `&!`, "
                 "as allocating does (`borrow mut heap as &!h in { .. }`)", e.args[0].span)
        chk.performed.add(LabelT("heap"))
        chk.resolved[e] = CallTarget(CallKind.BUILTIN, "fork_heap")
        return Cap("Heap")

