"""Issue 22, findings 1 (`%%file`) and 5: a directive's path is checked and opened in one step.

`%load`, `%%file`, `--stdin-file` and `%%run --stdout file:PATH` used to resolve a path, check it
was inside the notebook's directory, then open it again by name: a symlink swapped in between
made the (unconfined) kernel overwrite and read another student's files. Each test plants what a
hostile student would — a symlink to an outside file as the target, a symlink as an intermediate
directory, `..`, an absolute path, and a thread flipping a name between a regular file and a
symlink while 200 cells run — and checks the outside file was neither written nor read (its bytes
and its mode unchanged, its secret never in any output), not only that a refusal was printed.
Both ways of opening are tested: `openat2` and the component walk used where it is missing.
"""

from __future__ import annotations

import os
import stat
import threading
import time
from pathlib import Path

import pytest

from cancho_kernel.kernel import beneath, directives
from cancho_kernel.kernel import presentation as P
from cancho_kernel.kernel.options import Settings
from cancho_kernel.kernel.runner import Runner
from cancho_kernel.kernel.session import Session

SECRET = "alice-secret-7f3a"
CAT = """fn main(world: World) -> [] int {
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
HELLO = CAT.replace("var c = getchar(i);\n        while c >= 0 { putchar(i, c); c = getchar(i); }",
                    'write_bytes(i, "hello\\n");')


class Ctx:
    """A cell's context as the kernel builds it, keeping what would be published."""

    def __init__(self, session: Session, settings: Settings, runner) -> None:
        self.session, self.settings, self.runner = session, settings, runner
        self.failed = False
        self.failure: P.Failure | None = None
        self.texts: list[str] = []

    def stream(self, name: str, text: str) -> None:
        self.texts.append(text)

    def display(self, data: dict, metadata: dict | None = None, display_id: str | None = None) -> None:
        self.texts.append(data.get("text/plain", ""))

    def update(self, data: dict, metadata: dict | None = None, *, display_id: str) -> None:
        self.display(data)

    def result(self, data: dict, metadata: dict | None = None) -> None:
        self.display(data)

    def fail(self, failure: P.Failure) -> None:
        self.failed, self.failure = True, failure
        self.texts.append(failure.evalue)

    def page(self, text: str) -> None:
        self.texts.append(text)

    def clear(self) -> None:
        pass


@pytest.fixture(scope="module")
def runner():
    r = Runner()
    try:
        yield r
    finally:
        r.close()


@pytest.fixture
def place(tmp_path):
    """(notebook directory, an outside file holding the secret, mode 0600)."""
    root = tmp_path / "notebook"
    (root / "sub").mkdir(parents=True)
    outside = tmp_path / "alice" / "homework.txt"
    outside.parent.mkdir()
    outside.write_text(SECRET)
    outside.chmod(0o600)
    return root.resolve(), outside


def cell(root: Path, runner, code: str, safe: bool = True) -> Ctx:
    ctx = Ctx(Session(), Settings(safe=safe, root=root), runner)
    directives.execute(ctx, code, "cell[1]")
    return ctx


def untouched(outside: Path, *ctxs: Ctx) -> None:
    assert outside.read_text() == SECRET
    assert stat.S_IMODE(outside.stat().st_mode) == 0o600 and not outside.is_symlink()
    for ctx in ctxs:
        assert not any(SECRET in t for t in ctx.texts), ctx.texts


def attempts(name: str) -> list[str]:
    """Every directive that takes a path, each aimed at ``name``."""
    return [f"%load {name}", f"%%file {name}\nfn planted() -> [] int {{ return 1; }}\n",
            f"%%run --stdin-file {name}\n" + CAT, f"%%run --stdout file:{name}\n" + HELLO,
            f"%%bench --runs 1 --warmup 0 --stdout file:{name}\n" + HELLO]


# -- the opening itself, both ways ---------------------------------------------------------------


