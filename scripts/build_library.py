"""Build the notebook library: execute every notebook in notebooks/, export each as HTML, and
write an index that says what happened in this run (the README's main job).

    python scripts/build_library.py [OUT]                 # default OUT: out/
    python scripts/build_library.py OUT --only NAME.ipynb  # rebuild one; the index keeps the others

Each notebook runs in a scratch copy of ``notebooks/`` with nothing beside it (as a hub's
per-student copy or a downloaded notebook has it: the examples come from the package), so the
repository's stored outputs stay as committed. One progress line per notebook, coloured only on
a terminal. Into OUT go the executed notebook (its run recorded in ``metadata.cancho.run``:
cancho_kernel/library_run.py), its page (with a Binder launch link and, when it failed, the
failing cell: cancho_kernel/library_export.py) and the index: per notebook, executed or FAILED
(the failing cell's first line, linked), the claims held, the figures more than 2× off the
document's, beside the author's summary from the notebook's own ``metadata.cancho`` (the
document it reproduces and a one-line verdict, also written to ``notebooks/README.md`` with
``--write-readme``). A failed notebook makes the command exit 1; the index is written anyway.
"""

from __future__ import annotations

import argparse
import html
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import nbformat

from cancho_kernel.library_export import Repository, export, inline_html, inline_text, repository
from cancho_kernel.library_run import DIFFERS_BEYOND, RunStatus, RunSummary, failing_cell, strip_ansi, summarise

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


def unlinked(markdown: str) -> str:
    """A title's Markdown with each link reduced to its text: the title is itself a link in
    the README's table, and a link inside a link's text is not a link (it showed as raw text)."""
    return re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", markdown)


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
        lines.append(f"| [{unlinked(e.title)}]({e.name}) | {docs} | {e.verdict or '—'} |")
    lines.append("")
    lines.append("This file is generated from each notebook's `metadata.cancho` by "
                 "`python scripts/build_library.py --write-readme` (a test checks it is current).")
    return "\n".join(lines) + "\n"


def first_plot(nb) -> Plot | None:
    """The notebook's first image and its alt text (the bench plot says what it shows)."""
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            png = out.get("data", {}).get("image/png")
            if png:
                alt = (out.get("metadata", {}).get("image/png") or {}).get("alt") or ""
                return Plot(png if isinstance(png, str) else "".join(png), alt)
    return None


@dataclass(frozen=True)
class Plot:
    """A thumbnail for the index: base64 PNG and its alt text."""

    png: str
    alt: str


@dataclass(frozen=True)
class Built:
    """One notebook as this build (or an earlier one, kept in OUT) left it."""

    entry: Entry
    run: RunSummary | None     # None: never built into OUT
    plot: Plot | None


def _run_cell(b: Built, page: str) -> str:
    """The index's "this run" column."""
    run = b.run
    if run is None:
        return "<i>not built yet</i>"
    if run.status is RunStatus.FAILED:
        f = run.failure
        where = (f' at <a class="failed-cell" href="{page}#{html.escape("cell-id=" + (f.cell_id or ""))}">'
                 f"<code>{html.escape(f.first_line)}</code></a>" if f and f.cell_id else "")
        why = f"<br><small>{html.escape(f.message)}</small>" if f and f.message else ""
        parts = [f'<span class="failed" style="color:#b00020"><b>FAILED</b>{where}{why}</span>']
    elif run.status is RunStatus.STORED:
        parts = ["stored outputs (not executed by this build)"]
    else:
        parts = [f"executed in {run.seconds:.0f} s" if run.seconds is not None else "executed"]
    if run.claims:
        held = run.claims_held
        colour = "" if held == len(run.claims) else ' style="color:#b00020"'
        parts.append(f"<span{colour}>claims held {held}/{len(run.claims)}</span>")
    for s in run.differing:
        parts.append(f"figure <code>{html.escape(s.text)}</code>: {s.value:.2f} here, {s.document:.2f} in the "
                     f"document (×{s.factor:.1f})" if s.value is not None and s.document is not None else
                     f"figure <code>{html.escape(s.text)}</code> differs (×{s.factor:.1f})")
    return "<br>".join(parts)


