"""Safe mode on the `jit` backend, tried as a hostile student would (issue 22): the whole JIT
worker runs inside the sandbox (jit_sandbox.py), so every program it forks is inside the same
namespaces, seccomp filter and mount view. Each test tries to get out and then checks, from
outside, that it did not.

The notebook's directory here is a fake `$HOME` (as on a hub), holding `.cache` and `.local`
where a run would plant what runs later unconfined. Runs get exactly the limits the kernel's
runner gives a safe run (policy.plan_for, the safe caps).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from cancho_kernel.compiler import api, policy
from cancho_kernel.compiler.backends import sandbox
from cancho_kernel.compiler.backends.sandbox import SandboxSpec
from cancho_kernel.compiler.backends.jit import JitWorker, JitWorkerDied
from cancho_kernel.compiler.backends.jit_sandbox import package_root
from cancho_kernel.compiler.backends.jit_worker import CacheBounds
from cancho_kernel.compiler.backends.process import RunLimits, RunResult, StdoutTarget
from cancho_kernel.compiler.source import SourceFile

pytestmark = pytest.mark.skipif(not sandbox.probe().ok and not os.environ.get("CI"),
                                reason=f"no sandbox here: {sandbox.probe().reason}")

SYSTEM = """extern fn system[&f, &c](ffi: &f Ffi("libc"), command: &c [byte]) -> [ffi("libc")] c_int;

fn main(world: World) -> [] int {
    let Split { io, ffi, fs, heap, args } = split(world);
    release(io); release(fs); release(heap); release(args);
    let libc = narrow(ffi, "libc");
    var n = 0;
    borrow libc as &f in { n = system(f, "COMMAND\\0"); }
    release(libc);
    return n / 256;
}
"""

EXEC_SHELL = """edition 7;
fn main(world: World) -> [] int {
    let Split { io, ffi, fs, heap, args, net, clock, signals, exec } = split(world);
    release(io); release(ffi); release(fs); release(heap); release(net); release(clock);
    release(signals); release(args);
    let shell = narrow(exec, "/bin/sh");
    var status = 100;
    borrow shell as &x in {
        match exec_spawn(x, "/bin/sh", "-c\\0SCRIPT\\0", "", Stdio::Null, Stdio::Null, Stdio::Null) {
            Spawned::Failed(e) => { status = e; }
            Spawned::Ok(child) => {
                match child_wait(child) {
                    Exited::Code(n) => { status = n; }
                    Exited::Signaled(s) => { }
                    Exited::Failed(e) => { }
                }
            }
        }
    }
    release(shell);
    return status;
}
"""

# Each bit of the status: the system call failed (socket of a packet, netlink or raw kind;
# unshare of a user, a network, a mount namespace).
SYSCALLS = """extern fn socket[&f](ffi: &f Ffi("libc"), domain: int, kind: int, protocol: int) -> [ffi("libc")] c_int;
extern fn unshare[&f](ffi: &f Ffi("libc"), flags: int) -> [ffi("libc")] c_int;

fn main(world: World) -> [] int {
    let Split { io, ffi, fs, heap, args } = split(world);
    release(io); release(fs); release(heap); release(args);
    let libc = narrow(ffi, "libc");
    var bits = 0;
    borrow libc as &f in {
        if socket(f, 17, 3, 768) < 0 { bits = bits + 1; }
        if socket(f, 16, 3, 0) < 0 { bits = bits + 2; }
        if socket(f, 2, 3, 255) < 0 { bits = bits + 4; }
        if unshare(f, 268435456) < 0 { bits = bits + 8; }
        if unshare(f, 1073741824) < 0 { bits = bits + 16; }
        if unshare(f, 131072) < 0 { bits = bits + 32; }
    }
    release(libc);
    return bits;
}
"""

KILL = """extern fn kill[&f](ffi: &f Ffi("libc"), pid: int, sig: int) -> [ffi("libc")] c_int;

