"""Struct and enum declarations of a program (user, std and prelude) and the mode function.

The mode (`res`/`val`) of a type is computed structurally (language.md §3.5); a `val` written on
a declaration is checked, not trusted.
"""

from __future__ import annotations

from typing import Optional

from .. import ast
from ..diagnostics import Refusal, Rule
from ..resolve import ItemRef, ModuleScope
from .signatures import TypeDecl, TypeResolver, generics_env, split_fields
from ..source import Span
from .types import INT, Adt, BoxT, Cap, Handle, Param, Tuple, Type, substitute

PRELUDE_DECLS: dict[str, TypeDecl] = {
    "::Opened": TypeDecl("::Opened", "Opened", "enum", "res", [],
                         variants=[("Ok", [Handle("File")]), ("Failed", [INT])]),
    "::Read": TypeDecl("::Read", "Read", "enum", None, [],
                       variants=[("Got", [INT]), ("End", []), ("Failed", [INT])]),
    "::Done": TypeDecl("::Done", "Done", "enum", None, [],
                       variants=[("Ok", [INT]), ("Failed", [INT])]),
    # Socket handles (edition 5).
    "::Listening": TypeDecl("::Listening", "Listening", "enum", "res", [],
                            variants=[("Ok", [Handle("Listener")]), ("Failed", [INT])]),
    "::Dialed": TypeDecl("::Dialed", "Dialed", "enum", "res", [],
                         variants=[("Ok", [Handle("Conn")]), ("Failed", [INT])]),
    "::Accepted": TypeDecl("::Accepted", "Accepted", "enum", "res", [],
                           variants=[("Ok", [Handle("Conn")]), ("Again", []), ("Failed", [INT])]),
    "::Received": TypeDecl("::Received", "Received", "enum", None, [],
                           variants=[("Data", [INT]), ("End", []), ("Again", []), ("Failed", [INT])]),
    "::Sent": TypeDecl("::Sent", "Sent", "enum", None, [],
                       variants=[("Wrote", [INT]), ("Again", []), ("Failed", [INT])]),
    "::UdpOpened": TypeDecl("::UdpOpened", "UdpOpened", "enum", "res", [],
                            variants=[("Ok", [Handle("Udp")]), ("Failed", [INT])]),
    "::Datagram": TypeDecl("::Datagram", "Datagram", "enum", None, [],
                           variants=[("Got", [INT]), ("Truncated", [INT]), ("Again", []), ("Failed", [INT])]),
    # The poller, a redeemed connection ticket (edition 5) and a signal claim (edition 6).
    "::Polling": TypeDecl("::Polling", "Polling", "enum", "res", [],
                          variants=[("Ok", [Handle("Poller")]), ("Failed", [INT])]),
    "::Attached": TypeDecl("::Attached", "Attached", "enum", "res", [],
                           variants=[("Ok", [Handle("Conn")]), ("Failed", [INT])]),
    "::Watching": TypeDecl("::Watching", "Watching", "enum", "res", [],
                           variants=[("Ok", [Handle("SignalWatch")]), ("Failed", [INT])]),
    # Processes (edition 7): what one of a child's streams is, a channel, a start, an end.
    "::Stdio": TypeDecl("::Stdio", "Stdio", "enum", "res", [],
                        variants=[("Null", []), ("Pipe", [Handle("ChildEnd")]), ("File", [Handle("File")])]),
    "::Piped": TypeDecl("::Piped", "Piped", "enum", "res", [],
                        variants=[("Ok", [Handle("Pipe"), Handle("ChildEnd")]), ("Failed", [INT])]),
    "::Spawned": TypeDecl("::Spawned", "Spawned", "enum", "res", [],
                          variants=[("Ok", [Handle("Child")]), ("Failed", [INT])]),
    "::Exited": TypeDecl("::Exited", "Exited", "enum", None, [],
                         variants=[("Code", [INT]), ("Signaled", [INT]), ("Failed", [INT])]),
    # Directory handles (edition 6): an open directory, a listing of one, an entry, a status.
    "::DirOpened": TypeDecl("::DirOpened", "DirOpened", "enum", "res", [],
                            variants=[("Ok", [Handle("Dir")]), ("Failed", [INT])]),
    "::Listing": TypeDecl("::Listing", "Listing", "enum", "res", [],
                          variants=[("Ok", [Handle("DirList")]), ("Failed", [INT])]),
    "::Listed": TypeDecl("::Listed", "Listed", "enum", None, [],
                         variants=[("Name", [INT, INT]), ("End", []), ("Failed", [INT])]),
    "::DirStat": TypeDecl("::DirStat", "DirStat", "enum", None, [],
                          variants=[("Ok", [INT, INT, INT]), ("Failed", [INT])]),
}


