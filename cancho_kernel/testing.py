"""`cancho test FILE... [--backend jit|exe]`: run a program's own `fn test_*` functions
(runtime.md §8.4).

The language has no reflection, so the runner works from outside: it parses the named files,
collects every `fn test_*`, checks each one's shape, and writes a root-module `main` in cancho
that runs the test named by ``argv[1]``. The program (the user's files plus that generated file)
is checked and compiled **once**, then run **once per test**: a trap kills the process it
happens in, and the runner has to survive one test's death to report the next.

A test's shape: ``fn test_x[regions](params) -> [row] int`` with no type parameters, where
every parameter is a unique reference to ``Heap`` or to ``Io``, at most one of each. A test in a
module other than the root must be ``pub``. It passes by answering 0. The generated ``main``
maps a status that is a non-zero multiple of 256 to 1, since the shell would read it back as 0.

A test that must trap cannot be written as a ``test_*`` (a trap is a failure, and the
reference's runner has no "must trap" mark: its docs/testing.md): this repository's own std
tests name those ``traps_*``, which plain ``cancho test`` leaves alone and the pytest harness
runs through :func:`run_tests` with ``Options.prefix = TRAPS_PREFIX``, expecting each to trap.

Exit status: 0 every test passed; 4 at least one failed; 2 no tests, a misshapen test, a root
``main`` in the files, or a wrong command line; 1 the program was refused; 3 the environment
failed (no linker, cannot run the binary).
"""

from __future__ import annotations

import enum
import math
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .compiler.diagnostics import Rule

if TYPE_CHECKING:
    from .compiler.backends.jit import JitWorker
    from .compiler.backends.process import RunLimits, RunResult
    from .compiler.run import Built
    from .compiler.trapsites import TrapTable

EXIT_OK, EXIT_REFUSED, EXIT_USAGE, EXIT_ENVIRONMENT, EXIT_FAILED = 0, 1, 2, 3, 4

USAGE = """\
usage: cancho test <file.cho>... [--backend jit|exe] [--std] [-l <name>]... [-L <path>]...
                   [--timeout <seconds>] [--safe]

Runs every `fn test_*` in the named files, each in its own process; a test passes by
answering 0. `--timeout` is seconds per test (0: none; at most a week). `--safe` (also
CANCHO_SAFE=1): each test runs in the sandbox (docs/teaching.md), the working directory its
only writable place, under the default memory, CPU-time, process and file-size limits; where
the sandbox cannot start, -l/-L, foreign code and Exec are refused. exit status: 0 all passed, 4 some
failed, 2 no tests or a misshapen test, 1 the program was refused, 3 environment.
"""

TRAP_WORDS = "trapped: killed by signal 4 (SIGILL, the trap every checked operation ends with)"
GENERATED_PATH = "<test-main>"
PREFIX = "cancho_test_runner_"  # names of the generated helpers (they share the root module)
DEFAULT_TIMEOUT = 300.0
TEST_PREFIX = "test_"
TRAPS_PREFIX = "traps_"  # must-trap functions of tests/std, run by the pytest harness only


class Usage(Exception):
    """A wrong command line or a misshapen program: exit 2."""


@dataclass
class TestCase:
    """One collected test: its display name (``argv[1]``), how the generated main calls it,
    and which capabilities it takes, in parameter order (``"io"`` / ``"heap"``)."""

    name: str
    call: str
    caps: list[str]


@dataclass
class Options:
    files: list[str]
    backend: str = "exe"
    libs: tuple[str, ...] = ()
    libdirs: tuple[str, ...] = ()
    timeout: float | None = DEFAULT_TIMEOUT
    safe: bool = False
    prefix: str = TEST_PREFIX  # not on the command line: the harness's TRAPS_PREFIX


MAX_TIMEOUT = 7 * 24 * 3600.0


