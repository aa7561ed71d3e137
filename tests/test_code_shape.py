"""The compiler's code stays in pieces a reader can hold: no function longer than MAX_LINES.

Parsed with Python's own `ast`, so a decorator, a docstring and the body all count (from the
`def` line to the last line of the body). The whole package is held to it: the compiler, the
command line, `cancho test`, the kernel, the scripts, the hub deployment and the benchmarks.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
COMPILER = ROOT / "cancho_kernel" / "compiler"
MAX_LINES = 80
PACKAGES = [ROOT / "cancho_kernel", ROOT / "scripts", ROOT / "deploy", ROOT / "benchmarks"]


def python_files() -> list[Path]:
    out: list[Path] = []
    for p in PACKAGES:
        out += sorted(p.rglob("*.py")) if p.is_dir() else [p]
    return out


def long_functions(path: Path, root: Path = ROOT) -> list[str]:
    """`file:line name (N lines)` for every function or method in `path` over MAX_LINES."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = node.end_lineno - node.lineno + 1
            if length > MAX_LINES:
                out.append(f"{path.relative_to(root)}:{node.lineno} {node.name} ({length} lines)")
    return out


def test_the_packages_exist():
    files = python_files()
    names = {f.name for f in files}
    assert {"body.py", "lower.py", "kernel.py", "cli.py", "build_library.py"} <= names


@pytest.mark.parametrize("path", python_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_function_over_the_limit(path: Path):
    assert long_functions(path) == []


def test_the_measure_counts_a_long_function(tmp_path: Path):
    """The check itself: a function of MAX_LINES + 1 lines is reported, one of MAX_LINES is not."""
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_LINES - 1))
    ok = tmp_path / "ok.py"
    ok.write_text(f"def fits():\n{body}\n", encoding="utf-8")
    long = tmp_path / "long.py"
    long.write_text(f"def too_long():\n{body}\n    y = 0\n", encoding="utf-8")
    assert long_functions(ok, tmp_path) == []
    assert long_functions(long, tmp_path) == [f"long.py:1 too_long ({MAX_LINES + 1} lines)"]
