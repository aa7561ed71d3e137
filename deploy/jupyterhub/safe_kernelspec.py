"""The cancho kernelspec a shared server uses: safe mode on, nothing imported from the notebook's
directory. The hub's spawner writes it into its own Jupyter data directory; a repo2docker image
(postBuild) installs it over the wheel's spec: ``python deploy/jupyterhub/safe_kernelspec.py PREFIX``
writes ``PREFIX/share/jupyter/kernels/cancho``.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

SAFE_KERNEL = "cancho"


def hub_kernelspec(into: Path) -> Path:
    """Write the hub's cancho kernelspec under ``into/kernels/cancho`` and answer its directory.

    ``-I`` keeps the kernel's working directory (the student's) off ``sys.path``: with plain
    ``python -m cancho_kernel`` a ``%%file cancho_kernel.py`` would run as Python at the next
    kernel start. ``PYTHONSAFEPATH=1`` does the same for the Python processes the kernel starts
    (its JIT worker runs ``python -m ...`` in that directory too). ``CANCHO_SAFE=1`` and
    ``--CanchoKernel.safe_mode=True`` both turn safe mode on.
    """
    from jupyter_client.kernelspec import KernelSpecManager

    if sys.version_info < (3, 11):  # PYTHONSAFEPATH (and -P) came with 3.11: older ones would be unsafe
        raise RuntimeError("a shared cancho server needs Python 3.11 or later (PYTHONSAFEPATH)")
    d = into / "kernels" / SAFE_KERNEL
    d.mkdir(parents=True, exist_ok=True)
    try:
        installed = Path(KernelSpecManager().get_kernel_spec(SAFE_KERNEL).resource_dir)
        for f in installed.iterdir() if installed.resolve() != d.resolve() else ():
            if f.is_file() and f.name != "kernel.json":
                shutil.copy2(f, d / f.name)
    except Exception:  # no installed spec: logos are optional
        pass
    spec = {
        "argv": [sys.executable, "-I", "-m", "cancho_kernel", "-f", "{connection_file}",
                 "--CanchoKernel.safe_mode=True"],
        "display_name": "cancho",
        "language": "cancho",
        "interrupt_mode": "signal",
        "env": {"CANCHO_SAFE": "1", "PYTHONSAFEPATH": "1"},
        "metadata": {"debugger": False},
    }
    (d / "kernel.json").write_text(json.dumps(spec, indent=1) + "\n")
    return d


if __name__ == "__main__":
    prefix = Path(sys.argv[1] if len(sys.argv) > 1 else sys.prefix)
    print(hub_kernelspec(prefix / "share" / "jupyter"))
