"""Issue 17 (hub finding): safe mode confines what a program reaches on disk.

A program holding `Fs` computes its own paths, so screening the paths a directive names is not
enough (when this was found all students of a hub were one Unix user; since issue 22 each is their
own, and Landlock stays a second layer inside the sandbox, which also keeps a student's run away
from their own caches and dotfiles). In safe mode every run is confined with
Landlock to the notebook's directory (read, write, create) and what a program needs to start
(read only). Before the fix the safe kernel below printed the outside file by absolute path,
by `..` and through a symlink planted in the notebook's directory; the same program on a kernel
without safe mode still does (the confinement is what makes the difference, not the program).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from kernel_client import HELLO, run

from cancho_kernel.compiler import api
from cancho_kernel.compiler.backends import confine
from cancho_kernel.compiler.backends.process import RunLimits, run_executable
from cancho_kernel.compiler.run import Backend, build
from cancho_kernel.compiler.source import SourceFile

pytestmark = [pytest.mark.usefixtures("cancho_kernelspec"),
              pytest.mark.skipif(not confine.available(), reason="this Linux has no Landlock")]

SECRET = "alice's diary"


def program(read: str, write: str = "") -> str:
    """Reads READ (prints the byte count fs_read returned, then the bytes) and, given WRITE,
    writes `made` there (prints fs_write's count). Returns 3 when the read failed (a bench sees
    the status, not the output)."""
    write_line = f'borrow fs as &f in {{ w = fs_write(f, "{write}", "made\\n"); }}' if write else ""
    return f"""import std.io;

