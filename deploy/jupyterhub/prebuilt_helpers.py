"""The kernel's C helpers, built once by root at hub start into a directory no student can write.

Without this each student's kernel compiles its exe launcher and JIT child into its own build
cache, and a later process runs whatever is there. The hub builds them itself with
``python -m cancho_kernel.compiler.backends.chelper --build DIR`` (the kernel checks them by hash
before use) and gives the directory to every server as ``CANCHO_HELPER_DIR``. A kernel that
cannot prebuild (no C compiler, or a version without ``--build``) leaves the variable unset:
each student's kernel then builds its helpers into its own private cache (``0700``, outside the
notebook view).
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

log = logging.getLogger("cancho-hub")


def seal(directory: Path) -> None:
    """Everything under ``directory`` owned by root (when we are root), readable, not writable
    by group or others."""
    for path in [directory, *directory.rglob("*")]:
        if path.is_symlink():
            path.unlink()
            continue
        if os.geteuid() == 0:
            os.chown(path, 0, 0)
        mode = path.stat().st_mode & 0o777
        os.chmod(path, (mode | 0o444 | (0o111 if path.is_dir() else 0)) & ~0o022)


def prebuild(directory: Path) -> bool:
    """Build the helpers into ``directory`` and seal it; answers whether kernels may use it."""
    directory.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run([sys.executable, "-I", "-m", "cancho_kernel.compiler.backends.chelper",
                               "--build", str(directory)], capture_output=True, text=True, timeout=300,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        log.warning("cancho helpers not prebuilt (%s): each kernel builds its own", e)
        return False
    seal(directory)
    if done.returncode != 0 or not any(directory.iterdir()):
        log.warning("cancho helpers not prebuilt (exit %s: %s): each kernel builds its own into its "
                    "private cache", done.returncode, (done.stderr or "").strip()[-300:])
        return False
    return True
