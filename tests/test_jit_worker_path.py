"""The JIT worker never imports from the directory it was started in.

A notebook's directory is the kernel's working directory, and `%%file` may write any file there;
a worker started with `python -m` would put that directory first on its module path, so a
planted `llvmlite.py` would run as the worker at its next start (the hub helper showed it with a
planted `cancho_kernel.py`). A run may also write `~/.local/lib/python3.X/site-packages/*.pth`
(on the hub the notebook directory is `$HOME`), which a Python started without `-I` runs at its
start (issue 22). The worker is started with `python -I` and finds its package by directory.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from cancho_kernel.compiler.backends.jit import JitWorker
from cancho_kernel.compiler.backends.process import StdoutTarget

HELLO = r"""
@msg = private constant [3 x i8] c"ok\0A"
declare i64 @write(i32, ptr, i64)
define i32 @main(i32 %argc, ptr %argv) {
  %w = call i64 @write(i32 1, ptr @msg, i64 3)
  ret i32 0
}
"""


@pytest.mark.parametrize("module", ["llvmlite", "cancho_kernel"])
def test_a_planted_module_in_the_working_directory_is_not_imported(tmp_path: Path, monkeypatch, module):
    marker = tmp_path / "planted-ran"
    plant = f"open({str(marker)!r}, 'w').write('ran')\nraise SystemExit(7)\n"
    if module == "cancho_kernel":
        (tmp_path / module).mkdir()
        (tmp_path / module / "__init__.py").write_text(plant)
    else:
        (tmp_path / f"{module}.py").write_text(plant)
    monkeypatch.chdir(tmp_path)
    worker = JitWorker()
    try:
        result = worker.run(HELLO, target=StdoutTarget())
    finally:
        worker.close()
    assert not marker.exists(), "the worker imported a module from its working directory"
    assert result.stdout == b"ok\n" and result.exit_status == 0


def test_a_planted_pth_file_in_the_user_site_directory_does_not_run(tmp_path: Path):
    """HOME (and PYTHONUSERBASE, which -I ignores as well) points at a directory where a `.pth`
    is planted as a confined run could plant it; the worker starts, runs, and the `.pth` did not."""
    marker = tmp_path / "pth-ran"
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    site = tmp_path / ".local" / "lib" / version / "site-packages"
    site.mkdir(parents=True)
    (site / "evil.pth").write_text(f"import os; open({str(marker)!r}, 'w').write('ran')\n")
    worker = JitWorker(env={"HOME": str(tmp_path), "PYTHONUSERBASE": str(tmp_path / ".local"),
                            "PYTHONPATH": str(site)})
    try:
        result = worker.run(HELLO, target=StdoutTarget())
    finally:
        worker.close()
    assert not marker.exists(), "the worker ran a .pth file from the user site directory"
    assert result.stdout == b"ok\n" and result.exit_status == 0
