"""One way to run a program: choose the backend, build, run, and turn what can go wrong into a
typed failure. Used by the CLI (`build`, `run`), `cancho test`, the kernel's runner and the bench.

* :func:`build` makes a :class:`Built` program: on ``jit`` the IR text itself (MCJIT compiles it
  when it runs), on ``exe`` a linked executable, through the on-disk :class:`BuildCache` when one
  is given (an unchanged program is not compiled or linked again).
* :func:`run_built` runs a built program once under the shared run model
  (``backends/process.py``); :func:`run_program` builds into a temporary directory and runs.
* :func:`run_inherit` is the CLI's ``run``: the program inherits the terminal.
* :func:`interruptible` is the one helper-thread wait of the kernel and the bench: an interrupt
  (``KeyboardInterrupt`` in the waiting thread) sets the run's cancel event.

Every backend failure becomes :class:`RunFailed` with a :class:`FailureKind`: ``internal`` (our
bug: LLVM refused the IR, the JIT worker died) or ``environment`` (no linker, a library that does
not resolve, a file that cannot be written or run).
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Generic, TypeVar

from .diagnostics import Rule

if TYPE_CHECKING:  # the backends load LLVM; a warm cached build never needs them
    from .backends.jit import JitWorker
    from .backends.live import LiveRun
    from .backends.process import RunLimits, RunResult, StdoutTarget
    from .cache import BuildCache

T = TypeVar("T")


class Backend(StrEnum):
    """How a program runs: MCJIT in a worker (``jit``) or a linked executable (``exe``)."""

    JIT = "jit"
    EXE = "exe"


BACKENDS: tuple[str, ...] = tuple(b.value for b in Backend)


class FailureKind(StrEnum):
    """Whose fault a failure to build or start a program is."""

    INTERNAL = Rule.INTERNAL.value
    ENVIRONMENT = "environment"


class RunFailed(Exception):
    """The program could not be built or started. ``message`` is for a user; ``detail`` is the
    underlying error's own text (the CLI quotes it inside its `internal` diagnostic)."""

    def __init__(self, kind: FailureKind, message: str, detail: str | None = None) -> None:
        super().__init__(message)
        self.kind = FailureKind(kind)
        self.message = message
        self.detail = detail if detail is not None else message


def os_error_text(exc: OSError) -> str:
    """An OS error the way the reference (Rust) prints it: `No such file (os error 2)`."""
    if exc.errno is not None and exc.strerror:
        return f"{exc.strerror} (os error {exc.errno})"
    return str(exc)


@contextmanager
def failures_mapped(os_error: Callable[[OSError], str] | None = None) -> Iterator[None]:
    """Turn the backends' exceptions into :class:`RunFailed`; an ``OSError`` too when
    ``os_error`` says how to word it (else it propagates). The backends are looked at only when
    something was raised, so a build the cache answers never loads LLVM."""
    try:
        yield
    except Exception as e:
        failure = _failure_of(e, os_error)
        if failure is None:
            raise
        raise failure from None


def _failure_of(e: Exception, os_error: Callable[[OSError], str] | None) -> RunFailed | None:
    from .backends import native
    from .backends.exe import LinkError
    from .backends.jit import JitWorkerDied

    if isinstance(e, native.InvalidIR):
        return RunFailed(FailureKind.INTERNAL, f"LLVM refused the generated IR: {e}", str(e))
    if isinstance(e, LinkError):
        return RunFailed(FailureKind.ENVIRONMENT, str(e))
    if isinstance(e, JitWorkerDied):
        return RunFailed(FailureKind.INTERNAL, f"the JIT worker died: {e}", str(e))
    if isinstance(e, OSError) and os_error is not None:
        return RunFailed(FailureKind.ENVIRONMENT, os_error(e), str(e))
    return None


# -- waiting interruptibly -------------------------------------------------------------------------


@dataclass(frozen=True)
class Waited(Generic[T]):
    """What :func:`interruptible` saw: the work's value or exception, and whether an interrupt
    arrived while it ran."""

    value: T | None
    error: BaseException | None
    interrupted: bool


def start_work(work: Callable[[threading.Event], T], name: str = "cancho-run",
               then: Callable[[], None] | None = None) -> tuple[threading.Event, threading.Event, dict]:
    """Start ``work(cancel)`` in a daemon thread: answers ``cancel`` (for the waiter to set),
    ``done`` (set when the work returned or raised, then ``then()`` is called) and the box
    holding its ``value`` or ``error``. The waits of :func:`interruptible` and of the kernel's
    streamed runs (``kernel/streaming.py``) are built on it."""
    cancel, done = threading.Event(), threading.Event()
    box: dict[str, object] = {}

    def target() -> None:
        try:
            box["value"] = work(cancel)
        except BaseException as e:  # never let a helper thread die silently
            box["error"] = e
        finally:
            done.set()
            if then is not None:
                then()

    threading.Thread(target=target, name=name, daemon=True).start()
    return cancel, done, box