@pytest.mark.parametrize("walk", [False, True], ids=["openat2", "walk"])
def test_open_beneath_refuses_links_dotdot_and_absolute(place, walk):
    root, outside = place
    if not walk and not beneath.has_openat2():
        pytest.skip("this Linux has no openat2 (the walk is what runs here)")
    (root / "link").symlink_to(outside)
    (root / "up").symlink_to(outside.parent)
    (root / "mine.txt").write_text("mine")
    base = beneath.directory(str(root))
    for rel, reason in (("link", beneath.Refusal.LINK), ("up/homework.txt", beneath.Refusal.LINK),
                        ("../alice/homework.txt", beneath.Refusal.LEAVES),
                        ("sub/../../alice/homework.txt", beneath.Refusal.LEAVES),
                        (str(outside), beneath.Refusal.LEAVES)):
        with pytest.raises(beneath.PathRefused) as e:
            os.close(beneath.open_beneath(base, rel, os.O_RDONLY, walk=walk))
        assert e.value.reason is reason, rel
        with pytest.raises(beneath.PathRefused):  # nor created or truncated through it
            os.close(beneath.open_beneath(base, rel, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, walk=walk))
    untouched(outside)
    fd = beneath.open_beneath(base, "mine.txt", os.O_RDONLY, walk=walk)
    try:
        assert os.read(fd, 10) == b"mine"
        assert fcntl_cloexec(fd)
    finally:
        os.close(fd)


def fcntl_cloexec(fd: int) -> bool:
    import fcntl
    return bool(fcntl.fcntl(fd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC)


# -- through the directives, in safe mode --------------------------------------------------------


@pytest.mark.parametrize("kind", ["target", "intermediate", "dotdot", "absolute"])
def test_every_directive_refuses_a_planted_way_out(place, runner, kind):
    root, outside = place
    if kind == "target":
        (root / "x.cho").symlink_to(outside)
        name = "x.cho"
    elif kind == "intermediate":
        (root / "d").symlink_to(outside.parent)
        name = "d/homework.txt"
    elif kind == "dotdot":
        name = "../alice/homework.txt"
    else:
        name = str(outside)
    ctxs = [cell(root, runner, code) for code in attempts(name)]
    for ctx in ctxs:
        assert ctx.failed and ctx.failure.ename == "directive-error", ctx.texts
        assert "refused in safe mode" in ctx.failure.evalue, ctx.failure.evalue
    untouched(outside, *ctxs)


def test_inside_the_directory_every_directive_works(place, runner):
    root, _ = place
    (root / "sub" / "in.txt").write_text("abc")
    assert not cell(root, runner, "%%file lib.cho\nfn seven() -> [] int { return 7; }").failed
    loaded = cell(root, runner, "%load lib.cho")
    assert not loaded.failed, loaded.texts
    echoed = cell(root, runner, "%%run --stdin-file sub/in.txt\n" + CAT)
    assert not echoed.failed and echoed.texts[0] == "abc", echoed.texts
    to_file = cell(root, runner, f"%%run --stdout file:{root}/sub/out.txt\n" + HELLO)
    assert not to_file.failed, to_file.texts
    assert (root / "sub" / "out.txt").read_text() == "hello\n"
    assert "5 bytes" not in to_file.texts[-1] and "6 bytes" in to_file.texts[-1]


@pytest.mark.parametrize("walk", [False, True], ids=["openat2", "walk"])
def test_a_race_flipping_a_name_never_reaches_the_outside_file(place, runner, monkeypatch, walk):
    """A thread flips `flip.cho` between a regular file and a symlink to the outside file as fast
    as it can while 200 cells aim every directive at it: whatever each cell saw, the outside file
    keeps its bytes and mode and its secret never appears in any output. Run with openat2 and
    with the walk a Linux without it uses."""
    root, outside = place
    if walk:
        monkeypatch.setattr(beneath, "has_openat2", lambda: False)
    elif not beneath.has_openat2():
        pytest.skip("this Linux has no openat2 (the walk is what runs here)")
    name = root / "flip.cho"
    stop = threading.Event()

    def flipper() -> None:
        tmp_link, tmp_file = root / ".l", root / ".f"
        while not stop.is_set():
            tmp_link.symlink_to(outside)  # while `name` is a file
            tmp_file.write_text("fn mine() -> [] int { return 2; }\n")
            os.replace(tmp_link, name)
            time.sleep(0)  # let a cell run against each state
            os.replace(tmp_file, name)
            time.sleep(0)

    thread = threading.Thread(target=flipper, daemon=True)
    thread.start()
    codes = attempts("flip.cho")
    ctxs = []
    try:
        for i in range(200):
            ctxs.append(cell(root, runner, codes[i % len(codes)]))
    finally:
        stop.set()
        thread.join(5)
    untouched(outside, *ctxs)
    # The race was real: some cells were refused (link seen), some went through (file seen).
    assert any(c.failed for c in ctxs) and any(not c.failed for c in ctxs)


# -- outside safe mode: any path, as before --------------------------------------------------------


def test_outside_safe_mode_any_path_still_works(place, runner, tmp_path):
    root, outside = place
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "link.txt").symlink_to(outside)  # a link there when the cell runs is followed
    echoed = cell(root, runner, f"%%run --stdin-file {elsewhere / 'link.txt'}\n" + CAT, safe=False)
    assert not echoed.failed and echoed.texts[0] == SECRET, echoed.texts
    wrote = cell(root, runner, f"%%file {elsewhere / 'gpu.c'}\nint main(void) {{ return 0; }}", safe=False)
    assert not wrote.failed and (elsewhere / "gpu.c").read_text().startswith("int main")
    to_file = cell(root, runner, f"%%run --stdout file:{elsewhere / 'out.txt'}\n" + HELLO, safe=False)
    assert not to_file.failed and (elsewhere / "out.txt").read_text() == "hello\n"


