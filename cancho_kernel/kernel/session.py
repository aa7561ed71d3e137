"""The session: the items a notebook has defined so far, and how a cell is checked against them.

Model (kernel.md §2.1):

* Each cell is parsed on its own (``api.parse_source``), so every span points into the cell
  (``SourceFile("cell[N]", text, line_offset=k)`` where ``k`` directive lines were removed).
* The session keeps items by ``(module, name)``, imports by ``(module, qualifier)`` and a default
  edition. A cell's items *replace* the session's items of the same name: the program checked
  for a cell is the cell's own parsed file plus synthetic ``ast.File`` s (one per module and
  edition) holding the session's other items — never the older copy of a name the cell defines.
* A cell is committed to the session only when its check passes, so a refused cell cannot
  corrupt the session. Commits are a single assignment of new dicts (an interrupt cannot leave
  half a commit behind).
* ``main`` in the root module is the program entry, never a session item. A cell without a
  ``main`` is checked with a placeholder ``main`` (in its own synthetic file), so checking
  items alone never reports "no main". The last ``main`` is remembered so ``%%run`` with an
  empty body can run it again with other options.
* Nothing writes a parsed tree after parsing (the checker's findings live in a side table,
  ``compiler/check/typed.py``), so every check shares the session's parsed items: a synthetic
  file holds the very declarations the cells produced, never a copy.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from ..compiler import api, ast
from ..compiler.diagnostics import Diagnostic
from ..compiler.modcache import ModuleCache
from ..compiler.source import SourceFile, Span
from ..compiler.target import HOST, Target
from ..compiler.symbols import StdSymbols, declaration_text

PLACEHOLDER_MAIN = "fn main(world: World) -> [] int {\n    release(world);\n    return 0;\n}\n"

# One compile at a time in this process: the kernel's warm-up thread compiles too.
_COMPILER_LOCK = threading.Lock()


# The std modules notebooks import most (io, fmt) and the collections courses reach for next:
# checked once at kernel start into the session's module cache, so the first cell that imports
# them finds them checked.
WARM_STD = ("io", "fmt", "vec", "math", "buffer")


def warm_compiler(cache: ModuleCache | None = None) -> None:
    """Check and lower a tiny program once, so the first cell finds the compiler loaded; with
    ``cache``, also parse and check the WARM_STD modules into it."""
    s = Session()
    s.process(SourceFile("<warm-up>", PLACEHOLDER_MAIN), compile=True)
    if cache is not None:
        # One module (with what it imports) at a time, the lock released in between: a cell
        # arriving meanwhile waits for one module's check at most, not for all of them.
        for m in WARM_STD:
            with _COMPILER_LOCK:
                api.check_sources([SourceFile("<warm-up std>", f"import std.{m};\n" + PLACEHOLDER_MAIN)],
                                  cache=cache)
            time.sleep(0)  # let a waiting cell take the lock


KIND_WORD = {ast.FnDecl: "fn", ast.ExternFn: "extern fn", ast.StructDecl: "struct",
             ast.EnumDecl: "enum", ast.StaticDecl: "static"}


@dataclass
class SessionItem:
    """One item the session keeps, with the cell (source) that defined it."""

    module: str
    name: str
    decl: ast.Item
    edition: int
    source: SourceFile
    module_decl: ast.ModuleDecl | None = None

    @property
    def kind(self) -> str:
        return KIND_WORD.get(type(self.decl), "item")

    @property
    def qualified(self) -> str:
        return f"{self.module}.{self.name}" if self.module else self.name

    def header(self) -> str:
        """The item's declaration as written, without its body (the signature for a fn)."""
        return declaration_text(self.decl)


@dataclass
class SessionImport:
    module: str
    qualifier: str
    node: ast.Import
    edition: int
    module_decl: ast.ModuleDecl | None = None

    @property
    def text(self) -> str:
        alias = f" as {self.node.alias.name}" if self.node.alias is not None else ""
        return f"import {self.node.dotted}{alias};"


