"""From written types to semantic types, and from declarations to signatures.

A signature is complete (types, regions, row), so bodies are checked against callees'
signatures only (language.md §3.8). Builtins with ordinary signatures are parsed from cancho text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable, Optional

from .. import ast
from ..diagnostics import Refusal, Rule
from ..resolve import ItemRef, ModuleScope
from ..source import SourceFile, Span
from . import builtins as B
from .types import (SCALARS, STATIC, Adt, BoxT, Cap, FnT, Handle, LabelT, Param, Ref, Region, Slice,
                    Tuple, Type)

FOREIGN_ONLY = frozenset({"c_ptr", "c_int"})
FFI_SCOPE = re.compile(r"^[A-Za-z0-9_.+\-]+$")


@dataclass(eq=False)
class FnSig:
    """A function's complete signature: what callers and the body are checked against."""

    name: str
    key: str
    regions: dict[str, Region]
    where: list[tuple[Region, Region]]  # (inner, outer): outer outlives inner
    tparams: dict[str, Param]
    params: list[tuple[str, Type]]
    row: frozenset
    ret: Type
    kind: str = "fn"  # "fn" | "extern" | "builtin"
    decl: Optional[ast.Node] = None

    def render(self) -> str:
        """`fn name[&r, T](a: A) -> [row] R` for inspection and messages."""
        gens = [f"&{n}" for n in self.regions] + [
            f"{n}: val" if p.bound_val else n for n, p in self.tparams.items()]
        g = f"[{', '.join(gens)}]" if gens else ""
        ps = ", ".join(f"{n}: {t}" for n, t in self.params)
        from .types import row_str
        prefix = "extern fn" if self.kind == "extern" else "fn"
        return f"{prefix} {self.name}{g}({ps}) -> {row_str(self.row)} {self.ret}"


@dataclass(eq=False)
class TypeDecl:
    """A user struct or enum after its members were resolved."""

    key: str
    name: str
    kind: str  # "struct" | "enum"
    mode: Optional[str]
    tparams: list[Param]
    fields: list[tuple[str, Type]] = field(default_factory=list)  # struct
    variants: list[tuple[str, list[Type]]] = field(default_factory=list)  # enum
    decl: Optional[ast.Node] = None
    # Instantiations its members write (`Wrap[Box[int]]`), checked against their bounds.
    instances: list[tuple[Adt, Span]] = field(default_factory=list)


