"""Files (edition 5), directory handles (6-7) and processes (7), judged from outside the program:
a tree built here (links, a FIFO, odd names, modes) and Python's own view of it (`os.lstat`,
`os.listdir`) are the oracle, and every program runs on both backends (the linked executable
and the MCJIT worker), which must agree byte for byte. Programs need nothing on the machine but
`/bin/sh` and `/bin/echo`.
"""

from __future__ import annotations

import os
import signal
import stat
from dataclasses import dataclass
from pathlib import Path

import pytest

from cancho_kernel.compiler import api
from cancho_kernel.compiler.backends import exe, process
from cancho_kernel.compiler.source import SourceFile

TRAP = 128 + signal.SIGILL
PRINT = """
fn put[&i](io: &!i Io, n: int) -> [io_write] int {
    if n < 0 {
        putchar(io, '-');
        return put(io, 0 - n);
    }
    if n >= 10 {
        put(io, n / 10);
    }
    return putchar(io, '0' + n % 10);
}

fn hex[&i, &t](io: &!i Io, text: &t [byte]) -> [io_write] int {
    var k = 0;
    while k < len(text) {
        let v = int_of(text[k]);
        putchar(io, int_of("0123456789abcdef"[v / 16]));
        putchar(io, int_of("0123456789abcdef"[v % 16]));
        k = k + 1;
    }
    return k;
}
"""
SPLIT7 = "let Split { io, ffi, fs, heap, args, net, clock, signals, exec } = split(world);"


@dataclass(frozen=True)
class Observed:
    stdout: bytes
    status: int | None


@pytest.fixture(scope="module")
def jit_worker():
    from cancho_kernel.compiler.backends import jit

    worker = jit.JitWorker()
    yield worker
    worker.close()


@pytest.fixture
def run(jit_worker, tmp_path):
    """Compile `source` and run it with `args` on both backends; they must agree."""

    def go(source: str, *args: str, setup=None) -> Observed:
        result = api.compile_sources([SourceFile("t.cho", source)])
        assert result.ok, "\n".join(d.render() for d in result.diagnostics)
        binary = tmp_path / f"p{abs(hash(source))}"
        if not binary.exists():
            exe.build_executable(result.ir, binary)
        argv = ["p", *args]
        limits = process.RunLimits(timeout=30)
        seen = []
        runners = (lambda: process.run_executable(binary, argv, b"", process.StdoutTarget.pipe(), limits),
                   lambda: jit_worker.run(result.ir, argv, b"", process.StdoutTarget.pipe(), limits))
        for runner in runners:
            if setup is not None:
                setup()
            r = runner()
            assert not r.timed_out
            status = r.exit_status if r.exit_status is not None else 128 + r.signal
            seen.append(Observed(r.stdout, status))
        assert seen[0] == seen[1], f"exe and jit disagree:\n  exe {seen[0]}\n  jit {seen[1]}"
        return seen[0]

    return go


def program(body: str, helpers: str = "", edition: int = 7) -> str:
    """A program whose `main` holds every capability of edition 7, with `dir_path` the first
    argument opened as a `Dir` (as `d`) under the root `Fs`, and `o` the console."""
    return f"""edition {edition};
import std.dirs;
{PRINT}
{helpers}
fn main(world: World) -> [] int {{
    {SPLIT7}
    release(ffi); release(net); release(clock); release(signals);
    var out = io;
    var memory = heap;
    var status = 0;
    borrow args as &a in {{
        borrow fs as &f in {{
            match open_dir(f, arg(a, 1)) {{
                DirOpened::Failed(e) => {{ status = 100 + e; }}
                DirOpened::Ok(opened) => {{
                    var dir = opened;
                    borrow dir as &d in {{
                        borrow mut out as &!o in {{
                            borrow mut memory as &!h in {{
                                borrow exec as &x in {{
                                    {body}
                                }}
                            }}
                        }}
                    }}
                    dir_close(dir);
                }}
            }}
        }}
    }}
    release(args); release(fs); release(exec); release(out); release(memory);
    return status;
}}
"""


