"""Safe mode's sandbox (compiler/backends/sandbox.py), tried as a hostile student would: each test
tries to get out and then checks, from outside, that it did not (issue 22).

The first part drives the sandbox directly with the system's shell and Python inside (the tools
a program that may ``Exec`` reaches); the second part runs cancho programs through the exe
backend in safe mode.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cancho_kernel.compiler.backends import sandbox

pytestmark = pytest.mark.skipif(not sandbox.probe().ok and not os.environ.get("CI"),
                                reason=f"no sandbox here: {sandbox.probe().reason}")

PY = "/usr/bin/python3"


def run_inside(spec: sandbox.SandboxSpec, argv: list[str], timeout: float = 60.0
               ) -> subprocess.CompletedProcess:
    launch = sandbox.command(spec, argv)
    try:
        return subprocess.run(launch.argv, pass_fds=launch.pass_fds, capture_output=True,
                              text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    finally:
        launch.close()


def py_inside(spec: sandbox.SandboxSpec, code: str) -> subprocess.CompletedProcess:
    return run_inside(spec, [PY, "-I", "-c", textwrap.dedent(code)])


def test_probe_says_the_sandbox_works_here():
    assert sandbox.probe().ok, sandbox.probe().reason


def test_writes_into_hidden_dot_directories_do_not_reach_the_host(tmp_path):
    home = tmp_path / "home"
    (home / ".cache" / "cancho-kernel").mkdir(parents=True)
    (home / ".local" / "share" / "jupyter" / "runtime").mkdir(parents=True)
    spec = sandbox.SandboxSpec(writable=(str(home),))
    script = (f"echo evil > {home}/.cache/cancho-kernel/measure-0123; "
              f"mkdir -p {home}/.local/lib/python3.11/site-packages && "
              f"echo 'import os' > {home}/.local/lib/python3.11/site-packages/x.pth; "
              f"echo key > {home}/.local/share/jupyter/runtime/kernel-x.json; "
              f"mkdir -p {home}/.jupyter && echo c > {home}/.jupyter/jupyter_server_config.py; "
              f"mkdir -p {home}/.ssh && echo k > {home}/.ssh/authorized_keys; "
              f"echo ok > {home}/work.txt")
    r = run_inside(spec, ["/bin/sh", "-c", script])
    assert r.returncode == 0, r.stderr
    assert (home / "work.txt").read_text() == "ok\n"  # the notebook's own files are writable
    leaked = [p for p in home.rglob("*") if p.is_file() and p.name != "work.txt"]
    assert leaked == [], leaked


def test_existing_dot_files_are_read_only(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / ".bashrc").write_text("original\n")
    r = run_inside(sandbox.SandboxSpec(writable=(str(home),)),
                   ["/bin/sh", "-c", f"cat {home}/.bashrc; echo evil > {home}/.bashrc; "
                                     f"rm -f {home}/.bashrc; true"])
    assert r.stdout == "original\n"
    assert (home / ".bashrc").read_text() == "original\n"


def test_another_home_and_the_hosts_tree_are_not_visible(tmp_path):
    alice, bob = tmp_path / "alice", tmp_path / "bob"
    alice.mkdir()
    bob.mkdir()
    (alice / "homework.txt").write_text("alice's answer\n")
    r = py_inside(sandbox.SandboxSpec(writable=(str(bob),)), f"""
        import os
        for p in ({str(alice / 'homework.txt')!r}, {str(alice)!r}, '/root', '/home', '/work'):
            print(p, os.path.exists(p))
        print(sorted(os.listdir({str(tmp_path)!r})))
    """)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert all(line.endswith("False") for line in lines[:-1]), r.stdout
    assert lines[-1] == "['bob']"


def test_the_system_is_read_only_and_tmp_is_private(tmp_path):
    marker = Path("/tmp") / f"cancho-sandbox-test-{os.getpid()}"
    r = run_inside(sandbox.SandboxSpec(writable=(str(tmp_path),)),
                   ["/bin/sh", "-c", f"echo x > {marker}; touch /usr/evil; touch /etc/evil; "
                                     "ls /tmp"])
    assert marker.exists() is False
    assert not Path("/usr/evil").exists() and not Path("/etc/evil").exists()
    assert "Read-only file system" in r.stderr


DENIED_CALLS = r"""
import ctypes, errno, os, socket
libc = ctypes.CDLL(None, use_errno=True)
def call(name, *args):
    r = getattr(libc, name)(*args)
    return "ok" if r >= 0 else errno.errorcode[ctypes.get_errno()]
