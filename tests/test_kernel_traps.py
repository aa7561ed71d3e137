"""Located traps through a real kernel (issue 25 item 3): a trapped cell's error names the check
and its place — the cell, line and column, the source line and a caret — on both backends and
in safe mode, for a site in the running cell, in an earlier cell and in std. Before, the error
said only `killed by signal 4 (SIGILL)`."""

from __future__ import annotations

import os
import re

import pytest
from kernel_client import assert_alive, run

pytestmark = pytest.mark.usefixtures("cancho_kernelspec")

ANSI = re.compile(r"\x1b\[[0-9;]*m")

MAIN = """fn main(world: World) -> [] int {
    let Split { io, ffi, fs, heap, args } = split(world);
    release(ffi);
    release(fs);
    release(heap);
    release(io);
    // 256, known only at run time: a pure call on constants is evaluated while compiling, and
    // a certain trap there is refused (`constant-traps`) before it could be located.
    var n = 255;
    borrow args as &g in {
        n = n + arg_count(g);
    }
    release(args);
    return %s;
}
"""

HELPER = """fn add(a: int, b: int) -> [] int {
    return a + b;
}
"""


def traceback(cell) -> list[str]:
    assert cell.status == "error", cell.outputs
    assert cell.error["ename"] == "trapped", cell.error
    assert cell.error["evalue"] == "killed by signal 4 (SIGILL)"
    return [ANSI.sub("", line) for line in cell.error["traceback"]]




@pytest.mark.parametrize("backend", ["jit", "exe"])
def test_a_trap_in_this_cell_is_located(kernel, backend):
    cell = run(kernel, f"%%run --backend {backend}\n" + MAIN % "9223372036854775807 + int_of(byte_of(n))")
    tb = traceback(cell)
    head = next(line for line in tb if line.startswith("trap: "))
    m = re.fullmatch(r"trap: `byte_of` of a value outside 0\.\.255 at (cell\[\d+\]):(\d+):(\d+)", head)
    assert m, tb
    i = tb.index(head)
    assert tb[i + 2] == f"{m.group(2)} |     return 9223372036854775807 + int_of(byte_of(n));", tb
    caret = tb[i + 3]
    assert caret.split("|", 1)[1][1:].index("^") == int(m.group(3)) - 1
    assert caret.count("^") == len("byte_of(n)")
    assert_alive(kernel)


@pytest.mark.parametrize("backend", ["jit", "exe"])
def test_a_trap_in_an_earlier_cell_points_there(kernel, backend):
    defined = run(kernel, HELPER)
    assert defined.status == "ok", defined.outputs
    cell = run(kernel, f"%%run --backend {backend}\n" + MAIN % "add(9223372036854775807, n - 255)")
    tb = traceback(cell)
    head = next(line for line in tb if line.startswith("trap: "))
    m = re.fullmatch(r"trap: integer overflow in `\+` at cell\[(\d+)\]:2:14", head)
    assert m, tb
    assert tb[tb.index(head) + 2] == "2 |     return a + b;"


def test_a_trap_in_std_points_into_std(kernel):
    code = "import std.bytes;\n" + MAIN % "bytes.digit_of(0) + run_it()" + """
fn run_it() -> [] int {
    region a {
        let buf = alloc_slice[a](2, byte_of(0));
        bytes.store_le32(buf, 0, 1);
    }
    return 0;
}
"""
    tb = traceback(run(kernel, code))
    head = next(line for line in tb if line.startswith("trap: "))
    assert re.fullmatch(r"trap: slice bounds out of range at <std>/bytes\.cho:\d+:15", head), tb


@pytest.fixture(scope="module")
def safe_kernel(cancho_kernelspec, tmp_path_factory):
    from jupyter_client.manager import start_new_kernel

    d = tmp_path_factory.mktemp("notebook")
    km, kc = start_new_kernel(kernel_name=cancho_kernelspec, startup_timeout=60,
                              env=dict(os.environ, CANCHO_SAFE="1"), cwd=str(d))
    try:
        yield km, kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


@pytest.mark.parametrize("backend", ["jit", "exe"])
def test_safe_mode_locates_traps(safe_kernel, backend):
    cell = run(safe_kernel, f"%%run --backend {backend}\n" + MAIN % "trap()", timeout=120)
    tb = traceback(cell)
    assert any(re.fullmatch(r"trap: `trap\(\)` called at cell\[\d+\]:\d+:12", line) for line in tb), tb


def test_the_same_cell_run_again_names_its_new_cell(kernel):
    """The module cache answers a program it compiled before (its key leaves paths out); the
    trap must still name the cell that ran, not the one compiled first."""
    code = MAIN % "trap()"
    names = []
    for _ in range(2):
        tb = traceback(run(kernel, code))
        head = next(line for line in tb if line.startswith("trap: "))
        names.append(re.fullmatch(r"trap: `trap\(\)` called at (cell\[\d+\]):\d+:12", head).group(1))
    assert names[0] != names[1], names
