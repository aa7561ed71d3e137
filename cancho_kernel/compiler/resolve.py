"""Modules and item tables: which names each module declares, what its imports bind.

A program is a set of files; files declaring the same module share a namespace. Imports bind
qualifiers per module. `import std.x` adds the std library's module when no file declares it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Optional

from . import ast
from .check.builtins import builtin_visible, prelude_type_visible
from .diagnostics import Diagnostic, Rule
from .source import SourceFile

STD_DIR = Path(__file__).resolve().parent.parent / "std"


@dataclass(eq=False)
class ItemRef:
    """One top-level declaration and where it lives."""

    kind: str  # "fn" | "extern" | "struct" | "enum" | "static"
    name: str
    decl: ast.Item
    module: str
    file: ast.File
    sig: object = None  # filled by the checker (FnSig, TypeDecl, ...)

    @property
    def key(self) -> str:
        return f"{self.module}::{self.name}"

    @property
    def edition(self) -> int:
        return self.file.edition


@dataclass(eq=False)
class ModuleScope:
    name: str
    files: list[ast.File] = field(default_factory=list)
    items: dict[str, ItemRef] = field(default_factory=dict)
    imports: dict[str, str] = field(default_factory=dict)  # qualifier -> module name


ITEM_KIND = {ast.FnDecl: "fn", ast.ExternFn: "extern", ast.StructDecl: "struct",
             ast.EnumDecl: "enum", ast.StaticDecl: "static"}


@lru_cache(maxsize=8)
def _std_listing(std_dir: Path, stamp: int) -> dict[str, Path]:
    """Every std module under `std_dir` by dotted name (`io`, ...), as of `stamp`."""
    return {".".join(p.relative_to(std_dir).with_suffix("").parts): p for p in std_dir.rglob("*.cho")}


def std_modules() -> dict[str, Path]:
    """The std modules by dotted name: an import is looked up here, so no name a program writes
    (however long: `File name too long` was `internal`) is ever made into a path."""
    return _std_listing(STD_DIR, STD_DIR.stat().st_mtime_ns)


def std_source(module: str) -> Optional[SourceFile]:
    """The std library file for `std.x`, displayed as `<std>/x.cho`."""
    if not module.startswith("std."):
        return None
    p = std_modules().get(module[4:])
    if p is None:
        return None
    return SourceFile(f"<std>/{p.name}", p.read_text(encoding="utf-8"))


def build_modules(files: list[ast.File], diags: list[Diagnostic],
                  given: Optional[dict[str, ModuleScope]] = None) -> dict[str, ModuleScope]:
    """Group files into modules, declare their items and bind their imports.

    ``given``: modules already resolved and checked (a module cache's), taken as they are, in
    their files' place in the order; their files are not declared again."""
    given = given or {}
    modules: dict[str, ModuleScope] = {}
    for f in files:
        if f.module_name in given:
            modules.setdefault(f.module_name, given[f.module_name])
            continue
        modules.setdefault(f.module_name, ModuleScope(f.module_name)).files.append(f)
    fresh = [m for m in modules.values() if m.name not in given]
    for m in fresh:
        for f in m.files:
            for item in f.items:
                name = item.name.name
                kind = ITEM_KIND[type(item)]
                if kind == "extern" and builtin_visible(name, f.edition):
                    diags.append(Diagnostic(
                        Rule.FOREIGN_DECLARATION,
                        f"`{name}` is a builtin at edition {f.edition}; a foreign function cannot redeclare it",
                        item.name.span))
                    continue
                if builtin_visible(name, f.edition) or prelude_type_visible(name, f.edition):
                    diags.append(Diagnostic(
                        Rule.BUILTIN_REDECLARED,
                        f"`{name}` is {'a built-in type' if prelude_type_visible(name, f.edition) else 'a builtin'} "
                        f"and cannot be redeclared (from edition {f.edition} on); choose another name",
                        item.name.span))
                    continue
                if name in m.items:
                    if "extern" in (kind, m.items[name].kind):
                        diags.append(Diagnostic(
                            Rule.FOREIGN_DECLARATION,
                            f"`{name}` is already declared here; a foreign function's name is its linker symbol, "
                            "so it cannot share it", item.name.span))
                    else:
                        diags.append(Diagnostic(
                            Rule.DUPLICATE_DECLARATION,
                            f"`{name}` is already declared in this module", item.name.span))
                    continue
                m.items[name] = ItemRef(kind, name, item, m.name, f)
    for m in fresh:
        for f in m.files:
            for imp in f.imports:
                q = imp.qualifier.name
                target = imp.dotted
                if target not in modules:  # the reference: an unknown name (docs/decisions.md)
                    diags.append(Diagnostic(
                        Rule.UNKNOWN_NAME,
                        f"no module `{target}` in this program", imp.span))
                    continue
                if target == "":
                    continue
                prev = m.imports.get(q)
                if prev is not None and prev != target:
                    diags.append(Diagnostic(
                        Rule.DUPLICATE_DECLARATION,
                        f"the qualifier `{q}` is already bound to `{prev}`; use `import {target} as NAME`",
                        imp.span))
                    continue
                m.imports[q] = target
    return modules
