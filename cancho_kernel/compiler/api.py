"""The compiler's public API: what the CLI, the kernel, the tests and the benchmarks call.

Pipeline: parse every file -> resolve modules and names -> check (types, linearity, regions,
effects, constant folding) -> lower to LLVM IR text. Backends (``backends/``) turn that IR into
an executable or run it through MCJIT; :func:`run` (``run.py``) is the one way to build and run
it, with typed failures.
"""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, TypeVar

from .diagnostics import Diagnostic, Rule, sort_diagnostics
from .source import SourceFile
from .target import HOST, Target
from .trapsites import TrapTable

if TYPE_CHECKING:
    import threading

    from .backends.jit import JitWorker
    from .backends.process import RunResult
    from .cache import BuildCache
    from .modcache import ModuleCache
    from .run import RunRequest


@dataclass
class CheckResult:
    """Outcome of checking a program: diagnostics (empty when accepted) and the checked program."""

    diagnostics: list[Diagnostic]
    program: object = None  # check.program.CheckedProgram when accepted

    @property
    def ok(self) -> bool:
        return not self.diagnostics


@dataclass
class CompileResult:
    """Outcome of compiling: LLVM IR text (with the C entry wrapper) or diagnostics."""

    diagnostics: list[Diagnostic]
    ir: str | None = None
    program: object = None
    timings: dict[str, float] = field(default_factory=dict)
    reused: bool = False  # answered by a module cache: the same program was compiled before
    traps: TrapTable = field(default_factory=TrapTable)  # the IR's trap sites (trapsites.py)
    item_paths: tuple[str, ...] = ()  # each item's file, in program-key order (see _compile_cached)

    @property
    def ok(self) -> bool:
        return self.ir is not None and not self.diagnostics


R = TypeVar("R")

# The passes recurse over the syntax tree, so a program nested 10,000 deep (a sum of 10,000
# terms, an `else if` chain, parentheses, a chain of structs) needs tens of thousands of Python
# frames. Every entry point below therefore runs on a thread of its own with a large stack and a
# raised recursion limit. The limit is what stops a deeper program (as a `RecursionError`, which
# the passes turn into a diagnostic); the stack is sized so that the limit is always reached
# before the C stack runs out (CPython 3.11 counts C-level recursion against the same limit, and
# one counted level takes well under STACK_BYTES / RECURSION_LIMIT bytes of C stack). The stack
# is reserved address space: only the pages a deep program touches are ever committed.
RECURSION_LIMIT = 400_000
STACK_BYTES = 2 << 30  # 2 GiB of address space, ~5 KiB per counted level


