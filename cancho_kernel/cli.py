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
is safe mode for shared servers: `-l`/`-L` are refused, a program whose authority is unbounded
(a reachable `extern fn`) is refused under `unsafe-in-safe-mode`, and `run` gets the default
limits (memory, CPU time, processes; docs/decisions.md).
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from . import __version__
from .compiler import api
from .compiler.diagnostics import CompileError, Diagnostic, render_json, render_text

EXIT_OK, EXIT_REFUSED, EXIT_USAGE, EXIT_ENVIRONMENT = 0, 1, 2, 3

USAGE = """\
cancho — a compiler for the cancho systems language (llvmlite backends)

usage:
    cancho build <file.cho>... [-o <output>] [--emit exe|obj] [--std] [--safe] [-l <name>]... [-L <path>]...
    cancho check <file.cho>... [--std] [--output json]
    cancho run   <file.cho>... [--backend jit|exe] [--std] [--safe] [-l <name>]... [-L <path>]... [-- <arg>...]
    cancho ir    <file.cho>... [--std]
    cancho asm   <file.cho>... [--std]
    cancho authority <file.cho>... [--std] [--output json]
    cancho test  <file.cho>... [--std] [--backend jit|exe] [--safe]
    cancho --version
    cancho -h | --help

options:
    -o <output>       where `build` writes (default: the first input's stem, `.o` for obj)
    --emit exe|obj    `build` a linked executable (default) or a bare object file
    --std             make the standard library's source available
    --output json     `check`/`authority` answer as data on stdout rather than prose
    --backend jit|exe `run` through MCJIT in this process (default) or a linked executable
    -l <name>         link `lib<name>` (`build`/`run` only); repeatable, passed to `cc`
    -L <path>         add a library search path (`build`/`run` only); repeatable
    --safe            safe mode (also CANCHO_SAFE=1): refuse -l/-L and programs that reach
                      foreign code (`unsafe-in-safe-mode`); `run` gets the default limits
    -- <arg>...       `run`: everything after `--` is the program's command line

A program is the set of files named, in any order. `check` also generates code and discards
it, so a program it accepts is one `build` can compile.

A refusal is `path:line:col: error: <message> [<rule-tag>]` on stderr, then the source line
and a caret; `check --output json` gives the same refusals as data. See docs/cli.md, and
docs/authority-report.md for what `authority` prints.

exit status: 0 success, 1 refused, 2 usage, 3 environment; `run` exits with the program's own
status, or 3 if the program was killed by a signal (a trap is signal 4, SIGILL).
"""

COMMANDS = ("build", "check", "run", "ir", "asm", "authority", "test")


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


def safe_from_env() -> bool:
    """``CANCHO_SAFE=1`` (or true/yes/on) turns safe mode on for the CLI and the kernel."""
    return os.environ.get("CANCHO_SAFE", "").strip().lower() in ("1", "true", "yes", "on")


def parse_args(command: str, args: Sequence[str]) -> Invocation:
    """Parse one command's arguments; options a command does not take are unknown options."""
    inv = Invocation(command, safe=safe_from_env())
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
        elif arg == "--output" and command in ("check", "authority"):
            form = value("--output", "a form")
            if form != "json":
                raise usage(f"unknown output form `{form}`")
            inv.json = True
        elif arg == "--backend" and run:
            name = value("--backend", "a name")
            if name not in ("jit", "exe"):
                raise usage(f"unknown backend `{name}`")
            inv.backend = name
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
    if inv.safe and (inv.libs or inv.libdirs):
        flag = "-l" if inv.libs else "-L"
        raise usage(f"`{flag}` is refused in safe mode: a linked library is foreign code whose "
                    "authority nothing bounds")
    return inv


def default_output(first_input: str, emit: str) -> str:
    stem = Path(first_input).stem
    return f"{stem}.o" if emit == "obj" else stem


# ---------------------------------------------------------------------------------------------
# compiling


def _os_error_text(exc: OSError) -> str:
    """An OS error the way the reference (Rust) prints it: `No such file (os error 2)`."""
    if exc.errno is not None and exc.strerror:
        return f"{exc.strerror} (os error {exc.errno})"
    return str(exc)


def _internal(inv: Invocation, what: str, exc: BaseException | str) -> Diagnostic:
    detail = exc if isinstance(exc, str) else f"{type(exc).__name__}: {exc}"
    return Diagnostic(
        "internal",
        f"the compiler failed {what}; this is a bug in cancho, not in the program ({detail})",
        None, file_hint=inv.inputs[0])


def _load(inv: Invocation) -> tuple[list, list[Diagnostic]]:
    """The program's sources, or (in json mode) a program-level refusal for unreadable input."""
    try:
        return api.load_sources(inv.inputs, std=inv.std), []
    except OSError as exc:
        name = exc.filename if exc.filename is not None else inv.inputs[0]
        message = f"cannot read `{name}`: {_os_error_text(exc)}"
        if inv.json:
            return [], [Diagnostic("program-shape", message, None)]
        raise environment(message) from None
    except Exception as exc:  # noqa: BLE001 - never a traceback
        return [], [_internal(inv, "to read the program", exc)]