def sock(family, kind, proto=0):
    try:
        socket.socket(family, kind, proto).close()
        return "ok"
    except OSError as e:
        return errno.errorcode[e.errno]
print("raw", sock(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP))
print("raw6", sock(socket.AF_INET6, socket.SOCK_RAW | socket.SOCK_CLOEXEC, socket.IPPROTO_ICMPV6))
print("packet", sock(socket.AF_PACKET, socket.SOCK_RAW))
print("packet_dgram", sock(socket.AF_PACKET, socket.SOCK_DGRAM))
print("netlink", sock(socket.AF_NETLINK, socket.SOCK_DGRAM))
print("vsock", sock(40, socket.SOCK_STREAM))
print("alg", sock(38, socket.SOCK_SEQPACKET))
SOCKET_NR = 41 if os.uname().machine == "x86_64" else 198
print("family_high_bits", call("syscall", SOCKET_NR, ctypes.c_long(0x100000010), 2, 0))
print("socketpair_netlink", call("socketpair", 16, 2, 0, (ctypes.c_int * 2)()))
print("io_uring", call("syscall", 425, 8, (ctypes.c_char * 120)()))
print("unshare_user", call("unshare", 0x10000000))
print("unshare_net", call("unshare", 0x40000000))
print("ptrace", call("ptrace", 16, os.getppid(), None, None))
print("mount", call("mount", b"none", b"/tmp", b"tmpfs", 0, None))
print("bpf", call("syscall", 321 if os.uname().machine == "x86_64" else 280, 0, None, 0))
print("keyctl", call("syscall", 250 if os.uname().machine == "x86_64" else 219, 0, 0, 0))
print("tcp", sock(socket.AF_INET, socket.SOCK_STREAM))
print("unix", sock(socket.AF_UNIX, socket.SOCK_STREAM))
"""


def test_raw_packet_netlink_sockets_unshare_ptrace_mount_are_refused(tmp_path):
    r = py_inside(sandbox.SandboxSpec(writable=(str(tmp_path),)), DENIED_CALLS)
    assert r.returncode == 0, r.stderr
    got = dict(line.split() for line in r.stdout.splitlines())
    assert got.pop("tcp") == "ok" and got.pop("unix") == "ok"  # ordinary sockets still work
    assert got == {k: "EPERM" for k in got}, got
    assert len(got) == 16


def test_the_hosts_loopback_is_unreachable_but_the_programs_own_works(tmp_path):
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.5)
    port = server.getsockname()[1]
    try:
        r = py_inside(sandbox.SandboxSpec(writable=(str(tmp_path),)), f"""
            import socket, threading
            try:
                socket.create_connection(("127.0.0.1", {port}), timeout=5)
                print("host reached")
            except OSError as e:
                print("host", e.errno)
            srv = socket.create_server(("127.0.0.1", 0))
            def serve():
                c, _ = srv.accept(); c.sendall(c.recv(5).upper()); c.close()
            threading.Thread(target=serve).start()
            c = socket.create_connection(srv.getsockname(), timeout=5)
            c.sendall(b"hello"); print("own", c.recv(5).decode())
        """)
        with pytest.raises(TimeoutError):
            server.accept()  # nothing arrived from inside
    finally:
        server.close()
    assert r.returncode == 0, r.stderr
    assert "host reached" not in r.stdout
    assert "own HELLO" in r.stdout


def test_a_write_past_the_file_size_limit_is_stopped(tmp_path):
    r = run_inside(sandbox.SandboxSpec(writable=(str(tmp_path),), fsize_bytes=1 << 20),
                   ["/bin/sh", "-c", f"exec head -c 4194304 /dev/zero > {tmp_path}/big"])
    assert r.returncode != 0
    assert (tmp_path / "big").stat().st_size <= 1 << 20


def test_the_filter_names_resolve_on_x86_64_and_aarch64(tmp_path):
    import pyseccomp as sc

    f = sandbox.seccomp_filter(extra_arches=(sc.Arch.X86_64, sc.Arch.AARCH64))
    with open(tmp_path / "f.bpf", "wb") as out:
        f.export_bpf(out)
    assert (tmp_path / "f.bpf").stat().st_size > 100
    x86_only = {"ioperm", "iopl"}
    for arch in (sc.Arch.X86_64, sc.Arch.AARCH64):
        for name in ("unshare", "setns", "mount", "umount2", "pivot_root", "ptrace",
                     "process_vm_readv", "process_vm_writev", "bpf", "perf_event_open", "keyctl",
                     "add_key", "request_key", "kexec_load", "init_module", "finit_module",
                     "delete_module", "swapon", "reboot", "userfaultfd", "open_by_handle_at",
                     "clone", "clone3", "socket", *x86_only):
            if name in x86_only and arch == sc.Arch.AARCH64:
                continue
            assert sc.resolve_syscall(arch, name) >= 0, (arch, name)


# -- safe runs of cancho programs: the exe backend and the JIT worker's -------------------------------

from cancho_kernel.compiler import api, policy  # noqa: E402
from cancho_kernel.compiler.backends import cgroups, chelper, measure  # noqa: E402
from cancho_kernel.compiler.backends.process import (SAFE_CAPS, RunLimits, StdoutTarget,  # noqa: E402
                                                     run_executable)
from cancho_kernel.compiler.run import Backend, build  # noqa: E402
from cancho_kernel.compiler.source import SourceFile  # noqa: E402

# The JIT variants: the whole JIT worker runs in the sandbox (jit_sandbox.py).
BACKENDS = ["exe", "jit"]


def exec_program(command: str) -> str:
    """A safe program that `Exec`s ``/bin/sh -c COMMAND`` and answers the shell's status."""
    assert '"' not in command and "\\" not in command
    return f"""edition 7;

fn main(world: World) -> [] int {{
    let Split {{ io, ffi, fs, heap, args, net, clock, signals, exec }} = split(world);
    release(ffi); release(net); release(clock); release(signals); release(io); release(fs);
    release(heap); release(args);
    var status = 0;
    borrow exec as &x in {{
        match exec_spawn(x, "/bin/sh", "-c\\0{command}\\0", "", Stdio::Null, Stdio::Null, Stdio::Null) {{
            Spawned::Failed(e) => {{ status = 100 + e; }}
            Spawned::Ok(child) => {{
                match child_wait(child) {{
                    Exited::Code(c) => {{ status = c; }}
                    Exited::Signaled(s) => {{ status = 128 + s; }}
                    Exited::Failed(e) => {{ status = 200 + e; }}
                }}
            }}
        }}
    }}
    release(exec);
    return status;
}}
"""


