"""Issues 17 and 22: the course hub of deploy/jupyterhub with three students.

A real JupyterHub on loopback (dummy authenticator, configurable-http-proxy from npm, installed into
a cache directory when missing) starts three users' servers through its REST API, each as its own
Unix account made by the hub. Each runs a cell through the kernels websocket API of its own
server; one tries the escapes safe mode refuses and the ones the hub's settings close; bob then
tries every way of issue 22 to reach alice's work or the hub's secrets (by a program, by
directives, as his own Unix user, over loopback, by files planted to run at his next start), and
each attempt compares the protected thing, not only the message; the library runs as a student;
stopping the hub leaves no process behind.
"""

from __future__ import annotations

import os
import sys
import time
import uuid
from pathlib import Path

import pytest

pytest.importorskip("jupyterhub", reason="the hub extra: pip install -e '.[hub]'")
psutil = pytest.importorskip("psutil")

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "deploy" / "jupyterhub"))
from benchmarks.hub_load import Hub, RemoteKernel, Reply, running_hub  # noqa: E402
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


# Each home's size here (deploy/jupyterhub/student_disk.py): room for the course and the library's
# largest notebook (bulk-output writes about 40 MB), small enough to fill quickly.
DISK_LIMIT = 256 << 20


@pytest.fixture(scope="module")
def hub():
    before = os.environ.get("CANCHO_HUB_DISK_LIMIT")
    os.environ["CANCHO_HUB_DISK_LIMIT"] = str(DISK_LIMIT)  # read by Hub.env() at start
    try:
        with running_hub() as h:  # a root students can pass through (not pytest's 0700 one)
            h.create_users(list(USERS))
            for u in USERS:
                h.start_server(u)
            yield h
    finally:
        if before is None:
            os.environ.pop("CANCHO_HUB_DISK_LIMIT", None)
        else:
            os.environ["CANCHO_HUB_DISK_LIMIT"] = before


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
        assert in_view(hub, hub.home(u) / "authority-model.ipynb").is_file()
        r = kernels[u].execute(HELLO)
        assert r.status == "ok", r.outputs
        assert r.text() == "hello, world\n"


def test_the_kernel_is_in_safe_mode_in_the_students_directory(hub, kernels):
    shown = "".join(o.get("data", {}).get("text/plain", "") for o in kernels["alice"].execute("%help").outputs)
    assert "Safe mode is ON" in shown
    assert str(hub.home("alice").resolve()) in shown.replace("\n", " ")


@pytest.mark.parametrize("cell, ename", [
    ("%load /etc/hostname", "directive-error"),
    ("%%file ../bob/planted.cho\nfn seven() -> [] int { return 7; }\n", "directive-error"),
    ("%limits --timeout none", "directive-error"),
])
def test_escapes_are_refused(hub, kernels, cell, ename):
    r = kernels["carol"].execute(cell)
    assert r.status == "error" and r.error["ename"] == ename, r.outputs
    assert "safe mode" in r.error["evalue"]
    assert not anywhere(hub, hub.home("bob") / "planted.cho")


def foreign_cell(kind: str, target: Path) -> str:
    """Foreign code that creates TARGET: C through %%c, or libc's system from a program."""
    if kind == "c":
        return ("%%c escape --run\n#include <stdlib.h>\n"
                f'int main(void) {{ return system("touch {target}") != 0; }}\n')
    return SYSTEM.replace("touch escaped", f"touch {target}")


@pytest.mark.parametrize("kind", ["c", "extern"])
def test_foreign_code_is_refused_or_stays_inside_the_sandbox(hub, kernels, kind):
    """Without the kernel's sandbox safe mode refuses foreign code; with it (issue 22) the code
    runs there, and still creates nothing in another student's home or outside its own."""
    targets = [hub.home("bob") / f"escaped-{kind}", hub.root / f"escaped-{kind}", Path(f"/tmp/escaped-{uuid.uuid4().hex}")]
    for target in targets:
        r = kernels["carol"].execute(foreign_cell(kind, target))
        if not sandbox_runs_c(hub):
            ename = "directive-error" if kind == "c" else "unsafe-in-safe-mode"
            assert r.status == "error" and r.error["ename"] == ename, r.outputs
            assert "safe mode" in r.error["evalue"]
    for target in targets:
        assert not anywhere(hub, target), target
        in_view(hub, target).unlink(missing_ok=True)


