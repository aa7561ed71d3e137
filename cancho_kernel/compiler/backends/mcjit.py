"""MCJIT compilation, and the child side of a JIT run: turning a freshly forked Python process
into something indistinguishable from a native executable's ``main``.

Used by the JIT worker (one fork per run) and by ``run_jit_inherit`` (the CLI). Only ever call
:func:`become_program` in a child forked from a *single-threaded* process (runtime.md §13.6).

What a native executable has that a forked Python process does not, and what is restored here:

* default signal dispositions (Python ignores SIGPIPE and SIGXFSZ and catches SIGINT);
* C stdio buffering as libc would set it up lazily: stdout fully buffered with a buffer of the
  descriptor's ``st_blksize`` (capped at BUFSIZ), line-buffered only on a terminal. Python
  started with ``-u``/``PYTHONUNBUFFERED=1`` made C stdout *unbuffered* (one ``write(2)`` per
  ``putchar``), and glibc's ``setvbuf(stdout, NULL, _IOFBF, …)`` cannot undo that because the
  stream keeps its one-byte buffer; so an explicit buffer of the size glibc would have chosen is
  installed. The exact size matters: it decides how many ``fwrite`` calls to ``/dev/full``
  report a short count;
* descriptors: ``exec`` would close every close-on-exec descriptor, so they are closed here;
* the exit path: libc ``exit(status)`` after ``main`` returns, which flushes stdio and ignores a
  failed flush, exactly like returning from a native ``main``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import fcntl
import os
import resource
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import llvmlite.binding as llvm

from . import native
from .exe import LinkError
from .process import RESET_SIGNALS

_IOFBF, _IOLBF, _IONBF = 0, 1, 2
_BUFSIZ = 8192
_PR_SET_PDEATHSIG = 1

# The C library as loaded into this process (MCJIT resolves the program's libc calls here too).
_libc = ctypes.CDLL(None, use_errno=True)
_libc.setvbuf.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
_libc.malloc.restype = ctypes.c_void_p
_libc.malloc.argtypes = [ctypes.c_size_t]
_libc.fflush.argtypes = [ctypes.c_void_p]
_libc.exit.argtypes = [ctypes.c_int]


@dataclass
class Compiled:
    """A finalised MCJIT engine and the address of the module's C ``main``.

    Keep the object alive as long as the code may run: the engine owns the machine code.
    """

    engine: llvm.ExecutionEngine
    main_address: int
    seconds: float


def _find_library(name: str, libdirs: Sequence[str]) -> str:
    for d in libdirs:
        for candidate in (Path(d) / f"lib{name}.so", *sorted(Path(d).glob(f"lib{name}.so.*"))):
            if candidate.exists():
                return str(candidate)
    found = ctypes.util.find_library(name)
    return found or f"lib{name}.so"


def load_libraries(libs: Sequence[str], libdirs: Sequence[str] = ()) -> None:
    """Make ``-l`` libraries' symbols visible to MCJIT (the JIT's equivalent of linking)."""
    for name in libs:
        path = _find_library(name, libdirs)
        try:
            llvm.load_library_permanently(path)
        except RuntimeError as exc:
            raise LinkError(f"cannot load library `{name}` ({path}): {exc}") from None


def _undefined_symbols(mod: llvm.ModuleRef) -> list[str]:
    """Declarations (after O2, so dead ones are gone) that nothing in this process defines.

    MCJIT would abort the whole worker on one of these ("Program used external function … which
    could not be resolved"); the linker reports it instead, so do the same."""
    missing = []
    for value in (*mod.functions, *mod.global_variables):
        name = value.name
        if (value.is_declaration and name and not name.startswith("llvm.")
                and not llvm.address_of_symbol(name) and not _in_process(name)):
            missing.append(name)
    return missing


def _in_process(name: str) -> bool:
    """Whether the dynamic linker's global scope defines ``name`` (libc, and every library
    MCJIT loaded, which it opens RTLD_GLOBAL). MCJIT searches that scope once an engine
    exists, but ``address_of_symbol`` does not before."""
    try:
        ctypes.c_void_p.in_dll(_libc, name)
        return True
    except ValueError:
        return False


def compile_ir(ir_text: str, libs: Sequence[str] = (), libdirs: Sequence[str] = ()) -> Compiled:
    """Parse, verify, optimise (O2) and MCJIT-compile a whole program.

    Raises :class:`native.InvalidIR` (our bug) or :class:`LinkError` (unresolvable symbol or
    library: what ``cc`` would have refused).
    """
    start = time.perf_counter()
    tm = native.target_machine(jit=True)
    mod = native.parse(ir_text)
    native.optimize(mod, tm)
    load_libraries(libs, libdirs)
    missing = _undefined_symbols(mod)
    if missing:
        raise LinkError("undefined reference to " + ", ".join(f"`{m}`" for m in missing))
    engine = llvm.create_mcjit_compiler(mod, tm)
    engine.finalize_object()
    address = engine.get_function_address("main")
    if not address:
        raise native.InvalidIR("the module defines no C `main`")
    return Compiled(engine, address, time.perf_counter() - start)


def flush_c_stdio() -> None:
    """Flush every C stream before forking, so nothing buffered is written twice."""
    _libc.fflush(None)


def _restore_stdio_buffering() -> None:
    for name, fd, default_mode in (("stdin", 0, _IOFBF), ("stdout", 1, _IOFBF)):
        stream = ctypes.c_void_p.in_dll(_libc, name).value
        size, mode = _BUFSIZ, default_mode
        try:
            st = os.fstat(fd)
            if 0 < st.st_blksize < _BUFSIZ:
                size = st.st_blksize
            if os.isatty(fd):
                mode = _IOLBF
        except OSError:
            pass  # closed: libc would use BUFSIZ and full buffering
        _libc.setvbuf(stream, _libc.malloc(size), mode, size)
    _libc.setvbuf(ctypes.c_void_p.in_dll(_libc, "stderr").value, None, _IONBF, 0)


def _close_exec_descriptors(keep: set[int]) -> None:
    """Close what ``exec`` would have closed: every close-on-exec descriptor above 2."""
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd <= 2 or fd in keep:
            continue
        try:
            if fcntl.fcntl(fd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC:
                os.close(fd)
        except OSError:
            pass


def _address_space_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def become_program(main_address: int, argv: Sequence[str], fd_map: dict[int, int] | None,
                   memory: int | None = None, *, own_group: bool = False,
                   die_with_parent: bool = False, cpu_seconds: int | None = None,
                   nproc: int | None = None) -> NoReturn:
    """In a freshly forked child: install the descriptors (``fd_map``: 0/1/2 -> fd, a missing key
    closes it; ``None`` keeps the inherited ones), set the run's limits on this process only
    (``memory`` bytes beyond the image inherited from the worker, ``cpu_seconds`` of CPU,
    RLIMIT_NPROC ``nproc``), restore what a native process has, call ``main(argc, argv)`` and
    ``exit`` with its result. Never returns."""
    try:
        parent = os.getppid()
        if own_group:
            os.setpgid(0, 0)
        if die_with_parent:
            _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            if os.getppid() != parent:
                os._exit(137)
        for sig in RESET_SIGNALS:
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
        if fd_map is not None:
            for target in (0, 1, 2):
                if target in fd_map:
                    os.dup2(fd_map[target], target, inheritable=True)
                else:
                    try:
                        os.close(target)
                    except OSError:
                        pass
            for fd in set(fd_map.values()) - {0, 1, 2}:
                os.close(fd)
        _close_exec_descriptors(set())
        if memory is not None:
            limit = _address_space_bytes() + memory
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        if cpu_seconds is not None:
            # Counted from this fork (a child's CPU time starts at 0): SIGXCPU at the limit.
            resource.setrlimit(resource.RLIMIT_CPU, (int(cpu_seconds), int(cpu_seconds) + 1))
        if nproc is not None:
            resource.setrlimit(resource.RLIMIT_NPROC, (int(nproc), int(nproc)))
        _restore_stdio_buffering()
        args = [a.encode("utf-8", "surrogateescape") for a in argv]
        c_argv = (ctypes.c_char_p * (len(args) + 1))(*args, None)
        entry = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_char_p))(
            main_address)
        status = entry(len(args), c_argv)
        _libc.exit(status)
    except BaseException:  # noqa: BLE001 - nothing may unwind into the forking parent's code
        try:
            import traceback

            os.write(2, ("cancho: the JIT child failed before running the program\n"
                         + traceback.format_exc()).encode())
        except BaseException:  # noqa: BLE001
            pass
    os._exit(127)
