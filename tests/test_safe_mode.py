"""Issue 12, finding 8: safe mode for teaching servers.

A student on a kernel started with CANCHO_SAFE=1 (whose working directory is the notebook's
directory) tries every escape the issue lists — reading the kernel's environment through
`/proc/self/environ`, writing outside the notebook's directory, a shell through `extern fn system`,
gcc running a shell through `%%c --cflags '-wrapper ...'`, limits raised beyond the caps — and each
is refused with a clear message, while ordinary cells (hello, a bench, %%authority) still run.
Before the fix every one of them was accepted. The CLI's `--safe` is tested at the end.

Issue 22: the sandbox (compiler/backends/sandbox.py) is now the boundary, so where it runs the
shell through `extern fn system` and `%%c` (with its flags) are allowed and run inside it: the
tests check that what they did stayed inside. Where it cannot start, the refusals stand
(compiler/policy.py; checked here with the probe replaced).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from kernel_client import HELLO, Cell, run

from cancho_kernel.compiler import api, policy
from cancho_kernel.compiler.backends import sandbox
from cancho_kernel.compiler.source import SourceFile

pytestmark = pytest.mark.usefixtures("cancho_kernelspec")

SYSTEM = """extern fn system[&f, &c](ffi: &f Ffi("libc"), command: &c [byte]) -> [ffi("libc")] c_int;

fn main(world: World) -> [] int {
    let Split { io, ffi, fs, heap, args } = split(world);
    release(io); release(fs); release(heap); release(args);
    let libc = narrow(ffi, "libc");
    var n = 0;
    borrow libc as &f in { n = system(f, "COMMAND\\0"); }
    release(libc);
    return n;
}
"""


def system(command: str) -> str:
    """A program running ``command`` through libc's `system` (a shell)."""
    return SYSTEM.replace("COMMAND", command.replace('"', '\\"'))


NEEDS_SANDBOX = pytest.mark.skipif(not sandbox.probe().ok and not os.environ.get("CI"),
                                   reason=f"no sandbox here: {sandbox.probe().reason}")
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


@pytest.mark.parametrize("head", [
    "%%file .local/lib/python3.11/site-packages/evil.pth",
    "%%file .jupyter/jupyter_server_config.py", "%%file sub/../.ipython/startup.py",
    "%%file .bashrc", "%%run --stdout file:.cache/cancho-kernel/measure-0123",
])
def test_the_kernel_writes_nothing_hidden_that_runs_later(safe_kernel, notebook_dir, head):
    """Issue 22: the kernel itself writes unconfined, so on a hub (the notebook's directory is
    `$HOME`) `%%file` could plant a `.pth` the next Python start runs, or the exe launcher."""
    text = refused(run(safe_kernel, head + "\nimport os\n" if "%%file" in head else head + "\n" + HELLO))
    assert "hidden" in text
    assert not any(p.name in ("evil.pth", "jupyter_server_config.py", "startup.py", ".bashrc",
                              "measure-0123") for p in notebook_dir.rglob("*"))


def test_an_abbreviated_option_cannot_slip_past(safe_kernel):
    cell = run(safe_kernel, "%%run --stdin-f /proc/self/environ\n" + HELLO)
    assert cell.status == "error" and cell.error["ename"] == "directive-error"
    assert "environ" not in cell.stream("stdout")


@NEEDS_SANDBOX
@pytest.mark.parametrize("head", ["", "%%run\n", "%%run --backend exe\n", "%%bench --runs 1\n"])
def test_foreign_code_runs_in_the_sandbox_and_stays_inside(safe_kernel, notebook_dir, head):
    """A shell through `extern fn system` writes in the notebook's directory (allowed) and tries
    the directory above, the kernel's cache and the host's /tmp: only the first file appears."""
    tag = f"{len(head)}-{head.count('bench')}"
    above = notebook_dir.parent / f"escaped-{tag}.txt"
    cache = notebook_dir / ".cache" / f"escaped-{tag}.txt"
    host_tmp = Path("/tmp") / f"cancho-escaped-{tag}-{os.getpid()}.txt"
    command = (f"echo inside > inside-{tag}.txt; echo x > {above}; mkdir -p .cache; "
               f"echo x > {cache}; echo x > {host_tmp}")
    cell = run(safe_kernel, head + system(command))
    assert cell.status == "ok", cell.outputs
    assert (notebook_dir / f"inside-{tag}.txt").read_text() == "inside\n"
    assert not above.exists() and not cache.exists() and not host_tmp.exists()