def build_tree(base: Path) -> Path:
    """A hostile directory under `base` (made afresh): odd names, links in and out, a FIFO, a
    subdirectory two deep, and a file outside it that no write may reach."""
    import shutil

    root = base / "root"
    outside = base / "outside"
    for d in (root, outside):
        if d.exists():
            shutil.rmtree(d)
    for stray in base.glob("escaped*"):
        stray.unlink()
    outside.mkdir()
    (outside / "secret.txt").write_bytes(b"SECRET")
    root.mkdir()
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "f.txt").write_bytes(b"deep file")
    (root / "plain.txt").write_bytes(b"x" * 12)
    os.symlink("../outside/secret.txt", root / "link.txt")
    os.symlink("../outside", root / "dirlink")
    os.symlink("../outside/none", root / "dangling")
    os.mkfifo(root / "fifo")
    for name in (b"new\nline", b"caf\xe9", b"cafe", b"n" * 255):
        with open(os.path.join(os.fsencode(root), name), "wb") as f:
            f.write(b"")
    return root


@pytest.fixture
def tree(tmp_path) -> Path:
    return build_tree(tmp_path)


def kind_of(mode: int) -> int:
    if stat.S_ISREG(mode):
        return 1
    if stat.S_ISDIR(mode):
        return 2
    if stat.S_ISLNK(mode):
        return 3
    return 4


# ------------------------------------------------------------------------------ directories

LIST = """
let names = dirs.list(h, d, 1000);
borrow names as &n in {
    var k = 0;
    while k < dirs.count(n) {
        hex(o, dirs.name(n, k));
        putchar(o, ' ');
        put(o, dirs.kind(n, k));
        match dir_stat(d, dirs.name(n, k)) {
            DirStat::Ok(kind, size, mtime) => {
                putchar(o, ' '); put(o, kind); putchar(o, ' '); put(o, size); putchar(o, ' '); put(o, mtime);
            }
            DirStat::Failed(e) => { write_bytes(o, " failed "); put(o, e); }
        }
        putchar(o, 10);
        k = k + 1;
    }
    if dirs.truncated(n) { write_bytes(o, "truncated\\n"); }
}
dirs.drop(h, names);
"""


def test_a_hostile_directory_lists_sorted_with_lstat_kinds(run, tree):
    got = run(program(LIST), str(tree))
    assert got.status == 0
    names = sorted(os.listdir(os.fsencode(tree)))
    want = []
    for name in names:
        st = os.lstat(os.path.join(os.fsencode(tree), name))
        k = kind_of(st.st_mode)
        want.append(f"{name.hex()} {k} {k} {st.st_size} {int(st.st_mtime)}")
    assert got.stdout.decode().splitlines() == want


def test_a_listing_keeps_at_most_most_names_and_says_so(run, tree):
    got = run(program(LIST.replace("1000", "2")), str(tree))
    lines = got.stdout.decode().splitlines()
    assert len(lines) == 3 and lines[-1] == "truncated"


def test_dir_next_into_a_short_buffer_is_enametoolong_and_copies_nothing(run, tree):
    body = """
    match dir_list(d) {
        Listing::Failed(e) => { status = e; }
        Listing::Ok(l) => {
            var list = l;
            region r {
                let name = alloc_slice[r](3, byte_of(120));
                var going = true;
                while going {
                    borrow mut list as &!s in {
                        match dir_next(s, name) {
                            Listed::Name(n, kind) => { hex(o, name[0..n]); putchar(o, 10); }
                            Listed::End => { going = false; }
                            Listed::Failed(e) => { put(o, e); write_bytes(o, name); putchar(o, 10); }
                        }
                    }
                }
            }
            dir_list_close(list);
        }
    }
    """
    got = run(program(body), str(tree))
    lines = got.stdout.decode().splitlines()
    short = sorted(n.hex() for n in os.listdir(os.fsencode(tree)) if len(n) <= 3)
    assert sorted(x for x in lines if not x.startswith("36")) == short
    # Every longer name answers ENAMETOOLONG and copies nothing: the buffer holds only what
    # the one short name (`a`) put there, if it came first.
    failures = [x for x in lines if x.startswith("36")]
    assert len(failures) == sum(len(n) > 3 for n in os.listdir(os.fsencode(tree)))
    assert set(failures) <= {"36xxx", "36axx"}