fn main(world: World) -> [] int {
    let Split { io, ffi, fs, heap, args } = split(world);
    release(io); release(fs); release(heap); release(args);
    let libc = narrow(ffi, "libc");
    var r = 0;
    borrow libc as &f in { r = kill(f, PID, 9); }
    release(libc);
    return r + 1;
}
"""


def ir_of(source: str) -> str:
    compiled = api.compile_sources([SourceFile("attack.cho", source)])
    assert compiled.ok, compiled
    return compiled.ir


def shell(script: str) -> str:
    """A program running ``script`` with `/bin/sh -c` through libc's `system`."""
    return SYSTEM.replace("COMMAND", script.replace("\\", "\\\\").replace('"', '\\"'))


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    """The notebook's directory, which on a hub is `$HOME`."""
    d = tmp_path_factory.mktemp("home").resolve()
    (d / ".cache" / "cancho-kernel").mkdir(parents=True)
    (d / ".local" / "lib").mkdir(parents=True)
    return d


@pytest.fixture(scope="module")
def limits(home) -> RunLimits:
    plan = policy.plan_for(home)
    assert plan.sandbox is not None, plan.warning
    return plan.caps().bound(RunLimits(timeout=60))


@pytest.fixture(scope="module")
def worker(limits):
    w = JitWorker()
    yield w
    w.close()


def run(worker: JitWorker, limits: RunLimits, source: str) -> RunResult:
    return worker.run(ir_of(source), ["attack"], b"", StdoutTarget.pipe(), limits)


def leaked_files(home: Path) -> list[Path]:
    return [p for p in home.rglob("*") if p.is_file() and p.parent != home]


def test_the_worker_is_inside_the_sandbox(worker, limits, home):
    """The worker is in a PID namespace of its own (a pid outside and one inside) and runs
    Python isolated. (Its programs cannot read /proc at all: Landlock stays inside.)"""
    assert run(worker, limits, shell("true")).exit_status == 0
    assert len(nspids(worker.pid)) == 2
    cmdline = Path(f"/proc/{worker.pid}/cmdline").read_bytes().split(b"\0")
    assert b"-I" in cmdline and any(b"jit_worker" in a for a in cmdline), cmdline
    r = run(worker, limits, shell("cat /proc/self/status"))
    assert r.exit_status != 0 and r.stdout == b""


def nspids(pid: int) -> list[int]:
    """The pids of ``pid`` from the outermost PID namespace to its own."""
    return [int(n) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
            if line.startswith("NSpid:") for n in line.split()[1:]]


def test_exec_of_a_shell_writing_into_caches_and_user_site_leaves_nothing(worker, limits, home):
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    script = (f"echo evil > {home}/.cache/cancho-kernel/measure-0123456789abcdef; "
              f"cp /bin/true {home}/.cache/cancho-kernel/jit-child-0123456789abcdef.so; "
              f"mkdir -p {home}/.local/lib/{version}/site-packages && "
              f"echo 'import os' > {home}/.local/lib/{version}/site-packages/x.pth; "
              f"mkdir -p {home}/.local/share/jupyter/runtime && "
              f"echo key > {home}/.local/share/jupyter/runtime/kernel-x.json; "
              f"echo ok > {home}/work.txt")
    r = run(worker, limits, EXEC_SHELL.replace("SCRIPT", script.replace('"', '\\"')))
    assert r.exit_status == 0, (r.stdout, r.stderr)
    assert (home / "work.txt").read_text() == "ok\n"  # the notebook's own files are writable
    assert leaked_files(home) == []


def test_the_worker_its_package_and_its_c_child_are_read_only(worker, limits, home, tmp_path):
    from cancho_kernel.compiler.backends import mcjit

    child = mcjit.child_helper()
    assert child is not None
    package = Path(package_root()) / "cancho_kernel"
    before = (package / "__init__.py").read_bytes(), child.path.read_bytes()
    r = run(worker, limits, shell(f"echo x >> {package}/__init__.py; echo x > {package}/evil.py; "
                                  f"echo x >> {child.path}; echo x > {sys.prefix}/evil; "
                                  f"echo x > {os.path.dirname(child.path)}/jit-child-x.so; true"))
    assert r.exit_status == 0, r.stderr
    assert not (package / "evil.py").exists() and not Path(sys.prefix, "evil").exists()
    assert not (child.path.parent / "jit-child-x.so").exists()
    assert ((package / "__init__.py").read_bytes(), child.path.read_bytes()) == before