def compiled(text: str):
    out = api.compile_sources([SourceFile("p.cho", text)])
    assert out.ok, out.diagnostics
    return out.program


def test_without_the_sandbox_foreign_code_is_refused_at_its_declaration():
    refusals = policy.safe_mode_refusals(compiled(system("true")), sandboxed_runs=False)
    assert [d.rule.value for d in refusals] == ["unsafe-in-safe-mode"]
    assert "refuses foreign code" in refusals[0].message and "`system`" in refusals[0].message
    span = refusals[0].span
    assert (span.line, span.column) == (1, 11)  # at the extern's name
    assert policy.safe_mode_refusals(compiled(system("true")), sandboxed_runs=True) == []


EXEC = """edition 7;

fn main(world: World) -> [] int {
    let Split { io, ffi, fs, heap, args, net, clock, signals, exec } = split(world);
    release(ffi); release(net); release(clock); release(signals); release(io); release(fs);
    release(heap); release(args);
    var status = 0;
    borrow exec as &x in {
        match exec_spawn(x, "/bin/sh", "-c\\0true\\0", "", Stdio::Null, Stdio::Null, Stdio::Null) {
            Spawned::Failed(e) => { status = e; }
            Spawned::Ok(child) => { child_wait(child); }
        }
    }
    release(exec);
    return status;
}
"""


def test_without_the_sandbox_exec_is_refused():
    """`Exec` was allowed in safe mode (issue 22): a program ran /bin/sh, cc, python3 with all
    the server's user could do. Without the sandbox it is refused, located at `main`."""
    refusals = policy.safe_mode_refusals(compiled(EXEC), sandboxed_runs=False)
    assert [d.rule.value for d in refusals] == ["unsafe-in-safe-mode"]
    assert "refuses `Exec`" in refusals[0].message and refusals[0].span.line == 3
    assert policy.safe_mode_refusals(compiled(EXEC), sandboxed_runs=True) == []


def test_a_foreign_declaration_nothing_calls_is_not_reach(safe_kernel):
    cell = run(safe_kernel, UNCALLED_EXTERN)
    assert cell.status == "ok", cell.outputs
    assert cell.stream("stdout") == "hello, world\n"


@NEEDS_SANDBOX
@pytest.mark.parametrize("head", [
    "%%c sh --run",
    "%%c sh --run --cflags '-wrapper /bin/sh,-c,touch${IFS}pwned;touch${IFS}NB/pwned'",
    "%%c sh --run --cflags=-O3 --ldflags=-lm",
])
def test_c_and_c_flags_run_in_the_sandbox(safe_kernel, notebook_dir, head):
    """%%c compiles in the sandbox (a `-wrapper` shell writes nothing in the notebook's
    directory: the compiler's only writable place is the baseline's own) and its program runs in
    it (a write above the notebook's directory does not happen)."""
    above = notebook_dir.parent / "c-escaped.txt"
    body = (f'#include <stdio.h>\nint main(void) {{ FILE *f = fopen("{above}", "w"); '
            f'if (f) fputs("x", f); puts(f ? "escaped" : "stayed"); return 0; }}\n')
    cell = run(safe_kernel, head.replace("NB", str(notebook_dir)) + "\n" + body)
    assert not (notebook_dir / "pwned").exists() and not above.exists()
    if "-wrapper" not in head:
        assert cell.status == "ok", cell.outputs
        assert cell.stream("stdout").startswith("stayed"), cell.outputs


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
    wrote = run(safe_kernel, "%%file sub/mine.cho\n" + HELLO)
    assert wrote.status == "ok", wrote.outputs
    assert (notebook_dir / "sub" / "mine.cho").read_text() == HELLO
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


