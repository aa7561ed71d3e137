"""Issue 12, finding 7: every directive value is validated, every read is bounded, `--memory`
limits the program (not the JIT worker), and a run has default limits (documented in %help).

Before the fix: `%limits --memory inf` ended in an `internal` OverflowError; `--timeout nan` was
accepted and disabled the timeout; `--stdout broken-pipe:-3` was accepted; `%%run --memory`
limited the worker; `--stdin-file /dev/zero` and `%load /dev/zero` read until the kernel's memory
ran out; a 6 GiB cell completed.
"""

from __future__ import annotations

import os
import re
import signal
from types import SimpleNamespace

import pytest
from kernel_client import HELLO, assert_alive, run

from cancho_kernel.compiler.backends.jit import JitWorker
from cancho_kernel.compiler.backends.process import (DEFAULT_RUN_LIMITS, RunLimits, StdoutTarget,
                                                     run_executable)
from cancho_kernel.compiler.api import compile_sources
from cancho_kernel.compiler.source import SourceFile
from cancho_kernel.kernel import directives
from cancho_kernel.kernel.directives import DirectiveError, Settings

pytestmark = pytest.mark.usefixtures("cancho_kernelspec")

BACKENDS = ("jit", "exe")


def alloc_program(ints: int) -> str:
    """A program that allocates and touches ``ints`` 8-byte integers, then returns 5."""
    return f"""fn main(world: World) -> [] int {{
    let Split {{ io, ffi, fs, heap, args }} = split(world);
    release(io); release(ffi); release(fs);
    var count = 0;
    borrow args as &g in {{ count = arg_count(g); }}
    release(args);
    var n = 0;
    borrow mut heap as &!h in {{
        var b = box_slice(h, {ints}, count + 4);
        borrow b as &r in {{
            let s = contents(r);
            n = s[{ints} - count];
        }}
        let k = unbox_slice(h, b);
    }}
    release(heap);
    return n;
}}
"""


# -- values: every number finite and in range, sizes strict ---------------------------------------------


@pytest.mark.parametrize("args", [
    "--memory inf", "--memory nan", "--memory 1e400", "--memory -5", "--memory 12Q", "--memory 1",
    "--memory 2T", "--timeout nan", "--timeout inf", "--timeout -1", "--timeout 1e309",
    "--timeout 10000000", "--max-output none", "--max-output 1G", "--max-output 0x10",
    "--cpu 0", "--cpu 1.5", "--cpu nan", "--processes -1", "--processes many",
])
def test_limit_values_out_of_range_are_directive_errors(args):
    with pytest.raises(DirectiveError):
        directives.parse_run_options(args, Settings())


@pytest.mark.parametrize("target", ["broken-pipe:-3", "broken-pipe:x", "broken-pipe:1.5",
                                    "broken-pipe:99999999999999999999", "pipe:3", "closed:"])
def test_bad_stdout_targets_are_refused(target):
    with pytest.raises(ValueError):
        StdoutTarget.parse(target)
    with pytest.raises(DirectiveError):
        directives.parse_run_options(f"--stdout {target}", Settings())


@pytest.mark.parametrize("args", ["--expect-status -1", "--expect-status 256", "--expect-signal 0",
                                  "--expect-signal 999"])
def test_expectations_out_of_range_are_refused(args):
    with pytest.raises(DirectiveError):
        directives.parse_run_options(args, Settings())


def test_good_values_are_parsed_exactly():
    o = directives.parse_run_options("--memory 1.5G --timeout 2.5s --max-output 64k --cpu 7 "
                                     "--processes 3 --stdout broken-pipe:0 --expect-status 255",
                                     Settings())
    assert o.limits == RunLimits(timeout=2.5, max_output=65536, memory=3 << 29, cpu_seconds=7,
                                 processes=3)
    assert o.target == StdoutTarget.broken_pipe(0) and o.expect_status == 255
    unlimited = directives.parse_run_options("--memory none --timeout none --cpu none", Settings())
    assert (unlimited.limits.memory, unlimited.limits.timeout, unlimited.limits.cpu_seconds) == (None,) * 3


