"""Every notebook's claims hold under the host CPU and under the baseline CPU (``CANCHO_CPU``).

A claim (``--claim``) is kept only for what a design document asserts of any x86-64 or AArch64
machine (docs/claims.md); running the claims under two CPUs is what keeps that promise checkable
on one machine. The baseline CPU (LLVM's default CPU with no features, ``cc -march=x86-64``) is
covered by tests/test_notebooks.py, whose strict nbval runs every notebook with
``CANCHO_CPU=baseline`` against outputs stored under it: a claim that fails there errors and
prints ``DOES NOT HOLD`` where ``holds`` is stored. This test executes each notebook that carries
a claim through the ``cancho`` kernel for the host's CPU (its features, ``cc
-march=native``) and checks that every claim held (the stored outputs are not compared: listings
differ by CPU). ``CANCHO_CLAIMS_CPUS=host,baseline`` runs both here. Figures (``--figure``) never
fail; their values under both CPUs are what docs/claims.md tabulates.

Benches run as the notebooks write them (3 runs after a warm-up; ``CANCHO_BENCH_RUNS`` pinned so a
caller's full mode does not make the suite slow). ``python tests/test_notebook_claims.py [--cpu host|baseline]
[NAME.ipynb ...]`` prints every statement's value under both CPUs (or one) as JSON, for docs/claims.md.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
CPUS = ("host", "baseline")
SUITE_CPUS = tuple(c for c in os.environ.get("CANCHO_CLAIMS_CPUS", "host").split(",") if c in CPUS) or ("host",)


def _with_statements(flags: tuple[str, ...] = ("--claim", "--figure")) -> list[Path]:
    return sorted(p for p in NOTEBOOKS.glob("*.ipynb")
                  if any(c.cell_type == "code" and any(f in c.source for f in flags)
                         for c in nbformat.read(p, as_version=4).cells))


def _statements(cell) -> list[dict]:
    found = []
    for out in cell.get("outputs", []):
        found += out.get("metadata", {}).get("cancho", {}).get("statements", [])
    return found


def execute(path: Path, cpu: str) -> tuple[list[dict], list[str]]:
    """Run the whole notebook (a bench needs the cells that define its programs) under ``cpu``;
    returns every statement recorded and the errors of cells not tagged ``raises-exception``."""
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    env = {**os.environ, "CANCHO_CPU": cpu, "CANCHO_BENCH_RUNS": "3", "PYTHONPATH": str(ROOT)}
    client = NotebookClient(nb, kernel_name="cancho", timeout=300, allow_errors=True,
                            resources={"metadata": {"path": str(NOTEBOOKS)}})
    client.execute(env=env)
    statements, errors = [], []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        statements += _statements(cell)
        expected = "raises-exception" in cell.metadata.get("tags", [])
        for out in cell.outputs:
            if out.output_type == "error" and not expected:
                errors.append(f"{cell.source.splitlines()[0]}: {out.ename}: {out.evalue}")
    return statements, errors


@pytest.mark.usefixtures("cancho_kernelspec")
@pytest.mark.parametrize("cpu", SUITE_CPUS)
@pytest.mark.parametrize("path", _with_statements(("--claim",)), ids=lambda p: p.stem)
def test_every_claim_holds_under_both_cpus(path: Path, cpu: str) -> None:
    """Notebooks with a claim only: a figure never fails, so a notebook of figures alone has
    nothing to check here (its figures are recomputed, under the baseline, by the strict run)."""
    statements, errors = execute(path, cpu)
    assert not errors, errors
    claims = [s for s in statements if s["kind"] == "claim"]
    failed = [s for s in claims if s["verdict"] != "held"]
    assert not failed, [(s["text"], s["value"]) for s in failed]
    written = sum(c.source.split("\n", 1)[0].count("--claim ")
                  for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code")
    assert len(claims) == written  # every claim was judged, none skipped
    assert all(s["verdict"] in ("holds", "differs") for s in statements if s["kind"] == "figure")


def test_the_baseline_cpu_is_checked_by_the_strict_notebook_run() -> None:
    """The other half of the two CPUs: tests/test_notebooks.py runs nbval under the baseline."""
    source = (ROOT / "tests" / "test_notebooks.py").read_text(encoding="utf-8")
    assert '"CANCHO_CPU": "baseline"' in source


def test_the_claims_table_lists_every_statement() -> None:
    """docs/claims.md carries one row per claim and figure in the notebooks."""
    table = (ROOT / "docs" / "claims.md").read_text(encoding="utf-8")
    for path in _with_statements():
        for cell in nbformat.read(path, as_version=4).cells:
            head = cell.source.split("\n", 1)[0] if cell.cell_type == "code" else ""
            for flag in ("--claim", "--figure"):
                for part in head.split(f'{flag} "')[1:]:
                    text = part.split('"', 1)[0]
                    assert f"`{text}`" in table, (path.name, text)


if __name__ == "__main__":
    args = sys.argv[1:]
    cpus = CPUS
    if args[:1] == ["--cpu"]:
        cpus, args = (args[1],), args[2:]
    report = {}
    for p in [NOTEBOOKS / a for a in args] or _with_statements():
        for c in cpus:
            stmts, errs = execute(p, c)
            for s in stmts:
                report.setdefault(f"{p.stem}: {s['text']}", {})[c] = s["value"]
            if errs:
                report.setdefault(f"{p.stem}: errors", {})[c] = errs
            print(p.stem, c, file=sys.stderr, flush=True)
    print(json.dumps(report, indent=1))
