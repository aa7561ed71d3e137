"""Issue 25 items 5-8 through a real kernel: `%%test`'s table, `%%ir`/`%%asm`'s options,
`%%run --display`, and the wasm target in cells."""

from __future__ import annotations

import pytest
from kernel_client import run

pytestmark = pytest.mark.usefixtures("cancho_kernelspec")

TESTS = """import std.test;

fn double(x: int) -> [] int {
    return x + x;
}

fn test_double() -> [] int {
    return test.assert_eq(double(2), 4);
}

fn test_returns_seven() -> [] int {
    return 7;
}

fn test_overflows() -> [] int {
    // Through a variable: on a constant the call is evaluated while compiling (constant-traps).
    var big = 9223372036854775807;
    big = big + 0;
    return double(big);
}

fn test_prints[&i](io: &!i Io) -> [io_write] int {
    write_bytes(io, "said\\n");
    return 0;
}
"""


@pytest.mark.parametrize("backend", ["jit", "exe"])
def test_test_cell_table(kernel, backend):
    """One row per test with the runner's verdicts; the cell fails (a test failed); the
    failing tests' names are in the error, and a passing test's output is not shown."""
    cell = run(kernel, f"%%test --backend {backend}\n" + TESTS)
    assert cell.status == "error", cell.outputs
    shown = cell.of("display_data")[0]
    rows = {line.split()[0]: line for line in shown["data"]["text/plain"].splitlines()[:-1]}
    assert set(rows) == {"test_double", "test_returns_seven", "test_overflows", "test_prints"}
    assert rows["test_double"].split()[1] == "ok"
    assert "returned 7" in rows["test_returns_seven"]
    assert "trapped" in rows["test_overflows"]
    assert rows["test_prints"].split()[1] == "ok"
    assert shown["data"]["text/plain"].splitlines()[-1] == "2 passed; 2 failed"
    assert "<table" in shown["data"]["text/html"]
    verdicts = {t["name"]: t["verdict"] for t in shown["metadata"]["cancho"]["tests"]}
    assert verdicts == {"test_double": "ok", "test_returns_seven": "returned",
                        "test_overflows": "trapped", "test_prints": "ok"}
    assert cell.error["ename"] == "tests-failed"
    assert "test_returns_seven (returned 7)" in cell.error["evalue"]
    assert "said" not in cell.stream("stdout")


def test_test_cell_passes_and_items_join(kernel):
    cell = run(kernel, "%%test\n" + TESTS.split("fn test_returns_seven")[0])
    assert cell.status == "ok", cell.outputs
    assert cell.of("display_data")[0]["data"]["text/plain"].splitlines()[-1] == "1 passed; 0 failed"
    after = run(kernel, "%%check\nfn uses() -> [] int { return double(3); }\n")
    assert after.status == "ok", after.outputs


def test_test_cell_refusals(kernel):
    none = run(kernel, "%%test\nfn helper() -> [] int { return 1; }\n")
    assert none.status == "error" and none.error["ename"] == "no-tests"
    shape = run(kernel, "%%test\nfn test_bad(x: int) -> [] int { return x; }\n")
    assert shape.status == "error" and shape.error["ename"] == "test-shape"
    assert "cell[" in shape.error["evalue"] and "test_bad" in shape.error["evalue"]
    bad = run(kernel, "%%test --stdin x\nfn test_a() -> [] int { return 0; }\n")
    assert bad.status == "error" and "--stdin" in bad.error["evalue"]


