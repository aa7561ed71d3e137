"""The run model both backends share: where a program's streams go, the limits of one run, what
a run produced, and the loop that feeds stdin and drains stdout/stderr while the program runs.

Why one shared model: the `exe` and `jit` backends must be indistinguishable to a user (same
bytes, same exit status, same death by signal — kernel.md §2.2). Both therefore get their
descriptors from :class:`ChildStdio` and are supervised by :func:`pump`; they differ only in how
the process is started (``posix_spawn`` of a linked binary here, a fork inside the JIT worker in
``jit.py``), which is abstracted by :class:`ProcessControl`.

Rules every child gets, whichever backend runs it:

* its own process group (except when it inherits the terminal), so a timeout or an interrupt
  kills everything it started;
* nothing it starts outlives the run: the exe backend's launcher (measure.py) and the JIT worker
  are child subreapers that kill every remaining descendant when the program ends (even one
  that left the group with ``setsid``), and the program dies with its supervisor
  (PR_SET_PDEATHSIG);
* the run's resource limits (address space, CPU seconds, processes) set in the child after
  ``fork``, never on the supervisor or the JIT worker;
* in safe mode (``RunLimits.sandbox``) the launcher and the program start inside the sandbox
  (sandbox.py: namespaces, a read-only system, seccomp) in a cgroup of the run's own, killed
  whole when the run ends (cgroups.py);
* in safe mode (``RunLimits.confine``) also a Landlock confinement on disk, applied in the child after
  ``fork`` and before the program runs (confine.py); a run that cannot be confined does not run;
* default dispositions for SIGPIPE and friends (Python ignores SIGPIPE, and ignored signals
  survive ``exec``), so a write to a pipe whose reader left kills it with signal 13 as in a
  shell;
* output beyond the per-stream cap is read and counted but not kept: never lost silently and
  never blocking the child.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import re
import resource
import selectors
import shutil
import signal
import stat
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Protocol

from . import cgroups, measure, sandbox, stdin_watch
from .proc import children_of  # noqa: F401  (also this module's name for it)
from .confine import Confinement
from .live import LiveRun, StreamName
from .sandbox import SandboxSpec

# Signals a child must see at their default disposition even if this process ignores them.
RESET_SIGNALS: tuple[int, ...] = (
    signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT, signal.SIGQUIT, signal.SIGTERM,
    signal.SIGHUP, signal.SIGCHLD, signal.SIGUSR1, signal.SIGUSR2, signal.SIGALRM,
)

_READ_CHUNK = 1 << 16
_WRITE_CHUNK = 1 << 16
_TICK = 0.05            # how often cancel events and deadlines are looked at (seconds)
_USER_WAIT = 600.0     # the longest one wait for the user may add to a run (a frontend that
                       # allows input but never answers must not hold the kernel for ever)
_SCAN_EVERY = 0.02     # an interactive stdin: how often a blocked reader is looked for (seconds)
_LEFTOVER_GRACE = 0.25  # after the program ends, how long its descendants may hold the pipes
_DRAIN_GRACE = 2.0      # ... and how long to drain after they were killed


MAX_BROKEN_AFTER = 1 << 40  # a reader that accepts more than this is just a pipe


class StdoutKind(str, Enum):
    """Where a run's standard output goes (kernel.md §2.2)."""

    PIPE = "pipe"
    DEV_FULL = "/dev/full"
    DEV_NULL = "/dev/null"
    FILE = "file"
    CLOSED = "closed"
    BROKEN_PIPE = "broken-pipe"
    INHERIT = "inherit"


@dataclass(frozen=True)
class StdoutTarget:
    """A stdout target. ``broken_after`` (broken-pipe only) is how many bytes the reader accepts
    before closing its end; 0 closes it before the program starts. ``INHERIT`` hands the
    caller's own stdin, stdout and stderr to the program (the CLI's `run`)."""

    kind: StdoutKind = StdoutKind.PIPE
    broken_after: int = 0
    path: str | None = None  # FILE only: created (or truncated) before the program starts
    fd: int | None = field(default=None, compare=False)  # FILE: already opened (race-free) by the caller

    @classmethod
    def pipe(cls) -> "StdoutTarget":
        return cls(StdoutKind.PIPE)

    @classmethod
    def dev_full(cls) -> "StdoutTarget":
        return cls(StdoutKind.DEV_FULL)

    @classmethod
    def dev_null(cls) -> "StdoutTarget":
        """Output discarded by the kernel's /dev/null, as benchmarks want (no reader competing)."""
        return cls(StdoutKind.DEV_NULL)

    @classmethod
    def file(cls, path: str) -> "StdoutTarget":
        """Output written to a file, whole (nothing kept or truncated by the caller)."""
        if not path:
            raise ValueError("a file target needs a path")
        return cls(StdoutKind.FILE, 0, path)

    @classmethod
    def closed(cls) -> "StdoutTarget":
        return cls(StdoutKind.CLOSED)

    @classmethod
    def broken_pipe(cls, after: int = 0) -> "StdoutTarget":
        if after < 0:
            raise ValueError("broken_after must be >= 0")
        return cls(StdoutKind.BROKEN_PIPE, after)

    @classmethod
    def inherit(cls) -> "StdoutTarget":
        return cls(StdoutKind.INHERIT)

    @classmethod
    def parse(cls, text: str) -> "StdoutTarget":
        """``pipe``, ``/dev/full`` (or ``full``), ``/dev/null``, ``file:PATH``, ``closed``,
        ``broken-pipe[:N]`` (N decimal digits, at most :data:`MAX_BROKEN_AFTER`), ``inherit``."""
        if text.startswith("file:"):
            return cls.file(text[len("file:"):])
        name, colon, after = text.partition(":")
        aliases = {"full": StdoutKind.DEV_FULL, "devfull": StdoutKind.DEV_FULL, "null": StdoutKind.DEV_NULL}
        try:
            kind = aliases.get(name) or StdoutKind(name)
        except ValueError:
            raise ValueError(f"unknown stdout target `{text}`") from None
        if colon and kind is not StdoutKind.BROKEN_PIPE:
            raise ValueError(f"unknown stdout target `{text}`")
        if not colon:
            return cls(kind)
        if not (after.isascii() and after.isdigit()) or int(after) > MAX_BROKEN_AFTER:
            raise ValueError(f"`{text}`: the byte count after `broken-pipe:` is a whole number "
                             f"from 0 to {MAX_BROKEN_AFTER}")
        return cls.broken_pipe(int(after))