def index_html(items: list[Built], repo: Repository | None = None) -> str:
    rows = []
    for b in items:
        e = b.entry
        docs = ", ".join(f'<a href="{REFERENCE_DOCS}{html.escape(d)}"><code>{html.escape(d)}</code></a>'
                         for d in e.documents) or "—"
        thumb = (f'<img alt="{html.escape(b.plot.alt or "first plot of " + inline_text(e.title))}" '
                 f'src="data:image/png;base64,{b.plot.png}" style="max-width:240px">' if b.plot else "")
        page = html.escape(e.name.replace(".ipynb", ".html"))
        binder = (f'<br><small><a class="binder" href="{html.escape(repo.binder(e.name))}">run on Binder</a></small>'
                  if repo else "")
        rows.append(f'<tr><td><a href="{page}">{inline_html(e.title)}</a>{binder}</td>'
                    f"<td>{_run_cell(b, page)}</td><td>{docs}</td>"
                    f"<td>{html.escape(e.verdict) or '—'}</td><td>{thumb}</td></tr>")
    return ("<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>cancho notebooks</title>"
            "<style>body{font-family:sans-serif;margin:2em;max-width:90em}td,th{border-bottom:1px solid #ddd;"
            "padding:.5em;vertical-align:top;text-align:left}td:nth-child(2){min-width:14em}</style></head><body>"
            "<h1>The cancho notebook library</h1><p>Design documents of the reference implementation, "
            "re-run on this machine with cancho-kernel. Each page is an executed notebook; <i>this run</i> says "
            "what happened when it was executed (a claim fails its notebook; a figure is shown beside the "
            f"document's own number and listed here when it is more than {DIFFERS_BEYOND:g}× away), "
            "<i>the author's summary</i> is the verdict the notebook was committed with.</p>"
            "<table><thead><tr><th>notebook</th><th>this run</th><th>reproduces</th><th>the author's summary</th>"
            f"<th>first plot</th></tr></thead><tbody>{''.join(rows)}</tbody></table></body></html>")


def _execute(nb, path: Path, timeout: int, sockets: Path) -> BaseException | None:
    """Run the notebook in its folder; the exception that stopped it, if any. The kernel talks
    over IPC (Unix sockets named ``SOCKETS-N``, an absolute path: the kernel runs in the
    notebook's folder, the client here), so ipykernel has no unencrypted-TCP warning to print
    per notebook."""
    from nbclient import NotebookClient
    from traitlets.config import Config

    try:
        NotebookClient(nb, timeout=timeout, kernel_name=nb.metadata["kernelspec"]["name"],
                       config=Config({"KernelManager": {"transport": "ipc", "ip": str(sockets)}}),
                       resources={"metadata": {"path": str(path.parent)}}).execute()
    except Exception as e:  # a failed cell: still export what ran, and say so
        return e
    return None


def _kept(out: Path, source: Path, name: str) -> Built | None:
    """An earlier build's result for ``name`` (``--only`` keeps the others)."""
    kept = out / name
    if not kept.is_file():
        return None
    nb = nbformat.read(kept, as_version=4)
    run = nb.metadata.get("cancho", {}).get("run")
    return Built(entry_of(source / name), RunSummary.from_json(run) if run else None, first_plot(nb))


def _red(text: str) -> str:
    """Colour only on a terminal: a log file or a CI page gets the plain word."""
    return f"\x1b[31m{text}\x1b[0m" if sys.stdout.isatty() else text


def _build_one(path: Path, out: Path, execute: bool, timeout: int, repo: Repository | None) -> Built:
    """Execute (or take as stored), record, export and keep one notebook."""
    nb = nbformat.read(path, as_version=4)
    t0 = time.monotonic()
    error = _execute(nb, path, timeout, path.parent.parent / "kernel") if execute else None
    seconds = time.monotonic() - t0 if execute else None
    status = RunStatus.STORED if not execute else RunStatus.FAILED if error is not None else RunStatus.EXECUTED
    if status is RunStatus.EXECUTED and failing_cell(nb) is not None:
        status = RunStatus.FAILED   # an error output nbclient let through (allow_errors in the notebook)
    run = summarise(nb, status, seconds, error)
    nb.metadata.setdefault("cancho", {})["run"] = run.to_json()
    nbformat.write(nb, out / path.name)
    page = export(nb, repo.binder(path.name) if repo else None, run.failure)
    (out / path.name.replace(".ipynb", ".html")).write_text(page, encoding="utf-8")
    return Built(entry_of(path, nb), run, first_plot(nb))


