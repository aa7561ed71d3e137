"""Issue 17: the course hub of deploy/jupyterhub with three students.

A real JupyterHub on loopback (dummy authenticator, configurable-http-proxy from npm, installed into
a cache directory when missing) starts three users' servers through its REST API. Each runs a
cell through the kernels websocket API of its own server; one tries the escapes safe mode refuses
(`%%c`, a path outside its directory, a program that reaches foreign code) and the ones the hub's
settings close (another kernel, a terminal, Python in the home directory run at the next kernel
start); one student's `%%file` is not visible to another; stopping the hub leaves no process behind.
"""

from __future__ import annotations

import sys
import time
import uuid
from pathlib import Path

import pytest

pytest.importorskip("jupyterhub", reason="the hub extra: pip install -e '.[hub]'")
psutil = pytest.importorskip("psutil")

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "deploy" / "jupyterhub"))
from benchmarks.hub_load import Hub, RemoteKernel, running_hub  # noqa: E402
from kernel_client import HELLO  # noqa: E402

pytestmark = pytest.mark.timeout(600)
USERS = ("alice", "bob", "carol")

SYSTEM = """extern fn system[&f, &c](ffi: &f Ffi("libc"), command: &c [byte]) -> [ffi("libc")] c_int;

fn main(world: World) -> [] int {
    let Split { io, ffi, fs, heap, args } = split(world);
    release(io); release(fs); release(heap); release(args);
    let libc = narrow(ffi, "libc");
    var n = 0;
    borrow libc as &f in { n = system(f, "touch escaped\\0"); }
    release(libc);
    return n;
}
"""


def read_file_program(path: str) -> str:
    """A program that prints the first 40 bytes of PATH (a path it computes, not a directive's)."""
    return f"""fn main(world: World) -> [] int {{
    let Split {{ io, ffi, fs, heap, args }} = split(world);
    release(ffi); release(heap); release(args);
    var n = 0;
    region a {{
        let buf = alloc_slice[a](40, byte_of(0));
        borrow fs as &f in {{ n = fs_read(f, "{path}", buf); }}
        if n > 0 {{
            borrow mut io as &!i in {{ write_bytes(i, buf[0..n]); }}
        }}
    }}
    release(fs); release(io);
    return 0;
}}
"""


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    with running_hub(tmp_path_factory.mktemp("hub")) as h:
        h.create_users(list(USERS))
        for u in USERS:
            h.start_server(u)
        yield h


@pytest.fixture(scope="module")
def kernels(hub):
    ks = {u: RemoteKernel(hub, u, "authority-model.ipynb") for u in USERS}
    yield ks
    for k in ks.values():
        try:
            k.close()
        except Exception:
            pass


def test_each_student_has_the_course_and_runs_a_cell(hub, kernels):
    for u in USERS:
        assert (hub.home(u) / "authority-model.ipynb").is_file()
        r = kernels[u].execute(HELLO)
        assert r.status == "ok", r.outputs
        assert r.text() == "hello, world\n"


def test_the_kernel_is_in_safe_mode_in_the_students_directory(hub, kernels):
    shown = "".join(o.get("data", {}).get("text/plain", "") for o in kernels["alice"].execute("%help").outputs)
    assert "Safe mode is ON" in shown
    assert str(hub.home("alice").resolve()) in shown.replace("\n", " ")


@pytest.mark.parametrize("cell, ename", [
    ("%%c sh\nint main(void) { return 0; }\n", "directive-error"),
    ("%load /etc/hostname", "directive-error"),
    ("%%file ../bob/planted.cho\nfn seven() -> [] int { return 7; }\n", "directive-error"),
    (SYSTEM, "unsafe-in-safe-mode"),
    ("%limits --timeout none", "directive-error"),
])
def test_escapes_are_refused(hub, kernels, cell, ename):
    r = kernels["carol"].execute(cell)
    assert r.status == "error" and r.error["ename"] == ename, r.outputs
    assert "safe mode" in r.error["evalue"]
    assert not (hub.home("carol") / "escaped").exists()
    assert not (hub.home("bob") / "planted.cho").exists()


def test_one_students_file_is_not_visible_to_another(hub, kernels):
    r = kernels["alice"].execute("%%file secret.cho\nfn secret() -> [] int { return 42; }\n")
    assert r.status == "ok", r.outputs
    assert (hub.home("alice") / "secret.cho").is_file()
    assert not (hub.home("bob") / "secret.cho").exists()
    for line in ("%load secret.cho", "%load ../alice/secret.cho", f"%load {hub.home('alice')}/secret.cho"):
        r = kernels["bob"].execute(line)
        assert r.status == "error", (line, r.outputs)
        assert "42" not in r.text()
    listing = hub.server("bob", "GET", "/api/contents").json()
    assert "secret.cho" not in {c["name"] for c in listing["content"]}
    assert hub.server("bob", "GET", "/api/contents/../alice/secret.cho").status_code in (400, 403, 404)
    import requests

    bobs = hub.api("POST", "/users/bob/tokens", {"note": "test_hub"})["token"]
    r = requests.get(f"{hub.url}/user/alice/api/contents/secret.cho", headers={"Authorization": f"token {bobs}"},
                     timeout=30, allow_redirects=False)
    assert r.status_code in (302, 403, 404) and "42" not in r.text


