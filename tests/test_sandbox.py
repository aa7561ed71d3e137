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
    assert len(got) == 11


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