NO_SANDBOX_CLI = """
import sys
from cancho_kernel.compiler.backends import sandbox
sandbox.probe = lambda: sandbox.SandboxProbe(False, "no bwrap (test)")
from cancho_kernel.cli import main
sys.exit(main(sys.argv[1:]))
"""


def cancho_without_sandbox(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """The CLI on a machine whose sandbox cannot start (the probe replaced in its process)."""
    return subprocess.run([sys.executable, "-c", NO_SANDBOX_CLI, *args], capture_output=True,
                          text=True, cwd=cwd, timeout=300)


def test_cli_safe_without_the_sandbox_refuses_foreign_reach_and_libraries(tmp_path):
    prog = tmp_path / "system.cho"
    prog.write_text(system("echo escaped > escaped.txt"))
    for command in (["run", "--safe"], ["run", "--safe", "--backend", "exe"], ["build", "--safe"]):
        r = cancho_without_sandbox(*command, str(prog), cwd=tmp_path)
        assert r.returncode == 1, (command, r.stderr)
        assert f"{prog}:1:11: error: safe mode refuses foreign code" in r.stderr
        assert "[unsafe-in-safe-mode]" in r.stderr.split("\n")[0]
    assert not (tmp_path / "escaped.txt").exists() and not (tmp_path / "system").exists()
    hello = tmp_path / "hello.cho"
    hello.write_text(HELLO)
    for flag in (["-l", "m"], ["-L", "/usr/lib"]):
        r = cancho_without_sandbox("run", "--safe", *flag, str(hello), cwd=tmp_path)
        assert r.returncode == 2 and "refused in safe mode" in r.stderr
    ok = cancho_without_sandbox("run", "--safe", str(hello), cwd=tmp_path)
    assert ok.returncode == 0 and ok.stdout == "hello, world\n"
    assert "cannot start its sandbox" in ok.stderr  # said, not silent


@NEEDS_SANDBOX
def test_cli_safe_runs_foreign_code_in_the_sandbox(tmp_path):
    """`cancho run --safe` (and CANCHO_SAFE=1) runs `system` inside the sandbox: the working
    directory is written, the directory above is not; `-l m` links."""
    nb = tmp_path / "nb"
    nb.mkdir()
    prog = nb / "system.cho"
    prog.write_text(system(f"echo inside > inside.txt; echo x > {tmp_path}/escaped.txt"))
    for command in (["run", "--safe"], ["run", "--safe", "--backend", "exe"], ["run"]):
        env = dict(os.environ, CANCHO_SAFE="1") if command == ["run"] else None
        r = cancho(*command, "--no-cache", str(prog), cwd=nb, env=env)
        assert r.returncode != 1 or "unsafe-in-safe-mode" not in r.stderr, r.stderr
        assert (nb / "inside.txt").read_text() == "inside\n", (command, r.stderr)
        assert not (tmp_path / "escaped.txt").exists(), command
        (nb / "inside.txt").unlink()
    hello = nb / "hello.cho"
    hello.write_text(HELLO)
    r = cancho("run", "--safe", "-l", "m", str(hello), cwd=nb)
    assert r.returncode == 0 and r.stdout == "hello, world\n", r.stderr


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
    refused_l = cancho_without_sandbox("test", "--safe", "-l", "m", str(prog), cwd=tmp_path)
    assert refused_l.returncode == 2, refused_l.stderr
    if sandbox.probe().ok:  # the sandbox bounds a library: it links and the test runs
        linked = cancho("test", "--safe", "-l", "m", str(prog), cwd=tmp_path)
        assert linked.returncode == 0, linked.stderr
