"""The kernel running programs, driven through jupyter_client like a notebook would: stdout
targets, traps, interrupts, floods, stdin, arguments, redefinition, refusals that leave the
session intact, widgets' comms. Every test also shows that the kernel is still alive afterwards.

No test asserts a duration except the interrupt test, which proves the cell ended (generous
bound); timings are measured separately for the report.
"""

from __future__ import annotations

import time
import uuid

import pytest
from kernel_client import LOOP
from kernel_client import Cell as BaseCell, run as run_cell

from cancho_kernel.compiler.backends.process import RunLimits, StdoutTarget
from cancho_kernel.kernel.runner import Runner, RunRequest

pytestmark = pytest.mark.usefixtures("cancho_kernelspec")

BACKENDS = ("jit", "exe")


def program(body: str, helpers: str = "") -> str:
    """A main that splits the world, lends the console as `i` to `body`, returns `status`."""
    return f"""{helpers}
fn main(world: World) -> [] int {{
    let Split {{ io, ffi, fs, heap, args }} = split(world);
    release(ffi);
    release(fs);
    release(heap);
    release(args);
    var status = 0;
    borrow mut io as &!i in {{
{body}
    }}
    release(io);
    return status;
}}
"""


HELLO = program('        write_bytes(i, "hello, world\\n");')
TRAP = program('        write_bytes(i, "before\\n");\n        status = trap();')
FLOOD = """fn main(world: World) -> [] int {
    let Split { io, ffi, fs, heap, args } = split(world);
    release(ffi);
    release(fs);
    release(heap);
    release(args);
    region a {
        let block = alloc_slice[a](50000, byte_of('x'));
        block[49999] = byte_of('\\n');
        var k = 0;
        borrow mut io as &!i in {
            while k < 2000 {
                write_bytes(i, block);
                k = k + 1;
            }
        }
    }
    release(io);
    return 5;
}
"""
ECHO = program("""        var c = getchar(i);
        while c >= 0 {
            putchar(i, c);
            status = status + 1;
            c = getchar(i);
        }""")


class Cell(BaseCell):
    @property
    def result(self) -> str | None:
        res = self.of("execute_result")
        return res[0]["data"]["text/plain"] if res else None


def run(kernel, code: str, timeout: float = 60) -> Cell:
    return run_cell(kernel, code, timeout, cell=Cell)


def assert_alive(kernel) -> None:
    cell = run(kernel, HELLO)
    assert cell.status == "ok", cell.outputs
    assert cell.stream("stdout") == "hello, world\n"


# -- stdout targets --------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_pipe(kernel, backend):
    cell = run(kernel, f"%%run --backend {backend}\n" + HELLO)
    assert cell.status == "ok"
    assert cell.stream("stdout") == "hello, world\n"
    assert cell.result == "returned 0"
    meta = cell.of("execute_result")[0]["metadata"]["cancho"]
    assert meta["backend"] == backend and meta["exit_status"] == 0 and meta["stdout_bytes"] == 13


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("target,words", [("/dev/full", "stdout was /dev/full: 0 bytes reached it"),
                                          ("closed", "stdout was closed (>&-): 0 bytes reached it")])
def test_full_and_closed_show_status_and_zero_bytes(kernel, backend, target, words):
    cell = run(kernel, f"%%run --backend {backend} --stdout {target}\n" + HELLO)
    assert cell.status == "ok", cell.outputs
    assert cell.stream("stdout") == ""
    # What the program thought (its exit status) next to what reached the file.
    assert cell.result == f"returned 0\n{words}"


@pytest.mark.parametrize("backend", BACKENDS)
def test_broken_pipe_is_sigpipe_and_expected(kernel, backend):
    cell = run(kernel, f"%%run --backend {backend} --stdout broken-pipe\n" + HELLO)
    assert cell.status == "ok", cell.outputs
    assert cell.result == ("killed by signal 13 (SIGPIPE)\n"
                           "stdout was a pipe whose reader left after 0 bytes: 0 bytes reached it")


def test_broken_pipe_after_some_bytes(kernel):
    cell = run(kernel, "%%run --stdout broken-pipe:5\n" + HELLO)
    assert cell.status == "ok", cell.outputs
    assert cell.stream("stdout") == "hello"
    assert cell.result.endswith("reader left after 5 bytes: 5 bytes reached it")


def test_unknown_target_is_a_directive_error(kernel):
    cell = run(kernel, "%%run --stdout /dev/nowhere\n" + HELLO)
    assert cell.status == "error"
    assert cell.error["ename"] == "directive-error"


