"""The `cancho` command line: build, check, run, ir, asm (runtime.md §8).

Exit codes (§8.2): 0 success; 1 program refused (including rule `internal`); 2 command line
wrong (the message, a blank line and the usage text on stderr); 3 environment (no linker,
unreadable input in text mode, unwritable output, a `run` whose program died by a signal);
`run` otherwise exits with the program's own status, so `cancho run p.cho` and
`cancho build p.cho && ./p` agree.

Messages follow the reference CLI's wording. A refusal in text mode is
`path:line:col: error: message [rule-tag]`, then the source line and a caret; the tag closes the
headline so tools that read a C compiler's `path:line:col: error: ` read ours (docs/cli.md).
Nothing a compiler pass raises may escape as a traceback: it becomes a diagnostic with rule
`internal` (exit 1).

Nothing outlives the command: SIGTERM and SIGHUP unwind it like an exception (the program is
killed with everything it started, temporary files are removed) and it then dies by the same
signal; the program dies with it even on SIGKILL (PR_SET_PDEATHSIG), and the exe backend's
temporary directory is gone as soon as the program is running. `--safe` (or `CANCHO_SAFE=1`)
is safe mode for shared servers (compiler/policy.py): `run` starts the program in the sandbox
(bubblewrap: its own network, PID and mount namespaces, a read-only system, seccomp; the working
directory its only writable place; Landlock inside), with the default limits (memory, CPU time,
processes, file size; docs/decisions.md). Where the sandbox cannot start, `-l`/`-L`, a program
reaching an `extern fn` and one performing `exec` are refused under `unsafe-in-safe-mode`, with
a warning.

`build` and `run` keep what they build in the on-disk build cache (``compiler/cache.py``), so
an unchanged program is neither compiled nor linked again; ``--no-cache`` bypasses it. Building
and running are ``compiler/run.py``'s, shared with `cancho test` and the kernel.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from . import __version__
from .compiler import api, cpu
from .compiler.diagnostics import Diagnostic, Rule, render_json, render_text
from .compiler.run import FailureKind, RunFailed, flush_python_streams, os_error_text
from .compiler.source import SourceFile
from .compiler.target import HOST, Target
from .compiler.trapsites import TrapTable, split_trap_trailer, with_trap_trailer

EXIT_OK, EXIT_REFUSED, EXIT_USAGE, EXIT_ENVIRONMENT = 0, 1, 2, 3

USAGE = """\
cancho — a compiler for the cancho systems language (llvmlite backends)

usage:
    cancho build <file.cho>... [-o <output>] [--emit exe|obj] [--target <T>] [--backend llvm] [--std] [--safe] [--no-cache] [-l <name>]... [-L <path>]...
    cancho check <file.cho>... [--std] [--output json] [--target <T>] [--backend llvm]
    cancho run   <file.cho>... [--backend jit|exe|llvm | --target <T>] [--std] [--safe] [--no-cache] [-l <name>]... [-L <path>]... [-- <arg>...]
    cancho ir    <file.cho>... [--std] [--target <T>]
    cancho asm   <file.cho>... [--std] [--target <T>]
    cancho authority <file.cho>... [--std] [--output json] [--target <T>]
    cancho test  <file.cho>... [--std] [--backend jit|exe|llvm] [--safe]
    cancho fmt   <file.cho|dir>... [--check]
    cancho ids   <file.cho>... [--std]
    cancho layout <file.cho>... [--std]
    cancho print <file.cho>
    cancho --version
    cancho -h | --help

