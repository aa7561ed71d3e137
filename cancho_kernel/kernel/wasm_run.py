"""`%%run --target wasm32-wasip1`: a cell's program built as a WASI module and run by wasmtime.

The module is linked by the WASI toolchain (``compiler/backends/wasm.py``) in a temporary
directory and run in the WASI child (``backends/wasi_runner.py``) through the same run model as
an executable (``backends/process.py``): the cell's stdin, its stdout target, its arguments, its
limits (an address-space limit makes the runtime reserve its memory small), the interruptible
wait. The module reaches only the directories ``WASMTIME_FLAGS`` grants. A trap is the
runtime's: a line on stderr and status 134 (docs/cli.md), which `--expect-trap` expects here.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from ..compiler.backends.process import RunResult, owned_temp_prefix, run_executable
from ..compiler.run import FailureKind, RunFailed, failures_mapped, interruptible
from .runner import RunOutcome

TRAP_STATUS = 134  # backends/wasi_runner.py's status for a trap


def run_module(runner, ir: str, opts) -> RunOutcome:
    """Build and run ``ir`` (made for wasm32) with ``opts`` (a cell's RunOptions)."""
    from ..compiler.backends import wasm

    if not wasm.runtime_available():
        return RunOutcome(None, RunFailed(FailureKind.ENVIRONMENT, "cannot run a `wasm32-wasip1` module: "
                                          f"no WASI runtime; {wasm.RUNTIME_HINT}"), False)
    bounded = getattr(runner, "bounded", None)
    limits = bounded(opts.limits) if bounded is not None else opts.limits

    def work(cancel) -> RunResult:
        with tempfile.TemporaryDirectory(prefix=owned_temp_prefix("cell")) as tmp:
            module = Path(tmp) / "main.wasm"
            with failures_mapped(lambda e: f"cannot run the WASI runtime: {e.strerror or e}"):
                wasm.build_wasm(ir, module)
                argv = wasm.runner_argv(module, opts.args, "main")
                result = run_executable(argv[0], argv, opts.stdin, opts.target, limits, cancel)
            result.backend = "wasm32-wasip1"
            return result

    waited = interruptible(work, name="cancho-wasm-run")
    error = waited.error
    failure = error if isinstance(error, RunFailed) or error is None else \
        RunFailed(FailureKind.INTERNAL, f"{type(error).__name__}: {error}")
    result = waited.value
    interrupted = result.interrupted if result is not None else waited.interrupted
    return RunOutcome(result, failure, interrupted)