class _DeepLimit:
    """Raises the interpreter's recursion limit while at least one compilation runs, and puts
    the caller's limit back when the last one ends (the limit is process-wide)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._active = 0
        self._saved = 0

    def __enter__(self) -> None:
        with self._lock:
            if self._active == 0:
                self._saved = sys.getrecursionlimit()
                sys.setrecursionlimit(max(self._saved, RECURSION_LIMIT))
            self._active += 1

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._active -= 1
            if self._active == 0:
                sys.setrecursionlimit(self._saved)


_DEEP_LIMIT = _DeepLimit()
_STACK_SIZE_LOCK = threading.Lock()


def run_deep(work: Callable[[], R]) -> R:
    """Run `work` on a fresh thread with a STACK_BYTES stack and the raised recursion limit;
    return its result or re-raise its exception in the caller. Already on such a thread (a pass
    calling another entry point), or where no such thread can be made, run it here."""
    if getattr(threading.current_thread(), "cancho_deep", False):
        return work()
    outcome: dict[str, object] = {}

    def body() -> None:
        try:
            outcome["value"] = work()
        except BaseException as e:  # handed to the caller's thread below
            outcome["error"] = e

    with _DEEP_LIMIT:
        worker: threading.Thread | None = threading.Thread(target=body, name="cancho-compile", daemon=True)
        worker.cancho_deep = True  # type: ignore[union-attr]
        with _STACK_SIZE_LOCK:
            try:
                previous = threading.stack_size(STACK_BYTES)
            except (ValueError, RuntimeError):
                previous = None
            try:
                worker.start()
            except RuntimeError:  # no room for the stack
                worker = None
            finally:
                if previous is not None:
                    threading.stack_size(previous)
        if worker is not None:
            worker.join()
    if worker is None:  # compile on this thread, under the caller's own recursion limit
        return work()
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome["value"]  # type: ignore[return-value]


def load_sources(paths: list[str | Path]) -> list[SourceFile]:
    """Read the named files (UTF-8). std modules are added on `import`, never named here."""
    return [SourceFile.from_path(p) for p in paths]


def check_sources(sources: list[SourceFile], cache: ModuleCache | None = None,
                  target: Target = HOST) -> CheckResult:
    """Parse and check a program made of these files (``cache``: std modules parsed and checked
    once, ``modcache.py``) for ``target`` (what it lacks is refused, ``target.py``)."""
    from .check.program import check_program

    try:
        diags, program = run_deep(lambda: check_program(sources, cache, target))
    except Exception as e:  # our bug, never the user's: report it, never crash the caller
        return CheckResult([internal_error(e, sources)])
    return CheckResult(sort_diagnostics(diags), program if not diags else None)


def internal_error(e: BaseException, sources: list[SourceFile]) -> Diagnostic:
    """A compiler failure of ours as rule `internal`, naming the exception (no traceback)."""
    return Diagnostic(Rule.INTERNAL, f"the compiler failed: {type(e).__name__}: {e}; this is a bug in cancho-kernel",
                      None, file_hint=sources[0].path if sources else None)


def parse_source(source: SourceFile):
    """Parse one file: `(ast.File | None, diagnostics)`; a parse error ends the file."""
    from .parser import parse_file

    return run_deep(lambda: parse_file(source))


def check_files(files: list, hint: str | None = None, cache: ModuleCache | None = None) -> CheckResult:
    """Check a program given as already-parsed files (std modules are added on import).

    The kernel uses this to check a session: synthetic `ast.File`s whose items keep spans into
    the cells that defined them, so diagnostics point into cells.
    """
    from .check.program import add_std_imports, check_parsed

    def check() -> tuple[list[Diagnostic], object]:
        diags: list[Diagnostic] = []
        parsed = add_std_imports(files, diags, cache)
        return check_parsed(parsed, diags, hint, cache)

    try:
        diags, program = run_deep(check)
    except Exception as e:
        return CheckResult([internal_error(e, [])])
    return CheckResult(sort_diagnostics(diags), program if not diags else None)


def compile_sources(sources: list[SourceFile], cache: ModuleCache | None = None,
                    target: Target = HOST) -> CompileResult:
    """Check, then lower to LLVM IR text. A failure of our own becomes an `internal` diagnostic.
    With ``cache``: std modules are parsed and checked once, and an accepted program's result is
    kept by content, so the same program again skips check and lower (``reused``). ``target``
    (``target.py``): what the program is refused for and the IR is made for; the module cache
    keeps host programs only."""
    from .check.program import check_program, parse_all

    if cache is None or target.is_wasi:
        return run_deep(lambda: _compile(lambda: check_program(sources, target=target), sources,
                                         target=target))
    return run_deep(lambda: _compile_cached(lambda diags: parse_all(sources, diags, cache=cache),
                                            sources[0].path if sources else None, cache, sources))


def compile_files(files: list, hint: str | None = None, cache: ModuleCache | None = None,
                  target: Target = HOST) -> CompileResult:
    """`check_files`, then lower to LLVM IR text (``cache`` as for :func:`compile_sources`, which
    keeps host programs only; ``target`` as there)."""
    from .check.program import add_std_imports, check_parsed

    if cache is None or target.is_wasi:
        def check() -> tuple[list[Diagnostic], object]:
            diags: list[Diagnostic] = []
            return check_parsed(add_std_imports(files, diags), diags, hint, target=target)

        return run_deep(lambda: _compile(check, [], target=target))
    return run_deep(lambda: _compile_cached(lambda diags: add_std_imports(files, diags, cache), hint, cache, []))


def _compile_cached(parse: Callable[[list[Diagnostic]], list], hint: str | None, cache: ModuleCache,
                    sources: list[SourceFile]) -> CompileResult:
    """Parse (std through the cache); answer a kept result for the same program content, or
    check (cached std modules taken as checked) and lower, and keep an accepted result."""
    import time

    from .check.program import check_parsed

    t0 = time.perf_counter()
    diags: list[Diagnostic] = []
    try:
        parsed = parse(diags)
        key = cache.program_key(parsed) if not diags else None
    except Exception as e:  # our bug, never the user's
        return CompileResult([internal_error(e, sources)])
    paths = tuple(item.span.source.path for f in parsed for item in f.items)
    if key is not None:
        hit = cache.program(key)
        if isinstance(hit, CompileResult):
            # The key leaves paths out (the same cell run again is `cell[N+1]`): the kept trap
            # sites are renamed to the files this program's items are in now.
            traps = hit.traps.renamed(dict(zip(hit.item_paths, paths)))
            return CompileResult([], hit.ir, hit.program, {"check": time.perf_counter() - t0, "lower": 0.0},
                                 reused=True, traps=traps, item_paths=paths)
    result = _compile(lambda: check_parsed(parsed, diags, hint, cache), sources, t0, cache=cache)
    result.item_paths = paths
    if key is not None and result.ok:
        cache.put_program(key, result)
    return result


def _compile(check: Callable[[], tuple[list[Diagnostic], object]], sources: list[SourceFile],
             t0: float | None = None, target: Target = HOST,
             cache: ModuleCache | None = None) -> CompileResult:
    """Run ``check``; when it accepts, lower the checked program for ``target`` (with
    ``cache``: functions lowered before are put back, ``codegen/fncache.py``)."""
    import time

    t0 = time.perf_counter() if t0 is None else t0
    try:
        diags, program = check()
    except Exception as e:  # our bug, never the user's
        diags, program = [internal_error(e, sources)], None
    t1 = time.perf_counter()
    if diags:
        return CompileResult(sort_diagnostics(diags), timings={"check": t1 - t0})
    from .codegen.lower import lower_program_sites

    traps = TrapTable()
    try:
        ir, diags, traps = lower_program_sites(program, target, cache)
    except Exception as e:
        ir, diags = None, [internal_error(e, sources)]
    t2 = time.perf_counter()
    return CompileResult(sort_diagnostics(diags), ir if not diags else None, program,
                         {"check": t1 - t0, "lower": t2 - t1}, traps=traps)


def run(request: RunRequest, worker: JitWorker | None = None,
        cancel: threading.Event | None = None, cache: BuildCache | None = None) -> RunResult:
    """Build and run one program (``run.RunRequest``) on its backend: ``run.run_program``.
    Raises ``run.RunFailed`` (``internal`` or ``environment``)."""
    from .run import run_program

    return run_program(request, worker, cancel, cache)
