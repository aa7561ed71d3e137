"""Build the notebook library: execute every notebook in notebooks/, export each as HTML, and
write an index (the README's main job).

    python scripts/build_library.py [OUT]          # default OUT: out/

Each notebook runs in a scratch copy of the reading layout (``notebooks/`` beside ``examples/``),
so the repository's stored outputs stay as committed. One progress line per notebook. The index
(``OUT/index.html``, and ``notebooks/README.md`` with ``--write-readme``) comes from each
notebook's own ``metadata.cancho`` entry: the document it reproduces and a one-line verdict —
one catalogue, kept where the notebook is.
"""

from __future__ import annotations

import argparse
import base64
import html
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
REFERENCE_DOCS = "https://github.com/alpibrusl/cancho/blob/main/docs/"


@dataclass(frozen=True)
class Entry:
    """One notebook's line in the index."""

    name: str            # file name, e.g. overflow-cost.ipynb
    title: str           # the first heading of the notebook
    documents: tuple[str, ...]   # reference documents it reproduces (docs/*.md there)
    verdict: str         # what holds here, in one line


def entry_of(path: Path, nb=None) -> Entry:
    nb = nb if nb is not None else nbformat.read(path, as_version=4)
    meta = nb.metadata.get("cancho", {})
    title = path.stem
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("# "):
                    title = line[2:].strip()
                    break
            break
    docs = meta.get("documents", [])
    return Entry(path.name, title, tuple(docs), meta.get("verdict", ""))


def entries() -> list[Entry]:
    return [entry_of(p) for p in sorted(NOTEBOOKS.glob("*.ipynb"))]


def readme(items: list[Entry]) -> str:
    """notebooks/README.md: the index as Markdown."""
    lines = ["# The notebook library", "",
             "Each notebook re-runs a design document of the reference implementation "
             "([alpibrusl/cancho](https://github.com/alpibrusl/cancho), `docs/`): every claim is a cell "
             "whose output is recomputed, so `pytest --nbval` fails when a claim stops holding. "
             "`python scripts/build_library.py` executes them all and writes `out/index.html`; "
             "`CANCHO_BENCH_RUNS=15` gives every bench the runs to quote (CI uses each cell's quick count).",
             "", "| notebook | reproduces | what holds here |", "|---|---|---|"]
    for e in items:
        docs = ", ".join(f"[`{d}`]({REFERENCE_DOCS}{d})" for d in e.documents) or "—"
        lines.append(f"| [{e.title}]({e.name}) | {docs} | {e.verdict or '—'} |")
    lines.append("")
    lines.append("This file is generated from each notebook's `metadata.cancho` by "
                 "`python scripts/build_library.py --write-readme` (a test checks it is current).")
    return "\n".join(lines) + "\n"


def first_plot(nb) -> str | None:
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            png = out.get("data", {}).get("image/png")
            if png:
                return png if isinstance(png, str) else "".join(png)
    return None


def index_html(items: list[tuple[Entry, str | None, float | None]]) -> str:
    rows = []
    for e, plot, seconds in items:
        docs = ", ".join(f'<a href="{REFERENCE_DOCS}{html.escape(d)}"><code>{html.escape(d)}</code></a>'
                         for d in e.documents) or "—"
        thumb = (f'<img alt="first plot of {html.escape(e.title)}" src="data:image/png;base64,{plot}" '
                 f'style="max-width:240px">' if plot else "")
        took = "" if seconds is None else f"<br><small>executed in {seconds:.0f} s</small>"
        page = html.escape(e.name.replace(".ipynb", ".html"))
        rows.append(f'<tr><td><a href="{page}">{html.escape(e.title)}</a>{took}</td><td>{docs}</td>'
                    f"<td>{html.escape(e.verdict) or '—'}</td><td>{thumb}</td></tr>")
    return ("<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>cancho notebooks</title>"
            "<style>body{font-family:sans-serif;margin:2em;max-width:80em}td,th{border-bottom:1px solid #ddd;"
            "padding:.5em;vertical-align:top;text-align:left}</style></head><body>"
            "<h1>The cancho notebook library</h1><p>Design documents of the reference implementation, "
            "re-run on this machine with cancho-kernel. Each page is an executed notebook.</p>"
            "<table><thead><tr><th>notebook</th><th>reproduces</th><th>what holds here</th><th>first plot</th>"
            f"</tr></thead><tbody>{''.join(rows)}</tbody></table></body></html>")


def build(out: Path, names: list[str] | None = None, timeout: int = 900, execute: bool = True) -> int:
    """Execute (unless ``execute`` is false: the stored outputs) and export each notebook, then
    write the index; 1 when a notebook failed."""
    from nbclient import NotebookClient
    from nbconvert import HTMLExporter

    out.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="cancho-library-"))
    shutil.copytree(NOTEBOOKS, scratch / "notebooks")
    (scratch / "examples").symlink_to(ROOT / "examples")
    paths = sorted((scratch / "notebooks").glob("*.ipynb"))
    if names:
        paths = [p for p in paths if p.name in names]
    exporter = HTMLExporter()
    done: list[tuple[Entry, str | None, float | None]] = []
    failures = 0
    start = time.monotonic()
    try:
        for i, path in enumerate(paths, 1):
            print(f"[{i}/{len(paths)}] {path.name} ...", end=" ", flush=True)
            nb = nbformat.read(path, as_version=4)
            t0 = time.monotonic()
            try:
                if execute:
                    NotebookClient(nb, timeout=timeout, kernel_name=nb.metadata["kernelspec"]["name"],
                                   resources={"metadata": {"path": str(path.parent)}}).execute()
                ok = True
            except Exception as e:  # a failed cell: still export what ran, and say so
                ok = False
                failures += 1
                print(f"FAILED ({type(e).__name__}: {str(e).strip().splitlines()[-1][:200]})", end=" ")
            seconds = time.monotonic() - t0 if execute else None
            body, _ = exporter.from_notebook_node(nb)
            (out / path.name.replace(".ipynb", ".html")).write_text(body, encoding="utf-8")
            done.append((entry_of(path, nb), first_plot(nb), seconds))
            print(f"{'ok' if ok else ''}" + (f" {seconds:.0f} s" if seconds is not None else " (stored)"), flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    (out / "index.html").write_text(index_html(done), encoding="utf-8")
    print(f"wrote {out / 'index.html'}: {len(done)} notebooks in {time.monotonic() - start:.0f} s"
          + (f", {failures} FAILED" if failures else ""))
    return 1 if failures else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", nargs="?", default=str(ROOT / "out"))
    ap.add_argument("--only", nargs="*", help="notebook file names to build (default: all)")
    ap.add_argument("--stored", action="store_true", help="export the stored outputs without executing")
    ap.add_argument("--write-readme", action="store_true", help="write notebooks/README.md and stop")
    ns = ap.parse_args(argv)
    if ns.write_readme:
        (NOTEBOOKS / "README.md").write_text(readme(entries()), encoding="utf-8")
        print(f"wrote {NOTEBOOKS / 'README.md'}")
        return 0
    return build(Path(ns.out), ns.only, execute=not ns.stored)


if __name__ == "__main__":
    sys.exit(main())