class TypeResolver:
    """Resolves written types in one declaration's context (module, edition, regions, params)."""

    def __init__(self, modules: dict[str, ModuleScope], module: str, edition: int,
                 regions: dict[str, Region], tparams: dict[str, Param], foreign: bool = False):
        self.modules = modules
        # `c_ptr` and `c_int` are names only in an `extern fn` signature (the reference's
        # opaque-pointers.md §4, reach.md §3.4); anywhere else they are unknown types.
        self.foreign = foreign
        self.module = module
        self.edition = edition
        self.regions = regions
        self.tparams = tparams
        # Every instantiation written with type arguments and where: the mode bounds of the
        # declaration it names are checked once the type table is complete (`TypeTable.check_bounds`).
        self.instances: list[tuple[Adt, Span]] = []

    def region(self, ident: ast.Ident) -> Region:
        if ident.name == "static":
            return STATIC
        r = self.regions.get(ident.name)
        if r is None:
            raise Refusal(Rule.REGION_NOT_IN_SCOPE,
                          f"region `{ident.name}` is not in scope; declare it as a region parameter `[&{ident.name}]`",
                          ident.span)
        return r

    def resolve(self, te: ast.TypeExpr, sized: bool = True) -> Type:
        if isinstance(te, ast.RefType):
            reg = self.region(te.region)
            if te.unique and reg is STATIC:
                raise Refusal(Rule.REGION_MISMATCH, "`&!static` is not a type: static data is read-only", te.span)
            return Ref(reg, te.unique, self.resolve(te.target, sized=False))
        if isinstance(te, ast.SliceType):
            if sized:
                raise Refusal(Rule.UNSIZED_TYPE,
                              "a slice `[T]` has no size; use it behind a reference such as `&r [T]`", te.span)
            return Slice(self.resolve(te.elem))
        if isinstance(te, ast.TupleType):
            if len(te.parts) < 2:
                raise Refusal(Rule.PATTERN_SHAPE, "a tuple has two components or more", te.span)
            return Tuple(tuple(self.resolve(p) for p in te.parts))
        if isinstance(te, ast.FnType):
            return FnT(tuple(self.resolve(p) for p in te.params), self.row(te.row), self.resolve(te.ret))
        if isinstance(te, ast.CapType):
            name = te.name.name
            if te.qualifier is None and name in B.LITERAL_CAPS and B.prelude_type_visible(name, self.edition):
                if name == "Ffi" and te.literal != "":
                    check_ffi_scope(te.literal, te.literal_span)
                return Cap(name, te.literal)
            raise Refusal(Rule.UNKNOWN_NAME, f"unknown capability type `{name}`", te.name.span)
        if isinstance(te, ast.NamedType):
            return self.named(te)
        raise Refusal(Rule.INTERNAL, f"unexpected type form {type(te).__name__}", te.span)

    def named(self, te: ast.NamedType) -> Type:
        name = te.name.name
        if te.qualifier is None:
            if name in self.tparams:
                if te.args:
                    raise Refusal(Rule.TYPE_ARGS_NOT_TAKEN, f"type parameter `{name}` takes no type arguments", te.span)
                return self.tparams[name]
            if name in FOREIGN_ONLY and not self.foreign:
                raise Refusal(Rule.UNKNOWN_NAME, f"unknown type `{name}`: `{name}` is written only in an "
                              "`extern fn`'s parameters or result", te.name.span)
            if name in SCALARS and B.prelude_type_visible(name, self.edition):
                self.no_args(te)
                return SCALARS[name]
            if B.prelude_type_visible(name, self.edition):
                return self.prelude(te)
            item = self.modules[self.module].items.get(name)
        else:
            target = self.modules[self.module].imports.get(te.qualifier.name)
            if target is None:
                raise Refusal(Rule.MODULE_NOT_IMPORTED,
                              f"`{te.qualifier.name}` is not an imported module here; add `import ...{te.qualifier.name};`",
                              te.qualifier.span)
            item = self.modules[target].items.get(name)
            if item is not None and not item.decl.pub:
                raise Refusal(Rule.NOT_PUBLIC, f"`{name}` is private to module `{target}`", te.name.span)
        if item is None or item.kind not in ("struct", "enum"):
            raise Refusal(Rule.UNKNOWN_NAME, f"unknown type `{name}`", te.name.span)
        args = tuple(self.resolve(a) for a in te.args)
        decl = item.decl
        n = len(decl.generics.types) if decl.generics else 0
        if len(args) != n:
            raise Refusal(Rule.ARITY_MISMATCH, f"`{name}` takes {n} type argument(s), found {len(args)}", te.span)
        t = Adt(item.key, name, args)
        if args:
            self.instances.append((t, te.span))
        return t

    def no_args(self, te: ast.NamedType) -> None:
        if te.args:
            raise Refusal(Rule.TYPE_MISMATCH, f"`{te.name.name}` takes no type arguments", te.span)

    def prelude(self, te: ast.NamedType) -> Type:
        name = te.name.name
        if name == "Box":
            if len(te.args) != 1:
                raise Refusal(Rule.ARITY_MISMATCH, "`Box` takes one type argument", te.span)
            a = te.args[0]
            inner = self.resolve(a, sized=False)
            return BoxT(inner)
        if name == "Thread":
            if len(te.args) != 2:
                raise Refusal(Rule.ARITY_MISMATCH, "`Thread` takes two type arguments: `Thread[T, R]`", te.span)
            return Adt("::Thread", "Thread", tuple(self.resolve(a) for a in te.args))
        self.no_args(te)
        if name in B.LITERAL_CAPS:
            raise Refusal(Rule.TYPE_MISMATCH, f"`{name}` needs its literal, e.g. `{name}(\"\")`", te.span)
        if name in B.CAPABILITY_KINDS:
            return Cap(name)
        if name == "Split":
            return split_type(self.edition)
        if name in B.HANDLE_TYPES:
            return Handle(name)
        if name in B.PRELUDE_ENUMS:
            return Adt(f"::{name}", name)
        raise Refusal(Rule.UNSUPPORTED_ON_TARGET, f"the prelude type `{name}` is not supported by cancho-kernel", te.span)

    def row(self, row: ast.Row) -> frozenset:
        out = set()
        for l in row.labels:
            lab = LabelT(l.name, l.arg)
            if lab in out:
                raise Refusal(Rule.DUPLICATE_DECLARATION, f"label `{lab}` appears twice in this row", l.span)
            if l.name == "ffi" and l.arg is not None and l.arg != "":
                check_ffi_scope(l.arg, l.span)
            out.add(lab)
        return frozenset(out)


