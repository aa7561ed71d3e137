"""Checked output (runtime.md §4): what `flush_out` answers for each stdout target, on both
backends, and that exit-time flush failures never change the status."""

from __future__ import annotations

from pathlib import Path

import pytest

from cancho_kernel.compiler import api
from cancho_kernel.compiler.backends import exe, jit, process

PROGRAMS = Path(__file__).parent / "programs"
TARGETS = {
    "pipe": process.StdoutTarget.pipe,
    "/dev/full": process.StdoutTarget.dev_full,
    "closed": process.StdoutTarget.closed,
}


@pytest.fixture(scope="module")
def worker():
    w = jit.JitWorker()
    yield w
    w.close()


def run_both(name: str, target: str, worker, tmp_path):
    result = api.compile_sources(api.load_sources([PROGRAMS / name]))
    assert result.ok, result.diagnostics
    out = tmp_path / "prog"
    exe.build_executable(result.ir, out)
    limits = process.RunLimits(timeout=20)
    a = process.run_executable(out, [str(out)], b"", TARGETS[target](), limits)
    b = worker.run(result.ir, [str(out)], b"", TARGETS[target](), limits)
    assert (a.stdout, a.stderr, a.exit_status, a.signal) == (b.stdout, b.stderr, b.exit_status, b.signal)
    return a


@pytest.mark.parametrize("target,status,delivered", [
    ("pipe", 0, b"hello\n"), ("/dev/full", 28, b""), ("closed", 9, b"")])
def test_flush_out_reports_what_happened(target, status, delivered, worker, tmp_path):
    r = run_both("flush_status.cho", target, worker, tmp_path)
    assert r.exit_status == status
    assert r.stdout == delivered


@pytest.mark.parametrize("target,status", [("pipe", 0), ("/dev/full", 55)])
def test_an_earlier_failed_write_makes_every_flush_answer_eio(target, status, worker, tmp_path):
    r = run_both("flush_sticky.cho", target, worker, tmp_path)
    assert r.exit_status == status


def test_dev_null_target_discards_output_on_both_backends(worker, tmp_path):
    result = api.compile_sources(api.load_sources([PROGRAMS / "flush_status.cho"]))
    out = tmp_path / "prog"
    exe.build_executable(result.ir, out)
    for target in (process.StdoutTarget.dev_null(), process.StdoutTarget.parse("/dev/null")):
        a = process.run_executable(out, [str(out)], b"", target, process.RunLimits(timeout=20))
        b = worker.run(result.ir, [str(out)], b"", target, process.RunLimits(timeout=20))
        assert (a.exit_status, a.stdout, b.exit_status, b.stdout) == (0, b"", 0, b"")


def test_file_target_receives_everything_on_both_backends(worker, tmp_path):
    result = api.compile_sources(api.load_sources([PROGRAMS / "flush_status.cho"]))
    out = tmp_path / "prog"
    exe.build_executable(result.ir, out)
    for name, run in (("exe", lambda t: process.run_executable(out, [str(out)], b"", t, process.RunLimits(timeout=20))),
                      ("jit", lambda t: worker.run(result.ir, [str(out)], b"", t, process.RunLimits(timeout=20)))):
        path = tmp_path / f"{name}.txt"
        path.write_text("stale contents that must be truncated\n")
        r = run(process.StdoutTarget.parse(f"file:{path}"))
        assert (r.exit_status, r.stdout) == (0, b"")
        assert path.read_bytes() == b"hello\n"
