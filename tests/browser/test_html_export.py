"""The HTML export of every notebook, as a reader opens it in Chromium: each bench cell shows its
plot as a decoded ``<img>``, each authority report a table, and no output is an empty widget
placeholder waiting for scripts from a CDN (these machines, like many readers', are offline).
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


@pytest.fixture(scope="module")
def exported(cancho_kernelspec, tmp_path_factory) -> Path:
    """Every notebook executed and exported by nbconvert, as the README's command does."""
    root = tmp_path_factory.mktemp("export")
    shutil.copytree(ROOT / "notebooks", root / "notebooks")
    (root / "examples").symlink_to(ROOT / "examples")
    out = root / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "jupyter", "nbconvert", "--to", "html", "--execute",
         "--ExecutePreprocessor.timeout=600", "--output-dir", str(out),
         *(str(root / "notebooks" / n) for n in NOTEBOOKS)],
        capture_output=True, text=True, timeout=1200, cwd=root / "notebooks")
    assert proc.returncode == 0, proc.stderr[-4000:]
    return out


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_export_has_plots_tables_and_no_widget_placeholder(exported, browser, screenshots, name):
    page_file = exported / name.replace(".ipynb", ".html")
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
