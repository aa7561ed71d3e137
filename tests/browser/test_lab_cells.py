"""Issue 25's cell outputs as JupyterLab shows them, in Chromium: `%%asm --diff`'s side-by-side
table, an `--annotate` listing, a picture drawn by `%%run --display ppm`, a CSV table, and `%%test`'s verdict table.
Screenshots go to out/screenshots/ (cells-*.png)."""

from __future__ import annotations

from test_lab_interaction import _cell, _new_notebook, _run

KERNELS = """fn k_checked(n: int) -> [] int {
    var total = 0;
    var k = 0;
    while k < n {
        total = total + k;
        k = k + 1;
    }
    return total;
}

fn k_wrapping(n: int) -> [] int {
    var total = 0;
    var k = 0;
    while k < n {
        total = wrapping_add(total, k);
        k = k + 1;
    }
    return total;
}

fn main(world: World) -> [] int {
    let Split { io, ffi, fs, heap, args } = split(world);
    release(io); release(ffi); release(fs); release(heap);
    var n = 9;
    borrow args as &a in {
        n = n + arg_count(a);
    }
    release(args);
    // n is 10, known only at run time: on constants the calls would be evaluated while compiling
    return k_checked(n) - k_wrapping(n);
}"""

# A 96x64 gradient: red across, green down, blue constant.
GRADIENT = """%%run --display ppm
fn main(world: World) -> [] int {
    let Split { io, ffi, fs, heap, args } = split(world);
    release(ffi);
    release(fs);
    release(heap);
    release(args);
    borrow mut io as &!i in {
        write_bytes(i, "P6\\n96 64\\n255\\n");
        var y = 0;
        while y < 64 {
            var x = 0;
            while x < 96 {
                putchar(i, x * 255 / 95);
                putchar(i, y * 255 / 63);
                putchar(i, 160);
                x = x + 1;
            }
            y = y + 1;
        }
    }
    release(io);
    return 0;
}"""

CSV = """%%run --display text/csv
fn main(world: World) -> [] int {
    let Split { io, ffi, fs, heap, args } = split(world);
    release(ffi);
    release(fs);
    release(heap);
    release(args);
    borrow mut io as &!i in {
        write_bytes(i, "n,square\\n2,4\\n3,9\\n");
    }
    release(io);
    return 0;
}"""

TESTS = """%%test
fn test_adds() -> [] int {
    return 2 + 2 - 4;
}

fn test_returns_seven() -> [] int {
    return 7;
}"""


def test_asm_diff_is_a_side_by_side_table(lab, screenshots):
    _new_notebook(lab)
    _run(lab, 0, "%%asm --diff k_checked k_wrapping\n" + KERNELS)
    table = _cell(lab, 0).locator("table.cancho-asm-diff")
    table.wait_for()
    head = table.locator("thead th")
    assert head.count() == 2
    assert head.nth(0).inner_text().startswith("k_checked") and head.nth(1).inner_text().startswith("k_wrapping")
    assert table.locator("tbody tr").count() > 4
    changed = table.locator("tbody tr:not(.equal)")
    assert changed.count() > 0  # the trap's lines are on one side only
    assert "ud1l" in table.locator("tbody tr:not(.equal) td:first-child").all_inner_texts().__str__()
    box = table.bounding_box()
    assert box is not None and box["width"] > 300, box
    lab.page.screenshot(path=str(screenshots / "cells-asm-diff.png"))
    _run(lab, 1, "%%asm --annotate --fn k_checked\n" + KERNELS)
    out = _cell(lab, 1).locator(".jp-OutputArea").inner_text()
    assert "total = total + k;" in out and "jo" in out, out
    _cell(lab, 1).locator(".jp-OutputArea").scroll_into_view_if_needed()
    lab.page.screenshot(path=str(screenshots / "cells-asm-annotate.png"))


def test_display_ppm_shows_the_picture(lab, screenshots):
    _new_notebook(lab)
    _run(lab, 0, GRADIENT)
    img = _cell(lab, 0).locator(".jp-RenderedImage img")
    img.wait_for()
    size = img.evaluate("(i) => [i.naturalWidth, i.naturalHeight]")
    assert size == [96, 64], size
    # the pixel at the right edge is red, at the bottom green: read back through a canvas
    rgb = img.evaluate("""(i) => { const c = document.createElement('canvas'); c.width = 96; c.height = 64;
        const g = c.getContext('2d'); g.drawImage(i, 0, 0);
        return [Array.from(g.getImageData(95, 0, 1, 1).data), Array.from(g.getImageData(0, 63, 1, 1).data)]; }""")
    assert rgb[0][:3] == [255, 0, 160] and rgb[1][:3] == [0, 255, 160], rgb
    _run(lab, 1, CSV)
    cells = _cell(lab, 1).locator("table.cancho-csv td").all_inner_texts()
    assert cells == ["2", "4", "3", "9"], cells
    lab.page.screenshot(path=str(screenshots / "cells-display.png"))


def test_test_cell_shows_a_verdict_table(lab, screenshots):
    _new_notebook(lab)
    _run(lab, 0, TESTS)
    rows = _cell(lab, 0).locator("table.cancho-tests tbody tr")
    rows.first.wait_for()
    texts = rows.all_inner_texts()
    assert len(texts) == 2 and "ok" in texts[0] and "returned 7" in texts[1], texts
    assert "tests-failed" in _cell(lab, 0).locator(".jp-OutputArea").inner_text()
    lab.page.screenshot(path=str(screenshots / "cells-test.png"))
