"""The notebooks in tests/notebooks, executed by strict nbval (`--nbval`, not `--nbval-lax`): every
stored output must be recomputed identically by the `cancho` kernel.

`python -m pytest -q` collects notebooks only when `--nbval` is given, so this test runs nbval in
a child pytest on that folder: the README's one test command covers the notebooks, and the child's
own failures are shown here.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

NOTEBOOKS = Path(__file__).resolve().parent / "notebooks"


@pytest.mark.usefixtures("cancho_kernelspec")
def test_notebooks_pass_strict_nbval():
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--nbval", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
         "--rootdir", str(NOTEBOOKS), str(NOTEBOOKS)],
        capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout


@pytest.mark.parametrize("path", sorted(NOTEBOOKS.glob("*.ipynb")), ids=lambda p: p.name)
def test_notebooks_carry_kernel_metadata(path):
    nb = nbformat.read(path, as_version=4)
    assert nb.metadata["kernelspec"]["name"] == "cancho"
    assert nb.metadata["language_info"]["name"] == "cancho"
    assert nb.metadata["language_info"]["pygments_lexer"] == "cancho"
    sources = [c.source for c in nb.cells if c.cell_type == "code"]
    assert any(s.startswith("%%refused ") for s in sources)
    assert any("--stdout /dev/full" in s for s in sources)
