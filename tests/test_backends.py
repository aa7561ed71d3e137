"""Both backends on hand-written IR: the run model (targets, limits, traps, signals) and
byte-for-byte agreement between `exe` and `jit`.

The IR below follows codegen's contract (an `i64 @lexs_main()` plus a C `main` that stashes
argc/argv), written by hand so these tests do not depend on the front end.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

import pytest

from cancho_kernel.compiler.backends import exe, native
from cancho_kernel.compiler.backends.process import (
    RunLimits,
    RunResult,
    StdoutTarget,
    run_executable,
)

ENTRY = r"""
@lexs_argc = internal global i64 0
@lexs_argv = internal global ptr null
define i32 @main(i32 %argc, ptr %argv) {
  %a = sext i32 %argc to i64
  store i64 %a, ptr @lexs_argc
  store ptr %argv, ptr @lexs_argv
  %r = call i64 @lexs_main()
  %t = trunc i64 %r to i32
  ret i32 %t
}
"""

DECLS = r"""
@stdout = external global ptr
@stderr = external global ptr
declare i64 @fwrite(ptr, i64, i64, ptr)
declare i32 @putchar(i32)
declare i32 @getchar()
declare i64 @strlen(ptr)
"""


def program(body: str) -> str:
    """A whole module: libc declarations, the body (defining @lexs_main) and the C entry."""
    return DECLS + body + ENTRY


HELLO = program(r"""
@.hello = private constant [6 x i8] c"hello\0A"
define i64 @lexs_main() {
  %out = load ptr, ptr @stdout
  %n = call i64 @fwrite(ptr @.hello, i64 1, i64 6, ptr %out)
  ret i64 %n
}
""")


def returns(n: int) -> str:
    return program(f"define i64 @lexs_main() {{\n  ret i64 {n}\n}}\n")


TRAP_AFTER_OUTPUT = program(r"""
@.msg = private constant [13 x i8] c"about to fail"
@.err = private constant [5 x i8] c"oops\0A"
define i64 @lexs_main() {
  %out = load ptr, ptr @stdout
  %n = call i64 @fwrite(ptr @.msg, i64 1, i64 13, ptr %out)
  %c = call i32 @putchar(i32 10)
  %err = load ptr, ptr @stderr
  %m = call i64 @fwrite(ptr @.err, i64 1, i64 5, ptr %err)
  call void asm sideeffect "ud2", ""()
  unreachable
}
""")

LOOP_FOREVER = program(r"""
@counter = internal global i64 0
define i64 @lexs_main() {
entry:
  br label %loop
loop:
  %v = load volatile i64, ptr @counter
  %w = add i64 %v, 1
  store volatile i64 %w, ptr @counter
  br label %loop
}
""")

# 1600 x 64 KiB = 100 MiB of zeros through fwrite, then exit 7.
FLOOD = program(r"""
@buf = internal global [65536 x i8] zeroinitializer
define i64 @lexs_main() {
entry:
  %out = load ptr, ptr @stdout
  br label %loop
loop:
  %i = phi i64 [0, %entry], [%j, %loop]
  %n = call i64 @fwrite(ptr @buf, i64 1, i64 65536, ptr %out)
  %j = add i64 %i, 1
  %done = icmp eq i64 %j, 1600
  br i1 %done, label %exit, label %loop
exit:
  ret i64 7
}
""")

# Copies stdin to stdout, then writes the final getchar result (EOF = -1) as a byte.
ECHO_STDIN = program(r"""
define i64 @lexs_main() {
entry:
  br label %loop
loop:
  %n = phi i64 [0, %entry], [%m, %body]
  %c = call i32 @getchar()
  %eof = icmp eq i32 %c, -1
  br i1 %eof, label %exit, label %body
body:
  %p = call i32 @putchar(i32 %c)
  %m = add i64 %n, 1
  br label %loop
exit:
  %e = sext i32 %c to i64
  %b = add i64 %e, 66
  %q = trunc i64 %b to i32
  %p2 = call i32 @putchar(i32 %q)
  ret i64 %n
}
""")

# Prints argv[1..] one per line through @lexs_argv and strlen; returns argc.
ARGV = program(r"""
define i64 @lexs_main() {
entry:
  %argc = load i64, ptr @lexs_argc
  %argv = load ptr, ptr @lexs_argv
  %out = load ptr, ptr @stdout
  br label %cond
cond:
  %i = phi i64 [1, %entry], [%j, %body]
  %more = icmp slt i64 %i, %argc
  br i1 %more, label %body, label %exit
body:
  %slot = getelementptr ptr, ptr %argv, i64 %i
  %s = load ptr, ptr %slot
  %len = call i64 @strlen(ptr %s)
  %w = call i64 @fwrite(ptr %s, i64 1, i64 %len, ptr %out)
  %nl = call i32 @putchar(i32 10)
  %j = add i64 %i, 1
  br label %cond
exit:
  ret i64 %argc
}
""")

SEGFAULT = program(r"""
@nowhere = internal global ptr null
define i64 @lexs_main() {
  %p = load volatile ptr, ptr @nowhere
  store volatile i64 1, ptr %p
  ret i64 0
}
""")


def putchars_then(count: int, tail: str) -> str:
    """`count` putchar('a') calls, then `tail` (an LLVM terminator sequence)."""
    return program(f"""