@pytest.fixture(scope="module")
def jit_worker():
    from cancho_kernel.compiler.backends.jit import JitWorker

    worker = JitWorker()
    yield worker
    worker.close()


@pytest.fixture
def notebook(tmp_path) -> Path:
    """A student's home on a hub, which is the notebook's directory, beside another's."""
    home = tmp_path / "bob"
    (home / ".cache" / "cancho-kernel").mkdir(parents=True)
    (home / ".local" / "share" / "jupyter" / "runtime").mkdir(parents=True)
    (tmp_path / "alice").mkdir()
    (tmp_path / "alice" / "homework.txt").write_text("alice's answer\n")
    return home.resolve()


def safe_run(backend: str, notebook: Path, source: str, jit_worker=None, limits=None):
    """Run ``source`` as safe mode runs a cell in ``notebook`` (policy.plan_for's caps)."""
    compiled = api.compile_sources([SourceFile("cell.cho", source)])
    assert compiled.ok, compiled.diagnostics
    bounded = policy.plan_for(notebook).caps().bound(limits or RunLimits(timeout=60))
    assert bounded.sandbox is not None
    if backend == "jit":
        return jit_worker.run(compiled.ir, ["cell"], b"", StdoutTarget.pipe(), bounded)
    (notebook.parent / "bin").mkdir(exist_ok=True)
    built = build(compiled.ir, Backend.EXE, notebook.parent / "bin" / "cell")
    return run_executable(built.path, ["cell"], limits=bounded)