def parse_options(argv: Sequence[str]) -> Options:
    files: list[str] = []
    backend = "exe"
    libs: list[str] = []
    libdirs: list[str] = []
    timeout: float | None = DEFAULT_TIMEOUT
    from .compiler.policy import safe_from_env

    safe = safe_from_env()
    it = iter(argv)

    def value(flag: str) -> str:
        try:
            return next(it)
        except StopIteration:
            raise Usage(f"`{flag}` needs a value") from None

    for a in it:
        if a == "--backend":
            backend = value(a)
            if backend not in ("jit", "exe", "llvm"):
                raise Usage(f"unknown backend `{backend}`")
            if backend == "llvm":
                backend = "exe"
        elif a == "--std":
            pass  # std modules are loaded on `import` whether or not this is given
        elif a == "-l":
            libs.append(value(a))
        elif a == "-L":
            libdirs.append(value(a))
        elif a == "--timeout":
            text = value(a)
            try:
                timeout = float(text)
            except ValueError:
                raise Usage(f"`--timeout` needs a number of seconds, not `{text}`") from None
            if not math.isfinite(timeout) or timeout < 0 or timeout > MAX_TIMEOUT:
                raise Usage(f"`--timeout` is a number of seconds from 0 (no limit) to "
                            f"{MAX_TIMEOUT:g}, not `{text}`")
            if timeout == 0:
                timeout = None
        elif a == "--safe":
            safe = True
        elif a.startswith("-") and a != "-":
            raise Usage(f"unknown option `{a}`")
        else:
            files.append(a)
    if not files:
        raise Usage("no input file given")
    if safe and (libs or libdirs):
        from .compiler.policy import library_refusal

        why = library_refusal("-l" if libs else "-L")
        if why is not None:
            raise Usage(why)
    return Options(files, backend, tuple(libs), tuple(libdirs), timeout, safe)


# ---------------------------------------------------------------------------------------------
# collecting


def _cap_of(param) -> str | None:
    """``"io"``/``"heap"`` when the parameter is ``&!r Io`` / ``&!r Heap``, else None."""
    from .compiler import ast

    ty = param.ty
    if not isinstance(ty, ast.RefType) or not ty.unique:
        return None
    target = ty.target
    if (not isinstance(target, ast.NamedType) or target.qualifier is not None
            or target.args):
        return None
    return {"Io": "io", "Heap": "heap"}.get(target.name.name)


def _is_int(ty) -> bool:
    from .compiler import ast

    return (isinstance(ty, ast.NamedType) and ty.qualifier is None and not ty.args
            and ty.name.name == "int")


def _where(source, span) -> str:
    if span is None:
        return f"{source.path}: "
    line, col = source.line_col(span.start)
    return f"{source.path}:{line}:{col}: "


@dataclass(frozen=True)
class Collected:
    """What :func:`collect` found: the tests, the shape errors, and the ``import`` lines the
    generated main needs for tests in other modules."""

    tests: list[TestCase]
    errors: list[str]
    imports: list[str]


def collect(files: list, prefix: str = TEST_PREFIX) -> Collected:
    """Tests from parsed files (in file order, then declaration order), shape errors, and the
    ``import`` lines the generated main needs for tests in other modules."""
    from .compiler import ast

    tests: list[TestCase] = []
    errors: list[str] = []
    qualifiers: dict[str, str] = {}
    for f in files:
        module = f.module_name
        for item in f.items:
            if not isinstance(item, ast.FnDecl):
                continue
            name = item.name.name
            at = _where(f.source, item.name.span)
            if module == "" and name == "main":
                errors.append(f"{at}error: a test file has no `main` of its own; "
                              "`cancho test` writes the `main` that runs the tests")
                continue
            if not name.startswith(prefix):
                continue
            problems = []
            if item.generics is not None and item.generics.types:
                problems.append("it takes type parameters, and a runner has nothing to "
                                "instantiate them with")
            caps: list[str] = []
            for p in item.params:
                cap = _cap_of(p)
                if cap is None:
                    problems.append(f"parameter `{p.name.name}` is not a unique reference to "
                                    "`Heap` or `Io`")
                elif cap in caps:
                    problems.append(f"it takes `{'Io' if cap == 'io' else 'Heap'}` twice")
                else:
                    caps.append(cap)
            if not _is_int(item.ret):
                problems.append("it must return `int`, 0 to pass")
            if module and not item.pub:
                problems.append(f"it is in module `{module}`, so it must be `pub` for the "
                                "runner to reach it")
            if problems:
                errors.append(f"{at}error: `{name}` is not a test the runner can run: "
                              + "; ".join(problems)
                              + " (a test is `fn test_x[regions](io: &!i Io, heap: &!h Heap) "
                                "-> [row] int`, each parameter optional)")
                continue
            if module:
                q = qualifiers.setdefault(module, f"{PREFIX}m{len(qualifiers)}")
                tests.append(TestCase(f"{module}.{name}", f"{q}.{name}", caps))
            else:
                tests.append(TestCase(name, name, caps))
    imports = [f"import {m} as {q};" for m, q in qualifiers.items()]
    return Collected(tests, errors, imports)