def test_the_hosts_loopback_is_unreachable_and_the_cells_own_works(worker, limits, home):
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(2)
    port = server.getsockname()[1]
    (home / "net.py").write_text(f"""
import socket, threading
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=3)
    print("host reached")
except OSError as e:
    print("host refused")
srv = socket.create_server(("127.0.0.1", 0))
def serve():
    c, _ = srv.accept(); c.sendall(c.recv(5).upper()); c.close()
threading.Thread(target=serve).start()
c = socket.create_connection(srv.getsockname(), timeout=5)
c.sendall(b"hello"); print("own", c.recv(5).decode())
""")
    try:
        r = run(worker, limits, shell(f"/usr/bin/python3 -I {home}/net.py"))
        with pytest.raises(TimeoutError):
            server.accept()  # nothing arrived from inside
    finally:
        server.close()
    assert r.exit_status == 0, r.stderr
    assert r.stdout.decode().split("\n")[:2] == ["host refused", "own HELLO"]


def test_raw_packet_netlink_sockets_and_unshare_fail_in_the_program(worker, limits):
    r = run(worker, limits, SYSCALLS)
    assert r.exit_status == 63, r  # every one of the six failed


def test_unshare_from_a_shell_fails(worker, limits):
    r = run(worker, limits, shell("unshare -U -n true && echo escaped; true"))
    assert r.exit_status == 0 and b"escaped" not in r.stdout


def test_kill_minus_one_and_the_kernels_pid_reach_nothing_outside(worker, limits):
    """kill(-1, 9) from inside reaches only the sandbox (the worker may die of it and is
    restarted); kill(KERNEL, 9) with a host pid reaches no host process."""
    victim = subprocess.Popen(["sleep", "120"])
    try:
        r = run(worker, limits, KILL.replace("PID", str(victim.pid)))
        assert r.exit_status == 0  # kill returned -1: no such process in its namespace
        assert victim.poll() is None
        try:
            run(worker, limits, KILL.replace("PID", "-1"))
        except JitWorkerDied:
            pass  # it killed its own worker, inside the sandbox
        assert victim.poll() is None
        assert os.getpid() > 0 and run(worker, limits, shell("true")).exit_status == 0
    finally:
        victim.kill()
        victim.wait()


ESCAPE = """extern fn prctl[&f, &n](ffi: &f Ffi("libc"), option: int, name: &n [byte], a: int, b: int) -> [ffi("libc")] c_int;
extern fn fork[&f](ffi: &f Ffi("libc")) -> [ffi("libc")] c_int;
extern fn setsid[&f](ffi: &f Ffi("libc")) -> [ffi("libc")] c_int;

fn main(world: World) -> [] int {
    let Split { io, ffi, fs, heap, args } = split(world);
    release(io); release(fs); release(heap); release(args);
    let libc = narrow(ffi, "libc");
    var p = 0;
    borrow libc as &f in {
        let named = prctl(f, 15, "NAME\\0", 0, 0);
        p = fork(f);
        if p == 0 { let s = setsid(f); }
    }
    release(libc);
    var n = 0;
    while p >= 0 { n = n + 1; if n > 1000000 { n = 0; } }
    return 0;
}
"""


def named(name: str) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if Path(f"/proc/{entry}/comm").read_text().strip() == name:
                    out.append(int(entry))
            except OSError:
                pass
    return out


def wait_for(predicate, limit: float = 60.0) -> bool:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


@pytest.mark.parametrize("victim", ["worker", "sandbox"])
def test_nothing_survives_a_sigkilled_worker(limits, victim):
    """SIGKILL of the worker (what the OOM killer picks) or of the sandbox's outer process
    mid-run: the program and the child it escaped to with setsid are gone (the guard; the PID
    namespace)."""
    import threading

    name = "cx" + uuid.uuid4().hex[:12]
    w = JitWorker()
    box: dict = {}

    def go() -> None:
        try:
            box["r"] = w.run(ir_of(ESCAPE.replace("NAME", name)), ["p"], b"", StdoutTarget.pipe(),
                             limits)
        except JitWorkerDied as e:
            box["e"] = e

    t = threading.Thread(target=go, daemon=True)
    t.start()
    try:
        assert wait_for(lambda: len(named(name)) == 2), box
        os.kill(w.pid if victim == "worker" else w.guard_pid, signal.SIGKILL)
        assert wait_for(lambda: not named(name)), named(name)
        t.join(60)
    finally:
        for pid in named(name):
            os.kill(pid, signal.SIGKILL)
        w.close()


