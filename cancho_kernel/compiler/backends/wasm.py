"""Building for `wasm32-wasip1`: a WebAssembly object from llvmlite, linked by clang and
wasm-ld against a WASI libc; and running the module with a WASI runtime.

The toolchain is the machine's (Debian: ``clang``, ``lld``, ``wasi-libc`` and
``libclang-rt-14-dev-wasm32``; ``.ci/run`` installs them), overridable as the reference's is:
``CLANG`` (a clang with the wasm32 target), ``WASM_LD`` (the linker clang should run) and
``WASI_SYSROOT`` (a sysroot holding ``lib/wasm32-wasi/crt1-command.o``). The link runs with
``--fatal-warnings``, so a libc call whose type disagrees with wasi-libc's is a build failure
naming the symbol rather than a module that traps at that call. A missing piece is an
environment failure (:class:`WasiToolchainMissing`, exit 3) that says what to install.

The runtime is the ``wasmtime`` Python package (the ``wasm`` extra); the module runs in a child
Python process (``wasi_runner.py``) so that the command stays interruptible and the program's
stdio is the real descriptors. It reaches the directories ``WASMTIME_FLAGS`` grants
(``--dir HOST[::GUEST]``, as for the wasmtime command and the reference) and no other.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..target import WASI_LLVM_TRIPLE, WASM32_WASIP1
from .exe import BuildTimes, LinkError, link_beside

# Where Debian's wasi-libc puts its start file; the sysroot is /usr there.
DEBIAN_CRT1 = Path("/usr/lib/wasm32-wasi/crt1-command.o")
INSTALL_HINT = ("install a WASI toolchain (Debian: apt-get install clang lld wasi-libc "
                "libclang-rt-14-dev-wasm32), or set CLANG, WASM_LD and WASI_SYSROOT")
RUNTIME_HINT = "install a WASI runtime: pip install 'cancho-kernel[wasm]' (the wasmtime package)"


class WasiToolchainMissing(LinkError):
    """No clang, wasm-ld or WASI libc to link a module with: an environment failure (exit 3)."""


class WasiRuntimeMissing(LinkError):
    """No WASI runtime to run a module with: an environment failure (exit 3)."""


@dataclass(frozen=True)
class WasiToolchain:
    """The commands and sysroot one link uses."""

    clang: str
    wasm_ld: str | None  # None: the one clang finds itself (`wasm-ld` on PATH)
    sysroot: str | None  # None: clang's default (Debian's /usr)

    def link_command(self, obj: Path, out: Path) -> list[str]:
        argv = [self.clang, f"--target={WASI_LLVM_TRIPLE}"]
        if self.sysroot:
            argv.append(f"--sysroot={self.sysroot}")
        if self.wasm_ld:
            argv.append(f"--ld-path={self.wasm_ld}")
        return [*argv, str(obj), "-Wl,--fatal-warnings", "-o", str(out)]


def find_toolchain() -> WasiToolchain:
    """The machine's WASI toolchain, or :class:`WasiToolchainMissing` naming what is absent."""
    clang = os.environ.get("CLANG") or "clang"
    if shutil.which(clang) is None:
        raise WasiToolchainMissing(f"cannot build for `{WASM32_WASIP1.name}`: no `{clang}` found; "
                                   f"{INSTALL_HINT}")
    wasm_ld = os.environ.get("WASM_LD") or None
    if shutil.which(wasm_ld or "wasm-ld") is None:
        raise WasiToolchainMissing(f"cannot build for `{WASM32_WASIP1.name}`: no "
                                   f"`{wasm_ld or 'wasm-ld'}` found; {INSTALL_HINT}")
    sysroot = os.environ.get("WASI_SYSROOT") or None
    crt1 = (Path(sysroot) / "lib" / "wasm32-wasi" / "crt1-command.o") if sysroot else DEBIAN_CRT1
    if not crt1.is_file():
        raise WasiToolchainMissing(f"cannot build for `{WASM32_WASIP1.name}`: no WASI libc "
                                   f"(`{crt1}` is missing); {INSTALL_HINT}")
    return WasiToolchain(clang, wasm_ld, sysroot)


def link(toolchain: WasiToolchain, obj: Path, out: Path) -> None:
    """Link one object into a WASI command module; :class:`LinkError` with clang's words."""
    argv = toolchain.link_command(obj, out)
    try:
        proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, check=False)
    except OSError as exc:
        raise WasiToolchainMissing(f"cannot run `{toolchain.clang}`: {exc.strerror or exc}; "
                                   f"{INSTALL_HINT}") from None
    if proc.returncode != 0:
        detail = proc.stderr.decode("utf-8", "replace").strip()
        hint = f"\n{INSTALL_HINT}" if "libclang_rt" in detail or "crt1" in detail else ""
        raise LinkError(f"linking for `{WASM32_WASIP1.name}` failed (`{toolchain.clang}` exit "
                        f"status {proc.returncode})\n{detail}{hint}")


