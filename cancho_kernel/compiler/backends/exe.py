"""The `exe` backend's build half: object file from llvmlite, linked by the system C compiler.

Linking follows the reference (runtime.md §0, §6): ``cc obj -L<p>... -l<n>... -o out``,
libraries *after* the object (a library named before it resolves nothing) and before ``-o``; our
one addition is the trap reporter's object right after the program's (``trapreport.py``);
``$CC`` overrides ``cc``. The object is written beside the output as ``<output>.o`` and removed
after linking. A missing or failing linker is the environment's fault (exit 3), not the
program's, so it raises :class:`LinkError`.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path


class LinkError(Exception):
    """The C toolchain is missing or refused to link: an environment failure (CLI exit 3)."""


def linker_command() -> list[str]:
    """`$CC` split like a shell would (it may be e.g. ``ccache gcc``), else ``cc``."""
    words = shlex.split(os.environ.get("CC", "") or "cc")
    return words or ["cc"]


def runtime_objects() -> list[str]:
    """Objects linked after the program's own: the trap reporter (trapreport.py), which tells
    the launcher which trap site fired; none without a C compiler to build it."""
    from .trapreport import exe_object

    obj = exe_object()
    return [] if obj is None else [str(obj)]


def link(object_path: str | Path, out_path: str | Path,
         libs: Sequence[str] = (), libdirs: Sequence[str] = ()) -> None:
    """Link one object into an executable; raise :class:`LinkError` with cc's words on failure."""
    cc = linker_command()
    argv = [*cc, str(object_path), *runtime_objects(), *(f"-L{p}" for p in libdirs), *(f"-l{n}" for n in libs),
            "-o", str(out_path)]
    try:
        proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, check=False)
    except OSError as exc:
        raise LinkError(f"cannot run the linker `{' '.join(cc)}`: {exc.strerror or exc}") from None
    if proc.returncode != 0:
        detail = proc.stderr.decode("utf-8", "replace").strip()
        status = (f"exit status {proc.returncode}" if proc.returncode >= 0
                  else f"signal {-proc.returncode}")
        message = f"the linker `{' '.join(cc)}` failed with {status}"
        raise LinkError(f"{message}\n{detail}" if detail else message)


@dataclass(frozen=True)
class BuildTimes:
    """Where a build's time went: LLVM (optimise + emit the object) and the linker."""

    object_seconds: float
    link_seconds: float


def build_executable(ir_text: str, out_path: str | Path,
                     libs: Sequence[str] = (), libdirs: Sequence[str] = ()) -> BuildTimes:
    """Compile IR text (O2) and link it into ``out_path``.

    Raises :class:`native.InvalidIR` (our bug) or :class:`LinkError` (the environment), and
    ``OSError`` when the output directory is not writable.
    """
    from . import native  # loads LLVM: only when there is something to compile

    t0 = time.perf_counter()
    obj = native.emit_object(ir_text)
    t1 = time.perf_counter()
    out = Path(out_path)
    link_beside(obj, out, lambda obj_path: link(obj_path, out, libs, libdirs))
    return BuildTimes(t1 - t0, time.perf_counter() - t1)


def link_beside(obj: bytes, out: Path, link_object: Callable[[Path], None]) -> None:
    """Write the object beside the output as `<output>.o` (as the reference does), link it, and
    remove it whatever the link did (the wasm target links the same way)."""
    obj_path = out.with_suffix(".o")
    if obj_path == out:
        obj_path = out.with_name(out.name + ".o")
    obj_path.write_bytes(obj)
    try:
        link_object(obj_path)
    finally:
        try:
            obj_path.unlink()
        except OSError:
            pass


def write_object(ir_text: str, out_path: str | Path) -> None:
    """`build --emit obj`: just the object file."""
    from . import native

    Path(out_path).write_bytes(native.emit_object(ir_text))
