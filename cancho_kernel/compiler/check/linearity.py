"""The linearity check: replay a function's event tree once (language.md §5.2).

The body checker records events while it types a body; this module replays them and reports
the first violation. Slots are `Local` objects; their mode was fixed when they were declared.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

from ..diagnostics import Diagnostic, Rule
from ..source import Span


@dataclass
class Declare:
    slot: object
    shadows: Optional[object]
    span: Span


@dataclass
class Use:
    slot: object
    span: Span


@dataclass
class Touch:
    """A read of a binding that does not move it (field of a val struct, etc.): only lock checks."""

    slot: object
    span: Span


@dataclass
class Assign:
    slot: object
    span: Span


@dataclass
class Discard:
    ty: object
    span: Span


@dataclass
class Read:
    ty: object
    span: Span


@dataclass
class Return:
    span: Span


@dataclass
class Freeze:
    slot: object
    unique: bool
    span: Span


@dataclass
class Thaw:
    slot: object
    unique: bool


@dataclass
class Scope:
    events: list
    span: Span


@dataclass
class Branch:
    arms: list  # list of event lists
    span: Span


@dataclass
class Loop:
    events: list
    span: Span


@dataclass(eq=False)
class Lease:
    """A reference given to a thread by `spawn`: every binding it was read from (and every
    binding of the same alias class) is lent until `handle` (the binding that holds the thread,
    set once known) or this very lease is joined (check/threads.py). A `shared` lease lends only
    when its class also holds a unique reference (two readers are no race)."""

    sources: tuple
    span: Span
    handle: Optional[object] = None
    shared: bool = False


@dataclass
class Alias:
    """`slot` may reach what `sources` reach (check/aliasing.py): one class for the whole body."""

    slot: object
    sources: tuple


@dataclass
class Join:
    """`join(t)` of a handle binding, or `join(spawn(..))` of the lease made right there."""

    handle: Optional[object]
    lease: Optional[Lease]


LIVE, MOVED = "live", "moved"


class LinearityError(Exception):
    def __init__(self, diag: Diagnostic):
        super().__init__(diag.message)
        self.diag = diag


@dataclass
class _State:
    live: dict = field(default_factory=dict)  # slot -> LIVE | MOVED (res slots only)
    borrow: dict = field(default_factory=dict)  # slot -> ("frozen", n) | ("locked",)
    leases: list = field(default_factory=list)  # Lease events not yet joined

    def copy(self) -> "_State":
        return _State(dict(self.live), dict(self.borrow), list(self.leases))


class AliasClasses:
    """The bindings that may reach one object, joined over a whole body's `Alias` events.
    Flow-insensitive on purpose: a class holds for every branch and every loop iteration, so a
    `var` assigned in a later iteration or another arm is never missed."""

    def __init__(self, events: list):
        self.parent: dict = {}
        stack = [events]
        while stack:
            for ev in stack.pop():
                if isinstance(ev, Alias):
                    for s in ev.sources:
                        self.union(ev.slot, s)
                elif isinstance(ev, (Scope, Loop)):
                    stack.append(ev.events)
                elif isinstance(ev, Branch):
                    stack.extend(ev.arms)
        self.members: dict = {}
        for s in list(self.parent):
            self.members.setdefault(self.find(s), []).append(s)

    def find(self, slot):
        root = slot
        while self.parent.get(root, root) is not root:
            root = self.parent[root]
        while slot is not root:
            up = self.parent[slot]
            self.parent[slot] = root
            slot = up
        return root

    def union(self, a, b) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra is not rb:
            self.parent[ra] = rb
        self.parent.setdefault(rb, rb)

    def of(self, slot) -> list:
        """Every binding of `slot`'s class (itself when it aliases nothing)."""
        return self.members.get(self.find(slot), [slot])