define i64 @lexs_main() {{
entry:
  br label %loop
loop:
  %i = phi i64 [0, %entry], [%j, %loop]
  %c = call i32 @putchar(i32 97)
  %j = add i64 %i, 1
  %done = icmp eq i64 %j, {count}
  br i1 %done, label %exit, label %loop
exit:
{tail}
}}
""")


# 100 putchar then a trap: with C stdout fully buffered (as in a native executable) nothing
# reaches the pipe; if the JIT left it unbuffered, 100 bytes would.
SMALL_OUTPUT_THEN_TRAP = putchars_then(100, '  call void asm sideeffect "ud2", ""()\n  unreachable')
PUTCHAR_8MIB = putchars_then(8 << 20, "  ret i64 0")

# 1000 fwrites of 65 bytes; returns how many were short. On /dev/full this depends on the
# stdio buffer size exactly (the reference measured 15), so it pins the JIT's buffering.
SHORT_WRITES = program(r"""
@chunk = internal global [65 x i8] zeroinitializer
define i64 @lexs_main() {
entry:
  %out = load ptr, ptr @stdout
  br label %loop
loop:
  %i = phi i64 [0, %entry], [%j, %loop]
  %short = phi i64 [0, %entry], [%s2, %loop]
  %n = call i64 @fwrite(ptr @chunk, i64 1, i64 65, ptr %out)
  %isshort = icmp ne i64 %n, 65
  %inc = zext i1 %isshort to i64
  %s2 = add i64 %short, %inc
  %j = add i64 %i, 1
  %done = icmp eq i64 %j, 1000
  br i1 %done, label %exit, label %loop
exit:
  ret i64 %s2
}
""")

BROKEN_IR = "define i64 @lexs_main() {\n  ret i32 0\n}\n"


# ---------------------------------------------------------------------------------------------
# fixtures and helpers


@pytest.fixture(scope="module")
def worker():
    from cancho_kernel.compiler.backends.jit import JitWorker

    w = JitWorker()
    yield w
    w.close()


@pytest.fixture
def both(built, worker):
    """Run an IR program on both backends with the same arguments; returns (exe, jit)."""

    def run(ir: str, argv=("prog",), stdin: bytes = b"", target=StdoutTarget.pipe(),
            limits=RunLimits(timeout=20)) -> tuple[RunResult, RunResult]:
        a = run_executable(built(ir), list(argv), stdin, target, limits)
        b = worker.run(ir, list(argv), stdin, target, limits)
        return a, b

    return run


def same(a: RunResult, b: RunResult) -> None:
    """The observable part of two runs is identical."""
    for field in ("stdout", "stderr", "exit_status", "signal", "stdout_total", "stderr_total",
                  "stdout_truncated", "stderr_truncated", "timed_out", "interrupted"):
        assert getattr(a, field) == getattr(b, field), field
    assert a.describe() == b.describe()


# ---------------------------------------------------------------------------------------------
# native


def test_native_parse_rejects_invalid_ir():
    with pytest.raises(native.InvalidIR):
        native.parse(BROKEN_IR)


def test_native_stamps_host_and_optimizes():
    text = native.optimized_ir(HELLO)
    assert f'target triple = "{native.host_triple()}"' in text
    assert native.data_layout() in text
    assert "alloca" not in native.optimized_ir(returns(3))


def test_native_emits_object_and_asm_with_trap():
    obj = native.emit_object(TRAP_AFTER_OUTPUT)  # inline asm needs the asm parser
    assert obj[:4] == b"\x7fELF"
    assert "ud2" in native.emit_asm(TRAP_AFTER_OUTPUT)


def test_missing_cc_is_a_link_error(tmp_path, monkeypatch):
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    with pytest.raises(exe.LinkError, match="cannot run the linker"):
        exe.build_executable(HELLO, tmp_path / "hello")
    assert not (tmp_path / "hello.o").exists()


def test_link_flags_go_after_the_object(tmp_path, monkeypatch):
    log = tmp_path / "argv"
    fake = tmp_path / "fakecc"
    fake.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {log}\n')
    fake.chmod(0o755)
    monkeypatch.setenv("CC", str(fake))
    exe.build_executable(HELLO, tmp_path / "out", libs=["m", "z"], libdirs=["/opt/x"])
    # The program's object, then ours (the trap reporter, backends/trapreport.py), then the flags.
    assert log.read_text().split("\n")[:-1] == [
        str(tmp_path / "out.o"), *exe.runtime_objects(), "-L/opt/x", "-lm", "-lz", "-o", str(tmp_path / "out")]
    assert len(exe.runtime_objects()) == 1


# ---------------------------------------------------------------------------------------------
# the two backends agree


def test_hello(both):
    a, b = both(HELLO)
    assert a.stdout == b"hello\n" and a.exit_status == 6 and a.describe() == "returned 6"
    same(a, b)
    assert b.compile_seconds is not None and b.compile_seconds >= 0


@pytest.mark.parametrize("n,expected", [(0, 0), (300, 44), (256, 0), (-1, 255)])
def test_exit_status_low_8_bits(both, n, expected):
    a, b = both(returns(n))
    assert a.exit_status == expected
    same(a, b)


def test_trap_loses_stdout_keeps_stderr(both):
    a, b = both(TRAP_AFTER_OUTPUT)
    assert a.signal == signal.SIGILL and a.exit_status is None
    assert a.stdout == b"" and a.stderr == b"oops\n"
    assert a.describe() == "trapped: killed by signal 4 (SIGILL)"
    same(a, b)


@pytest.mark.parametrize("target", [StdoutTarget.dev_full(), StdoutTarget.closed()])
def test_failed_exit_flush_keeps_status(both, target):
    a, b = both(HELLO, target=target)
    assert a.exit_status == 6 and a.stdout == b"" and a.stdout_total == 0
    same(a, b)


def test_broken_pipe_is_sigpipe(both):
    a, b = both(HELLO, target=StdoutTarget.broken_pipe())
    assert a.signal == signal.SIGPIPE and a.describe() == "killed by signal 13 (SIGPIPE)"
    same(a, b)


def test_reader_leaving_after_n_bytes(both):
    a, b = both(PUTCHAR_8MIB, target=StdoutTarget.broken_pipe(after=10000))
    assert a.signal == signal.SIGPIPE and a.stdout == b"a" * 10000
    same(a, b)


def test_short_writes_on_dev_full_match(both):
    a, b = both(SHORT_WRITES, target=StdoutTarget.dev_full())
    assert 0 < a.exit_status < 1000
    same(a, b)


def test_stdin_bytes_then_eof(both):
    a, b = both(ECHO_STDIN, stdin=b"abc\x00\xff")
    assert a.stdout == b"abc\x00\xff" + bytes([65]) and a.exit_status == 5
    same(a, b)
    a, b = both(ECHO_STDIN)  # no stdin at all: end of input at once
    assert a.stdout == b"A" and a.exit_status == 0
    same(a, b)


def test_large_stdin_not_read_does_not_block(both):
    a, b = both(HELLO, stdin=b"x" * (1 << 20))
    assert a.exit_status == 6
    same(a, b)


def test_argv(both):
    a, b = both(ARGV, argv=["prog", "one", "two words", ""])
    assert a.stdout == b"one\ntwo words\n\n" and a.exit_status == 4
    same(a, b)


def test_flood_is_truncated_and_counted(both):
    limits = RunLimits(timeout=30, max_output=1000)
    a, b = both(FLOOD, limits=limits)
    assert a.exit_status == 7 and len(a.stdout) == 1000 and a.stdout_truncated
    assert a.stdout_total == 1600 * 65536
    same(a, b)


def test_segfault(both):
    a, b = both(SEGFAULT)
    assert a.signal == signal.SIGSEGV and a.describe() == "killed by signal 11 (SIGSEGV)"
    same(a, b)


def test_timeout_kills(both):
    a, b = both(LOOP_FOREVER, limits=RunLimits(timeout=0.3))
    for r in (a, b):
        assert r.timed_out and r.signal == signal.SIGKILL
        assert r.describe() == "timed out after 0.3 s"


def test_cancel_kills(built, worker):
    for runner in (lambda ev: run_executable(built(LOOP_FOREVER), ["p"], b"", StdoutTarget.pipe(),
                                             RunLimits(timeout=None), ev),
                   lambda ev: worker.run(LOOP_FOREVER, ["p"], b"", StdoutTarget.pipe(),
                                         RunLimits(timeout=None), ev)):
        ev = threading.Event()
        threading.Timer(0.2, ev.set).start()
        r = runner(ev)
        assert r.interrupted and r.describe() == "interrupted"
        assert r.wall_seconds < 1.2 + 0.2


def test_memory_limit(both):
    # A program that calls malloc(1 GiB) and reports whether it got NULL.
    ir = program(r"""
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
    a, b = both(ir, limits=RunLimits(timeout=20, memory=256 << 20))
    assert a.exit_status == 9
    same(a, b)