WALK = """
fn show[&i](io: &!i Io, opened: Opened) -> [io_write, file_read] int {
    match opened {
        Opened::Ok(file) => {
            var h = file;
            region r {
                let buf = alloc_slice[r](64, byte_of(0));
                borrow mut h as &!x in {
                    match file_read(x, buf) {
                        Read::Got(n) => { write_bytes(io, buf[0..n]); }
                        Read::End => { write_bytes(io, "<empty>"); }
                        Read::Failed(e) => { write_bytes(io, "read failed "); put(io, e); }
                    }
                }
            }
            file_close(h);
        }
        Opened::Failed(e) => { write_bytes(io, "failed "); put(io, e); }
    }
    return putchar(io, 10);
}
"""


def test_the_walk_follows_no_link_and_refuses_what_is_not_a_component(run, tree):
    paths = ["a/b/f.txt", "link.txt", "dirlink/secret.txt", "../outside/secret.txt", "a/../plain.txt",
             "/a/b/f.txt", "a//b/f.txt", "a/b/", "./plain.txt", "missing", "a/missing/f.txt", "plain.txt"]
    body = "\n".join(f'show(o, dirs.open_file(d, "{p}"));' for p in paths)
    got = run(program(body, WALK), str(tree))
    assert got.stdout.decode().splitlines() == [
        "deep file", "failed 40", "failed 20", "failed 22", "failed 22", "failed 22", "failed 22",
        "failed 22", "failed 22", "failed 2", "failed 2", "xxxxxxxxxxxx"]


def test_enter_and_open_dir_of_a_file(run, tree):
    body = """
    match dirs.enter(d, "a/b") {
        DirOpened::Ok(sub) => {
            var inner = sub;
            borrow inner as &s in { show(o, dir_open_read(s, "f.txt")); }
            dir_close(inner);
        }
        DirOpened::Failed(e) => { put(o, e); putchar(o, 10); }
    }
    match dirs.enter(d, "dirlink") {
        DirOpened::Ok(sub) => { dir_close(sub); write_bytes(o, "entered a link\\n"); }
        DirOpened::Failed(e) => { put(o, e); putchar(o, 10); }
    }
    match open_dir(f, arg(a, 2)) {
        DirOpened::Ok(sub) => { dir_close(sub); write_bytes(o, "opened a file\\n"); }
        DirOpened::Failed(e) => { put(o, e); putchar(o, 10); }
    }
    """
    got = run(program(body, WALK), str(tree), str(tree / "plain.txt"))
    assert got.stdout.decode().splitlines() == ["deep file", "20", "20"]


