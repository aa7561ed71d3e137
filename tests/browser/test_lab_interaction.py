"""What a person does in JupyterLab with the cancho kernel, done in Chromium: a new notebook from
the Launcher, Tab completion, Shift+Tab, the stop button, a slider of ``%%bench --interactive``,
and highlighting (a keyword and an identifier in different colours; a directive line one colour;
a ``%%c`` cell as C).
"""

from __future__ import annotations

import time

from driver import NB
from kernel_client import HELLO, LOOP
from playwright.sync_api import expect

EXPLORE = """%%bench --interactive --arg N=1000:200000:1000 --runs 1 --warmup 0
fn main(world: World) -> [] int {
    release(world);
    var i = 0;
    var s = 0;
    while i < {N} {
        s = wrapping_add(s, i);
        i = i + 1;
    }
    return s - s;
}"""

C_CELL = """%%c hello
#include <stdio.h>
int main(void) { return puts("hi") < 0; }"""

# Colour of each word's element in a cell's editor (the first time the word appears).
_COLOURS_JS = """(cell) => {
    const ed = cell.querySelector('.cm-content');
    const out = {};
    const walker = document.createTreeWalker(ed, NodeFilter.SHOW_TEXT);
    let n;
    while ((n = walker.nextNode())) {
        const colour = getComputedStyle(n.parentElement).color;
        for (const w of n.textContent.match(/%*[A-Za-z_][A-Za-z0-9_\\-]*/g) || []) {
            if (!(w in out)) out[w] = colour;
        }
    }
    return out;
}"""


def _new_notebook(lab) -> None:
    lab.page.goto(lab.url_of("lab?reset"))
    lab.page.locator(".jp-LauncherCard[data-category='Notebook'][title='cancho']").first.click()
    lab.page.wait_for_selector(f"{NB} .jp-Cell .cm-content")
    lab.wait_idle()


def _cell(lab, index: int):
    return lab.page.locator(f"{NB} .jp-Cell").nth(index)


def _type_into(lab, index: int, text: str) -> None:
    """Put text into a cell's editor as one input (no auto-indent from typed newlines)."""
    while lab.page.locator(f"{NB} .jp-Cell").count() <= index:
        lab.page.keyboard.press("Escape")
        lab.page.keyboard.press("b")  # command mode: insert a cell below
    _cell(lab, index).locator(".cm-content").click()
    lab.page.keyboard.press("Control+a")
    lab.page.keyboard.insert_text(text)


def _start(lab, index: int) -> None:
    """Run the cell with the toolbar's run button, and wait until it has started (or ended)."""
    _cell(lab, index).locator(".jp-InputArea-prompt").click()  # select it (command mode)
    lab.page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) "
                     "[data-command='notebook:run-cell-and-select-next']").first.click()
    _cell(lab, index).locator(".jp-InputArea-prompt:not(:has-text('[ ]'))").wait_for()


def _run(lab, index: int, text: str) -> None:
    _type_into(lab, index, text)
    _start(lab, index)
    _cell(lab, index).locator(".jp-InputArea-prompt:not(:has-text('[*]'))").wait_for(timeout=120_000)
    lab.wait_idle()


def _output_text(lab, index: int) -> str:
    return _cell(lab, index).locator(".jp-OutputArea").inner_text()


def test_a_new_notebook_from_the_launcher_runs_hello(lab, screenshots):
    _new_notebook(lab)
    _run(lab, 0, HELLO)
    out = _output_text(lab, 0)
    assert "hello, world" in out and "returned 0" in out, out
    lab.page.screenshot(path=str(screenshots / "launcher-hello.png"))


