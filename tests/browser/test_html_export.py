"""The HTML export of every notebook, as a reader opens it in Chromium: each bench cell shows its
plot as a decoded ``<img>``, each authority report a table, and no output is an empty widget
placeholder waiting for scripts from a CDN (these machines, like many readers', are offline).

Every notebook is exported as stored, through the library builder with its index (the outputs
come from a real run, and the Lab tests run each notebook again); the flagship is also executed
by nbconvert first.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

NOTEBOOKS = sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))

_CELLS_JS = """() => Array.from(document.querySelectorAll('.jp-Cell.jp-CodeCell')).map(c => ({
    source: ((c.querySelector('.jp-InputArea .highlight, .jp-InputArea pre') || {}).textContent || '').trim(),
    images: Array.from(c.querySelectorAll('.jp-OutputArea img')).filter(i => i.complete && i.naturalWidth > 0).length,
    tables: c.querySelectorAll('.jp-OutputArea table').length,
    outputs: c.querySelectorAll('.jp-OutputArea-output').length,
    empty: Array.from(c.querySelectorAll('.jp-OutputArea-output')).filter(o => !o.textContent.trim() && !o.querySelector('img, svg, table')).length,
}))"""


FLAGSHIP = "bulk-output.ipynb"


def _export(root: Path, names: list[str], execute: bool) -> Path:
    out = root / ("executed" if execute else "stored")
    proc = subprocess.run(
        [sys.executable, "-m", "jupyter", "nbconvert", "--to", "html",
         *(["--execute", "--ExecutePreprocessor.timeout=600"] if execute else []),
         "--output-dir", str(out), *(str(root / "notebooks" / n) for n in names)],
        capture_output=True, text=True, timeout=1200, cwd=root / "notebooks")
    assert proc.returncode == 0, proc.stderr[-4000:]
    return out


@pytest.fixture(scope="module")
def export_root(cancho_kernelspec, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("export")
    shutil.copytree(ROOT / "notebooks", root / "notebooks")
    (root / "examples").symlink_to(ROOT / "examples")
    return root


@pytest.fixture(scope="module")
def library(export_root) -> Path:
    """The library as scripts/build_library.py writes it (stored outputs): index and pages."""
    out = export_root / "library"
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "build_library.py"), str(out), "--stored"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def executed(export_root) -> Path:
    """The flagship executed by nbconvert, then exported (the README's command for one notebook)."""
    return _export(export_root, [FLAGSHIP], execute=True)


def test_the_index_links_every_notebook(library, browser, screenshots):
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    try:
        page.goto((library / "index.html").as_uri())
        links = page.evaluate("() => Array.from(document.querySelectorAll('td a'))"
                              ".map(a => a.getAttribute('href')).filter(h => h.endsWith('.html'))")
        assert sorted(links) == sorted(n.replace(".ipynb", ".html") for n in NOTEBOOKS)
        thumbs = page.evaluate("() => Array.from(document.querySelectorAll('td img'))"
                               ".filter(i => i.complete && i.naturalWidth > 0).length")
        assert thumbs >= 1  # the flagship's first plot at least
        page.screenshot(path=str(screenshots / "library-index.png"), full_page=True)
    finally:
        page.close()


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_export_has_plots_tables_and_no_widget_placeholder(library, browser, screenshots, name):
    _check_export(library / name.replace(".ipynb", ".html"), browser, screenshots, name)


def test_executed_flagship_export_has_a_plot_per_bench(executed, browser, screenshots):
    _check_export(executed / FLAGSHIP.replace(".ipynb", ".html"), browser, screenshots, "executed-" + FLAGSHIP)


def _check_export(page_file: Path, browser, screenshots: Path, name: str) -> None:
    text = page_file.read_text()
    assert "application/vnd.jupyter.widget-view+json" not in text
    assert "application/vnd.jupyter.widget-state+json" not in text
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    try:
        page.goto(page_file.as_uri())
        page.wait_for_load_state("load")
        cells = page.evaluate(_CELLS_JS)
        assert cells, "no code cell in the export"
        benches = [c for c in cells if c["source"].startswith(("%bench", "%%bench"))]
        for c in benches:
            assert c["images"] >= 1, c["source"][:120]
        for c in cells:
            if c["source"].startswith(("%%authority", "%authority")) and "--json" not in c["source"].split("\n")[0]:
                assert c["tables"] >= 1, c["source"][:120]
            assert c["empty"] == 0, c["source"][:120]
        first_plot = page.locator(".jp-OutputArea img").first
        if benches:
            first_plot.scroll_into_view_if_needed()
        page.screenshot(path=str(screenshots / f"export-{name.removesuffix('.ipynb')}.png"))
    finally:
        page.close()


def test_the_check_sees_a_widget_placeholder_and_a_missing_plot(tmp_path, browser, screenshots):
    """The checks above can fail: an export whose bench output is a widget view (no plot) is caught."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("%bench a b --runs 3")
    cell.outputs = [nbformat.v4.new_output("display_data", data={
        "application/vnd.jupyter.widget-view+json": {"model_id": "0" * 32, "version_major": 2, "version_minor": 0},
        "text/plain": "bench progress"})]
    nb.cells = [cell]
    nb.metadata["kernelspec"] = {"name": "cancho", "display_name": "cancho", "language": "cancho"}
    path = tmp_path / "bad.ipynb"
    nbformat.write(nb, path)
    proc = subprocess.run([sys.executable, "-m", "jupyter", "nbconvert", "--to", "html", str(path)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    with pytest.raises(AssertionError):
        _check_export(tmp_path / "bad.html", browser, screenshots, "bad.ipynb")
