"""Regenerate the README's "What you will see" pictures: three cells of the notebooks as
JupyterLab shows them in Chromium (a bench plot, an authority table, a refusal).

    python scripts/readme_screenshots.py            # writes docs/images/*.png

It serves a scratch copy of notebooks/ with the same JupyterLab and Chromium as the browser
suite (tests/browser/lab.py), runs each notebook, and photographs one cell of each.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "browser"))

from driver import NB, Lab  # noqa: E402
from lab import CHROMIUM_ARGS, LabServer, chromium_path  # noqa: E402

# (picture, notebook, the first line of the cell to photograph, a line its source must contain)
SHOTS = [
    ("lab-bench-plot.png", "bulk-output.ipynb", "%bench putchar C:putchar C:fwrite", ""),
    ("lab-authority-table.png", "authority-model.ipynb", "%%authority", "narrow(ffi, \"libc\")"),
    ("lab-refusal.png", "authority-model.ipynb", "%%refused linear-use-after-move", ""),
]


def _cell_index(lab: Lab, head: str, contains: str) -> int:
    for i, cell in enumerate(lab.cells()):
        if cell.source.startswith(head) and contains in cell.source:
            return i
    raise SystemExit(f"no cell starting with {head!r} (containing {contains!r})")


def main() -> int:
    out = ROOT / "docs" / "images"
    out.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="cancho-shots-"))
    shutil.copytree(ROOT / "notebooks", scratch / "notebooks")
    (scratch / "examples").symlink_to(ROOT / "examples")
    server = LabServer(scratch, scratch / ".state").start()
    try:
        from playwright.sync_api import sync_playwright

        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1100, "height": 900})
            lab = Lab(page, server.url)
            done: set[str] = set()
            for name, notebook, head, contains in SHOTS:
                if notebook not in done:
                    lab.open(f"notebooks/{notebook}")
                    lab.run_all()
                    page.keyboard.press("Escape")
                    done = {notebook}
                index = _cell_index(lab, head, contains)
                cell = page.locator(f"{NB} .jp-Cell").nth(index)
                cell.scroll_into_view_if_needed()
                page.mouse.move(0, 0)  # no hover highlight in the picture
                cell.screenshot(path=str(out / name))
                print(f"wrote {out / name}")
            browser.close()
    finally:
        server.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
