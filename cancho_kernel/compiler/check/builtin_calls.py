"""Checking calls of builtins whose signature depends on the call: `split`, `release`,
`contents`, `narrow`, the filesystem verbs (their label carries the capability's prefix), and
every ordinary builtin through its cancho-text signature with constant folding.

Held by `BodyChecker` (body.py), with a typed reference back to it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import ast
from ..diagnostics import Refusal, Rule
from ..source import Span
from .builtins import BUILTINS, CAP_VERBS
from .refusals import fail, mismatch
from .consteval import byte_of, wrap
from .threads import ThreadCalls
from .typed import CallKind, CallTarget
from .signatures import builtin_signature, cap_verb_signature, split_type
from .types import BYTE, INT, STATIC, Adt, BoxT, Cap, LabelT, Ref, Slice, Tuple, Type

# Filesystem verbs checked at the call site: (labels, third argument, result). Every path is
# checked against the capability's prefix at run time (codegen `path_cstring`); `fs_rename`'s
# third argument is a second path.
FS_VERBS = {
    "open_read": (("fs_read",), None, Adt("::Opened", "Opened")),
    "fs_read": (("fs_read",), "unique", INT),
    "fs_write": (("fs_write",), "shared", INT),
    "open_dir": (("fs_read",), None, Adt("::DirOpened", "DirOpened")),
    "open_append": (("fs_write",), None, Adt("::Opened", "Opened")),
    "open_write": (("fs_write",), None, Adt("::Opened", "Opened")),
    "open_new": (("fs_write",), None, Adt("::Opened", "Opened")),
    "open_rw": (("fs_read", "fs_write"), None, Adt("::Opened", "Opened")),
    "fs_rename": (("fs_write",), "shared", Adt("::Done", "Done")),
    "fs_remove": (("fs_write",), None, Adt("::Done", "Done")),
}



# The signals a program may claim (runtime.md, edition 6), and why others are refused.
CLAIMABLE_SIGNALS = ("ALRM", "HUP", "INT", "QUIT", "TERM", "USR1", "USR2", "WINCH")
UNCATCHABLE_SIGNALS = ("KILL", "STOP")
FAULT_SIGNALS = ("SEGV", "ILL", "BUS", "FPE", "ABRT", "TRAP", "SYS")


def check_signal_set(text: str, span: Span) -> None:
    """A signal set literal is claimable names without `SIG`, comma separated, each once;
    otherwise `signal-not-claimable`, saying why."""
    names = text.split(",")
    which = ", ".join(CLAIMABLE_SIGNALS)
    for name in names:
        if name in CLAIMABLE_SIGNALS:
            continue
        if name in UNCATCHABLE_SIGNALS:
            why = f"`{name}` cannot be caught by any process"
        elif name in FAULT_SIGNALS:
            why = f"`{name}` is raised by a fault, which a program cannot defer (a cancho trap is `SIGILL`)"
        elif name.startswith("SIG") and name[3:] in CLAIMABLE_SIGNALS + UNCATCHABLE_SIGNALS + FAULT_SIGNALS:
            why = f"signals are named without the `SIG` prefix: `{name[3:]}`"
        elif not name:
            why = "a signal set names at least one signal, with no empty entries"
        else:
            why = f"`{name}` is not a signal this compiler lets a program claim"
        raise Refusal(Rule.SIGNAL_NOT_CLAIMABLE, f"{why}; claimable signals are {which}", span)
    if len(set(names)) != len(names):
        raise Refusal(Rule.SIGNAL_NOT_CLAIMABLE, f"`\"{text}\"` names a signal twice; a set names each once", span)


# Verbs whose capability must be lent: anything else there is `capability-misused`, as the
# reference refuses it (net.md, signals.md §4), with why.
MISUSED_UNLESS_BORROWED = {
    "Net": "the network is reached through the capability that names what it may touch",
    "Signals": "signals are claimed through the capability that names which ones",
}


def canonical_signals(text: str) -> str:
    """A checked set in its one spelling, alphabetical (the reference's signals.md §2.1): `narrow`
    answers it, so two programs naming one set have one type and one row."""
    names = set(text.split(","))
    return ",".join(n for n in CLAIMABLE_SIGNALS if n in names)


def check_signal_claim(held: str, span: Span) -> None:
    """`signals_watch` claims the set its capability names: never the root (`capability-misused`:
    the authority report could not say which), and a set written canonically (signals.md §4)."""
    if not held:
        raise Refusal(Rule.CAPABILITY_MISUSED,
                      "this `Signals` is not narrowed to the signals it will claim; `narrow(signals, \"INT,TERM\")` "
                      "first, so the authority report can say which", span)
    check_signal_set(held, span)
    if canonical_signals(held) != held:
        raise Refusal(Rule.SIGNAL_NOT_CLAIMABLE, f"the set `{held}` is not written canonically; a set is "
                      f"alphabetical, `{canonical_signals(held)}`", span)


if TYPE_CHECKING:
    from .body import BodyChecker


class BuiltinCalls:
    """Builtin calls of one body, checked for (and through) the `BodyChecker` that owns them."""

    def __init__(self, chk: "BodyChecker"):
        self.chk = chk
        self.rel = chk.rel
        self.threads = ThreadCalls(chk)

    def fs_call(self, e: ast.Call, name: str) -> Type:
        """`open_read`/`fs_read`/`fs_write`: the label carries the capability's own prefix."""
        labels, third, ret = FS_VERBS[name]
        want = 3 if third else 2
        if len(e.args) != want:
            fail(Rule.ARITY_MISMATCH, f"`{name}` takes {want} arguments, found {len(e.args)}", e.span)
        ct = self.chk.expr(e.args[0])
        if not (isinstance(ct, Ref) and isinstance(self.rel.zonk(ct.target), Cap) and self.rel.zonk(ct.target).kind == "Fs"):
            fail(Rule.TYPE_MISMATCH, f"expected a borrowed `Fs(..)` capability, found `{ct}`", e.args[0].span)
        prefix = self.rel.zonk(ct.target).literal or ""
        self.byte_slice(e.args[1], unique=False)
        if third:
            self.byte_slice(e.args[2], unique=(third == "unique"))
        self.chk.performed |= {LabelT(label, prefix) for label in labels}
        self.chk.resolved[e] = CallTarget(CallKind.BUILTIN, name, prefix=prefix)
        return ret

    def cap_verb(self, e: ast.Call, name: str) -> Type:
        """`exec_spawn`, `tcp_connect`, ...: the first argument borrows a capability whose literal
        the label carries; the rest is an ordinary signature (check/builtins.py `CAP_VERBS`)."""
        kind = CAP_VERBS[name][0]
        template = builtin_signature(name, self.chk.edition)
        if len(e.args) != len(template.params):
            self.chk.call_sig(template, e)  # refuses with the arity message
        ct = self.chk.expr(e.args[0])
        target = self.rel.zonk(ct.target) if isinstance(ct, Ref) else None
        if not (isinstance(target, Cap) and target.kind == kind):
            if kind in MISUSED_UNLESS_BORROWED:  # the reference's granted_net_bound and signals_watch
                fail(Rule.CAPABILITY_MISUSED, f"`{ct}` is not a borrowed `{kind}`; {MISUSED_UNLESS_BORROWED[kind]}",
                     e.args[0].span)
            fail(Rule.TYPE_MISMATCH, f"expected a borrowed `{kind}(..)` capability, found `{ct}`", e.args[0].span)
        if name == "signals_watch":
            check_signal_claim(target.literal or "", e.args[0].span)
        sig = cap_verb_signature(name, target.literal or "")
        ret, subst = self.chk.call_sig(sig, e, first=ct)
        self.chk.performed |= set(sig.row)
        self.chk.resolved[e] = CallTarget(CallKind.BUILTIN, name, None, sig, subst)
        return ret

    def byte_slice(self, a: ast.Expr, unique: bool) -> None:
        t = self.chk.expr(a)
        if not (isinstance(t, Ref) and self.rel.zonk(t.target) == Slice(BYTE)) or (unique and not t.unique):
            fail(Rule.TYPE_MISMATCH, f"expected `&{'!' if unique else ''}r [byte]`, found `{t}`", a.span)

    def narrow(self, e: ast.Call) -> Type:
        """`narrow(c, "lit", ...)`: consume an owned capability, give back a narrower one (or a
        tuple of pairwise-unrelated children for Fs/Exec)."""
        from .effects import extends_path

        if len(e.args) < 2:
            fail(Rule.ARITY_MISMATCH, "`narrow` takes a capability and one or more literals", e.span)
        t = self.chk.expr(e.args[0])
        if isinstance(t, Ref) and isinstance(self.rel.zonk(t.target), Cap):
            fail(Rule.CAPABILITY_NOT_NARROWABLE, f"this capability is borrowed (`{t}`): only its owner can narrow it",
                      e.args[0].span)
        if not isinstance(t, Cap) or t.literal is None:
            fail(Rule.CAPABILITY_NOT_NARROWABLE, f"`{t}` carries no value to narrow", e.args[0].span)
        lits: list[str] = []
        for a in e.args[1:]:
            if not isinstance(a, ast.StrLit):
                fail(Rule.CAPABILITY_NOT_NARROWABLE, "`narrow` takes a literal: the new scope must be known when the program is checked",
                          a.span)
            self.chk.record(a, Ref(STATIC, False, Slice(BYTE)))
            lits.append(a.value.decode("utf-8", "replace"))
        if len(lits) > 1 and t.kind not in ("Fs", "Exec"):
            fail(Rule.CAPABILITY_NOT_NARROWABLE, several_children_refusal(t.kind, e.args[0], lits), e.span)
        path_like = t.kind in ("Fs", "Exec")
        if t.kind == "Signals":
            for k, a in enumerate(e.args[1:]):
                check_signal_set(lits[k], a.span)
                lits[k] = canonical_signals(lits[k])
        for lit, a in zip(lits, e.args[1:]):
            if lit == t.literal:
                fail(Rule.CAPABILITY_NOT_NARROWABLE, f"this narrows `{t.literal}` to itself; a narrowing must shrink the scope",
                          a.span)
            if path_like:
                inside = extends_path(t.literal, lit)
            elif t.kind == "Signals":  # a set: the empty set holds every signal, others their subsets
                inside = not t.literal or set(lit.split(",")) <= set(t.literal.split(","))
            else:
                inside = lit.startswith(t.literal)
            if not inside:
                why = " (a path prefix extends at a `/`)" if path_like and lit.startswith(t.literal) else ""
                fail(Rule.CAPABILITY_NOT_NARROWABLE, f"`{t}` cannot be narrowed to `{lit}`{why}", a.span)
            if t.kind == "Ffi":
                from .signatures import check_ffi_scope
                check_ffi_scope(lit, a.span)
        for i, x in enumerate(lits):
            for y in lits[i + 1:]:
                if x == y:
                    fail(Rule.CAPABILITY_NOT_NARROWABLE, f"`\"{x}\"` and `\"{y}\"` are the same path; children must be unrelated",
                              e.span)
                if extends_path(x, y) or extends_path(y, x):
                    fail(Rule.CAPABILITY_NOT_NARROWABLE, f"`\"{x}\"` and `\"{y}\"` are nested; children must be unrelated",
                              e.span)
        self.chk.resolved[e] = CallTarget(CallKind.BUILTIN, "narrow")
        if len(lits) == 1:
            return Cap(t.kind, lits[0])
        return Tuple(tuple(Cap(t.kind, l) for l in lits))

    def call_builtin(self, e: ast.Call, name: str) -> Type:
        callee = e.callee
        if not BUILTINS[name].checked:
            self.chk.unsupported(f"the builtin `{name}`", callee.span)
        if not BUILTINS[name].supported:
            self.chk.unlowered.append((name, callee.span))
        if name == "split":
            if len(e.args) != 1:
                fail(Rule.ARITY_MISMATCH, f"`split` takes 1 argument, found {len(e.args)}", e.span)
            t = self.chk.expr(e.args[0])
            if t != Cap("World"):
                mismatch(Cap("World"), t, e.args[0].span)
            self.chk.resolved[e] = CallTarget(CallKind.BUILTIN, name)
            return split_type(self.chk.edition)
        if name == "release":
            if len(e.args) != 1:
                fail(Rule.ARITY_MISMATCH, f"`release` takes 1 argument, found {len(e.args)}", e.span)
            t = self.chk.expr(e.args[0])
            if not isinstance(t, Cap):
                fail(Rule.TYPE_MISMATCH, f"`release` ends an owned capability; this is `{t}`", e.args[0].span)
            self.chk.resolved[e] = CallTarget(CallKind.BUILTIN, name)
            return INT
        if name == "contents":
            if len(e.args) != 1:
                fail(Rule.ARITY_MISMATCH, f"`contents` takes 1 argument, found {len(e.args)}", e.span)
            t = self.chk.expr(e.args[0])
            if not (isinstance(t, Ref) and isinstance(self.rel.zonk(t.target), BoxT)):
                fail(Rule.TYPE_MISMATCH, f"`contents` takes a reference to a `Box`, found `{t}`", e.args[0].span)
            self.chk.resolved[e] = CallTarget(CallKind.BUILTIN, name)
            return Ref(t.region, t.unique, self.rel.zonk(t.target).inner)
        if name == "narrow":
            return self.narrow(e)
        if name in ("spawn", "join", "fork_heap"):
            return getattr(self.threads, name)(e)
        if name in FS_VERBS:
            return self.fs_call(e, name)
        if name in CAP_VERBS:
            return self.cap_verb(e, name)
        sig = builtin_signature(name, self.chk.edition)
        assert sig is not None, name  # a checked builtin not checked above has a signature
        ret, subst = self.chk.call_sig(sig, e)
        self.chk.resolved[e] = CallTarget(CallKind.BUILTIN, name, None, sig, subst)
        self.chk.performed |= set(sig.row)
        consts = [self.chk.consts.get(a) for a in e.args]
        if consts and all(c is not None for c in consts):
            if name == "byte_of":
                self.chk.fold(e, lambda: byte_of(consts[0]), call=True)
            elif name == "wrapping_add":
                self.chk.fold(e, lambda: wrap(consts[0] + consts[1]), call=True)
            elif name == "wrapping_sub":
                self.chk.fold(e, lambda: wrap(consts[0] - consts[1]), call=True)
            elif name == "wrapping_mul":
                self.chk.fold(e, lambda: wrap(consts[0] * consts[1]), call=True)
            elif name == "int_of":
                self.chk.fold(e, lambda: consts[0], call=True)
        return ret


def several_children_refusal(kind: str, cap: ast.Expr, lits: list[str]) -> str:
    """Why `narrow(c, "a", "b")` is refused for a capability other than `Fs` and `Exec`: `Ffi`
    and `Signals` narrow to one list (the call to write instead is shown), the rest not at all."""
    if kind in ("Ffi", "Signals"):
        name = cap.name if isinstance(cap, ast.Name) else kind.lower()
        joined = ",".join(lits)
        return (f"`{kind}` narrows to one list, not into several children: write `narrow({name}, \"{joined}\")`")
    return f"narrowing into several children is for `Fs` and `Exec`; `{kind}` is not supported there"