def test_the_worker_retires_and_restarts_inside_the_sandbox(limits):
    """A worker past its memory bound ends after the run (CacheBounds.retire_bytes); the next
    one starts in the same sandbox."""
    with JitWorker(cache=CacheBounds(retire_bytes=1)) as w:
        pids, inside = [], []
        for _ in range(2):
            w.use_sandbox(limits.sandbox)
            w.start()
            pids.append(w.pid)
            inside.append(len(nspids(w.pid)))
            assert run(w, limits, shell("true")).exit_status == 0
            assert w.pid is None  # retired
    assert pids[0] != pids[1] and inside == [2, 2]


# -- through a safe kernel ----------------------------------------------------------------------------


def ancestors(pid: int) -> list[int]:
    out = []
    while pid > 1:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            break
        pid = int(next(line for line in status.splitlines() if line.startswith("PPid:")).split()[1])
        out.append(pid)
    return out


def cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def test_a_safe_kernel_runs_jit_cells_in_the_sandboxed_worker(cancho_kernelspec, tmp_path):
    """CANCHO_SAFE=1 in `$HOME` as on a hub: a `%%run --backend jit` cell runs in the kernel's
    JIT worker (not handed to the exe launcher), inside the sandbox, and its `Exec` of a shell
    writing into `.cache` and `.local` leaves nothing there."""
    from jupyter_client.manager import start_new_kernel
    from kernel_client import run as run_cell

    home = tmp_path.resolve()
    env = dict(os.environ, CANCHO_SAFE="1", HOME=str(home))
    km, kc = start_new_kernel(kernel_name=cancho_kernelspec, startup_timeout=60, env=env,
                              cwd=str(home))
    name = "cx" + uuid.uuid4().hex[:12]
    try:
        sent = kc.execute("%%run --backend jit --timeout 60\n" + ESCAPE.replace("NAME", name))
        assert wait_for(lambda: len(named(name)) == 2)
        program = min(named(name))
        assert len(nspids(program)) == 2  # in a PID namespace of its own
        assert any(b"jit_worker" in cmdline(p) for p in ancestors(program)[:3])
        assert any(cmdline(p).startswith(b"/usr/bin/bwrap") for p in ancestors(program))
        km.interrupt_kernel()
        reply = kc.get_shell_msg(timeout=60)
        while reply["parent_header"].get("msg_id") != sent:
            reply = kc.get_shell_msg(timeout=60)
        assert reply["content"]["status"] == "error"
        assert wait_for(lambda: not named(name)), named(name)
        script = (f"mkdir -p {home}/.cache/cancho-kernel {home}/.local/lib && "
                  f"echo evil > {home}/.cache/cancho-kernel/measure-0123456789abcdef; "
                  f"echo x > {home}/.local/lib/x.pth; echo ok > {home}/work.txt")
        cell = run_cell((km, kc), "%%run --backend jit\n" + EXEC_SHELL.replace("SCRIPT", script))
        assert cell.status == "ok", cell.outputs
        assert (home / "work.txt").read_text() == "ok\n"
        # (the kernel's own helpers are in .cache: it builds them there, outside the sandbox)
        assert not (home / ".cache" / "cancho-kernel" / "measure-0123456789abcdef").exists()
        assert not (home / ".local" / "lib" / "x.pth").exists()
    finally:
        for pid in named(name):
            os.kill(pid, signal.SIGKILL)
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def test_the_kernels_cpu_choice_reaches_the_sandboxed_worker(monkeypatch, home):
    """The sandbox clears the environment; `CANCHO_CPU` must still reach the worker, or a safe
    kernel started with `CANCHO_CPU=baseline` would compile its JIT cells for the host (found when
    the hub ran the baseline-stored notebooks). The spec the worker starts in carries it."""
    from cancho_kernel.compiler.backends import jit as jit_module

    seen: list[SandboxSpec] = []

    def capture(spec, argv, fds, env):
        seen.append(spec)
        raise OSError("captured")

    monkeypatch.setattr(jit_module, "start_sandboxed", capture)
    monkeypatch.setenv("CANCHO_CPU", "baseline")
    worker = JitWorker()
    spec = sandbox.SandboxSpec(writable=(str(home),), cwd=str(home))
    with pytest.raises(JitWorkerDied):
        worker._spawn(0, spec)
    assert seen and ("CANCHO_CPU", "baseline") in seen[0].env