# -- %%ir / %%asm -------------------------------------------------------------------------------

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
}
"""


def test_fn_filter_shows_only_that_function(kernel):
    """`--fn` keeps the function O2 would inline away, and only it is shown."""
    ir = run(kernel, "%%ir --fn k_checked\n" + KERNELS)
    assert ir.status == "ok", ir.outputs
    defines = [line for line in ir.shown.splitlines() if line.startswith("define ")]
    assert len(defines) == 1 and "@lexs_k_checked(" in defines[0], ir.shown
    assert "llvm.sadd.with.overflow" in ir.shown  # the checked `+`
    asm = run(kernel, "%%asm --fn k_wrapping\n" + KERNELS)
    assert asm.status == "ok", asm.outputs
    assert asm.shown.startswith("lexs_k_wrapping:") and "lexs_k_checked" not in asm.shown, asm.shown
    assert "ud1l" not in asm.shown and "ud2" not in asm.shown  # wrapping arithmetic has no trap
    missing = run(kernel, "%%asm --fn nothere\n" + KERNELS)
    assert missing.status == "error" and "k_checked" in missing.error["evalue"], missing.error


def test_intel_and_opt_levels(kernel):
    att = run(kernel, "%%asm --fn k_checked\n" + KERNELS).shown
    intel = run(kernel, "%%asm --intel --fn k_checked\n" + KERNELS).shown
    assert "%r" in att and "%r" not in intel, intel
    again = run(kernel, "%%asm --fn k_checked\n" + KERNELS).shown
    assert again == att  # Intel syntax was put back
    o0 = run(kernel, "%%ir -O0 --fn k_checked\n" + KERNELS).shown
    o2 = run(kernel, "%%ir -O2 --fn k_checked\n" + KERNELS).shown
    assert "alloca" in o0 and "alloca" not in o2, o0


@pytest.mark.parametrize("line, word", [("%%asm --bogus", "--bogus"), ("%%ir -O3", "-O3"),
                                        ("%%ir --intel", "--intel"), ("%%asm --fn", "--fn"),
                                        ("%%asm --diff a", "--diff")])
def test_unknown_listing_options_are_refused_with_their_column(kernel, line, word):
    cell = run(kernel, line + "\n" + KERNELS)
    assert cell.status == "error", cell.outputs
    evalue = cell.error["evalue"]
    column = line.index(word) + 1
    assert f"column {column} of the `{line.split()[0]}` line" in evalue, evalue


def test_asm_diff_of_two_functions(kernel):
    cell = run(kernel, "%%asm --diff k_checked k_wrapping\n" + KERNELS)
    assert cell.status == "ok", cell.outputs
    data = cell.of("display_data")[0]["data"]
    assert data["text/plain"].startswith("--- k_checked\n+++ k_wrapping"), data["text/plain"]
    assert "<table" in data["text/html"] and "ud1l" in data["text/html"]
    minus = [l for l in data["text/plain"].splitlines() if l.startswith("-") and "ud1l" in l]
    assert minus, data["text/plain"]  # the trap is on the checked side only


def test_asm_diff_of_two_named_programs(kernel):
    for name, fn in (("checked", "k_checked"), ("wrapping", "k_wrapping")):
        main = KERNELS.replace("return k_checked(n) - k_wrapping(n);", f"return {fn}(n);")
        kept = run(kernel, f"%%run --name {name} --expect-status 45\n" + main)
        assert kept.status == "ok", kept.outputs
    cell = run(kernel, "%%asm --diff checked wrapping\n")
    assert cell.status == "ok", cell.outputs
    data = cell.of("display_data")[0]["data"]
    assert data["text/plain"].startswith("--- checked\n+++ wrapping") or "are the same" in data["text/plain"]
    assert "<table" in data["text/html"]


# -- %%run --display ------------------------------------------------------------------------------


def writes(text_literal: str, status: int = 0) -> str:
    """A main that writes the cancho string literal `text_literal` to stdout."""
    return f"""fn main(world: World) -> [] int {{
    let Split {{ io, ffi, fs, heap, args }} = split(world);
    release(ffi);
    release(fs);
    release(heap);
    release(args);
    borrow mut io as &!i in {{
        write_bytes(i, {text_literal});
    }}
    release(io);
    return {status};
}}
"""


# A 3x2 P6 image: red, green, blue / white, black, grey, written byte by byte.
PPM = """fn px[&i](io: &!i Io, r: int, g: int, b: int) -> [io_write] int {
    putchar(io, r);
    putchar(io, g);
    putchar(io, b);
    return 0;
}