@dataclass(frozen=True)
class RunLimits:
    """Limits of one run. ``None`` means unlimited.

    ``timeout``: wall seconds from the program's start (not counting the time an interactive
    stdin waits for the user: live.py). ``max_output``: bytes kept per stream
    (the rest is drained and counted). ``memory``: the program's address space in bytes
    (RLIMIT_AS, set in the program's process only; under the JIT the forked child starts with
    the worker's image, so the limit is that image plus ``memory``). ``cpu_seconds``:
    RLIMIT_CPU of the program (SIGXCPU when reached). ``processes``: how many processes the
    program may add to those its user already runs (RLIMIT_NPROC; Linux does not apply it to
    root). ``fsize``: the largest file the program may write, in bytes (RLIMIT_FSIZE; SIGXFSZ
    past it). ``confine``: the directories the program may reach on disk (safe mode, Landlock:
    confine.py); ``None`` leaves the disk as the user's. ``sandbox``: the sandbox the run
    starts in (safe mode, sandbox.py; the executable and launcher are added read-only).
    """

    timeout: float | None = 30.0
    max_output: int | None = 1 << 20
    memory: int | None = None
    cpu_seconds: int | None = None
    processes: int | None = None
    confine: Confinement | None = None
    fsize: int | None = None
    sandbox: SandboxSpec | None = None

    def nproc_limit(self) -> int | None:
        """The RLIMIT_NPROC value for ``processes`` more than the user runs now."""
        if self.processes is None:
            return None
        return user_process_count() + self.processes


@dataclass(frozen=True)
class LimitCaps:
    """The most a run may be given (safe mode): every limit finite, none above these; with
    ``confine``, every run is confined to those directories whatever it asked for; with
    ``sandbox``, every run starts in that sandbox. ``fsize`` bounds a run that asked for none."""

    timeout: float
    max_output: int
    memory: int
    cpu_seconds: int
    processes: int
    confine: Confinement | None = None
    fsize: int = 1 << 30
    sandbox: SandboxSpec | None = None

    def violations(self, limits: RunLimits) -> list[str]:
        """What in ``limits`` is unlimited or above a cap, in words a user can act on."""
        out = []
        for name, flag, unit in (("timeout", "--timeout", " s"), ("max_output", "--max-output", " bytes"),
                                 ("memory", "--memory", " bytes"), ("cpu_seconds", "--cpu", " s"),
                                 ("processes", "--processes", "")):
            value, cap = getattr(limits, name), getattr(self, name)
            if value is None or value > cap:
                shown = "unlimited" if value is None else f"{value:g}{unit}"
                out.append(f"{flag} {shown} is above the cap of {cap:g}{unit}")
        if limits.fsize is not None and limits.fsize > self.fsize:  # unset: bounded to the cap
            out.append(f"--fsize {limits.fsize} bytes is above the cap of {self.fsize} bytes")
        return out

    def bound(self, limits: RunLimits) -> RunLimits:
        """``limits`` with every unlimited or too large value brought down to its cap."""
        def low(value, cap):
            return cap if value is None else min(value, cap)

        return replace(limits, timeout=low(limits.timeout, self.timeout),
                       max_output=low(limits.max_output, self.max_output),
                       memory=low(limits.memory, self.memory),
                       cpu_seconds=low(limits.cpu_seconds, self.cpu_seconds),
                       processes=low(limits.processes, self.processes),
                       fsize=low(limits.fsize, self.fsize),
                       confine=self.confine if self.confine is not None else limits.confine,
                       sandbox=self.sandbox if self.sandbox is not None else limits.sandbox)


# The limits a kernel run gets unless a cell or %limits says otherwise (README, %help).
# No file-size limit outside safe mode (as before); safe mode's runs get SAFE_CAPS.fsize.
DEFAULT_RUN_LIMITS = RunLimits(timeout=30.0, max_output=1 << 20, memory=4 << 30, cpu_seconds=600,
                               processes=256)
# Safe mode's caps: the defaults may be lowered, never raised beyond these (README, %help).
SAFE_CAPS = LimitCaps(timeout=600.0, max_output=16 << 20, memory=4 << 30, cpu_seconds=600,
                      processes=256, fsize=1 << 30)


