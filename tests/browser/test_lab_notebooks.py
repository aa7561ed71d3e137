"""Each notebook in notebooks/, opened in JupyterLab in Chromium and run with Run All, shows what
its prose points at: every bench cell a decoded plot image, every authority report a table (never
Lab's collapsed JSON tree), no error a cell does not expect, and no empty widget placeholder.
"""

from __future__ import annotations

import re

import pytest
from conftest import ROOT
from driver import stored_outputs

NOTEBOOKS = sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))


def _head(source: str) -> str:
    return source.lstrip().split("\n", 1)[0]


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs_all_and_shows_its_displays(lab, lab_root, screenshots, name):
    lab.open(f"notebooks/{name}")
    lab.run_all()
    cells = [c for c in lab.cells() if c.kind == "code"]
    lab.screenshots(screenshots, name.removesuffix(".ipynb"))
    assert cells and all(re.fullmatch(r"\[\d+\]:", c.prompt) for c in cells), \
        [(c.prompt, _head(c.source)) for c in cells if not re.fullmatch(r"\[\d+\]:", c.prompt)]
    for c in cells:
        head = _head(c.source)
        if head.startswith(("%bench", "%%bench")):
            assert sum(o.images for o in c.outputs) >= 1, (head, c.outputs)
            assert any(o.tables for o in c.outputs), head
        if head.startswith(("%%authority", "%authority")) and "--json" not in head:
            assert any(o.tables for o in c.outputs), (head, c.outputs)
        assert not any(o.json_trees for o in c.outputs), (head, c.outputs)
        assert not any(o.widgets for o in c.outputs), (head, c.outputs)
    # What Lab stored (saved to the scratch copy): an error only where the cell expects one.
    lab.save()
    for cell, outputs in stored_outputs(lab_root / "notebooks" / name):
        tags = cell.get("metadata", {}).get("tags", [])
        errors = [o for o in outputs if o["output_type"] == "error"]
        if "raises-exception" not in tags:
            assert not errors, (cell["source"][:200], errors)
        widget_views = [o for o in outputs if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
        assert not widget_views, cell["source"][:200]
