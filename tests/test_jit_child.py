"""The child side of a JIT run, both ways it can be started: the C child (``jit_child.CHILD_SOURCE``,
the fast path) and the Python fallback (a worker started with ``CANCHO_JIT_PYTHON_CHILD=1``).

Each must be indistinguishable from the exe backend: same bytes, same status, same death, same
limits, and nothing of the worker's own descriptors left open in the program. The programs are
the hand-written IR of ``test_backends.py``.
"""

from __future__ import annotations

import os
import signal

import pytest

from cancho_kernel.compiler.backends import mcjit
from cancho_kernel.compiler.backends.jit import JitWorker
from cancho_kernel.compiler.backends.jit_worker import PYTHON_CHILD_ENV
from cancho_kernel.compiler.backends.process import (
    RunLimits,
    RunResult,
    StdoutTarget,
    run_executable,
)
from test_backends import (
    ARGV,
    ECHO_STDIN,
    HELLO,
    LOOP_FOREVER,
    SEGFAULT,
    SHORT_WRITES,
    SMALL_OUTPUT_THEN_TRAP,
    TRAP_AFTER_OUTPUT,
    program,
    returns,
)

# Counts the program's open descriptors above 2 (fcntl(fd, F_GETFD) succeeds) among 3..255.
OPEN_DESCRIPTORS = program(r"""
declare i32 @fcntl(i32, i32, ...)
define i64 @lexs_main() {
entry:
  br label %loop
loop:
  %fd = phi i32 [3, %entry], [%next, %loop]
  %count = phi i64 [0, %entry], [%count2, %loop]
  %r = call i32 (i32, i32, ...) @fcntl(i32 %fd, i32 1)
  %open = icmp sge i32 %r, 0
  %inc = zext i1 %open to i64
  %count2 = add i64 %count, %inc
  %next = add i32 %fd, 1
  %done = icmp eq i32 %next, 256
  br i1 %done, label %exit, label %loop
exit:
  ret i64 %count2
}
""")

MALLOC_1GIB = program(r"""
declare ptr @malloc(i64)
define i64 @lexs_main() {
entry:
  %p = call ptr @malloc(i64 1073741824)
  %null = icmp eq ptr %p, null
  br i1 %null, label %none, label %some
none:
  ret i64 9
some:
  store volatile i8 1, ptr %p
  ret i64 0
}
""")


@pytest.fixture(scope="module", params=["c", "python"])
def worker(request):
    if request.param == "c" and not mcjit.native_child_available():
        pytest.skip("no C compiler: the C child cannot be built (the Python one is tested)")
    env = {PYTHON_CHILD_ENV: "1"} if request.param == "python" else {PYTHON_CHILD_ENV: "0"}
    w = JitWorker(env=env)
    w.start()
    assert w.child == request.param  # a silent fallback to the slow child would be a regression
    yield w
    w.close()


def both(built, worker, ir: str, argv=("prog",), stdin: bytes = b"",
         target: StdoutTarget = StdoutTarget.pipe(),
         limits: RunLimits = RunLimits(timeout=20)) -> tuple[RunResult, RunResult]:
    return (run_executable(built(ir), list(argv), stdin, target, limits),
            worker.run(ir, list(argv), stdin, target, limits))


def same(a: RunResult, b: RunResult) -> None:
    for field in ("stdout", "stderr", "exit_status", "signal", "stdout_total", "stderr_total",
                  "timed_out", "interrupted"):
        assert getattr(a, field) == getattr(b, field), field
    assert a.describe() == b.describe()


CASES = [
    pytest.param(HELLO, StdoutTarget.pipe(), id="hello"),
    pytest.param(HELLO, StdoutTarget.dev_full(), id="hello-dev-full"),
    pytest.param(HELLO, StdoutTarget.closed(), id="hello-closed"),
    pytest.param(HELLO, StdoutTarget.broken_pipe(), id="hello-broken-pipe"),
    pytest.param(SHORT_WRITES, StdoutTarget.dev_full(), id="short-writes"),
    pytest.param(SMALL_OUTPUT_THEN_TRAP, StdoutTarget.pipe(), id="buffered-then-trap"),
    pytest.param(TRAP_AFTER_OUTPUT, StdoutTarget.pipe(), id="trap"),
    pytest.param(SEGFAULT, StdoutTarget.pipe(), id="segfault"),
    pytest.param(returns(300), StdoutTarget.pipe(), id="status-300"),
    pytest.param(returns(-1), StdoutTarget.pipe(), id="status-minus-1"),
]


@pytest.mark.parametrize("ir,target", CASES)
def test_child_is_indistinguishable_from_exe(built, worker, ir, target):
    a, b = both(built, worker, ir, target=target)
    same(a, b)


