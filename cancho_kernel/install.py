"""Install the `cancho` kernelspec: ``python -m cancho_kernel.install [--user|--sys-prefix|--prefix P]``.

A plain ``pip install`` already registers it (the wheel ships ``kernelspec/`` as data under
``share/jupyter/kernels/cancho``); this command is for editable installs, other prefixes and
repairs. The spec's ``argv[0]`` is ``python``, which jupyter_client replaces with the interpreter
that runs it (kernel.md §3.10) — so the kernel runs in whichever environment Jupyter runs in.
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

KERNEL_JSON = {
    "argv": ["python", "-m", "cancho_kernel", "-f", "{connection_file}"],
    "display_name": "cancho",
    "language": "cancho",
    "interrupt_mode": "signal",
    "metadata": {"debugger": False},
    # Python >= 3.11 puts no unsafe path (the notebook's directory, for `-m`) on sys.path: a
    # `cancho_kernel.py` written beside a notebook is not what starts (nor the JIT worker, which
    # inherits the environment). Python 3.10 ignores it (README: a shared server needs 3.11).
    "env": {"PYTHONSAFEPATH": "1"},
}


def spec_dir() -> Path | None:
    """Where the spec's files (kernel.json, logos) are: beside the package in a source tree or an
    editable install, else where the wheel put them (``<prefix>/share/jupyter/kernels/cancho``)."""
    here = Path(__file__).resolve().parent
    for candidate in (here.parent / "kernelspec", Path(sys.prefix) / "share/jupyter/kernels" / KERNEL_NAME):
        if (candidate / "kernel.json").is_file():
            return candidate
    return None


def install(user: bool = False, prefix: str | None = None) -> str:
    """Install the spec and return the directory it went to."""
    from jupyter_client.kernelspec import KernelSpecManager

    with tempfile.TemporaryDirectory() as tmp:
        dest = Path(tmp) / KERNEL_NAME
        src = spec_dir()
        if src is not None:
            shutil.copytree(src, dest)
        else:
            dest.mkdir()
        (dest / "kernel.json").write_text(json.dumps(KERNEL_JSON, indent=2) + "\n", encoding="utf-8")
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
