"""Running a compiled cell on either backend, interruptibly.

* ``jit``: a warm :class:`JitWorker` (started in the background when the kernel starts) compiles
  with MCJIT and forks one child per run; LLVM never runs in a fork of the kernel.
* ``exe``: ``exe.build_executable`` into a temporary directory, then
  ``process.run_executable``.

Both run under the shared run model of ``backends/process.py`` (stdout targets, limits,
truncation, cancel). The run itself happens in a helper thread; the kernel's main thread waits
for it, so the SIGINT of an interrupt arrives in the main thread as ``KeyboardInterrupt``, which
sets the run's cancel event: the supervision loop kills the program's process group within one
tick (50 ms).
"""

from __future__ import annotations

import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..compiler.backends import exe as exe_backend
from ..compiler.backends import native
from ..compiler.backends.jit import JitWorker, JitWorkerDied
from ..compiler.backends.process import (LimitCaps, RunLimits, RunResult, StdoutTarget,
                                        owned_temp_prefix, run_executable)

BACKENDS = ("jit", "exe")


class RunFailed(Exception):
    """The program could not be started: ``kind`` is ``internal`` (our bug) or ``environment``."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass
class RunRequest:
    ir: str
    backend: str = "jit"
    target: StdoutTarget = field(default_factory=StdoutTarget)
    stdin: bytes = b""
    args: list[str] = field(default_factory=list)
    limits: RunLimits = field(default_factory=RunLimits)

    @property
    def argv(self) -> list[str]:
        return ["main", *self.args]


class Runner:
    """Owns the JIT worker; runs one program at a time. With ``caps`` (safe mode) every run's
    limits are brought within them, whoever asked for the run (a bench too)."""

    def __init__(self, caps: LimitCaps | None = None) -> None:
        self.caps = caps
        self.worker = JitWorker()
        self._warm_thread: threading.Thread | None = None
        self.worker_start_seconds: float | None = None

    def warm_up(self) -> None:
        """In the background: start the JIT worker, load the compiler (a first compile imports and
        prepares ~0.2 s of modules and tables) and initialise LLVM here for the `exe` backend, so
        the first cell does not wait for any of it."""
        def start() -> None:
            try:
                self.worker_start_seconds = self.worker.start()
            except Exception:  # reported by the first run that needs it
                pass
            try:
                from .session import warm_compiler
                warm_compiler()
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

    def bounded(self, limits: RunLimits) -> RunLimits:
        """``limits`` within the caps (unchanged without caps)."""
        return self.caps.bound(limits) if self.caps is not None else limits

    def run_blocking(self, req: RunRequest, cancel: threading.Event | None = None) -> RunResult:
        """Run in the calling thread. Raises :class:`RunFailed`."""
        req = RunRequest(req.ir, req.backend, req.target, req.stdin, req.args, self.bounded(req.limits))
        try:
            if req.backend == "exe":
                # The launcher removes the binary and this directory once the program runs, so
                # not even a SIGKILLed kernel leaves them; the context removes them otherwise.
                with tempfile.TemporaryDirectory(prefix=owned_temp_prefix("cell"),
                                                 ignore_cleanup_errors=True) as tmp:
                    path = Path(tmp) / "main"
                    t0 = time.perf_counter()
                    exe_backend.build_executable(req.ir, path)
                    build = time.perf_counter() - t0
                    result = run_executable(path, argv=req.argv, stdin=req.stdin, target=req.target,
                                            limits=req.limits, cancel=cancel, remove_after_start=True)
                    result.compile_seconds = build
                    return result
            return self.worker.run(req.ir, argv=req.argv, stdin=req.stdin, target=req.target,
                                   limits=req.limits, cancel=cancel)
        except native.InvalidIR as e:
            raise RunFailed("internal", f"LLVM refused the generated IR: {e}") from None
        except exe_backend.LinkError as e:
            raise RunFailed("environment", str(e)) from None
        except JitWorkerDied as e:
            raise RunFailed("internal", f"the JIT worker died: {e}") from None
        except OSError as e:
            raise RunFailed("environment", f"cannot run the program: {e}") from None

    def run(self, req: RunRequest) -> tuple[RunResult | None, RunFailed | None, bool]:
        """Run in a helper thread and wait; an interrupt (KeyboardInterrupt in this thread)
        cancels the run. Returns (result, failure, interrupted)."""
        cancel = threading.Event()
        done = threading.Event()
        box: dict = {}

        def target() -> None:
            try:
                box["result"] = self.run_blocking(req, cancel)
            except RunFailed as e:
                box["failed"] = e
            except BaseException as e:  # never let a helper thread die silently
                box["failed"] = RunFailed("internal", f"{type(e).__name__}: {e}")
            finally:
                done.set()

        t = threading.Thread(target=target, name="cancho-run", daemon=True)
        t.start()
        interrupted = False
        # Wait on an Event, not Thread.join: a KeyboardInterrupt inside join() can leave the
        # thread looking finished while it still runs (CPython < 3.13).
        while not done.is_set():
            try:
                done.wait(0.05)
            except KeyboardInterrupt:
                interrupted = True
                cancel.set()
        result = box.get("result")
        if result is not None:
            interrupted = result.interrupted  # what happened, not when the signal came
        return result, box.get("failed"), interrupted