@dataclass
class RunResult:
    """Everything one run produced, for both backends."""

    stdout: bytes = b""
    stderr: bytes = b""
    exit_status: int | None = None
    signal: int | None = None
    timed_out: bool = False
    interrupted: bool = False
    stdout_total: int = 0
    stderr_total: int = 0
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    wall_seconds: float = 0.0
    user_seconds: float = 0.0
    sys_seconds: float = 0.0
    peak_rss_bytes: int = 0
    timeout: float | None = None
    compile_seconds: float | None = None  # MCJIT time (jit backend only)
    compile_cached: bool = False  # jit: the worker reused an engine it had already built
    backend: str = ""
    trap_site: int | None = None  # the trap site number the supervisor read (trapreport.py)

    @property
    def wait_status(self) -> int | None:
        """The status as a shell would see it: n, or 128+signal."""
        if self.exit_status is not None:
            return self.exit_status
        if self.signal is not None:
            return 128 + self.signal
        return None

    def describe(self) -> str:
        """How the process ended, in the words the kernel and `cancho test` show."""
        if self.interrupted:
            return "interrupted"
        if self.timed_out:
            return f"timed out after {self.timeout:g} s" if self.timeout is not None else "timed out"
        if self.signal is not None:
            if self.signal == signal.SIGILL:
                return "trapped: killed by signal 4 (SIGILL)"
            return f"killed by signal {self.signal} ({signal_name(self.signal)})"
        if self.exit_status is not None:
            return f"returned {self.exit_status}"
        return "ended without a status"