def interruptible(work: Callable[[threading.Event], T], name: str = "cancho-run") -> Waited[T]:
    """Run ``work(cancel)`` in a helper thread and wait for it; a ``KeyboardInterrupt`` in this
    thread sets ``cancel`` (the run model kills the program within one tick) and the wait goes
    on until the work ends, so no program outlives the wait."""
    cancel, done, box = start_work(work, name)
    interrupted = False
    # Wait on an Event, not Thread.join: a KeyboardInterrupt inside join() can leave the thread
    # looking finished while it still runs (CPython < 3.13).
    while not done.is_set():
        try:
            done.wait(0.05)
        except KeyboardInterrupt:
            interrupted = True
            cancel.set()
    return Waited(box.get("value"), box.get("error"), interrupted)  # type: ignore[arg-type]


# -- building --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Built:
    """A program ready to run. ``path`` is the executable (``exe`` only); the times are what
    this build spent in LLVM and in the linker (both 0 when the cache answered)."""

    backend: Backend
    ir: str
    libs: tuple[str, ...] = ()
    libdirs: tuple[str, ...] = ()
    path: Path | None = None
    object_seconds: float = 0.0
    link_seconds: float = 0.0
    cached: bool = False

    @property
    def build_seconds(self) -> float:
        return self.object_seconds + self.link_seconds


def write_atomically(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Write ``data`` to ``path`` through a temporary file beside it and a rename."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, mode & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def build(ir: str, backend: Backend | str, out: str | Path | None = None, *,
          libs: Sequence[str] = (), libdirs: Sequence[str] = (),
          cache: BuildCache | None = None) -> Built:
    """A runnable program from IR text; ``exe`` links into ``out`` (reusing a cached
    executable when ``cache`` has one). Raises :class:`RunFailed`."""
    backend = Backend(backend)
    libs, libdirs = tuple(libs), tuple(libdirs)
    if backend is Backend.JIT:
        return Built(backend, ir, libs, libdirs)
    assert out is not None, "an exe build needs an output path"
    path = Path(out)
    with failures_mapped(lambda e: f"cannot write `{path}`: {os_error_text(e)}"):
        from .backends import exe

        key = None
        if cache is not None:
            from .cache import Artefact, executable_key

            key = executable_key(ir, exe.linker_command(), libs, libdirs)
            data = cache.get(key, Artefact.EXECUTABLE)
            if data is not None:
                write_atomically(path, data, 0o777)
                return Built(backend, ir, libs, libdirs, path, cached=True)
        times = exe.build_executable(ir, path, libs, libdirs)
        if cache is not None and key is not None:
            cache.put(key, Artefact.EXECUTABLE, path.read_bytes())
    return Built(backend, ir, libs, libdirs, path, times.object_seconds, times.link_seconds)


def build_object(ir: str, out: str | Path, cache: BuildCache | None = None) -> None:
    """`build --emit obj`: the object file of ``ir`` at ``out``. Raises :class:`RunFailed`."""
    path = Path(out)
    with failures_mapped(lambda e: f"cannot write `{path}`: {os_error_text(e)}"):
        from .backends import native

        if cache is None:
            path.write_bytes(native.emit_object(ir))
            return
        from .cache import Artefact, object_key

        key = object_key(ir)
        data = cache.get(key, Artefact.OBJECT)
        if data is None:
            data = native.emit_object(ir)
            cache.put(key, Artefact.OBJECT, data)
        path.write_bytes(data)


# -- running ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunRequest:
    """One run of IR text: backend, streams, arguments (after ``argv[0]``) and limits."""

    ir: str
    backend: str = "jit"
    target: StdoutTarget = field(default_factory=lambda: _default_target())
    stdin: bytes = b""
    args: list[str] = field(default_factory=list)
    limits: RunLimits = field(default_factory=lambda: _default_limits())
    libs: tuple[str, ...] = ()
    libdirs: tuple[str, ...] = ()
    live: LiveRun | None = field(default=None, compare=False)  # output as it comes (backends/live.py)

    @property
    def argv(self) -> list[str]:
        return ["main", *self.args]


def _default_target() -> StdoutTarget:
    from .backends.process import StdoutTarget

    return StdoutTarget()


def _default_limits() -> RunLimits:
    from .backends.process import RunLimits

    return RunLimits()


