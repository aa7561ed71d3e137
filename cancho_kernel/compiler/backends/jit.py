"""The `jit` backend: MCJIT, run so that it is indistinguishable from the `exe` backend.

Two entry points:

* :class:`JitWorker` — for the kernel (a multithreaded process that must never fork LLVM). A
  persistent single-threaded worker subprocess (``jit_worker.py``) compiles and forks one child
  per run; this side creates the child's descriptors (the same :class:`ChildStdio` the exe
  backend uses), passes them over a Unix socket and supervises the run with the shared
  :func:`process.pump`, so limits, truncation, cancel and results work identically. The
  worker runs Python isolated, and in safe mode (a run's ``RunLimits.sandbox``) inside the
  sandbox as a whole (jit_sandbox.py); it is stopped through its guard, never SIGKILLed before
  it has swept what its runs left (jit_worker.stand_guard).
* :func:`run_jit_inherit` — for the CLI, a single-threaded process: JIT in-process, fork a
  child that inherits the terminal.
"""

from __future__ import annotations

import os
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from .. import cpu
from . import sandbox as sandboxes
from .sandbox import SandboxSpec

from .exe import LinkError
from .jit_sandbox import ChildPin, release, start_sandboxed, verified_child, worker_command
from .jit_sandbox import sandboxed as sandbox_for_worker
from .jit_worker import PYTHON_CHILD_ENV, CacheBounds, CacheStats, SplitStats, recv_msg, send_msg
from .live import LiveRun
from .process import (
    ChildStdio,
    PumpOutcome,
    RunLimits,
    RunResult,
    StdoutTarget,
    become_subreaper,
    die_with_parent,
    kill_children,
    pump,
    result_from,
)


# How long the worker's guard may take to kill the worker and sweep after SIGTERM before it is
# SIGKILLed itself (it is a small sleeping process: only a stopped or wedged one takes long).
_GUARD_GRACE = 10.0


class JitWorkerDied(RuntimeError):
    """The worker process ended in the middle of a request (a compiler or LLVM crash); it is
    restarted on the next run. Callers report it as rule `internal`."""


class _WorkerRun:
    """:class:`process.ProcessControl` for one run inside the worker, driven by its messages."""

    def __init__(self, worker: "JitWorker") -> None:
        self.worker = worker
        self.started = False
        self.finished = False
        self.pid: int | None = None
        self.reply: dict | None = None
        self.error: dict | None = None
        self.compile_seconds: float | None = None
        self.compile_cached = False
        self.worker_died = False
        self.killed_worker = False

    def fileno(self) -> int | None:
        sock = self.worker._sock
        return sock.fileno() if sock is not None else None

    def on_ready(self) -> None:
        sock = self.worker._sock
        got = recv_msg(sock) if sock is not None else None
        if got is None:
            self.worker_died = self.finished = True
            self.kill()
            self.worker._discard()
            return
        msg, fds = got
        for fd in fds:
            os.close(fd)
        ev = msg.get("ev")
        if ev == "compiled":
            self.compile_seconds = msg["seconds"]
            self.compile_cached = bool(msg.get("cached"))
        elif ev == "started":
            self.pid, self.started = msg["pid"], True
        elif ev == "exited":
            self.reply, self.finished = msg, True
        elif ev == "error":
            self.error, self.finished = msg, True

    def kill(self) -> None:
        if self.pid is not None:
            self.worker._kill_run(self.pid)
        elif not self.finished:
            # Still compiling: MCJIT cannot be interrupted, the worker can (it restarts later).
            self.killed_worker = True
            self.worker._kill_process()