def test_one_students_file_is_not_visible_to_another(hub, kernels):
    r = kernels["alice"].execute("%%file secret.cho\nfn secret() -> [] int { return 42; }\n")
    assert r.status == "ok", r.outputs
    assert in_view(hub, hub.home("alice") / "secret.cho").is_file()
    assert not anywhere(hub, hub.home("bob") / "secret.cho")
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
    """A program with Fs computes its own paths: alice's home is hers alone (0700) and safe mode
    confines every run to the student's directory as well (Landlock; tests/test_confine.py), so
    bob's program gets fs_read's -1 for alice's file, while it still reads its own."""
    secret = hub.home("alice") / "diary.txt"
    in_view(hub, secret).write_text("alice's diary\n")
    chown_to(hub, "alice", in_view(hub, secret))
    r = kernels["bob"].execute(read_file_program(str(secret)))
    assert "diary" not in r.text()
    own = hub.home("bob") / "notes.txt"
    in_view(hub, own).write_text("bob's notes\n")
    chown_to(hub, "bob", in_view(hub, own))
    r = kernels["bob"].execute(read_file_program(str(own)))
    assert r.text() == "bob's notes\n", r.outputs


def chown_to(hub: Hub, user: str, *paths: Path) -> None:
    """Files the test writes into a home as root become that student's."""
    import pwd

    entry = pwd.getpwnam(hub.unix_user(user))
    for path in paths:
        os.chown(path, entry.pw_uid, entry.pw_gid)


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
            in_view(hub, hub.home("carol") / name).write_text(planted)
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


# -- issue 22: every student their own Unix user; bob against alice --------------------------------

ALICE_SECRET = "alice-homework-" + uuid.uuid4().hex[:12]


def in_view(hub: Hub, path: Path) -> Path:
    """PATH as the hub and its students see it: each home is a filesystem of its own mounted in
    the hub's mount namespace (deploy/jupyterhub/student_disk.py), which this process may not
    share (benchmarks/hub_load.py gives the hub a namespace of its own when it must)."""
    return Path(f"/proc/{hub.proc.pid}/root") / Path(path).relative_to("/")


def anywhere(hub: Hub, path: Path) -> bool:
    """Whether PATH exists in the hub's view or in this process's."""
    return Path(path).exists() or in_view(hub, path).exists()


def processes_of(hub: Hub, user: str) -> list:
    """The student's server and everything under it (kernel, JIT worker, runs)."""
    servers = [p for p in hub.leftovers() if p.environ().get("JUPYTERHUB_USER") == user
               and "jupyterhub.singleuser" in " ".join(p.cmdline())]
    return [q for p in servers for q in (p, *p.children(recursive=True))]


def status_fields(pid: int) -> dict[str, str]:
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return {k: v.strip() for k, _, v in (line.partition(":") for line in lines)}


def as_student(hub: Hub, user: str, code: str, timeout: float = 60.0) -> str:
    """Run Python CODE as the student's Unix user, with no confinement at all (the strongest a
    student could be: the Unix permissions alone must stop what it tries), in the hub's view
    (benchmarks/hub_load.py: where the student's Python is reachable)."""
    import pwd
    import subprocess

    entry = pwd.getpwnam(hub.unix_user(user))
    cmd = ["nsenter", "--mount", "--target", str(hub.proc.pid), "setpriv", f"--reuid={entry.pw_uid}",
           f"--regid={entry.pw_gid}", "--clear-groups", "--inh-caps=-all", "--bounding-set=-all",
           "--no-new-privs", "--", sys.executable, "-I", "-c", code]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd="/",
                          env={"PATH": os.defpath, "HOME": str(hub.home(user))})
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.fixture(scope="module")
def alices_work(hub, kernels):
    """Alice's notebook with her secret in it, saved through her own server (so hers by Unix)."""
    r = kernels["alice"].execute(f"%%file homework.cho\n// {ALICE_SECRET}\nfn answer() -> [] int {{ return 42; }}\n")
    assert r.status == "ok", r.outputs
    work = hub.home("alice") / "homework.cho"
    return work, in_view(hub, work).read_bytes()