# ---------------------------------------------------------------------------------------------
# the JIT worker


def test_worker_survives_trap_and_segfault(worker):
    pid = worker.pid
    assert worker.run(TRAP_AFTER_OUTPUT).signal == signal.SIGILL
    assert worker.run(SEGFAULT).signal == signal.SIGSEGV
    assert worker.pid == pid
    assert worker.run(HELLO).stdout == b"hello\n"


def test_worker_restarts_after_being_killed():
    from cancho_kernel.compiler.backends.jit import JitWorker

    with JitWorker() as w:
        assert w.run(HELLO).exit_status == 6
        old = w.pid
        os.kill(old, signal.SIGKILL)
        r = w.run(HELLO)
        assert r.exit_status == 6 and r.stdout == b"hello\n"
        assert w.pid != old


def test_worker_reports_invalid_ir_as_ours(worker):
    with pytest.raises(native.InvalidIR):
        worker.run(BROKEN_IR)
    assert worker.run(HELLO).exit_status == 6


def test_unresolved_symbol_is_a_link_error_not_a_crash(worker):
    ir = program(r"""
declare i64 @no_such_symbol_anywhere(i64)
define i64 @lexs_main() {
  %r = call i64 @no_such_symbol_anywhere(i64 1)
  ret i64 %r
}
""")
    with pytest.raises(exe.LinkError, match="no_such_symbol_anywhere"):
        worker.run(ir)
    assert worker.run(HELLO).exit_status == 6