class JitWorker:
    """A persistent JIT worker subprocess. Thread-safe: runs are serialised.

    ``env`` adds variables to the worker's environment (tests start one with
    ``PYTHONUNBUFFERED=1``); ``python`` is the interpreter to start it with; ``cache`` bounds the
    compiled programs the worker keeps (:class:`jit_worker.ProgramCache`).
    """

    # Runs whose limits carry a confinement are confined in the child (mcjit's C child, Landlock):
    # the kernel's runner may hand them to this worker.
    confines = True

    def __init__(self, python: str = sys.executable, env: dict[str, str] | None = None,
                 cache: CacheBounds = CacheBounds(), sandbox: SandboxSpec | None = None) -> None:
        self._python = python
        self._env = env or {}
        self._cache = cache
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._sock: socket.socket | None = None
        self._child: str | None = None
        self._sandboxed = False  # whether the running worker is inside a sandbox
        self._worker_pid: int | None = None
        self._sandbox = sandbox  # the sandbox the next worker starts in (None: none)
        self._started_in: SandboxSpec | None = None  # the sandbox the running worker is in

    # -- lifecycle --------------------------------------------------------------------------

    @property
    def pid(self) -> int | None:
        """The worker's own pid, the process that compiles and forks (None until started)."""
        return self._worker_pid if self._proc is not None else None

    @property
    def guard_pid(self) -> int | None:
        """The process this side started: the worker's guard (jit_worker.stand_guard), or the
        sandbox around it (None until started)."""
        return self._proc.pid if self._proc is not None else None

    @property
    def child(self) -> str | None:
        """How the running worker starts programs: ``"c"`` (the fast C child, mcjit.py) or
        ``"python"`` (the fallback without a C compiler); None until started."""
        return self._child

    @property
    def sandboxes(self) -> bool:
        """Whether runs in a sandbox (``RunLimits.sandbox``) can be handed to this worker: it
        starts itself inside that sandbox (jit_sandbox.py), where bubblewrap works."""
        return sandboxes.available()

    def use_sandbox(self, spec: SandboxSpec | None) -> None:
        """Start the worker inside ``spec`` from now on (None: outside any sandbox); a running
        worker started otherwise is replaced at its next use."""
        self._sandbox = spec

    def start(self) -> float:
        """Start the worker if it is not running; returns the seconds it took (0 if running)."""
        with self._lock:
            return self._ensure_started()

    def _ensure_started(self) -> float:
        if (self._proc is not None and self._proc.poll() is None and self._sock is not None
                and self._started_in == self._sandbox):
            return 0.0
        self._discard()
        t0 = time.perf_counter()
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._proc = self._spawn(theirs.fileno(), self._sandbox)
        finally:
            theirs.close()
        self._sock, self._started_in = mine, self._sandbox
        self._sandboxed = self._sandbox is not None
        send_msg(mine, {"op": "ping"})
        got = recv_msg(mine)
        if got is None or got[0].get("ev") != "pong":
            self._discard()
            raise JitWorkerDied("the JIT worker did not start")
        self._child = str(got[0].get("child", "python"))
        self._worker_pid = _host_pid(self._proc.pid, int(got[0].get("pid", 0)))
        return time.perf_counter() - t0

    def _spawn(self, fd: int, spec: SandboxSpec | None) -> subprocess.Popen:
        """The worker process (its guard), given socket ``fd``: directly, or inside ``spec``
        with the C child verified here and pinned (jit_sandbox.py)."""
        env = dict(os.environ)
        env.update(self._env)
        args = [str(fd), "--cache-programs", str(self._cache.programs),
                "--cache-bytes", str(self._cache.max_bytes),
                "--retire-bytes", str(self._cache.retire_bytes)]
        child: ChildPin | None = verified_child() if env.get(PYTHON_CHILD_ENV) != "1" else None
        if child is not None:
            args += child.args()
        argv = worker_command(self._python, args, unbuffered=env.get("PYTHONUNBUFFERED", "") != "")
        if spec is not None:
            try:
                # The sandbox clears the environment: the code-generation choices the kernel
                # was started with (the CPU) go in by name, or the worker would compile for
                # another CPU than the kernel's caches are keyed on.
                chosen = {cpu.ENV: os.environ[cpu.ENV]} if cpu.ENV in os.environ else {}
                inside = sandbox_for_worker(spec, self._python, child, {**chosen, **self._env})
                return start_sandboxed(inside, argv, [fd], env)
            except OSError as e:
                raise JitWorkerDied(f"the JIT worker cannot start in the sandbox: {e}") from e
        return subprocess.Popen(argv, pass_fds=[fd], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, env=env, start_new_session=True,
                                close_fds=True)

    def _kill_run(self, pid: int) -> None:
        """SIGKILL the running program's group: asked of the worker (whose pids may be those of
        a PID namespace), and directly too when ``pid`` is one of ours."""
        sock = self._sock
        if sock is not None:
            try:
                send_msg(sock, {"op": "kill"})
            except OSError:
                pass
        if not self._sandboxed:
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def _kill_process(self) -> None:
        """Stop the worker through its guard (jit_worker.stand_guard): SIGTERM, and the guard
        kills the worker and then everything its runs left. Never SIGKILL first: the orphans of
        a SIGKILLed guard would escape to init (the intermittent orphan of a shutdown racing a
        slow worker, tests/test_orphans.py)."""
        if self._proc is not None and self._proc.poll() is None:
            try:
                self._proc.terminate()
            except ProcessLookupError:
                pass

    def _reap(self, proc: subprocess.Popen, grace: float) -> None:
        """Wait ``grace`` seconds for ``proc`` (the guard) to end by itself, then SIGTERM it
        (it sweeps), then, only if it is still there after :data:`_GUARD_GRACE`, SIGKILL."""
        try:
            proc.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            pass
        try:
            proc.terminate()
            proc.wait(timeout=_GUARD_GRACE)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        except ProcessLookupError:
            pass

    def _discard(self, grace: float = 2.0) -> None:
        """Forget a dead or unwanted worker and reap it. End of file on its socket comes first:
        a worker that is still alive then kills its run and every process the run left (it is
        their subreaper) and exits; one that has not done so after ``grace`` seconds is stopped
        through its guard (:meth:`_reap`)."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self._proc is not None:
            self._reap(self._proc, grace)
            release(self._proc)  # the sandboxed worker's cgroup, with whatever is left in it
            self._proc = None

    def close(self) -> None:
        """Stop the worker (end of file on its socket, then its guard if it lingers)."""
        with self._lock:
            self._discard()

    def abandon(self, grace: float = 2.0) -> None:
        """Stop the worker without taking the run lock (from a signal handler, while a run may
        hold it): end of file on its socket makes it kill its run, sweep and exit; if it is
        still there after ``grace`` seconds its guard is stopped (:meth:`_reap`)."""
        sock, proc = self._sock, self._proc
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if proc is not None:
            self._reap(proc, grace)

    def _pong(self) -> dict:
        with self._lock:
            self._ensure_started()
            assert self._sock is not None
            send_msg(self._sock, {"op": "ping"})
            got = recv_msg(self._sock)
            if got is None or got[0].get("ev") != "pong":
                self._discard()
                raise JitWorkerDied("the JIT worker did not answer")
            return got[0]

    def cache_stats(self) -> CacheStats:
        """What the worker's program cache holds and did (starts the worker if needed)."""
        return CacheStats(**self._pong().get("cache", {}))

    def library_stats(self) -> tuple[CacheStats, SplitStats]:
        """What the cache of split runs' optimised std parts holds and did, and the split runs'
        counters (starts the worker if needed)."""
        pong = self._pong()
        return CacheStats(**pong.get("library", {})), SplitStats(**pong.get("split", {}))

    def splitting(self) -> "SplitRuns":
        """This worker, running each program as a std library part and a cell part."""
        return SplitRuns(self)

    def __enter__(self) -> "JitWorker":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- running ----------------------------------------------------------------------------

    def _run_once(self, request: dict, stdin: bytes, target: StdoutTarget, limits: RunLimits,
                  cancel: threading.Event | None,
                  live: LiveRun | None = None) -> tuple[_WorkerRun, PumpOutcome]:
        self._ensure_started()
        assert self._sock is not None
        stdio = ChildStdio(target, stdin, interactive=live is not None and live.interactive)
        try:
            if stdio.child is None:  # inherit: pass this process's own 0/1/2 along
                slots = [fd for fd in (0, 1, 2) if _is_open(fd)]
                fds = list(slots)
            else:
                slots = sorted(stdio.child)
                fds = [stdio.child[s] for s in slots]
            control = _WorkerRun(self)
            try:
                send_msg(self._sock, {**request, "slots": slots}, fds)
            except OSError:
                self._discard()
                control.worker_died = control.finished = True
                return control, PumpOutcome.nothing()
            stdio.close_child_ends()
            return control, pump(stdio, control, limits, cancel, live)
        finally:
            stdio.close()

    def run(self, ir_text: str, argv: Sequence[str] | None = None, stdin: bytes = b"",
            target: StdoutTarget = StdoutTarget(), limits: RunLimits = RunLimits(),
            cancel: threading.Event | None = None, libs: Sequence[str] = (),
            libdirs: Sequence[str] = (), split: bool = False,
            live: LiveRun | None = None) -> RunResult:
        """Compile (MCJIT, O2) and run a program; same contract as
        :func:`process.run_executable` (``argv`` includes ``argv[0]``, default ``["main"]``).
        ``split``: compile std and the rest apart, reusing std's machine code
        (``jit_worker.py``); the same output, std calls not inlined. ``live``: output as it
        comes and an interactive stdin (live.py), as for the exe backend.

        Raises :class:`native.InvalidIR` (our bug), :class:`LinkError` (unresolvable symbol or
        library) or :class:`JitWorkerDied`.
        """
        argv = list(argv) if argv else ["main"]
        cpu = limits.cpu_seconds
        request = {"op": "run", "ir": ir_text, "argv": argv, "libs": list(libs),
                   "libdirs": list(libdirs), "memory": limits.memory,
                   "cpu": None if cpu is None else max(1, int(cpu)),
                   "nproc": limits.nproc_limit(), "fsize": limits.fsize,
                   "confine": None if limits.confine is None else limits.confine.roots(),
                   "split": split}
        with self._lock:
            if limits.sandbox is not None and limits.sandbox != self._sandbox:
                self._sandbox = limits.sandbox  # a sandboxed run: the worker (re)starts inside it
            control, outcome = self._run_once(request, stdin, target, limits, cancel, live)
            if (control.worker_died and not control.killed_worker
                    and control.compile_seconds is None):
                # The worker was already dead (or died before compiling): a stale worker is
                # not the program's fault, so start a fresh one and try once more.
                control, outcome = self._run_once(request, stdin, target, limits, cancel, live)
            if control.reply is not None and control.reply.get("retire"):
                self._discard()  # it has ended (its memory bound); the next run starts anew
        if control.error is not None:
            kind, message = control.error.get("kind"), control.error.get("message", "")
            if kind == "invalid-ir":
                from . import native  # here: a kernel importing this module need not load LLVM

                raise native.InvalidIR(message)
            if kind == "link":
                raise LinkError(message)
            raise JitWorkerDied(message)
        if control.worker_died and not control.killed_worker and control.reply is None:
            raise JitWorkerDied("the JIT worker died during the run")
        reply = control.reply or {}
        result = result_from(
            outcome, reply.get("status"), wall=reply.get("wall", 0.0),
            user=reply.get("utime", 0.0), system=reply.get("stime", 0.0),
            maxrss_kib=reply.get("maxrss", 0), timeout=limits.timeout, backend="jit")
        result.compile_seconds = control.compile_seconds
        result.compile_cached = control.compile_cached
        trap = reply.get("trap")
        result.trap_site = trap if isinstance(trap, int) and not isinstance(trap, bool) else None
        return result