CHUNK = 16 << 20
# (`yes`, not /dev/zero: Landlock leaves a safe program no device to read; docs/teaching.md)
FILL = "i=0; while [ $i -lt {most} ] && yes 0123456789abcdef | head -c {chunk} > fill-$i; do i=$((i+1)); done"


def exec_program(command: str) -> str:
    """A safe program that `Exec`s ``/bin/sh -c COMMAND`` (inside the kernel's sandbox)."""
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


def test_a_student_filling_the_disk_stops_at_their_own_bound(hub, kernels):
    """Carol writes 16 MiB files until refused (at most twice her bound, so a missing bound ends
    too): she stops at her home's size, the disk outside holds no more of hers than that, and
    bob, on the same disk, still writes."""
    if not sandbox_runs_c(hub):
        pytest.skip("Exec runs only inside the kernel's sandbox, which this machine lacks")
    home, outside = in_view(hub, hub.home("carol")), in_view(hub, hub.root)
    image = hub.root / "state" / "disks" / "carol.ext4"
    assert home.stat().st_dev != outside.stat().st_dev  # a filesystem of its own
    free_before = os.statvfs(outside).f_bavail * os.statvfs(outside).f_frsize
    most = 2 * DISK_LIMIT // CHUNK
    try:
        r = probe(hub, exec_program(FILL.format(most=most, chunk=CHUNK)))  # a kernel of her own
        assert r.status == "ok", r.outputs
        files = list(home.glob("fill-*"))
        written = sum(f.stat().st_size for f in files)
        assert len(files) < most or written < most * CHUNK, "nothing refused her"
        assert DISK_LIMIT // 2 < written <= DISK_LIMIT, written
        assert image.stat().st_blocks * 512 <= DISK_LIMIT
        free_after = os.statvfs(outside).f_bavail * os.statvfs(outside).f_frsize
        assert free_before - free_after <= DISK_LIMIT + (16 << 20), (free_before, free_after)
        r = kernels["bob"].execute("%%file after-fill.cho\nfn one() -> [] int { return 1; }\n")
        assert r.status == "ok", r.outputs
        assert in_view(hub, hub.home("bob") / "after-fill.cho").stat().st_size > 0
    finally:
        for f in home.glob("fill-*"):
            f.unlink()
    r = kernels["carol"].execute(HELLO)  # her room back, her kernel as before
    assert r.status == "ok" and r.text() == "hello, world\n", r.outputs


def test_each_students_server_runs_as_their_own_user_without_capabilities(hub, kernels):
    import pwd

    uids = {}
    for u in ("alice", "bob"):
        entry = pwd.getpwnam(hub.unix_user(u))
        assert entry.pw_uid != 0 and entry.pw_gid != 0
        procs = processes_of(hub, u)
        kinds = " ".join(" ".join(p.cmdline()) for p in procs)
        assert "jupyterhub.singleuser" in kinds and "cancho_kernel" in kinds, kinds
        for p in procs:
            st = status_fields(p.pid)
            assert st["Uid"].split() == [str(entry.pw_uid)] * 4, (p.cmdline(), st["Uid"])
            assert st["Gid"].split() == [str(entry.pw_gid)] * 4, (p.cmdline(), st["Gid"])
            assert set(st["Groups"].split()) <= {str(entry.pw_gid)}, (p.cmdline(), st["Groups"])
            for cap in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
                assert int(st[cap], 16) == 0, (p.cmdline(), cap, st[cap])
            assert st["NoNewPrivs"] == "1", p.cmdline()
        uids[u] = entry.pw_uid
        home = in_view(hub, hub.home(u)).stat()
        assert (home.st_uid, home.st_mode & 0o777) == (entry.pw_uid, 0o700)
        for part in ("runtime", "cache"):
            d = (hub.private(u) / part).stat()
            assert (d.st_uid, d.st_mode & 0o777) == (entry.pw_uid, 0o700)
    assert uids["alice"] != uids["bob"]
    assert status_fields(hub.proc.pid)["Uid"].split()[0] == "0"  # root is the hub's alone