def test_a_program_cannot_read_another_students_file(hub, kernels):
    """All students share one Unix user and a program with Fs computes its own paths: safe mode
    confines every run to the student's directory (Landlock; tests/test_confine.py), so bob's
    program gets fs_read's -1 for alice's file, while it still reads its own."""
    secret = hub.home("alice") / "diary.txt"
    secret.write_text("alice's diary\n")
    r = kernels["bob"].execute(read_file_program(str(secret)))
    assert "diary" not in r.text()
    own = hub.home("bob") / "notes.txt"
    own.write_text("bob's notes\n")
    r = kernels["bob"].execute(read_file_program(str(own)))
    assert r.text() == "bob's notes\n", r.outputs


def test_only_the_cancho_kernel_and_no_terminal(hub):
    r = hub.server("alice", "POST", "/api/kernels", {"name": "python3"})
    assert r.status_code != 201, r.text
    specs = hub.server("alice", "GET", "/api/kernelspecs").json()
    assert set(specs["kernelspecs"]) == {"cancho"}
    assert hub.server("alice", "POST", "/api/terminals").status_code == 404


def test_python_in_the_students_directory_does_not_run_at_kernel_start(hub, kernels):
    """`python -m cancho_kernel` started in the student's directory would import a
    `cancho_kernel.py` written there, and so would the kernel's JIT worker (`python -m
    cancho_kernel.compiler.backends.jit_worker`, which before the fix ran the planted file and
    then failed to start): the hub's kernelspec runs Python with -I and PYTHONSAFEPATH=1."""
    marker = Path(f"/tmp/cancho-hub-pwned-{uuid.uuid4().hex}")
    planted = f"import pathlib\npathlib.Path({str(marker)!r}).write_text('pwned')\n"
    for name in ("cancho_kernel.py", "ipykernel.py"):
        r = kernels["carol"].execute(f"%%file {name}\n{planted}")
        if r.status != "ok":  # safe mode's %%file writes only NAME.cho: planted another way
            (hub.home("carol") / name).write_text(planted)
    try:
        k = RemoteKernel(hub, "carol", "second.ipynb")
        try:
            r = k.execute(HELLO)
            assert not marker.exists()
            assert r.status == "ok" and r.text() == "hello, world\n", r.outputs
        finally:
            k.close()
    finally:
        marker.unlink(missing_ok=True)


KERNEL_START = """
import sys
from cancho_kernel.kernel import CanchoKernel
k = CanchoKernel()
try:
    before = sorted(m for m in ("ipywidgets", "matplotlib") if m in sys.modules)
    k.comm_manager.comm_open(None, None, {
        "content": {"comm_id": "c1", "target_name": "jupyter.widget.control", "data": {}},
        "metadata": {"version": "1.0.0"}, "header": {"msg_id": "m"}, "parent_header": {}})
    import ipywidgets
    handler = k.comm_manager.targets["jupyter.widget.control"]
    print(before, "ipywidgets" in sys.modules, handler == ipywidgets.Widget.handle_control_comm_opened,
          ipywidgets.Widget._control_comm is not None)
finally:
    k.runner.close()
"""


def test_a_kernel_starts_without_ipywidgets_or_matplotlib(tmp_path):
    """Issue 17, per-kernel cost: a kernel imports ipywidgets when a frontend first opens one of
    its comms (then hands the comm to ipywidgets' own handler), matplotlib at the first plot."""
    import subprocess

    out = subprocess.run([sys.executable, "-c", KERNEL_START], cwd=tmp_path, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[0] == "[] True True True", out.stdout


def cgroup_prefix(hub: Hub) -> str:
    """The hub's users' control groups are PREFIX-USER (deploy/jupyterhub/cancho_spawner.py)."""
    import hashlib

    return "cancho-hub-" + hashlib.sha256(str((hub.root / "state").resolve()).encode()).hexdigest()[:12]


def test_a_students_processes_are_in_their_own_limited_group(hub):
    from cgroup_limits import find_controllers

    if not find_controllers():
        pytest.skip("no writable cgroup hierarchy here: the hub logs that limits are not enforced")
    groups = [p for c in find_controllers() for p in c.parent.glob(cgroup_prefix(hub) + "-alice") if p.is_dir()]
    mine = [g for g in groups if any(str(pid) in (g / "cgroup.procs").read_text().split()
                                     for pid in (p.pid for p in hub.leftovers()))]
    assert mine, groups
    limits = {f.name: f.read_text().strip() for g in mine for f in g.iterdir()
              if f.name in ("memory.limit_in_bytes", "memory.max", "cpu.cfs_quota_us", "cpu.max")}
    assert limits.get("memory.limit_in_bytes", limits.get("memory.max")) == str(2 << 30), limits
    server = next(p for p in hub.leftovers() if p.environ().get("JUPYTERHUB_USER") == "alice"
                  and "jupyterhub.singleuser" in " ".join(p.cmdline()))
    kernel = next(p for p in server.children(recursive=True) if "cancho_kernel" in " ".join(p.cmdline()))
    for g in mine:
        procs = (g / "cgroup.procs").read_text().split()
        assert str(server.pid) in procs and str(kernel.pid) in procs


def test_stopping_the_hub_leaves_no_process(hub: Hub, kernels):
    """Last in the module: it stops the hub the other tests share."""
    ours = hub.leftovers()
    kinds = " ".join(" ".join(p.cmdline()) for p in ours)
    assert "cancho_kernel" in kinds and "jupyterhub.singleuser" in kinds  # the mark finds them
    for k in kernels.values():
        k.ws.close()
    hub.stop()
    deadline = time.monotonic() + 10
    while hub.leftovers() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert [(p.pid, p.cmdline()) for p in hub.leftovers()] == []
    from cgroup_limits import find_controllers

    assert [g for c in find_controllers() for g in c.parent.glob(cgroup_prefix(hub) + "-*")] == []
