"""Our own costs, part one: how long each example program takes to check and compile.

``python -m benchmarks.example_costs [--runs N]`` prints one JSON object: for every program under
``examples/`` (a lone ``.cho`` file, or every ``.cho`` file of a folder, e.g. ``serve/``), the
median milliseconds of ``check`` (parse, resolve, types, linearity, effects), ``lower`` (LLVM IR)
and ``object`` (O2 and machine code, what ``cancho build`` does before linking), measured in one
warm process after one untimed compile of each program. Its own process, like compile_time.py,
because a half-written compiler may raise or crash: a program that fails says why.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import traceback
from pathlib import Path

from .harness import REPO_ROOT

EXAMPLES = REPO_ROOT / "examples"


def programs(root: Path = EXAMPLES) -> list[tuple[str, list[Path]]]:
    out = [(p.relative_to(REPO_ROOT).as_posix(), [p]) for p in sorted(root.glob("*.cho"))]
    for d in sorted(x for x in root.iterdir() if x.is_dir()):
        files = sorted(d.glob("*.cho"))
        if files:
            out.append((d.relative_to(REPO_ROOT).as_posix() + "/", files))
    return out


def measure(files: list[Path], runs: int) -> dict:
    from cancho_kernel.compiler import api
    from cancho_kernel.compiler.backends import native

    def once() -> dict[str, float]:
        sources = api.load_sources(files)
        res = api.compile_sources(sources)
        if not res.ok:
            first = res.diagnostics[0] if res.diagnostics else None
            raise RuntimeError(f"refused: {first.rule}: {first.message}" if first else "no IR")
        t0 = time.perf_counter()
        native.emit_object(res.ir)
        return {"check": res.timings["check"] * 1e3, "lower": res.timings["lower"] * 1e3,
                "object": (time.perf_counter() - t0) * 1e3}

    try:
        once()
        samples: dict[str, list[float]] = {}
        for _ in range(runs):
            for k, v in once().items():
                samples.setdefault(k, []).append(v)
    except Exception as exc:
        return {"status": "failed", "reason": traceback.format_exception_only(type(exc), exc)[-1].strip()}
    return {"status": "ok", "runs": runs,
            "ms": {k: {"n": len(v), "median": statistics.median(v), "min": min(v), "max": max(v)}
                   for k, v in samples.items()}}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.example_costs")
    p.add_argument("--runs", type=int, default=5)
    args = p.parse_args(argv)
    sys.path.insert(0, str(REPO_ROOT))
    result = []
    for name, files in programs():
        row = measure(files, max(1, args.runs))
        row["program"] = name
        row["files"] = [f.name for f in files]
        result.append(row)
    print(json.dumps({"status": "ok", "programs": result}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