def test_the_hubs_state_and_shared_files_are_roots_and_read_only(hub):
    state = (hub.root / "state").stat()
    assert (state.st_uid, state.st_mode & 0o777) == (0, 0o700)
    assert (hub.root / "state" / "jupyterhub_cookie_secret").is_file()
    for d in (hub.root, hub.root / "users", hub.root / "private"):
        assert d.stat().st_mode & 0o777 == 0o711, d
    for f in [hub.root / "share", *(hub.root / "share").rglob("*")]:
        st = f.lstat()
        assert st.st_uid == 0 and not st.st_mode & 0o022, (f, oct(st.st_mode))
    server = processes_of(hub, "bob")[0]
    env = server.environ()
    assert env["PYTHONNOUSERSITE"] == "1" and "-s" in server.cmdline()
    for key in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "IPYTHONDIR", "MPLCONFIGDIR"):
        assert Path(env[key]).is_relative_to(hub.root / "share"), (key, env[key])
    assert Path(env["XDG_CACHE_HOME"]) == hub.private("bob") / "cache"
    helpers = env.get("CANCHO_HELPER_DIR")
    if helpers is not None:  # prebuilt by root when the kernel can (deploy/jupyterhub/prebuilt_helpers.py)
        assert Path(helpers) == hub.root / "share" / "helpers" and any(Path(helpers).iterdir())


STEAL = r"""
import os, sys
root, alice = sys.argv[1], sys.argv[2]
targets = {"alice's homework": alice + "/homework.cho", "cookie secret": root + "/state/jupyterhub_cookie_secret",
           "database": root + "/state/jupyterhub.sqlite", "alice's runtime": root + "/private/alice/runtime"}
for what, path in targets.items():
    try:
        if os.path.isdir(path):
            print(what, "LISTED", os.listdir(path))
        else:
            print(what, "READ", open(path, "rb").read(200))
    except OSError as e:
        print(what, "denied", e.errno)
for d in (root + "/users", root + "/private", root + "/state", alice):
    try:
        print(d, "LISTED", os.listdir(d))
    except OSError as e:
        print(d, "denied", e.errno)
try:
    open(alice + "/planted.cho", "w").write("bob was here")
    print("WROTE into alice's home")
except OSError as e:
    print("write denied", e.errno)
"""


def test_bob_as_his_own_unix_user_reaches_nothing_of_alice_or_the_hub(hub, alices_work):
    """Even a process of bob's running whatever he likes, unconfined: Unix permissions alone."""
    work, before = alices_work
    secret = (hub.root / "state" / "jupyterhub_cookie_secret").read_bytes()
    out = as_student(hub, "bob", STEAL.replace("sys.argv[1], sys.argv[2]",
                                               f"{str(hub.root)!r}, {str(hub.home('alice'))!r}"))
    print(out)
    assert "READ" not in out and "LISTED" not in out and "WROTE" not in out, out
    assert ALICE_SECRET not in out and secret.hex() not in out and secret.decode(errors="replace") not in out
    assert in_view(hub, work).read_bytes() == before
    assert not anywhere(hub, hub.home("alice") / "planted.cho")


def read_stdin_program() -> str:
    """A program that echoes its stdin (what ``--stdin-file`` gives it)."""
    return """fn main(world: World) -> [] int {
    let Split { io, ffi, fs, heap, args } = split(world);
    release(ffi); release(fs); release(heap); release(args);
    borrow mut io as &!i in {
        var c = getchar(i);
        while c >= 0 { putchar(i, c); c = getchar(i); }
    }
    release(io);
    return 0;
}
"""


