"""Driving JupyterLab in Chromium the way a person does: open a notebook, Run All, wait, look.

Only what a user can reach is used: menus, the toolbar, the keyboard and the Launcher. The DOM
is read for what the page shows (an ``<img>`` and its decoded size, a table, a computed colour);
a notebook's stored outputs are read from the file Lab saved.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

from playwright.sync_api import Page

LONG = 300_000  # ms: a notebook's Run All on a busy two-core machine
IDLE = ".jp-Notebook-ExecutionIndicator[data-status='idle']"
NB = ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook"  # the notebook in the current tab


@dataclass(frozen=True)
class ShownOutput:
    """One output as the page shows it."""

    mime: str
    text: str
    images: int          # <img> elements that decoded to a picture (naturalWidth > 0)
    tables: int
    json_trees: int      # JupyterLab's collapsible JSON viewer
    widgets: int         # ipywidgets views


@dataclass(frozen=True)
class ShownCell:
    kind: str            # "code" | "markdown" | "raw"
    source: str
    prompt: str
    outputs: tuple[ShownOutput, ...]


_CELLS_JS = """() => Array.from(document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell')).map(c => ({
    kind: c.classList.contains('jp-CodeCell') ? 'code' : c.classList.contains('jp-MarkdownCell') ? 'markdown' : 'raw',
    source: Array.from(c.querySelectorAll('.jp-InputArea-editor .cm-line')).map(l => l.textContent).join('\\n'),
    prompt: ((c.querySelector('.jp-InputArea-prompt') || {}).textContent || '').trim(),
    outputs: Array.from(c.querySelectorAll('.jp-OutputArea-output')).map(o => ({
        mime: o.getAttribute('data-mime-type') || '',
        text: o.textContent,
        images: Array.from(o.querySelectorAll('img')).filter(i => i.complete && i.naturalWidth > 0).length,
        tables: o.querySelectorAll('table').length,
        json_trees: o.querySelectorAll('.jp-RenderedJSON').length + (o.getAttribute('data-mime-type') === 'application/json' ? 1 : 0),
        widgets: o.querySelectorAll('.jupyter-widgets, .widget-slider, .widget-dropdown').length,
    })),
}))"""


class Lab:
    """One JupyterLab page."""

    def __init__(self, page: Page, url_of) -> None:
        self.page = page
        self.url_of = url_of

    # -- navigation --------------------------------------------------------------------------------

    def open(self, path: str) -> None:
        """Open a notebook (path relative to the server's root) and wait for its kernel."""
        self.page.goto(self.url_of(f"lab/tree/{path}?reset"))  # ?reset: not the last test's tabs
        self.page.wait_for_selector(NB, timeout=LONG)
        self.wait_idle()

    def wait_idle(self, timeout: float = LONG) -> None:
        """Until the kernel is idle and no cell shows ``[*]``."""
        deadline = time.monotonic() + timeout / 1000
        while time.monotonic() < deadline:
            idle = self._kernel_idle()
            busy = self.page.locator(f"{NB} .jp-InputArea-prompt", has_text="[*]").count()
            if idle and not busy:
                time.sleep(0.3)  # a cell queued right after the last reply shows [*] a moment later
                if self.page.locator(f"{NB} .jp-InputArea-prompt", has_text="[*]").count() == 0:
                    return
            time.sleep(0.25)
        raise TimeoutError("the notebook did not become idle")

    def _kernel_idle(self) -> bool:
        """The status bar says ``<kernel> | Idle`` (the execution indicator alone says idle before
        the kernel has even started)."""
        texts = self.page.evaluate("() => Array.from(document.querySelectorAll('.jp-StatusBar-Item'))"
                                   ".map(e => e.textContent.trim())")
        return any(t.endswith("| Idle") and not t.startswith("No Kernel") for t in texts) \
            and self.page.locator(IDLE).count() > 0

    def menu(self, top: str, item: str) -> None:
        self.page.locator(".lm-MenuBar-itemLabel", has_text=top).first.click()
        self.page.locator(".lm-Menu-itemLabel", has_text=item).first.click()

    def run_all(self) -> None:
        """Clear every output, Run All, and wait until every code cell has run or the run stopped
        (an unexpected error stops Run All: the cells after it keep an empty prompt)."""
        self.menu("Edit", "Clear Outputs of All Cells")
        self.page.wait_for_function(f"() => !document.querySelector('{NB} .jp-OutputArea-output')",
                                    timeout=30_000)
        self.menu("Run", "Run All Cells")
        deadline = time.monotonic() + LONG / 1000
        quiet_since = None
        while time.monotonic() < deadline:
            prompts = self.page.evaluate(
                f"() => Array.from(document.querySelectorAll('{NB} .jp-CodeCell .jp-InputArea-prompt'))"
                ".map(p => p.textContent.trim())")
            idle = self._kernel_idle()
            running = any(p == "[*]:" for p in prompts)
            if idle and not running:
                if all(p not in ("[ ]:", "") for p in prompts):
                    return
                quiet_since = quiet_since or time.monotonic()
                if time.monotonic() - quiet_since > 5:
                    return  # stopped by an error: the test sees the empty prompts
            else:
                quiet_since = None
            time.sleep(0.25)
        raise TimeoutError("Run All did not finish")

    def save(self) -> None:
        self.page.keyboard.press("Control+s")
        self.page.wait_for_selector(".jp-mod-dirty", state="detached", timeout=30_000)

    # -- what is shown -----------------------------------------------------------------------------

    def cells(self) -> list[ShownCell]:
        raw = self.page.evaluate(_CELLS_JS)
        return [ShownCell(c["kind"], c["source"], c["prompt"], tuple(ShownOutput(**o) for o in c["outputs"]))
                for c in raw]

    def screenshots(self, folder: Path, stem: str, pages: int = 40) -> list[Path]:
        """The notebook scrolled screen by screen (what a reader sees), as PNGs."""
        folder.mkdir(parents=True, exist_ok=True)
        scroller = ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-WindowedPanel-outer"
        height = self.page.evaluate(f"() => document.querySelector('{scroller}').scrollHeight")
        view = self.page.evaluate(f"() => document.querySelector('{scroller}').clientHeight")
        shots = []
        for i, y in enumerate(range(0, max(height, 1), max(view - 80, 200))):
            if i >= pages:
                break
            self.page.evaluate(f"() => document.querySelector('{scroller}').scrollTo(0, {y})")
            self.page.wait_for_timeout(150)
            path = folder / f"{stem}-{i:02d}.png"
            self.page.screenshot(path=str(path))
            shots.append(path)
        return shots


def stored_outputs(path: Path) -> list[tuple[dict, list[dict]]]:
    """(cell, outputs) of each code cell of a saved notebook."""
    nb = json.loads(path.read_text())
    return [(c, c.get("outputs", [])) for c in nb["cells"] if c["cell_type"] == "code"]
