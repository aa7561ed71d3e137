"""Issue 12, finding 6: a run never outlives its parent.

Before the fix, SIGTERM (or a harness's SIGKILL) to `cancho run` left the program looping at
100 % CPU with parent 1, the exe backend left `/tmp/cancho-run-PID/`, and a program that called
`setsid` through `extern fn` outlived the kernel's shutdown. Each program here names itself
(PR_SET_NAME through `extern fn prctl`) so that /proc can be searched for it afterwards, whatever
its parent has become; a program that escapes does so with `fork` and `setsid`.

The polls below wait for processes to appear or to be gone; they bound a hang, they do not
measure anything.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest
from kernel_client import assert_alive, run

pytestmark = pytest.mark.usefixtures("cancho_kernelspec")

BACKENDS = ("jit", "exe")
EXTERNS = """\
extern fn prctl[&f, &n](ffi: &f Ffi("libc"), option: int, name: &n [byte], a: int, b: int) -> [ffi("libc")] c_int;
extern fn fork[&f](ffi: &f Ffi("libc")) -> [ffi("libc")] c_int;
extern fn setsid[&f](ffi: &f Ffi("libc")) -> [ffi("libc")] c_int;
"""


def marker() -> str:
    """A process name (at most 15 bytes) no other process has."""
    return "cx" + uuid.uuid4().hex[:12]


def program(name: str, *, escape: bool, parent_loops: bool) -> str:
    """Names itself `name`; with ``escape`` forks a child that calls `setsid` and loops forever;
    the original process loops forever when ``parent_loops``, else returns 0."""
    fork = "p = fork(f);\n        if p == 0 { let s = setsid(f); }" if escape else ""
    condition = "p >= 0" if parent_loops else "p == 0"
    return f"""{EXTERNS}
fn main(world: World) -> [] int {{
    let Split {{ io, ffi, fs, heap, args }} = split(world);
    release(io); release(fs); release(heap); release(args);
    let libc = narrow(ffi, "libc");
    var p = {0 if escape else 1};
    borrow libc as &f in {{
        let named = prctl(f, 15, "{name}\\0", 0, 0);
        {fork}
    }}
    release(libc);
    var n = 0;
    while {condition if escape else "p >= 0"} {{ n = n + 1; if n > 1000000 {{ n = 0; }} }}
    return 0;
}}
"""


def named(name: str) -> list[int]:
    """Pids of the processes called `name`."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if Path(f"/proc/{entry}/comm").read_text().strip() == name:
                    pids.append(int(entry))
            except OSError:
                pass
    return pids


def with_text(text: str) -> list[int]:
    """Pids whose command line mentions ``text`` (a launcher, a reaper, a worker's argv)."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                if text.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                    pids.append(int(entry))
            except OSError:
                pass
    return pids


def wait_for(predicate, limit: float = 60.0) -> bool:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def kill_all(pids: list[int]) -> None:
    """Clean up after a failing test (never leave a loop running on a shared machine)."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


# -- `cancho run` -------------------------------------------------------------------------------------


def start_cli(tmp_path: Path, source: str, backend: str, *extra: str) -> tuple[subprocess.Popen, Path]:
    prog = tmp_path / f"p{uuid.uuid4().hex[:8]}.cho"
    prog.write_text(source)
    proc = subprocess.Popen([sys.executable, "-m", "cancho_kernel.cli", "run", "--backend", backend,
                             *extra, str(prog)], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return proc, prog


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL, signal.SIGHUP], ids=lambda s: s.name)
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("escape", [False, True], ids=["loop", "setsid"])
def test_cancho_run_killed_leaves_no_process_and_no_directory(tmp_path, backend, sig, escape):
    name = marker()
    proc, prog = start_cli(tmp_path, program(name, escape=escape, parent_loops=True), backend)
    run_dir = Path(tempfile.gettempdir()) / f"cancho-run-{proc.pid}"
    try:
        assert wait_for(lambda: len(named(name)) == (2 if escape else 1)), proc.stderr
        proc.send_signal(sig)
        assert proc.wait(timeout=60) == -sig  # it dies by the signal it was sent
        assert wait_for(lambda: not named(name) and not with_text(str(prog))), named(name)
        assert not run_dir.exists()
    finally:
        kill_all(named(name) + with_text(str(prog)))
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("backend", BACKENDS)
def test_what_a_program_leaves_behind_goes_when_it_returns(tmp_path, backend):
    """The program returns 0 at once; the child it forked called setsid and loops."""
    name = marker()
    proc, prog = start_cli(tmp_path, program(name, escape=True, parent_loops=False), backend)
    try:
        assert proc.wait(timeout=120) == 0, proc.stderr.read()
        assert named(name) == []
        assert not (Path(tempfile.gettempdir()) / f"cancho-run-{proc.pid}").exists()
    finally:
        kill_all(named(name))