fn main(world: World) -> [] int {
    let Split { io, ffi, fs, heap, args } = split(world);
    release(ffi);
    release(fs);
    release(heap);
    release(args);
    borrow mut io as &!i in {
        write_bytes(i, "P6\\n# a comment\\n3 2\\n255\\n");
        px(i, 255, 0, 0);
        px(i, 0, 255, 0);
        px(i, 0, 0, 255);
        px(i, 255, 255, 255);
        px(i, 0, 0, 0);
        px(i, 128, 128, 128);
    }
    release(io);
    return 0;
}
"""


def png_pixels(b64: str):
    import base64
    import io

    from PIL import Image

    img = Image.open(io.BytesIO(base64.b64decode(b64)))
    return img.size, [img.getpixel((x, y)) for y in range(img.size[1]) for x in range(img.size[0])]


@pytest.mark.parametrize("backend", ["jit", "exe"])
def test_display_ppm_is_a_png_with_the_programs_pixels(kernel, backend):
    cell = run(kernel, f"%%run --backend {backend} --display ppm\n" + PPM)
    assert cell.status == "ok", cell.outputs
    assert cell.stream("stdout") == ""  # shown as an image, not as bytes
    data = cell.of("display_data")[0]["data"]
    size, pixels = png_pixels(data["image/png"])
    assert size == (3, 2)
    assert [p[:3] for p in pixels] == [(255, 0, 0), (0, 255, 0), (0, 0, 255), (255, 255, 255),
                                       (0, 0, 0), (128, 128, 128)]
    assert "3×2" in data["text/plain"]


def test_display_csv_html_svg(kernel):
    csv = run(kernel, "%%run --display text/csv\n" + writes('"n,square\\n2,4\\n\\"a,b\\",<x>\\n"'))
    assert csv.status == "ok", csv.outputs
    html = csv.of("display_data")[0]["data"]["text/html"]
    assert "<th>n</th><th>square</th>" in html and "<td>a,b</td><td>&lt;x&gt;</td>" in html, html
    page = run(kernel, "%%run --display text/html\n" + writes('"<b>bold</b>"'))
    assert page.of("display_data")[0]["data"]["text/html"] == "<b>bold</b>"
    svg = run(kernel, "%%run --display image/svg+xml\n" + writes('"<svg xmlns=\\"http://www.w3.org/2000/svg\\"/>"'))
    assert svg.of("display_data")[0]["data"]["image/svg+xml"].startswith("<svg")


def test_display_refusals(kernel):
    bad = run(kernel, "%%run --display image/png\n" + writes('"not a png"'))
    assert bad.status == "error" and "not a PNG" in bad.error["evalue"], bad.outputs
    ppm = run(kernel, "%%run --display ppm\n" + writes('"P6\\n2 2\\n255\\nab"'))
    assert ppm.status == "error" and "bytes of pixels" in ppm.error["evalue"], ppm.outputs
    kind = run(kernel, "%%run --display image/gif\n" + writes('"x"'))
    assert kind.status == "error" and "image/gif" in kind.error["evalue"]
    failed = run(kernel, "%%run --display text/html\n" + writes('"<b>partial"', status=3))
    assert failed.status == "error" and failed.stream("stdout") == "<b>partial"  # shown as text
    cut = run(kernel, "%%run --display text/html --max-output 4\n" + writes('"<b>bold</b>"'))
    assert cut.status == "error" and "--max-output" in cut.error["evalue"], cut.outputs


# -- WebAssembly in cells ------------------------------------------------------------------------


SPARE = """edition 5;
fn spare(clock: Clock) -> [] int {
    borrow clock as &c in {
        let a = fork_clock(c);
        release(a);
    }
    release(clock);
    return 0;
}
fn main(world: World) -> [] int {
    let Split { io, ffi, fs, heap, args, net, clock } = split(world);
    release(io); release(ffi); release(fs); release(heap); release(args); release(net);
    return spare(clock);
}
"""


def test_run_target_wasm(kernel):
    cell = run(kernel, "%%run --target wasm32-wasip1 --expect-status 3\n" + writes('"hello, wasm\\n"', status=3))
    assert cell.status == "ok", cell.outputs
    assert cell.stream("stdout") == "hello, wasm\n"
    assert cell.of("execute_result")[0]["metadata"]["cancho"]["backend"] == "wasm32-wasip1"
    trap = run(kernel, "%%run --target wasm32-wasip1 --expect-trap\nfn main(world: World) -> [] int {\n"
                       "    release(world);\n    return trap();\n}\n")
    assert trap.status == "ok", trap.outputs
    assert "trapped" in trap.stream("stderr")
    refused = run(kernel, "%%run --target wasm32-wasip1\n" + SPARE)
    assert refused.status == "error" and refused.error["ename"] == "unsupported-on-target", refused.outputs
    assert "cell[" in "".join(refused.error["traceback"])  # located in the cell
    host = run(kernel, "%%run\n" + SPARE)
    assert host.status == "ok", host.outputs  # the same cell builds for the host
    run(kernel, "%reset")  # SPARE set the session's edition
    both = run(kernel, "%%run --target wasm32-wasip1 --backend exe\n" + writes('"x"'))
    assert both.status == "error" and "--backend" in both.error["evalue"]
    unknown = run(kernel, "%%run --target riscv64\n" + writes('"x"'))
    assert unknown.status == "error" and "riscv64" in unknown.error["evalue"]


def test_authority_target_wasm_lists_the_modules_imports(kernel):
    cell = run(kernel, "%%authority --target wasm32-wasip1\n" + writes('"x"'))
    assert cell.status == "ok", cell.outputs
    data = cell.of("display_data")[0]
    text = data["data"]["text/plain"]
    assert "imports (wasm32-wasip1)" in text and "wasi_snapshot_preview1.fd_write" in text, text
    assert "fd_write" in data["data"]["text/html"]
    assert "wasi_snapshot_preview1.fd_write" in data["metadata"]["cancho"]["authority"]["wasi"]["imports"]
    host = run(kernel, "%%authority\n" + writes('"x"'))
    assert "imports" not in host.of("display_data")[0]["data"]["text/plain"]
    bad = run(kernel, "%%authority --target x86\n" + writes('"x"'))
    assert bad.status == "error"


def test_display_hostile_images_are_refused_at_once(kernel):
    """A header promising a huge image, a P3 with a word for a sample: refused, the kernel alive."""
    huge = run(kernel, "%%run --display ppm\n" + writes('"P6\\n100000 100000\\n255\\n"'))
    assert huge.status == "error" and "pixels" in huge.error["evalue"], huge.outputs
    word = run(kernel, "%%run --display ppm\n" + writes('"P3\\n1 1\\n255\\n1 two 3\\n"'))
    assert word.status == "error" and "not a number" in word.error["evalue"], word.outputs
    p3 = run(kernel, "%%run --display ppm\n" + writes('"P3 2 1 15 15 0 0 0 15 0"'))
    assert p3.status == "ok", p3.outputs
    assert [p[:3] for p in png_pixels(p3.of("display_data")[0]["data"]["image/png"])[1]] == \
        [(255, 0, 0), (0, 255, 0)]
    assert run(kernel, "%%run\n" + writes('"alive\\n"')).stream("stdout") == "alive\n"


def test_ppm_of_16_bit_samples_is_scaled():
    import base64

    from cancho_kernel.kernel.program_display import ppm_to_png

    png, w, h = ppm_to_png(b"P6 2 1 65535 " + b"\xff\xff\x00\x00\x80\x00" + b"\x00\x00\xff\xff\x00\x00")
    assert (w, h) == (2, 1)
    assert [p[:3] for p in png_pixels(base64.b64encode(png).decode())[1]] == [(255, 0, 127), (0, 255, 0)]


def test_annotate_puts_instructions_under_their_cell_lines(kernel):
    """`--annotate`: each block under `cell[N]:L: source`; the checked `+`'s overflow test is
    under line 6 (`total = total + k;`, line 1 being the directive), both in IR and assembly."""
    ir = run(kernel, "%%ir --annotate --fn k_checked\n" + KERNELS)
    assert ir.status == "ok", ir.outputs
    lines = ir.shown.splitlines()
    heads = [line for line in lines if line.startswith("; cell[")]
    assert any(h.endswith(":6: total = total + k;") for h in heads), heads
    at = next(i for i, line in enumerate(lines) if line.endswith(":6: total = total + k;"))
    assert "sadd.with.overflow" in lines[at + 1], lines[at:at + 3]
    assert "!dbg" not in ir.shown
    asm = run(kernel, "%%asm --annotate --fn k_checked\n" + KERNELS)
    assert asm.status == "ok", asm.outputs
    alines = asm.shown.splitlines()
    at = next(i for i, line in enumerate(alines) if line.endswith(":6: total = total + k;"))
    assert alines[at + 1].split()[0] == "addq" and alines[at + 2].split()[0] == "jo", alines[at:at + 3]
    assert ".loc" not in asm.shown and ".Ltmp" not in asm.shown
    plain = run(kernel, "%%asm --fn k_checked\n" + KERNELS)
    assert "cell[" not in plain.shown and ".loc" not in plain.shown  # the run's code has no lines