def test_unbuffered_python_does_not_unbuffer_c_stdout():
    """A worker started with PYTHONUNBUFFERED=1 (C stdout unbuffered at Python start-up) must
    still give programs a fully buffered stdout: output before a trap is lost, exactly as in a
    native executable, and short writes on /dev/full count the same."""
    from cancho_kernel.compiler.backends.jit import JitWorker

    with JitWorker(env={"PYTHONUNBUFFERED": "1"}) as w:
        r = w.run(SMALL_OUTPUT_THEN_TRAP)
        assert r.signal == signal.SIGILL and r.stdout_total == 0
        r = w.run(PUTCHAR_8MIB, limits=RunLimits(max_output=16))
        assert r.exit_status == 0 and r.stdout_total == 8 << 20


def test_jit_inherit_in_subprocess(tmp_path):
    """run_jit_inherit: the program writes straight to this process's descriptors."""
    import subprocess

    code = (
        "import sys\n"
        "from cancho_kernel.compiler.backends.jit import run_jit_inherit\n"
        "import tests_ir\n"
        "st = run_jit_inherit(tests_ir.IR, ['prog', 'x'])\n"
        "sys.stderr.write('status=%d\\n' % st)\n"
    )
    (tmp_path / "tests_ir.py").write_text(f"IR = {ARGV!r}\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), os.getcwd()]),
               PYTHONUNBUFFERED="1")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, env=env, timeout=60)
    assert p.stdout == b"x\n"
    assert p.stderr.decode().strip().endswith("status=512")  # exit 2, as a wait status


def test_worker_keeps_several_compiled_programs():
    """Interleaving two programs (as a benchmark does) compiles each only once."""
    from cancho_kernel.compiler import api
    from cancho_kernel.compiler.backends import jit, process
    from cancho_kernel.compiler.source import SourceFile

    def ir(n: int) -> str:
        r = api.compile_sources([SourceFile("p.cho", f"fn main(world: World) -> [] int {{ release(world); return {n}; }}")])
        assert r.ok
        return r.ir

    first, second = ir(3), ir(4)
    w = jit.JitWorker()
    try:
        results = [w.run(x, ["p"], b"", process.StdoutTarget.pipe(), process.RunLimits(timeout=10))
                   for x in (first, second, first, second)]
    finally:
        w.close()
    assert [r.exit_status for r in results] == [3, 4, 3, 4]
    assert [r.compile_cached for r in results] == [False, False, True, True]


def test_exe_peak_memory_is_the_programs_own(tmp_path):
    """A program spawned by this (large) test process reports its own peak RSS, not ours."""
    from cancho_kernel.compiler import api
    from cancho_kernel.compiler.backends import process
    from cancho_kernel.compiler.source import SourceFile

    r = api.compile_sources([SourceFile("p.cho", "fn main(world: World) -> [] int { release(world); return 7; }")])
    out = tmp_path / "p"
    exe.build_executable(r.ir, out)
    ballast = bytearray(256 << 20)  # make this process much larger than any small program
    ballast[::4096] = b"x" * len(ballast[::4096])
    res = process.run_executable(out, [str(out)], b"", process.StdoutTarget.pipe(), process.RunLimits(timeout=10))
    assert res.exit_status == 7
    assert 0 < res.peak_rss_bytes < 64 << 20