# -- safe mode -----------------------------------------------------------------------------------

SAFE_RULE = "unsafe-in-safe-mode"
SAFE_EXPLANATION = ("Safe mode runs only programs whose authority report is bounded: a reachable "
                    "`extern fn` is foreign code, and what it does is the library's, not the "
                    "language's (docs/decisions.md).")


@dataclass
class SafetyDiagnostic(Diagnostic):
    """A safe-mode refusal. Safe mode is a policy of the host (CLI, kernel), not a rule of the
    language, so its tag is not in the compiler's rule table; it renders like any refusal."""

    def __post_init__(self) -> None:
        if not self.explanation:
            self.explanation = SAFE_EXPLANATION


def safe_mode_refusals(program) -> list[Diagnostic]:
    """One refusal per reachable foreign symbol of an accepted program, at its `extern fn`
    declaration: the reference's supervisor check ``unbounded_by ⊆ granted`` with nothing
    granted (docs/authority-report.md). A declaration nothing calls is not reach."""
    from .compiler.authority import authority_report

    report = authority_report(program)
    if report.bounded:
        return []
    by_symbol = {ref.name: ref for ref in program.externs.values()}
    out: list[Diagnostic] = []
    for entry in report.unbounded_by:
        scope, _, symbol = entry.partition(":")
        ref = by_symbol.get(symbol)
        span = getattr(getattr(ref, "decl", None), "name", None)
        out.append(SafetyDiagnostic(
            SAFE_RULE,
            f"safe mode refuses foreign code: `{symbol}` (declared in `{scope}`) is reachable "
            "from `main`, and nothing bounds what it does",
            getattr(span, "span", None)))
    return out


def _compile(inv: Invocation) -> tuple[str | None, list[Diagnostic]]:
    """IR text, or the refusals (every compiler failure of ours is rule `internal`)."""
    sources, diags = _load(inv)
    if diags:
        return None, diags
    try:
        result = api.compile_sources(sources)
    except CompileError as exc:
        return None, list(exc.diagnostics) or [_internal(inv, "to compile", exc)]
    except Exception as exc:  # noqa: BLE001 - never a traceback
        return None, [_internal(inv, "to compile", exc)]
    if result.diagnostics:
        return None, list(result.diagnostics)
    if result.ir is None:
        return None, [_internal(inv, "to generate code", "no IR was produced")]
    if inv.safe:
        refusals = safe_mode_refusals(result.program)
        if refusals:
            return None, refusals
    return result.ir, []


def _backend_step(inv: Invocation, step):
    """Run one backend step; our IR bugs are `internal` refusals, a missing linker exit 3."""
    from .compiler.backends import native
    from .compiler.backends.exe import LinkError

    try:
        return step(), []
    except native.InvalidIR as exc:
        return None, [_internal(inv, "to generate code", str(exc))]
    except LinkError as exc:
        raise environment(str(exc)) from None
    except Failure:
        raise
    except OSError:
        raise
    except Exception as exc:  # noqa: BLE001 - never a traceback
        return None, [_internal(inv, "to generate code", exc)]


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
    ir, diags = _compile(inv)
    if diags:
        raise _Refused(diags)
    assert ir is not None
    return ir


class _Refused(Exception):
    def __init__(self, diags: list[Diagnostic]) -> None:
        super().__init__(len(diags))
        self.diags = diags


# ---------------------------------------------------------------------------------------------
# commands


def cmd_check(inv: Invocation) -> int:
    from .compiler.backends import native

    ir, diags = _compile(inv)
    if ir is not None:  # like the reference, generate the object and discard it
        _, diags = _backend_step(inv, lambda: native.emit_object(ir))
    if inv.json:
        _write_stdout(render_json(diags))
        return EXIT_REFUSED if diags else EXIT_OK
    return _refuse(diags) if diags else EXIT_OK


def cmd_authority(inv: Invocation) -> int:
    """The authority report (docs/authority-report.md); a refused program fails like `check` in
    text mode, whatever the output form."""
    from .compiler.authority import authority_report

    sources, diags = _load(inv)
    if diags:
        return _refuse(diags)
    try:
        result = api.compile_sources(sources)
        diags = list(result.diagnostics)
        report = None if diags else authority_report(result.program)
    except CompileError as exc:
        diags = list(exc.diagnostics) or [_internal(inv, "to compile", exc)]
    except Exception as exc:  # noqa: BLE001 - never a traceback
        diags = [_internal(inv, "to compute the authority report", exc)]
    if diags:
        return _refuse(diags)
    _write_stdout(report.to_json() if inv.json else report.text())
    return EXIT_OK


