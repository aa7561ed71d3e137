"""``%%c NAME``: a cell of C, compiled with ``cc -O2`` and kept as a named baseline.

The cell's text is written with a ``#line`` directive first, so the C compiler's messages name the
cell and its lines (``cell[4]:3:5: error: ...``) exactly as the kernel's own diagnostics do, and
never a temporary path. Compiling (``cc -O2 -c``) and linking (``cc``) are timed apart. ``$CC``
overrides ``cc`` as it does for the ``exe`` backend.

In safe mode (``sandbox``) both ``cc`` invocations run in the sandbox (compiler/backends/sandbox.py)
with only the baseline's own directory writable: the compiler, its plugins and whatever a
``#include`` or a flag makes it read run with no network, a read-only system and the seccomp
filter.

A failure is reported like a refusal: an ``error`` whose ``ename`` is ``c-compile-error`` (or
``c-link-error``), ``evalue`` the compiler's first error message and ``traceback`` the compiler's
coloured output; no Python traceback.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
import subprocess
import time

from ..compiler.backends import exe as exe_backend
from ..compiler.backends import sandbox as sandboxing
from . import presentation as P
from .named import Program, ProgramStore

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_ERROR = re.compile(r"(?:fatal )?error: (.*)$")


class CFailure(Exception):
    def __init__(self, failure: P.Failure) -> None:
        super().__init__(failure.evalue)
        self.failure = failure


def _first_error(text: str) -> str:
    plain = _ANSI.sub("", text)
    for line in plain.splitlines():
        m = _ERROR.search(line)
        if m:
            where = line[: m.start()].rstrip(": ").strip()
            return f"{m.group(1).strip()}" + (f" (at {where})" if where else "")
    lines = [ln for ln in plain.splitlines() if ln.strip()]
    return lines[0] if lines else "the C compiler failed"


def _run_cc(argv: list[str], what: str, ename: str, rename: dict[str, str],
            sandbox: sandboxing.SandboxSpec | None = None) -> float:
    t0 = time.perf_counter()
    launch = sandboxing.command(sandbox, argv) if sandbox is not None else None
    try:
        if launch is None:
            proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=300)
        else:
            proc = subprocess.run(launch.argv, pass_fds=launch.pass_fds, stdin=subprocess.DEVNULL,
                                  capture_output=True, timeout=300)
    except FileNotFoundError:
        raise CFailure(P.simple_failure("environment", f"no C compiler: `{argv[0]}` was not found "
                                                       "(install cc, or set $CC)")) from None
    except subprocess.TimeoutExpired:
        raise CFailure(P.simple_failure(ename, f"{what} took longer than 300 s")) from None
    finally:
        if launch is not None:
            launch.close()
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        text = (proc.stderr or proc.stdout).decode("utf-8", "replace").rstrip()
        for path, shown in rename.items():  # never a temporary path in the output
            text = text.replace(path, shown)
        tb = text.split("\n") if text else [f"{what} exited with status {proc.returncode}"]
        raise CFailure(P.Failure(ename, _first_error(text) if text else tb[0], tb))
    return seconds


def compile_baseline(store: ProgramStore, name: str, text: str, *, line_offset: int, cell_name: str,
                     cflags: list[str] | None = None, ldflags: list[str] | None = None,
                     sandbox: sandboxing.SandboxSpec | None = None) -> Program:
    """Compile and link the C text (in ``sandbox``, with the store's directory writable, when
    given); raises :class:`CFailure`."""
    cc = exe_backend.linker_command()
    src = store.new_path(name, ".c")
    if sandbox is not None:
        sandbox = dataclasses.replace(sandbox, writable=(str(src.parent),), cwd=str(src.parent))
    obj, out = src.with_suffix(".o"), src.with_suffix("")
    quoted = cell_name.replace("\\", "\\\\").replace('"', '\\"')
    src.write_text(f'#line {line_offset + 1} "{quoted}"\n{text}\n', encoding="utf-8")
    compile_s = _run_cc([*cc, "-O2", "-fdiagnostics-color=always", *(cflags or []), "-c", str(src),
                         "-o", str(obj)], f"{' '.join(cc)} -O2 -c", "c-compile-error", {str(src): cell_name, str(obj): f"{name}.o"},
                         sandbox)
    try:
        link_s = _run_cc([*cc, "-fdiagnostics-color=always", str(obj), *(ldflags or []), "-o", str(out)],
                         f"{' '.join(cc)} (link)", "c-link-error",
                         {str(obj): f"{name}.o", str(out): name}, sandbox)
    finally:
        try:
            obj.unlink()
        except OSError:
            pass
    return Program(name=name, kind="c", backend="cc", path=out, compile_seconds=compile_s,
                   link_seconds=link_s, origin=cell_name, source=text)


def split_flags(text: str | None) -> list[str]:
    return shlex.split(text) if text else []