def signal_name(signum: int) -> str:
    """``SIGILL`` for 4; a number this Python does not name stays a number."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def split_wait_status(status: int) -> tuple[int | None, int | None]:
    """(exit status, None) or (None, signal) from a raw wait status."""
    if os.WIFSIGNALED(status):
        return None, os.WTERMSIG(status)
    if os.WIFEXITED(status):
        return os.WEXITSTATUS(status), None
    return None, None


def _above_stdio(fd: int) -> int:
    """Move a descriptor to 3 or above, so installing it on 0/1/2 cannot clobber a sibling.

    Matters when this process itself runs with a standard descriptor closed (``cancho … >&-``),
    where a new pipe can land on 1.
    """
    if fd > 2:
        return fd
    high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    os.close(fd)
    return high


def _pipe() -> tuple[int, int]:
    r, w = os.pipe2(os.O_CLOEXEC)
    return _above_stdio(r), _above_stdio(w)


class ChildStdio:
    """The descriptors one run's child gets (``child``: 0/1/2 -> fd; a missing key means that
    descriptor is closed in the child; ``None`` means inherit this process's own), and this
    process's ends of the pipes. All descriptors are close-on-exec here; whoever starts the
    child installs them on 0/1/2. ``interactive``: the stdin pipe stays open after ``stdin``
    (even an empty one), for what the user types (live.py); otherwise an empty stdin is end of
    file at once."""

    def __init__(self, target: StdoutTarget, stdin: bytes = b"", interactive: bool = False) -> None:
        self.target = target
        self.stdin_data = memoryview(bytes(stdin))
        self.interactive = interactive and target.kind is not StdoutKind.INHERIT
        self.child: dict[int, int] | None = {}
        self.stdin_w: int | None = None
        self.stdout_r: int | None = None
        self.stderr_r: int | None = None
        self._child_owned: list[int] = []
        try:
            self._open()
        except BaseException:
            self.close()
            raise

    def _open(self) -> None:
        kind = self.target.kind
        if kind is StdoutKind.INHERIT:
            self.child = None
            return
        assert self.child is not None
        r, w = _pipe()
        self._child_owned.append(r)
        self.child[0] = r
        if self.stdin_data or self.interactive:
            self.stdin_w = w
        else:
            os.close(w)  # empty stdin: end of input at once, never a hang
        if kind in (StdoutKind.PIPE, StdoutKind.BROKEN_PIPE):
            r, w = _pipe()
            self._child_owned.append(w)
            self.child[1] = w
            if kind is StdoutKind.BROKEN_PIPE and self.target.broken_after == 0:
                os.close(r)  # the reader leaves before the program starts
            else:
                self.stdout_r = r
        elif kind in (StdoutKind.DEV_FULL, StdoutKind.DEV_NULL, StdoutKind.FILE):
            name = self.target.path if kind is StdoutKind.FILE else kind.value
            flags = os.O_WRONLY | os.O_CLOEXEC | (os.O_CREAT | os.O_TRUNC if kind is StdoutKind.FILE else 0)
            given = self.target.fd if kind is StdoutKind.FILE else None
            fd = _above_stdio(os.dup(given) if given is not None else os.open(name, flags, 0o644))
            if given is not None and stat.S_ISREG(os.fstat(fd).st_mode):
                os.ftruncate(fd, 0)  # each run starts the file afresh, as a path opened O_TRUNC did
                os.lseek(fd, 0, os.SEEK_SET)
            self._child_owned.append(fd)
            self.child[1] = fd
        # CLOSED: no key 1.
        r, w = _pipe()
        self._child_owned.append(w)
        self.child[2] = w
        self.stderr_r = r

    def close_child_ends(self) -> None:
        """Drop this process's copies of the child's descriptors once the child has its own
        (otherwise the pipes never reach end of file)."""
        for fd in self._child_owned:
            try:
                os.close(fd)
            except OSError:
                pass
        self._child_owned = []

    def close(self) -> None:
        """Close everything still open (idempotent)."""
        self.close_child_ends()
        for name in ("stdin_w", "stdout_r", "stderr_r"):
            fd = getattr(self, name)
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
                setattr(self, name, None)


class _Sink:
    """Keeps the first ``cap`` bytes of a stream and counts all of them. ``stop_after`` makes
    the reader leave after that many bytes (the broken-pipe target)."""

    def __init__(self, cap: int | None, stop_after: int | None = None) -> None:
        self.cap = cap
        self.stop_after = stop_after
        self.data = bytearray()
        self.total = 0

    def want(self) -> int:
        if self.stop_after is None:
            return _READ_CHUNK
        return max(0, min(_READ_CHUNK, self.stop_after - self.total))

    def add(self, chunk: bytes) -> bytes:
        """Count ``chunk``; returns the part of it that is kept."""
        self.total += len(chunk)
        kept = chunk
        if self.cap is not None:
            kept = chunk[: max(0, self.cap - len(self.data))]
        self.data += kept
        return kept

    @property
    def done(self) -> bool:
        return self.stop_after is not None and self.total >= self.stop_after

    @property
    def truncated(self) -> bool:
        return self.cap is not None and self.total > self.cap


class ProcessControl(Protocol):
    """How :func:`pump` learns that the program started and ended, and how it kills it."""

    started: bool   # the program is running (arms the wall-time deadline)
    finished: bool  # the program has ended and its status is known

    def fileno(self) -> int | None:
        """A descriptor that becomes readable when there is news, or None to be polled."""

    def on_ready(self) -> None:
        """Take the news (or poll, when :meth:`fileno` is None)."""

    def kill(self) -> None:
        """Kill the program and everything it started (SIGKILL to its process group)."""


@dataclass
class PumpOutcome:
    """What the supervision loop observed besides the exit status."""

    stdout: _Sink
    stderr: _Sink
    timed_out: bool
    interrupted: bool

    @classmethod
    def nothing(cls) -> "PumpOutcome":
        """The outcome of a run that never started."""
        return cls(_Sink(0), _Sink(0), False, False)


def pump(stdio: ChildStdio, control: ProcessControl, limits: RunLimits,
         cancel: threading.Event | None, live: LiveRun | None = None) -> PumpOutcome:
    """Feed stdin, drain stdout and stderr, enforce the deadline and the cancel event, until the
    program has ended and its output pipes are at end of file.

    One thread, one selector: a 100 MB flood is read as fast as it comes and only ``max_output``
    bytes of it are kept, and a child that never reads its stdin never blocks us. With
    ``live``, each kept chunk is handed on as it is read, and an interactive stdin is fed
    with what the user answers when the program waits for it (live.py).
    """
    return _Pump(stdio, control, limits, cancel, live).run()


class _Pump:
    """The state of one :func:`pump`: the selector, the sinks, the stdin position, and what the
    loop has done to the program (killed it for a deadline or a cancel, swept its leftovers)."""

    def __init__(self, stdio: ChildStdio, control: ProcessControl, limits: RunLimits,
                 cancel: threading.Event | None, live: LiveRun | None = None) -> None:
        self.stdio, self.control, self.limits, self.cancel = stdio, control, limits, cancel
        self.live = live
        self.feed = _StdinFeed(bytes(stdio.stdin_data), eof=not stdio.interactive)
        self.stdin_inode = (stdin_watch.pipe_inode(stdio.stdin_w)
                            if stdio.interactive and stdio.stdin_w is not None else None)
        target = stdio.target
        self.out_sink = _Sink(limits.max_output,
                              target.broken_after if target.kind is StdoutKind.BROKEN_PIPE else None)
        self.err_sink = _Sink(limits.max_output)
        self.sel = selectors.DefaultSelector()
        self.outputs: set[int] = set()
        self.stdin_writing = False
        self.asked_at: float | None = None  # when the user was asked for input (not yet answered)
        self.next_scan = 0.0  # when to look for a blocked reader again (at most once a tick)
        self.control_fd: int | None = None
        self.timed_out = self.interrupted = self.killed = self.leftovers_killed = False
        self.deadline: float | None = None
        self.finished_at: float | None = None

    def run(self) -> PumpOutcome:
        self._register_streams()
        try:
            while not self._step():
                pass
        finally:
            self.sel.close()
        return PumpOutcome(self.out_sink, self.err_sink, self.timed_out, self.interrupted)

    def _register_streams(self) -> None:
        stdio = self.stdio
        for fd, sink, name in ((stdio.stdout_r, self.out_sink, StreamName.STDOUT),
                               (stdio.stderr_r, self.err_sink, StreamName.STDERR)):
            if fd is not None:
                if sink.done:  # broken pipe after 0 bytes never gets here; kept for clarity
                    continue
                os.set_blocking(fd, False)
                self.sel.register(fd, selectors.EVENT_READ, self._reader(fd, sink, name))
                self.outputs.add(fd)
        if stdio.stdin_w is not None:
            os.set_blocking(stdio.stdin_w, False)
            self._want_writes()

    def _close_output(self, fd: int) -> None:
        self.sel.unregister(fd)
        self.outputs.discard(fd)
        os.close(fd)
        if fd == self.stdio.stdout_r:
            self.stdio.stdout_r = None
        elif fd == self.stdio.stderr_r:
            self.stdio.stderr_r = None

    def _reader(self, fd: int, sink: _Sink, name: StreamName) -> Callable[[], None]:
        def on_readable() -> None:
            try:
                chunk = os.read(fd, sink.want())
            except BlockingIOError:
                return
            except OSError:
                chunk = b""
            if chunk:
                kept = sink.add(chunk)
                if self.live is not None:
                    self.live.emit(name, kept)
            if not chunk or sink.done:
                self._close_output(fd)
        return on_readable

    def _want_writes(self) -> None:
        """Select the stdin pipe for writing while there is something to write (or to close)."""
        fd = self.stdio.stdin_w
        if fd is None:
            return
        wanted = self.feed.pending or self.feed.eof
        if wanted and not self.stdin_writing:
            self.sel.register(fd, selectors.EVENT_WRITE, self._write_stdin)
        elif not wanted and self.stdin_writing:
            self.sel.unregister(fd)
        self.stdin_writing = wanted

    def _write_stdin(self) -> None:
        stdio = self.stdio
        fd = stdio.stdin_w
        assert fd is not None
        try:
            self.feed.wrote(os.write(fd, self.feed.next_chunk()))
        except BlockingIOError:
            return
        except OSError:  # EPIPE: the program ended or closed its stdin; the rest is moot
            self.feed.abandon()
        if self.feed.eof and not self.feed.pending:
            self._close_stdin()
        else:
            self._want_writes()

    def _close_stdin(self) -> None:
        fd = self.stdio.stdin_w
        if fd is None:
            return
        if self.stdin_writing:
            self.sel.unregister(fd)
            self.stdin_writing = False
        os.close(fd)
        self.stdio.stdin_w = None

    def _user_waiting(self, now: float) -> bool:
        """The run waits for the user's answer, within :data:`_USER_WAIT` (not the run's time)."""
        return self.asked_at is not None and now - self.asked_at < _USER_WAIT

    def _serve_stdin(self) -> None:
        """An interactive stdin: take the user's answer, or ask for one when a process of the
        run is blocked reading the empty pipe (stdin_watch.py)."""
        live = self.live
        if live is None or self.stdin_inode is None or self.stdio.stdin_w is None:
            return
        answer = live.take_answer()
        if answer is not None:
            if self.deadline is not None and self.asked_at is not None:
                self.deadline += time.monotonic() - self.asked_at  # the user's time is not the run's
            self.asked_at = None
            self.feed.add(answer.data)
            self._want_writes()
            return
        now = time.monotonic()
        if (live.asking or self.feed.pending or self.control.finished or now < self.next_scan
                or stdin_watch.unread_bytes(self.stdio.stdin_w) > 0):
            return
        self.next_scan = now + _SCAN_EVERY
        if stdin_watch.reader_waiting(self.stdin_inode):
            self.asked_at = time.monotonic()
            live.want_input()

    def _watch_control(self) -> None:
        """Select on the control's descriptor, which may appear, change or go."""
        fd_now = None if self.control.finished else self.control.fileno()
        if fd_now != self.control_fd:
            if self.control_fd is not None:
                self.sel.unregister(self.control_fd)
            if fd_now is not None:
                self.sel.register(fd_now, selectors.EVENT_READ, self.control.on_ready)
            self.control_fd = fd_now

    def _step(self) -> bool:
        """One tick of the loop; True when the run is over."""
        control = self.control
        self._watch_control()
        now = time.monotonic()
        if control.started and self.deadline is None and self.limits.timeout is not None:
            self.deadline = now + self.limits.timeout
        if control.finished:
            if not self.outputs:
                return True
            # The program ended but something it started still holds the pipes.
            self.finished_at = self.finished_at or now
            if not self.leftovers_killed and now - self.finished_at > _LEFTOVER_GRACE:
                control.kill()
                self.leftovers_killed = True
            elif now - self.finished_at > _LEFTOVER_GRACE + _DRAIN_GRACE:
                return True
        elif not self.killed:
            if self.cancel is not None and self.cancel.is_set():
                self.interrupted = self.killed = True
                control.kill()
            elif self.deadline is not None and now >= self.deadline and not self._user_waiting(now):
                self.timed_out = self.killed = True
                control.kill()
        if not self.killed:
            self._serve_stdin()
        wait = _TICK
        if self.deadline is not None and not self.killed:
            wait = max(0.0, min(wait, self.deadline - now))
        for key, _ in self.sel.select(wait):
            key.data()
        if self.control_fd is None and not control.finished:
            control.on_ready()
        return False