fn main(world: World) -> [] int {{
    let Split {{ io, ffi, fs, heap, args }} = split(world);
    release(ffi); release(heap); release(args);
    var n = 0;
    var w = 0;
    region a {{
        let buf = alloc_slice[a](40, byte_of(0));
        borrow fs as &f in {{ n = fs_read(f, "{read}", buf); }}
        {write_line}
        borrow mut io as &!i in {{
            io.print_int(i, n);
            write_bytes(i, " ");
            io.print_int(i, w);
            write_bytes(i, "\\n");
            if n > 0 {{ write_bytes(i, buf[0..n]); }}
        }}
    }}
    release(fs); release(io);
    var status = 0;
    if n < 0 {{ status = 3; }}
    return status;
}}
"""


@pytest.fixture(scope="module")
def place(tmp_path_factory) -> Path:
    """A server's disk: another student's file beside this notebook's directory, and a symlink
    to it planted inside."""
    base = tmp_path_factory.mktemp("confine").resolve()
    (base / "alice").mkdir()
    (base / "alice" / "diary.txt").write_text(SECRET + "\n")
    nb = base / "bob"
    nb.mkdir()
    (nb / "mine.txt").write_text("bob's notes\n")
    (nb / "link").symlink_to(base / "alice" / "diary.txt")
    (nb / "up").symlink_to(base)  # a directory link: up/alice/diary.txt
    return base


def start(notebook: Path, safe: bool):
    from jupyter_client.manager import start_new_kernel

    env = dict(os.environ)
    env.pop("CANCHO_SAFE", None)
    if safe:
        env["CANCHO_SAFE"] = "1"
    km, kc = start_new_kernel(kernel_name="cancho", startup_timeout=60, env=env, cwd=str(notebook))
    return km, kc


@pytest.fixture(scope="module")
def safe_kernel(place):
    km, kc = start(place / "bob", safe=True)
    try:
        yield km, kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


@pytest.fixture(scope="module")
def plain_kernel(place):
    km, kc = start(place / "bob", safe=False)
    try:
        yield km, kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def outside_paths(place: Path) -> list[str]:
    """Ways out a program can compute. (`..` itself is refused by the language: a path holding
    it traps in every mode, runtime.md; see :func:`test_dot_dot_traps_in_every_mode`. The
    launcher's own test below also goes out by `..`.)"""
    return [str(place / "alice" / "diary.txt"), "link", "up/alice/diary.txt", "/proc/self/environ"]


HEADS = ["", "%%run --backend exe\n", "%%run --backend jit\n"]


@pytest.mark.parametrize("head", HEADS)
@pytest.mark.parametrize("which", range(4))
def test_a_safe_run_cannot_read_outside_the_notebook_directory(safe_kernel, place, head, which):
    path = outside_paths(place)[which]
    cell = run(safe_kernel, head + program(path))
    assert cell.stream("stdout") == "-1 0\n", cell.outputs  # the program's own error value
    assert cell.error is not None and "3" in cell.error["evalue"], cell.outputs  # its status
    assert "signal" not in cell.error["evalue"], cell.error  # not a crash


@pytest.mark.parametrize("kernel_name", ["safe_kernel", "plain_kernel"])
def test_dot_dot_traps_in_every_mode(request, kernel_name):
    cell = run(request.getfixturevalue(kernel_name), program("../alice/diary.txt"))
    assert cell.error is not None and "SIGILL" in cell.error["evalue"], cell.outputs
    assert SECRET not in cell.stream("stdout")


@pytest.mark.parametrize("head", HEADS)
def test_a_safe_run_reads_and_writes_inside(safe_kernel, place, head):
    made = place / "bob" / "sub-made.txt"
    made.unlink(missing_ok=True)
    cell = run(safe_kernel, head + program("mine.txt", write="sub-made.txt"))
    assert cell.status == "ok", cell.outputs
    assert cell.stream("stdout") == "12 5\nbob's notes\n"
    assert made.read_text() == "made\n"


def test_a_safe_run_cannot_write_outside(safe_kernel, place):
    cell = run(safe_kernel, program("mine.txt", write=str(place / "alice" / "planted.txt")))
    assert cell.stream("stdout").startswith("12 -1\n"), cell.outputs
    assert not (place / "alice" / "planted.txt").exists()


@pytest.mark.parametrize("backend", ["exe", "jit"])
def test_safe_bench_runs_are_confined(safe_kernel, place, backend):
    """%%bench runs each program through the runner's caps too: the program returns 3 when its
    read is refused (the bench expects that status) and cannot plant a file outside."""
    planted = place / "alice" / f"bench-{backend}.txt"
    cell = run(safe_kernel, f"%%bench --runs 2 --warmup 0 --expect-status 3 --backend {backend}\n"
               + program(str(place / "alice" / "diary.txt"), write=str(planted)))
    assert cell.status == "ok", cell.outputs
    assert not planted.exists()


def test_without_safe_mode_the_same_program_reads_outside(plain_kernel, place):
    """The control: nothing changes outside safe mode (and the program above really reads)."""
    for path in outside_paths(place)[:3]:  # (the environment differs: not compared)
        cell = run(plain_kernel, program(path))
        assert cell.status == "ok", cell.outputs
        assert SECRET in cell.stream("stdout"), (path, cell.outputs)


def test_ordinary_cells_still_run_when_confined(safe_kernel):
    cell = run(safe_kernel, HELLO)
    assert cell.status == "ok" and cell.stream("stdout") == "hello, world\n", cell.outputs


# -- below the kernel: the launcher's confinement itself ---------------------------------------------


@pytest.fixture(scope="module")
def built_reader(place, tmp_path_factory):
    bin_dir = tmp_path_factory.mktemp("bin")
    compiled = api.compile_sources([SourceFile("reader.cho", program(str(place / "alice" / "diary.txt")))])
    assert compiled.ok, compiled.diagnostics
    return build(compiled.ir, Backend.EXE, bin_dir / "reader")


@pytest.mark.parametrize("confined", [False, True])
@pytest.mark.parametrize("path", ["ALICE", "../alice/diary.txt", "link", "up/alice/diary.txt"])
def test_the_launcher_confines_any_program(place, confined, path, monkeypatch):
    """Any program, not only cancho's: cat by absolute path, by `..`, through a file link and a
    directory link, with and without the confinement."""
    monkeypatch.chdir(place / "bob")
    path = str(place / "alice" / "diary.txt") if path == "ALICE" else path
    limits = RunLimits(confine=confine.Confinement.for_directory(place / "bob") if confined else None)
    result = run_executable("/bin/cat", ["cat", path], limits=limits)
    if confined:
        assert result.exit_status == 1 and b"Permission denied" in result.stderr, result
        assert result.stdout == b""
    else:
        assert result.exit_status == 0 and result.stdout == (SECRET + "\n").encode()
    inside = run_executable("/bin/cat", ["cat", "mine.txt"], limits=limits)
    assert inside.exit_status == 0 and inside.stdout == b"bob's notes\n"


@pytest.mark.parametrize("confined", [False, True])
def test_the_launcher_confines_only_when_asked(place, built_reader, confined, monkeypatch):
    monkeypatch.chdir(place / "bob")
    limits = RunLimits(confine=confine.Confinement.for_directory(place / "bob") if confined else None)
    result = run_executable(built_reader.path, ["reader"], limits=limits)
    if confined:
        assert result.stdout == b"-1 0\n" and result.exit_status == 3, result.stderr
    else:
        assert result.exit_status == 0, result.stderr
        assert result.stdout.startswith(b"14 0\n" + SECRET.encode())


def test_confinement_roots_for_a_directory(tmp_path):
    c = confine.Confinement.for_directory(tmp_path).with_readable(str(tmp_path / "bin"))
    assert f"w{tmp_path.resolve()}" in c.roots() and "r/usr" in c.roots()
    assert confine.launcher_args(None) == ["-"]
    assert confine.launcher_args(c)[0] == str(len(c.roots()))


# -- where Linux has no Landlock --------------------------------------------------------------------

NO_LANDLOCK_KERNEL = """
import os
from cancho_kernel.compiler.backends import confine
confine.landlock_abi = lambda: 0  # as on Linux before 5.13
os.environ["CANCHO_SAFE"] = "1"
from cancho_kernel.kernel import CanchoKernel
k = CanchoKernel()
try:
    print(k.runner.caps is not None, k.runner.caps.confine)
    print(repr(k.runner.take_notice()))
    print(k.runner.take_notice())
finally:
    k.runner.close()
"""


def test_a_safe_kernel_without_landlock_says_so_once(tmp_path):
    """No silent pretence: the kernel keeps safe mode's other rules, runs unconfined, logs it and
    has one notice for the first cell's output (kernel.py shows it as stderr)."""
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-c", NO_LANDLOCK_KERNEL], capture_output=True, text=True,
                       cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stderr
    caps, notice, again = r.stdout.splitlines()
    assert caps == "True None"
    assert "cannot confine programs" in notice and "Landlock" in notice
    assert again == "None"
    assert "Landlock" in r.stderr  # the kernel's log


def test_a_plan_with_landlock_confines_the_notebook_directory(tmp_path):
    plan = confine.plan_for(tmp_path)
    assert plan.warning is None and plan.confine is not None
    assert str(tmp_path.resolve()) in plan.confine.writable


# -- no planted Python runs -------------------------------------------------------------------------


@pytest.mark.parametrize("safe", [True, False])
def test_python_planted_in_the_notebook_directory_does_not_run(tmp_path, safe):
    """A `%%file cancho_kernel.py` beside a notebook would be what `python -m cancho_kernel`
    starts (and the JIT worker's `python -m cancho_kernel.compiler...` imports), since `-m` puts
    the working directory first on sys.path. The kernelspec, as install.py writes it, sets
    PYTHONSAFEPATH=1: a fresh kernel in that directory starts the real package."""
    import subprocess
    import sys
    import uuid

    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager

    from cancho_kernel.install import KERNEL_JSON

    prefix = tmp_path / "prefix"
    subprocess.run([sys.executable, "-m", "cancho_kernel.install", "--prefix", str(prefix)],
                   check=True, stdout=subprocess.DEVNULL)
    specs = KernelSpecManager(kernel_dirs=[str(prefix / "share/jupyter/kernels")])
    assert specs.get_kernel_spec("cancho").env == KERNEL_JSON["env"] == {"PYTHONSAFEPATH": "1"}
    notebook = tmp_path / "notebook"
    notebook.mkdir()
    marker = tmp_path / f"pwned-{uuid.uuid4().hex}"
    planted = f"import pathlib\npathlib.Path({str(marker)!r}).write_text('pwned')\n"
    first = start(notebook, safe)
    try:
        for name in ("cancho_kernel.py", "ipykernel.py", "sitecustomize.py"):
            # safe mode's %%file writes only NAME.cho: planted another way (a confined run)
            assert run(first, f"%%file {name}\n{planted}").status == ("error" if safe else "ok")
            (notebook / name).write_text(planted)
    finally:
        first[1].stop_channels()
        first[0].shutdown_kernel(now=True)
    assert (notebook / "cancho_kernel.py").exists() and not marker.exists()

    env = {k: v for k, v in os.environ.items() if k not in ("CANCHO_SAFE", "PYTHONSAFEPATH")}
    if safe:
        env["CANCHO_SAFE"] = "1"
    km = KernelManager(kernel_name="cancho", kernel_spec_manager=specs)
    km.start_kernel(env=env, cwd=str(notebook))
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=60)
        cell = run((km, kc), "%%run --backend jit\n" + HELLO)  # the JIT worker has started
        assert cell.status == "ok" and cell.stream("stdout") == "hello, world\n", cell.outputs
        assert not marker.exists()
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def test_help_says_programs_are_confined(safe_kernel, place):
    shown = run(safe_kernel, "%help").shown.replace("\n", " ")
    assert f"confined on disk (Landlock) to {place / 'bob'}" in shown