# -- failures the kernel survives ----------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_trap_is_an_error_and_the_kernel_survives(kernel, backend):
    cell = run(kernel, f"%%run --backend {backend}\n" + TRAP)
    assert cell.status == "error"
    assert cell.error["ename"] == "trapped"
    assert cell.error["evalue"] == "killed by signal 4 (SIGILL)"
    # A trap loses the buffered stdout, exactly as a native program does.
    assert cell.stream("stdout") == ""
    assert_alive(kernel)


def test_expected_trap_is_not_an_error(kernel):
    cell = run(kernel, "%%run --expect-trap\n" + TRAP)
    assert cell.status == "ok", cell.outputs
    assert cell.result == "trapped: killed by signal 4 (SIGILL)"


def test_nonzero_exit_status(kernel):
    code = program("        status = 3;")
    cell = run(kernel, code)
    assert cell.status == "error" and cell.error["ename"] == "exit-status"
    assert cell.error["evalue"] == "returned 3"
    ok = run(kernel, "%%run --expect-status 3\n" + code)
    assert ok.status == "ok" and ok.result == "returned 3"
    wrong = run(kernel, "%%run --expect-status 4\n" + code)
    assert wrong.status == "error" and wrong.error["ename"] == "unexpected-outcome"


def test_timeout(kernel):
    cell = run(kernel, "%%run --timeout 0.3\n" + LOOP)
    assert cell.status == "error"
    assert cell.error["ename"] == "timed-out"
    assert cell.error["evalue"] == "timed out after 0.3 s"
    assert_alive(kernel)


@pytest.mark.parametrize("backend", BACKENDS)
def test_interrupt_ends_the_program_and_keeps_the_session(kernel, backend):
    km, kc = kernel
    assert run(kernel, "fn kept() -> [] int { return 7; }").status == "ok"
    msg_id = kc.execute(f"%%run --backend {backend}\n" + LOOP)
    # Wait until the kernel is busy with the cell, then give the program time to start.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        msg = kc.get_iopub_msg(timeout=30)
        if msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "execute_input":
            break
    time.sleep(0.5)
    t0 = time.monotonic()
    km.interrupt_kernel()
    reply = kc.get_shell_msg(timeout=10)
    elapsed = time.monotonic() - t0
    assert reply["parent_header"]["msg_id"] == msg_id
    assert elapsed < 10  # proves the cell ended; the measured figure is in the report
    assert reply["content"]["status"] == "error"
    assert reply["content"]["ename"] == "KeyboardInterrupt", reply["content"]
    errors = []
    while True:
        msg = kc.get_iopub_msg(timeout=10)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "error":
            errors.append(msg["content"])
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            break
    assert [e["ename"] for e in errors] == ["KeyboardInterrupt"]
    # The session kept its items.
    cell = run(kernel, "%%run --expect-status 7\nfn main(world: World) -> [] int { release(world); return kept(); }")
    assert cell.status == "ok", cell.outputs
    assert cell.result == "returned 7"


def test_flood_of_100_mb_is_truncated_and_the_status_kept(kernel):
    cell = run(kernel, "%%run --expect-status 5\n" + FLOOD, timeout=120)
    assert cell.status == "ok", [o for o in cell.outputs if o["msg_type"] != "stream"]
    out = cell.stream("stdout")
    assert len(out) == 1 << 20
    assert set(out) <= {"x", "\n"}
    assert cell.result == ("returned 5\nstdout truncated after 1048576 bytes (100000000 bytes in all; "
                           "raise the limit with --max-output)")
    meta = cell.of("execute_result")[0]["metadata"]["cancho"]
    assert meta["stdout_bytes"] == 100_000_000 and meta["stdout_truncated"]


# -- input and arguments -------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_stdin_text(kernel, backend):
    cell = run(kernel, f"%%run --backend {backend} --stdin 'ab c\\n' --expect-status 5\n" + ECHO)
    assert cell.status == "ok", cell.outputs
    assert cell.stream("stdout") == "ab c\n"


def test_empty_stdin_is_end_of_input(kernel):
    cell = run(kernel, ECHO)
    assert cell.status == "ok", cell.outputs
    assert cell.stream("stdout") == "" and cell.result == "returned 0"


