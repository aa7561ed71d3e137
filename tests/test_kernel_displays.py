"""The audit of what every output the kernel publishes looks like in each frontend.

JupyterLab and nbconvert show ONE format per output: Lab the renderer of lowest rank among the
bundle's types, nbconvert's HTML the first type of its priority list. A bundle that holds a plot
beside a table, or JSON beside a table, shows only one of them. This test runs one cell of each
kind through a real kernel and checks, for every display, that both frontends pick the format it
was meant to show. (tests/browser checks the same in Chromium.)
"""

from __future__ import annotations

import pytest
from kernel_client import HELLO, run

# JupyterLab 4's default renderers (@jupyterlab/rendermime) and the JSON and widget extensions;
# lower rank wins.
LAB_RANK = {"application/vnd.jupyter.widget-view+json": 0, "application/json": 0, "text/html": 50,
            "text/markdown": 60, "text/latex": 70, "image/svg+xml": 80, "image/png": 90,
            "image/jpeg": 90, "application/javascript": 110, "text/plain": 120}
# nbconvert's HTMLExporter.display_data_priority.
NBCONVERT = ["application/vnd.jupyter.widget-view+json", "application/javascript", "text/html",
             "text/markdown", "image/svg+xml", "text/vnd.mermaid", "text/latex", "image/png", "image/jpeg",
             "text/plain"]


def lab_pick(data: dict) -> str:
    return min((t for t in data if t in LAB_RANK), key=LAB_RANK.__getitem__)


def nbconvert_pick(data: dict) -> str:
    return next(t for t in NBCONVERT if t in data)


C_HELLO = '#include <stdio.h>\nint main(void) { fputs("hello, world\\n", stdout); return 0; }\n'

# (what the cell is, its code, the format each of its displays must show, in order)
CASES = [
    ("a run's outcome", HELLO, ["text/plain"]),
    ("items defined", "fn twice(x: int) -> [] int { return x * 2; }", ["text/plain"]),
    ("%%check", "%%check\nfn thrice(x: int) -> [] int { return x * 3; }", ["text/plain"]),
    ("%%refused", "%%refused unknown-name\nfn f() -> [] int { return nope; }", ["text/plain"]),
    ("%who", "%who", ["text/html"]),
    ("%help", "%help", ["text/html"]),
    ("%%ir", "%%ir\n" + HELLO, ["text/plain"]),
    ("%%asm", "%%asm\n" + HELLO, ["text/plain"]),
    ("a C baseline", "%%c hello\n" + C_HELLO, ["text/plain"]),
    ("a C baseline run", "%%c hello2 --run\n" + C_HELLO, ["text/plain"]),
    ("%%authority", "%%authority\n" + HELLO, ["text/html"]),
    ("%authority --json", "%authority --json", ["text/plain"]),
    # progress line, plot, table
    ("%%bench", "%%bench C:hello --runs 1 --warmup 0\n" + HELLO, ["text/html", "image/png", "text/html"]),
    ("%backend", "%backend", ["text/plain"]),
    ("%limits", "%limits", ["text/plain"]),
]


@pytest.mark.parametrize("what,code,shown", CASES, ids=[c[0] for c in CASES])
def test_each_display_shows_its_format_in_lab_and_nbconvert(kernel, what, code, shown):
    cell = run(kernel, code)
    assert cell.status == "ok", cell.outputs
    bundles = [c["data"] for c in cell.of("display_data") + cell.of("execute_result")]
    picked = [(lab_pick(d), nbconvert_pick(d)) for d in bundles]
    assert [lab for lab, _nb in picked] == shown, (what, [sorted(d) for d in bundles])
    assert [nb for _lab, nb in picked] == shown, (what, [sorted(d) for d in bundles])
    for d in bundles:
        assert "application/json" not in d, what       # JSON only in metadata (or as --json text)
        assert not ({"image/png", "text/html"} <= set(d)), what


def test_a_refusal_is_an_error_output_with_its_rule(kernel):
    cell = run(kernel, "fn f() -> [] int { return nope; }")
    assert cell.status == "error" and cell.error["ename"] == "unknown-name"
    assert any("unknown-name" in line for line in cell.error["traceback"])
    assert not cell.of("display_data") and not cell.of("execute_result")
