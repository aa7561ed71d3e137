"""scripts/build_library.py says what happened in this run (issue 23, items 3, 6 and 7): a planted
notebook whose claim fails is flagged FAILED in the index, with its failing cell's first line
linked to the cell in its page; `--only` rebuilds one notebook and keeps the others' entries and
pages; titles render as text; every entry and page carries a Binder link from pyproject.toml;
the progress has no colour codes off a terminal and no per-notebook TCP warning. The run's
record is read from the outputs in both forms a bench writes (cancho_kernel/library_run.py).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from bs4 import BeautifulSoup
from kernel_client import HELLO

from cancho_kernel.library_export import inline_html, inline_text, repository
from cancho_kernel.library_run import RunStatus, RunSummary, StatementKind, statements_of_output

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "build_library.py"
CLAIM_LINE = '%bench twin_a twin_b --runs 1 --claim "twin_a / twin_b < 0.02"'
TITLE = "Planted ([`planted.md`](https://example.invalid/planted.md)) *claim*"


def _notebook(title: str, cells: list[str]) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "cancho", "display_name": "cancho", "language": "cancho"}
    nb.metadata["language_info"] = {"name": "cancho", "pygments_lexer": "cancho", "file_extension": ".cho"}
    nb.metadata["cancho"] = {"documents": ["planted.md"], "verdict": "the author says it holds"}
    nb.cells = [nbformat.v4.new_markdown_cell(f"# {title}\n\nA planted notebook.")]
    nb.cells += [nbformat.v4.new_code_cell(src) for src in cells]
    return nb


@pytest.fixture(scope="module")
def planted(tmp_path_factory) -> Path:
    """A library of two: one that holds, one whose claim cannot hold (two identical programs
    compared as if one were 50 times faster)."""
    d = tmp_path_factory.mktemp("planted")
    nbformat.write(_notebook("Fine", ["%who"]), d / "fine.ipynb")
    nbformat.write(_notebook(TITLE, [f"%%run --name twin_a\n{HELLO}", f"%%run --name twin_b\n{HELLO}",
                                     "\n" + CLAIM_LINE, "%who"]), d / "planted.ipynb")
    return d


def _build(out: Path, source: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), str(out), "--notebooks", str(source), *args],
                          capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def library(planted, tmp_path_factory, cancho_kernelspec):
    out = tmp_path_factory.mktemp("library")
    first = _build(out, planted)
    only = _build(out, planted, "--only", "fine.ipynb")
    return out, first, only


def _rows(index: Path) -> dict[str, BeautifulSoup]:
    soup = BeautifulSoup(index.read_text(), "html.parser")
    return {tr.find("a")["href"]: tr for tr in soup.select("tbody tr")}


def test_a_failed_claim_fails_the_build_and_is_flagged_in_the_index(library):
    out, first, _ = library
    assert first.returncode == 1, first.stdout + first.stderr
    rows = _rows(out / "index.html")
    row = rows["planted.html"]
    failed = row.select_one(".failed")
    assert failed is not None and "FAILED" in failed.get_text()
    assert "color:#b00020" in failed["style"]
    link = failed.select_one("a.failed-cell")
    assert link.get_text() == CLAIM_LINE
    nb = nbformat.read(out / "planted.ipynb", as_version=4)
    cell = next(c for c in nb.cells if c.source.lstrip().startswith("%bench"))
    assert link["href"] == f"planted.html#cell-id={cell.id}"
    page = BeautifulSoup((out / "planted.html").read_text(), "html.parser")
    assert page.find(id=f"cell-id={cell.id}") is not None        # the link lands on the cell
    assert "claims held 0/1" in row.get_text()
    assert "does not hold" in row.get_text()                     # the error's line, without colour codes
    assert "the author says it holds" in row.get_text()          # the static verdict stays beside it
    assert "executed in" in rows["fine.html"].get_text() and not rows["fine.html"].select(".failed")


def test_the_run_is_recorded_in_the_executed_notebook(library):
    out, _, _ = library
    run = RunSummary.from_json(nbformat.read(out / "planted.ipynb", as_version=4).metadata["cancho"]["run"])
    assert run.status is RunStatus.FAILED and run.failure.first_line == CLAIM_LINE
    assert [(s.kind, s.text, s.held) for s in run.statements] == [
        (StatementKind.CLAIM, "twin_a / twin_b < 0.02", False)]
    fine = nbformat.read(out / "fine.ipynb", as_version=4).metadata["cancho"]["run"]
    assert fine["status"] == "executed" and fine["claims_total"] == 0


def test_only_replaces_one_entry_and_keeps_the_others(library):
    out, _, only = library
    assert only.returncode == 0, only.stdout + only.stderr
    assert "1 notebook built" in only.stdout and "1 kept from earlier builds" in only.stdout
    rows = _rows(out / "index.html")
    assert set(rows) == {"fine.html", "planted.html"}
    assert rows["planted.html"].select_one(".failed") is not None   # the earlier run's entry, kept
    assert (out / "planted.html").is_file() and (out / "fine.html").is_file()


def test_titles_render_as_text_and_binder_links_are_built_from_pyproject(library):
    out, _, _ = library
    index = (out / "index.html").read_text()
    assert "](" not in index and "[`" not in index
    row = _rows(out / "index.html")["planted.html"]
    assert row.find("a").decode_contents() == "Planted (<code>planted.md</code>) <em>claim</em>"
    repo = repository(ROOT / "pyproject.toml")
    assert (repo.owner, repo.name) == ("alpibrusl", "cancho-kernel")
    binder = "https://mybinder.org/v2/gh/alpibrusl/cancho-kernel/HEAD?labpath=notebooks%2Fplanted.ipynb"
    assert row.select_one("a.binder")["href"] == binder
    page = BeautifulSoup((out / "planted.html").read_text(), "html.parser")
    assert page.select_one("a.cancho-binder")["href"] == binder
    assert page.select_one(".cancho-failed code").get_text() == CLAIM_LINE


def test_every_image_has_alt_text_naming_the_programs(library):
    out, first, _ = library
    page = BeautifulSoup((out / "planted.html").read_text(), "html.parser")
    images = page.select(".jp-OutputArea img")
    assert images, "the bench's plot is missing from the page"
    for img in images:
        assert "twin_a" in img["alt"] and "twin_b" in img["alt"], img.get("alt")
    assert "Alternative text is missing" not in first.stderr


def test_progress_is_plain_text_off_a_terminal_and_the_transport_warning_is_gone(library):
    _, first, only = library
    for proc in (first, only):
        assert "\x1b" not in proc.stdout and "\x1b" not in proc.stderr
        assert "without encryption" not in proc.stderr
    assert re.search(r"planted\.ipynb \.\.\. FAILED \d+ s, claims held 0/1 at `%bench twin_a", first.stdout), first.stdout
    assert re.search(r"fine\.ipynb \.\.\. ok \d+ s", first.stdout), first.stdout


def test_an_unknown_notebook_is_a_usage_error(planted, tmp_path):
    proc = _build(tmp_path, planted, "--only", "nope.ipynb")
    assert proc.returncode == 2 and "no such notebook: nope.ipynb" in proc.stderr
    assert not (tmp_path / "index.html").exists()


def test_statements_are_read_in_both_forms():
    old = {"cancho": {"bench": {"claims": [{"claim": "a / b < 2", "ratio": 1.5, "holds": True}]}}}
    new = {"cancho": {"bench": {"claims": [{"claim": "a / b < 2", "ratio": 1.5, "holds": True}]},
                      "statements": [
                          {"kind": "claim", "text": "a / b < 2", "value": 1.5, "document": None,
                           "verdict": "held", "factor": None},
                          {"kind": "figure", "text": "C / a", "value": 0.4, "document": 1.0,
                           "verdict": "differs", "factor": 2.5},
                          {"kind": "figure", "text": "C / b", "value": 1.1, "document": 1.0,
                           "verdict": "holds", "factor": None}]}}
    (claim,) = statements_of_output(old)
    assert (claim.kind, claim.held, claim.value) == (StatementKind.CLAIM, True, 1.5)
    read = statements_of_output(new)
    assert [s.kind for s in read] == [StatementKind.CLAIM, StatementKind.FIGURE, StatementKind.FIGURE]
    assert [s.differs for s in read] == [False, True, False]
    assert read[2].factor == pytest.approx(1.1)                  # computed from value and document
    # a factor given below 1 (document / value) is the same distance
    (inverse,) = statements_of_output({"cancho": {"statements": [
        {"kind": "figure", "text": "x", "value": 5.0, "document": 1.0, "verdict": "differs", "factor": 0.2}]}})
    assert inverse.factor == pytest.approx(5.0) and inverse.differs
    assert statements_of_output({"cancho": {"statements": [{"kind": "bogus"}]}}) == []
    assert statements_of_output({}) == [] and statements_of_output({"cancho": "x"}) == []


def test_the_readme_index_has_no_link_inside_a_title_link():
    import importlib.util

    spec = importlib.util.spec_from_file_location("build_library_for_test", SCRIPT)
    lib = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = lib
    try:
        spec.loader.exec_module(lib)
    finally:
        del sys.modules[spec.name]
    assert lib.unlinked(TITLE) == "Planted (`planted.md`) *claim*"
    table = lib.readme(lib.entries())
    assert not re.search(r"\[[^\]]*\[", table.split("|---|")[-1]), "a title still holds a link"


def test_titles_are_rendered_safely():
    assert inline_html("a <script>alert(1)</script> *b*") == "a alert(1) <em>b</em>"
    assert inline_text(TITLE) == "Planted (planted.md) claim"
