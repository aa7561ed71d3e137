"""The whole benchmark run: build once, verify once, time interleaved, collect a JSON-ready result.

The steps are separate on purpose. Building and verifying happen before any timing so that a timed
number is always the time of a program whose output was checked byte for byte against its C twin
(by sha256). A side that cannot be built or verified does not stop the run: its C twin is still
timed, and the row says what went wrong, so the table is useful while the compiler is unfinished.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from . import harness
from .harness import Built, BuildError, Output, RunFailed, Samples
from .programs import DERIVED, HELLO, OUTPUT_BYTES, PAIRS, Pair

SCHEMA = "cancho-bench/1"
BACKENDS = ("exe", "jit")


@dataclass
class Config:
    """Everything a run depends on; the CLI fills it, tests build it directly."""

    runs: int = 15
    warmup: int = 1
    backends: tuple[str, ...] = ("exe",)
    quick: bool = False
    cc: str = "cc"
    compile_runs: int = 10
    pairs: Sequence[Pair] = PAIRS
    hello: Path = HELLO
    expected_bytes: int | None = OUTPUT_BYTES
    measure_compile: bool = True
    # The seed's program rows (base64, sort; benchmarks/tools.py) and our own costs (example
    # check/compile times, the kernel's hello-cell round trip). Off by default so tests that
    # build a Config for tiny stand-in programs stay tiny; the command line turns them on.
    tools: bool = False
    example_costs: bool = False
    kernel_roundtrip: bool = False
    costs_runs: int = 5
    # How a cancho program becomes an executable; tests substitute a C build so the whole suite
    # can be exercised on tiny C programs without the compiler.
    build_cancho: Callable[[Path, Path], Built] = harness.build_cancho
    log: Callable[[str], None] = field(default=lambda msg: print(msg, file=sys.stderr, flush=True))


def _side(label: str, source: Path) -> dict[str, Any]:
    return {"label": label, "program": _rel(source), "status": "pending", "problems": []}


def _rel(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(harness.REPO_ROOT))
    except ValueError:
        return str(path)


def _verify(side: dict[str, Any], variant: Built, expected_bytes: int | None) -> Output | None:
    """Run once with stdout captured; record digest, size and exit status on the side."""
    try:
        out = harness.capture_output(variant.argv, cwd=variant.cwd, stdin_path=variant.stdin_path,
                                     env=variant.environ())
    except (OSError, TimeoutError) as exc:
        side["problems"].append(f"verification run failed: {exc}")
        return None
    side["output"] = {"sha256": out.sha256, "bytes": out.nbytes, "exit_code": out.exit_code}
    if out.exit_code != 0:
        tail = out.stderr.strip()[-500:]
        side["problems"].append(f"exited {out.exit_code}" + (f": {tail}" if tail else ""))
        return None
    if expected_bytes is not None and out.nbytes != expected_bytes:
        side["problems"].append(f"wrote {out.nbytes} bytes, expected {expected_bytes}")
        return None
    return out


def _record_timing(side: dict[str, Any], samples: Samples) -> None:
    side["timing"] = samples.summary()
    side["status"] = "ok"


def run_row(pair: Pair, backend: str, c_variant: Built | None, c_out: Output | None,
            cancho_variant: Built | None, cancho_problem: str | None, cfg: Config,
            runner: harness.Runner = harness.default_runner) -> dict[str, Any]:
    """Verify the cancho side against the C side, then time them interleaved.

    ``c_out`` is the C side's verified output (None if it failed); ``cancho_problem`` says why
    there is no cancho variant. A side that cannot be timed keeps its problems and the row's
    status becomes "failed"; the other side is still timed alone so its numbers are reported.
    """
    row: dict[str, Any] = {
        "key": pair.key,
        "title": pair.title,
        "backend": backend,
        "status": "pending",
        "cancho": _side(pair.cancho_label, pair.cancho_source),
        "c": _side(pair.c_label, pair.c_source),
        "ratio": None,
        "outputs_equal": None,
        "reference": pair.reference.to_json(),
        "note": None,
    }
    c_side, k_side = row["c"], row["cancho"]
    if c_variant is None or c_out is None:
        c_side["status"] = "failed"
        c_side["problems"].append("C twin did not build or verify")
    else:
        c_side["build_ms"] = c_variant.build_ms
        c_side["output"] = {"sha256": c_out.sha256, "bytes": c_out.nbytes, "exit_code": 0}
    if cancho_variant is None:
        k_side["status"] = "failed"
        k_side["problems"].append(cancho_problem or "not built")
    else:
        k_side["build_ms"] = cancho_variant.build_ms
        row["note"] = cancho_variant.note
        k_out = _verify(k_side, cancho_variant, cfg.expected_bytes)
        if k_out is None:
            k_side["status"] = "failed"
        elif c_out is not None:
            row["outputs_equal"] = k_out.sha256 == c_out.sha256
            if not row["outputs_equal"]:
                k_side["status"] = "failed"
                k_side["problems"].append(
                    f"output differs from the C twin (sha256 {k_out.sha256[:16]}… vs "
                    f"{c_out.sha256[:16]}…, {k_out.nbytes} vs {c_out.nbytes} bytes)")

    timed = [(side, v) for side, v in ((k_side, cancho_variant), (c_side, c_variant))
             if v is not None and side["status"] == "pending"]
    if timed:
        cfg.log(f"timing {pair.key} [{backend}]: " + " vs ".join(side["label"] for side, _ in timed)
                + f", {cfg.runs} runs each")
        try:
            samples = harness.time_interleaved([v for _, v in timed], cfg.runs, cfg.warmup, runner)
        except RunFailed as exc:
            for side, _ in timed:
                side["status"] = "failed"
                side["problems"].append(str(exc))
        else:
            for side, v in timed:
                _record_timing(side, samples[v.name])
            if len(timed) == 2:
                row["ratio"] = harness.compare(samples[cancho_variant.name],  # type: ignore[union-attr]
                                               samples[c_variant.name]).to_json()  # type: ignore[union-attr]
    row["status"] = "ok" if k_side["status"] == "ok" and c_side["status"] == "ok" else "failed"
    return row


def _build_all(cfg: Config, workdir: Path) -> tuple[dict[str, Built | str], dict[str, Built | str],
                                                     list[dict[str, Any]]]:
    """Build every C twin and (for the exe backend) every cancho program, once each."""
    c_built: dict[str, Built | str] = {}
    k_built: dict[str, Built | str] = {}
    builds: list[dict[str, Any]] = []
    for pair in cfg.pairs:
        out = workdir / f"c_{pair.key}"
        try:
            c_built[pair.key] = harness.build_c(pair.c_source, out, cc=cfg.cc)
            builds.append({"program": _rel(pair.c_source), "builder": f"{cfg.cc} -O2",
                           "status": "ok", "ms": c_built[pair.key].build_ms})  # type: ignore[union-attr]
        except BuildError as exc:
            c_built[pair.key] = str(exc)
            builds.append({"program": _rel(pair.c_source), "builder": f"{cfg.cc} -O2",
                           "status": "failed", "reason": str(exc)})
        if "exe" in cfg.backends:
            out = workdir / f"cancho_{pair.key}"
            cfg.log(f"building {_rel(pair.cancho_source)}")
            try:
                k_built[pair.key] = cfg.build_cancho(pair.cancho_source, out)
                builds.append({"program": _rel(pair.cancho_source), "builder": "cancho build",
                               "status": "ok", "ms": k_built[pair.key].build_ms})  # type: ignore[union-attr]
            except BuildError as exc:
                k_built[pair.key] = str(exc)
                builds.append({"program": _rel(pair.cancho_source), "builder": "cancho build",
                               "status": "failed", "reason": str(exc)})
    return c_built, k_built, builds


def measure_compile(cfg: Config) -> dict[str, Any]:
    """Run benchmarks.compile_time in a child process and return its JSON (or why it failed)."""
    cmd = [sys.executable, "-m", "benchmarks.compile_time", str(cfg.hello),
           "--runs", str(cfg.compile_runs)]
    try:
        proc = subprocess.run(cmd, cwd=harness.REPO_ROOT, capture_output=True, text=True,
                              timeout=300, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return {"status": "failed", "reason": "compile measurement timed out",
                "program": _rel(cfg.hello)}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = proc.stderr.strip()[-500:]
        return {"status": "failed", "program": _rel(cfg.hello),
                "reason": f"measurement process exited {proc.returncode}: {tail}"}
    result: dict[str, Any] = json.loads(lines[-1])
    result["program"] = _rel(Path(result.get("program", cfg.hello)))
    return result


def derived_ratios(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Between-row ratios the seed argues from (e.g. 33.7 / 3.0 = 11x), on the exe rows."""
    medians: dict[tuple[str, str], float] = {}
    for row in rows:
        if row["backend"] != "exe":
            continue
        for side in ("cancho", "c"):
            timing = row[side].get("timing")
            if timing:
                medians[(row["key"], side)] = timing["wall_ms"]["median"]
    out = []
    for title, num, den, ref in DERIVED:
        value = medians[num] / medians[den] if num in medians and den in medians else None
        out.append({"title": title, "ratio": value, "reference": round(ref, 3)})
    return out