def run_built(built: Built, argv: Sequence[str], *, worker: JitWorker | None = None,
              stdin: bytes = b"", target: StdoutTarget | None = None,
              limits: RunLimits | None = None, cancel: threading.Event | None = None,
              remove_after_start: bool = False, live: LiveRun | None = None) -> RunResult:
    """Run a built program once (``argv`` includes ``argv[0]``). ``jit`` needs the ``worker``.
    Raises :class:`RunFailed`."""
    from .backends.process import RunLimits, StdoutTarget, run_executable

    target = target or StdoutTarget()
    limits = limits or RunLimits()
    with failures_mapped(lambda e: f"cannot run the program: {e}"):
        if built.backend is Backend.JIT:
            assert worker is not None, "a jit run needs a JitWorker"
            extra = {"live": live} if live is not None else {}  # a test's stand-in may take none
            return worker.run(built.ir, argv=list(argv), stdin=stdin, target=target, limits=limits,
                              cancel=cancel, libs=built.libs, libdirs=built.libdirs, **extra)
        assert built.path is not None
        return run_executable(built.path, argv=list(argv), stdin=stdin, target=target,
                              limits=limits, cancel=cancel, remove_after_start=remove_after_start,
                              live=live)


def run_program(req: RunRequest, worker: JitWorker | None = None,
                cancel: threading.Event | None = None, cache: BuildCache | None = None) -> RunResult:
    """Build and run once. On ``exe`` the binary lives in a temporary directory that the
    launcher removes as soon as the program runs (the context removes it otherwise); the
    result's ``compile_seconds`` is the build's time. Raises :class:`RunFailed`."""
    if Backend(req.backend) is Backend.JIT:
        return run_built(build(req.ir, Backend.JIT, libs=req.libs, libdirs=req.libdirs), req.argv,
                         worker=worker, stdin=req.stdin, target=req.target, limits=req.limits,
                         cancel=cancel, live=req.live)
    from .backends.process import owned_temp_prefix

    with tempfile.TemporaryDirectory(prefix=owned_temp_prefix("cell"), ignore_cleanup_errors=True) as tmp:
        t0 = time.perf_counter()
        built = build(req.ir, Backend.EXE, Path(tmp) / "main", libs=req.libs, libdirs=req.libdirs,
                      cache=cache)
        seconds = time.perf_counter() - t0
        result = run_built(built, req.argv, stdin=req.stdin, target=req.target, limits=req.limits,
                           cancel=cancel, remove_after_start=True, live=req.live)
        result.compile_seconds = seconds
        return result


# -- the CLI's run: the terminal is the program's -----------------------------------------------


@dataclass(frozen=True)
class Ended:
    """How a program that inherited the terminal ended: an exit status or a signal."""

    exit_status: int | None
    signal: int | None
    trap_site: int | None = None  # the trap site number its supervisor read (trapreport.py)


def flush_python_streams() -> None:
    """Before a child writes to the same descriptors (either may be closed, i.e. None)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            pass


def run_inherit(ir: str, backend: Backend | str, name: str, args: Sequence[str], *,
                libs: Sequence[str] = (), libdirs: Sequence[str] = (),
                limits: RunLimits | None = None, cache: BuildCache | None = None) -> Ended:
    """Run with the terminal's stdin, stdout and stderr, as `cancho run` does. ``argv[0]`` is
    ``$TMPDIR/cancho-run-<pid>/<name>`` on both backends; on ``exe`` the binary is built there
    and the directory is gone once the program runs. A Ctrl-C belongs to the program (same
    process group): SIGINT and SIGQUIT are ignored here while it runs. Raises
    :class:`RunFailed`."""
    from .backends.process import RunLimits

    limits = limits or RunLimits(timeout=None, max_output=None)
    run_dir = Path(tempfile.gettempdir()) / f"cancho-run-{os.getpid()}"
    exe_path = run_dir / name
    argv = [str(exe_path), *args]
    if Backend(backend) is Backend.JIT:
        from .backends.jit import run_jit_inherit

        with failures_mapped():
            status = run_jit_inherit(ir, argv, libs, libdirs, limits)
        sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
        trap = None
        if sig == signal.SIGILL:
            from .backends import mcjit

            trap = mcjit.take_trap(None)
        return Ended(os.WEXITSTATUS(status) if os.WIFEXITED(status) else None, sig, trap)
    try:
        try:
            run_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RunFailed(FailureKind.ENVIRONMENT,
                            f"cannot create `{run_dir}`: {os_error_text(exc)}") from None
        built = build(ir, Backend.EXE, exe_path, libs=libs, libdirs=libdirs, cache=cache)
        return _run_exe_inherit(built, argv, limits)
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


def _run_exe_inherit(built: Built, argv: list[str], limits: RunLimits) -> Ended:
    from .backends.process import StdoutTarget, run_executable

    flush_python_streams()
    saved = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGQUIT)}
    try:
        # The launcher deletes the binary and its directory once it runs, so not even a
        # SIGKILL of this process leaves them behind.
        result = run_executable(built.path, argv, b"", StdoutTarget.inherit(), limits,
                                remove_after_start=True)
    except OSError as exc:
        raise RunFailed(FailureKind.ENVIRONMENT,
                        f"cannot run `{built.path}`: {os_error_text(exc)}") from None
    finally:
        for s, handler in saved.items():
            signal.signal(s, handler)
    return Ended(result.exit_status, result.signal, result.trap_site)