def check_ffi_scope(lit: str, span) -> None:
    names = lit.split(",")
    if any(not FFI_SCOPE.match(n) for n in names) or len(set(names)) != len(names):
        raise Refusal(Rule.FOREIGN_SCOPE,
                      f"`\"{lit}\"` is not a library list: write distinct names of letters, digits, `_ . + -` separated by commas",
                      span)


def split_type(edition: int) -> Adt:
    return Adt(f"::Split{edition}", "Split")


def split_fields(t: Adt) -> list[tuple[str, Type]]:
    edition = int(t.key[len("::Split"):])
    return [(n, Cap(k, "" if k in B.LITERAL_CAPS else None)) for n, k in B.SPLIT_FIELDS[edition]]


def generics_env(g: Optional[ast.Generics], owner: str, allow_where: bool = True, all_val: bool = False):
    """Region parameters, type parameters and where-pairs of a declaration; `all_val` for a `val`
    declaration, whose parameters are `val` without a written bound (mode-polymorphism.md §3)."""
    regions: dict[str, Region] = {}
    tparams: dict[str, Param] = {}
    where: list[tuple[Region, Region]] = []
    if g is None:
        return regions, tparams, where
    for p in g.params:
        if isinstance(p, ast.RegionParam):
            if p.name == "static":
                raise Refusal(Rule.REGION_MISMATCH, "`static` is not a region parameter; it is always in scope", p.span)
            if p.name in regions or p.name in tparams:
                raise Refusal(Rule.DUPLICATE_DECLARATION, f"`{p.name}` is declared twice in this bracket", p.span)
            regions[p.name] = Region(p.name, "param")
        else:
            if p.bound == "res":
                raise Refusal(Rule.MODE_BOUND_VIOLATED, "there is no `res` bound; an unbounded parameter is already checked as res", p.span)
            if p.name in regions or p.name in tparams:
                raise Refusal(Rule.DUPLICATE_DECLARATION, f"`{p.name}` is declared twice in this bracket", p.span)
            tparams[p.name] = Param(p.name, owner, all_val or p.bound == "val")
    for w in g.where:
        for ident in (w.inner, w.outer):
            if ident.name not in regions:
                raise Refusal(Rule.REGION_MISMATCH, f"`where` must relate region parameters; `{ident.name}` is not one", ident.span)
        where.append((regions[w.inner.name], regions[w.outer.name]))
    return regions, tparams, where