def test_tab_completes_and_shift_tab_shows_a_signature(lab, screenshots):
    _new_notebook(lab)
    _run(lab, 0, "import std.io;")
    _type_into(lab, 1, "let x = spl")
    lab.page.keyboard.press("Tab")
    item = lab.page.locator(".jp-Completer-item", has_text="split").first
    item.wait_for(timeout=20_000)
    lab.page.screenshot(path=str(screenshots / "completion.png"))
    lab.page.keyboard.press("Escape")
    lab.page.keyboard.insert_text("it(")
    lab.page.keyboard.press("Shift+Tab")
    tip = lab.page.locator(".jp-Tooltip").first
    expect(tip).to_contain_text("fn split(world: World)", timeout=20_000)
    lab.page.screenshot(path=str(screenshots / "tooltip-split.png"))
    lab.page.keyboard.press("Escape")
    # a std function through its module
    _type_into(lab, 1, "io.write_all")
    lab.page.keyboard.press("Shift+Tab")
    tip = lab.page.locator(".jp-Tooltip").first
    expect(tip).to_contain_text("io.cho", timeout=20_000)  # the tooltip's text arrives after the box
    text = tip.inner_text()
    assert "write_all" in text and "io_write" in text, text
    lab.page.screenshot(path=str(screenshots / "tooltip-write-all.png"))


def test_the_stop_button_ends_an_infinite_loop_and_the_next_cell_runs(lab):
    _new_notebook(lab)
    _type_into(lab, 0, LOOP)
    _start(lab, 0)
    _cell(lab, 0).locator(".jp-InputArea-prompt:has-text('[*]')").wait_for()
    time.sleep(1.5)  # the program is running
    lab.page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) [data-command='notebook:interrupt-kernel']").click()
    lab.wait_idle(timeout=30_000)
    assert "KeyboardInterrupt" in _output_text(lab, 0)
    _run(lab, 1, HELLO)
    assert "hello, world" in _output_text(lab, 1)


def _plot_src(lab, index: int) -> str:
    img = _cell(lab, index).locator(".jp-OutputArea-output img").first
    img.wait_for(timeout=60_000)
    return img.get_attribute("src") or ""


def test_moving_an_interactive_slider_redraws_the_plot(lab, screenshots):
    _new_notebook(lab)
    _run(lab, 0, EXPLORE)
    before = _plot_src(lab, 0)
    assert "N=1000" in _output_text(lab, 0)
    handle = _cell(lab, 0).locator(".widget-slider .noUi-handle, .widget-slider [role='slider']").first
    box = handle.bounding_box()
    assert box is not None
    lab.page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    lab.page.mouse.down()
    lab.page.mouse.move(box["x"] + 150, box["y"] + box["height"] / 2, steps=8)
    lab.page.mouse.up()
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and _plot_src(lab, 0) == before:
        time.sleep(0.5)
    assert _plot_src(lab, 0) != before, "the plot was not redrawn"
    text = _output_text(lab, 0)
    assert "N=1000," not in text.replace("N=1000:", "") or "N=1000 " not in text
    assert _cell(lab, 0).locator(".jp-OutputArea-output img").count() == 1  # redrawn in place
    lab.page.screenshot(path=str(screenshots / "explorer.png"))


def test_highlighting_colours_keywords_directives_and_c(lab, screenshots):
    _new_notebook(lab)
    _type_into(lab, 0, "%%refused linear-use-after-move\n" + HELLO)
    _type_into(lab, 1, C_CELL)
    lab.page.keyboard.press("Escape")
    lab.page.wait_for_timeout(500)
    lab.page.screenshot(path=str(screenshots / "highlighting.png"))
    cancho = lab.page.evaluate(_COLOURS_JS, _cell(lab, 0).element_handle())
    assert cancho["let"] != cancho["io"], cancho            # keyword vs identifier
    assert cancho["fn"] == cancho["let"] == cancho["return"], cancho
    # the directive line is one token: its words share one colour, not the keywords'
    directive = {cancho[w] for w in ("%%refused", "linear-use-after-move")}
    assert len(directive) == 1 and cancho["let"] not in directive, cancho
    c = lab.page.evaluate(_COLOURS_JS, _cell(lab, 1).element_handle())
    assert c["return"] != c["puts"], c                        # C keyword vs identifier
    assert c["int"] != c["puts"], c                           # C type
