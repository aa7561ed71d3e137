"""A split run's cell part cut per function (``split.cell_parts``, issue 15): an edited function
is the only piece optimised and compiled again, the other pieces' objects are kept by their text,
and what a program does never changes (the split corpus in test_jit_split.py runs every program
both ways; here: the pieces' shapes, mutual recursion, function values and what an edit
recompiles)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from cancho_kernel.compiler import api
from cancho_kernel.compiler.backends import native, split
from cancho_kernel.compiler.backends.jit import JitWorker
from cancho_kernel.compiler.backends.process import RunLimits, StdoutTarget
from cancho_kernel.compiler.source import SourceFile

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks.cell_latency import std_cell  # noqa: E402

LIMITS = RunLimits(timeout=20.0)

# `even`/`odd` call each other (one piece); `apply` takes a function value; `main` prints.
MUTUAL = """import std.io;
import std.fmt;

fn even(n: int) -> [] bool {{
    if n == 0 {{
        return true;
    }}
    return odd(n - 1);
}}

fn odd(n: int) -> [] bool {{
    if n == 0 {{
        return false;
    }}
    return even(n - 1);
}}

fn bump(n: int) -> [] int {{
    return n + {k};
}}

fn apply(f: fn(int) -> [] int, n: int) -> [] int {{
    return f(n);
}}

fn main(world: World) -> [] int {{
    let Split {{ io, ffi, fs, heap, args }} = split(world);
    release(ffi);
    release(fs);
    release(heap);
    release(args);
    var n = apply(bump, 10);
    if even(n) {{
        n = n * 100;
    }}
    borrow mut io as &!i in {{
        region line {{
            let out = alloc_slice[line](32, byte_of(0));
            var at = fmt.put_int(out, 0, n);
            at = fmt.put(out, at, "\\n");
            io.write_all(i, out[0..at]);
        }}
    }}
    release(io);
    return 0;
}}
"""


def ir_of(text: str) -> str:
    res = api.compile_sources([SourceFile("cell.cho", text)])
    assert res.ok, res.diagnostics
    return res.ir


def pieces_of(text: str) -> list[split.Part]:
    return split.cell_parts(split.split_ir(ir_of(text)).cell)


def test_pieces_are_valid_modules_in_load_order() -> None:
    pieces = pieces_of(MUTUAL.format(k=2))
    placed: set[str] = set()
    for p in pieces:
        native.parse(p.text)
        assert set(p.imports) <= placed, (p.exports, p.imports)  # callees before callers
        placed |= set(p.exports)
    groups = [set(p.exports) for p in pieces]
    assert {"lexs_even", "lexs_odd"} in groups  # mutual recursion: one piece
    assert {"lexs_bump"} in groups and {"lexs_apply"} in groups
    # The C entry with the program's main, and the globals only they use (argc, argv).
    assert {"lexs_main", "main", "lexs_argc", "lexs_argv"} in groups
    assert len(pieces) == 4


def test_an_edit_changes_only_the_edited_functions_piece() -> None:
    before = {p.exports: p.text for p in pieces_of(std_cell(3))}
    after = {p.exports: p.text for p in pieces_of(std_cell(4))}
    assert before.keys() == after.keys()
    changed = {k for k in before if before[k] != after[k]}
    assert changed == {("lexs_scale",)}


def test_a_cell_part_without_a_c_main_is_refused() -> None:
    """A shape the cut does not know (here: no C ``main``) is refused; the worker then compiles
    the cell part whole."""
    cell = split.split_ir(ir_of(std_cell(3))).cell
    with pytest.raises(split.SplitError):
        split.cell_parts(cell.replace('define i32 @"main"', 'define i32 @"not_main"'))


@pytest.fixture(scope="module")
def worker():
    w = JitWorker()
    yield w
    w.close()


def run_split(worker: JitWorker, ir: str):
    return worker.run(ir, None, b"", StdoutTarget.pipe(), LIMITS, split=True)


def test_an_edited_leaf_recompiles_one_piece_and_prints_the_same(worker) -> None:
    run_split(worker, ir_of(std_cell(71)))
    _, before = worker.library_stats()
    got = run_split(worker, ir_of(std_cell(72)))
    _, after = worker.library_stats()
    assert got.stdout == f"sum {45 * 72}\n".encode() and got.exit_status == 0
    assert after.pieced == before.pieced + 1 and after.fallbacks == before.fallbacks
    assert after.piece_misses - before.piece_misses == 1  # `scale` alone
    assert after.piece_hits - before.piece_hits == len(pieces_of(std_cell(72))) - 1


@pytest.mark.parametrize("k", [2, 3])
def test_mutual_recursion_and_function_values_run_as_the_whole_program(worker, k: int) -> None:
    ir = ir_of(MUTUAL.format(k=k))
    whole = worker.run(ir, None, b"", StdoutTarget.pipe(), LIMITS)
    _, before = worker.library_stats()
    parted = run_split(worker, ir)
    _, after = worker.library_stats()
    n = 10 + k
    assert whole.stdout == f"{n * 100 if n % 2 == 0 else n}\n".encode()
    assert (parted.stdout, parted.exit_status) == (whole.stdout, whole.exit_status)
    assert after.pieced == before.pieced + 1