@pytest.mark.parametrize("backend", BACKENDS)
def test_exec_cannot_plant_anything_that_runs_later(backend, notebook, jit_worker):
    """The hub's escape: a shell writes the launcher, a .pth and a runtime file into `$HOME`."""
    targets = [notebook / ".cache" / "cancho-kernel" / "measure-0000",
               notebook / ".local" / "lib" / "python3.11" / "site-packages" / "evil.pth",
               notebook / ".local" / "share" / "jupyter" / "runtime" / "kernel-evil.json",
               notebook / ".jupyter" / "jupyter_server_config.py"]
    command = "; ".join(f"mkdir -p {t.parent}; echo evil > {t}" for t in targets)
    result = safe_run(backend, notebook, exec_program(command + "; echo mine > mine.txt"),
                      jit_worker)
    assert result.exit_status == 0, result
    assert (notebook / "mine.txt").read_text() == "mine\n"  # Exec runs, inside
    assert [t for t in targets if t.exists()] == []


@pytest.mark.parametrize("backend", BACKENDS)
def test_another_home_is_not_visible_to_a_safe_program(backend, notebook, jit_worker):
    alice = notebook.parent / "alice"
    command = f"ls -a {notebook.parent} > seen.txt; cat {alice}/homework.txt >> seen.txt 2>&1; true"
    result = safe_run(backend, notebook, exec_program(command), jit_worker)
    assert result.exit_status == 0, result
    seen = (notebook / "seen.txt").read_text()
    assert "alice's answer" not in seen and "No such file" in seen, seen
    assert "alice" not in seen.splitlines()[:-1], seen  # the listing of the homes above


