"""`cancho build` of every example, cold and with a warm build cache, as a user runs it.

``python -m benchmarks.build_cache [--quick] [--runs N] [--json PATH]``

Each build is a fresh ``python -m cancho_kernel.cli build FILES... -o OUT`` process (Python
start-up included: that is what the user waits for), with the build cache in a temporary
directory (``CANCHO_CACHE_DIR``) so the user's own cache is neither used nor filled:

* **cold** — an empty cache directory for every run;
* **warm** — the same program again with the cache the previous build filled.

Baseline in the same run: ``cancho --version`` (Python start-up and the CLI's imports). When the
CLI has no build cache (no ``--no-cache`` in its usage) only cold builds are measured and the
result says so. Medians with min–max; no thresholds.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .example_costs import EXAMPLES, programs
from .harness import REPO_ROOT
from .stats import summarize

CLI = [sys.executable, "-m", "cancho_kernel.cli"]


def _env(cache_dir: str) -> dict[str, str]:
    env = dict(os.environ)
    env["CANCHO_CACHE_DIR"] = cache_dir
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    return env


def _timed(argv: list[str], env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    p = subprocess.run(argv, env=env, capture_output=True, timeout=300)
    return (time.perf_counter() - start) * 1e3, p


def has_cache(env: dict[str, str] | None = None) -> bool:
    """Whether this CLI has a build cache (its usage mentions ``--no-cache``)."""
    p = subprocess.run([*CLI, "--help"], env=env or _env(tempfile.gettempdir()), capture_output=True,
                       timeout=120)
    return b"--no-cache" in p.stdout + p.stderr


def measure(runs: int, only: list[str] | None = None) -> dict[str, Any]:
    """Cold and warm builds of every example, or of those named in ``only`` (as reported, e.g.
    ``examples/hello.cho``, ``examples/sort/``); see the module docstring."""
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="cancho-bench-build-") as tmp:
        base_env = _env(str(Path(tmp) / "unused-cache"))
        cached = has_cache(base_env)
        version: list[float] = []
        for _ in range(runs):
            ms, p = _timed([*CLI, "--version"], base_env)
            if p.returncode != 0:
                return {"status": "failed", "reason": f"cancho --version: {p.stderr.decode(errors='replace')}"}
            version.append(ms)
        for name, files in programs(EXAMPLES):
            if only is not None and name not in only:
                continue
            cold: list[float] = []
            warm: list[float] = []
            failure = None
            for i in range(runs):
                cache_dir = Path(tmp) / f"cache-{len(rows)}-{i}"
                out = Path(tmp) / f"out-{len(rows)}-{i}"
                env = _env(str(cache_dir))
                argv = [*CLI, "build", *map(str, files), "-o", str(out)]
                ms, p = _timed(argv, env)
                if p.returncode != 0 or not out.exists():
                    failure = p.stderr.decode(errors="replace").strip()[-500:]
                    break
                cold.append(ms)
                if cached:
                    out.unlink()
                    ms, p = _timed(argv, env)
                    if p.returncode != 0 or not out.exists():
                        failure = "warm: " + p.stderr.decode(errors="replace").strip()[-500:]
                        break
                    warm.append(ms)
            if failure is not None:
                rows.append({"program": name, "status": "failed", "reason": failure})
                continue
            row: dict[str, Any] = {"program": name, "status": "ok",
                                   "cold_ms": summarize(cold).to_json()}
            if warm:
                row["warm_ms"] = summarize(warm).to_json()
            rows.append(row)
    return {"status": "ok", "runs": runs, "cache": cached,
            "note": None if cached else "the CLI has no build cache: cold builds only",
            "version_ms": summarize(version).to_json(), "rows": rows}


def _fmt(s: dict | None) -> str:
    return "-" if not s else f"{s['median']:.0f} [{s['min']:.0f}–{s['max']:.0f}]"


def format_table(doc: dict[str, Any]) -> str:
    if doc.get("status") != "ok":
        return f"build: {doc.get('status')}: {doc.get('reason')}"
    lines = [f"== cancho build (ms, median [min–max] of {doc['runs']}; process start included) ==",
             f"  {'cancho --version (baseline)':<28} {_fmt(doc['version_ms'])}"]
    if doc.get("note"):
        lines.append(f"  note: {doc['note']}")
    for row in doc["rows"]:
        if row["status"] != "ok":
            lines.append(f"  {row['program']:<28} failed: {row['reason']}")
            continue
        lines.append(f"  {row['program']:<28} cold {_fmt(row['cold_ms']):<20} warm {_fmt(row.get('warm_ms'))}")
    return "\n".join(lines)


def well_formed(doc: dict[str, Any]) -> list[str]:
    """Problems with a result document (empty when every row built and every summary is ordered)."""
    if doc.get("status") != "ok":
        return [f"build: {doc.get('status')}: {doc.get('reason')}"]
    problems = []
    for row in doc["rows"]:
        if row["status"] != "ok":
            problems.append(f"{row['program']}: {row['reason']}")
            continue
        for key in ("cold_ms", "warm_ms"):
            s = row.get(key)
            if s is not None and not 0 < s["min"] <= s["median"] <= s["max"]:
                problems.append(f"{row['program']}.{key} is not ordered")
        if doc["cache"] and "warm_ms" not in row:
            problems.append(f"{row['program']}: no warm builds although the CLI has a cache")
    return problems


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.build_cache",
                                description="cancho build of every example, cold and warm cache.")
    p.add_argument("--quick", action="store_true", help="2 runs")
    p.add_argument("--runs", type=int, default=None, help="builds per program and kind (default 5)")
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--only", action="append", default=None, metavar="PROGRAM",
                   help="only this example (e.g. examples/sort/); repeatable")
    args = p.parse_args(argv)
    runs = args.runs if args.runs is not None else (2 if args.quick else 5)
    if runs < 1:
        p.error("--runs must be at least 1")
    doc = measure(runs, args.only)
    print(format_table(doc))
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(doc, indent=1))
    problems = well_formed(doc)
    for problem in problems:
        print(f"problem: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
