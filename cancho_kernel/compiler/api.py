"""The compiler's public API: what the CLI, the kernel, the tests and the benchmarks call.

Pipeline: parse every file -> resolve modules and names -> check (types, linearity, regions,
effects, constant folding) -> lower to LLVM IR text. Backends (``backends/``) turn that IR into
an executable or run it through MCJIT.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .diagnostics import Diagnostic, sort_diagnostics
from .source import SourceFile


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

    @property
    def ok(self) -> bool:
        return self.ir is not None and not self.diagnostics


STD_DIR = Path(__file__).resolve().parent.parent / "std"


def load_sources(paths: list[str | Path], std: bool = False) -> list[SourceFile]:
    """Read the named files (UTF-8). `std` is accepted for CLI compatibility: std modules are
    added on `import` whether or not it is given."""
    return [SourceFile.from_path(p) for p in paths]


def check_sources(sources: list[SourceFile]) -> CheckResult:
    """Parse and check a program made of these files."""
    from .check.program import check_program

    try:
        diags, program = check_program(sources)
    except Exception as e:  # our bug, never the user's: report it, never crash the caller
        return CheckResult([internal_error(e, sources)])
    return CheckResult(sort_diagnostics(diags), program if not diags else None)


def internal_error(e: BaseException, sources: list[SourceFile]) -> Diagnostic:
    """A compiler failure of ours as rule `internal`, naming the exception (no traceback)."""
    return Diagnostic("internal", f"the compiler failed: {type(e).__name__}: {e}; this is a bug in cancho-kernel",
                      None, file_hint=sources[0].path if sources else None)


def parse_source(source: SourceFile):
    """Parse one file: `(ast.File | None, diagnostics)`; a parse error ends the file."""
    from .parser import parse_file

    return parse_file(source)


def check_files(files: list, hint: str | None = None) -> CheckResult:
    """Check a program given as already-parsed files (std modules are added on import).

    The kernel uses this to check a session: synthetic `ast.File`s whose items keep spans into
    the cells that defined them, so diagnostics point into cells.
    """
    from .check.program import add_std_imports, check_parsed

    try:
        diags: list[Diagnostic] = []
        files = add_std_imports(files, diags)
        diags, program = check_parsed(files, diags, hint)
    except Exception as e:
        return CheckResult([internal_error(e, [])])
    return CheckResult(sort_diagnostics(diags), program if not diags else None)


def compile_sources(sources: list[SourceFile]) -> CompileResult:
    """Check, then lower to LLVM IR text. A failure of our own becomes an `internal` diagnostic."""
    return _compile(lambda: check_sources(sources), sources)


def compile_files(files: list, hint: str | None = None) -> CompileResult:
    """`check_files`, then lower to LLVM IR text."""
    return _compile(lambda: check_files(files, hint), [])


def _compile(check, sources: list[SourceFile]) -> CompileResult:
    import time

    t0 = time.perf_counter()
    checked = check()
    t1 = time.perf_counter()
    if not checked.ok:
        return CompileResult(checked.diagnostics, timings={"check": t1 - t0})
    from .codegen.lower import lower_program

    try:
        ir, diags = lower_program(checked.program)
    except Exception as e:
        ir, diags = None, [internal_error(e, sources)]
    t2 = time.perf_counter()
    return CompileResult(sort_diagnostics(diags), ir if not diags else None, checked.program,
                         {"check": t1 - t0, "lower": t2 - t1})


def symbol_name(key: str) -> str:
    """The LLVM symbol of a cancho function (`module::name` key), e.g. for filtering `%%ir`."""
    from .codegen.lower import symbol

    return symbol(key)
