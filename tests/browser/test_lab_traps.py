"""A trapped cell in JupyterLab (issue 25 item 3): the error shows which check fired and where —
the cell, line and column, the source line and a caret — not only `killed by signal 4`. The
operand comes from the program's arguments: on constants the call would be evaluated while
compiling and refused (`constant-traps`)."""

from __future__ import annotations

import re

from driver import NB

TRAP_CELL = """fn add(a: int, b: int) -> [] int {
    return a + b;
}

fn main(world: World) -> [] int {
    let Split { io, ffi, fs, heap, args } = split(world);
    release(io); release(ffi); release(fs); release(heap);
    var one = 0;
    borrow args as &a in {
        one = arg_count(a);
    }
    release(args);
    return add(9223372036854775807, one);
}"""


def _cell(lab, index: int):
    return lab.page.locator(f"{NB} .jp-Cell").nth(index)


def test_a_trap_shows_its_check_and_place(lab, screenshots):
    lab.page.goto(lab.url_of("lab?reset"))
    lab.page.locator(".jp-LauncherCard[data-category='Notebook'][title='cancho']").first.click()
    lab.page.wait_for_selector(f"{NB} .jp-Cell .cm-content")
    lab.wait_idle()
    _cell(lab, 0).locator(".cm-content").click()
    lab.page.keyboard.press("Control+a")
    lab.page.keyboard.insert_text(TRAP_CELL)
    _cell(lab, 0).locator(".jp-InputArea-prompt").click()
    lab.page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) "
                     "[data-command='notebook:run-cell-and-select-next']").first.click()
    error = _cell(lab, 0).locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
    error.first.wait_for(timeout=120_000)
    lab.wait_idle()
    text = _cell(lab, 0).locator(".jp-OutputArea").inner_text()
    lab.page.screenshot(path=str(screenshots / "located-trap.png"))
    assert "trapped: killed by signal 4 (SIGILL)" in text, text
    assert re.search(r"trap: integer overflow in `\+` at cell\[\d+\]:2:14", text), text
    assert "2 |     return a + b;" in text, text
    caret = next(line for line in text.split("\n") if line.strip().startswith("|") and "^" in line)
    assert "memory limit" not in text, text  # an overflow is no limit's doing
    assert caret.index("^") - caret.index("|") == 1 + 14, caret  # "| " then 13 spaces