def host_info(cc: str) -> dict[str, Any]:
    """Enough about the machine to tell two result files apart."""
    try:
        cc_version = subprocess.run([cc, "--version"], capture_output=True, text=True,
                                    timeout=30).stdout.splitlines()[0]
    except (OSError, IndexError, subprocess.TimeoutExpired):
        cc_version = None
    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "cc": cc_version,
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "maxrss_floor_kib": harness.maxrss_floor_kib(),
    }


def run_suite(cfg: Config, runner: harness.Runner = harness.default_runner) -> dict[str, Any]:
    """Build, verify and time everything; returns the JSON document (see report.validate)."""
    for b in cfg.backends:
        if b not in BACKENDS:
            raise ValueError(f"unknown backend {b!r}")
    started = _dt.datetime.now(_dt.timezone.utc)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="cancho-bench-") as tmp:
        workdir = Path(tmp)
        c_built, k_built, builds = _build_all(cfg, workdir)
        for pair in cfg.pairs:
            c_entry = c_built.get(pair.key)
            c_variant = None
            if isinstance(c_entry, Built):
                # Names only need to be distinct within one row's schedule.
                c_variant = Built("C", c_entry.argv, c_entry.build_ms)
            c_out = None
            if c_variant is not None:
                probe: dict[str, Any] = {"problems": []}
                c_out = _verify(probe, c_variant, cfg.expected_bytes)
                if c_out is None:
                    cfg.log(f"C twin {pair.c_source.name}: {'; '.join(probe['problems'])}")
            for backend in cfg.backends:
                variant: Built | None
                if backend == "exe":
                    entry = k_built.get(pair.key)
                    variant = Built("cancho", entry.argv, entry.build_ms) \
                        if isinstance(entry, Built) else None
                    problem = None if variant else str(entry)
                else:
                    jit = harness.cancho_jit(pair.cancho_source)
                    variant = Built("cancho", jit.argv, None, jit.cwd, jit.note)
                    problem = None
                rows.append(run_row(pair, backend, c_variant, c_out, variant, problem, cfg,
                                    runner))
        if cfg.tools:
            from .tools import run_tool_rows

            tool_rows, tool_builds = run_tool_rows(cfg, workdir, runner)
            rows += tool_rows
            builds += tool_builds
    compile_row = measure_compile(cfg) if cfg.measure_compile else {
        "status": "unavailable", "reason": "not requested", "program": _rel(cfg.hello)}
    costs: dict[str, Any] = {}
    if cfg.example_costs:
        cfg.log("measuring check/compile time of the example programs")
        costs["examples"] = measure_example_costs(cfg)
    if cfg.kernel_roundtrip:
        cfg.log("measuring the kernel's hello-cell round trip")
        from .kernel_roundtrip import measure as roundtrip

        costs["kernel_roundtrip"] = roundtrip(cfg.costs_runs)
    return {
        "schema": SCHEMA,
        "created": started.isoformat(timespec="seconds"),
        "settings": {"runs": cfg.runs, "warmup": cfg.warmup, "quick": cfg.quick,
                     "backends": list(cfg.backends), "interleaved": True,
                     "stdout": os.devnull, "output_bytes": cfg.expected_bytes},
        "host": host_info(cfg.cc),
        "rows": rows,
        "derived": derived_ratios(rows),
        "builds": builds,
        "compile": compile_row,
        "costs": costs,
    }


def measure_example_costs(cfg: Config) -> dict[str, Any]:
    """benchmarks.example_costs in a child process (a compiler crash must not end the run)."""
    cmd = [sys.executable, "-m", "benchmarks.example_costs", "--runs", str(cfg.costs_runs)]
    try:
        proc = subprocess.run(cmd, cwd=harness.REPO_ROOT, capture_output=True, text=True,
                              timeout=600, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return {"status": "failed", "reason": "timed out"}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"status": "failed", "reason": f"exited {proc.returncode}: {proc.stderr.strip()[-500:]}"}
    result: dict[str, Any] = json.loads(lines[-1])
    return result