def fn_signature(item: ItemRef, modules: dict[str, ModuleScope],
                 bounds: Optional[Callable[[list[tuple[Adt, Span]]], None]] = None) -> FnSig:
    """Resolve a `fn` or `extern fn` declaration into a signature (raises Refusal); `bounds`
    checks the instantiations it writes against their declarations' mode bounds."""
    d = item.decl
    regions, tparams, where = generics_env(d.generics, item.key)
    tr = TypeResolver(modules, item.module, item.edition, regions, tparams,
                      foreign=isinstance(d, ast.ExternFn))
    params: list[tuple[str, Type]] = []
    seen: set[str] = set()
    for p in d.params:
        if p.name.name in seen:
            raise Refusal(Rule.DUPLICATE_DECLARATION, f"parameter `{p.name.name}` is declared twice", p.name.span)
        seen.add(p.name.name)
        params.append((p.name.name, tr.resolve(p.ty)))
    row = tr.row(d.row)
    ret = tr.resolve(d.ret)
    for r in _regions_of(ret):
        if r is not STATIC and r.kind != "param":
            raise Refusal(Rule.REGION_NOT_IN_SCOPE, "a return type may only name region parameters or `static`", d.ret.span)
    if bounds is not None:
        bounds(tr.instances)
    kind = "extern" if isinstance(d, ast.ExternFn) else "fn"
    if d.pub:
        for (_, t), te in list(zip([p for p in params], [p.ty for p in d.params])) + [((None, ret), d.ret)]:
            check_public(t, modules, item.module, te.span)
    return FnSig(item.name, item.key, regions, where, tparams, params, row, ret, kind, d)


def check_public(t: Type, modules: dict[str, ModuleScope], module: str, span) -> None:
    """A `pub` signature may not mention a private type of its own module (`not-public`)."""
    from .types import walk

    for x in walk(t):
        if not isinstance(x, Adt):
            continue
        mod, name = x.key.split("::")
        it = modules[mod].items.get(name) if mod == module and mod in modules else None
        if it is not None and not it.decl.pub:
            raise Refusal(Rule.NOT_PUBLIC,
                          f"this `pub` signature mentions `{name}`, which is private to module "
                          f"`{module or 'root'}`; mark `{name}` `pub` or keep the function private", span)


def _regions_of(t: Type):
    from .types import regions_in
    return regions_in(t)


@lru_cache(maxsize=None)
def _parsed_builtin(text: str) -> ast.FnDecl:
    from ..parser import parse_file
    f, diags = parse_file(SourceFile("<prelude>", text + " { return 0; }"))
    if f is None:
        raise RuntimeError(f"prelude signature does not parse: {text}: {diags}")
    return f.items[0]


def cap_verb_signature(name: str, literal: str) -> FnSig:
    """The signature of a capability verb (`B.CAP_VERBS`) for a capability holding `literal`:
    the template's `""` replaced in the first parameter and in the label."""
    kind, label, _ = B.CAP_VERBS[name]
    sig = builtin_signature(name, 8)
    (pname, ref), rest = sig.params[0], sig.params[1:]
    assert isinstance(ref, Ref) and ref.target == Cap(kind, ""), name
    return FnSig(sig.name, sig.key, sig.regions, sig.where, sig.tparams,
                 [(pname, Ref(ref.region, ref.unique, Cap(kind, literal)))] + rest,
                 frozenset({LabelT(label, literal)}), sig.ret, sig.kind, None)


def builtin_signature(name: str, edition: int) -> Optional[FnSig]:
    """The signature of an ordinary builtin (or a capability verb's template), or None for
    call-site-checked ones."""
    text = B.SIGNATURES.get(name) or (B.CAP_VERBS[name][2] if name in B.CAP_VERBS else None)
    if text is None:
        return None
    d = _parsed_builtin(text)
    regions, tparams, where = generics_env(d.generics, "::" + name)
    tr = TypeResolver({"": ModuleScope("")}, "", max(edition, 8), regions, tparams, foreign=True)
    params = [(p.name.name, tr.resolve(p.ty)) for p in d.params]
    return FnSig(name, "::" + name, regions, where, tparams, params, tr.row(d.row), tr.resolve(d.ret), "builtin", None)
