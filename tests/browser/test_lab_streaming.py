"""A program talking to the notebook while it runs, as a person sees it in JupyterLab (issue 25,
items 1 and 2): a flushed line appears while the cell is still running, and a program reading
its standard input shows an input box; the two lines typed into it come back from the program,
and an empty submission ends its input."""

from __future__ import annotations

from test_lab_interaction import _cell, _new_notebook, _output_text, _start, _type_into
from test_kernel_streaming import ECHO, FLUSH_THEN_SPIN  # noqa: E402  (tests/ is on the path)

STDIN_BOX = ".jp-Stdin-input"


def test_a_flushed_line_appears_before_the_cell_finishes(lab, screenshots):
    _new_notebook(lab)
    _type_into(lab, 0, FLUSH_THEN_SPIN)
    _start(lab, 0)
    cell = _cell(lab, 0)
    cell.locator(".jp-OutputArea-output", has_text="A ").first.wait_for(timeout=60_000)
    # still running: the prompt says [*] and the program's last line has not come
    running = cell.locator(".jp-InputArea-prompt").inner_text().strip()
    shown = _output_text(lab, 0)
    lab.page.screenshot(path=str(screenshots / "streaming-while-running.png"))
    assert running == "[*]:", running
    assert "B" not in shown.replace("A ", ""), shown
    cell.locator(".jp-InputArea-prompt:not(:has-text('[*]'))").wait_for(timeout=120_000)
    lab.wait_idle()
    out = _output_text(lab, 0)
    assert "B" in out and "returned 0" in out, out
    lab.page.screenshot(path=str(screenshots / "streaming-finished.png"))


def test_two_typed_lines_reach_the_program_and_an_empty_one_ends_input(lab, screenshots):
    _new_notebook(lab)
    _type_into(lab, 0, "%%run --expect-status 8\n" + ECHO)
    _start(lab, 0)
    page = lab.page
    for k, line in enumerate(("one", "two", "")):
        # the program asks again once it has read the line: a box not answered yet
        box = _cell(lab, 0).locator(f"{STDIN_BOX}:not([data-answered])").last
        box.wait_for(timeout=60_000)
        box.click()
        page.keyboard.insert_text(line)
        if k == 1:
            page.screenshot(path=str(screenshots / "stdin-second-line.png"))
        box.evaluate("(el) => { el.dataset.answered = '1'; }")
        page.keyboard.press("Enter")
    _cell(lab, 0).locator(".jp-InputArea-prompt:not(:has-text('[*]'))").wait_for(timeout=120_000)
    lab.wait_idle()
    out = _output_text(lab, 0)
    page.screenshot(path=str(screenshots / "stdin-answered.png"))
    assert "one\ntwo\n" in out and "returned 8" in out, out
    assert _cell(lab, 0).locator(STDIN_BOX).count() == 0
