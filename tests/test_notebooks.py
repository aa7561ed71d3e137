"""The executable design documents in notebooks/: each one is run by strict nbval (`--nbval`, not
`--nbval-lax`) through the `cancho` kernel, so every stored output — every claim, refusal,
exit status, authority report and byte count — must be recomputed identically. Timings are
never in `text/plain`; the bench tables that carry them are masked by tests/notebooks/sanitize.cfg,
and plots (image/png) are never compared. The outputs are stored, and compared, for the baseline
CPU (`CANCHO_CPU=baseline`, docs/cli.md), so an `%%asm` listing is the same on every x86-64;
tests/test_notebook_claims.py runs the timing claims under the host CPU too.

Like tests/test_kernel_notebooks.py, nbval runs in a child pytest so that the README's single
test command covers the notebooks; the child spreads whole notebooks over the machine's cores
(pytest-xdist, `--dist loadfile`: a notebook's cells share one kernel, so they stay together).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
SANITIZE = Path(__file__).resolve().parent / "notebooks" / "sanitize.cfg"
PATHS = sorted(NOTEBOOKS.glob("*.ipynb"))
FLAGSHIP = NOTEBOOKS / "bulk-output.ipynb"


def _code(nb):
    return [c for c in nb.cells if c.cell_type == "code"]


def test_the_notebooks_exist():
    names = {p.name for p in PATHS}
    assert {"checked-output.ipynb", "authority-model.ipynb", "bulk-output.ipynb"} <= names


WORKERS = max(1, min(2, os.cpu_count() or 1))


@pytest.mark.timeout(1800)  # the child's own bound: every notebook on two shared cores
@pytest.mark.usefixtures("cancho_kernelspec")
def test_notebooks_pass_strict_nbval():
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--nbval", "--nbval-sanitize-with", str(SANITIZE),
         "--nbval-cell-timeout", "300", "-q", "-p", "no:cacheprovider", "-p", "no:benchmark", "-o", "addopts=",
         "-n", str(WORKERS), "--dist", "loadfile",
         "--rootdir", str(NOTEBOOKS), *map(str, PATHS)],
        capture_output=True, text=True, timeout=1800, cwd=NOTEBOOKS,
        env={**os.environ, "CANCHO_CPU": "baseline"})  # the stored listings are the baseline CPU's
    assert proc.returncode == 0, proc.stdout[-8000:] + proc.stderr[-2000:]
    assert re.search(r"\d+ passed", proc.stdout), proc.stdout[-2000:]
    assert " failed" not in proc.stdout


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.name)
def test_notebooks_carry_kernel_metadata_and_outputs(path):
    nb = nbformat.read(path, as_version=4)
    assert nb.metadata["kernelspec"]["name"] == "cancho"
    info = nb.metadata["language_info"]
    assert (info["name"], info["pygments_lexer"], info["file_extension"]) == ("cancho", "cancho", ".cho")
    code = _code(nb)
    # executed and stored: the saved outputs are the reference nbval compares against
    assert all(c.outputs for c in code), [c.source[:60] for c in code if not c.outputs]
    # an error output is only stored where the cell says it expects one
    for c in code:
        if any(o.output_type == "error" for o in c.outputs):
            assert "raises-exception" in c.metadata.get("tags", []), c.source[:80]


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.name)
def test_benches_stay_small(path):
    """Bench cells run a few times only, so the suite stays within minutes on two cores."""
    for c in _code(nb := nbformat.read(path, as_version=4)):
        first = c.source.split("\n", 1)[0]
        if first.startswith(("%bench", "%%bench")):
            m = re.search(r"--runs (\d+)", first)
            assert m and int(m.group(1)) <= 5, first


def test_flagship_shows_every_claim_as_a_cell():
    sources = [c.source for c in _code(nbformat.read(FLAGSHIP, as_version=4))]
    heads = [s.split("\n", 1)[0] for s in sources]
    assert any(h.startswith("%%c ") for h in heads) and any(h.startswith("%bench ") for h in heads)
    assert "%%refused builtin-redeclared" in heads
    assert sum(h.startswith("%%authority") for h in heads) >= 2 and "%authority" in heads
    for target, status in (("/dev/full", 6), ("closed", 6), ("/dev/full", 15), ("/dev/full", 28),
                           ("closed", 9), ("/dev/full", 55)):
        assert any(f"--stdout {target} --expect-status {status}" in h for h in heads), (target, status)
    assert any("--expect-trap" in h for h in heads)
    assert any("base64/base64.cho" in s for s in sources) and any("sort/sort.cho" in s for s in sources)


def test_html_export_highlights_cancho_cells():
    """nbconvert picks the lexer from language_info.pygments_lexer; the package registers
    `cancho`, so code cells come out as Pygments spans rather than plain text."""
    from nbconvert import HTMLExporter

    body, _ = HTMLExporter().from_notebook_node(nbformat.read(NOTEBOOKS / "authority-model.ipynb", as_version=4))
    assert '<span class="k">fn</span>' in body                       # keyword
    assert re.search(r'<span class="nf">main</span>', body)          # function name
    assert re.search(r'<span class="cp">%%refused', body)            # directive line
    assert 'highlight hl-cancho' in body
    assert "<span class=\"nb\">release</span>" in body               # builtin


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.name)
def test_each_notebook_carries_its_index_entry(path):
    """The library's index comes from each notebook's metadata: the documents it reproduces and a
    one-line verdict of what holds here."""
    meta = nbformat.read(path, as_version=4).metadata.get("cancho", {})
    assert meta.get("documents") and all(d.endswith(".md") for d in meta["documents"]), path.name
    assert meta.get("verdict", "").strip(), path.name


def test_the_notebooks_readme_is_the_generated_index():
    import importlib.util

    spec = importlib.util.spec_from_file_location("build_library", ROOT / "scripts" / "build_library.py")
    lib = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = lib  # dataclasses look their module up there
    try:
        spec.loader.exec_module(lib)
    finally:
        del sys.modules[spec.name]
    expected = lib.readme(lib.entries())
    assert (NOTEBOOKS / "README.md").read_text() == expected, \
        "notebooks/README.md is stale: run `python scripts/build_library.py --write-readme`"
    for path in PATHS:
        assert f"]({path.name})" in expected