def write_file_program(path: str, text: str) -> str:
    return f"""fn main(world: World) -> [] int {{
    let Split {{ io, ffi, fs, heap, args }} = split(world);
    release(ffi); release(heap); release(args); release(io);
    var n = 0;
    borrow fs as &f in {{ n = fs_write(f, "{path}", "{text}"); }}
    release(fs);
    return 0;
}}
"""


def test_bob_cannot_read_alices_work_or_the_hubs_secrets_from_his_kernel(hub, kernels, alices_work):
    """By a program with Fs (absolute paths), by %load, by --stdin-file: nothing of alice's
    homework, the cookie secret or the database reaches bob's outputs."""
    work, before = alices_work
    state = hub.root / "state"
    secret = (state / "jupyterhub_cookie_secret").read_bytes()
    bob = kernels["bob"]
    seen = []
    for path in (work, state / "jupyterhub_cookie_secret", state / "jupyterhub.sqlite"):
        for cell in (read_file_program(str(path)), f"%load {path}",
                     f"%%run --stdin-file {path}\n{read_stdin_program()}"):
            r = bob.execute(cell)
            shown = r.text() + r.text("stderr") + "".join(
                str(o.get("data", {})) + o.get("evalue", "") for o in r.outputs)
            seen.append(shown)
    everything = "\n".join(seen)
    assert ALICE_SECRET not in everything
    assert secret.hex() not in everything and secret[:16].hex() not in everything
    assert "SQLite format" not in everything
    assert in_view(hub, work).read_bytes() == before


def test_bob_cannot_write_into_alices_home(hub, kernels, alices_work):
    work, before = alices_work
    bob = kernels["bob"]
    for cell in (write_file_program(str(work), "overwritten by bob"),
                 write_file_program(str(hub.home("alice") / "planted.cho"), "planted"),
                 f"%%file {hub.home('alice')}/planted.cho\nfn seven() -> [] int {{ return 7; }}\n",
                 f"%%run --stdout file:{work}\n{HELLO}"):
        bob.execute(cell)
    assert in_view(hub, work).read_bytes() == before
    assert not anywhere(hub, hub.home("alice") / "planted.cho")


def test_bob_cannot_signal_alices_processes(hub, kernels):
    alice = processes_of(hub, "alice")
    pids = [p.pid for p in alice]
    out = as_student(hub, "bob", "import os, signal\n"
                     f"for pid in {pids!r}:\n"
                     "    try:\n        os.kill(pid, signal.SIGKILL); print('KILLED', pid)\n"
                     "    except OSError as e:\n        print('denied', pid, e.errno)\n")
    assert "KILLED" not in out, out
    assert all(psutil.pid_exists(p) for p in pids)
    r = kernels["alice"].execute(HELLO)
    assert r.status == "ok" and r.text() == "hello, world\n"


def listening_ports(uid: int) -> set[int]:
    """``ss -ltn`` for one user: TCP sockets listening on loopback owned by UID (/proc/net/tcp)."""
    found = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        f = line.split()
        local, state, owner = f[1], f[3], int(f[7])
        if state == "0A" and owner == uid and local.startswith("0100007F:"):
            found.add(int(local.split(":")[1], 16))
    return found


def dial_program(port: int) -> str:
    """A program that dials loopback PORT and says what it got (a ZMTP greeting, for IOPub)."""
    return f"""edition 5;

import std.io;

fn main(world: World) -> [] int {{
    let Split {{ io, ffi, fs, heap, args, net, clock }} = split(world);
    release(ffi); release(fs); release(heap); release(args); release(clock);
    borrow net as &n in {{
        match tcp_connect(n, "127.0.0.1", {port}) {{
            Dialed::Ok(c) => {{
                var conn = c;
                region r {{
                    let buf = alloc_slice[r](64, byte_of(0));
                    borrow mut conn as &!cc in {{
                        match conn_read(cc, buf) {{
                            Received::Data(k) => {{
                                borrow mut io as &!i in {{ io.write_all(i, "CONNECTED, read "); io.print_int(i, k); }}
                            }}
                            Received::End => {{ borrow mut io as &!i in {{ io.write_all(i, "CONNECTED, end"); }} }}
                            Received::Again => {{ }}
                            Received::Failed(e) => {{ }}
                        }}
                    }}
                }}
                conn_close(conn);
            }}
            Dialed::Failed(e) => {{
                borrow mut io as &!i in {{ io.write_all(i, "no connection"); }}
            }}
        }}
    }}
    release(net); release(io);
    return 0;
}}
"""


