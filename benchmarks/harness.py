"""Running, building, verifying and timing the benchmark programs.

Why processes are started with ``os.posix_spawn`` and reaped with ``os.wait4``: ``subprocess.run``
adds pipe and thread set-up that is not part of the program, and it throws the child's resource
usage away. ``wait4`` returns the child's user time, system time and peak RSS, so a row can show
whether a difference is in user code (the loop) or in the kernel (the write calls).

Nothing here ever compares a time with a threshold: the machine is shared and noisy, so the harness
reports numbers and the reader judges them.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from .stats import RatioSummary, Summary, ratio_summary, summarize

REPO_ROOT = Path(__file__).resolve().parent.parent
DEV_NULL = os.devnull


@dataclass(frozen=True)
class RunResult:
    """One measured process run."""

    wall_ns: int
    user_ns: int
    sys_ns: int
    maxrss_kib: int  # Linux reports ru_maxrss in KiB
    exit_code: int  # negative: killed by that signal (os.waitstatus_to_exitcode convention)


def maxrss_floor_kib() -> int:
    """Peak RSS wait4 reports for ``/bin/true``.

    Linux folds the spawning process's pre-exec memory into the child's ru_maxrss (posix_spawn
    shares the parent's address space until exec), so a small C program shows the harness's own
    size. This floor tells the reader which RSS figures mean nothing.
    """
    true = shutil.which("true") or "/bin/true"
    return spawn_measured([true]).maxrss_kib


def _resolve(argv0: str) -> str:
    """posix_spawn wants a path, not a name to look up, so resolve it once before timing."""
    if os.sep in argv0:
        return argv0
    found = shutil.which(argv0)
    if found is None:
        raise FileNotFoundError(f"command not found: {argv0}")
    return found


def spawn_measured(argv: Sequence[str], *, stdout_path: str = DEV_NULL,
                   cwd: str | Path | None = None, env: dict[str, str] | None = None,
                   stdin_path: str = DEV_NULL) -> RunResult:
    """Run argv once with stdin from ``stdin_path`` (default /dev/null), stderr to /dev/null and
    stdout to ``stdout_path``.

    The wall time brackets posix_spawn and wait4 only, so it includes process start-up and exit
    (the libc flush of stdout happens at exit, which is part of what is being measured) but not
    any Python-side preparation. stderr goes to /dev/null because timed runs have already been
    verified once with stderr captured (see ``capture_output``).
    """
    path = _resolve(argv[0])
    actions = [
        (os.POSIX_SPAWN_OPEN, 0, stdin_path, os.O_RDONLY, 0),
        (os.POSIX_SPAWN_OPEN, 1, stdout_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644),
        (os.POSIX_SPAWN_OPEN, 2, DEV_NULL, os.O_WRONLY, 0),
    ]
    spawn_env = dict(os.environ if env is None else env)
    old_cwd = None
    if cwd is not None:
        # posix_spawn has no cwd argument before Python 3.13's file action; chdir around it.
        old_cwd = os.getcwd()
        os.chdir(cwd)
    try:
        t0 = time.perf_counter_ns()
        pid = os.posix_spawn(path, list(argv), spawn_env, file_actions=actions)
        _, status, usage = os.wait4(pid, 0)
        t1 = time.perf_counter_ns()
    finally:
        if old_cwd is not None:
            os.chdir(old_cwd)
    return RunResult(
        wall_ns=t1 - t0,
        user_ns=round(usage.ru_utime * 1e9),
        sys_ns=round(usage.ru_stime * 1e9),
        maxrss_kib=int(usage.ru_maxrss),
        exit_code=os.waitstatus_to_exitcode(status),
    )


@dataclass(frozen=True)
class Output:
    """What one verification run produced: the digest is what the C/cancho comparison uses."""

    sha256: str
    nbytes: int
    exit_code: int
    stderr: str


def capture_output(argv: Sequence[str], *, cwd: str | Path | None = None,
                   timeout: float = 120.0, stdin_path: str | None = None,
                   env: dict[str, str] | None = None) -> Output:
    """Run argv once, hashing stdout as it streams (8 MiB need not be held in memory)."""
    digest = hashlib.sha256()
    nbytes = 0
    stdin = open(stdin_path, "rb") if stdin_path else subprocess.DEVNULL
    try:
        proc = subprocess.Popen(list(argv), stdin=stdin, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, cwd=cwd, env=env)
    finally:
        if stdin_path:
            stdin.close()  # type: ignore[union-attr]
    with proc:
        assert proc.stdout is not None and proc.stderr is not None
        # stderr is small for these programs; read stdout to EOF first, then stderr. A program
        # that floods stderr could block here, which none of ours does.
        deadline = time.monotonic() + timeout
        while True:
            chunk = proc.stdout.read(1 << 16)
            if not chunk:
                break
            digest.update(chunk)
            nbytes += len(chunk)
            if time.monotonic() > deadline:
                proc.kill()
                raise TimeoutError(f"{argv[0]} ran longer than {timeout} s")
        err = proc.stderr.read().decode("utf-8", "replace")
        code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    return Output(digest.hexdigest(), nbytes, code, err)


class BuildError(RuntimeError):
    """A program did not build; the message carries the builder's stderr for the report."""


@dataclass(frozen=True)
class Built:
    """A runnable variant: the command that runs it and how long building it took."""

    name: str
    argv: tuple[str, ...]
    build_ms: float | None = None
    cwd: str | None = None
    note: str | None = None
    stdin_path: str | None = None   # a file given as standard input (default /dev/null)
    env: tuple[tuple[str, str], ...] = ()  # variables added to the environment (LC_ALL=C)

    def environ(self) -> dict[str, str] | None:
        return {**os.environ, **dict(self.env)} if self.env else None


def _run_builder(label: str, cmd: Sequence[str], *, cwd: str | Path | None,
                 timeout: float) -> float:
    """Run a build command; returns its wall time in ms or raises BuildError naming ``label``."""
    t0 = time.perf_counter_ns()
    try:
        proc = subprocess.run(list(cmd), cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise BuildError(f"{label}: timed out after {timeout} s") from exc
    except OSError as exc:
        raise BuildError(f"{label}: {exc}") from exc
    ms = (time.perf_counter_ns() - t0) / 1e6
    if proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip()
        if len(detail) > 2000:
            detail = detail[:2000] + " …"
        raise BuildError(f"{label} exited {proc.returncode}: {detail}")
    return ms


def build_c(source: Path, out: Path, *, cc: str = "cc", timeout: float = 120.0) -> Built:
    """``cc -O2`` as in runtime.md §10.1 (the seed's C twins were built that way)."""
    ms = _run_builder(f"{cc} -O2 {source.name}", [cc, "-O2", str(source), "-o", str(out)],
                      cwd=None, timeout=timeout)
    return Built(source.name, (str(out),), ms)


def cancho_cli(*args: str) -> list[str]:
    """The CLI as a module of this checkout, so the harness needs no installed console script."""
    return [sys.executable, "-m", "cancho_kernel.cli", *args]


def build_cancho(source: Path, out: Path, *, timeout: float = 300.0) -> Built:
    """``cancho build SOURCE -o OUT``; the timing includes the CLI's Python start-up."""
    ms = _run_builder(f"cancho build {source.name}",
                      cancho_cli("build", str(source), "-o", str(out)), cwd=REPO_ROOT,
                      timeout=timeout)
    return Built(source.name, (str(out),), ms)


def cancho_jit(source: Path) -> Built:
    """``cancho run --backend jit SOURCE``: compiled and run in one process, so every timed run
    includes Python start-up and compilation, not only the program."""
    return Built(source.name + " [jit]", tuple(cancho_cli("run", "--backend", "jit", str(source))),
                 None, str(REPO_ROOT),
                 "jit: each run includes process start-up and compilation")


def interleaved_schedule(labels: Sequence[str], runs: int, warmup: int) -> list[tuple[str, bool]]:
    """The order of runs: ``warmup`` rounds then ``runs`` rounds of A B A B ….

    Interleaving means a slow spell on the machine hits both variants alike instead of landing
    on all of one; the paired ratio of round i then compares like with like. Each entry is
    (label, is_warmup); warm-up runs are made but not recorded (they load the binary and libc into
    the page cache).
    """
    if runs < 1:
        raise ValueError("runs must be at least 1")
    if warmup < 0:
        raise ValueError("warmup must not be negative")
    order: list[tuple[str, bool]] = []
    for rnd in range(warmup + runs):
        for label in labels:
            order.append((label, rnd < warmup))
    return order


@dataclass
class Samples:
    """Recorded runs of one variant, in schedule order."""

    runs: list[RunResult] = field(default_factory=list)

    def wall_ms(self) -> list[float]:
        return [r.wall_ns / 1e6 for r in self.runs]

    def summary(self) -> dict[str, object]:
        """JSON-ready summary: wall, user and sys in ms, peak RSS in KiB, plus the raw walls."""
        return {
            "wall_ms": summarize(self.wall_ms()).to_json(),
            "user_ms": summarize([r.user_ns / 1e6 for r in self.runs]).to_json(),
            "sys_ms": summarize([r.sys_ns / 1e6 for r in self.runs]).to_json(),
            "maxrss_kib": summarize([float(r.maxrss_kib) for r in self.runs]).to_json(),
            "samples_ms": [round(x, 4) for x in self.wall_ms()],
        }


class RunFailed(RuntimeError):
    """A timed run exited non-zero: its time would not be the time of the program that was
    verified, so the row is reported as failed instead."""


Runner = Callable[[Built], RunResult]


def default_runner(variant: Built) -> RunResult:
    return spawn_measured(variant.argv, cwd=variant.cwd, env=variant.environ(),
                          stdin_path=variant.stdin_path or DEV_NULL)


def time_interleaved(variants: Sequence[Built], runs: int, warmup: int,
                     runner: Runner = default_runner) -> dict[str, Samples]:
    """Time the variants together on one interleaved schedule; returns samples per variant name."""
    by_name = {v.name: v for v in variants}
    if len(by_name) != len(variants):
        raise ValueError("variant names must be distinct")
    samples = {v.name: Samples() for v in variants}
    for name, is_warmup in interleaved_schedule([v.name for v in variants], runs, warmup):
        result = runner(by_name[name])
        if result.exit_code != 0:
            raise RunFailed(f"{name} exited {result.exit_code} during timing")
        if not is_warmup:
            samples[name].runs.append(result)
    return samples


def compare(a: Samples, b: Samples) -> RatioSummary:
    """a/b wall-time ratios of one interleaved schedule."""
    return ratio_summary(a.wall_ms(), b.wall_ms())


def wall_summary(s: Samples) -> Summary:
    return summarize(s.wall_ms())