# -- %%file: NAME.cho only, mode 0644 ---------------------------------------------------------------


@pytest.mark.parametrize("name", [".cache/cancho-kernel/measure-x", "../x.cho", "sub/x.cho", ".x.cho", "x.sh",
                                  "x.cho/", "cancho_kernel.py", "x.cho.py", ".cho", "-x.cho"])
def test_file_writes_only_plain_cho_names(place, runner, name):
    root, _ = place
    (root / ".cache" / "cancho-kernel").mkdir(parents=True)
    before = sorted(p.relative_to(root) for p in root.rglob("*"))
    ctx = cell(root, runner, f"%%file {name}\nfn planted() -> [] int {{ return 1; }}\n")
    assert ctx.failed and "refused in safe mode" in ctx.failure.evalue, ctx.texts
    assert sorted(p.relative_to(root) for p in root.rglob("*")) == before
    assert not (root.parent / "x.cho").exists()


def test_file_replaces_an_executable_with_a_0644_file(place, runner):
    root, _ = place
    target = root / "run.cho"
    target.write_text("old")
    target.chmod(0o755)
    old_umask = os.umask(0)
    try:
        ctx = cell(root, runner, "%%file run.cho\nfn f() -> [] int { return 1; }")
    finally:
        os.umask(old_umask)
    assert not ctx.failed and "overwrote" in ctx.texts[0], ctx.texts
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert target.read_text() == "fn f() -> [] int { return 1; }\n"
    assert [p.name for p in root.iterdir() if p.name.startswith(".")] == []  # no temp file left


def test_a_bench_writes_its_file_through_the_same_open(place, runner):
    """`%%bench --stdout file:` ran every round on a path opened again by name: a link planted
    there is refused, and inside the directory the file holds one run's output (each run
    starts it afresh, as before)."""
    root, outside = place
    (root / "b.txt").symlink_to(outside)
    planted = cell(root, runner, "%%bench --runs 2 --warmup 0 --stdout file:b.txt\n" + HELLO)
    assert planted.failed and "refused in safe mode" in planted.failure.evalue, planted.texts
    untouched(outside, planted)
    fine = cell(root, runner, "%%bench --runs 3 --warmup 1 --stdout file:sub/b.txt\n" + HELLO)
    assert not fine.failed, fine.texts
    assert (root / "sub" / "b.txt").read_text() == "hello\n"