def test_options_are_never_abbreviated():
    """An abbreviation could slip past safe mode's screen of option names."""
    with pytest.raises(DirectiveError):
        directives.parse_run_options("--stdin-f /etc/hostname", Settings())


def test_the_default_limits_are_finite_and_documented():
    d = directives.parse_run_options("", Settings()).limits
    assert d == DEFAULT_RUN_LIMITS
    assert None not in (d.timeout, d.max_output, d.memory, d.cpu_seconds, d.processes)
    text = directives.help_text(Settings())
    assert "memory 4 GiB" in text and "CPU 600 s" in text and "256 processes" in text
    assert "--stdin-file up to 64 MiB" in text and "%load up to 8 MiB" in text
    assert "Safe mode is off" in text
    readme = open(os.path.join(os.path.dirname(__file__), "..", "README.md")).read()
    assert "4 GiB" in readme and "64 MiB" in readme and "CANCHO_SAFE=1" in readme


# -- reads: bounded -----------------------------------------------------------------------------------


def test_stdin_file_from_a_device_stops_at_the_cap():
    ns = SimpleNamespace(stdin=None, stdin_file="/dev/zero")
    with pytest.raises(DirectiveError, match="64 MiB"):
        directives.stdin_of(ns)


def test_stdin_file_larger_than_the_cap_is_refused_by_its_size(tmp_path):
    big = tmp_path / "big.bin"
    with open(big, "wb") as f:
        f.truncate(directives.STDIN_FILE_CAP + 1)  # sparse: nothing is read to judge it
    with pytest.raises(DirectiveError, match="more than the 64 MiB"):
        directives.stdin_of(SimpleNamespace(stdin=None, stdin_file=str(big)))
    exact = tmp_path / "exact.bin"
    with open(exact, "wb") as f:
        f.truncate(1000)
    assert directives.stdin_of(SimpleNamespace(stdin=None, stdin_file=str(exact))) == bytes(1000)