class SplitRuns:
    """A :class:`JitWorker` seen as one whose runs are split runs (what the kernel hands to
    ``compiler.run`` for a cell; ``%%bench`` and the CLI use the worker itself)."""

    def __init__(self, worker: JitWorker) -> None:
        self.worker = worker
        self.confines = worker.confines

    def run(self, ir_text: str, **kwargs) -> RunResult:
        return self.worker.run(ir_text, split=True, **kwargs)


def _host_pid(root: int, inner: int) -> int | None:
    """The pid, in this process's namespace, of the descendant of ``root`` whose innermost pid
    is ``inner`` (the worker reports the pid it sees, which the sandbox's PID namespace changes)."""
    from .process import children_of

    todo = [root]
    while todo:
        pid = todo.pop()
        try:
            with open(f"/proc/{pid}/status") as f:
                ns = next((line.split()[1:] for line in f if line.startswith("NSpid:")), [])
        except OSError:
            ns = []
        if ns and int(ns[-1]) == inner and pid != root:
            return pid
        todo += children_of(pid)
    return None


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
        return True
    except OSError:
        return False


def run_jit_inherit(ir_text: str, argv: Sequence[str], libs: Sequence[str] = (),
                    libdirs: Sequence[str] = (), limits: RunLimits | None = None) -> int:
    """Compile in this (single-threaded) process, fork a child that inherits the terminal, and
    return its raw wait status. For the CLI's `run --backend jit`.

    While the child runs, SIGINT and SIGQUIT are ignored here (as ``system(3)`` does): a
    Ctrl-C is the program's, and its death is reported from the wait status. Between this
    process and the program sits a reaper (:func:`_reaper`), so nothing the program starts
    outlives the run: not when it ends, not when an exception (the CLI turns SIGTERM and SIGHUP
    into one) ends the wait, not when this process is killed. ``limits``: memory, CPU and
    processes only.
    """
    from . import mcjit

    compiled = mcjit.compile_ir(ir_text, libs, libdirs)
    mcjit.native_child_available()  # loaded here, so its trap page is shared with the program
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    mcjit.flush_c_stdio()
    limits = limits or RunLimits(timeout=None, max_output=None)
    saved = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGQUIT)}
    pid = None
    try:
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:
            _reaper(compiled, list(argv) or ["main"], limits, parent)
        while True:
            try:
                _, status = os.waitpid(pid, 0)
                pid = None
                return status
            except InterruptedError:
                continue
    finally:
        if pid is not None:  # the wait was cut short: the reaper kills the program and sweeps
            try:
                os.kill(pid, signal.SIGTERM)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
        for s, handler in saved.items():
            signal.signal(s, handler)