options:
    -o <output>       where `build` writes (default: the first input's stem, `.o` for obj)
    --emit exe|obj    `build` a linked executable (default) or a bare object file
    --std             accepted for the reference's command lines; the standard library is
                      always available through `import std.x;`, so it changes nothing
    --output json     `check`/`authority` answer as data on stdout rather than prose
    --backend jit|exe `run` through MCJIT in this process (default) or a linked executable;
                      `llvm` (the reference's name; every backend here is LLVM) is accepted by
                      every command that compiles and means `exe` for `run`; `cranelift` is
                      refused (there is no Cranelift backend here)
    --check           `fmt`: write nothing; exit 1 if a file would change
    --target <T>      `build`/`check`/`run`/`ir`/`asm`/`authority` for the host (default; its triple,
                      as `--version` prints it) or for `wasm32-wasip1`: a WebAssembly module linked
                      with clang and a WASI libc, run with wasmtime; `authority` then also lists the
                      functions the module imports (docs/cli.md)
    -l <name>         link `lib<name>` (`build`/`run` only); repeatable, passed to `cc`
    -L <path>         add a library search path (`build`/`run` only); repeatable
    --safe            safe mode (also CANCHO_SAFE=1): `run` runs the program in the sandbox
                      (docs/teaching.md) with the default limits, the working directory
                      its only writable place; without a sandbox here, -l/-L, foreign
                      code and Exec are refused (`unsafe-in-safe-mode`)
    --no-cache        `build`/`run`: neither use nor fill the build cache
                      (~/.cache/cancho-kernel; see docs/cli.md)
    -- <arg>...       `run`: everything after `--` is the program's command line

`fmt` rewrites each file (each `.cho` under a directory) in the canonical layout, keeping its
comments, blank lines and literal spellings; `ids` prints each declaration's content hash
(a `sig` and a `body` per function, one per type); `layout` prints each type's leaves, size,
packed size and stride; `print` renders one file in the canonical layout without its comments
(docs/cli.md). `cancho <command> --help` prints that command's usage.

A program is the set of files named, in any order. `check` also generates code and discards
it, so a program it accepts is one `build` can compile.

A refusal is `path:line:col: error: <message> [<rule-tag>]` on stderr, then the source line
and a caret; `check --output json` gives the same refusals as data. See docs/cli.md, and
docs/authority-report.md for what `authority` prints.

exit status: 0 success, 1 refused, 2 usage, 3 environment; `run` exits with the program's own
status, or 3 if the program was killed by a signal (a trap is signal 4, SIGILL).
"""

COMMANDS = ("build", "check", "run", "ir", "asm", "authority", "test", "fmt", "ids", "layout", "print")
CRANELIFT = ("`--backend cranelift`: this compiler has no Cranelift backend; every backend here is "
             "LLVM (`--backend llvm`, or `jit`/`exe` for `run`)")


class Failure(Exception):
    """Ends the command: ``message`` on stderr, exit ``code``."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def usage(message: str) -> Failure:
    return Failure(f"{message}\n\n{USAGE}", EXIT_USAGE)


def environment(message: str) -> Failure:
    return Failure(message, EXIT_ENVIRONMENT)


@dataclass
class Invocation:
    """What a command line asked for."""

    command: str
    inputs: list[str] = field(default_factory=list)
    output: str | None = None
    emit: str = "exe"
    std: bool = False
    json: bool = False
    backend: str = "jit"
    libs: list[str] = field(default_factory=list)
    libdirs: list[str] = field(default_factory=list)
    program_args: list[str] = field(default_factory=list)
    safe: bool = False
    cache: bool = True
    target: Target = HOST
    backend_given: bool = False
    check: bool = False  # `fmt --check`


def safe_from_env() -> bool:
    """``CANCHO_SAFE=1`` (or true/yes/on): compiler/policy.py's, kept here for callers."""
    from .compiler.policy import safe_from_env as from_env

    return from_env()


def parse_args(command: str, args: Sequence[str]) -> Invocation:
    """Parse one command's arguments; options a command does not take are unknown options."""
    inv = Invocation(command, safe=safe_from_env())
    try:
        cpu.choice()
    except cpu.CpuError as exc:
        raise environment(f"cancho: {exc}") from None
    build, run = command == "build", command == "run"
    it = iter(args)

    def value(flag: str, what: str) -> str:
        try:
            return next(it)
        except StopIteration:
            raise usage(f"`{flag}` needs {what}") from None

    for arg in it:
        if arg == "-o" and build:
            inv.output = value("-o", "a path")
        elif arg == "--emit" and build:
            kind = value("--emit", "a kind")
            if kind not in ("exe", "obj"):
                raise usage(f"unknown emit kind `{kind}`")
            inv.emit = kind
        elif arg == "--std":
            inv.std = True
        elif arg == "--safe" and (build or run):
            inv.safe = True
        elif arg == "--no-cache" and (build or run):
            inv.cache = False
        elif arg == "--output" and command in ("check", "authority"):
            form = value("--output", "a form")
            if form != "json":
                raise usage(f"unknown output form `{form}`")
            inv.json = True
        elif arg == "--backend" and command not in ("fmt", "print"):
            name = value("--backend", "a name")
            if name == "cranelift":
                raise usage(CRANELIFT)
            if name not in (("jit", "exe", "llvm") if run else ("llvm",)):
                raise usage(f"unknown backend `{name}`" + ("" if run else f"; `{command}` takes `--backend llvm`"))
            if run:
                inv.backend, inv.backend_given = ("exe" if name == "llvm" else name), True
        elif arg == "--check" and command == "fmt":
            inv.check = True
        elif arg == "--target" and command in ("build", "check", "run", "ir", "asm", "authority"):
            inv.target = _target(value("--target", "a target triple"))
        elif arg == "-l" and (build or run):
            inv.libs.append(value("-l", "a library name"))
        elif arg == "-L" and (build or run):
            inv.libdirs.append(value("-L", "a path"))
        elif arg == "--" and run:
            inv.program_args = list(it)
        elif arg.startswith("-") and arg != "-":
            raise usage(f"unknown option `{arg}`")
        else:
            inv.inputs.append(arg)
    if not inv.inputs:
        raise usage("no input file given")
    if inv.target.is_wasi and (inv.libs or inv.libdirs):
        raise usage(f"`{'-l' if inv.libs else '-L'}` names a host library, which a "
                    f"`{inv.target.name}` module cannot link")
    if inv.target.is_wasi and inv.safe and run:
        raise usage(f"`run --target {inv.target.name}` is refused in safe mode: its limits and "
                    "confinement are the host's, not yet applied to a WASI runtime")
    if inv.target.is_wasi and inv.backend_given:
        raise usage(f"`--backend` chooses how the host runs a program; `--target "
                    f"{inv.target.name}` builds a WebAssembly module, which a WASI runtime runs")
    if inv.safe and (inv.libs or inv.libdirs):
        from .compiler.policy import library_refusal

        why = library_refusal("-l" if inv.libs else "-L")
        if why is not None:
            raise usage(why)
    return inv


def _target(name: str) -> Target:
    """The target a ``--target`` value names (``compiler/target.py``); anything else is usage."""
    from .compiler.backends import native
    from .compiler.target import UnknownTarget, parse_target

    try:
        return parse_target(name, native.host_triple())
    except UnknownTarget as exc:
        raise usage(str(exc)) from None


def default_output(first_input: str, emit: str, target: Target = HOST) -> str:
    stem = Path(first_input).stem
    if emit == "obj":
        return f"{stem}.o"
    return f"{stem}.wasm" if target.is_wasi else stem


# ---------------------------------------------------------------------------------------------
# compiling


def _internal(inv: Invocation, what: str, exc: BaseException | str) -> Diagnostic:
    detail = exc if isinstance(exc, str) else f"{type(exc).__name__}: {exc}"
    return Diagnostic(
        Rule.INTERNAL,
        f"the compiler failed {what}; this is a bug in cancho, not in the program ({detail})",
        None, file_hint=inv.inputs[0])


@dataclass(frozen=True)
class Loaded:
    """The program's sources, or the refusals that stand in for them."""

    sources: list[SourceFile]
    diagnostics: list[Diagnostic]


@dataclass(frozen=True)
class Compiled:
    """The program's IR text, or the refusals (then ``ir`` is None)."""

    ir: str | None
    diagnostics: list[Diagnostic]
    traps: TrapTable = field(default_factory=TrapTable)


def _load(inv: Invocation) -> Loaded:
    """The program's sources, or (in json mode) a program-level refusal for unreadable input."""
    try:
        return Loaded(api.load_sources(inv.inputs), [])
    except OSError as exc:
        name = exc.filename if exc.filename is not None else inv.inputs[0]
        message = f"cannot read `{name}`: {os_error_text(exc)}"
        if inv.json:
            return Loaded([], [Diagnostic(Rule.PROGRAM_SHAPE, message, None)])
        raise environment(message) from None
    except Exception as exc:  # noqa: BLE001 - never a traceback
        return Loaded([], [_internal(inv, "to read the program", exc)])


# -- safe mode -----------------------------------------------------------------------------------

SAFE_RULE = "unsafe-in-safe-mode"


def safe_mode_refusals(program) -> list[Diagnostic]:
    """Safe mode's refusals of an accepted program (compiler/policy.py)."""
    from .compiler.policy import safe_mode_refusals as refusals

    return refusals(program)


def _compile(inv: Invocation) -> Compiled:
    """IR text, or the refusals (every compiler failure of ours is rule `internal`). With the
    build cache, an unchanged program's IR comes from it (only accepted programs are kept)."""
    loaded = _load(inv)
    if loaded.diagnostics:
        return Compiled(None, loaded.diagnostics)
    sources = loaded.sources
    cache, key = _ir_cache(inv), None
    if cache is not None:
        from .compiler.cache import Artefact, sources_key

        key = sources_key([(s.path, s.text.encode("utf-8", "surrogateescape")) for s in sources],
                          inv.safe)
        cached = cache.get(key, Artefact.IR)
        if cached is not None:
            ir, traps = split_trap_trailer(cached.decode("utf-8"))
            return Compiled(ir, [], traps)
    try:
        # The host's call is the one it always was (a compiler put in place of it at run time,
        # such as a test double, is called as before).
        result = (api.compile_sources(sources, target=inv.target) if inv.target.is_wasi
                  else api.compile_sources(sources))
    except Exception as exc:  # noqa: BLE001 - never a traceback
        return Compiled(None, [_internal(inv, "to compile", exc)])
    if result.diagnostics:
        return Compiled(None, list(result.diagnostics))
    if result.ir is None:
        return Compiled(None, [_internal(inv, "to generate code", "no IR was produced")])
    if inv.safe:
        refusals = safe_mode_refusals(result.program)
        if refusals:
            return Compiled(None, refusals)
    traps = getattr(result, "traps", None) or TrapTable()
    if cache is not None and key is not None:
        cache.put(key, Artefact.IR, with_trap_trailer(result.ir, traps).encode("utf-8"))
    return Compiled(result.ir, [], traps)


def _build_cache(inv: Invocation):
    """The user's build cache for `build` and `run`, unless ``--no-cache``."""
    if not inv.cache or inv.command not in ("build", "run") or inv.target.is_wasi:
        return None  # the cache keys describe host builds only
    from .compiler.cache import BuildCache

    return BuildCache.from_env()


def _ir_cache(inv: Invocation):
    """The build cache for IR keyed by sources: only while ``api.compile_sources`` is the
    compiler the fingerprint describes (a compiler put in its place at run time, such as a test
    double, is not described by it, so its output is never kept or reused)."""
    if getattr(api.compile_sources, "__module__", None) != api.__name__:
        return None
    return _build_cache(inv)


def _backend(inv: Invocation, step):
    """Run one backend step (``compiler/run.py``): our bugs become an `internal` refusal, the
    environment's failures (no linker, unwritable output) exit 3."""
    from .compiler.run import failures_mapped

    try:
        with failures_mapped():
            return step()
    except RunFailed as exc:
        if exc.kind is FailureKind.ENVIRONMENT:
            raise environment(exc.message) from None
        raise _Refused([_internal(inv, "to generate code", exc.detail)]) from None
    except (Failure, _Refused, OSError):
        raise
    except Exception as exc:  # noqa: BLE001 - never a traceback
        raise _Refused([_internal(inv, "to generate code", exc)]) from None


def _refuse(diags: list[Diagnostic]) -> int:
    if sys.stderr is not None:
        sys.stderr.write(render_text(diags, color=_isatty(sys.stderr)))
    return EXIT_REFUSED


def _isatty(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _compiled_or_refused(inv: Invocation) -> str:
    return _compiled_program(inv).ir


def _compiled_program(inv: Invocation) -> Compiled:
    compiled = _compile(inv)
    if compiled.diagnostics:
        raise _Refused(compiled.diagnostics)
    assert compiled.ir is not None
    return compiled


class _Refused(Exception):
    def __init__(self, diags: list[Diagnostic]) -> None:
        super().__init__(len(diags))
        self.diags = diags


# ---------------------------------------------------------------------------------------------
# commands


def cmd_check(inv: Invocation) -> int:
    """Check only: the front end's verdict, with no code generated (lowering and LLVM are most
    of a build's time, and every refusal a user can cause is the checker's; a failure of ours
    in code generation is `build`'s to report, as rule `internal`)."""
    diags = _checked(inv)
    if inv.json:
        _write_stdout(render_json(diags))
        return EXIT_REFUSED if diags else EXIT_OK
    return _refuse(diags) if diags else EXIT_OK


def _checked(inv: Invocation) -> list[Diagnostic]:
    """The program's refusals (safe mode's included), from the checker alone."""
    loaded = _load(inv)
    if loaded.diagnostics:
        return loaded.diagnostics
    try:
        result = api.check_sources(loaded.sources, target=inv.target)
    except Exception as exc:  # noqa: BLE001 - never a traceback
        return [_internal(inv, "to check", exc)]
    if result.diagnostics:
        return list(result.diagnostics)
    return safe_mode_refusals(result.program) if inv.safe else []


def cmd_authority(inv: Invocation) -> int:
    """The authority report (docs/authority-report.md); a refused program fails like `check` in
    text mode, whatever the output form."""
    from .compiler.authority import authority_report

    loaded = _load(inv)
    if loaded.diagnostics:
        return _refuse(loaded.diagnostics)
    try:
        result = api.compile_sources(loaded.sources, target=inv.target)
        diags = list(result.diagnostics)
        report = None if diags else authority_report(result.program)
    except Exception as exc:  # noqa: BLE001 - never a traceback
        diags = [_internal(inv, "to compute the authority report", exc)]
    if diags:
        return _refuse(diags)
    if inv.target.is_wasi:  # what the module imports: built with the WASI toolchain
        from .compiler.authority import with_wasi_imports
        from .compiler.backends import wasm

        imports = _backend(inv, lambda: wasm.imports_of_ir(result.ir))
        report = with_wasi_imports(report, inv.target.name, imports)
    _write_stdout(report.to_json() if inv.json else report.text())
    return EXIT_OK


def cmd_build(inv: Invocation) -> int:
    from .compiler.run import Backend, build, build_object

    ir = _compiled_or_refused(inv)
    out = inv.output or default_output(inv.inputs[0], inv.emit, inv.target)
    if inv.target.is_wasi:
        from .compiler.backends import wasm

        _backend(inv, lambda: (wasm.write_wasm_object if inv.emit == "obj" else wasm.build_wasm)(ir, out))
        return EXIT_OK
    cache = _build_cache(inv)
    if inv.emit == "obj":
        _backend(inv, lambda: build_object(ir, out, cache))
    else:
        _backend(inv, lambda: build(ir, Backend.EXE, out, libs=inv.libs, libdirs=inv.libdirs,
                                    cache=cache))
    return EXIT_OK


def _run_limits(inv: Invocation):
    """`run` inherits the terminal and has no wall-clock limit; safe mode adds the default
    memory, CPU-time, process and file-size limits and runs the program in the sandbox with the
    working directory its only writable place (compiler/policy.py, as the kernel does; a
    warning where this machine lacks the sandbox or Landlock)."""
    from .compiler import policy
    from .compiler.backends.process import DEFAULT_RUN_LIMITS, SAFE_CAPS, RunLimits

    if not inv.safe:
        return RunLimits(timeout=None, max_output=None)
    plan = policy.plan_for(os.getcwd())
    if plan.warning and sys.stderr is not None:  # say so, keep the other safe-mode refusals
        sys.stderr.write("cancho: " + plan.warning)
    d = DEFAULT_RUN_LIMITS
    return RunLimits(timeout=None, max_output=None, memory=d.memory, cpu_seconds=d.cpu_seconds,
                     processes=d.processes, fsize=SAFE_CAPS.fsize, confine=plan.confine,
                     sandbox=plan.sandbox)


def cmd_run(inv: Invocation) -> int:
    from .compiler.backends.process import remove_stale_dirs, signal_name
    from .compiler.run import run_inherit

    remove_stale_dirs()  # what an earlier `run` killed by SIGKILL left
    compiled = _compiled_program(inv)
    ir = compiled.ir
    if inv.target.is_wasi:
        return _run_wasm(inv, ir, compiled.traps)
    limits = _run_limits(inv)
    # A sandboxed run starts as an executable (the JIT in this process has no sandbox; the same
    # bytes either way, kernel.md §2.2).
    backend = "exe" if limits.sandbox is not None else inv.backend
    ended = _backend(inv, lambda: run_inherit(
        ir, backend, default_output(inv.inputs[0], "exe"), inv.program_args, libs=inv.libs,
        libdirs=inv.libdirs, limits=limits, cache=_build_cache(inv)))
    if ended.signal is not None:
        site = compiled.traps.get(ended.trap_site) if ended.signal == signal.SIGILL else None
        located = site.render() + "\n" if site is not None else ""
        raise environment(f"{located}cancho: the program was killed by signal {ended.signal} "
                          f"({signal_name(ended.signal)})")
    return ended.exit_status if ended.exit_status is not None else EXIT_ENVIRONMENT


def _run_wasm(inv: Invocation, ir: str, traps: TrapTable | None = None) -> int:
    """`run --target wasm32-wasip1`: build the module in a temporary directory and run it with
    the WASI runtime (``backends/wasm.py``); the program's own status, 134 for a trap."""
    import tempfile

    from .compiler.backends import wasm

    if not wasm.runtime_available():  # said before building, as a missing linker would be
        raise environment(f"cannot run a `{inv.target.name}` module: no WASI runtime; "
                          f"{wasm.RUNTIME_HINT}")
    name = default_output(inv.inputs[0], "exe")
    with tempfile.TemporaryDirectory(prefix="cancho-run-wasm-") as tmp:
        module = Path(tmp) / f"{name}.wasm"
        _backend(inv, lambda: wasm.build_wasm(ir, module))
        flush_python_streams()
        status, number = _backend(inv, lambda: wasm.run_wasm_located(module, inv.program_args, name))
        site = traps.get(number) if traps is not None else None
        if site is not None and sys.stderr is not None:
            sys.stderr.write(site.render() + "\n")
        return status


def cmd_ir(inv: Invocation) -> int:
    from .compiler.backends import native

    return _print_backend_text(inv, lambda ir: native.optimized_ir(ir, inv.target))


def cmd_asm(inv: Invocation) -> int:
    from .compiler.backends import native

    return _print_backend_text(inv, lambda ir: native.emit_asm(ir, inv.target))


def _print_backend_text(inv: Invocation, render) -> int:
    """Compile, turn the IR into text with `render` (optimized IR, assembly), print it."""
    ir = _compiled_or_refused(inv)
    _write_stdout(_backend(inv, lambda: render(ir)))
    return EXIT_OK


def _write_stdout(text: str) -> None:
    if sys.stdout is None:  # started with stdout closed
        raise environment("cannot write to stdout: Bad file descriptor (os error 9)")
    sys.stdout.write(text)
    sys.stdout.flush()


def _version() -> str:
    from .compiler.backends import native

    return f"cancho {__version__} (host {native.host_triple()})"


def command_usage(command: str) -> str:
    """One command's usage (`cancho SUB --help`): its lines of USAGE, then where the rest is."""
    if command == "test":
        from .testing import USAGE as TEST_USAGE

        return TEST_USAGE
    lines = [line for line in USAGE.splitlines() if line.split()[:2] == ["cancho", command]]
    return "usage:\n" + "\n".join(lines) + "\n\n`cancho --help` describes every option.\n"


def run(args: Sequence[str]) -> int:
    """Dispatch one command line (without the program name)."""
    if not args:
        raise usage("no command given")
    command, rest = args[0], args[1:]
    if command in ("--version", "-V"):
        _write_stdout(_version() + "\n")
        return EXIT_OK
    if command in ("-h", "--help", "help"):
        _write_stdout(USAGE)
        return EXIT_OK
    if command not in COMMANDS:
        raise usage(f"unknown command `{command}`")
    if any(a in ("-h", "--help") for a in rest[: rest.index("--") if "--" in rest else len(rest)]):
        _write_stdout(command_usage(command))
        return EXIT_OK
    if command == "test":
        from .testing import main_test  # the test runner owns its own options

        if "cranelift" in rest and rest[rest.index("cranelift") - 1] == "--backend":
            raise usage(CRANELIFT)
        return main_test(list(rest))
    inv = parse_args(command, rest)
    if command in ("fmt", "ids", "layout", "print"):
        from . import tools_cli

        if command == "fmt":
            return tools_cli.cmd_fmt(inv.inputs, inv.check)
        if command == "print":
            if len(inv.inputs) != 1:
                raise usage("`print` renders one file at a time")
            return tools_cli.cmd_print(inv.inputs[0])
        return (tools_cli.cmd_ids if command == "ids" else tools_cli.cmd_layout)(inv.inputs)
    handler = {"build": cmd_build, "check": cmd_check, "run": cmd_run, "ir": cmd_ir,
               "asm": cmd_asm, "authority": cmd_authority}[command]
    try:
        return handler(inv)
    except _Refused as refused:
        return _refuse(refused.diags)


class Terminated(BaseException):
    """SIGTERM or SIGHUP arrived: unwind through every ``finally`` (the program is killed, temporary
    files go), then die by the same signal (:func:`main`)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@contextmanager
def signals_unwind() -> Iterator[None]:
    """Turn the first SIGTERM/SIGHUP into :class:`Terminated` in the main thread; later ones
    are ignored so the cleanup the first one started is not cut short."""
    fired = False

    def handler(signum: int, frame) -> None:
        nonlocal fired
        if fired:
            return
        fired = True
        raise Terminated(signum)

    try:
        saved = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGHUP)}
    except ValueError:  # not the main thread (an embedding caller): nothing to install
        yield
        return
    try:
        yield
    finally:
        for s, old in saved.items():
            signal.signal(s, old)


def die_by(signum: int) -> int:
    """End this process by ``signum`` with its default action, as if it had never been caught
    (so a parent sees the death it sent); 128+signum if that somehow returns."""
    flush_python_streams()
    signal.signal(signum, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signum])
    os.kill(os.getpid(), signum)
    return 128 + signum


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `cancho` console script; returns the exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        with signals_unwind():
            return run(args)
    except Terminated as t:
        return die_by(t.signum)
    except Failure as failure:
        if sys.stderr is not None:
            sys.stderr.write(failure.message if failure.message.endswith("\n")
                             else failure.message + "\n")
        return failure.code
    except BrokenPipeError:
        # The reader of our stdout left (`cancho ir x.cho | head`): their business, not an error.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return EXIT_OK
    except KeyboardInterrupt:
        return 128 + signal.SIGINT


if __name__ == "__main__":
    sys.exit(main())
