"""Install the `cancho` kernelspec: ``python -m cancho_kernel.install [--user|--sys-prefix|--prefix P]``.

A plain ``pip install`` already registers it (the wheel ships ``cancho_kernel/kernelspec/`` as data under
``share/jupyter/kernels/cancho``); this command is for editable installs, other prefixes and
repairs. The spec's ``argv[0]`` is ``python``, which jupyter_client replaces with the interpreter
that runs it (as Jupyter's kernelspec documentation says) — so the kernel runs in whichever environment Jupyter runs in.
``PYTHONSAFEPATH=1`` in its environment keeps the notebook's directory off ``sys.path``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

KERNEL_NAME = "cancho"
# The one kernelspec: ``cancho_kernel/kernelspec/`` (kernel.json and the logos), package data that
# the wheel also installs as ``share/jupyter/kernels/cancho`` (pyproject.toml's shared-data).
# Its ``env`` holds ``PYTHONSAFEPATH=1``: Python >= 3.11 then puts no unsafe path (the notebook's
# directory, for ``-m``) on sys.path, so a ``cancho_kernel.py`` written beside a notebook is not
# what starts. Python 3.10 ignores it (README: a shared server needs 3.11).
SPEC_DIR = Path(__file__).resolve().parent / "kernelspec"
KERNEL_JSON: dict = json.loads((SPEC_DIR / "kernel.json").read_text(encoding="utf-8"))


def safe_spec(python: str = sys.executable) -> dict:
    """The spec a shared server uses (deploy/jupyterhub, docs/teaching.md): the same kernel in safe
    mode, its Python isolated (``-I``: no user site-packages, no working directory on the path)."""
    spec = json.loads(json.dumps(KERNEL_JSON))
    spec["argv"] = [python, "-I", *spec["argv"][1:], "--CanchoKernel.safe_mode=True"]
    spec["env"] = {**spec["env"], "CANCHO_SAFE": "1"}
    return spec


def spec_dir() -> Path | None:
    """Where the spec's files (kernel.json, logos) are: in the package, else where the wheel put
    them (``<prefix>/share/jupyter/kernels/cancho``)."""
    for candidate in (SPEC_DIR, Path(sys.prefix) / "share/jupyter/kernels" / KERNEL_NAME):
        if (candidate / "kernel.json").is_file():
            return candidate
    return None


def install(user: bool = False, prefix: str | None = None) -> str:
    """Install the spec and return the directory it went to."""
    from jupyter_client.kernelspec import KernelSpecManager

    with tempfile.TemporaryDirectory() as tmp:
        dest = Path(tmp) / KERNEL_NAME
        shutil.copytree(SPEC_DIR, dest)
        return KernelSpecManager().install_kernel_spec(str(dest), KERNEL_NAME, user=user, prefix=prefix)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m cancho_kernel.install",
                                description="Install the cancho Jupyter kernelspec.")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--user", action="store_true", help="install for the current user")
    where.add_argument("--sys-prefix", action="store_true",
                       help=f"install into this Python's prefix ({sys.prefix}); the default")
    where.add_argument("--prefix", help="install into PREFIX/share/jupyter/kernels")
    ns = p.parse_args(argv)
    # Without an option: this Python's prefix, where this Python's Jupyter looks first.
    prefix = None if ns.user else (ns.prefix or sys.prefix)
    path = install(user=ns.user, prefix=prefix)
    print(f"installed kernelspec {KERNEL_NAME} in {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