def test_a_stale_run_directory_is_removed_by_the_next_run(tmp_path):
    """A directory of a process that no longer exists (killed during linking) goes."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = Path(tempfile.gettempdir()) / f"cancho-run-{dead.pid}"
    stale.mkdir(exist_ok=True)
    (stale / "leftover").write_text("x")
    hello = tmp_path / "h.cho"
    hello.write_text("fn main(world: World) -> [] int { release(world); return 0; }\n")
    assert subprocess.run([sys.executable, "-m", "cancho_kernel.cli", "run", str(hello)]).returncode == 0
    assert not stale.exists()


@pytest.mark.parametrize("backend", BACKENDS)
def test_cancho_test_killed_leaves_no_process_and_no_directory(tmp_path, backend):
    loop = tmp_path / "forever.cho"
    loop.write_text("fn test_forever() -> [] int {\n    var n = 0;\n    while n >= 0 { n = n + 1; "
                    "if n > 1000000 { n = 0; } }\n    return 0;\n}\n")
    proc = subprocess.Popen([sys.executable, "-m", "cancho_kernel.cli", "test", "--backend", backend,
                             str(loop)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    mine = f"cancho-test-{proc.pid}-"
    try:
        # the runner, its worker or launcher, and the looping test
        assert wait_for(lambda: any(_running(p) for p in descendants(proc.pid)))
        started = descendants(proc.pid)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == -signal.SIGTERM
        assert wait_for(lambda: not [p for p in started if alive(p)]), started
        assert not any(n.startswith(mine) for n in os.listdir(tempfile.gettempdir()))
    finally:
        proc.kill()
        proc.wait()


def _stat(pid: int) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _running(proc: tuple[int, str]) -> bool:
    st = _stat(proc[0])
    return st is not None and st[0] == "R" and st[19] == proc[1]


def descendants(pid: int) -> set[tuple[int, str]]:
    """(pid, start time) of every descendant of ``pid`` now: the start time tells a process from
    a later one that reuses its pid."""
    from cancho_kernel.compiler.backends.process import children_of

    out, todo = set(), [pid]
    while todo:
        for kid in children_of(todo.pop()):
            st = _stat(kid)
            if st is not None:
                out.add((kid, st[19]))
                todo.append(kid)
    return out


def alive(proc: tuple[int, str]) -> bool:
    st = _stat(proc[0])
    return st is not None and st[19] == proc[1] and st[0] != "Z"


# -- the kernel ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_escaped_child_is_gone_when_the_cell_ends(kernel, backend):
    name = marker()
    cell = run(kernel, f"%%run --backend {backend}\n" + program(name, escape=True, parent_loops=False))
    try:
        assert cell.status == "ok", cell.outputs
        assert named(name) == []
    finally:
        kill_all(named(name))
    assert_alive(kernel)


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_escaped_child_is_gone_when_the_cell_is_interrupted(kernel, backend):
    km, kc = kernel
    name = marker()
    kc.execute(f"%%run --backend {backend} --timeout 120\n" + program(name, escape=True, parent_loops=True))
    try:
        assert wait_for(lambda: len(named(name)) == 2)
        km.interrupt_kernel()
        reply = kc.get_shell_msg(timeout=60)
        assert reply["content"]["status"] == "error"
        assert wait_for(lambda: not named(name)), named(name)
    finally:
        kill_all(named(name))
    assert_alive(kernel)


@pytest.mark.parametrize("how", ["shutdown", "SIGTERM", "SIGKILL"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_nothing_outlives_the_kernel(cancho_kernelspec, backend, how):
    from jupyter_client.manager import start_new_kernel

    km, kc = start_new_kernel(kernel_name=cancho_kernelspec, startup_timeout=60)
    name = marker()
    pid = km.provisioner.process.pid
    try:
        kc.execute(f"%%run --backend {backend} --timeout 120\n" + program(name, escape=True, parent_loops=True))
        assert wait_for(lambda: len(named(name)) == 2)
        started = descendants(pid)  # the worker or launcher, the program, the escaped child
        assert len(started) >= 3, started
        if how == "shutdown":
            kc.stop_channels()
            km.shutdown_kernel(now=False)
        else:
            os.kill(pid, signal.SIGTERM if how == "SIGTERM" else signal.SIGKILL)
            km.provisioner.process.wait(timeout=60)
        assert wait_for(lambda: not named(name)), named(name)
        assert wait_for(lambda: not [p for p in started if alive(p)]), started
        # the exe binary's directory went when the program started; a SIGKILLed kernel's other
        # directories (named programs) go when the next kernel starts
        assert not [n for n in os.listdir(tempfile.gettempdir())
                    if n.startswith("cancho-") and f"-{pid}-" in n]
    finally:
        kill_all(named(name))
        kc.stop_channels()
        if km.is_alive():
            km.shutdown_kernel(now=True)


# -- the JIT worker itself ----------------------------------------------------------------------------


def jit_ir(source: str) -> str:
    from cancho_kernel.compiler import api
    from cancho_kernel.compiler.source import SourceFile

    compiled = api.compile_sources([SourceFile("p.cho", source)])
    assert compiled.ok, compiled
    return compiled.ir


def start_escaping_run(name: str):
    """A JIT worker running a program that loops and whose setsid'd child loops; returns the
    worker, the thread running it, and the box the run's outcome lands in."""
    import threading

    from cancho_kernel.compiler.backends.jit import JitWorker
    from cancho_kernel.compiler.backends.process import RunLimits, StdoutTarget

    ir = jit_ir(program(name, escape=True, parent_loops=True))
    worker = JitWorker()
    worker.start()
    box: dict = {}

    def run() -> None:
        try:
            box["result"] = worker.run(ir, ["p"], b"", StdoutTarget.pipe(), RunLimits(timeout=120))
        except Exception as e:  # noqa: BLE001 - the worker's death is expected here
            box["error"] = e

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert wait_for(lambda: len(named(name)) == 2), box
    return worker, thread, box