CONNECT = """
import socket, sys, threading
out = open("net.txt", "w")
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
    out.write("host reached\\n")
except OSError as e:
    out.write(f"host {e.errno}\\n")
srv = socket.create_server(("127.0.0.1", 0))
def serve():
    c, _ = srv.accept(); c.sendall(c.recv(5).upper()); c.close()
threading.Thread(target=serve).start()
c = socket.create_connection(srv.getsockname(), timeout=5)
c.sendall(b"hello")
out.write("own " + c.recv(5).decode() + "\\n")
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_safe_program_cannot_reach_the_hosts_loopback(backend, notebook, jit_worker):
    """Every kernel's ports listen on the host's loopback: a safe program reaches none of them,
    while a server and a client of its own still talk."""
    (notebook / "connect.py").write_text(CONNECT)
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.5)
    try:
        port = server.getsockname()[1]
        result = safe_run(backend, notebook,
                          exec_program(f"/usr/bin/python3 -I connect.py {port}"), jit_worker)
        with pytest.raises(TimeoutError):
            server.accept()
    finally:
        server.close()
    assert result.exit_status == 0, result
    seen = (notebook / "net.txt").read_text()
    assert "host reached" not in seen and "own HELLO" in seen, seen


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_safe_program_gets_eperm_for_raw_sockets_namespaces_ptrace_mount(backend, notebook,
                                                                           jit_worker):
    (notebook / "calls.py").write_text(DENIED_CALLS)
    result = safe_run(backend, notebook,
                      exec_program("/usr/bin/python3 -I calls.py > calls.txt"), jit_worker)
    assert result.exit_status == 0, result
    got = dict(line.split() for line in (notebook / "calls.txt").read_text().splitlines())
    assert got.pop("tcp") == "ok" and got.pop("unix") == "ok"
    assert got == {k: "EPERM" for k in got} and len(got) == 16, got


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_safe_program_writing_past_the_file_size_limit_is_stopped(backend, notebook,
                                                                    jit_worker):
    assert policy.plan_for(notebook).caps().bound(RunLimits()).fsize == SAFE_CAPS.fsize == 1 << 30
    result = safe_run(backend, notebook, exec_program("yes 0123456789 | head -c 3000000 > big.bin"),
                      jit_worker, RunLimits(timeout=60, fsize=1 << 20))
    assert result.exit_status == 128 + 25, result  # the shell saw head die of SIGXFSZ
    assert (notebook / "big.bin").stat().st_size == 1 << 20


def test_a_planted_launcher_never_runs(notebook):
    """`%%file .cache/cancho-kernel/measure-HASH` (or a program) plants the exe launcher where
    the kernel's cache is, inside the notebook's directory on a hub: the next safe run is the
    program's own, and the planted file does nothing."""
    digest = chelper.hashlib.sha256(measure.SOURCE.encode() + b"-O2").hexdigest()[:16]
    planted = notebook / ".cache" / "cancho-kernel" / f"measure-{digest}"
    marker = notebook.parent / "PWNED"
    planted.write_text(f"#!/bin/sh\necho pwned > {marker}\necho pwned\n")
    planted.chmod(0o755)
    (notebook / "hello.cho").write_text(textwrap.dedent("""\
        import std.io;

        fn main(world: World) -> [] int {
            let Split { io, ffi, fs, heap, args } = split(world);
            release(ffi); release(fs); release(heap); release(args);
            borrow mut io as &!i in { write_bytes(i, "hello, world\\n"); }
            release(io);
            return 0;
        }
        """))
    env = dict(os.environ, XDG_CACHE_HOME=str(notebook / ".cache"), HOME=str(notebook))
    r = subprocess.run([sys.executable, "-m", "cancho_kernel.cli", "run", "--safe", "--no-cache",
                        "hello.cho"], cwd=notebook, env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.stdout == "hello, world\n", (r.stdout, r.stderr)
    assert not marker.exists()


def _marked(tag: str) -> list:
    import psutil

    found = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            if any(tag in part for part in (p.info["cmdline"] or [])):
                found.append(p)
        except psutil.Error:
            continue
    return found


def _wait_for(condition, rounds: int = 600) -> bool:
    """Poll ``condition`` (a bounded number of times, never a wall-time claim)."""
    import time

    for _ in range(rounds):
        if condition():
            return True
        time.sleep(0.05)
    return condition()


@pytest.mark.parametrize("victim", ["launcher", "supervisor"])
def test_a_setsid_child_does_not_outlive_a_killed_launcher_or_supervisor(victim, notebook):
    """A program forks a `setsid` grandchild and waits; then its launcher (inside the sandbox)
    or its supervisor (`cancho run --safe`, outside) dies by SIGKILL: nothing of the run is
    left (psutil sees every process of the machine)."""
    import psutil

    tag = f"1000.{os.getpid()}{len(victim)}"  # a sleep whose command line nothing else has
    (notebook / "orphan.cho").write_text(exec_program(
        f"setsid sleep {tag} & echo started > started.txt; wait"))
    supervisor = subprocess.Popen(
        [sys.executable, "-m", "cancho_kernel.cli", "run", "--safe", "--no-cache", "orphan.cho"],
        cwd=notebook, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        assert _wait_for(lambda: (notebook / "started.txt").exists() and _marked(tag))
        if victim == "supervisor":
            supervisor.kill()
        else:
            launchers = [p for p in psutil.Process(supervisor.pid).children(recursive=True)
                         if "measure" in " ".join(p.cmdline()[:1])]
            assert launchers, "no launcher found"
            launchers[0].kill()
        assert _wait_for(lambda: not _marked(tag)), _marked(tag)
    finally:
        supervisor.kill()
        supervisor.wait()
        for p in _marked(tag):
            p.kill()


def test_each_run_gets_a_cgroup_killed_and_removed_at_its_end(notebook):
    """While a run waits, its processes (bwrap, the launcher, the program, the shell) are in a
    group of their own; once it has ended the group is gone."""
    import threading

    import psutil

    where = cgroups.hierarchy()
    if where is None:
        pytest.skip("no writable cgroup hierarchy here (the PID namespace still holds)")
    _, base = where
    mine = f"cancho-run-{os.getpid()}-"
    done: list = []
    waiter = threading.Thread(target=lambda: done.append(safe_run("exe", notebook, exec_program(
        "echo up > up.txt; while [ ! -e go.txt ]; do sleep 0.05; done"))))
    waiter.start()
    try:
        assert _wait_for(lambda: (notebook / "up.txt").exists())
        groups = exe_groups(base, mine)
        assert len(groups) == 1, groups
        with open(os.path.join(base, groups[0], "cgroup.procs")) as f:
            pids = [int(w) for w in f.read().split()]
        names = {psutil.Process(p).name() for p in pids if psutil.pid_exists(p)}
        assert {"bwrap", "sh", "sleep"} <= names or {"bwrap", "sh"} <= names, names
    finally:
        (notebook / "go.txt").write_text("")
        waiter.join(timeout=120)
    assert done and done[0].exit_status == 0, done
    assert exe_groups(base, mine) == []


def exe_groups(base: str, prefix: str) -> list[str]:
    """This process's run groups but the JIT workers' (those hold a `worker` leaf: cgroups.py),
    which live as long as a worker another test keeps."""
    return [n for n in os.listdir(base) if n.startswith(prefix)
            and not os.path.isdir(os.path.join(base, n, cgroups.WORKER_LEAF))]


def test_each_jit_run_gets_a_cgroup_killed_whole_at_its_end(notebook, jit_worker):
    """The JIT worker runs many programs in one sandbox: each run is born in a group of its own
    beneath the worker's (cgroups.py, DelegatedGroups), holding the program and what it spawns,
    and not the worker; a `setsid` child left running when the program returns is killed with
    the group, and the group is removed. Before, a JIT run had no group at all."""
    import threading

    import psutil

    where = cgroups.hierarchy()
    if where is None:
        pytest.skip("no writable cgroup hierarchy here (the PID namespace still holds)")
    _, base = where
    mine = f"cancho-run-{os.getpid()}-"
    tag = f"1000.{os.getpid()}7"  # a sleep whose command line nothing else has
    done: list = []
    waiter = threading.Thread(target=lambda: done.append(safe_run("jit", notebook, exec_program(
        f"setsid sleep {tag} & echo up > up.txt; while [ ! -e go.txt ]; do sleep 0.05; done"),
        jit_worker)))
    waiter.start()
    try:
        assert _wait_for(lambda: (notebook / "up.txt").exists() and _marked(tag))
        workers = [n for n in os.listdir(base) if n.startswith(mine)]
        runs = [os.path.join(base, w, r) for w in workers for r in os.listdir(os.path.join(base, w))
                if r.startswith("run-")]
        assert len(runs) == 1, (workers, runs)
        with open(os.path.join(runs[0], "cgroup.procs")) as f:
            pids = {int(w) for w in f.read().split()}
        assert {p.pid for p in _marked(tag)} <= pids, (pids, _marked(tag))  # the escaped child too
        names = {psutil.Process(p).name() for p in pids if psutil.pid_exists(p)}
        assert {"sh", "sleep"} <= names, names
        assert jit_worker.pid not in pids and jit_worker.guard_pid not in pids  # not the worker
    finally:
        (notebook / "go.txt").write_text("")
        waiter.join(timeout=120)
    assert done and done[0].exit_status == 0, done
    assert _wait_for(lambda: not _marked(tag)), _marked(tag)
    assert not os.path.exists(runs[0])
    again = safe_run("jit", notebook, exec_program("exit 7"), jit_worker)
    assert again.exit_status == 7, again  # the worker itself was not in the killed group


def test_the_private_tmp_is_bounded(tmp_path):
    """/tmp inside is memory: a program filling it stops at the bound, not at the machine's RAM."""
    r = run_inside(sandbox.SandboxSpec(writable=(str(tmp_path),)),
                   ["/bin/sh", "-c", f"yes 0123456789abcdef | head -c {sandbox.TMP_BYTES * 2} "
                                     "> /tmp/fill; stat -c %s /tmp/fill"])
    assert r.returncode == 0 or "No space left" in r.stderr, r.stderr
    assert "No space left" in r.stderr
    assert int(r.stdout.split()[-1]) <= sandbox.TMP_BYTES


def test_a_foreign_architecture_call_kills_the_process(tmp_path):
    """On x86-64 the 32-bit entry (`int $0x80`) has other numbers: a filter written for the
    native ones would let `unshare` through there. It kills the process instead (SIGSYS)."""
    import pyseccomp as sc

    assert sandbox.seccomp_filter().get_attr(sc.Attr.ACT_BADARCH) == sc.KILL_PROCESS
    if os.uname().machine != "x86_64":
        return
    src = tmp_path / "i386.c"
    src.write_text("int main(void) { long r; __asm__ volatile (\"int $0x80\" : \"=a\"(r) "
                   ": \"a\"(310L), \"b\"(0x10000000L) : \"memory\"); return r == 0; }\n")
    subprocess.run(["cc", "-O0", "-o", str(tmp_path / "i386"), str(src)], check=True)
    outside = subprocess.run([str(tmp_path / "i386")])
    assert outside.returncode in (0, 1)  # the call ran (unshare(CLONE_NEWUSER) via i386's 310)
    r = run_inside(sandbox.SandboxSpec(writable=(str(tmp_path),)), [str(tmp_path / "i386")])
    assert r.returncode == 128 + 31 or r.returncode == -31, (r.returncode, r.stderr)


@pytest.mark.usefixtures("cancho_kernelspec")
def test_a_launcher_planted_by_file_cell_has_no_effect_on_the_next_exe_cell(notebook,
                                                                          cancho_kernelspec):
    """On a hub the kernel's cache is `$HOME/.cache`, inside the notebook's directory: a
    `%%file` cell (or any program) puts a fake launcher there; the next exe cell is the
    program's own and the fake one never runs."""
    from jupyter_client.manager import start_new_kernel
    from kernel_client import HELLO, run

    digest = chelper.hashlib.sha256(measure.SOURCE.encode() + b"-O2").hexdigest()[:16]
    name = f".cache/cancho-kernel/measure-{digest}"
    marker = notebook.parent / "PWNED-BY-FILE"
    fake = f"#!/bin/sh\necho pwned > {marker}\necho pwned\n"
    env = dict(os.environ, CANCHO_SAFE="1", HOME=str(notebook),
               XDG_CACHE_HOME=str(notebook / ".cache"))
    km, kc = start_new_kernel(kernel_name=cancho_kernelspec, startup_timeout=60, env=env,
                              cwd=str(notebook))
    try:
        run((km, kc), f"%%file {name}\n{fake}")  # accepted or refused: either way, then on disk
        (notebook / name).write_text(fake)
        (notebook / name).chmod(0o755)
        cell = run((km, kc), "%%run --backend exe\n" + HELLO)
        assert cell.status == "ok", cell.outputs
        assert cell.stream("stdout") == "hello, world\n"
        assert not marker.exists()
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def test_the_kernels_secrets_do_not_reach_a_sandboxed_program(tmp_path, monkeypatch):
    """A kernel on a hub has the hub's API token in its environment, and the hub's machine has
    password hashes in /etc/shadow: neither is readable inside."""
    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", "secret-token-123")
    monkeypatch.setenv("LANG", "C.UTF-8")
    r = run_inside(sandbox.SandboxSpec(writable=(str(tmp_path),)),
                   ["/bin/sh", "-c", "env; cat /etc/shadow /etc/gshadow; ls /etc/ssh"])
    assert "secret-token-123" not in r.stdout and "JUPYTERHUB" not in r.stdout
    assert "LANG=C.UTF-8" in r.stdout  # what a program needs is kept
    assert "root:" not in r.stdout
    if os.path.exists("/etc/shadow"):
        assert Path("/etc/shadow").read_text().startswith("root:")  # so the check could fail


def test_a_dot_symlink_planted_by_a_run_does_not_open_another_home_to_the_next(tmp_path):
    """A program may leave `.x -> /path/of/alice` in its directory; the next sandbox must not
    bind what that link points to (its hiding of dot-entries would otherwise mount alice's home
    inside)."""
    alice, bob = tmp_path / "alice", tmp_path / "bob"
    alice.mkdir()
    bob.mkdir()
    (alice / "homework.txt").write_text("alice's answer\n")
    spec = sandbox.SandboxSpec(writable=(str(bob),))
    run_inside(spec, ["/bin/sh", "-c", f"ln -s {alice} {bob}/.x; ln -s {alice}/homework.txt "
                                       f"{bob}/.y; mkdir -p cache2; ln -s {bob}/cache2 {bob}/.z"])
    assert (bob / ".x").is_symlink() and (bob / ".z").is_symlink()
    r = run_inside(spec, ["/bin/sh", "-c", f"cat {bob}/.x/homework.txt {bob}/.y; "
                                           f"echo planted > {bob}/.z/f; echo ran"])
    assert r.returncode == 0 and r.stdout.endswith("ran\n"), r.stderr  # it still starts
    assert "alice's answer" not in r.stdout, r.stdout
    assert not (bob / "cache2" / "f").exists()  # a link into the directory is hidden too


def test_an_executable_inside_the_notebook_keeps_the_notebook_writable(tmp_path):
    (tmp_path / "tool").write_text("#!/bin/sh\necho made > made.txt\n")
    (tmp_path / "tool").chmod(0o755)
    spec = sandbox.SandboxSpec(writable=(str(tmp_path),), readable=(str(tmp_path),))
    r = run_inside(spec, [str(tmp_path / "tool")])
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "made.txt").read_text() == "made\n"


def test_the_runs_cgroup_bounds_its_processes_even_for_root(notebook):
    """RLIMIT_NPROC does not hold for root (every student on this project's hub): the run's
    cgroup does (`pids.max`), where the hierarchy has it."""
    if cgroups.hierarchy() is None or not cgroups._probe(cgroups.hierarchy()[0]).bounds_pids:
        pytest.skip("no pids controller for run groups here")
    command = ("i=0; while [ $i -lt 60 ]; do sleep 30 & i=$((i+1)); echo $i > count.txt; done")
    result = safe_run("exe", notebook, exec_program(command), limits=RunLimits(timeout=60,
                                                                               processes=10))
    assert result.exit_status is not None, result
    started = int((notebook / "count.txt").read_text())
    assert 5 <= started <= 10 + 4, started  # forks work, up to the bound


def test_the_root_directory_is_never_a_writable_place():
    """A server started in `/` must not make the whole system writable to its programs."""
    with pytest.raises(OSError, match="holds the system"):
        sandbox.command(sandbox.SandboxSpec(writable=("/",)), ["/bin/true"])


def test_a_python_sandbox_imports_the_package_read_only(tmp_path):
    """``python=True`` (for a Python process inside, such as the JIT worker): this Python and
    its import path are there, read-only."""
    import cancho_kernel

    pkg = os.path.dirname(os.path.dirname(os.path.abspath(cancho_kernel.__file__)))
    spec = sandbox.SandboxSpec(writable=(str(tmp_path),), python=True)
    r = run_inside(spec, [sys.executable, "-I", "-c",
                          f"import sys; sys.path.insert(0, {pkg!r}); import cancho_kernel, llvmlite; "
                          f"open({os.path.join(pkg, 'cancho_kernel', '__init__.py')!r}, 'a')"])
    assert "Read-only file system" in r.stderr, r.stderr  # imported, then refused the write