def _literal(text: str) -> str:
    """A cancho string literal for an identifier-like name."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def generate_main(tests: list[TestCase], imports: list[str]) -> str:
    """The cancho source of the runner's `main` (root module, edition 1)."""
    p = PREFIX
    lines = [
        "// Written by `cancho test`: runs the test named by argv[1].",
        *imports,
        "",
        f"fn {p}same[&a, &b](x: &a [byte], y: &b [byte]) -> [] bool {{",
        "    if len(x) != len(y) {",
        "        return false;",
        "    }",
        "    var k = 0;",
        "    while k < len(x) {",
        "        if x[k] != y[k] {",
        "            return false;",
        "        }",
        "        k = k + 1;",
        "    }",
        "    return true;",
        "}",
        "",
        f"fn {p}status(n: int) -> [] int {{",
        "    if n != 0 && n % 256 == 0 {",
        "        return 1;",
        "    }",
        "    return n;",
        "}",
        "",
        "fn main(world: World) -> [] int {",
        "    let Split { io, ffi, fs, heap, args } = split(world);",
        "    release(ffi);",
        "    release(fs);",
        "    var which = 0 - 1;",
        "    borrow args as &g in {",
        "        if arg_count(g) > 1 {",
        "            let wanted = arg(g, 1);",
    ]
    for k, t in enumerate(tests):
        lines.append(f"            if {p}same(wanted, {_literal(t.name)}) {{")
        lines.append(f"                which = {k};")
        lines.append("            }")
    lines += [
        "        }",
        "    }",
        "    release(args);",
        "    var status = 0 - 1;",
        "    borrow mut io as &!i in {",
        "        borrow mut heap as &!h in {",
    ]
    for k, t in enumerate(tests):
        args = ", ".join("i" if c == "io" else "h" for c in t.caps)
        lines.append(f"            if which == {k} {{")
        if t.caps or "." in t.call:
            lines.append(f"                status = {p}status({t.call}({args}));")
        else:
            # Through a function value: a direct call of a pure test on no arguments would be
            # evaluated while compiling (check/callfold.py), so a test that traps would refuse
            # the whole run as `constant-traps` instead of failing alone when it runs.
            lines.append(f"                let run = {t.call};")
            lines.append(f"                status = {p}status(run());")
        lines.append("            }")
    lines += [
        "        }",
        "    }",
        "    release(heap);",
        "    release(io);",
        "    return status;",
        "}",
        "",
    ]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# running


class Verdict(enum.Enum):
    """How one test's process ended."""

    OK = "ok"
    RETURNED = "returned"
    TRAPPED = "trapped"
    SIGNALLED = "signalled"
    TIMED_OUT = "timed out"
    INTERRUPTED = "interrupted"


@dataclass(frozen=True)
class TestOutcome:
    """One test's run: its name, verdict, the short word a table shows, the long reason the
    CLI's failure section shows, the wall time, and the run (for its output)."""

    name: str
    verdict: Verdict
    short: str
    reason: str
    seconds: float
    result: RunResult

    @property
    def ok(self) -> bool:
        return self.verdict is Verdict.OK


def trap_detail(result: RunResult, traps: "TrapTable | None" = None) -> str | None:
    """The located trap (which check fired, where: compiler/trapsites.py) when the supervisor
    read the trap's site and the program's table names it; None otherwise (the signal is shown)."""
    site = traps.get(result.trap_site) if traps is not None else None
    return None if site is None else site.render().rstrip("\n")