def build_wasm(ir_text: str, out_path: str | Path) -> BuildTimes:
    """Compile IR made for wasm32 (O2) and link it into the module ``out_path``. The object is
    written beside the output as ``<output>.o`` and removed, as for a host build."""
    from . import native

    toolchain = find_toolchain()  # before any work: a missing toolchain is the first thing said
    t0 = time.perf_counter()
    obj = native.emit_object(ir_text, WASM32_WASIP1)
    t1 = time.perf_counter()
    out = Path(out_path)
    link_beside(obj, out, lambda obj_path: link(toolchain, obj_path, out))
    return BuildTimes(t1 - t0, time.perf_counter() - t1)


def write_wasm_object(ir_text: str, out_path: str | Path) -> None:
    """`build --emit obj --target wasm32-wasip1`: the WebAssembly object alone (no toolchain)."""
    from . import native

    Path(out_path).write_bytes(native.emit_object(ir_text, WASM32_WASIP1))


def runtime_available() -> bool:
    """Is the WASI runtime (the ``wasmtime`` package) importable?"""
    import importlib.util

    return importlib.util.find_spec("wasmtime") is not None


class WasiFlagsRefused(LinkError):
    """``WASMTIME_FLAGS`` holds something other than directory grants (exit 3)."""


def granted_dirs(flags: str | None = None) -> list[str]:
    """The directories ``WASMTIME_FLAGS`` grants, as the wasmtime command spells them
    (``--dir HOST[::GUEST]`` or ``--dir=...``): a module reaches no directory unless one is
    granted, and the grant is the user's to write. Any other flag is refused."""
    words = shlex.split(os.environ.get("WASMTIME_FLAGS", "") if flags is None else flags)
    dirs: list[str] = []
    it = iter(words)
    for word in it:
        if word.startswith("--dir="):
            dirs.append(word[len("--dir="):])
        elif word == "--dir":
            value = next(it, None)
            if value is None:
                raise WasiFlagsRefused("WASMTIME_FLAGS: `--dir` needs a directory")
            dirs.append(value)
        else:
            raise WasiFlagsRefused(f"WASMTIME_FLAGS: cancho runs modules itself and takes only "
                                   f"`--dir HOST[::GUEST]` there, not `{word}`")
    for d in dirs:
        if not Path(d.split("::", 1)[0]).is_dir():
            raise WasiFlagsRefused(f"WASMTIME_FLAGS: `{d.split('::', 1)[0]}` is not a directory")
    return dirs


def runner_argv(module: str | Path, args: Sequence[str], name: str,
                trap_fd: int | None = None) -> list[str]:
    """The child that runs a module (``wasi_runner.py``) with the granted directories; with
    ``trap_fd``, it writes a trap's site number there (compiler/trapsites.py)."""
    grants = [f"--dir={d}" for d in granted_dirs()]
    located = [] if trap_fd is None else [f"--trap-fd={trap_fd}"]
    return [sys.executable, "-m", "cancho_kernel.compiler.backends.wasi_runner", *grants, *located,
            str(module), name, *args]


def run_wasm(module: str | Path, args: Sequence[str], name: str) -> int:
    """Run a WASI command module with this process's stdio and the directories ``WASMTIME_FLAGS``
    grants; its exit status. ``name`` is the program's ``argv[0]``. A trap is reported on stderr
    and is status 134, as the wasmtime command reports one."""
    return run_wasm_located(module, args, name)[0]


def run_wasm_located(module: str | Path, args: Sequence[str], name: str) -> tuple[int, int | None]:
    """:func:`run_wasm`, and the trap site number (compiler/trapsites.py) the runner read from
    the trap's backtrace (None: no trap, or not at a site)."""
    if not runtime_available():
        raise WasiRuntimeMissing(f"cannot run a `{WASM32_WASIP1.name}` module: no WASI runtime; "
                                 f"{RUNTIME_HINT}")
    site_r, site_w = os.pipe()
    argv = runner_argv(module, args, name, site_w)
    try:
        child = subprocess.Popen(argv, pass_fds=(site_w,))
    except BaseException:
        os.close(site_r)
        raise
    finally:
        os.close(site_w)
    try:
        status = child.wait()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    with os.fdopen(site_r, "rb") as f:
        text = f.read(32).decode("ascii", "replace")
    return status, int(text) if text.isdigit() else None


@dataclass(frozen=True, order=True)
class WasiImport:
    """One function a module imports: what the runtime is asked to grant it."""

    module: str
    name: str

    def __str__(self) -> str:
        return f"{self.module}.{self.name}"


def module_imports(module: str | Path) -> list[WasiImport]:
    """The functions a built module imports, read from its import section (wasmtime's reader)."""
    if not runtime_available():
        raise WasiRuntimeMissing(f"cannot read a `{WASM32_WASIP1.name}` module's imports: no "
                                 f"WebAssembly reader; {RUNTIME_HINT}")
    import wasmtime

    parsed = wasmtime.Module.from_file(wasmtime.Engine(), str(module))
    return sorted({WasiImport(i.module, i.name or "") for i in parsed.imports
                   if isinstance(i.type, wasmtime.FuncType)})


def imports_of_ir(ir_text: str) -> list[WasiImport]:
    """Build IR made for wasm32 in a temporary directory and answer its module's imports."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="cancho-wasm-imports-") as tmp:
        out = Path(tmp) / "program.wasm"
        build_wasm(ir_text, out)
        return module_imports(out)