def cmd_build(inv: Invocation) -> int:
    from .compiler.backends import exe

    ir = _compiled_or_refused(inv)
    out = inv.output or default_output(inv.inputs[0], inv.emit)
    try:
        if inv.emit == "obj":
            _, diags = _backend_step(inv, lambda: exe.write_object(ir, out))
        else:
            _, diags = _backend_step(
                inv, lambda: exe.build_executable(ir, out, inv.libs, inv.libdirs))
    except OSError as exc:
        raise environment(f"cannot write `{out}`: {_os_error_text(exc)}") from None
    return _refuse(diags) if diags else EXIT_OK


def _run_limits(inv: Invocation):
    """`run` inherits the terminal and has no wall-clock limit; safe mode adds the default
    memory, CPU-time and process limits."""
    from .compiler.backends.process import DEFAULT_RUN_LIMITS, RunLimits

    if not inv.safe:
        return RunLimits(timeout=None, max_output=None)
    d = DEFAULT_RUN_LIMITS
    return RunLimits(timeout=None, max_output=None, memory=d.memory, cpu_seconds=d.cpu_seconds,
                     processes=d.processes)


def cmd_run(inv: Invocation) -> int:
    from .compiler.backends.process import remove_stale_dirs

    remove_stale_dirs()  # what an earlier `run` killed by SIGKILL left
    ir = _compiled_or_refused(inv)
    run_dir = Path(tempfile.gettempdir()) / f"cancho-run-{os.getpid()}"
    exe_path = run_dir / default_output(inv.inputs[0], "exe")
    argv = [str(exe_path), *inv.program_args]  # the same argv[0] on both backends
    if inv.backend == "jit":
        from .compiler.backends.jit import run_jit_inherit

        status, diags = _backend_step(
            inv, lambda: run_jit_inherit(ir, argv, inv.libs, inv.libdirs, _run_limits(inv)))
        if diags:
            return _refuse(diags)
        exit_status = os.WEXITSTATUS(status) if os.WIFEXITED(status) else None
        sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
    else:
        exit_status, sig = _run_exe(inv, ir, run_dir, exe_path, argv)
    if sig is not None:
        from .compiler.backends.process import signal_name

        raise environment(f"cancho: the program was killed by signal {sig} ({signal_name(sig)})")
    return exit_status if exit_status is not None else EXIT_ENVIRONMENT


def _run_exe(inv: Invocation, ir: str, run_dir: Path, exe_path: Path,
             argv: list[str]) -> tuple[int | None, int | None]:
    from .compiler.backends import exe
    from .compiler.backends.process import StdoutTarget, run_executable

    try:
        try:
            run_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise environment(f"cannot create `{run_dir}`: {_os_error_text(exc)}") from None
        try:
            _, diags = _backend_step(
                inv, lambda: exe.build_executable(ir, exe_path, inv.libs, inv.libdirs))
        except OSError as exc:
            raise environment(f"cannot write `{exe_path}`: {_os_error_text(exc)}") from None
        if diags:
            raise _Refused(diags)
        _flush_python_streams()
        # A Ctrl-C belongs to the program (same process group); we only report its death.
        saved = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGQUIT)}
        try:
            # The launcher deletes the binary and its directory once it runs, so not even a
            # SIGKILL of this process leaves them behind.
            result = run_executable(exe_path, argv, b"", StdoutTarget.inherit(),
                                    _run_limits(inv), remove_after_start=True)
        except OSError as exc:
            raise environment(f"cannot run `{exe_path}`: {_os_error_text(exc)}") from None
        finally:
            for s, handler in saved.items():
                signal.signal(s, handler)
        return result.exit_status, result.signal
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


def cmd_ir(inv: Invocation) -> int:
    from .compiler.backends import native

    return _print_backend_text(inv, native.optimized_ir)


def cmd_asm(inv: Invocation) -> int:
    from .compiler.backends import native

    return _print_backend_text(inv, native.emit_asm)


def _print_backend_text(inv: Invocation, render) -> int:
    """Compile, turn the IR into text with `render` (optimized IR, assembly), print it."""
    ir = _compiled_or_refused(inv)
    text, diags = _backend_step(inv, lambda: render(ir))
    if diags:
        return _refuse(diags)
    _write_stdout(text)
    return EXIT_OK


def _write_stdout(text: str) -> None:
    if sys.stdout is None:  # started with stdout closed
        raise environment("cannot write to stdout: Bad file descriptor (os error 9)")
    sys.stdout.write(text)
    sys.stdout.flush()


def _flush_python_streams() -> None:
    """Before a child writes to the same descriptors (either may be closed, i.e. None)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            pass


def _version() -> str:
    from .compiler.backends import native

    return f"cancho {__version__} (host {native.host_triple()})"


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
    if command == "test":
        from .testing import main_test  # the test runner owns its own options

        return main_test(list(rest))
    inv = parse_args(command, rest)
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
    _flush_python_streams()
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