def test_a_shutdown_racing_a_slow_worker_leaves_nothing():
    """The intermittent `[jit-shutdown]` orphan, forced: the kernel's SIGTERM handler
    (``abandon``) ends the worker while a run is in flight, and the worker does not get to its
    sweep within the grace (here it is stopped; on a loaded machine it was starved). Before, the
    worker was then SIGKILLed: the program died with it (PR_SET_PDEATHSIG) but its setsid'd
    child was re-parented to init and lived on. Now the worker's guard kills it and sweeps."""
    name = marker()
    worker, thread, _ = start_escaping_run(name)
    worker_pid = worker.pid
    try:
        os.kill(worker_pid, signal.SIGSTOP)
        worker.abandon(grace=0.2)
        thread.join(timeout=60)
        assert wait_for(lambda: not named(name)), named(name)
        assert not Path(f"/proc/{worker_pid}").exists() or _stat(worker_pid)[0] == "Z"
    finally:
        kill_all(named(name) + [worker_pid])
        worker.close()


def test_a_sigkilled_worker_leaves_nothing():
    """The worker SIGKILLed mid-run (as the OOM killer would: it is the largest process):
    the program dies with it and what it escaped to with setsid is killed by the guard."""
    name = marker()
    worker, thread, box = start_escaping_run(name)
    worker_pid = worker.pid
    try:
        os.kill(worker_pid, signal.SIGKILL)
        assert wait_for(lambda: not named(name)), named(name)
        thread.join(timeout=60)
        assert "error" in box  # the run is reported as the worker's death
    finally:
        kill_all(named(name))
        worker.close()
