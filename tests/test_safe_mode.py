"""Issue 12, finding 8: safe mode for teaching servers.

A student on a kernel started with CANCHO_SAFE=1 (whose working directory is the notebook's
directory) tries every escape the issue lists — reading the kernel's environment through
`/proc/self/environ`, writing outside the notebook's directory, a shell through `extern fn system`,
gcc running a shell through `%%c --cflags '-wrapper ...'`, limits raised beyond the caps — and each
is refused with a clear message, while ordinary cells (hello, a bench, %%authority) still run.
Before the fix every one of them was accepted. The CLI's `--safe` is tested at the end.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from kernel_client import HELLO, Cell, run

pytestmark = pytest.mark.usefixtures("cancho_kernelspec")

SYSTEM = """extern fn system[&f, &c](ffi: &f Ffi("libc"), command: &c [byte]) -> [ffi("libc")] c_int;

fn main(world: World) -> [] int {
    let Split { io, ffi, fs, heap, args } = split(world);
    release(io); release(fs); release(heap); release(args);
    let libc = narrow(ffi, "libc");
    var n = 0;
    borrow libc as &f in { n = system(f, "echo escaped > escaped.txt\\0"); }
    release(libc);
    return n;
}
"""
UNCALLED_EXTERN = """extern fn getpid[&f](ffi: &f Ffi("libc")) -> [ffi("libc")] c_int;
""" + HELLO


@pytest.fixture(scope="module")
def notebook_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("notebook")
    (d / "lib.cho").write_text("fn seven() -> [] int { return 7; }\n")
    (d / "input.txt").write_text("abc")
    (d / "outside").symlink_to("/etc/hostname")
    (d / "sub").mkdir()
    return d.resolve()


@pytest.fixture(scope="module")
def safe_kernel(cancho_kernelspec, notebook_dir):
    """A kernel as a teaching server would start it: CANCHO_SAFE=1, in the notebook's directory."""
    from jupyter_client.manager import start_new_kernel

    env = dict(os.environ, CANCHO_SAFE="1")
    km, kc = start_new_kernel(kernel_name=cancho_kernelspec, startup_timeout=60, env=env,
                              cwd=str(notebook_dir))
    try:
        yield km, kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def refused(cell: Cell, ename: str = "directive-error", words: str = "safe mode") -> str:
    assert cell.status == "error", cell.outputs
    assert cell.error["ename"] == ename, cell.error
    assert words in cell.error["evalue"], cell.error
    return cell.error["evalue"]


# -- the student's attempts ------------------------------------------------------------------------


@pytest.mark.parametrize("line", [
    "%load /proc/self/environ", "%load ../lib.cho", "%load outside", "%load ~/.bashrc",
    "%load sub/../../lib.cho",
])
def test_load_outside_the_notebook_directory_is_refused(safe_kernel, line):
    text = refused(run(safe_kernel, line))
    assert "outside the notebook's directory" in text


@pytest.mark.parametrize("head", [
    "%%run --stdin-file /proc/self/environ", "%%run --stdin-file=/proc/self/environ",
    "%%run --stdin-file outside", "%%run --stdout file:/tmp/cancho-safe-escape.txt",
    "%%run --stdout=file:../escape.txt", "%%file /tmp/cancho-safe-escape.cho",
    "%%bench --runs 1 --stdin-file /proc/self/environ",
])
def test_paths_outside_the_notebook_directory_are_refused(safe_kernel, head):
    refused(run(safe_kernel, head + "\n" + HELLO))
    assert not Path("/tmp/cancho-safe-escape.txt").exists()
    assert not Path("/tmp/cancho-safe-escape.cho").exists()


def test_an_abbreviated_option_cannot_slip_past(safe_kernel):
    cell = run(safe_kernel, "%%run --stdin-f /proc/self/environ\n" + HELLO)
    assert cell.status == "error" and cell.error["ename"] == "directive-error"
    assert "environ" not in cell.stream("stdout")


@pytest.mark.parametrize("head", ["", "%%run\n", "%%run --backend exe\n", "%%bench --runs 1\n"])
def test_a_program_reaching_foreign_code_is_refused_at_its_declaration(safe_kernel, notebook_dir, head):
    cell = run(safe_kernel, head + SYSTEM)
    text = refused(cell, "unsafe-in-safe-mode", "`system`")
    assert "safe mode refuses foreign code" in text
    shown = "\n".join(cell.error["traceback"])
    line = 2 if head else 1
    assert f":{line}:11: " in shown  # located at the extern's name, in the cell's own lines
    assert not (notebook_dir / "escaped.txt").exists()


def test_a_foreign_declaration_nothing_calls_is_not_reach(safe_kernel):
    cell = run(safe_kernel, UNCALLED_EXTERN)
    assert cell.status == "ok", cell.outputs
    assert cell.stream("stdout") == "hello, world\n"


@pytest.mark.parametrize("head", [
    "%%c sh",
    "%%c sh --cflags '-wrapper /bin/sh,-c,touch${IFS}pwned'",
    "%%bench --runs 1 --cflags -O3",
])
def test_c_and_c_flags_are_refused(safe_kernel, notebook_dir, head):
    refused(run(safe_kernel, head + "\nint main(void) { return 0; }\n"))
    assert not (notebook_dir / "pwned").exists()