def test_writes_beneath_a_dir_never_go_through_a_link(run, tree):
    outside = tree.parent / "outside" / "secret.txt"
    body = """
    fn_code(o, dir_open_new(d, "dangling"));
    fn_code(o, dir_open_new(d, "link.txt"));
    fn_code(o, dir_open_append(d, "link.txt"));
    fn_code(o, dir_open_new(d, "made.txt"));
    fn_code(o, dir_open_new(d, "made.txt"));
    done(o, dir_remove(d, "link.txt"));
    done(o, dir_remove(d, "link.txt"));
    done(o, dir_rename(d, "made.txt", "../escaped.txt"));
    done(o, dir_rename_new(d, "made.txt", "plain.txt"));
    done(o, dir_rename_new(d, "made.txt", "renamed.txt"));
    done(o, dir_mode(d, "renamed.txt"));
    done(o, dir_sync(d));
    """
    helpers = """
fn fn_code[&i](io: &!i Io, opened: Opened) -> [io_write] int {
    match opened {
        Opened::Ok(file) => { file_close(file); write_bytes(io, "ok"); }
        Opened::Failed(e) => { put(io, e); }
    }
    return putchar(io, 10);
}

fn done[&i](io: &!i Io, d: Done) -> [io_write] int {
    match d {
        Done::Ok(n) => { write_bytes(io, "ok "); put(io, n); }
        Done::Failed(e) => { put(io, e); }
    }
    return putchar(io, 10);
}
"""
    old_umask = os.umask(0o022)
    try:
        got = run(program(body, helpers), str(tree), setup=lambda: build_tree(tree.parent))
    finally:
        os.umask(old_umask)
    lines = got.stdout.decode().splitlines()
    assert lines == ["17", "17", "40", "ok", "17", "ok 0", "2", "22", "17", "ok 0", "ok 420", "ok 0"]
    assert outside.read_bytes() == b"SECRET"
    assert not (tree / "link.txt").exists() and not os.path.lexists(tree / "link.txt")
    assert (tree / "renamed.txt").exists() and not (tree.parent / "escaped.txt").exists()


def test_dir_mode_answers_the_permission_bits_of_the_name_itself(run, tree):
    modes = {"m600": 0o600, "m4755": 0o4755, "m000": 0o000, "m1777": 0o1777}
    for name, mode in modes.items():
        (tree / name).write_bytes(b"")
        os.chmod(tree / name, mode)
    body = "\n".join(f'match dir_mode(d, "{n}") {{ Done::Ok(b) => {{ put(o, b); }} Done::Failed(e) => {{ put(o, 0 - e); }} }} putchar(o, 10);'
                     for n in [*modes, "link.txt", "missing", "a/b"])
    got = run(program(body), str(tree))
    link_bits = stat.S_IMODE(os.lstat(tree / "link.txt").st_mode)
    assert got.stdout.decode().splitlines() == [str(m) for m in modes.values()] + [str(link_bits), "-2", "-22"]


# ------------------------------------------------------------------------------ files

def test_a_second_lock_on_the_same_file_is_refused(run, tree):
    body = """
    match open_rw(f, arg(a, 2)) {
        Opened::Failed(e) => { status = e; }
        Opened::Ok(one) => {
            match open_rw(f, arg(a, 2)) {
                Opened::Failed(e) => { status = e; file_close(one); }
                Opened::Ok(two) => {
                    var first = one;
                    var second = two;
                    borrow mut first as &!q in {
                        match file_lock(q) { Done::Ok(n) => { put(o, n); } Done::Failed(e) => { put(o, e); } }
                    }
                    putchar(o, ' ');
                    borrow mut second as &!y in {
                        match file_lock(y) { Done::Ok(n) => { put(o, n); } Done::Failed(e) => { put(o, e); } }
                    }
                    file_close(first);
                    file_close(second);
                }
            }
        }
    }
    """
    got = run(program(body), str(tree), str(tree / "plain.txt"))
    assert got.stdout == b"0 11"


def test_open_append_creates_with_the_fopen_mode_and_never_truncates(run, tree):
    target = tree / "appended.txt"
    target.write_bytes(b"kept|")
    body = """
    match open_append(f, arg(a, 2)) {
        Opened::Failed(e) => { status = e; }
        Opened::Ok(file) => {
            var h = file;
            borrow mut h as &!q in { file_write(q, "more"); }
            file_close(h);
        }
    }
    match open_write(f, arg(a, 3)) {
        Opened::Failed(e) => { status = e; }
        Opened::Ok(file) => { file_close(file); }
    }
    """
    fresh = tree / "fresh.txt"
    old_umask = os.umask(0o022)
    try:
        got = run(program(body), str(tree), str(target), str(fresh))
    finally:
        os.umask(old_umask)
    assert got.status == 0
    assert target.read_bytes() == b"kept|moremore"
    assert stat.S_IMODE(os.stat(fresh).st_mode) == 0o644


