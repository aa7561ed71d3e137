"""Small C helpers of our own (the exe launcher, the JIT's child), compiled once with the
machine's C compiler into the user's cache directory and reused by every later process.

One place decides where they live and how they are built, so the two helpers cannot drift: the
file name carries a hash of the C source (an edited helper is a new file), and the build goes to
a temporary directory first and is renamed into place, so concurrent builders agree on one file.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Sequence


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/cancho-kernel``, else ``~/.cache/cancho-kernel``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "cancho-kernel"


def c_compiler() -> list[str] | None:
    """``$CC`` (split into words), else ``cc`` or ``gcc`` on PATH; None without one."""
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    return cc.split() if cc else None


def built_helper(source: str, stem: str, flags: Sequence[str] = ("-O2",)) -> Path | None:
    """The helper compiled from ``source`` with ``flags`` (``stem-HASH``, ``.so`` when
    ``-shared`` is among the flags), building it on first use; None without a C compiler or when
    it does not compile."""
    digest = hashlib.sha256(source.encode() + "\0".join(flags).encode()).hexdigest()[:16]
    suffix = ".so" if "-shared" in flags else ""
    target = cache_dir() / f"{stem}-{digest}{suffix}"
    if target.is_file() and os.access(target, os.X_OK if not suffix else os.R_OK):
        return target
    cc = c_compiler()
    if cc is None:
        return None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory() as tmp:
            src = Path(tmp) / f"{stem}.c"
            src.write_text(source)
            out = Path(tmp) / f"{stem}{suffix}"
            r = subprocess.run([*cc, *flags, "-o", str(out), str(src)], capture_output=True)
            if r.returncode != 0:
                return None
            os.replace(out, target)  # atomic: concurrent builders agree on one file
    except OSError:
        return None
    return target