@pytest.mark.parametrize("line", [
    "%limits --memory none", "%limits --memory 8G", "%limits --timeout none", "%limits --timeout 601",
    "%limits --cpu none", "%limits --processes 100000", "%limits --max-output 64M",
    "%%run --timeout 9999", "%%run --memory unlimited", "%%bench --runs 1 --timeout 1000",
])
def test_limits_cannot_be_raised_beyond_the_caps(safe_kernel, line):
    refused(run(safe_kernel, line + ("\n" + HELLO if line.startswith("%%") else "")))


def test_limits_can_be_lowered(safe_kernel):
    assert run(safe_kernel, "%limits --timeout 5 --memory 1G").status == "ok"
    try:
        shown = run(safe_kernel, "%limits").shown
        assert shown.startswith("timeout 5 s") and shown.endswith("(safe mode)")
    finally:
        assert run(safe_kernel, "%limits --timeout 30 --memory 4G").status == "ok"


def test_help_says_safe_mode_is_on(safe_kernel, notebook_dir):
    shown = run(safe_kernel, "%help").shown
    assert "Safe mode is ON" in shown and str(notebook_dir) in shown.replace("\n", " ")


# -- what still works --------------------------------------------------------------------------------


def test_ordinary_cells_still_run(safe_kernel, notebook_dir):
    hello = run(safe_kernel, HELLO)
    assert hello.status == "ok" and hello.stream("stdout") == "hello, world\n"
    exe = run(safe_kernel, "%%run --backend exe --stdin-file input.txt\n" + HELLO)
    assert exe.status == "ok", exe.outputs
    bench = run(safe_kernel, "%%bench --runs 2 --warmup 0\n" + HELLO)
    assert bench.status == "ok", bench.outputs
    authority = run(safe_kernel, "%%authority\n" + HELLO)
    assert authority.status == "ok" and "io_write" in authority.shown
    unbounded = run(safe_kernel, "%%authority\n" + SYSTEM)  # reporting is not running
    assert unbounded.status == "ok" and "UNBOUNDED" in unbounded.shown


def test_paths_inside_the_notebook_directory_work(safe_kernel, notebook_dir):
    wrote = run(safe_kernel, "%%file mine.cho\n" + HELLO)  # %%file: plain NAME.cho names only
    assert wrote.status == "ok", wrote.outputs
    assert (notebook_dir / "mine.cho").read_text() == HELLO
    (notebook_dir / "sub" / "mine.cho").write_text(HELLO)
    loaded = run(safe_kernel, "%load sub/mine.cho")
    assert loaded.status == "ok" and loaded.stream("stdout") == "hello, world\n"
    absolute = run(safe_kernel, f"%load {notebook_dir / 'lib.cho'}")
    assert absolute.status == "ok", absolute.outputs
    to_file = run(safe_kernel, "%%run --stdout file:out.txt\n" + HELLO)
    assert to_file.status == "ok" and (notebook_dir / "out.txt").read_text() == "hello, world\n"


# -- the command line ---------------------------------------------------------------------------------


def cancho(*args: str, env: dict | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cancho_kernel.cli", *args], capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=300)


def test_cli_safe_refuses_foreign_reach_and_libraries(tmp_path):
    prog = tmp_path / "system.cho"
    prog.write_text(SYSTEM)
    for command in (["run", "--safe"], ["run", "--safe", "--backend", "exe"], ["build", "--safe"]):
        r = cancho(*command, str(prog), cwd=tmp_path)
        assert r.returncode == 1, (command, r.stderr)
        assert f"{prog}:1:11: error: safe mode refuses foreign code" in r.stderr
        assert r.stderr.split("\n")[0].endswith("[unsafe-in-safe-mode]")
    assert not (tmp_path / "escaped.txt").exists() and not (tmp_path / "system").exists()
    env = dict(os.environ, CANCHO_SAFE="1")
    assert cancho("run", str(prog), env=env, cwd=tmp_path).returncode == 1
    hello = tmp_path / "hello.cho"
    hello.write_text(HELLO)
    for flag in (["-l", "m"], ["-L", "/usr/lib"]):
        r = cancho("run", "--safe", *flag, str(hello))
        assert r.returncode == 2 and "refused in safe mode" in r.stderr
    ok = cancho("run", "--safe", str(hello))
    assert ok.returncode == 0 and ok.stdout == "hello, world\n"


def test_cli_test_safe_refuses_foreign_reach(tmp_path):
    prog = tmp_path / "t.cho"
    prog.write_text(SYSTEM.split("\n\nfn main")[0] + """

fn test_shell[&i](io: &!i Io) -> [] int {
    return 0;
}

fn helper(world: World) -> [] int {
    let Split { io, ffi, fs, heap, args } = split(world);
    release(io); release(fs); release(heap); release(args);
    let libc = narrow(ffi, "libc");
    var n = 0;
    borrow libc as &f in { n = system(f, "true\\0"); }
    release(libc);
    return n;
}
""")
    plain = cancho("test", str(prog))
    assert plain.returncode == 0, plain.stderr  # the extern is not reachable from any test
    assert cancho("test", "--safe", "-l", "m", str(prog)).returncode == 2
