"""Compile latency: source text to a runnable JIT function, in a warm process.

This is the number a notebook user feels on every cell, so it is measured the way the kernel pays it:
imports done and one compile already made (warm), then ``compile_sources`` (parse, check, lower to
LLVM IR) followed by the JIT backend's optimise-and-finalize, repeated and summarised by the median.

It runs as its own process (``python -m benchmarks.compile_time FILE``, one JSON object on stdout)
because runtime.md §13.6 warns against running LLVM in a process that may fork later, and because a
half-written compiler may raise or crash: the harness then reports the row "unavailable" or
"failed" with the reason instead of dying.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable

from .harness import REPO_ROOT


def _backend_jit() -> tuple[Callable[[str], object], str]:
    """The project's MCJIT compile, exactly what the JIT worker does before it forks a run:
    parse, verify, O2, MCJIT finalize, resolve `main`. The engine is returned and kept alive by
    the caller's result."""
    from cancho_kernel.compiler.backends import mcjit

    return mcjit.compile_ir, "cancho_kernel.compiler.backends.mcjit.compile_ir"


def measure(path: Path, runs: int) -> dict[str, Any]:
    """Median compile latency of ``path``; never raises, the outcome is in ``status``."""
    if not path.exists():
        return {"status": "unavailable", "reason": f"{path} does not exist yet", "program": str(path)}
    try:
        from cancho_kernel.compiler.api import compile_sources, load_sources
    except Exception as exc:  # an import error of a half-built compiler is "not available yet"
        return {"status": "unavailable", "reason": f"compiler API not importable: {exc!r}",
                "program": str(path)}
    try:
        jit, method = _backend_jit()
    except Exception as exc:
        return {"status": "unavailable", "reason": f"no JIT available: {exc!r}", "program": str(path)}

    def once() -> tuple[float, dict[str, float]]:
        t0 = time.perf_counter_ns()
        sources = load_sources([path])
        result = compile_sources(sources)
        if not result.ok:
            msgs = "; ".join(str(getattr(d, "message", d)) for d in result.diagnostics[:5])
            raise RuntimeError(f"compile_sources refused the program: {msgs}")
        t1 = time.perf_counter_ns()
        jit(result.ir)
        t2 = time.perf_counter_ns()
        phases = {k: v * 1e3 for k, v in result.timings.items()}
        phases["front_end"] = (t1 - t0) / 1e6
        phases["jit"] = (t2 - t1) / 1e6
        return (t2 - t0) / 1e6, phases

    try:
        once()  # warm-up: imports, llvmlite initialisation, first-use caches
        totals: list[float] = []
        phase_samples: dict[str, list[float]] = {}
        for _ in range(runs):
            total, phases = once()
            totals.append(total)
            for k, v in phases.items():
                phase_samples.setdefault(k, []).append(v)
    except ImportError as exc:
        # A compiler module that is not written yet (the API imports lazily).
        return {"status": "unavailable", "reason": f"compiler not complete: {exc!r}",
                "program": str(path)}
    except Exception as exc:
        tb = traceback.format_exception_only(type(exc), exc)[-1].strip()
        return {"status": "failed", "reason": tb, "program": str(path)}
    return {
        "status": "ok",
        "program": str(path),
        "method": method,
        "ms": {"n": len(totals), "median": statistics.median(totals), "min": min(totals),
               "max": max(totals)},
        "phases_median_ms": {k: statistics.median(v) for k, v in phase_samples.items()},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.compile_time")
    parser.add_argument("file", type=Path)
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(REPO_ROOT))
    print(json.dumps(measure(args.file.resolve(), max(1, args.runs))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