ARGC_IR = """
declare i32 @puts(ptr)
define i32 @main(i32 %argc, ptr %argv) {
  %p = getelementptr ptr, ptr %argv, i64 2
  %s = load ptr, ptr %p
  %r = call i32 @puts(ptr %s)
  ret i32 %argc
}
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_arguments_reach_the_program(backend):
    """`%%run --args` becomes argv[1..] on both backends. No cancho program can read its
    arguments yet (`arg_count`/`arg` are not generated), so this drives the run plumbing the
    kernel uses with a C-level `main`."""
    from cancho_kernel.kernel.directives import Settings, parse_run_options

    opts = parse_run_options("--args first 'second arg' --timeout 10", Settings())
    assert opts.args == ["first", "second arg"]
    runner = Runner()
    try:
        req = RunRequest(ARGC_IR, backend=backend, args=opts.args, limits=opts.limits)
        assert req.argv == ["main", "first", "second arg"]
        result = runner.run_blocking(req)
    finally:
        runner.close()
    assert result.exit_status == 3
    assert result.stdout == b"second arg\n"


def test_arguments_program(kernel):
    code = program("", helpers="""fn count[&a](args: &a Args) -> [args] int {
    return arg_count(args);
}""")
    cell = run(kernel, "%%check\n" + code)
    assert cell.status == "ok", cell.outputs
    main = """fn main(world: World) -> [] int {
    let Split { io, ffi, fs, heap, args } = split(world);
    release(ffi);
    release(fs);
    release(heap);
    release(io);
    var n = 0;
    borrow args as &a in {
        n = count(a);
    }
    release(args);
    return n;
}"""
    cell = run(kernel, "%%run --args a b --expect-status 3\n" + main)
    assert cell.status == "ok", cell.outputs


SEGV_IR = """
define i32 @main(i32 %argc, ptr %argv) {
  store volatile i32 1, ptr null
  ret i32 0
}
"""
ABORT_IR = """
declare void @abort()
define i32 @main(i32 %argc, ptr %argv) {
  call void @abort()
  ret i32 0
}
"""


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("ir,signum", [(SEGV_IR, 11), (ABORT_IR, 6)])
def test_segfault_and_abort_end_only_the_program(backend, ir, signum):
    """Foreign code that crashes (no cancho program can reach C this way yet): the run reports
    the signal and the runner (the kernel's) goes on."""
    from cancho_kernel.kernel import presentation as P

    runner = Runner()
    try:
        result = runner.run_blocking(RunRequest(ir, backend=backend, limits=RunLimits(timeout=20)))
        assert result.signal == signum
        failure = P.judge(result, StdoutTarget(), None, None)
        assert failure is not None and failure.ename == "killed-by-signal"
        again = runner.run_blocking(RunRequest(ARGC_IR, backend=backend, args=["x", "y"]))
        assert again.exit_status == 3
    finally:
        runner.close()


ABORT_PROGRAM = """extern fn abort[&f](ffi: &f Ffi("libc")) -> [ffi("libc")] int;
fn main(world: World) -> [] int {
    let Split { io, ffi, fs, heap, args } = split(world);
    release(io); release(fs); release(heap); release(args);
    let libc = narrow(ffi, "libc");
    var n = 0;
    borrow libc as &f in { n = abort(f); }
    release(libc);
    return n;
}
"""


@pytest.mark.parametrize("backend_name", BACKENDS)
def test_a_cancho_program_aborting_in_c_leaves_the_kernel_alive(kernel, backend_name):
    """Foreign code reached through `extern fn` kills the program with SIGABRT; the cell says
    so and the kernel (and its session) goes on."""
    cell = run(kernel, f"%%run --backend {backend_name}\n" + ABORT_PROGRAM)
    assert cell.status == "error"
    assert cell.error["ename"] == "killed-by-signal"
    assert "6" in cell.error["evalue"] or "SIGABRT" in cell.error["evalue"]
    assert_alive(kernel)


# -- the session -----------------------------------------------------------------------------------------


def test_redefinition_replaces(kernel):
    tag = "r" + uuid.uuid4().hex[:6]
    first = run(kernel, f"fn {tag}() -> [] int {{ return 1; }}")
    assert first.status == "ok" and first.shown == f"defined fn {tag}() -> [] int"
    main = f"%%run --expect-status 2\nfn main(world: World) -> [] int {{ release(world); return {tag}(); }}"
    again = run(kernel, f"fn {tag}() -> [] int {{ return 2; }}")
    assert again.status == "ok", again.outputs
    assert again.shown == f"redefined fn {tag}() -> [] int"
    cell = run(kernel, main)
    assert cell.status == "ok", cell.outputs
    # Re-running the very same cell is not a duplicate declaration either.
    assert run(kernel, f"fn {tag}() -> [] int {{ return 2; }}").status == "ok"
    assert run(kernel, "%%run --expect-status 2\n").status == "ok"  # the last main again


def test_refused_cell_leaves_the_session_intact(kernel):
    tag = "s" + uuid.uuid4().hex[:6]
    assert run(kernel, f"fn {tag}() -> [] int {{ return 4; }}").status == "ok"
    bad = run(kernel, f"fn {tag}() -> [] int {{ return nope; }}\nfn other_{tag}() -> [] int {{ return 1; }}")
    assert bad.status == "error" and bad.error["ename"] == "unknown-name"
    tb = "\n".join(bad.error["traceback"])
    assert "cell[" in tb and ":1:" in tb and "\x1b[" in tb
    cell = run(kernel, f"%%run --expect-status 4\nfn main(world: World) -> [] int {{ release(world); return {tag}(); }}")
    assert cell.status == "ok", cell.outputs
    missing = run(kernel, f"%%check\nfn use() -> [] int {{ return other_{tag}(); }}")
    assert missing.status == "error"


def test_diagnostics_point_into_the_cell_below_directives(kernel):
    cell = run(kernel, "%backend jit\n%%check\n\nfn f(x: int) -> [] int {\n    return zz;\n}")
    assert cell.status == "error"
    assert cell.error["ename"] == "unknown-name"
    first = cell.error["traceback"][0]
    assert ":5:12:" in first, first


def test_refused_directive(kernel):
    ok = run(kernel, "%%refused unknown-name\nfn f() -> [] int { return zz; }")
    assert ok.status == "ok" and ok.shown.startswith("refused as expected: unknown-name")
    accepted = run(kernel, "%%refused unknown-name\nfn f() -> [] int { return 1; }")
    assert accepted.status == "error" and accepted.error["ename"] == "not-refused"
    other = run(kernel, "%%refused type-mismatch\nfn f() -> [] int { return zz; }")
    assert other.status == "error" and other.error["ename"] == "unknown-name"


def test_ir_and_asm(kernel):
    ir = run(kernel, "%%ir\n" + HELLO)
    assert ir.status == "ok" and "define" in ir.shown
    asm = run(kernel, "%%asm\n" + HELLO)
    assert asm.status == "ok" and "main" in asm.shown


def test_file_and_load(kernel, tmp_path):
    path = tmp_path / "prog.cho"
    wrote = run(kernel, f"%%file {path}\n" + HELLO)
    assert wrote.status == "ok" and path.read_text() == HELLO.lstrip("\n")
    loaded = run(kernel, f"%load {path}")
    assert loaded.status == "ok" and loaded.stream("stdout") == "hello, world\n"


def test_who_and_reset_and_unknown(kernel):
    assert run(kernel, "fn listed() -> [] int { return 0; }").status == "ok"
    assert "fn listed() -> [] int" in run(kernel, "%who").shown
    unknown = run(kernel, "%bogus")
    assert unknown.status == "error" and "%%run" in unknown.error["evalue"]
    assert run(kernel, "%reset").status == "ok"
    assert "listed" not in run(kernel, "%who").shown


def test_widgets_comm_round_trip(kernel):
    """ipywidgets' control comm: the frontend asks for widget states and gets an answer."""
    _, kc = kernel
    comm_id = uuid.uuid4().hex
    session = kc.session
    open_msg = session.msg("comm_open", {"comm_id": comm_id, "target_name": "jupyter.widget.control", "data": {}},
                           metadata={"version": "1.0.0"})  # the widget control protocol JupyterLab speaks
    kc.shell_channel.send(open_msg)
    req = session.msg("comm_msg", {"comm_id": comm_id, "data": {"method": "request_states"}})
    kc.shell_channel.send(req)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        msg = kc.get_iopub_msg(timeout=20)
        if msg["msg_type"] == "comm_msg" and msg["content"]["comm_id"] == comm_id:
            assert msg["content"]["data"]["method"] == "update_states"
            break
    else:
        pytest.fail("no answer on the widget control comm")
    info = kc.comm_info(target_name="jupyter.widget.control")
    reply = kc.get_shell_msg(timeout=10)
    while reply["parent_header"].get("msg_id") != info:
        reply = kc.get_shell_msg(timeout=10)
    assert comm_id in reply["content"]["comms"]
    assert_alive(kernel)


@pytest.mark.parametrize("backend", BACKENDS)
def test_memory_limit_is_applied_and_a_small_program_fits(kernel, backend):
    cell = run(kernel, f"%%run --backend {backend} --memory 512M\n" + HELLO)
    assert cell.status == "ok", cell.outputs
    assert cell.stream("stdout") == "hello, world\n"


def test_session_defaults_and_check(kernel):
    shown = run(kernel, "%limits --timeout 0.3")
    assert shown.status == "ok" and shown.shown.startswith("timeout 0.3 s")
    try:
        cell = run(kernel, LOOP)
        assert cell.status == "error" and cell.error["ename"] == "timed-out"
    finally:
        assert run(kernel, "%limits --timeout 30").status == "ok"
    checked = run(kernel, "%%check\n" + LOOP)
    assert checked.status == "ok" and checked.shown.startswith("accepted: `main` was checked, not run")
    assert run(kernel, "%backend exe").shown == "backend exe"
    try:
        cell = run(kernel, HELLO)
        assert cell.of("execute_result")[0]["metadata"]["cancho"]["backend"] == "exe"
    finally:
        run(kernel, "%backend jit")