def subscribe_as(hub: Hub, user: str, address: str, seconds: float) -> str:
    """A zmq SUBSCRIBE to ADDRESS as USER's Unix user; prints every message it saw."""
    return as_student(hub, user, "import zmq, time\n"
                      "s = zmq.Context().socket(zmq.SUB); s.setsockopt(zmq.SUBSCRIBE, b'')\n"
                      f"s.connect({address!r}); end = time.monotonic() + {seconds}\n"
                      "while time.monotonic() < end:\n"
                      "    if s.poll(200):\n        print(s.recv_multipart())\n", timeout=seconds + 60)


CONNECT = """import os, socket
for port in PORTS:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=10).close()
        print("CONNECTED", port)
    except OSError as e:
        print("refused", port, e.errno)
try:
    os.stat(IPC)
    print("STAT", IPC)
except OSError as e:
    print("no stat", e.errno)
"""


def sandboxed_network(hub: Hub) -> bool:
    """Whether the kernel runs programs without the host's network (issue 22: the sandbox's own
    network namespace; not before helper h1's sandbox is in the kernel)."""
    return "no connection" in probe(hub, dial_program(hub.port)).text()


def server_ports(hub: Hub, user: str) -> set[int]:
    """The loopback TCP ports the student's server process listens on."""
    server = processes_of(hub, user)[0]
    return {c.laddr.port for c in server.net_connections("tcp") if c.status == psutil.CONN_LISTEN}


def test_bob_cannot_listen_to_alices_kernel_or_reach_her_server(hub, kernels):
    """Alice's kernel's IOPub carries her cells' source and output to anyone subscribed. Her
    kernels use the ipc transport: Unix sockets in her 0700 runtime directory, so a zmq SUBSCRIBE
    as bob's own Unix user (unconfined) hears nothing and cannot even stat the socket. Her only
    loopback TCP port is her server's: bob's program (in its sandbox) and bob himself (outside,
    the nftables rule of deploy/jupyterhub/loopback_guard.py) both fail to connect, root (the
    proxy's user) does."""
    import json
    import pwd
    import socket
    import threading

    alice_uid = pwd.getpwnam(hub.unix_user("alice")).pw_uid
    ports = listening_ports(alice_uid)
    conn = max(in_view(hub, hub.private("alice") / "runtime").glob("kernel-*.json"), key=lambda p: p.stat().st_mtime)
    info = json.loads(conn.read_text())
    assert info["transport"] == "ipc", info
    ipc = f"{info['ip']}-{info['iopub_port']}"
    assert Path(ipc).is_relative_to(hub.private("alice") / "runtime"), ipc
    assert in_view(hub, Path(ipc)).is_socket()
    assert ports == server_ports(hub, "alice") and len(ports) == 1, (ports, server_ports(hub, "alice"))
    socket.create_connection(("127.0.0.1", next(iter(ports))), timeout=10).close()  # root: the proxy's way in
    marker = "alice-cell-" + uuid.uuid4().hex[:10]
    stop = threading.Event()

    def alice_works() -> None:
        while not stop.is_set():
            kernels["alice"].execute(f'// {marker}\n{HELLO}')
            time.sleep(0.2)

    worker = threading.Thread(target=alice_works, daemon=True)
    worker.start()
    try:
        dialled = {p: kernels["bob"].execute(dial_program(p)).text() for p in sorted(ports)}
        heard = subscribe_as(hub, "bob", f"ipc://{ipc}", 3.0)
        direct = as_student(hub, "bob", CONNECT.replace("PORTS", repr(sorted(ports))).replace("IPC", repr(ipc)))
    finally:
        stop.set()
        worker.join(60)
    print("bob's program dialling alice's ports:", dialled)
    print("a SUBSCRIBE from bob's Unix user to alice's IOPub saw:", heard[:2000] or "nothing")
    print("bob's own process:", direct)
    assert [p for p, out in dialled.items() if "CONNECTED" in out] == [], dialled
    assert marker not in heard and heard == "", heard[:2000]
    assert "CONNECTED" not in direct and "STAT" not in direct, direct


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


