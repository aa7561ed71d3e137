"""What a program sees, and what arrives, for each standard-output target (runtime.md §4).

stdout is C stdio, fully buffered when it is not a terminal; its buffer is flushed at exit and a
failure there is ignored, so the exit status never reports lost output. Both backends must
behave identically for every target (kernel.md §2.2). The programs live in ``tests/programs``.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass
from pathlib import Path

import pytest

from cancho_kernel.compiler import api, diagnostics

PROGRAMS = Path(__file__).resolve().parent / "programs"
BACKENDS = ("exe", "jit")


@dataclass
class Built:
    name: str
    ir: str
    binary: Path


@pytest.fixture(scope="module")
def jit_worker():
    from cancho_kernel.compiler.backends import jit

    worker = jit.JitWorker()
    yield worker
    worker.close()


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    """Compile a program of tests/programs once per module and link it."""
    from cancho_kernel.compiler.backends import exe

    cache: dict[str, Built] = {}
    out = tmp_path_factory.mktemp("stdout-targets")

    def get(name: str) -> Built:
        if name not in cache:
            path = PROGRAMS / f"{name}.cho"
            compiled = api.compile_sources(api.load_sources([path]))
            assert compiled.ok, diagnostics.render_text(compiled.diagnostics)
            binary = out / name
            exe.build_executable(compiled.ir, binary)
            cache[name] = Built(name, compiled.ir, binary)
        return cache[name]

    return get


@pytest.fixture
def run(build, jit_worker):
    """run(backend, program name, target) -> RunResult, with the same argv on both backends."""
    from cancho_kernel.compiler.backends import process

    limits = process.RunLimits(timeout=20)

    def go(backend: str, name: str, target):
        prog = build(name)
        if backend == "exe":
            return process.run_executable(prog.binary, [name], b"", target, limits)
        return jit_worker.run(prog.ir, [name], b"", target, limits)

    return go


def targets():
    from cancho_kernel.compiler.backends import process

    return process.StdoutTarget


# --------------------------------------------------------------------- hello, returns 6


@pytest.mark.parametrize("backend", BACKENDS)
def test_hello_to_a_pipe(run, backend):
    result = run(backend, "hello_returns_6", targets().pipe())
    assert (result.exit_status, result.signal) == (6, None)
    assert result.stdout == b"hello\n"
    assert result.stderr == b""


@pytest.mark.parametrize("backend", BACKENDS)
def test_hello_to_dev_full_still_exits_6(run, backend):
    # The failed exit-time flush (ENOSPC) is ignored: the status is the program's own.
    result = run(backend, "hello_returns_6", targets().dev_full())
    assert (result.exit_status, result.signal) == (6, None)
    assert result.stdout == b""
    assert result.stderr == b""


@pytest.mark.parametrize("backend", BACKENDS)
def test_hello_with_stdout_closed_still_exits_6(run, backend):
    # EBADF at the exit-time flush is ignored too.
    result = run(backend, "hello_returns_6", targets().closed())
    assert (result.exit_status, result.signal) == (6, None)
    assert result.stdout == b""
    assert result.stderr == b""


# --------------------------------------------------------------------- broken pipe


@pytest.mark.parametrize("backend", BACKENDS)
def test_broken_pipe_kills_with_sigpipe(run, backend):
    result = run(backend, "lots_of_output", targets().broken_pipe(0))
    assert result.exit_status is None, f"expected death by SIGPIPE, got status {result.exit_status}"
    assert result.signal == signal.SIGPIPE


def test_lots_of_output_arrives_through_a_pipe(run):
    for backend in BACKENDS:
        result = run(backend, "lots_of_output", targets().pipe())
        assert (result.exit_status, result.signal) == (0, None), backend
        assert result.stdout_total == 4 * 1024 * 1024, backend


# --------------------------------------------------------------------- short counts


def test_short_writes_to_dev_full_are_counted_alike(run):
    """1000 x 65 bytes to /dev/full: fwrite answers short each time the buffer fails to drain.

    The reference saw 15 short answers with its buffer size; what matters here is that some,
    but not all, writes are short (the last buffer's worth never reports an error) and that both
    backends see the same number.
    """
    counts = {}
    for backend in BACKENDS:
        result = run(backend, "short_writes", targets().dev_full())
        assert result.signal is None, f"{backend}: killed by signal {result.signal}"
        assert result.stdout == b""
        reported = int(result.stderr.decode().strip())
        assert 0 < reported < 1000, f"{backend}: {reported} short writes"
        assert result.exit_status == reported % 256, backend
        counts[backend] = reported
    assert counts["exe"] == counts["jit"], counts


def test_no_short_writes_to_a_pipe(run):
    for backend in BACKENDS:
        result = run(backend, "short_writes", targets().pipe())
        assert (result.exit_status, result.signal) == (0, None), backend
        assert result.stderr == b"0\n"
        assert result.stdout == b"z" * 65000