# ------------------------------------------------------------------------------ processes

FDS = """
fn listing[&x, &i](exec: &x Exec(""), io: &!i Io) -> [exec(""), io_write, pipe_read] int {
    match pipe_open() {
        Piped::Failed(e) => { return e; }
        Piped::Ok(mine, theirs) => {
            match exec_spawn(exec, "/bin/sh", "-c\\0for f in /proc/self/fd/*; do echo $f; done; export -p\\0", "",
                             Stdio::Null, Stdio::Pipe(theirs), Stdio::Null) {
                Spawned::Failed(e) => { pipe_close(mine); return e; }
                Spawned::Ok(child) => {
                    var r = mine;
                    region z {
                        let buf = alloc_slice[z](256, byte_of(0));
                        var going = true;
                        while going {
                            borrow mut r as &!p in {
                                match pipe_read(p, buf) {
                                    Received::Data(n) => { write_bytes(io, buf[0..n]); }
                                    Received::End => { going = false; }
                                    Received::Again => { }
                                    Received::Failed(e) => { going = false; }
                                }
                            }
                        }
                    }
                    pipe_close(r);
                    child_wait(child);
                    return 0;
                }
            }
        }
    }
}
"""


def test_a_child_inherits_no_descriptor_and_no_environment(run, tree):
    bare = run(program("listing(x, o);", FDS), str(tree))
    holding = """
    match open_read(f, arg(a, 2)) {
        Opened::Failed(e) => { status = e; }
        Opened::Ok(file) => {
            match dir_list(d) {
                Listing::Failed(e) => { file_close(file); status = e; }
                Listing::Ok(l) => {
                    match pipe_open() {
                        Piped::Failed(e) => { }
                        Piped::Ok(p, q) => {
                            listing(x, o);
                            pipe_close(p);
                            child_end_close(q);
                        }
                    }
                    dir_list_close(l);
                    file_close(file);
                }
            }
        }
    }
    """
    held = run(program(holding, FDS), str(tree), str(tree / "plain.txt"))
    lines = bare.stdout.decode().splitlines()
    assert lines[:3] == ["/proc/self/fd/0", "/proc/self/fd/1", "/proc/self/fd/2"]
    # Nothing but the shell's own descriptors and the one it lists /proc/self/fd with.
    assert held.stdout == bare.stdout
    assert [x for x in lines if x.startswith("export")] in ([], ["export PWD='" + os.getcwd() + "'"])


def test_writing_to_a_child_that_has_gone_is_epipe_and_no_signal(run, tree):
    body = """
    match pipe_open() {
        Piped::Failed(e) => { status = e; }
        Piped::Ok(mine, theirs) => {
            var w = mine;
            match exec_spawn(x, "/bin/sh", "-c\\0exit 0\\0", "", Stdio::Pipe(theirs), Stdio::Null, Stdio::Null) {
                Spawned::Failed(e) => { status = e; }
                Spawned::Ok(child) => {
                    child_wait(child);
                    borrow mut w as &!p in {
                        match pipe_write(p, "late") {
                            Sent::Wrote(n) => { write_bytes(o, "wrote"); }
                            Sent::Again => { write_bytes(o, "again"); }
                            Sent::Failed(e) => { put(o, e); }
                        }
                    }
                    write_bytes(o, " alive");
                }
            }
            pipe_close(w);
        }
    }
    """
    got = run(program(body), str(tree))
    assert got.stdout == b"32 alive" and got.status == 0