PLANTS = {  # in the student's own home: each would run Python at the next server or kernel start
    ".local/lib/python{v}/site-packages/cancho-pwn.pth": "import pathlib; pathlib.Path({m!r}).write_text('pth')\n",
    ".jupyter/jupyter_server_config.py": "import pathlib; pathlib.Path({m!r}).write_text('jupyter')\n",
    ".jupyter/jupyter_config.py": "import pathlib; pathlib.Path({m!r}).write_text('jupyter')\n",
    ".ipython/profile_default/ipython_kernel_config.py": "import pathlib; pathlib.Path({m!r}).write_text('ipython')\n",
    ".ipython/profile_default/startup/00-pwn.py": "import pathlib; pathlib.Path({m!r}).write_text('startup')\n",
    "sitecustomize.py": "import pathlib; pathlib.Path({m!r}).write_text('sitecustomize')\n",
    "usercustomize.py": "import pathlib; pathlib.Path({m!r}).write_text('usercustomize')\n",
}


def test_files_planted_in_the_home_do_not_run_at_the_next_start(hub, kernels):
    """Bob writes (as himself, the most he can) a .pth, Jupyter and IPython configs and
    site/usercustomize into his home; his server restarts, a kernel starts and runs a program
    (its JIT worker starts too): none of them ran."""
    marker = hub.home("bob") / f"pwned-{uuid.uuid4().hex[:8]}"
    v = f"{sys.version_info.major}.{sys.version_info.minor}"
    plants = {name.format(v=v): text.format(m=str(marker)) for name, text in PLANTS.items()}
    as_student(hub, "bob", "import os, sys\n"
               f"for name, text in {plants!r}.items():\n"
               f"    path = os.path.join({str(hub.home('bob'))!r}, name)\n"
               "    os.makedirs(os.path.dirname(path), exist_ok=True)\n"
               "    open(path, 'w').write(text)\n")
    kernels.pop("bob").ws.close()
    hub.api("DELETE", "/users/bob/server", ok=(202, 204))
    deadline = time.monotonic() + 60
    while processes_of(hub, "bob") and time.monotonic() < deadline:
        time.sleep(0.3)
    hub.start_server("bob")
    k = RemoteKernel(hub, "bob", "after-restart.ipynb")
    try:
        r = k.execute(HELLO)
        assert r.status == "ok" and r.text() == "hello, world\n", r.outputs
        r = k.execute("%%run --backend jit\n" + HELLO)
        assert r.status == "ok", r.outputs
    finally:
        k.close()
    assert not anywhere(hub, marker), in_view(hub, marker).read_text()


# -- the library as a student ------------------------------------------------------------------------

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
SANITIZE = Path(__file__).resolve().parent / "notebooks" / "sanitize.cfg"
# The stored outputs were made outside safe mode, whose `%limits` line ends in "(safe mode)".
SAFE_SANITIZE = """
# A student's kernel is in safe mode (tests/test_hub.py): `%limits` says so.
regex: processes (\\S+) \\(safe mode\\)
replace: processes \\1
"""
# One with %%c, one with extern fn, one with %bench: the default run; the rest are slow.
REPRESENTATIVE = ("defined-behaviour.ipynb", "emitted-checks.ipynb", "float-math.ipynb")
LIBRARY = [pytest.param(p.name, marks=() if p.name in REPRESENTATIVE else pytest.mark.slow)
           for p in sorted(NOTEBOOKS.glob("*.ipynb"))]