class _StdinFeed:
    """What is still to be written to the program's stdin, and whether end of file follows."""

    def __init__(self, data: bytes, eof: bool) -> None:
        self.buffer = bytearray(data)
        self.eof = eof

    @property
    def pending(self) -> bool:
        return bool(self.buffer)

    def next_chunk(self) -> bytes:
        return bytes(self.buffer[:_WRITE_CHUNK])

    def wrote(self, n: int) -> None:
        del self.buffer[:n]

    def add(self, data: bytes | None) -> None:
        """More to write, or (``None``) end of file after what is pending."""
        if data is None:
            self.eof = True
        else:
            self.buffer += data

    def abandon(self) -> None:
        """The reader is gone: nothing more will be written."""
        self.buffer.clear()
        self.eof = True


def result_from(outcome: PumpOutcome, wait_status: int | None, *, wall: float,
                user: float = 0.0, system: float = 0.0, maxrss_kib: int = 0,
                timeout: float | None = None, backend: str = "") -> RunResult:
    """Assemble a :class:`RunResult` from the supervision outcome and the wait status."""
    exit_status, sig = split_wait_status(wait_status) if wait_status is not None else (None, None)
    return RunResult(
        stdout=bytes(outcome.stdout.data), stderr=bytes(outcome.stderr.data),
        exit_status=exit_status, signal=sig,
        timed_out=outcome.timed_out, interrupted=outcome.interrupted,
        stdout_total=outcome.stdout.total, stderr_total=outcome.stderr.total,
        stdout_truncated=outcome.stdout.truncated, stderr_truncated=outcome.stderr.truncated,
        wall_seconds=wall, user_seconds=user, sys_seconds=system,
        peak_rss_bytes=maxrss_kib * 1024, timeout=timeout, backend=backend,
    )


