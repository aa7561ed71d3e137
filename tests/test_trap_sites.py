"""Located traps (issue 25 item 3): a trap says which check fired and where, on both backends,
while the program's own output, status and signal stay exactly what they were.

`run` takes a value known only at run time (the argument count): a pure call on constants is
evaluated while compiling, and a certain trap there is refused (`constant-traps`) before it could
be located. Each trap site has its own trap instruction holding its number (compiler/trapsites.py); the
supervisor reads the number at the faulting address (backends/trapreport.py) and the compiler's
side table names the site. Before this, a trap was one shared `ud2` per function and every run
said only `killed by signal 4 (SIGILL)`: each test here failed (no `trap_site`, no table).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from cancho_kernel.compiler import api
from cancho_kernel.compiler.backends.jit import JitWorker
from cancho_kernel.compiler.backends.process import StdoutTarget
from cancho_kernel.compiler.run import RunRequest
from cancho_kernel.compiler.source import SourceFile
from cancho_kernel.compiler.trapsites import TrapKind, TrapTable, site_number, split_trap_trailer, with_trap_trailer

ROOT = Path(__file__).resolve().parents[1]

MAIN = """
fn main(world: World) -> [] int {
    let Split { io, ffi, fs, heap, args } = split(world);
    release(io);
    release(ffi);
    release(fs);
    release(heap);
    var seed = 0;
    borrow args as &a in {
        seed = arg_count(a);
    }
    release(args);
    return run(seed);
}
"""


@dataclass(frozen=True)
class Case:
    """One check: the body of `run`, the line and the characters the caret must point at."""

    name: str
    kind: TrapKind
    body: str
    line: str     # the source line of the site, stripped
    at: str       # the text the caret starts at, within that line
    words: str    # what the headline must say
    imports: str = ""


def case(name, kind, body, line, at, words, imports=""):
    return Case(name, kind, body, line, at, words, imports)


CASES = [
    case("add", TrapKind.OVERFLOW, "let x = 9223372036854775807;\nreturn x + 1;",
         "return x + 1;", "+ 1", "integer overflow in `+`"),
    case("mul", TrapKind.OVERFLOW, "let x = 9223372036854775807;\nlet y = 2;\nreturn x * y;",
         "return x * y;", "* y", "integer overflow in `*`"),
    case("negation", TrapKind.NEGATION, "let m = -9223372036854775807 - 1;\nreturn -m;",
         "return -m;", "-m", "integer overflow in unary `-`"),
    case("division", TrapKind.DIVISION, "let z = 0;\nreturn 7 / z;",
         "return 7 / z;", "/ z", "division by zero or overflow in `/`"),
    case("min-by-minus-one", TrapKind.OVERFLOW, "let m = -9223372036854775807 - 1;\nlet d = -1;\nreturn m / d;",
         "return m / d;", "/ d", "integer overflow in `/`"),
    case("remainder", TrapKind.REMAINDER, "let z = 0;\nreturn 7 % z;",
         "return 7 % z;", "% z", "remainder by zero in `%`"),
    case("shift", TrapKind.SHIFT, "let s = 64;\nreturn 1 << s;",
         "return 1 << s;", "<< s", "shift amount outside 0..63 in `<<`"),
    case("index", TrapKind.INDEX, 'let s = "abc";\nlet i = 7;\nreturn int_of(s[i]);',
         "return int_of(s[i]);", "s[i]", "index out of bounds"),
    case("slice", TrapKind.SLICE, 'let s = "abc";\nlet lo = 2;\nlet hi = 1;\nlet t = s[lo..hi];\nreturn len(t);',
         "let t = s[lo..hi];", "s[lo..hi]", "slice bounds out of range"),
    case("byte_of", TrapKind.BYTE_OF, "let n = 256;\nreturn int_of(byte_of(n));",
         "return int_of(byte_of(n));", "byte_of(n)", "`byte_of` of a value outside 0..255"),
    case("truncate", TrapKind.CONVERSION, "let f = float_of(9223372036854775807);\nreturn truncate(f);",
         "return truncate(f);", "truncate(f)", "`truncate` of NaN"),
    case("arena", TrapKind.ARENA,
         "var n = 0;\nregion a {\n    while n < 100 {\n        let s = alloc_slice[a](1000, 0);\n"
         "        n = n + 1 + len(s) - len(s);\n    }\n}\nreturn n;",
         "let s = alloc_slice[a](1000, 0);", "alloc_slice", "arena exhausted"),
    case("allocation", TrapKind.ALLOCATION,
         "var n = -1;\nregion a {\n    let s = alloc_slice[a](n, 0);\n    n = len(s);\n}\nreturn n;",
         "let s = alloc_slice[a](n, 0);", "alloc_slice", "allocation failed in `alloc_slice`"),
    case("trap", TrapKind.EXPLICIT, "let x = 1;\nreturn x + trap();",
         "return x + trap();", "trap()", "`trap()` called"),
    case("std", TrapKind.SLICE,
         "region a {\n    let buf = alloc_slice[a](2, byte_of(0));\n    bytes.store_le32(buf, 0, 1);\n}\nreturn 0;",
         "let out = dst[at..at + 4];", "dst[", "slice bounds out of range", "import std.bytes;\n"),
]


def source_of(c: Case) -> str:
    body = "\n".join("    " + ln for ln in c.body.split("\n"))
    return f"{c.imports}\nfn run(seed: int) -> [] int {{\n{body}\n}}\n{MAIN}"


@pytest.fixture(scope="module")
def worker():
    w = JitWorker()
    yield w
    w.close()


def compiled(c: Case, path: str = "prog.cho"):
    res = api.compile_sources([SourceFile(path, source_of(c))])
    assert res.ok, res.diagnostics
    return res


def expected_place(c: Case, path: str) -> tuple[str, int, int]:
    """(path, line, column) where the site must be reported."""
    if c.name == "std":
        std = ROOT / "cancho_kernel" / "std" / "bytes.cho"
        lines = std.read_text().split("\n")
        n = next(i for i, ln in enumerate(lines, 1) if ln.strip() == c.line)
        return "<std>/bytes.cho", n, lines[n - 1].index(c.at) + 1
    lines = source_of(c).split("\n")
    n = next(i for i, ln in enumerate(lines, 1) if ln.strip() == c.line)
    return path, n, lines[n - 1].index(c.at) + 1


@pytest.mark.parametrize("backend", ["jit", "exe"])
@pytest.mark.parametrize("c", CASES, ids=[c.name for c in CASES])
def test_each_kind_is_located_on_both_backends(c, backend, worker):
    res = compiled(c)
    run = api.run(RunRequest(res.ir, backend=backend, target=StdoutTarget.pipe()),
                  worker=worker if backend == "jit" else None)
    assert run.signal == signal.SIGILL and run.exit_status is None, run.describe()
    assert run.stdout == b"" and run.stderr == b""
    site = res.traps.get(run.trap_site)
    assert site is not None, f"site {run.trap_site} not in the table ({len(res.traps)} sites)"
    path, line, column = expected_place(c, "prog.cho")
    assert (site.kind, site.path, site.line, site.column) == (c.kind, path, line, column), site
    assert site.headline.startswith(f"trap: {c.words}")
    assert site.headline.endswith(f" at {path}:{line}:{column}")
    assert site.text.strip() == c.line
    caret = site.render().split("\n")[-1]
    assert caret.index("^") - caret.index("|") - 2 == column - 1


def test_every_site_has_its_own_number():
    """No two checks share a trap (so optimisation cannot merge them and move a trap)."""
    res = compiled(CASES[-1])  # std.bytes: dozens of sites
    numbers = re.findall(r'asm sideeffect "\{disp32\} ud1l (-?\d+)\(%rax\), %eax"', res.ir)
    assert len(numbers) == len(set(numbers)) == len(res.traps) > 10


def test_output_status_and_stderr_are_unchanged_by_the_handler(worker):
    """What the program wrote before the trap, and how it ended, are exactly as without the
    handler: the same bytes, SIGILL, the core-dump bit as the kernel set it."""
    src = ("fn run() -> [] int {\n    return trap();\n}\n"
           "fn main(world: World) -> [] int {\n    let Split { io, ffi, fs, heap, args } = split(world);\n"
           "    release(ffi);\n    release(fs);\n    release(heap);\n    release(args);\n"
           "    borrow mut io as &!i in {\n        write_bytes(i, \"lost\\n\");\n"
           "        write_err(i, \"before\\n\");\n    }\n"
           "    release(io);\n    return run();\n}\n")
    res = api.compile_sources([SourceFile("p.cho", src)])
    assert res.ok, res.diagnostics
    for backend in ("jit", "exe"):
        run = api.run(RunRequest(res.ir, backend=backend, target=StdoutTarget.pipe()),
                      worker=worker if backend == "jit" else None)
        # stdout's buffer is lost by the trap, as ever; stderr is unbuffered.
        assert (run.stdout, run.stderr, run.signal) == (b"", b"before\n", signal.SIGILL)
        assert res.traps.get(run.trap_site).kind is TrapKind.EXPLICIT


def test_a_plain_executable_traps_as_before(tmp_path):
    """Run without the launcher (no CANCHO_TRAP_FD), the linked reporter does nothing: SIGILL."""
    from cancho_kernel.compiler.backends import exe

    res = compiled(CASES[0])
    path = tmp_path / "prog"
    exe.build_executable(res.ir, path)
    done = subprocess.run([str(path)], capture_output=True, timeout=30)
    assert done.returncode == -signal.SIGILL and done.stdout == done.stderr == b""
    # A descriptor number that is not open is ignored, as is a malformed one.
    for value in ("999", "x", "1"):
        env = {**os.environ, "CANCHO_TRAP_FD": value}
        done = subprocess.run([str(path)], capture_output=True, timeout=30, env=env)
        assert done.returncode == -signal.SIGILL and done.stderr == b""


def test_a_sigill_sent_by_kill_is_no_site(tmp_path):
    """A SIGILL from kill(2) carries no faulting address: nothing is reported, never a guess."""
    src = ("fn run(seed: int) -> [] int {\n    var n = 0;\n    while true {\n        n = n + 0;\n    }\n    return n;\n}\n" + MAIN)
    res = api.compile_sources([SourceFile("p.cho", src)])
    assert res.ok
    from cancho_kernel.compiler.backends import exe, measure

    path = tmp_path / "loop"
    exe.build_executable(res.ir, path)
    r, w = os.pipe()
    os.set_inheritable(w, True)
    argv = measure.launcher_argv(measure.launcher(), str(path), [str(path)], parent=None, own_group=True)
    exec_with_report_on_3 = "import os, sys; os.dup2(int(sys.argv[1]), 3); os.execv(sys.argv[2], sys.argv[2:])"
    proc = subprocess.Popen([sys.executable, "-c", exec_with_report_on_3, str(w), *argv], pass_fds=(w,),
                            stdout=subprocess.DEVNULL)
    os.close(w)
    from cancho_kernel.compiler.backends.process import children_of

    try:
        for _ in range(600):  # the program is the launcher's child once it is exec'd
            kids = [k for k in children_of(proc.pid) if _exe_of(k) == str(path)]
            if kids:
                break
            time.sleep(0.05)
        assert kids, "the program did not start"
        os.kill(kids[0], signal.SIGILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    line = os.read(r, 256).decode()
    os.close(r)
    assert measure.parse_trap(line) is None and int(line.split()[0]) & 0x7F == signal.SIGILL


def _exe_of(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return ""


def test_table_survives_the_cli_cache_trailer():
    res = compiled(CASES[0])
    ir, table = split_trap_trailer(with_trap_trailer(res.ir, res.traps))
    assert ir == res.ir and table.sites() == res.traps.sites()
    plain, none = split_trap_trailer(res.ir)  # IR kept before trap tables: no sites
    assert plain == res.ir and len(none) == 0


def test_a_colliding_number_is_no_site():
    from cancho_kernel.compiler.trapsites import TrapSite

    a = TrapSite(TrapKind.INDEX, "", "a.cho", 1, 1, 1, "x")
    b = TrapSite(TrapKind.SLICE, "", "a.cho", 2, 1, 1, "y")
    t = TrapTable()
    t.add(5, a)
    t.add(5, b)
    t.add(5, a)
    assert t.get(5) is None
    assert site_number("lexs_main", 0) != site_number("lexs_main", 1)


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "cancho_kernel.cli", *args], capture_output=True,
                          text=True, timeout=120, cwd=cwd, env=env)


@pytest.mark.parametrize("backend", ["jit", "exe"])
def test_cancho_run_shows_the_site(tmp_path, backend):
    c = CASES[0]
    (tmp_path / "ov.cho").write_text(source_of(c))
    done = _cli("run", "--backend", backend, "ov.cho", cwd=tmp_path)
    _, line, column = expected_place(c, "ov.cho")
    assert done.returncode == 3 and done.stdout == ""
    assert done.stderr.split("\n") == [
        f"trap: integer overflow in `+` at ov.cho:{line}:{column}", "  |",
        f"{line} |     return x + 1;", f"  | {' ' * (column - 1)}^",
        "cancho: the program was killed by signal 4 (SIGILL)", ""]


def test_cancho_run_safe_mode_shows_the_site(tmp_path):
    c = CASES[7]  # index
    (tmp_path / "ix.cho").write_text(source_of(c))
    done = _cli("run", "--safe", "ix.cho", cwd=tmp_path)
    assert done.returncode == 3
    assert "trap: index out of bounds at ix.cho:" in done.stderr, done.stderr
    assert done.stderr.rstrip().endswith("cancho: the program was killed by signal 4 (SIGILL)")


@pytest.mark.parametrize("backend", ["jit", "exe"])
def test_cancho_test_shows_the_site(tmp_path, backend):
    (tmp_path / "test_t.cho").write_text(
        "fn test_ok() -> [] int {\n    return 0;\n}\n\n"
        "fn test_div() -> [] int {\n    let z = 0;\n    return 1 / z;\n}\n")
    done = _cli("test", "--backend", backend, "test_t.cho", cwd=tmp_path)
    assert done.returncode == 4
    assert ("trap: division by zero or overflow in `/` at test_t.cho:7:14\n  |\n"
            "7 |     return 1 / z;\n  |              ^\n") in done.stdout, done.stdout


def test_wasm_traps_are_located(tmp_path):
    """On `--target wasm32-wasip1` each site's trap is a function of its own (`cancho.trap.N`),
    whose name the runtime's backtrace gives; the runner's own line and status are unchanged."""
    from cancho_kernel.compiler.backends import wasm

    if not wasm.runtime_available():
        pytest.skip("no WASI runtime (wasmtime) here")
    for c in (CASES[0], CASES[-1]):
        (tmp_path / "w.cho").write_text(source_of(c))
        done = _cli("run", "--target", "wasm32-wasip1", "w.cho", cwd=tmp_path)
        path, line, column = expected_place(c, "w.cho")
        assert done.returncode == 134, done.stderr
        lines = done.stderr.split("\n")
        assert lines[0] == "cancho: the program trapped (wasm: unreachable)"
        assert lines[1] == f"trap: {c.words} at {path}:{line}:{column}", done.stderr