def _progress(b: Built) -> str:
    """The rest of a notebook's progress line: ``ok 12 s, claims held 3/3`` or ``FAILED 4 s,
    claims held 0/1 at `FIRST LINE`: MESSAGE``."""
    run = b.run
    took = f" {run.seconds:.0f} s" if run.seconds is not None else " (stored)"
    claims = f", claims held {run.claims_held}/{len(run.claims)}" if run.claims else ""
    if run.status is RunStatus.FAILED:
        f = run.failure
        at = f" at `{f.first_line}`: {f.message}" if f else ""
        return _red("FAILED") + took + claims + strip_ansi(at)[:300]
    return "ok" + took + claims


def build(out: Path, names: list[str] | None = None, timeout: int = 900, execute: bool = True,
          source: Path = NOTEBOOKS) -> int:
    """Execute (unless ``execute`` is false: the stored outputs) and export each notebook, then
    write the index (every notebook: those not built now keep the entry of the last build in
    OUT); 1 when a notebook failed."""
    out.mkdir(parents=True, exist_ok=True)
    repo = repository(ROOT / "pyproject.toml")
    every = sorted(p.name for p in source.glob("*.ipynb"))
    unknown = sorted(set(names or ()) - set(every))
    if unknown:
        print(f"no such notebook: {', '.join(unknown)} (the library has {', '.join(every)})", file=sys.stderr)
        return 2
    chosen = [n for n in every if not names or n in names]
    # a scratch copy of notebooks/ alone, as a hub or a download has it: nothing beside it
    scratch = Path(tempfile.mkdtemp(prefix="cancho-library-"))
    shutil.copytree(source, scratch / "notebooks")
    built: dict[str, Built] = {}
    start = time.monotonic()
    try:
        for i, name in enumerate(chosen, 1):
            print(f"[{i}/{len(chosen)}] {name} ...", end=" ", flush=True)
            built[name] = _build_one(scratch / "notebooks" / name, out, execute, timeout, repo)
            print(_progress(built[name]), flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    items = [built.get(n) or _kept(out, source, n) or Built(entry_of(source / n), None, None) for n in every]
    (out / "index.html").write_text(index_html(items, repo), encoding="utf-8")
    failures = sum(b.run.status is RunStatus.FAILED for b in built.values())
    print(f"wrote {out / 'index.html'}: {len(built)} notebook{'s' if len(built) != 1 else ''} built in "
          f"{time.monotonic() - start:.0f} s" + (f", {failures} FAILED" if failures else "")
          + (f"; {len(every) - len(built)} kept from earlier builds" if len(built) < len(every) else ""))
    return 1 if failures else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", nargs="?", default=str(ROOT / "out"))
    ap.add_argument("--only", nargs="*", help="notebook file names to build; the index keeps the others' "
                                              "entries from the last build in OUT (default: all)")
    ap.add_argument("--stored", action="store_true", help="export the stored outputs without executing")
    ap.add_argument("--notebooks", default=str(NOTEBOOKS), help="the folder of notebooks (default: notebooks/)")
    ap.add_argument("--write-readme", action="store_true", help="write notebooks/README.md and stop")
    ns = ap.parse_args(argv)
    if ns.write_readme:
        (NOTEBOOKS / "README.md").write_text(readme(entries()), encoding="utf-8")
        print(f"wrote {NOTEBOOKS / 'README.md'}")
        return 0
    return build(Path(ns.out), ns.only, execute=not ns.stored, source=Path(ns.notebooks))


if __name__ == "__main__":
    sys.exit(main())