class _SpawnedChild:
    """:class:`ProcessControl` for a child of this process, watched through a pidfd."""

    def __init__(self, pid: int, own_group: bool, launcher: bool = False,
                 cgroup: cgroups.RunCgroup | None = None, sandboxed: bool = False) -> None:
        self.pid = pid
        self.own_group = own_group
        self.launcher = launcher
        self.cgroup = cgroup
        self.sandboxed = sandboxed
        self.started = True
        self.finished = False
        self.status: int | None = None
        self.rusage: resource.struct_rusage | None = None
        self.ended_at: float | None = None
        try:
            self._pidfd: int | None = os.pidfd_open(pid)
        except (AttributeError, OSError):
            self._pidfd = None  # old kernel: poll every tick instead

    def fileno(self) -> int | None:
        return self._pidfd

    def on_ready(self) -> None:
        pid, status, rusage = os.wait4(self.pid, os.WNOHANG)
        if pid == self.pid:
            self.ended_at = time.monotonic()
            self.status, self.rusage, self.finished = status, rusage, True

    def kill(self) -> None:
        if self.cgroup is not None:
            self.cgroup.kill()  # the whole run at once, whatever it became
        try:
            if self.sandboxed:  # bwrap: its death kills everything in the sandbox
                if not self.finished:
                    os.kill(self.pid, signal.SIGKILL)
            elif self.launcher:
                if not self.finished:  # it kills the program's group, then every descendant
                    os.kill(self.pid, signal.SIGTERM)
            elif self.own_group:
                os.killpg(self.pid, signal.SIGKILL)
            elif not self.finished:
                os.kill(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def close(self) -> None:
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None


# Without a C compiler (so without the launcher): sets the limits, then becomes the program.
# posix_spawn cannot set a resource limit, and the caller may have threads, so no Python code
# may run between fork and exec here; a tiny trampoline interpreter does it instead. It cannot
# sweep descendants; the launcher is the normal path (the exe backend needs cc anyway).
_RLIMIT_TRAMPOLINE = (
    "import os,resource,signal,sys\n"
    "for r,v,k in ((resource.RLIMIT_AS,sys.argv[1],0),(resource.RLIMIT_CPU,sys.argv[2],1),(resource.RLIMIT_NPROC,sys.argv[3],0),(resource.RLIMIT_FSIZE,sys.argv[4],0)):\n"
    " if v!='-': resource.setrlimit(r,(int(v),int(v)+k))\n"
    "for s in (signal.SIGPIPE,signal.SIGXFSZ): signal.signal(s,signal.SIG_DFL)\n"
    "try: os.execv(sys.argv[5],sys.argv[6:])\n"
    "except OSError as e: os.write(2,('cannot run %s: %s\\n'%(sys.argv[5],e.strerror)).encode()); os._exit(127)\n"
)


def _launch_limits(limits: RunLimits) -> measure.LaunchLimits:
    cpu = limits.cpu_seconds
    return measure.LaunchLimits(limits.memory, None if cpu is None else max(1, int(cpu)),
                                limits.nproc_limit(), limits.fsize)


def _spawn(path: str, argv: Sequence[str], stdio: ChildStdio, limits: measure.LaunchLimits,
           own_group: bool, extra: Sequence[tuple] = ()) -> int:
    actions: list[tuple] = []
    if stdio.child is not None:
        for target_fd in (0, 1, 2):
            fd = stdio.child.get(target_fd)
            if fd is None:
                actions.append((os.POSIX_SPAWN_CLOSE, target_fd))
            else:
                actions.append((os.POSIX_SPAWN_DUP2, fd, target_fd))
    actions += list(extra)
    exe, args = path, list(argv)
    if limits != measure.LaunchLimits():
        exe = sys.executable
        num = lambda v: "-" if v is None else str(v)  # noqa: E731
        args = [sys.executable, "-I", "-S", "-c", _RLIMIT_TRAMPOLINE, num(limits.address_space),
                num(limits.cpu_seconds), num(limits.processes), num(limits.file_size), path, *argv]
    kwargs: dict = {"file_actions": actions, "setsigdef": RESET_SIGNALS, "setsigmask": ()}
    if own_group:
        kwargs["setpgroup"] = 0
    return os.posix_spawn(exe, args, dict(os.environ), **kwargs)


@dataclass(frozen=True)
class _Started:
    """What :func:`_start` started: the child to supervise, the launcher's report pipe, the
    run's cgroup, and a file the supervisor removes itself once the run is over."""

    pid: int
    launcher: bool
    report_r: int | None = None
    cgroup: cgroups.RunCgroup | None = None
    sandboxed: bool = False
    remove_after: str | None = None


def run_executable(path: str | os.PathLike, argv: Sequence[str] | None = None, stdin: bytes = b"",
                   target: StdoutTarget = StdoutTarget(), limits: RunLimits = RunLimits(),
                   cancel: threading.Event | None = None, *,
                   remove_after_start: bool = False, live: LiveRun | None = None) -> RunResult:
    """Run a linked program under the shared run model.

    ``argv`` is the whole vector including ``argv[0]`` (default: ``[path]``), so a caller can
    give both backends the same one. ``remove_after_start``: the launcher deletes the file and
    its directory once the program is running (the CLI's `run`, so that nothing is left even if
    this process is killed; in a sandbox, where the file is read-only, this process removes it
    when the run ends). ``live``: the run's output as it comes and, when it is interactive,
    its stdin from the user (live.py). Raises ``OSError`` if the file cannot be executed.
    """
    path = os.fspath(path)
    argv = list(argv) if argv else [path]
    own_group = target.kind is not StdoutKind.INHERIT  # a terminal's job control needs ours
    stdio = ChildStdio(target, stdin, interactive=live is not None and live.interactive)
    started: _Started | None = None
    try:
        start = time.monotonic()
        started = _start(path, argv, stdio, limits, own_group, remove_after_start)
        stdio.close_child_ends()
        control = _SpawnedChild(started.pid, own_group, launcher=started.launcher,
                                cgroup=started.cgroup, sandboxed=started.sandboxed)
        try:
            outcome = pump(stdio, control, limits, cancel, live)
        finally:
            if not control.finished:  # only on an exception escaping pump
                control.kill()
                os.waitpid(started.pid, 0)
            control.close()
        report, trap = _read_report(started.report_r) if started.report_r is not None else (None, None)
    finally:
        stdio.close()
        if started is not None:
            _finish(started)
    ru = control.rusage
    user, system, rss = (ru.ru_utime, ru.ru_stime, ru.ru_maxrss) if ru else (0.0, 0.0, 0)
    status = control.status
    if report is not None:
        # Inside a sandbox the launcher's status is the program's (bwrap's own folds a signal
        # into an exit code).
        status, user, system, rss = report
    result = result_from(
        outcome, status, wall=(control.ended_at or time.monotonic()) - start,
        user=user, system=system, maxrss_kib=rss, timeout=limits.timeout, backend="exe")
    result.trap_site = trap
    return result


def _start(path: str, argv: list[str], stdio: ChildStdio, limits: RunLimits, own_group: bool,
           remove_after_start: bool) -> _Started:
    """Start the program: through the launcher (in the sandbox when ``limits.sandbox``), or,
    without a C compiler, through the Python trampoline (never for a confined run)."""
    if limits.sandbox is not None:
        return _start_sandboxed(path, argv, stdio, limits, own_group, remove_after_start)
    launcher = measure.launcher()
    if launcher is None:
        if limits.confine is not None:
            raise OSError(errno.ENOSYS, "a confined run needs the launcher, which needs a C "
                          "compiler (cc)")
        return _Started(_spawn(path, argv, stdio, _launch_limits(limits), own_group), False)
    # Through the small launcher: the program's own peak RSS, its limits, and no descendant
    # left behind (measure.py).
    report_r, report_w = _report_pipe()
    try:
        largv = measure.launcher_argv(
            launcher, path, argv, parent=os.getpid(), own_group=own_group,
            limits=_launch_limits(limits), cleanup=path if remove_after_start else None,
            confine=_confinement_for(limits, path))
        pid = _spawn(launcher, largv, stdio, measure.LaunchLimits(), own_group,
                     extra=[(os.POSIX_SPAWN_DUP2, report_w, measure.REPORT_FD)])
    except BaseException:
        os.close(report_r)
        raise
    finally:
        os.close(report_w)
    return _Started(pid, True, report_r)


def _start_sandboxed(path: str, argv: list[str], stdio: ChildStdio, limits: RunLimits,
                     own_group: bool, remove_after_start: bool) -> _Started:
    """``bwrap … -- launcher … program`` in a cgroup of the run's own (sandbox.py, cgroups.py):
    the launcher from a copy no sandboxed program can write, it and the executable read-only."""
    assert limits.sandbox is not None
    launcher = measure.trusted_launcher(limits.sandbox.writable)
    if launcher is None:
        raise OSError(errno.ENOSYS, "a sandboxed run needs the launcher, which needs a C "
                      "compiler (cc)")
    # The group's task bound: the program's processes plus bwrap (2), the launcher and a shell.
    group = cgroups.create(None if limits.processes is None else limits.processes + _SANDBOX_TASKS)
    spec = replace(limits.sandbox, readable=(*limits.sandbox.readable, launcher,
                                             os.path.dirname(os.path.abspath(path))),
                   cgroup_procs=group.procs if group is not None else None)
    largv = measure.launcher_argv(launcher, path, argv, parent=None, own_group=own_group,
                                  limits=_launch_limits(limits),
                                  confine=_confinement_for(limits, path))
    report_r, report_w = _report_pipe()
    launch = None
    try:
        launch = sandbox.command(spec, largv)
        extra = [(os.POSIX_SPAWN_DUP2, report_w, measure.REPORT_FD)]
        extra += [(os.POSIX_SPAWN_DUP2, fd, fd) for fd in launch.pass_fds]
        pid = _spawn(launch.argv[0], launch.argv, stdio, measure.LaunchLimits(), own_group,
                     extra=extra)
    except BaseException:
        os.close(report_r)
        if group is not None:
            group.remove()
        raise
    finally:
        os.close(report_w)
        if launch is not None:
            launch.close()
    return _Started(pid, True, report_r, group, True, path if remove_after_start else None)


_SANDBOX_TASKS = 4


def _report_pipe() -> tuple[int, int]:
    """The launcher's report pipe, its write end at 10 or above (never on 0-3)."""
    report_r, w = os.pipe()
    report_w = fcntl.fcntl(w, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(w)
    return report_r, report_w


def _finish(started: _Started) -> None:
    """After a run: the report pipe closed, the cgroup killed and removed, the file removed."""
    if started.report_r is not None:
        os.close(started.report_r)
    if started.cgroup is not None:
        started.cgroup.remove()
    if started.remove_after is not None:
        try:
            os.unlink(started.remove_after)
            os.rmdir(os.path.dirname(started.remove_after))
        except OSError:
            pass


def _confinement_for(limits: RunLimits, path: str) -> Confinement | None:
    """The run's confinement, with the directory holding the executable readable (it must be
    read and executed to start)."""
    if limits.confine is None:
        return None
    return limits.confine.with_readable(os.path.dirname(os.path.abspath(path)))


def _read_report(fd: int) -> tuple[tuple[int, float, float, int] | None, int | None]:
    """The launcher's rusage line (already written when it exited), if any, and the trap site
    number it carries (trapreport.py)."""
    os.set_blocking(fd, False)
    try:
        data = os.read(fd, 256)
    except OSError:
        return None, None
    text = data.decode(errors="replace")
    return measure.parse_report(text), measure.parse_trap(text)


# -- nothing outlives a run ------------------------------------------------------------------------

_PR_SET_CHILD_SUBREAPER = 36
_PR_SET_PDEATHSIG = 1


def _prctl(option: int, value: int) -> bool:
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(option, value, 0, 0, 0) == 0


def become_subreaper() -> bool:
    """Make this process the child subreaper of its descendants: a process whose parent dies
    (including one that left its group with ``setsid``) is re-parented here rather than to
    init, where :func:`kill_children` can reach it. Only for processes whose children are all
    runs (the JIT worker, the CLI's `run`); False where Linux refuses."""
    return _prctl(_PR_SET_CHILD_SUBREAPER, 1)


def die_with_parent(sig: int = signal.SIGKILL) -> bool:
    """PR_SET_PDEATHSIG: this process gets ``sig`` when the thread that created it ends. Call it
    in a child forked by a single-threaded parent only (a thread's end would trigger it)."""
    return _prctl(_PR_SET_PDEATHSIG, int(sig))


def kill_children(keep: Callable[[int], bool] = lambda pid: False) -> int:
    """SIGKILL and reap every child of this process for which ``keep`` is false, again and
    again until none is left (killing one re-parents its own children here when this process
    is a subreaper). Returns how many were killed."""
    me = os.getpid()
    killed = 0
    for _ in range(10_000):  # each round reaps at least one; a bound against the impossible
        victims = [pid for pid in children_of(me) if not keep(pid)]
        if not victims:
            return killed
        for pid in victims:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except ProcessLookupError:
                pass
        for pid in victims:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:  # reaped by someone else (a Popen, a pidfd watcher)
                pass
    return killed


def user_process_count(uid: int | None = None) -> int:
    """How many processes (threads count, as RLIMIT_NPROC counts them) the user runs now."""
    uid = os.getuid() if uid is None else uid
    n = 0
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            st = os.stat(f"/proc/{name}")
            if st.st_uid == uid:
                n += len(os.listdir(f"/proc/{name}/task"))
        except OSError:
            continue
    return n


# -- temporary directories ---------------------------------------------------------------------------

RUN_DIR_PREFIXES = ("cancho-run-", "cancho-test-", "cancho-cell-", "cancho-programs-")


def owned_temp_prefix(kind: str) -> str:
    """``cancho-<kind>-<pid>-``: a temporary directory's name says which process owns it, so one
    left by a killed process can be recognised and removed later (:func:`remove_stale_dirs`)."""
    prefix = f"cancho-{kind}-"
    assert prefix in RUN_DIR_PREFIXES, kind
    return f"{prefix}{os.getpid()}-"


def remove_stale_dirs(base: str | None = None, owner: int | None = None) -> list[str]:
    """Remove this user's cancho temporary directories whose owner process is gone (a process
    killed by SIGKILL cannot clean up after itself), and with ``owner`` those of that process
    too (its own, when it is about to die). Returns the removed paths."""
    base = base or tempfile.gettempdir()
    pattern = re.compile(r"^cancho-(?:run|test|cell|programs)-(\d+)(?:-.*)?$")
    removed: list[str] = []
    try:
        names = os.listdir(base)
    except OSError:
        return removed
    for name in names:
        m = pattern.match(name)
        if not m or (int(m.group(1)) != owner and cgroups.pid_alive(int(m.group(1)))):
            continue
        path = os.path.join(base, name)
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed
