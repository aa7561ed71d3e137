"""The on-disk build cache (compiler/cache.py) of `cancho build` / `cancho run` and the kernel's
exe backend: what a hit skips, and every change that must miss (docs/cli.md, issue 15)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from cancho_kernel import cli
from cancho_kernel.compiler import api, cache
from cancho_kernel.compiler.backends import exe
from cancho_kernel.compiler.cache import Artefact, BuildCache
from cancho_kernel.compiler.check import program as check_program_module
from cancho_kernel.compiler.source import SourceFile

UTIL = """\
module util;
pub fn answer() -> [] int { return 40; }
"""

MAIN = """\
edition 1;
import util;
fn main(world: World) -> [] int {
    let Split { io, ffi, fs, heap, args } = split(world);
    release(io); release(ffi); release(fs); release(heap); release(args);
    return util.answer() + 2;
}
"""

GETPID = """\
extern fn getpid[&f](ffi: &f Ffi("libc")) -> [ffi("libc")] c_int;
fn main(world: World) -> [] int {
    let Split { io, ffi, fs, heap, args } = split(world);
    release(io); release(fs); release(heap); release(args);
    let libc = narrow(ffi, "libc");
    var n = 0;
    borrow libc as &f in { n = getpid(f); }
    release(libc);
    return 0;
}
"""


class Counts:
    """How often the checker and the linker ran (a hit runs neither)."""

    def __init__(self) -> None:
        self.checks = 0
        self.links = 0


@pytest.fixture
def counts(monkeypatch, tmp_path) -> Counts:
    monkeypatch.setenv("CANCHO_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("CANCHO_CACHE_SIZE", raising=False)
    monkeypatch.delenv("CANCHO_SAFE", raising=False)
    c = Counts()
    real_check, real_link = check_program_module.check_program, exe.build_executable

    def check(*a, **k):
        c.checks += 1
        return real_check(*a, **k)

    def link(*a, **k):
        c.links += 1
        return real_link(*a, **k)

    monkeypatch.setattr(check_program_module, "check_program", check)
    monkeypatch.setattr(exe, "build_executable", link)
    return c


@pytest.fixture
def program(tmp_path) -> tuple[Path, Path]:
    main, util = tmp_path / "main.cho", tmp_path / "util.cho"
    main.write_text(MAIN)
    util.write_text(UTIL)
    return main, util


def build(tmp_path: Path, *files: Path, extra: tuple[str, ...] = ()) -> tuple[int, Path]:
    out = tmp_path / "prog"
    code = cli.main(["build", *map(str, files), "-o", str(out), *extra])
    return code, out


def status(path: Path) -> int:
    return subprocess.run([str(path)], timeout=30).returncode


def entries(tmp_path: Path) -> list[str]:
    root = tmp_path / "cache"
    return sorted(p.name for p in root.iterdir()) if root.exists() else []


def test_a_second_build_neither_checks_nor_links(counts, program, tmp_path):
    code, out = build(tmp_path, *program)
    assert code == 0 and status(out) == 42 and (counts.checks, counts.links) == (1, 1)
    first = out.read_bytes()
    out.unlink()
    code, out = build(tmp_path, *program)
    assert code == 0 and status(out) == 42 and (counts.checks, counts.links) == (1, 1)
    assert out.read_bytes() == first and os.access(out, os.X_OK)
    assert sorted(n.rsplit(".", 1)[1] for n in entries(tmp_path)) == ["exe", "ir"]


def test_editing_an_imported_module_rebuilds(counts, program, tmp_path):
    main, util = program
    assert build(tmp_path, main, util)[0] == 0
    util.write_text(UTIL.replace("40", "50"))
    code, out = build(tmp_path, main, util)
    assert code == 0 and status(out) == 52 and (counts.checks, counts.links) == (2, 2)


def test_changing_the_edition_rebuilds(counts, program, tmp_path, capsys):
    """At edition 2 `split` also hands out `net`, so the same text is refused: a stale entry
    would have answered 0."""
    main, util = program
    assert build(tmp_path, main, util)[0] == 0
    main.write_text(MAIN.replace("edition 1;", "edition 2;"))
    code, _ = build(tmp_path, main, util)
    assert code == cli.EXIT_REFUSED and "has 6 fields (io, ffi, fs, heap, args, net)" in capsys.readouterr().err
    assert counts.checks == 2


def test_a_new_compiler_version_rebuilds(counts, program, tmp_path, monkeypatch):
    assert build(tmp_path, *program)[0] == 0
    monkeypatch.setattr(cache, "compiler_fingerprint", lambda: "0.1.0+an-edited-compiler")
    code, out = build(tmp_path, *program)
    assert code == 0 and status(out) == 42 and (counts.checks, counts.links) == (2, 2)


def test_a_new_linker_relinks_but_does_not_recheck(counts, program, tmp_path, monkeypatch):
    assert build(tmp_path, *program)[0] == 0
    monkeypatch.setattr(cache, "linker_fingerprint", lambda cc: "another cc")
    assert build(tmp_path, *program)[0] == 0
    assert (counts.checks, counts.links) == (1, 2)


def test_no_cache_neither_reads_nor_writes(counts, program, tmp_path):
    for _ in range(2):
        code, out = build(tmp_path, *program, extra=("--no-cache",))
        assert code == 0 and status(out) == 42
    assert (counts.checks, counts.links) == (2, 2) and entries(tmp_path) == []


def test_a_corrupt_entry_is_ignored_and_rebuilt(counts, program, tmp_path):
    assert build(tmp_path, *program)[0] == 0
    for name in entries(tmp_path):
        path = tmp_path / "cache" / name
        data = bytearray(path.read_bytes())
        data[-1] ^= 0xFF
        path.write_bytes(bytes(data))
    code, out = build(tmp_path, *program)
    assert code == 0 and status(out) == 42 and (counts.checks, counts.links) == (2, 2)
    code, out = build(tmp_path, *program)  # the rebuilt entries are good again
    assert code == 0 and (counts.checks, counts.links) == (2, 2)


def test_a_missing_linker_is_still_an_environment_failure(counts, program, tmp_path, monkeypatch,
                                                          capsys):
    assert build(tmp_path, *program)[0] == 0
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    code, _ = build(tmp_path, *program)
    assert code == cli.EXIT_ENVIRONMENT and "no-such-cc" in capsys.readouterr().err


def test_safe_mode_is_part_of_the_key(counts, tmp_path, capsys, monkeypatch):
    """A build cached without safe mode is not reused to slip past safe mode's refusal. The
    refusal of foreign code applies where the sandbox cannot start (compiler/policy.py), so the
    probe is replaced: with a sandbox the program would rightly build and run inside it."""
    from cancho_kernel.compiler.backends import sandbox
    src = tmp_path / "pid.cho"
    src.write_text(GETPID)
    assert build(tmp_path, src)[0] == 0
    monkeypatch.setattr(sandbox, "probe", lambda: sandbox.SandboxProbe(False, "no bwrap (test)"))
    code, _ = build(tmp_path, src, extra=("--safe",))
    assert code == cli.EXIT_REFUSED and "unsafe-in-safe-mode" in capsys.readouterr().err


def test_run_uses_the_cache_on_both_backends(counts, program, tmp_path):
    for backend in ("exe", "jit", "exe", "jit"):
        assert cli.main(["run", *map(str, program), "--backend", backend]) == 42
    assert (counts.checks, counts.links) == (1, 1)


def test_concurrent_builds_of_one_program_both_succeed(program, tmp_path):
    """Four `cancho build` processes of the same program race for the same entries."""
    repo = Path(__file__).resolve().parent.parent
    env = dict(os.environ, CANCHO_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=str(repo))
    env.pop("CANCHO_CACHE_SIZE", None)
    outs = [tmp_path / f"prog{n}" for n in range(4)]
    procs = [subprocess.Popen([sys.executable, "-m", "cancho_kernel.cli", "build", *map(str, program),
                               "-o", str(out)], env=env, stderr=subprocess.PIPE) for out in outs]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    assert [status(out) for out in outs] == [42] * 4
    assert len({out.read_bytes() for out in outs}) == 1
    assert sorted(n.rsplit(".", 1)[1] for n in entries(tmp_path)) == ["exe", "ir"]


# -- the store itself ----------------------------------------------------------------------------------


def test_the_size_bound_evicts_the_least_recently_used(tmp_path):
    store = BuildCache(tmp_path, max_bytes=3 * 1100)
    for i, key in enumerate(("a", "b", "c")):
        assert store.put(key, Artefact.IR, bytes(1000))
        os.utime(store.path_of(key, Artefact.IR), (1000 + i, 1000 + i))
    assert store.get("a", Artefact.IR) == bytes(1000)  # now the most recently used
    assert store.put("d", Artefact.IR, bytes(1000))
    assert store.get("b", Artefact.IR) is None
    assert all(store.get(k, Artefact.IR) is not None for k in ("a", "c", "d"))


def test_an_entry_larger_than_the_bound_is_not_kept(tmp_path):
    store = BuildCache(tmp_path, max_bytes=100)
    assert not store.put("big", Artefact.EXECUTABLE, bytes(200))
    assert store.get("big", Artefact.EXECUTABLE) is None


def test_the_size_comes_from_the_environment():
    assert cache.parse_max_bytes(None) == cache.DEFAULT_MAX_BYTES
    assert cache.parse_max_bytes("64M") == 64 << 20
    assert cache.parse_max_bytes("4096") == 4096
    assert cache.parse_max_bytes("lots") == cache.DEFAULT_MAX_BYTES


def test_the_default_directory_follows_xdg(monkeypatch, tmp_path):
    monkeypatch.delenv("CANCHO_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache.default_dir() == tmp_path / "cancho-kernel" / "builds"
    monkeypatch.setenv("CANCHO_CACHE_DIR", str(tmp_path / "mine"))
    assert cache.default_dir() == tmp_path / "mine"


def test_truncated_and_foreign_files_are_misses(tmp_path):
    store = BuildCache(tmp_path)
    store.put("k", Artefact.OBJECT, b"payload")
    path = store.path_of("k", Artefact.OBJECT)
    path.write_bytes(path.read_bytes()[:-3])
    assert store.get("k", Artefact.OBJECT) is None and not path.exists()
    path.write_bytes(b"not an entry")
    assert store.get("k", Artefact.OBJECT) is None


def test_concurrent_writers_never_show_half_an_entry(tmp_path):
    """Readers see a whole payload or none while writers replace the same entry."""
    store = BuildCache(tmp_path)
    payloads = [bytes([n]) * 200_000 for n in range(4)]
    seen: list[bytes | None] = []
    stop = threading.Event()

    def write(n: int) -> None:
        while not stop.is_set():
            store.put("same", Artefact.EXECUTABLE, payloads[n])

    def read() -> None:
        while not stop.is_set():
            seen.append(store.get("same", Artefact.EXECUTABLE))

    threads = [threading.Thread(target=write, args=(n,)) for n in range(3)]
    threads.append(threading.Thread(target=read))
    for t in threads:
        t.start()
    time.sleep(0.5)
    stop.set()
    for t in threads:
        t.join()
    whole = [s for s in seen if s is not None]
    assert whole and all(s in payloads for s in whole)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tmp-")]


# -- the kernel's exe backend -------------------------------------------------------------------------


def test_an_unchanged_exe_cell_reuses_its_build(counts, tmp_path):
    from cancho_kernel.kernel.runner import Runner, RunRequest

    def ir_of(util: str) -> str:
        return api.compile_sources([SourceFile("cell.cho", MAIN), SourceFile("util.cho", util)]).ir

    runner = Runner(cache=BuildCache(tmp_path / "kernel-cache"))
    try:
        first = runner.run_blocking(RunRequest(ir_of(UTIL), backend="exe"))
        again = runner.run_blocking(RunRequest(ir_of(UTIL), backend="exe"))
        edited = runner.run_blocking(RunRequest(ir_of(UTIL.replace("40", "41")), backend="exe"))
    finally:
        runner.close()
    assert (first.exit_status, again.exit_status, edited.exit_status) == (42, 42, 43)
    assert counts.links == 2


def test_a_kernel_reuses_an_unchanged_exe_cell(cancho_kernelspec, tmp_path):
    """Through a real kernel: the same exe cell twice links once; an edited cell links again.
    The linker is a wrapper that logs every link (not its `--version` answers)."""
    from jupyter_client.manager import start_new_kernel
    from kernel_client import HELLO, run

    log = tmp_path / "links"
    cc = tmp_path / "cc"
    cc.write_text(f'#!/bin/sh\n[ "$1" = --version ] || echo link >> {log}\nexec cc "$@"\n')
    cc.chmod(0o755)
    env = dict(os.environ, CANCHO_CACHE_DIR=str(tmp_path / "cache"), CC=str(cc))
    env.pop("CANCHO_CACHE_SIZE", None)
    km, kc = start_new_kernel(kernel_name=cancho_kernelspec, startup_timeout=60, env=env)
    try:
        for _ in range(2):
            cell = run((km, kc), "%%run --backend exe\n" + HELLO)
            assert cell.status == "ok" and cell.stream("stdout") == "hello, world\n", cell.outputs
        edited = run((km, kc), "%%run --backend exe\n" + HELLO.replace("hello, world", "hello, again"))
        assert edited.status == "ok" and edited.stream("stdout") == "hello, again\n"
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    assert log.read_text().split() == ["link", "link"]
