"""The library runs wherever its folder is copied (issue 23, item 4): a hub copies `notebooks/`
for each student and a reader may download one notebook alone, so nothing a notebook needs may
come through a path relative to the repository. The example programs come from the installed
package: `%load --example NAME` (cancho_kernel/kernel/example_files.py).

The copies are executed in a temporary directory with nothing beside them (no `examples/`, no
repository), to the end: the three notebooks that load examples and two others by default,
every notebook under ``-m slow`` (more than four minutes under load).
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import nbformat
import pytest
from kernel_client import Cell, run

from cancho_kernel.kernel import example_files

pytestmark = pytest.mark.usefixtures("cancho_kernelspec")

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
LOADING = ("bulk-output.ipynb", "line-reading.ipynb", "standard-error.ipynb")
DEFAULT = (*LOADING, "checked-output.ipynb", "authority-model.ipynb")


@pytest.fixture(scope="module")
def lone_dir(tmp_path_factory) -> Path:
    """A directory holding nothing but a notebook would (no examples/ anywhere near it)."""
    d = tmp_path_factory.mktemp("lone")
    (d / "secret.cho").write_text("fn leaked() -> [] int { return 1; }\n")
    return d.resolve()


@pytest.fixture(scope="module")
def safe_kernel(cancho_kernelspec, lone_dir):
    """A hub's kernel: safe mode, started in the copied folder."""
    from jupyter_client.manager import start_new_kernel

    km, kc = start_new_kernel(kernel_name=cancho_kernelspec, startup_timeout=60,
                              env=dict(os.environ, CANCHO_SAFE="1"), cwd=str(lone_dir))
    try:
        yield km, kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def test_the_notebooks_load_examples_by_name_only():
    """No notebook reaches the repository through a relative path any more."""
    for path in NOTEBOOKS:
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type == "code":
                assert "../examples" not in cell.source, (path.name, cell.source[:80])
    loads = {p.name for p in NOTEBOOKS
             if any("%load --example " in c.source for c in nbformat.read(p, as_version=4).cells)}
    assert set(LOADING) <= loads


def test_a_packaged_example_runs_in_safe_mode_from_an_empty_folder(safe_kernel, lone_dir):
    assert not (lone_dir / "examples").exists() and not (lone_dir.parent / "examples").exists()
    cell = run(safe_kernel, "%load --example hello.cho")
    assert cell.status == "ok", cell.outputs
    assert cell.stream("stdout") == "Hello, world!\n"


def test_an_unknown_example_lists_the_available_ones(safe_kernel):
    cell = run(safe_kernel, "%load --example base65/base64.cho")
    assert cell.status == "error" and cell.error["ename"] == "directive-error", cell.outputs
    for name in ("base64/base64.cho", "cut/cut.cho", "sort/sort.cho", "hello.cho"):
        assert name in cell.error["evalue"], cell.error["evalue"]


@pytest.mark.parametrize("name", ["../pyproject.toml", "../../../../../etc/hostname", "/etc/hostname",
                                  "base64/../../README.md", "../secret.cho"])
def test_an_example_name_cannot_leave_the_examples(safe_kernel, name):
    """A hostile name is not read: the cell fails before anything is compiled, and nothing of the
    named file reaches the outputs."""
    cell: Cell = run(safe_kernel, f"%load --example {name}")
    assert cell.status == "error" and cell.error["ename"] == "directive-error", cell.outputs
    assert "no example" in cell.error["evalue"]
    shown = "".join(str(m["content"]) for m in cell.outputs)
    assert "[project]" not in shown and "leaked" not in shown and "cancho-kernel" not in shown


def test_a_link_inside_the_examples_pointing_out_is_refused(tmp_path):
    root = tmp_path / "examples"
    root.mkdir()
    (root / "ok.cho").write_text("fn f() -> [] int { return 0; }\n")
    (tmp_path / "outside.cho").write_text("secret\n")
    (root / "escape.cho").symlink_to(tmp_path / "outside.cho")
    assert example_files.find("ok.cho", root).path == (root / "ok.cho").resolve()
    with pytest.raises(example_files.ExampleError, match="no example"):
        example_files.find("escape.cho", root)


def _execute_copy(names: tuple[str, ...] | list[str], where: Path) -> dict[str, float]:
    """Copy the named notebooks alone into ``where`` and execute every cell of each there (to the
    end, whatever fails); seconds per notebook. Every error must be one the notebook expects
    (``raises-exception``) or a timing claim refuted on this machine (``claim-failed``: whether a
    claim's bound holds here is tests/test_notebooks.py's question, not the copy's)."""
    from nbclient import NotebookClient

    folder = where / "notebooks"
    folder.mkdir()
    for name in names:
        shutil.copy(ROOT / "notebooks" / name, folder / name)
    took, unexpected = {}, []
    for name in names:
        nb = nbformat.read(folder / name, as_version=4)
        t0 = time.monotonic()
        NotebookClient(nb, timeout=600, kernel_name="cancho", allow_errors=True,
                       resources={"metadata": {"path": str(folder)}}).execute()
        took[name] = time.monotonic() - t0
        for cell in (c for c in nb.cells if c.cell_type == "code"):
            assert cell.execution_count is not None or not cell.source.strip(), (name, cell.source[:80])
            for out in cell.outputs:
                if out.output_type == "error" and "raises-exception" not in cell.metadata.get("tags", []) \
                        and out.ename != "claim-failed":
                    unexpected.append((name, cell.source.splitlines()[0], out.ename, out.evalue[:300]))
    assert not unexpected, unexpected
    return took


@pytest.mark.timeout(600)
def test_copied_notebooks_run_without_the_repository(tmp_path):
    """The three that load examples and two others (80–120 s here, depending on the load)."""
    took = _execute_copy(DEFAULT, tmp_path)
    print("seconds per copied notebook:", {k: round(v) for k, v in took.items()})


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_every_copied_notebook_runs_without_the_repository(tmp_path):
    """All of them: 165 s on this 2-core machine when quiet, more than 300 s under the other
    suites' load, so under ``-m slow``."""
    took = _execute_copy([p.name for p in NOTEBOOKS], tmp_path)
    print("seconds per copied notebook:", {k: round(v) for k, v in took.items()}, "total", round(sum(took.values())))