def test_no_descriptor_of_the_worker_reaches_the_program(worker):
    """The worker's socket, the run's pipe ends and its copies of the stdio descriptors are all
    close-on-exec, so the program (as after exec) has nothing open above 2. (The exe side is not
    compared: it inherits whatever the test process left inheritable.)"""
    r = worker.run(OPEN_DESCRIPTORS, ["prog"], b"", StdoutTarget.pipe(), RunLimits(timeout=20))
    assert r.exit_status == 0


def test_stdin_and_argv(built, worker):
    a, b = both(built, worker, ECHO_STDIN, stdin=b"abc\x00\xff")
    assert b.stdout == b"abc\x00\xff" + bytes([65])
    same(a, b)
    a, b = both(built, worker, ARGV, argv=["prog", "one", "two words", ""])
    assert b.stdout == b"one\ntwo words\n\n" and b.exit_status == 4
    same(a, b)


def test_memory_limit(built, worker):
    a, b = both(built, worker, MALLOC_1GIB, limits=RunLimits(timeout=20, memory=256 << 20))
    assert a.exit_status == b.exit_status == 9
    b = worker.run(MALLOC_1GIB, ["prog"], b"", StdoutTarget.pipe(), RunLimits(timeout=20))
    assert b.exit_status == 0  # without the limit the same program gets its gigabyte


def test_cpu_limit_kills_with_sigxcpu(worker):
    r = worker.run(LOOP_FOREVER, ["prog"], b"", StdoutTarget.pipe(),
                   RunLimits(timeout=30, cpu_seconds=1))
    assert r.signal == signal.SIGXCPU and not r.timed_out


def test_timeout_kills_the_child(worker):
    r = worker.run(LOOP_FOREVER, ["prog"], b"", StdoutTarget.pipe(), RunLimits(timeout=0.3))
    assert r.timed_out and r.signal == signal.SIGKILL


def test_worker_keeps_serving_after_runs(worker):
    pid = worker.pid
    for _ in range(3):
        assert worker.run(HELLO).stdout == b"hello\n"
    assert worker.pid == pid
    assert os.path.exists(f"/proc/{pid}")


# -- helpers checked by hash before use (chelper.py, issue 22) ----------------------------------------

import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

from cancho_kernel.compiler.backends import chelper, jit_child  # noqa: E402
from cancho_kernel.compiler.backends.measure import SOURCE as LAUNCHER_SOURCE  # noqa: E402

needs_cc = pytest.mark.skipif(chelper.c_compiler() is None, reason="no C compiler")
LAUNCHER = chelper.HelperSpec(LAUNCHER_SOURCE, "measure")


def plant_script(path: Path, marker: Path) -> None:
    """A helper of the right name that is a shell script touching ``marker`` when run."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\ntouch {marker}\n")
    path.chmod(0o755)


def plant_library(path: Path, marker: Path) -> None:
    """A shared object of the right name whose constructor creates ``marker`` when loaded."""
    src = path.parent / "planted.c"
    path.parent.mkdir(parents=True, exist_ok=True)
    src.write_text("#include <stdio.h>\n__attribute__((constructor)) static void planted(void) {"
                   f" FILE *f = fopen(\"{marker}\", \"w\"); if (f) fclose(f); }}\n"
                   "int cancho_jit_spawn(void) { return -38; }\n")
    subprocess.run([*chelper.c_compiler(), "-shared", "-fPIC", "-o", str(path), str(src)], check=True)
    src.unlink()


def exe_run_in(env: dict[str, str], program: str) -> subprocess.CompletedProcess:
    """Run ``program`` through the exe backend's launcher in a fresh process with ``env``."""
    code = ("from cancho_kernel.compiler.backends.process import run_executable\n"
            f"r = run_executable({program!r}, ['p'])\n"
            "print(r.stdout.decode(), end='')\n")
    return subprocess.run([sys.executable, "-c", code], env={**os.environ, **env},
                          capture_output=True, timeout=120)


@needs_cc
@pytest.mark.parametrize("recorded", [False, True], ids=["planted-first", "replaced-later"])
def test_a_planted_launcher_is_never_executed(tmp_path, built, recorded):
    """``measure-HASH`` of the right name but other content (what a run or `%%file` could write
    into the cache) is rebuilt, not run: before the first build, or replacing a recorded one."""
    cache = tmp_path / "xdg"
    env = {"XDG_CACHE_HOME": str(cache)}
    target = cache / "cancho-kernel" / LAUNCHER.name
    marker = tmp_path / "launcher-ran"
    if recorded:
        assert exe_run_in(env, built(HELLO)).stdout == b"hello\n"
    plant_script(target, marker)
    done = exe_run_in(env, built(HELLO))
    assert not marker.exists(), "the planted launcher ran"
    assert done.stdout == b"hello\n", done.stderr
    assert chelper.verify(target) is not None  # rebuilt in place, and recorded