def test_a_fifo_is_refused_rather_than_blocking_the_kernel(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(DirectiveError, match="not a regular file"):
        directives.stdin_of(SimpleNamespace(stdin=None, stdin_file=str(fifo)))


# -- --memory is the program's, not the worker's ------------------------------------------------------------


def _ir(source: str) -> str:
    result = compile_sources([SourceFile("alloc.cho", source)])
    assert not result.diagnostics and result.ir is not None, result.diagnostics
    return result.ir


def _address_space_limit(pid: int) -> str:
    with open(f"/proc/{pid}/limits") as f:
        for line in f:
            if line.startswith("Max address space"):
                return line.split()[3]
    raise AssertionError("no address-space line")


def test_memory_limit_applies_to_the_program_on_both_backends(tmp_path):
    """100 MiB under a 64 MiB limit fails on both backends; the JIT worker's own address space
    stays unlimited, so the next run without a limit allocates the same 100 MiB."""
    ir = _ir(alloc_program(13_107_200))
    from cancho_kernel.compiler.backends.exe import build_executable

    exe = tmp_path / "alloc"
    build_executable(ir, exe)
    small = RunLimits(timeout=60, memory=64 << 20)
    roomy = RunLimits(timeout=60, memory=1 << 30)
    a = run_executable(exe, [str(exe)], limits=small)
    assert a.signal == signal.SIGILL, a  # the allocation failed and the program trapped
    assert run_executable(exe, [str(exe)], limits=roomy).exit_status == 5
    with JitWorker() as worker:
        b = worker.run(ir, ["main"], limits=small)
        assert b.signal == signal.SIGILL, b
        assert _address_space_limit(worker.pid) == "unlimited"
        assert worker.run(ir, ["main"], limits=RunLimits(timeout=60)).exit_status == 5


# -- through a real kernel -----------------------------------------------------------------------------------


@pytest.mark.parametrize("line", [
    "%limits --memory inf", "%limits --timeout nan", "%limits --max-output -1",
    "%%run --stdout broken-pipe:-3", "%%run --memory 1", "%%run --stdin-file /dev/zero",
    "%load /dev/zero", "%%run --stdin-file /proc/self/nonexistent",
])
def test_bad_directive_values_are_clear_directive_errors(kernel, line):
    cell = run(kernel, line + ("\n" + HELLO if line.startswith("%%") else ""))
    assert cell.status == "error", cell.outputs
    assert cell.error["ename"] == "directive-error", cell.error
    assert "Traceback" not in "".join(cell.error["traceback"])


def test_limits_nan_leaves_the_timeout_alone(kernel):
    before = run(kernel, "%limits").shown
    assert run(kernel, "%limits --timeout nan --memory 1G").status == "error"
    assert run(kernel, "%limits").shown == before  # nothing was half-applied
    assert before.startswith("timeout 30 s") and "memory 4294967296 bytes" in before
    assert_alive(kernel)


def test_load_of_a_device_is_refused_at_the_cap(kernel):
    cell = run(kernel, "%load /dev/zero")
    assert cell.status == "error" and "8 MiB" in cell.error["evalue"]
    assert_alive(kernel)


def test_load_of_bytes_that_are_not_utf8_is_a_directive_error(kernel, tmp_path):
    bad = tmp_path / "bad.cho"
    bad.write_bytes(b"fn f() -> [] int { return 1; }\n\xff\xfe\n")
    cell = run(kernel, f"%load {bad}")
    assert cell.status == "error" and cell.error["ename"] == "directive-error"
    assert "not UTF-8" in cell.error["evalue"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_six_gib_cell_is_stopped_by_the_default_memory_limit(kernel, backend):
    cell = run(kernel, f"%%run --backend {backend}\n" + alloc_program(805_306_368), timeout=120)
    assert cell.status == "error", cell.outputs
    assert "SIGILL" in cell.error["evalue"], cell.error  # the allocation failed: a trap
    assert_alive(kernel)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_cell_memory_limit_limits_the_program(kernel, backend):
    over = run(kernel, f"%%run --backend {backend} --memory 64M\n" + alloc_program(13_107_200))
    assert over.status == "error", over.outputs
    assert "SIGILL" in over.error["evalue"], over.error
    fits = run(kernel, f"%%run --backend {backend} --memory 512M --expect-status 5\n"
                       + alloc_program(13_107_200))
    assert fits.status == "ok", fits.outputs


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_cpu_limit_stops_a_loop_with_sigxcpu(kernel, backend):
    loop = ("fn main(world: World) -> [] int {\n    release(world);\n    var n = 0;\n"
            "    while n >= 0 { n = n + 1; if n > 1000000 { n = 0; } }\n    return n;\n}\n")
    cell = run(kernel, f"%%run --backend {backend} --cpu 1 --timeout 120 --expect-signal SIGXCPU\n" + loop)
    assert cell.status == "ok", cell.outputs


def test_help_states_the_limits_and_safe_mode(kernel):
    shown = run(kernel, "%help").shown
    assert re.search(r"memory 4 GiB", shown) and "Safe mode is off" in shown


# -- issue 22, finding 10: a trap caused by a limit says which limit ------------------------------------------

# Each thread spawns the next and waits for it: `depth` threads alive at once, each with its stack.
THREAD_CHAIN = """edition 4;
fn chain(n: int) -> [conc] int {{
    if n == 0 {{ return 0; }}
    let t = spawn(n - 1, chain);
    return join(t) + 1;
}}
fn main(world: World) -> [conc] int {{
    release(world);
    return chain({depth}) - {depth};
}}
"""


def shown_error(cell) -> str:
    return "\n".join(cell.error["traceback"]) if cell.error else ""


@pytest.mark.parametrize("backend", BACKENDS)
def test_500_threads_under_the_default_memory_limit_name_the_limit(kernel, backend):
    """Before: "trapped: killed by signal 4 (SIGILL)" and nothing pointing at --memory."""
    try:
        threads_under_limits(kernel, backend)
    finally:
        assert run(kernel, "%reset").status == "ok"  # the session's edition back for the other tests


def threads_under_limits(kernel, backend: str) -> None:
    cell = run(kernel, f"%%run --backend {backend}\n" + THREAD_CHAIN.format(depth=500), timeout=120)
    assert cell.status == "error" and cell.error["ename"] == "trapped", cell.outputs
    shown = shown_error(cell)
    assert "memory limit 4 GiB reached?" in shown and "%%run --memory 8G" in shown \
        and "%limits --memory 8G" in shown, shown
    # ... and the hint is right: with the limit raised the same program ends well.
    fine = run(kernel, f"%%run --backend {backend} --memory none\n" + THREAD_CHAIN.format(depth=500), timeout=120)
    assert fine.status == "ok", fine.outputs


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_allocation_over_a_cell_memory_limit_names_it(kernel, backend):
    cell = run(kernel, f"%%run --backend {backend} --memory 64M\n" + alloc_program(13_107_200))
    assert cell.status == "error", cell.outputs
    assert "memory limit 64 MiB reached?" in shown_error(cell) and "--memory 128M" in shown_error(cell)


def test_a_trap_without_a_memory_limit_names_none(kernel):
    trap = "fn main(world: World) -> [] int {\n    release(world);\n    return 1 / (0 * 1 + zero());\n}\n" \
           "fn zero() -> [] int { return 0; }\n"
    cell = run(kernel, "%%run --memory none --cpu none\n" + trap)
    assert cell.status == "error" and cell.error["ename"] == "trapped", cell.outputs
    assert "limit" not in shown_error(cell), shown_error(cell)


def test_the_cpu_limit_is_named_when_it_ends_a_run(kernel):
    loop = ("fn main(world: World) -> [] int {\n    release(world);\n    var n = 0;\n"
            "    while n >= 0 { n = n + 1; if n > 1000000 { n = 0; } }\n    return n;\n}\n")
    cell = run(kernel, "%%run --cpu 1 --timeout 120\n" + loop)
    assert cell.status == "error" and cell.error["ename"] == "killed-by-signal", cell.outputs
    assert "CPU limit 1 s reached? raise it with %%run --cpu 2" in shown_error(cell), shown_error(cell)


# -- issue 22, finding 10: the memory of large cells is released by %reset ----------------------------------

BIG_CELL_MIB = 8  # four of them: enough to see above the kernel's ~120 MiB, quick to check


def kernel_rss(kernel) -> int:
    import psutil

    return psutil.Process(kernel[0].provisioner.process.pid).memory_info().rss


def test_reset_gives_back_the_memory_of_large_cells(kernel):
    """Four cells each holding an 8 MiB string literal, then %reset: before the fix the kernel
    kept all of it (the history held every cell's text, and the freed blocks stayed in the
    arena of the thread that checked the cells; 50 MiB cells kept ~600 MiB). Now what %reset
    leaves is a small part of what the cells took."""
    for warm in (HELLO, "fn warm() -> [] int { return 1; }", "%reset"):  # the compiler loaded, std checked
        assert run(kernel, warm).status == "ok"
    baseline = kernel_rss(kernel)
    for i in range(4):
        literal = "x" * (BIG_CELL_MIB << 20)
        cell = run(kernel, f'fn big{i}() -> [] int {{\n    let s = "{literal}";\n    return 0;\n}}\n', timeout=300)
        assert cell.status == "ok", cell.error
    held = kernel_rss(kernel)
    assert held - baseline >= 4 * (BIG_CELL_MIB << 20), (baseline, held)  # the cells were really held
    assert run(kernel, "%reset").status == "ok"
    after = kernel_rss(kernel)
    assert after - baseline <= (held - baseline) // 4, (baseline >> 20, held >> 20, after >> 20)
    history = kernel[1].history(hist_access_type="tail", n=10, output=False, raw=True, reply=True, timeout=30)
    assert all(len(code) < 1 << 20 for _, _, code in history["content"]["history"])
    assert_alive(kernel)
