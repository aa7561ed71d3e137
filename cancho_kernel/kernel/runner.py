"""Running a compiled cell on either backend, interruptibly, for the kernel.

* ``jit``: a warm :class:`JitWorker` (started in the background when the kernel starts) compiles
  with MCJIT and forks one child per run; LLVM never runs in a fork of the kernel.
* ``exe``: built into a temporary directory through the on-disk build cache (an unchanged cell
  is not compiled or linked again), then run.

Building, running and the mapping of failures are ``compiler/run.py``'s, shared with the CLI,
`cancho test` and the bench; this module owns the worker, safe mode's caps and the wait. The
run happens in a helper thread (:func:`run.interruptible`); the kernel's main thread waits for
it, so the SIGINT of an interrupt arrives there as ``KeyboardInterrupt``, which sets the run's
cancel event: the supervision loop kills the program's process group within one tick (50 ms).
A cell's run is watched (:func:`streaming.watch`): its output is published while it runs and,
where the frontend allows it, its reads of standard input become input requests.
"""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..compiler.backends.jit import JitWorker
from ..compiler.backends.live import LiveRun
from ..compiler.backends.process import LimitCaps, RunLimits, RunResult
from ..compiler.cache import BuildCache
from ..compiler.modcache import ModuleCache
from ..compiler.run import (BACKENDS, FailureKind, RunFailed, RunRequest, interruptible,
                            run_program)

if TYPE_CHECKING:
    from .streaming import LiveView

__all__ = ["BACKENDS", "FailureKind", "RunFailed", "RunOutcome", "RunRequest", "Runner"]


@dataclass(frozen=True)
class RunOutcome:
    """One interruptible run: its result, or why it could not start, and whether the notebook's
    stop button was pressed while it ran."""

    result: RunResult | None
    failure: RunFailed | None
    interrupted: bool
    streamed: bool = False  # the result's stdout and stderr were already published, as they came


class Runner:
    """Owns the JIT worker; runs one program at a time. With ``caps`` (safe mode) every run's
    limits are brought within them, whoever asked for the run (a bench too), and with
    ``caps.confine`` every run is confined on disk. ``cache`` is the exe backend's build cache
    (by default the user's: ``compiler/cache.py``). ``notice``: what the user must be told once
    about how runs are made (safe mode without Landlock), until :meth:`take_notice`."""

    def __init__(self, caps: LimitCaps | None = None, cache: BuildCache | None = None,
                 notice: str | None = None, worker: JitWorker | None = None) -> None:
        self.caps = caps
        self._notice = notice
        self.cache = cache if cache is not None else BuildCache.from_env()
        self.worker = worker if worker is not None else JitWorker()  # the kernel's, started early
        if caps is not None and caps.sandbox is not None and hasattr(self.worker, "use_sandbox"):
            self.worker.use_sandbox(caps.sandbox)  # the warm-up starts it inside (jit_sandbox.py)
        self._warm_thread: threading.Thread | None = None
        self.worker_start_seconds: float | None = None

    def warm_up(self, cache: ModuleCache | None = None) -> None:
        """In the background: start the JIT worker, load the compiler (a first compile imports and
        prepares ~0.2 s of modules and tables; with ``cache``, the common std modules are checked
        into it) and initialise LLVM here for the `exe` backend, so the first cell does not wait
        for any of it. (native is imported here, not at module
        level, so that importing the kernel does not load libLLVM by itself.)"""
        if self._warm_thread is not None:
            return

        def start() -> None:
            try:
                self.worker_start_seconds = self.worker.start()
            except Exception:  # reported by the first run that needs it
                pass
            try:
                from .session import warm_compiler
                warm_compiler(cache)
                from ..compiler.backends import native
                native.ensure_initialised()
            except Exception:
                pass
        self._warm_thread = threading.Thread(target=start, name="cancho-jit-warmup", daemon=True)
        self._warm_thread.start()

    def close(self) -> None:
        try:
            self.worker.close()
        except Exception:
            pass

    def take_notice(self) -> str | None:
        """The pending notice, once (the kernel shows it in the first cell's output)."""
        notice, self._notice = self._notice, None
        return notice

    def bounded(self, limits: RunLimits) -> RunLimits:
        """``limits`` within the caps (unchanged without caps)."""
        return self.caps.bound(limits) if self.caps is not None else limits

    def run_blocking(self, req: RunRequest, cancel: threading.Event | None = None,
                     split: bool = False) -> RunResult:
        """Run in the calling thread. ``split``: on the JIT, std's machine code is compiled
        apart and reused across edits (``backends/split.py``) — for cells; a bench measures
        the whole program, as the exe backend builds it. Raises :class:`RunFailed`."""
        req = dataclasses.replace(req, limits=self.bounded(req.limits))
        splitting = getattr(self.worker, "splitting", None)  # a test's stand-in may have none
        worker = splitting() if split and splitting is not None else self.worker
        return run_program(self.confinable(req), worker, cancel, self.cache)

    def confinable(self, req: RunRequest) -> RunRequest:
        """``req`` on a backend that honours its confinement: a JIT worker that cannot confine
        its children (``JitWorker.confines`` false) hands a confined run to the exe launcher,
        which prints the same bytes (kernel.md §2.2), rather than run it unconfined; so does a
        worker that cannot start its children in the sandbox (``JitWorker.sandboxes`` false)."""
        if req.backend != "jit":
            return req
        confined = req.limits.confine is None or getattr(self.worker, "confines", False)
        sandboxed = req.limits.sandbox is None or getattr(self.worker, "sandboxes", False)
        if confined and sandboxed:
            return req
        return dataclasses.replace(req, backend="exe")

    def run(self, req: RunRequest, view: "LiveView | None" = None) -> RunOutcome:
        """Run a cell in a helper thread (a split run on the JIT) and wait; an interrupt
        (KeyboardInterrupt in this thread) cancels the run. With ``view``, the run's output is
        shown on it while it runs, and its stdin is the user's when ``view.interactive``."""
        if view is not None:
            from .streaming import watch

            live = LiveRun(interactive=view.interactive)
            req = dataclasses.replace(req, live=live)
            waited, shown = watch(lambda cancel: self.run_blocking(req, cancel, split=True), live, view)
            if waited.value is not None:
                from ..compiler.backends.live import StreamName
                from .streaming import show_unshown

                show_unshown(view, {StreamName.STDOUT: waited.value.stdout or b"",
                                    StreamName.STDERR: waited.value.stderr or b""}, shown)
        else:
            waited = interruptible(lambda cancel: self.run_blocking(req, cancel, split=True))
        error = waited.error
        failure = error if isinstance(error, RunFailed) or error is None else \
            RunFailed(FailureKind.INTERNAL, f"{type(error).__name__}: {error}")
        result = waited.value
        # What happened, not when the signal came.
        interrupted = result.interrupted if result is not None else waited.interrupted
        return RunOutcome(result, failure, interrupted, streamed=view is not None)