class TypeTable:
    """Every aggregate declaration by key, with member lookups substituted for type arguments."""

    def __init__(self) -> None:
        self.decls: dict[str, TypeDecl] = dict(PRELUDE_DECLS)
        # Declarations refused as infinite or non-regular: their mode is taken to be `res`
        # without expanding them, which would never end.
        self.broken: set[str] = set()
        self._res: dict[Type, bool] = {}
        # Member lists substituted for their type arguments, per instantiated type: a field read
        # looked the whole list up again, so a wide struct's reads cost fields x reads.
        self._fields: dict[Adt, list[tuple[str, Type]]] = {}
        self._field_index: dict[Adt, dict[str, int]] = {}
        self._variants: dict[Adt, list[tuple[str, list[Type]]]] = {}

    def declare(self, item: ItemRef, modules: dict[str, ModuleScope]) -> TypeDecl:
        """Resolve a struct or enum declaration's members (raises Refusal)."""
        d = item.decl
        _, tparams, _ = generics_env(d.generics, item.key, all_val=d.mode == "val")
        tr = TypeResolver(modules, item.module, item.edition, {}, tparams)
        td = TypeDecl(item.key, item.name, "struct" if isinstance(d, ast.StructDecl) else "enum",
                      d.mode, list(tparams.values()), decl=d)
        seen: set[str] = set()
        if isinstance(d, ast.StructDecl):
            for f in d.fields:
                if f.name.name in seen:
                    raise Refusal(Rule.DUPLICATE_DECLARATION, f"field `{f.name.name}` is declared twice", f.name.span)
                seen.add(f.name.name)
                td.fields.append((f.name.name, tr.resolve(f.ty)))
        else:
            if not d.variants:
                raise Refusal(Rule.ENUM_HAS_NO_VARIANTS, f"`{item.name}` has no variants; an enum needs at least one",
                              d.name.span)
            for v in d.variants:
                if v.name.name in seen:
                    raise Refusal(Rule.DUPLICATE_DECLARATION, f"variant `{v.name.name}` is declared twice", v.name.span)
                seen.add(v.name.name)
                td.variants.append((v.name.name, [tr.resolve(t) for t in v.payload]))
        td.instances = list(tr.instances)
        self.decls[item.key] = td
        return td

    def decl(self, t: Adt) -> Optional[TypeDecl]:
        return self.decls.get(t.key)

    def _subst(self, td: TypeDecl, t: Adt) -> dict:
        return {("T", p.name): a for p, a in zip(td.tparams, t.args)}

    def fields(self, t: Adt) -> list[tuple[str, Type]]:
        if t.key.startswith("::Split"):
            return split_fields(t)
        cached = self._fields.get(t)
        if cached is None:
            td = self.decls[t.key]
            s = self._subst(td, t)
            cached = self._fields[t] = [(n, substitute(ft, s)) for n, ft in td.fields]
        return cached

    def field_index(self, t: Adt, name: str) -> int | None:
        """The position of field ``name`` of struct ``t``, or None."""
        index = self._field_index.get(t)
        if index is None:
            index = self._field_index[t] = {n: i for i, (n, _) in enumerate(self.fields(t))}
        return index.get(name)

    def variants(self, t: Adt) -> list[tuple[str, list[Type]]]:
        cached = self._variants.get(t)
        if cached is None:
            td = self.decls[t.key]
            s = self._subst(td, t)
            cached = self._variants[t] = [(n, [substitute(p, s) for p in ps]) for n, ps in td.variants]
        return cached

    def is_struct(self, t: Type) -> bool:
        return isinstance(t, Adt) and (t.key.startswith("::Split") or
                                       (t.key in self.decls and self.decls[t.key].kind == "struct"))

    def is_enum(self, t: Type) -> bool:
        return isinstance(t, Adt) and t.key in self.decls and self.decls[t.key].kind == "enum"

    def is_res(self, t: Type) -> bool:
        """res or val, structurally (§3.5); remembered per type, so a chain of n declarations
        costs n steps, not n² (declarations on a by-value cycle were refused before this runs)."""
        got = self._res.get(t)
        if got is not None:
            return got
        self._res[t] = False  # a cycle through references only: val, as before
        result = self._is_res(t)
        self._res[t] = result
        return result

    def _is_res(self, t: Type) -> bool:
        if isinstance(t, (Cap, BoxT, Handle)):
            return True
        if isinstance(t, Tuple):
            return any(self.is_res(p) for p in t.parts)
        if isinstance(t, Param):
            return not t.bound_val
        if isinstance(t, Adt):
            if t.key.startswith("::Split") or t.key in self.broken:
                return True
            td = self.decls.get(t.key)
            if td is None:
                return True
            if td.mode == "res":
                return True
            members = [ft for _, ft in self.fields(t)] if td.kind == "struct" else \
                [p for _, ps in self.variants(t) for p in ps]
            return any(self.is_res(m) for m in members)
        return False

    def check_bounds(self, instances: list[tuple[Adt, Span]]) -> None:
        """Each written instantiation keeps its declaration's bounds: every argument of a `val`
        declaration, and each `[T: val]` one, is val (mode-polymorphism.md §3, the reference's check
        where a type argument is written); read against the bounds of the declaration it is
        written inside, which its `Param`s carry."""
        for t, span in instances:
            td = self.decls.get(t.key)
            if td is None:
                continue
            for p, a in zip(td.tparams, t.args):
                if not p.bound_val or not self.is_res(a):
                    continue
                because = (f"`{td.name}` is declared `val`, so its type arguments are `val` too"
                           if td.mode == "val" else f"`{td.name}` bounds `{p.name}` by `val`")
                raise Refusal(Rule.MODE_BOUND_VIOLATED, f"{because}, and `{a}` is `res`", span)

    def check_decl(self, td: TypeDecl) -> None:
        """Declaration-level rule: a `val` aggregate holding res members (infinite and
        non-regular types are `typecycles.py`'s, decided before this runs)."""
        d = td.decl
        self.check_bounds(td.instances)
        if td.mode == "val":
            tuple(p for p in td.tparams)
            members = [ft for _, ft in td.fields] + [p for _, ps in td.variants for p in ps]
            for m in members:
                if self.is_res(m) and not isinstance(m, Param):
                    raise Refusal(Rule.MODE_BOUND_VIOLATED,
                                  f"`{td.name}` is declared `val` but holds `{m}`, which is res", d.name.span)