def judge(name: str, result: RunResult, traps: "TrapTable | None" = None) -> TestOutcome:
    """A test passes by answering 0 in a process that ended by itself (docs/cli.md)."""
    seconds = result.wall_seconds
    if result.interrupted:
        return TestOutcome(name, Verdict.INTERRUPTED, "interrupted", result.describe(), seconds, result)
    if result.timed_out:
        return TestOutcome(name, Verdict.TIMED_OUT, result.describe(), result.describe(), seconds, result)
    if result.signal is not None:
        if result.signal == signal.SIGILL:
            located = trap_detail(result, traps)
            short = f"trapped: {located.splitlines()[0].removeprefix('trap: ')}" if located else "trapped (SIGILL)"
            reason = TRAP_WORDS + (f"\n{located}" if located else "")
            return TestOutcome(name, Verdict.TRAPPED, short, reason, seconds, result)
        from .compiler.backends.process import signal_name

        words = f"killed by signal {result.signal} ({signal_name(result.signal)})"
        return TestOutcome(name, Verdict.SIGNALLED, words, words, seconds, result)
    if result.exit_status == 0:
        return TestOutcome(name, Verdict.OK, "ok", "ok", seconds, result)
    if result.exit_status is not None:
        return TestOutcome(name, Verdict.RETURNED, f"returned {result.exit_status}",
                           f"returned {result.exit_status}, and a test answers 0 to pass", seconds, result)
    return TestOutcome(name, Verdict.SIGNALLED, result.describe(), result.describe(), seconds, result)


def _show_stream(label: str, data: bytes, out: list[str]) -> None:
    if data:
        text = data.decode("utf-8", "replace")
        out.append(f"{label}:\n")
        out.append(text if text.endswith("\n") else text + "\n")


def _err(message: str) -> None:
    if sys.stderr is not None:
        sys.stderr.write(message if message.endswith("\n") else message + "\n")
        sys.stderr.flush()


def _out(text: str) -> None:
    if sys.stdout is not None:
        sys.stdout.write(text)
        sys.stdout.flush()


def run_tests(opts: Options) -> int:
    from .compiler import api
    from .compiler.diagnostics import render_text
    from .compiler.source import SourceFile

    try:
        sources = [SourceFile.from_path(p) for p in opts.files]
    except OSError as exc:
        name = exc.filename if exc.filename is not None else opts.files[0]
        _err(f"cannot read `{name}`: {exc.strerror or exc} (os error {exc.errno})")
        return EXIT_ENVIRONMENT

    parsed = []
    diags = []
    for s in sources:
        f, d = api.parse_source(s)
        diags.extend(d)
        if f is not None:
            parsed.append(f)
    if diags:
        _err(render_text(diags, color=False).rstrip("\n"))
        return EXIT_REFUSED

    found = collect(parsed, opts.prefix)
    tests, errors, imports = found.tests, found.errors, found.imports
    if errors:
        _err("\n".join(errors))
        return EXIT_USAGE
    if not tests:
        _err("no tests found: `cancho test` runs every `fn test_*` in the files it is given, "
             "and a run that finds none is not a pass")
        return EXIT_USAGE

    generated = SourceFile(GENERATED_PATH, generate_main(tests, imports))
    result = api.compile_sources([*sources, generated])
    if result.diagnostics or result.ir is None:
        _err(render_text(result.diagnostics, color=False).rstrip("\n")
             or "the compiler produced no code")
        return EXIT_REFUSED
    if opts.safe:
        from .compiler.policy import safe_mode_refusals

        refusals = safe_mode_refusals(result.program)
        if refusals:
            _err(render_text(refusals, color=False).rstrip("\n"))
            return EXIT_REFUSED
    return _build_and_run(opts, tests, result.ir, result.traps)


