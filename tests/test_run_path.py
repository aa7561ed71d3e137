"""compiler/run.py, the one way to build and run a program: typed failures, both backends, the
interruptible wait, and the CLI options around it (issue 13 item 5)."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from cancho_kernel import cli
from cancho_kernel.compiler import api, run
from cancho_kernel.compiler.backends import native
from cancho_kernel.compiler.backends.exe import LinkError
from cancho_kernel.compiler.backends.jit import JitWorker, JitWorkerDied
from cancho_kernel.compiler.backends.process import RunLimits, StdoutTarget
from cancho_kernel.compiler.diagnostics import Rule
from cancho_kernel.compiler.run import Backend, FailureKind, RunFailed, RunRequest
from cancho_kernel.compiler.source import SourceFile

HELLO = """\
fn main(world: World) -> [] int {
    let Split { io, ffi, fs, heap, args } = split(world);
    release(ffi); release(fs); release(heap); release(args);
    borrow mut io as &!i in { write_bytes(i, "hi\\n"); }
    release(io);
    return 7;
}
"""


@pytest.fixture(scope="module")
def hello_ir() -> str:
    result = api.compile_sources([SourceFile("hello.cho", HELLO)])
    assert result.ok, result.diagnostics
    return result.ir


@pytest.mark.parametrize("raised,kind", [
    (native.InvalidIR("bad"), FailureKind.INTERNAL),
    (LinkError("no cc"), FailureKind.ENVIRONMENT),
    (JitWorkerDied("gone"), FailureKind.INTERNAL),
    (FileNotFoundError(2, "No such file or directory"), FailureKind.ENVIRONMENT),
])
def test_backend_errors_become_typed_failures(raised, kind):
    with pytest.raises(RunFailed) as info:
        with run.failures_mapped(lambda e: f"cannot run: {run.os_error_text(e)}"):
            raise raised
    assert info.value.kind is kind
    assert FailureKind.INTERNAL == Rule.INTERNAL  # the kernel publishes it under the rule's tag


def test_an_os_error_propagates_unless_asked_to_word_it():
    with pytest.raises(PermissionError):
        with run.failures_mapped():
            raise PermissionError(13, "Permission denied")


def test_llvm_refusing_the_ir_is_internal(tmp_path):
    with pytest.raises(RunFailed) as info:
        run.build("define i32 @main( {", Backend.EXE, tmp_path / "p")
    assert info.value.kind is FailureKind.INTERNAL and info.value.message.startswith("LLVM refused")


def test_a_missing_linker_is_the_environment(hello_ir, tmp_path, monkeypatch):
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    with pytest.raises(RunFailed) as info:
        run.build(hello_ir, Backend.EXE, tmp_path / "p")
    assert info.value.kind is FailureKind.ENVIRONMENT and "no-such-cc" in info.value.message


def test_an_unwritable_output_is_the_environment(hello_ir, tmp_path):
    with pytest.raises(RunFailed) as info:
        run.build(hello_ir, Backend.EXE, tmp_path / "missing-dir" / "p")
    assert info.value.kind is FailureKind.ENVIRONMENT and "cannot write" in info.value.message


def test_both_backends_build_and_run_alike(hello_ir, tmp_path):
    worker = JitWorker()
    try:
        results = []
        for backend in Backend:
            built = run.build(hello_ir, backend, tmp_path / "hello")
            assert built.backend is backend and (built.path is None) == (backend is Backend.JIT)
            results.append(run.run_built(built, ["hello"], worker=worker, target=StdoutTarget.pipe(),
                                         limits=RunLimits(timeout=30)))
        via_api = api.run(RunRequest(hello_ir, backend="exe", limits=RunLimits(timeout=30)))
    finally:
        worker.close()
    assert [(r.stdout, r.exit_status) for r in results] == [(b"hi\n", 7)] * 2
    assert (via_api.stdout, via_api.exit_status) == (b"hi\n", 7)
    assert via_api.compile_seconds is not None and via_api.compile_seconds > 0


def test_run_inherit_reports_the_status(hello_ir, capfd):
    for backend in Backend:
        ended = run.run_inherit(hello_ir, backend, "hello", [])
        assert ended == run.Ended(7, None)
    assert capfd.readouterr().out == "hi\n" * 2


def test_an_interrupt_cancels_the_work_and_the_wait_goes_on():
    """SIGINT in the waiting (main) thread sets the cancel event; the value the work returns
    after it is kept, and the wait ends only when the work has."""
    assert threading.current_thread() is threading.main_thread()
    main_id = threading.get_ident()

    def work(cancel: threading.Event) -> str:
        time.sleep(0.3)  # let the main thread reach its wait
        signal.pthread_kill(main_id, signal.SIGINT)
        return "cancelled" if cancel.wait(30) else "not cancelled"

    waited = run.interruptible(work)
    assert waited == run.Waited("cancelled", None, True)


def test_an_exception_in_the_work_is_handed_back():
    waited = run.interruptible(lambda cancel: 1 // 0)
    assert isinstance(waited.error, ZeroDivisionError) and not waited.interrupted


def test_the_kernel_runner_answers_a_typed_outcome(hello_ir, tmp_path):
    from cancho_kernel.compiler.cache import BuildCache
    from cancho_kernel.kernel.runner import Runner, RunOutcome

    runner = Runner(cache=BuildCache(tmp_path))
    try:
        good = runner.run(RunRequest(hello_ir, backend="exe", target=StdoutTarget.pipe()))
        bad = runner.run(RunRequest("not IR", backend="exe"))
    finally:
        runner.close()
    assert isinstance(good, RunOutcome) and good.failure is None and good.result.exit_status == 7
    assert bad.result is None and bad.failure.kind is FailureKind.INTERNAL and not bad.interrupted


# -- the command line ------------------------------------------------------------------------------


def test_std_is_accepted_and_changes_nothing(tmp_path, capsys):
    src = tmp_path / "hello.cho"
    src.write_text(HELLO)
    for command in ("check", "ir", "asm", "authority"):
        plain = cli.main([command, str(src)]), capsys.readouterr()
        with_std = cli.main([command, str(src), "--std"]), capsys.readouterr()
        assert plain == with_std and plain[0] == 0


def test_no_cache_belongs_to_build_and_run(tmp_path, capsys):
    src = tmp_path / "hello.cho"
    src.write_text(HELLO)
    assert cli.main(["check", str(src), "--no-cache"]) == cli.EXIT_USAGE
    assert "unknown option `--no-cache`" in capsys.readouterr().err
    out = tmp_path / "hello"
    assert cli.main(["build", str(src), "-o", str(out), "--no-cache"]) == 0 and os.access(out, os.X_OK)