@pytest.mark.skipif(confine.landlock_abi() < 6, reason="signal scoping needs Landlock ABI 6")
@pytest.mark.parametrize("confined", [False, True])
def test_a_confined_program_cannot_signal_outside_its_run(place, confined):
    """Without scoping a program could signal any process of its own Unix user (the student's
    own kernel and server; before issue 22 every student's). kill -0 on this (unconfined) process is refused when confined; signalling
    its own child still works."""
    limits = RunLimits(confine=confine.Confinement.for_directory(place / "bob") if confined else None)
    out = run_executable("/bin/kill", ["kill", "-0", str(os.getpid())], limits=limits)
    assert out.exit_status == (1 if confined else 0), out
    own = run_executable("/bin/sh", ["sh", "-c", "sleep 5 & kill $! && echo killed-own"], limits=limits)
    assert own.exit_status == 0 and own.stdout == b"killed-own\n", own


@pytest.mark.parametrize("backend", ["jit", "exe"])
def test_cancho_run_safe_confines_the_program_to_the_working_directory(place: Path, backend: str):
    """`cancho run --safe` confines as the kernel does: the other student's file is out of reach
    by absolute path and through a planted link; the working directory's own file is read; the
    same program without --safe reads the other file (so the test can fail)."""
    import subprocess
    import sys

    nb = place / "bob"
    outside = str(place / "alice" / "diary.txt")
    cases = [(outside, True, False), (str(nb / "link"), True, False), (str(nb / "mine.txt"), True, True),
             (outside, False, True)]
    for read, safe, readable in cases:
        (nb / "p.cho").write_text(program(read))
        cmd = [sys.executable, "-m", "cancho_kernel.cli", "run", "--no-cache", "--backend", backend,
               *(["--safe"] if safe else []), "p.cho"]
        r = subprocess.run(cmd, cwd=nb, capture_output=True, timeout=120)
        what = f"{read} safe={safe}: {r.stdout!r} {r.stderr!r}"
        if readable:
            assert r.returncode == 0 and int(r.stdout.split()[0]) > 0, what
        else:
            assert r.returncode == 3 and int(r.stdout.split()[0]) < 0, what
            assert SECRET.encode() not in r.stdout, what
