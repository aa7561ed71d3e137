"""The JIT worker never imports from the directory it was started in.

A notebook's directory is the kernel's working directory, and `%%file` may write any file there;
a worker started with `python -m` would put that directory first on its module path, so a
planted `llvmlite.py` would run as the worker at its next start (the hub helper showed it with a
planted `cancho_kernel.py`). The worker is started with PYTHONSAFEPATH=1.
"""

from __future__ import annotations

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