@dataclass
class CellOutcome:
    """What checking (and maybe compiling) a cell produced."""

    source: SourceFile
    diagnostics: list[Diagnostic]
    defined: list[SessionItem] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)
    imports: list[SessionImport] = field(default_factory=list)
    edition: int | None = None          # an `edition N;` line in the cell
    has_main: bool = False
    ir: str | None = None               # when compiled and accepted
    timings: dict[str, float] = field(default_factory=dict)
    program: object = None              # the checked program (for %authority), when accepted
    traps: object = None                # the IR's trap sites (compiler/trapsites.py TrapTable)
    _commit: object = None

    @property
    def ok(self) -> bool:
        return not self.diagnostics


class Session:
    """Items, imports and the default edition of one kernel session."""

    def __init__(self, safe: bool = False) -> None:
        from .named import ProgramStore

        # Safe mode: a program that would run (compiled, with a `main`) is refused when it
        # reaches foreign code (compiler/policy.py, rule `unsafe-in-safe-mode`, only where the sandbox is unavailable).
        self.safe = safe
        # Named programs and C baselines (%%run --name, %%c) are build products, not items:
        # %reset keeps them.
        self.programs = ProgramStore()
        # What completion and Shift+Tab know of std, parsed once per session (std never changes
        # under a running kernel, so %reset keeps it too).
        self.std_symbols = StdSymbols()
        # Parsed and checked std modules and compiled programs, by content (compiler/modcache.py):
        # an unchanged cell re-run skips check and lower. Content-keyed, so %reset keeps it.
        self.module_cache = ModuleCache()
        self.reset()

    def reset(self) -> None:
        self.items: dict[tuple[str, str], SessionItem] = {}
        self.imports: dict[tuple[str, str], SessionImport] = {}
        self.edition = 1
        self.last_main: SessionItem | None = None
        self.cell_count = 0

    # -- naming ----------------------------------------------------------------------------

    def new_source(self, text: str, line_offset: int = 0, path: str | None = None) -> SourceFile:
        self.cell_count += 1
        return SourceFile(path or f"cell[{self.cell_count}]", text, line_offset=line_offset)

    # -- checking --------------------------------------------------------------------------

    def process(self, source: SourceFile, compile: bool, use_last_main: bool = False,
                target: Target = HOST) -> CellOutcome:
        """Parse ``source``, check it (``compile``: and lower it, for ``target``) with the
        session's items.

        Nothing is committed; call :meth:`commit` with the outcome when it is accepted.
        """
        with _COMPILER_LOCK:
            return self._process(source, compile, use_last_main, target)

    def _process(self, source: SourceFile, compile: bool, use_last_main: bool,
                 target: Target = HOST) -> CellOutcome:
        cell, diags = api.parse_source(source)
        if diags or cell is None:
            return CellOutcome(source, list(diags))
        explicit_edition = cell.edition if cell.edition_span is not None else None
        cell.edition = explicit_edition if explicit_edition is not None else self.edition
        module = cell.module_name

        own: dict[tuple[str, str], ast.Item] = {}
        main: ast.FnDecl | None = None
        for it in cell.items:
            if module == "" and isinstance(it, ast.FnDecl) and it.name.name == "main":
                main = it
            own.setdefault((module, it.name.name), it)
        own_imports = {(module, imp.qualifier.name) for imp in cell.imports}

        main_item: SessionItem | None = None
        if main is None and use_last_main and self.last_main is not None:
            main_item = self.last_main

        files: list[ast.File] = [cell]
        files += self._session_files(exclude=set(own), exclude_imports=own_imports,
                                     extra=[main_item] if main_item is not None else [])
        if main is None and main_item is None:
            placeholder = SourceFile("<session>", PLACEHOLDER_MAIN)
            pf, pd = api.parse_source(placeholder)
            assert pf is not None and not pd, pd
            files.append(pf)

        has_main = main is not None or main_item is not None
        if compile and has_main:
            res = api.compile_files(files, hint=source.path, cache=self.module_cache, target=target)
            if self.safe and res.ok and res.reused:
                from ..compiler.policy import safe_mode_refusals

                if safe_mode_refusals(res.program):
                    # Refusals name declarations: compile afresh so they point into this cell,
                    # not into the cell a cached program was compiled from.
                    res = api.compile_files(files, hint=source.path)
            outcome = CellOutcome(source, list(res.diagnostics), ir=res.ir, timings=res.timings,
                                  program=res.program, traps=getattr(res, "traps", None))
            if self.safe and not outcome.diagnostics and res.program is not None:
                from ..compiler.policy import safe_mode_refusals

                refusals = safe_mode_refusals(res.program)
                if refusals:
                    outcome.diagnostics, outcome.ir = refusals, None
        else:
            res = api.check_files(files, hint=source.path, cache=self.module_cache)
            outcome = CellOutcome(source, list(res.diagnostics), program=res.program)
        outcome.has_main = has_main
        outcome.edition = explicit_edition
        for (mod, name), decl in own.items():
            if mod == "" and name == "main" and isinstance(decl, ast.FnDecl):
                continue
            item = SessionItem(mod, name, decl, cell.edition, source, cell.module)
            outcome.defined.append(item)
            if (mod, name) in self.items:
                outcome.replaced.append(item.qualified)
        for imp in cell.imports:
            outcome.imports.append(SessionImport(module, imp.qualifier.name, imp, cell.edition, cell.module))
        if main is not None:
            outcome._commit = SessionItem("", "main", main, cell.edition, source, None)
        return outcome

    def commit(self, outcome: CellOutcome) -> None:
        """Add an accepted cell's items, imports and edition to the session."""
        if not outcome.ok:
            return
        items = dict(self.items)
        for it in outcome.defined:
            items.pop((it.module, it.name), None)  # re-insert at the end: definition order
            items[(it.module, it.name)] = it
        imports = dict(self.imports)
        for imp in outcome.imports:
            imports[(imp.module, imp.qualifier)] = imp
        self.items, self.imports = items, imports
        if outcome.edition is not None:
            self.edition = outcome.edition
        if isinstance(outcome._commit, SessionItem):
            self.last_main = outcome._commit

    def _session_files(self, exclude: set, exclude_imports: set,
                       extra: list[SessionItem]) -> list[ast.File]:
        """Synthetic files for the session's items: one per (module, edition)."""
        groups: dict[tuple[str, int], list[SessionItem]] = {}
        module_decls: dict[str, ast.ModuleDecl | None] = {}
        for key, it in self.items.items():
            if key in exclude:
                continue
            groups.setdefault((it.module, it.edition), []).append(it)
            module_decls.setdefault(it.module, it.module_decl)
        for it in extra:
            groups.setdefault((it.module, it.edition), []).append(it)
        imports_by_module: dict[str, list[SessionImport]] = {}
        for key, imp in self.imports.items():
            if key in exclude_imports:
                continue
            imports_by_module.setdefault(imp.module, []).append(imp)
            module_decls.setdefault(imp.module, imp.module_decl)
        for mod, imps in imports_by_module.items():
            if not any(m == mod for m, _ in groups):
                groups[(mod, imps[0].edition)] = []
        files = []
        done_imports: set[str] = set()
        synthetic = SourceFile("<session>", "")
        for (mod, edition), its in groups.items():
            imps = [] if mod in done_imports else imports_by_module.get(mod, [])
            done_imports.add(mod)
            f = ast.File(span=Span(synthetic, 0, 0), source=synthetic, edition=edition,
                         module=module_decls.get(mod) if mod else None,
                         imports=[i.node for i in imps],
                         items=[it.decl for it in its])
            files.append(f)
        return files

    # -- queries for completion, inspection and %who ------------------------------------------

    def find(self, name: str, module: str = "") -> SessionItem | None:
        return self.items.get((module, name))

    def module_of_qualifier(self, qualifier: str, module: str = "") -> str | None:
        imp = self.imports.get((module, qualifier))
        return imp.node.dotted if imp is not None else None
