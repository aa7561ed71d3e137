"""Checking a whole program: parse, resolve modules, signatures, then every body.

Checking is per declaration: each declaration reports at most its first refusal, and uses of a
declaration whose signature was refused are not reported again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from .. import ast
from ..diagnostics import Diagnostic, Refusal, Rule
from ..parser import parse_file
from ..modcache import CheckedModule, ModuleCache, ModuleKey, frozen, text_hash
from ..resolve import ItemRef, ModuleScope, build_modules, std_source
from ..source import SourceFile
from ..target import HOST, Target, target_refusals
from . import effects as E
from .body import BodyChecker, CheckedFn, Poisoned
from .flow import check_flow
from .linearity import check_linearity
from .callfold import fold_program
from .signatures import FnSig, fn_signature
from .instantiation import check_instantiation
from .typecycles import check_type_cycles
from .typetable import TypeTable
from .types import (BOOL, CINT, CPTR, INT, Cap, Handle, LabelT, Prim, Ref, Slice)


@dataclass(eq=False)
class CheckedProgram:
    """An accepted program: its modules, checked functions and the root `main`."""

    files: list[ast.File]
    modules: dict[str, ModuleScope]
    types: TypeTable = field(default_factory=TypeTable)
    fns: dict[str, CheckedFn] = field(default_factory=dict)
    externs: dict[str, ItemRef] = field(default_factory=dict)
    statics: dict = field(default_factory=dict)  # key -> evaluate.SliceV
    main: Optional[str] = None
    # The first call, per checked function, of a builtin that is checked but not lowered.
    unlowered: list[Diagnostic] = field(default_factory=list)

    def reachable(self) -> list[str]:
        """Keys of functions and externs reachable from `main`, in discovery order."""
        if self.main is None:
            return []
        seen: list[str] = []
        todo = [self.main]
        while todo:
            k = todo.pop()
            if k in seen:
                continue
            seen.append(k)
            fn = self.fns.get(k)
            if fn is not None:
                for c in fn.callees:
                    todo.append(c.key)
        return seen


def parse_all(sources: list[SourceFile], diags: list[Diagnostic],
              parsed: Optional[list[ast.File]] = None, cache: Optional[ModuleCache] = None) -> list[ast.File]:
    """Parse the given files, then any `std.x` module they import that no file declares (std
    parses through ``cache`` when given: the same text is parsed once)."""
    files: list[ast.File] = list(parsed or [])
    for src in sources:
        f, ds = parse_file(src)
        diags.extend(ds)
        if f is not None:
            files.append(f)
    declared = {f.module_name for f in files}
    todo = [imp.dotted for f in files for imp in f.imports]
    while todo:
        name = todo.pop()
        if name in declared:
            continue
        src = std_source(name)
        if src is None:
            continue
        declared.add(name)
        f, ds = cache.parse(src) if cache is not None else parse_file(src)
        diags.extend(ds)
        if f is not None:
            files.append(f)
            todo += [imp.dotted for imp in f.imports]
    return files


def check_program(sources: list[SourceFile], cache: Optional[ModuleCache] = None, target: Target = HOST
                  ) -> tuple[list[Diagnostic], Optional[CheckedProgram]]:
    diags: list[Diagnostic] = []
    files = parse_all(sources, diags, cache=cache)
    return check_parsed(files, diags, sources[0].path if sources else None, cache, target)


def add_std_imports(files: list[ast.File], diags: list[Diagnostic],
                    cache: Optional[ModuleCache] = None) -> list[ast.File]:
    """Parsed files plus the std modules they import (transitively) that no file declares."""
    return parse_all([], diags, files, cache)


def check_parsed(files: list[ast.File], diags: list[Diagnostic], hint: Optional[str] = None,
                 cache: Optional[ModuleCache] = None, target: Target = HOST
                 ) -> tuple[list[Diagnostic], Optional[CheckedProgram]]:
    """Check already-parsed files (the kernel builds them from a session's items).

    With ``cache``, every std module whose text, edition, dependencies and compiler version
    match a cached entry is taken as checked (its scope, signatures, type declarations, checked
    functions and statics), so only the other modules are checked; the std modules this check
    did do are stored when the program is accepted. Modules are visited in the same order
    either way, so the checked program (and the IR) is the same with and without a cache.
    """
    std_files = std_candidates(files)
    keys = std_module_keys(std_files, cache) if cache is not None else {}
    reused = reusable_modules(keys, cache) if cache is not None else {}
    files = [reused[f.module_name].file if f.module_name in reused else f for f in files]
    modules = build_modules(files, diags, given={n: e.scope for n, e in reused.items()})
    prog = CheckedProgram(files, modules)

    declare_types(modules, reused, prog, diags)
    sign_items(modules, reused, prog, diags)
    check_bodies(modules, reused, prog, diags)
    if not diags:
        # Before codegen may monomorphise: refuse endless or explosive instantiation.
        bad = check_instantiation(prog.fns)
        if bad is not None:
            diags.append(bad)
    if not diags:
        # Pure calls on constants, evaluated (a certain trap refuses the program): callfold.py.
        diags.extend(fold_program([it for m in modules.values() for it in own_items(m, reused)], prog))
    if not diags:
        # Like the reference, `main`'s shape is judged once everything else has passed.
        diags.extend(check_main(modules, hint, prog))
    if not diags:
        diags.extend(evaluate_statics([it for m in modules.values() for it in m.items.values()], prog,
                                      {k: v for e in reused.values() for k, v in e.statics.items()}))
    if not diags:
        # What the target cannot do (compiler/target.py), before the refusals of what this
        # implementation has not lowered: a gap of the target stays whatever gets lowered.
        diags.extend(target_refusals(prog, target))
    if not diags and prog.unlowered:
        # Last, as the reference has it: the program is otherwise accepted, and codegen must
        # never see a call it has no lowering for.
        diags.append(prog.unlowered[0])
    if diags:
        return diags, None
    if cache is not None:
        store_modules(cache, keys, reused, prog)
    return diags, prog


def own_items(m: ModuleScope, reused: dict[str, CheckedModule]) -> list[ItemRef]:
    """The items of a module this check must do (none for a module taken from the cache)."""
    return [] if m.name in reused else list(m.items.values())


def declare_types(modules: dict[str, ModuleScope], reused: dict[str, CheckedModule], prog: CheckedProgram,
                  diags: list[Diagnostic]) -> None:
    """Struct and enum declarations: resolved, cycle-checked and checked, or taken from the cache."""
    tt = prog.types
    for m in modules.values():
        if m.name in reused:
            tt.decls.update(reused[m.name].type_decls)
            continue
        for it in own_items(m, reused):
            if it.kind in ("struct", "enum"):
                try:
                    it.sig = tt.declare(it, modules)
                except Refusal as r:
                    diags.append(r.diagnostic)
                    it.sig = None
    cycles = check_type_cycles(tt.decls)
    tt.broken = set(cycles)
    diags.extend(r.diagnostic for r in cycles.values())
    for m in modules.values():
        for it in own_items(m, reused):
            if it.kind in ("struct", "enum") and it.sig is not None and it.key not in tt.broken:
                try:
                    tt.check_decl(it.sig)
                except Refusal as r:
                    diags.append(r.diagnostic)


def sign_items(modules: dict[str, ModuleScope], reused: dict[str, CheckedModule], prog: CheckedProgram,
               diags: list[Diagnostic]) -> None:
    """Signatures of functions, externs and statics (a cached module's are already on its items)."""
    for m in modules.values():
        if m.name in reused:
            prog.externs.update(reused[m.name].externs)
        for it in own_items(m, reused):
            try:
                if it.kind in ("fn", "extern"):
                    it.sig = fn_signature(it, modules, prog.types.check_bounds)
                    if it.kind == "extern":
                        check_extern(it)
                        prog.externs[it.key] = it
                elif it.kind == "static":
                    it.sig = static_signature(it, modules)
            except Refusal as r:
                diags.append(r.diagnostic)
                it.sig = None


def check_bodies(modules: dict[str, ModuleScope], reused: dict[str, CheckedModule], prog: CheckedProgram,
                 diags: list[Diagnostic]) -> None:
    """Every body, in module order; a cached module's checked functions are taken in its place."""
    for m in modules.values():
        if m.name in reused:
            prog.fns.update(reused[m.name].fns)
        for it in own_items(m, reused):
            if it.kind not in ("fn", "static") or it.sig is None:
                continue
            try:
                d = check_fn(it, modules, prog)
            except RecursionError:
                d = Diagnostic(Rule.INTERNAL, f"`{it.name}` nests too deeply for the checker (tens of thousands of levels); "
                               "split it into smaller expressions or functions", it.decl.name.span)
            if d is not None:
                diags.append(d)


def std_candidates(files: list[ast.File]) -> dict[str, ast.File]:
    """Modules made of exactly one file from the std library: the only ones a cache answers."""
    by_module: dict[str, list[ast.File]] = {}
    for f in files:
        by_module.setdefault(f.module_name, []).append(f)
    return {name: fs[0] for name, fs in by_module.items()
            if name.startswith("std.") and len(fs) == 1 and fs[0].source.path.startswith("<std>/")}


def std_module_keys(std_files: dict[str, ast.File], cache: ModuleCache) -> dict[str, ModuleKey]:
    """The cache key of every std module whose imports are, transitively, std modules of this
    program (a std module importing a module the user declared is never cached)."""
    hashes = {name: text_hash(f.source.text) for name, f in std_files.items()}
    keys: dict[str, ModuleKey] = {}
    for name, f in std_files.items():
        deps: dict[str, str] = {}
        todo = [imp.dotted for imp in f.imports]
        ok = True
        while todo:
            dep = todo.pop()
            if dep in deps or dep == name:
                continue
            if dep not in std_files:
                ok = False
                break
            deps[dep] = hashes[dep]
            todo += [imp.dotted for imp in std_files[dep].imports]
        if ok:
            keys[name] = cache.module_key(name, f, deps)
    return keys


def reusable_modules(keys: dict[str, ModuleKey], cache: ModuleCache) -> dict[str, CheckedModule]:
    """Cached modules whose dependencies are all cached too (an entry may outlive a dependency's)."""
    found = {name: e for name, k in keys.items() if (e := cache.checked(k)) is not None}
    changed = True
    while changed:
        changed = False
        for name in list(found):
            if any(dep not in found for dep, _ in found[name].key.deps):
                del found[name]
                changed = True
    return found


def store_modules(cache: ModuleCache, keys: dict[str, ModuleKey], reused: dict[str, CheckedModule],
                  prog: CheckedProgram) -> None:
    """Keep what an accepted program's check made of its cacheable std modules."""
    for name, key in keys.items():
        if name in reused:
            continue
        scope = prog.modules[name]
        refs = list(scope.items.values())
        cache.put_checked(CheckedModule(
            key, scope.files[0], scope,
            frozen({r.key: prog.types.decls[r.key] for r in refs if r.kind in ("struct", "enum")}),
            frozen({r.key: prog.fns[r.key] for r in refs if r.key in prog.fns}),
            frozen({r.key: r for r in refs if r.kind == "extern"}),
            frozen({r.key: prog.statics[r.key] for r in refs if r.key in prog.statics})))


def static_signature(it: ItemRef, modules: dict[str, ModuleScope]) -> FnSig:
    """A static is checked as a parameterless, row-less body returning `&static [T]`."""
    from .signatures import TypeResolver
    from .types import BYTE, FLOAT, STATIC
    d = it.decl
    if not isinstance(d.ty, ast.SliceType):
        raise Refusal(Rule.STATIC_ITEM, "a `static` holds scalars: a slice written `[int]`, `[byte]`, `[bool]` or `[float]`",
                      d.ty.span)
    elem = TypeResolver(modules, it.module, it.edition, {}, {}).resolve(d.ty.elem)
    if elem not in (INT, BOOL, BYTE, FLOAT):
        raise Refusal(Rule.STATIC_ITEM, f"a `static` holds scalars (`int`, `bool`, `byte` or `float` elements), not `{elem}`", d.ty.span)
    return FnSig(it.name, it.key, {}, [], {}, [], frozenset(), Ref(STATIC, False, Slice(elem)), "static", d)


def evaluate_statics(items: list[ItemRef], prog: CheckedProgram, known: Optional[dict] = None
                     ) -> list[Diagnostic]:
    """Run every static's body at compile time, in declaration order (``known``: the values of
    statics a cached module already evaluated, taken in their place in that order)."""
    known = known or {}
    from ..layout import RuntimeLayout
    from .evaluate import Evaluator
    ev = Evaluator(prog.fns, prog.statics, RuntimeLayout(prog.types))
    for it in items:
        if it.kind != "static":
            continue
        if it.key in known:
            prog.statics[it.key] = known[it.key]
            continue
        try:
            prog.statics[it.key] = ev.run_static(prog.fns[it.key])
        except Refusal as r:
            return [r.diagnostic]
        except RecursionError:
            return [Diagnostic(Rule.STATIC_ITEM, f"evaluating `{it.name}` recursed too deeply", it.decl.name.span)]
    return []


def check_main(modules: dict[str, ModuleScope], hint: Optional[str], prog: CheckedProgram) -> list[Diagnostic]:
    root = modules.get("")
    main = root.items.get("main") if root else None
    if main is None or main.kind != "fn":
        return [Diagnostic(Rule.PROGRAM_SHAPE, "no `main` function: a program needs `fn main(world: World) -> [] int`",
                           None, file_hint=hint)]
    if main.sig is None:
        return []
    sig: FnSig = main.sig
    if len(sig.params) != 1 or sig.params[0][1] != Cap("World") or sig.tparams or sig.regions:
        return [Diagnostic(Rule.PROGRAM_SHAPE, "`main` takes one argument, the `World` the runtime hands it",
                           None, file_hint=hint)]
    if sig.ret != INT:
        return [Diagnostic(Rule.PROGRAM_SHAPE, "`main` returns `int`, the process exit status", None, file_hint=hint)]
    prog.main = main.key
    return []


BOUNDARY_PARAMS = (INT, BOOL, CPTR)
BOUNDARY_RESULTS = (INT, BOOL, CPTR, CINT)


def check_extern(it: ItemRef) -> None:
    """Foreign declarations: one borrowed Ffi, no type parameters, crossable types, exact row."""
    sig: FnSig = it.sig
    d: ast.ExternFn = it.decl
    if sig.tparams:
        raise Refusal(Rule.FOREIGN_DECLARATION, f"`{it.name}` has type parameters, but C has none to instantiate", d.name.span)
    ffis: list[Cap] = []
    for (name, t), p in zip(sig.params, d.params):
        if isinstance(t, Ref) and isinstance(t.target, Cap):
            if t.target.kind != "Ffi":
                raise Refusal(Rule.FOREIGN_BOUNDARY_TYPE, f"a foreign function takes only an `Ffi` capability, not `{t.target}`", p.ty.span)
            ffis.append(t.target)
            continue
        if isinstance(t, Ref) and t.target == Slice(Prim("byte")):
            continue
        if t in BOUNDARY_PARAMS:
            continue
        raise Refusal(Rule.FOREIGN_BOUNDARY_TYPE,
                      f"`{t}` cannot cross into C: parameters are `int`, `bool`, `c_ptr`, byte slices or a borrowed `Ffi`",
                      p.ty.span)
    if sig.ret not in BOUNDARY_RESULTS:
        raise Refusal(Rule.FOREIGN_BOUNDARY_TYPE, f"a foreign result is `int`, `bool` or `c_ptr` (`c_int` reads a C `int`), not `{sig.ret}`", d.ret.span)
    if len(ffis) != 1:
        raise Refusal(Rule.FOREIGN_DECLARATION, f"`{it.name}` must borrow exactly one `Ffi` capability", d.name.span)
    lib = ffis[0].literal
    if lib == "":
        raise Refusal(Rule.FOREIGN_DECLARATION, f"`{it.name}` borrows the root `Ffi(\"\")`; narrow it to a library first", d.name.span)
    if lib is not None and "," in lib:
        raise Refusal(Rule.FOREIGN_DECLARATION, f"`{it.name}` must name exactly one library, not `{lib}`", d.name.span)
    want = LabelT("ffi", lib)
    if sig.row != frozenset({want}):
        raise Refusal(Rule.EFFECT_NOT_DECLARED if want not in sig.row else Rule.EFFECT_DECLARED_NOT_PERFORMED,
                      f"`{it.name}`'s row must be exactly [{want}]", d.row.span)


def check_fn(it: ItemRef, modules: dict[str, ModuleScope], prog: CheckedProgram) -> Optional[Diagnostic]:
    decl: ast.FnDecl = it.decl
    checker = BodyChecker(it, it.sig, modules, prog.types)
    try:
        checked = checker.check(decl)
    except Refusal as r:
        return r.diagnostic
    except Poisoned:
        return None
    if it.kind == "static" and checked.performed:
        label = sorted(checked.performed, key=lambda l: (l.name, l.arg or ""))[0]
        return Diagnostic(Rule.STATIC_ITEM, f"a static performs nothing, but `{it.name}` performs `{label}`", decl.name.span)
    d = check_flow(decl)
    if d is not None:
        return d
    d = check_linearity(checked.events, lambda t: prog.types.is_res(checker.rel.zonk(t)), lambda t: str(checker.rel.zonk(t)),
                        checker.aliases.holds_unique)
    if d is not None:
        return d
    owned = [t for _, t in it.sig.params if isinstance(t, (Cap, Handle))]
    bad = E.check_row(it.sig.row, checked.performed, owned)
    if bad is not None:
        kind, label = bad
        from .types import row_str
        if kind == "not-declared":
            return Diagnostic(Rule.EFFECT_NOT_DECLARED,
                              f"`{it.name}` performs `{label}`, which its row {row_str(it.sig.row)} does not declare; "
                              "narrow the body or widen the row", decl.name.span)
        return Diagnostic(Rule.EFFECT_DECLARED_NOT_PERFORMED,
                          f"`{it.name}` declares `{label}`, which its body never performs; remove it from the row "
                          "(a row is exact: `[]` means pure)", decl.name.span)
    prog.fns[it.key] = checked
    if checker.unlowered:
        name, span = checker.unlowered[0]
        prog.unlowered.append(Diagnostic(Rule.UNSUPPORTED_ON_TARGET,
                                         f"the builtin `{name}` is not supported by cancho-kernel", span))
    return None
