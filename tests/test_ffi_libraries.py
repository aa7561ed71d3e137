"""Foreign calls into a library named with `-l`/`-L`, on both backends (runtime.md §6): a shared
library is built here with `cc`, and the same cancho program reaches its symbol through the
linked executable and through MCJIT."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

PROGRAM = """\
extern fn triple[&f](ffi: &f Ffi("libtriple"), x: int) -> [ffi("libtriple")] int;
fn main(world: World) -> [] int {
    let Split { io, ffi, fs, heap, args } = split(world);
    release(io); release(fs); release(heap); release(args);
    let lib = narrow(ffi, "libtriple");
    var n = 0;
    borrow lib as &f in { n = triple(f, 14); }
    release(lib);
    return n;
}
"""


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    d = tmp_path_factory.mktemp("lib")
    (d / "triple.c").write_text("long triple(long x) { return 3 * x; }\n")
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", str(d / "libtriple.so"), str(d / "triple.c")], check=True)
    src = d / "use.cho"
    src.write_text(PROGRAM)
    return d, src


@pytest.mark.parametrize("backend", ["jit", "exe"])
def test_a_library_named_with_l_is_reached_on_both_backends(library, backend):
    d, src = library
    env = dict(os.environ, LD_LIBRARY_PATH=str(d))  # the executable finds the library at run time
    r = subprocess.run([sys.executable, "-m", "cancho_kernel.cli", "run", "--backend", backend,
                        "-l", "triple", "-L", str(d), str(src)], capture_output=True, text=True, env=env)
    assert r.returncode == 42, r.stderr


def test_without_the_library_the_symbol_is_missing(library):
    d, src = library
    r = subprocess.run([sys.executable, "-m", "cancho_kernel.cli", "run", "--backend", "exe", str(src)],
                       capture_output=True, text=True)
    assert r.returncode == 3 and "triple" in r.stderr