def test_exit_codes_and_signals_are_reported_in_std_signals_bits(run, tree):
    body = """
    match exec_spawn(x, "/bin/sh", "-c\\0kill -TERM $$\\0", "", Stdio::Null, Stdio::Null, Stdio::Null) {
        Spawned::Failed(e) => { status = e; }
        Spawned::Ok(child) => {
            match child_wait(child) {
                Exited::Code(n) => { write_bytes(o, "code "); put(o, n); }
                Exited::Signaled(s) => { write_bytes(o, "signaled "); put(o, s); }
                Exited::Failed(e) => { write_bytes(o, "failed "); put(o, e); }
            }
        }
    }
    match exec_spawn(x, "/bin/sh", "-c\\0exit 255\\0", "", Stdio::Null, Stdio::Null, Stdio::Null) {
        Spawned::Failed(e) => { status = e; }
        Spawned::Ok(child) => {
            match child_wait(child) {
                Exited::Code(n) => { write_bytes(o, " code "); put(o, n); }
                Exited::Signaled(s) => { write_bytes(o, " signaled "); put(o, s); }
                Exited::Failed(e) => { write_bytes(o, " failed "); put(o, e); }
            }
        }
    }
    match exec_spawn(x, "/bin/sh", "-c\\0exit 0\\0", "", Stdio::Null, Stdio::Null, Stdio::Null) {
        Spawned::Failed(e) => { status = e; }
        Spawned::Ok(child) => {
            var c = child;
            borrow c as &k in { write_bytes(o, " stop "); put(o, child_kill(k, 512)); }
            child_wait(c);
        }
    }
    """
    got = run(program(body), str(tree))
    assert got.stdout == b"signaled 8 code 255 stop 22"


def test_the_exec_prefix_traps_outside_and_allows_exactly_the_prefix(run, tree):
    source = """edition 7;
fn main(world: World) -> [] int {
    let Split { io, ffi, fs, heap, args, net, clock, signals, exec } = split(world);
    release(io); release(ffi); release(fs); release(heap); release(net); release(clock); release(signals);
    let shell = narrow(exec, "/bin/sh");
    var status = 100;
    borrow args as &a in {
        borrow shell as &x in {
            match exec_spawn(x, arg(a, 1), "-c\\0exit 7\\0", "", Stdio::Null, Stdio::Null, Stdio::Null) {
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
    }
    release(args);
    release(shell);
    return status;
}
"""
    assert run(source, "/bin/sh").status == 7
    for outside in ("/bin/echo", "/bin/shx", "/bin/sh/../echo", "/bin"):
        assert run(source, outside).status == TRAP, outside


def test_reading_a_pipe_into_an_empty_buffer_is_einval_without_waiting(run, tree):
    body = """
    match pipe_open() {
        Piped::Failed(e) => { status = e; }
        Piped::Ok(mine, theirs) => {
            var r = mine;
            region z {
                let none = alloc_slice[z](0, byte_of(0));
                borrow mut r as &!p in {
                    match pipe_read(p, none) {
                        Received::Data(n) => { write_bytes(o, "data"); }
                        Received::End => { write_bytes(o, "end"); }
                        Received::Again => { write_bytes(o, "again"); }
                        Received::Failed(e) => { put(o, e); }
                    }
                }
            }
            pipe_close(r);
            child_end_close(theirs);
        }
    }
    """
    assert run(program(body), str(tree)).stdout == b"22"


def test_a_childs_output_can_go_to_a_file_the_parent_opened(run, tree):
    target = tree / "captured.txt"
    body = """
    match open_write(f, arg(a, 2)) {
        Opened::Failed(e) => { status = e; }
        Opened::Ok(file) => {
            match exec_spawn(x, "/bin/echo", "to\\0a file\\0", "", Stdio::Null, Stdio::File(file), Stdio::Null) {
                Spawned::Failed(e) => { status = e; }
                Spawned::Ok(child) => {
                    match child_wait(child) {
                        Exited::Code(n) => { status = n; }
                        Exited::Signaled(s) => { status = 200; }
                        Exited::Failed(e) => { status = 201; }
                    }
                }
            }
        }
    }
    """
    got = run(program(body), str(tree), str(target), setup=lambda: target.unlink(missing_ok=True))
    assert got.status == 0
    assert target.read_bytes() == b"to a file\n"