@needs_cc
def test_a_planted_jit_child_is_never_loaded(tmp_path):
    """``jit-child-HASH.so`` of the right name whose constructor has a side effect: the worker
    (started after it was planted, as after a restart) neither loads it nor loses its C child."""
    cache = tmp_path / "xdg"
    marker = tmp_path / "child-loaded"
    plant_library(cache / "cancho-kernel" / jit_child.CHILD_SPEC.name, marker)
    w = JitWorker(env={"XDG_CACHE_HOME": str(cache), PYTHON_CHILD_ENV: "0"})
    try:
        result = w.run(HELLO, ["p"], b"", StdoutTarget.pipe(), RunLimits(timeout=30))
        assert w.child == "c"
    finally:
        w.close()
    assert not marker.exists(), "the planted JIT child was loaded"
    assert result.stdout == b"hello\n"


@needs_cc
def test_prebuilt_helpers_are_used_and_a_tampered_one_falls_back_to_the_cache(tmp_path, monkeypatch):
    """``--build DIR`` writes every helper and its manifest; with CANCHO_HELPER_DIR=DIR the
    helpers come from there; a tampered one in a DIR this user cannot write is not used: the
    user's cache has a verified copy instead."""
    prebuilt, cache = tmp_path / "prebuilt", tmp_path / "xdg"
    done = subprocess.run([sys.executable, "-m", "cancho_kernel.compiler.backends.chelper",
                           "--build", str(prebuilt)], capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr
    monkeypatch.setenv(chelper.HELPER_DIR_ENV, str(prebuilt))
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    for spec in (LAUNCHER, jit_child.CHILD_SPEC):
        got = chelper.verified_helper(spec)
        assert got is not None and got.path == prebuilt / spec.name
    marker = tmp_path / "tampered-ran"
    plant_script(prebuilt / LAUNCHER.name, marker)
    monkeypatch.setattr(chelper, "_writable", lambda d: d != prebuilt)  # root-owned on a hub
    got = chelper.verified_helper(LAUNCHER)
    assert got is not None and got.path == cache / "cancho-kernel" / LAUNCHER.name
    assert b"touch" not in got.content and not marker.exists()
    assert (prebuilt / LAUNCHER.name).read_text().startswith("#!/bin/sh")  # not rebuilt there


def test_a_helper_writable_by_others_or_a_symlink_does_not_verify(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    spec = chelper.HelperSpec("int main(void) { return 0; }\n", "probe")
    got = chelper.build(spec, tmp_path / "h")
    if got is None:
        pytest.skip("no C compiler")
    assert chelper.verify(got.path) is not None
    got.path.chmod(0o777)
    assert chelper.verify(got.path) is None
    got.path.chmod(0o755)
    link = tmp_path / "h" / "probe-link"
    link.symlink_to(got.path)
    assert chelper.verify(link) is None


# -- RLIMIT_FSIZE (safe mode's disk bound, issue 22) ----------------------------------------------------


def big_writer(path: Path) -> str:
    """Creates ``path`` and writes 4 MiB to it twice."""
    raw = str(path).encode() + b"\0"
    return program(rf"""
@.path = private constant [{len(raw)} x i8] c"{str(path)}\00"
declare i32 @open(ptr, i32, ...)
declare i64 @write(i32, ptr, i64)
declare ptr @calloc(i64, i64)
define i64 @lexs_main() {{
  %fd = call i32 (ptr, i32, ...) @open(ptr @.path, i32 577, i32 420)
  %buf = call ptr @calloc(i64 1, i64 4194304)
  %a = call i64 @write(i32 %fd, ptr %buf, i64 4194304)
  %b = call i64 @write(i32 %fd, ptr %buf, i64 4194304)
  ret i64 0
}}
""")


def test_the_file_size_limit_stops_a_run_as_on_the_exe_backend(built, worker, tmp_path):
    """RunLimits.fsize: the write past it ends the program by SIGXFSZ, the file holds no more
    than the limit — on both backends alike (before, the JIT ignored the limit)."""
    limits = RunLimits(timeout=20, fsize=1 << 20)
    a = run_executable(built(big_writer(tmp_path / "exe.bin")), ["p"], b"", StdoutTarget.pipe(),
                       limits)
    b = worker.run(big_writer(tmp_path / "jit.bin"), ["p"], b"", StdoutTarget.pipe(), limits)
    assert a.signal == b.signal == signal.SIGXFSZ, (a, b)
    assert (tmp_path / "exe.bin").stat().st_size == (tmp_path / "jit.bin").stat().st_size == 1 << 20