@pytest.fixture(scope="module")
def dave(hub):
    """A student who only works through the library (a fresh copy of the course in his home)."""
    hub.create_users(["dave"])
    hub.start_server("dave")
    return "dave"


def nbval_as_student(hub: Hub, user: str, notebook: str) -> "subprocess.CompletedProcess[str]":
    """Strict nbval on the student's copy of NOTEBOOK, run as the student's Unix user with the
    environment of the student's own server (safe mode, the hub's safe kernelspec, the private
    cache): the kernel starts as it would from JupyterLab."""
    import pwd
    import subprocess

    sanitize = hub.root / "nbval-sanitize.cfg"  # the student reads it (the hub's root is 0711)
    if not sanitize.exists():
        sanitize.write_text(SANITIZE.read_text() + SAFE_SANITIZE)
        sanitize.chmod(0o644)
    server = processes_of(hub, user)[0]
    env = {k: v for k, v in server.environ().items() if not k.startswith(("JUPYTERHUB_", "JPY_"))}
    # The stored outputs are the baseline CPU's (docs/claims.md), as in tests/test_notebooks.py.
    env["CANCHO_CPU"] = "baseline"
    entry = pwd.getpwnam(hub.unix_user(user))
    cmd = ["nsenter", "--mount", "--target", str(hub.proc.pid), "setpriv",
           f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}", "--clear-groups", "--inh-caps=-all",
           "--bounding-set=-all", "--no-new-privs", "--", "env", "-C", str(hub.home(user)),  # the home in the hub's view
           sys.executable, "-s", "-m", "pytest", "--nbval", "--nbval-kernel-name", "cancho",
           "--nbval-sanitize-with", str(sanitize), "--nbval-cell-timeout", "300", "-q", "-p", "no:cacheprovider",
           "-p", "no:benchmark", "-o", "addopts=", "--rootdir", str(hub.home(user)), str(hub.home(user) / notebook)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd="/", env=env)


def probe(hub: Hub, cell: str) -> Reply:
    """CELL in a fresh kernel of carol's (the shared ones may sit idle for minutes)."""
    k = RemoteKernel(hub, "carol", "probe.ipynb")
    try:
        return k.execute(cell)
    finally:
        k.close()


_SANDBOX_RUNS_C: dict[str, bool] = {}


def sandbox_runs_c(hub: Hub) -> bool:
    """Whether safe mode runs ``%%c`` (inside the kernel's sandbox, issue 22) or still refuses it."""
    if hub.run_id not in _SANDBOX_RUNS_C:
        r = probe(hub, "%%c probe\nint main(void) { return 0; }\n")
        _SANDBOX_RUNS_C[hub.run_id] = "refused in safe mode" not in r.error.get("evalue", "")
    return _SANDBOX_RUNS_C[hub.run_id]


@pytest.mark.parametrize("notebook", LIBRARY)
def test_the_library_passes_strict_nbval_as_a_hub_student(hub, dave, notebook):
    t0 = time.perf_counter()
    done = nbval_as_student(hub, dave, notebook)
    took = time.perf_counter() - t0
    print(f"{notebook}: {took:.1f} s as {hub.unix_user(dave)}\n{done.stdout[-3000:]}")
    refused = "refused in safe mode" in done.stdout or "safe mode refuses" in done.stdout
    if done.returncode != 0 and refused and not sandbox_runs_c(hub):
        pytest.xfail(f"{notebook}: safe mode refuses %%c / extern fn until the kernel runs them in its "
                     f"sandbox (issue 22): {done.stdout.strip().splitlines()[-1]}")
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and " failed" not in done.stdout


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
    from loopback_guard import LoopbackGuard

    assert LoopbackGuard(cgroup_prefix(hub).replace("-", "_")).rules() == {}  # no rule left behind
    mounts = Path("/proc/self/mountinfo").read_text()
    assert str(hub.root) not in mounts  # no home left mounted where this process can see