class Replay:
    """Replays events; `is_res(slot)` and `is_res_type(t)` come from the checker's mode function."""

    def __init__(self, is_res_type: Callable[[object], bool], type_str: Callable[[object], str],
                 classes: Optional[AliasClasses] = None, holds_unique: Callable[[object], bool] = lambda t: True):
        self.is_res_type = is_res_type
        self.type_str = type_str
        self.classes = classes or AliasClasses([])
        self.holds_unique = holds_unique
        self.declared_order: list = []

    def lent(self, slot, st: _State):
        """The unjoined lease that holds what `slot` may reach, if any."""
        root = self.classes.find(slot)
        for lease in st.leases:
            if any(self.classes.find(s) is root for s in lease.sources):
                return lease
        return None

    def lends(self, lease: Lease) -> bool:
        """A shared lease matters only if something of its class is (or holds) a `&!`."""
        return not lease.shared or any(self.holds_unique(m.ty) for s in lease.sources for m in self.classes.of(s))

    def fail(self, rule: Rule, msg: str, span: Span) -> None:
        raise LinearityError(Diagnostic(rule, msg, span))

    def run(self, events: list, st: _State, declared: list) -> bool:
        diverged = False
        for ev in events:
            if diverged:
                break
            diverged = self.step(ev, st, declared)
        return diverged

    def step(self, ev, st: _State, declared: list) -> bool:
        """Apply one event; True when control does not continue past it (a `return`)."""
        match ev:
            case Declare():
                self._declare(ev, st, declared)
            case Use() | Touch():
                self._lent_check(ev.slot, st, ev.span)
                self._use(ev, st)
            case Lease():
                if self.lends(ev):
                    st.leases.append(ev)
            case Alias():
                pass  # joined into classes before the replay
            case Join():
                st.leases = [l for l in st.leases
                             if l is not ev.lease and (ev.handle is None or l.handle is not ev.handle)]
            case Discard():
                if self.is_res_type(ev.ty):
                    self.fail(Rule.LINEAR_VALUE_UNCONSUMED,
                              f"this discards a res value of type `{self.type_str(ev.ty)}`; it must be consumed", ev.span)
            case Read():
                if self.is_res_type(ev.ty):
                    self.fail(Rule.LINEAR_VALUE_TAKEN_APART,
                              f"`{self.type_str(ev.ty)}` is a res value: a field cannot be read out of it; take the whole value apart",
                              ev.span)
            case Assign():
                self._lent_check(ev.slot, st, ev.span)
                self._assign(ev, st)
            case Scope():
                return self._scope(ev, st, declared)
            case Branch():
                return self._branch(ev, st, declared)
            case Loop():
                self._loop(ev, st, declared)
            case Freeze():
                self._lent_check(ev.slot, st, ev.span)
                self._freeze(ev, st)
            case Thaw():
                b = st.borrow.get(ev.slot)
                if b is not None and b[0] == "frozen" and b[1] > 1:
                    st.borrow[ev.slot] = ("frozen", b[1] - 1)
                else:
                    st.borrow.pop(ev.slot, None)
            case Return():
                for s in declared:
                    if st.live.get(s) == LIVE:
                        self.fail(Rule.LINEAR_VALUE_UNCONSUMED,
                                  f"`{s.name}` (a res value of type `{self.type_str(s.ty)}`) is still live here, where the function returns; consume it first",
                                  ev.span)
                return True
            case _:
                raise TypeError(f"unknown event {ev!r}")
        return False

    def _lent_check(self, slot, st: _State, span: Span) -> None:
        if st.leases and self.lent(slot, st) is not None:
            self.fail(Rule.BORROW_CONFLICT,
                      f"`{slot.name}` is lent to a thread that has not been joined; `join` its handle before "
                      f"using `{slot.name}` again", span)

    def _declare(self, ev: Declare, st: _State, declared: list) -> None:
        if ev.shadows is not None and st.live.get(ev.shadows) == LIVE:
            self.fail(Rule.LINEAR_VALUE_UNCONSUMED,
                      f"`{ev.shadows.name}` still holds a res value; shadowing it here would put that value out of reach",
                      ev.span)
        if self.is_res_type(ev.slot.ty):
            st.live[ev.slot] = LIVE
        declared.append(ev.slot)

    def _freeze(self, ev: Freeze, st: _State) -> None:
        s = ev.slot
        if st.live.get(s) == MOVED:
            self.fail(Rule.LINEAR_USE_AFTER_MOVE, f"`{s.name}` has already been consumed; there is nothing left to borrow", ev.span)
        b = st.borrow.get(s)
        if b is not None and b[0] == "locked":
            self.fail(Rule.BORROW_CONFLICT, f"`{s.name}` is already borrowed uniquely here", ev.span)
        if b is not None and ev.unique:
            self.fail(Rule.BORROW_CONFLICT, f"`{s.name}` is borrowed (shared) here, so it cannot be borrowed uniquely", ev.span)
        if ev.unique:
            st.borrow[s] = ("locked",)
        else:
            st.borrow[s] = ("frozen", (b[1] if b else 0) + 1)

    def _use(self, ev: Use | Touch, st: _State) -> None:
        s = ev.slot
        b = st.borrow.get(s)
        if b is not None and b[0] == "locked":
            self.fail(Rule.BORROW_CONFLICT, f"`{s.name}` is borrowed uniquely here, so it cannot be used until the borrow ends", ev.span)
        state = st.live.get(s)
        if isinstance(ev, Touch) or state is None:
            return
        if state == MOVED:
            self.fail(Rule.LINEAR_USE_AFTER_MOVE, f"`{s.name}` has already been consumed; a res value is used exactly once", ev.span)
        if b is not None:
            self.fail(Rule.BORROW_CONFLICT, f"`{s.name}` is borrowed here, so it cannot be moved or consumed", ev.span)
        st.live[s] = MOVED

    def _assign(self, ev: Assign, st: _State) -> None:
        s = ev.slot
        if st.borrow.get(s) is not None:
            self.fail(Rule.BORROW_CONFLICT, f"`{s.name}` is borrowed here, so it cannot be assigned", ev.span)
        if st.live.get(s) == LIVE:
            self.fail(Rule.LINEAR_VALUE_UNCONSUMED,
                      f"assigning to `{s.name}` would discard the res value it still holds", ev.span)
        if self.is_res_type(s.ty):
            st.live[s] = LIVE

    def _branch(self, ev: Branch, st: _State, declared: list) -> bool:
        """Every arm that continues must leave each outer res binding in the same state."""
        results = []
        for arm in ev.arms:
            s2 = st.copy()
            d = self.run(arm, s2, list(declared))
            if d:
                continue
            results.append(s2)
        if not results:
            return True
        first = results[0]
        for other in results[1:]:
            for slot in set(first.live) | set(other.live):
                if slot in declared and first.live.get(slot) != other.live.get(slot):
                    self.fail(Rule.LINEAR_VALUE_UNCONSUMED,
                              f"the branches disagree about `{slot.name}`: one consumes it and another does not", ev.span)
        keep = {k: v for k, v in first.live.items() if k in declared}
        st.live = {**{k: v for k, v in st.live.items() if k in declared}, **keep}
        st.borrow = first.borrow
        held = {id(l) for l in first.leases}
        if any({id(l) for l in other.leases} != held for other in results[1:]):
            self.fail(Rule.BORROW_CONFLICT,
                      "the branches disagree about whether a thread still holds a `&!`: join the handle by name "
                      "in every arm, or in none", ev.span)
        st.leases = first.leases
        return False

    def _loop(self, ev: Loop, st: _State, declared: list) -> None:
        """A loop body must leave every outer res binding as it found it."""
        before = st.copy()
        s2 = st.copy()
        d = self.run(ev.events, s2, list(declared))
        if not d:
            for slot in declared:
                if before.live.get(slot) != s2.live.get(slot):
                    self.fail(Rule.LINEAR_VALUE_UNCONSUMED,
                              f"`{slot.name}` is consumed inside this loop, which may run more than once (or not at all)",
                              ev.span)
            kept = [l for l in s2.leases if not any(l is m for m in before.leases)]
            if kept:
                self.fail(Rule.BORROW_CONFLICT,
                          "a thread spawned in this loop is still holding a `&!` when the iteration ends, and the "
                          "next iteration may lend it again: `join` the handle by name inside the loop", kept[0].span)

    def _scope(self, ev: Scope, st: _State, declared: list) -> bool:
        inner_declared = list(declared)
        n = len(inner_declared)
        d = self.run(ev.events, st, inner_declared)
        if not d:
            for s in inner_declared[n:]:
                if st.live.get(s) == LIVE:
                    self.fail(Rule.LINEAR_VALUE_UNCONSUMED,
                              f"`{s.name}` is still live at the end of this block: a res value of type "
                              f"`{self.type_str(s.ty)}` must be consumed before its block ends",
                              s.span or ev.span)
        for s in inner_declared[n:]:
            st.live.pop(s, None)
        return d


def check_linearity(events: list, is_res_type, type_str, holds_unique=lambda t: True) -> Optional[Diagnostic]:
    """Replay a function body's events; the first violation, or None."""
    r = Replay(is_res_type, type_str, AliasClasses(events), holds_unique)
    try:
        r.run(events, _State(), [])
    except LinearityError as e:
        return e.diag
    return None