def _test_limits(opts: Options) -> RunLimits:
    """Each test's limits: the timeout, 1 MiB kept per stream; safe mode adds the defaults for
    memory, CPU time, processes and file size, and the sandbox with the working directory its
    only writable place (compiler/policy.py; a warning for what this machine lacks)."""
    from .compiler import policy
    from .compiler.backends.process import DEFAULT_RUN_LIMITS, SAFE_CAPS, RunLimits

    if not opts.safe:
        return RunLimits(timeout=opts.timeout, max_output=1 << 20)
    plan = policy.plan_for(os.getcwd())
    if plan.warning:
        _err("cancho test: " + plan.warning.rstrip("\n"))
    d = DEFAULT_RUN_LIMITS
    return RunLimits(timeout=opts.timeout, max_output=1 << 20, memory=d.memory,
                     cpu_seconds=d.cpu_seconds, processes=d.processes, fsize=SAFE_CAPS.fsize,
                     confine=plan.confine, sandbox=plan.sandbox)


def _build_and_run(opts: Options, tests: list[TestCase], ir: str, traps: "TrapTable | None" = None) -> int:
    """Build once (``compiler/run.py``), run every test in a process of its own, report."""
    from .compiler.backends.process import owned_temp_prefix, remove_stale_dirs
    from .compiler.run import Backend, FailureKind, RunFailed, build

    remove_stale_dirs()  # what an earlier run killed by SIGKILL left
    run_dir = tempfile.mkdtemp(prefix=owned_temp_prefix("test"))
    worker = None
    limits = _test_limits(opts)
    # A sandboxed test runs as an executable (the same bytes as on the JIT, kernel.md §2.2).
    backend = Backend.EXE if limits.sandbox is not None else opts.backend
    try:
        built = build(ir, backend, os.path.join(run_dir, "tests"), libs=opts.libs,
                      libdirs=opts.libdirs)
        if built.backend is Backend.JIT:
            from .compiler.backends.jit import JitWorker

            worker = JitWorker()
        return _run_all(tests, built, worker, limits, traps)
    except RunFailed as exc:
        if exc.kind is FailureKind.ENVIRONMENT:
            _err(exc.message)
            return EXIT_ENVIRONMENT
        _err(f"error: the compiler failed to generate code; this is a bug in cancho, "
             f"not in the program ({exc.detail}) [{Rule.INTERNAL}]")
        return EXIT_REFUSED
    finally:
        if worker is not None:
            worker.close()
        shutil.rmtree(run_dir, ignore_errors=True)


def _run_all(tests: list[TestCase], built: Built, worker: JitWorker | None, limits: RunLimits,
             traps: "TrapTable | None" = None) -> int:
    from .compiler.backends.process import StdoutTarget
    from .compiler.run import run_built

    _out(f"running {len(tests)} test{'s' if len(tests) != 1 else ''}\n")
    failures: list[TestOutcome] = []
    for t in tests:
        argv = [str(built.path) if built.path is not None else "tests", t.name]
        res = run_built(built, argv, worker=worker, target=StdoutTarget.pipe(), limits=limits)
        outcome = judge(t.name, res, traps)
        _out(f"test {t.name} ... {'ok' if outcome.ok else 'FAILED'}\n")
        if not outcome.ok:
            failures.append(outcome)
    report: list[str] = []
    if failures:
        report.append("\nfailures:\n")
        for f in failures:
            report.append(f"\n---- {f.name} ----\n{f.reason}\n")
            _show_stream("stdout", f.result.stdout, report)
            _show_stream("stderr", f.result.stderr, report)
    verdict = "FAILED" if failures else "ok"
    passed = len(tests) - len(failures)
    report.append(f"\ntest result: {verdict}. {passed} passed; {len(failures)} failed\n")
    _out("".join(report))
    return EXIT_FAILED if failures else EXIT_OK


def main_test(argv: list[str]) -> int:
    """`cancho test` with its arguments (without `test`); answers the exit status."""
    try:
        opts = parse_options(argv)
    except Usage as exc:
        _err(f"{exc}\n\n{USAGE}")
        return EXIT_USAGE
    try:
        return run_tests(opts)
    except KeyboardInterrupt:
        return 128 + signal.SIGINT
    except Exception as exc:  # noqa: BLE001 - our bug; never a traceback
        _err(f"error: the test runner failed ({type(exc).__name__}: {exc}); "
             f"this is a bug in cancho [{Rule.INTERNAL}]")
        return EXIT_REFUSED


if __name__ == "__main__":
    sys.exit(main_test(sys.argv[1:]))
