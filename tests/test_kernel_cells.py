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
    return double(9223372036854775807);
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