class _Stop(BaseException):
    """SIGTERM/SIGHUP (or its parent's death) reached the reaper."""


def _reaper(compiled, argv: list[str], limits: RunLimits, parent: int) -> NoReturn:
    """The process between the CLI and a JIT program (a fork of the single-threaded CLI):
    a child subreaper that dies with the CLI (as SIGTERM, so it sweeps first), forks the
    program, waits for it, kills and reaps everything the program left (setsid'd or not), then
    ends exactly as the program did. The exe backend's C launcher does the same (measure.py)."""
    from . import mcjit

    status = 0
    try:
        def stop(signum: int, frame) -> None:
            raise _Stop()

        for s in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(s, stop)
        become_subreaper()
        die_with_parent(signal.SIGTERM)
        if os.getppid() != parent:
            os._exit(128 + signal.SIGKILL)
        cpu = limits.cpu_seconds
        program = mcjit.spawn_program(compiled.main_address, argv, None, limits.memory,
                                      cpu_seconds=None if cpu is None else max(1, int(cpu)),
                                      nproc=limits.nproc_limit(), fsize=limits.fsize,
                                      confine=None if limits.confine is None else limits.confine.roots())
        try:
            while True:
                try:
                    _, status = os.waitpid(program, 0)
                    break
                except InterruptedError:
                    continue
        except _Stop:
            status = signal.SIGKILL  # a raw wait status: killed by SIGKILL
        kill_children()
    except _Stop:
        status = signal.SIGKILL
    except BaseException:  # noqa: BLE001 - nothing may unwind into the CLI's code
        status = 127 << 8
    finally:
        for s in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(s, signal.SIG_IGN)
    try:
        kill_children()
    finally:
        _end_as(status)


def _end_as(status: int) -> NoReturn:
    """Exit with the wait status ``status`` as our own (the same code, or the same signal)."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            if sig not in (signal.SIGKILL, signal.SIGSTOP):
                signal.signal(sig, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
            os.kill(os.getpid(), sig)
        finally:
            os._exit(128 + sig)
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 127)
