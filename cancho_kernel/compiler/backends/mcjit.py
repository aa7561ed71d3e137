"""MCJIT compilation, and the child side of a JIT run: turning a freshly forked Python process
into something indistinguishable from a native executable's ``main``.

Used by the JIT worker (one fork per run) and by ``run_jit_inherit`` (the CLI), both through
:func:`spawn_program`. Only ever fork from a *single-threaded* process (runtime.md §13.6).

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
* the exit path: after ``main`` returns, every C stream is flushed (a failed flush ignored) and
  the process leaves with ``_exit(status)``: what libc ``exit`` does for a native program, minus
  the worker's own atexit work (LLVM's static destructors, ~3 ms of freeing copy-on-write pages
  that the program never used).

Why the child side is C (``jit_child.CHILD_SOURCE``, built once with ``cc`` like the exe backend's
launcher): a forked child that runs Python touches (copies) pages of the worker's image with
every reference count, and each step of the Python version cost a few tenths of a millisecond;
the C version never returns into Python, so a run costs the fork and the program. Without a C
compiler the Python version (:func:`become_program`) is used.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import fcntl
import os
import resource
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import NoReturn

import llvmlite.binding as llvm

from .. import cpu
from . import native
from .chelper import Helper, verified_helper, verify_digest
from .confine import encode_roots
from .exe import LinkError
from .jit_child import CHILD_SOURCE, CHILD_SPEC  # noqa: F401 - CHILD_SOURCE: re-exported
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
    ``size_bytes`` estimates what the engine keeps in this process (see :func:`load_object`);
    the JIT worker's cache bounds its entries by it.
    """

    engine: llvm.ExecutionEngine
    main_address: int
    seconds: float
    size_bytes: int = 0
    library: "LibraryEngine | None" = None  # a split run's library, in use while this lives
    pieces: list = field(default_factory=list)  # a split run's other cell pieces' engines

    def free(self) -> None:
        """Free the engine and its machine code now (not when the garbage collector gets to
        it); ``main_address`` is dangling afterwards."""
        self.engine.close()
        for engine in self.pieces:
            engine.close()
        self.pieces = []
        if self.library is not None:
            self.library.release()
            self.library = None


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


def _heap_in_use() -> int | None:
    """Bytes of C heap in use (glibc ``mallinfo2``: arena chunks plus mmapped ones), or None
    where the C library has no ``mallinfo2``."""
    fn = getattr(_libc, "mallinfo2", None)
    if fn is None:
        return None
    fn.restype = _MallInfo2
    info = fn()
    return int(info.uordblks + info.hblkhd)


def release_free_memory() -> None:
    """Give the C heap's free pages back to the system (glibc ``malloc_trim``; nothing where
    the C library has none). Why: a compilation frees megabytes that the heap keeps mapped, and
    every JIT run forks this process, paying for each mapped page; ~0.7 ms after a compile."""
    trim = getattr(_libc, "malloc_trim", None)
    if trim is not None:
        trim(0)


def code_identity() -> str:
    """Everything besides the IR that decides the machine code :func:`compile_ir` produces:
    target triple and data layout, the options of :func:`native.target_machine` (O2, PIC, JIT
    code model, the CPU ``CANCHO_CPU`` chooses), and the llvmlite and LLVM versions. Part of the
    JIT worker's cache key."""
    import llvmlite

    tm = native.target_machine(jit=True)
    return " ".join((tm.triple, str(tm.target_data), "O2 pic jitdefault", cpu.description(),
                     f"llvmlite={llvmlite.__version__}",
                     "llvm=" + ".".join(map(str, llvm.llvm_version_info))))


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


def compile_object(ir_text: str, libs: Sequence[str] = (), libdirs: Sequence[str] = ()) -> bytes:
    """Parse, verify and optimise (O2) a whole program and emit its machine code as an ELF
    object for MCJIT (the JIT target machine), after loading its ``-l`` libraries and checking
    that every symbol it uses resolves.

    Raises :class:`native.InvalidIR` (our bug) or :class:`LinkError` (unresolvable symbol or
    library: what ``cc`` would have refused).
    """
    tm = native.target_machine(jit=True)
    mod = native.parse(ir_text)
    native.optimize(mod, tm)
    return emit_checked(mod, tm, libs, libdirs)


def emit_checked(mod: llvm.ModuleRef, tm: llvm.TargetMachine, libs: Sequence[str] = (),
                 libdirs: Sequence[str] = ()) -> bytes:
    """The object code of an optimised module, after loading its ``-l`` libraries and checking
    that every symbol it uses resolves. Raises :class:`LinkError`."""
    load_libraries(libs, libdirs)
    missing = _undefined_symbols(mod)
    if missing:
        raise LinkError("undefined reference to " + ", ".join(f"`{m}`" for m in missing))
    return tm.emit_object(mod)


def load_object(obj: bytes) -> Compiled:
    """An MCJIT engine holding only the object ``obj`` (from :func:`compile_object`), relocated
    and ready to run (``seconds``: the time this took).

    Why an object and not the optimised module: an engine built from a module keeps that module
    (~0.9 MiB of LLVM IR for a cell importing three std modules), one built from its object
    keeps ~40 KiB; the code is the same (the same target machine emits it), and loading it costs
    ~1 ms. ``size_bytes``: the object's size (its sections are mapped by the engine) plus the C
    heap the engine holds afterwards.

    Raises :class:`native.InvalidIR` when the object defines no C ``main``.
    """
    start = time.perf_counter()
    before = _heap_in_use()
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), native.target_machine(jit=True))
    engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
    engine.finalize_object()
    address = engine.get_function_address("main")
    if not address:
        engine.close()
        raise native.InvalidIR("the module defines no C `main`")
    after = _heap_in_use()
    held = max(0, after - before) if after is not None and before is not None else 0
    return Compiled(engine, address, time.perf_counter() - start, len(obj) + held)


def compile_ir(ir_text: str, libs: Sequence[str] = (), libdirs: Sequence[str] = ()) -> Compiled:
    """Parse, verify, optimise (O2) and MCJIT-compile a whole program
    (:func:`compile_object`, then :func:`load_object`); ``seconds`` covers both.

    Raises :class:`native.InvalidIR` (our bug) or :class:`LinkError` (unresolvable symbol or
    library: what ``cc`` would have refused).
    """
    start = time.perf_counter()
    compiled = load_object(compile_object(ir_text, libs, libdirs))
    compiled.seconds = time.perf_counter() - start
    return compiled


@dataclass
class LibraryEngine:
    """A split run's library part (``split.py``) optimised and loaded in an engine of its own,
    and the addresses of the symbols the cell parts use; kept by the JIT worker's library cache.

    Why an engine of its own and not the library's object loaded next to the cell's: RuntimeDyld
    resolves the GOT-relative relocations of the JIT's large code model against the first
    ``.got`` it loaded, so the second object of one engine reads the wrong memory (measured:
    string constants read as another object's ``.eh_frame``). A cell's engine instead resolves
    the library's symbols to their absolute addresses. ``users``: cell programs compiled against
    it still alive; evicted from the cache, the engine is freed once the last of them is.
    """

    engine: llvm.ExecutionEngine
    addresses: dict[str, int]
    size_bytes: int
    users: int = 0
    evicted: bool = False

    def free(self) -> None:
        """Evicted: free the engine now, or when the last program using it is freed."""
        self.evicted = True
        self._close_if_unused()

    def release(self) -> None:
        """A program compiled against this library was freed."""
        self.users -= 1
        self._close_if_unused()

    def _close_if_unused(self) -> None:
        if self.evicted and self.users <= 0 and not self.engine.closed:
            self.engine.close()


def load_library(ir_text: str, exports: frozenset[str], libs: Sequence[str] = (),
                 libdirs: Sequence[str] = ()) -> LibraryEngine:
    """Optimise (O2) a split run's library part and load it into an engine of its own.
    Raises :class:`native.InvalidIR` or :class:`LinkError`."""
    before = _heap_in_use()
    tm = native.target_machine(jit=True)
    mod = native.parse(ir_text)
    native.optimize(mod, tm)
    obj = emit_checked(mod, tm, libs, libdirs)
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), tm)
    engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
    engine.finalize_object()
    addresses = {name: engine.get_function_address(name) for name in sorted(exports)}
    if not all(addresses.values()):
        engine.close()
        raise native.InvalidIR("the library part lacks a symbol the cell part uses")
    after = _heap_in_use()
    held = max(0, after - before) if after is not None and before is not None else 0
    return LibraryEngine(engine, addresses, len(obj) + held)


def compile_against(cell_ir: str, library: LibraryEngine, libs: Sequence[str] = (),
                    libdirs: Sequence[str] = ()) -> Compiled:
    """A split run's cell part optimised (O2) and compiled on its own, its uses of the library
    resolved to the addresses in ``library`` (which it keeps alive until freed).
    Raises :class:`native.InvalidIR` or :class:`LinkError`."""
    start = time.perf_counter()
    tm = native.target_machine(jit=True)
    mod = native.parse(cell_ir)
    native.optimize(mod, tm)
    load_libraries(libs, libdirs)
    missing = [m for m in _undefined_symbols(mod) if m not in library.addresses]
    if missing:
        raise LinkError("undefined reference to " + ", ".join(f"`{m}`" for m in missing))
    obj = tm.emit_object(mod)
    for name, address in library.addresses.items():
        llvm.add_symbol(name, address)  # the process-wide table MCJIT resolves against
    compiled = load_object(obj)
    compiled.library = library
    library.users += 1
    compiled.seconds = time.perf_counter() - start
    return compiled


def compile_piece(ir_text: str, imports: Sequence[str], libs: Sequence[str] = (),
                  libdirs: Sequence[str] = ()) -> bytes:
    """A split run's cell piece (``split.cell_parts``) optimised (O2) and emitted as an object;
    its ``imports`` (earlier pieces' and the library's symbols) resolve when it is loaded
    (:func:`load_pieces`), anything else must resolve in this process.
    Raises :class:`native.InvalidIR` or :class:`LinkError`."""
    tm = native.target_machine(jit=True)
    mod = native.parse(ir_text)
    native.optimize(mod, tm)
    load_libraries(libs, libdirs)
    allowed = set(imports)
    missing = [m for m in _undefined_symbols(mod) if m not in allowed]
    if missing:
        raise LinkError("undefined reference to " + ", ".join(f"`{m}`" for m in missing))
    return tm.emit_object(mod)


def load_pieces(objects: Sequence[tuple[bytes, Sequence[str], Sequence[str]]],
                library: LibraryEngine) -> Compiled:
    """A split run's cell pieces loaded in order, each ``(object, imports, exports)`` in an
    engine of its own (``LibraryEngine`` says why), its imports resolved to the library's and
    the earlier pieces' addresses; the C ``main`` is in the last. The program keeps ``library``
    alive until freed. Raises :class:`native.InvalidIR` when a symbol is missing."""
    start = time.perf_counter()
    before = _heap_in_use()
    addresses = dict(library.addresses)
    for name, address in library.addresses.items():
        llvm.add_symbol(name, address)
    engines: list[llvm.ExecutionEngine] = []
    size = 0
    try:
        for obj, imports, exports in objects:
            for name in imports:
                llvm.add_symbol(name, addresses[name])  # the process-wide table MCJIT resolves against
            engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), native.target_machine(jit=True))
            engines.append(engine)
            engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
            engine.finalize_object()
            for name in exports:
                address = engine.get_function_address(name) or engine.get_global_value_address(name)
                if not address:
                    raise native.InvalidIR(f"a cell piece lacks its symbol {name}")
                addresses[name] = address
            size += len(obj)
        main = addresses.get("main", 0)
        if not main or not engines:
            raise native.InvalidIR("the cell pieces define no C `main`")
    except BaseException:
        for engine in engines:
            engine.close()
        raise
    after = _heap_in_use()
    held = max(0, after - before) if after is not None and before is not None else 0
    compiled = Compiled(engines[-1], main, time.perf_counter() - start, size + held,
                        library=library, pieces=engines[:-1])
    library.users += 1
    return compiled


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
                   nproc: int | None = None, fsize: int | None = None) -> NoReturn:
    """In a freshly forked child: install the descriptors (``fd_map``: 0/1/2 -> fd, a missing key
    closes it; ``None`` keeps the inherited ones), set the run's limits on this process only
    (``memory`` bytes beyond the image inherited from the worker, ``cpu_seconds`` of CPU,
    RLIMIT_NPROC ``nproc``, RLIMIT_FSIZE ``fsize`` bytes), restore what a native process has,
    call ``main(argc, argv)`` and ``exit`` with its result. Never returns."""
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
        if fsize is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (int(fsize), int(fsize)))
        _restore_stdio_buffering()
        args = [a.encode("utf-8", "surrogateescape") for a in argv]
        c_argv = (ctypes.c_char_p * (len(args) + 1))(*args, None)
        entry = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_char_p))(
            main_address)
        status = entry(len(args), c_argv)
        _libc.fflush(None)  # what exit() does to stdio; a failed flush is ignored, as there
        os._exit(status & 0xFF)
    except BaseException:  # noqa: BLE001 - nothing may unwind into the forking parent's code
        try:
            import traceback

            os.write(2, ("cancho: the JIT child failed before running the program\n"
                         + traceback.format_exc()).encode())
        except BaseException:  # noqa: BLE001
            pass
    os._exit(127)


# -- the child side in C (jit_child.py) ---------------------------------------------------------

# (path, SHA-256) of the C child as the kernel verified it before starting the worker
# (jit_worker.py --child): the worker loads exactly those bytes or none.
_pinned_child: tuple[str, str] | None = None


def pin_child(path: str, sha256: str) -> None:
    """Load the C child from ``path`` only if its bytes hash to ``sha256`` (never build it)."""
    global _pinned_child
    _pinned_child = (path, sha256)
    _child_library.cache_clear()


def child_helper() -> Helper | None:
    """The C child, verified (chelper.py): the pinned one, else looked up or built."""
    if _pinned_child is not None:
        return verify_digest(Path(_pinned_child[0]), _pinned_child[1])
    return verified_helper(CHILD_SPEC)


def _load_bytes(helper: Helper) -> ctypes.CDLL:
    """Load the verified bytes themselves (a private memfd), not the path again: a file
    replaced after the check is never the one loaded."""
    fd = os.memfd_create(helper.path.name, os.MFD_CLOEXEC)
    try:
        os.write(fd, helper.content)
        return ctypes.CDLL(f"/proc/self/fd/{fd}")
    finally:
        os.close(fd)


@lru_cache(maxsize=1)
def _child_library() -> ctypes.CDLL | None:
    """The compiled C child (jit_child.py, verified by chelper.py and loaded from its checked
    bytes); None without a C compiler, when the build fails or when it does not verify."""
    helper = child_helper()
    if helper is None:
        return None
    try:
        lib = _load_bytes(helper)
    except OSError:
        return None
    fn = lib.cancho_jit_spawn
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_char_p), ctypes.c_int,
                   ctypes.POINTER(ctypes.c_int), ctypes.c_int, ctypes.c_int, ctypes.c_longlong,
                   ctypes.c_longlong, ctypes.c_longlong, ctypes.c_longlong,
                   ctypes.POINTER(ctypes.c_int), ctypes.c_int, ctypes.c_int,
                   ctypes.POINTER(ctypes.c_char_p)]
    lib.cancho_jit_trap_take.restype = ctypes.c_longlong
    lib.cancho_jit_trap_take.argtypes = [ctypes.c_int]
    return lib


def take_trap(pid: int | None) -> int | None:
    """The trap site number the C child ``pid`` (None: whichever) reported before it died
    (trapreport.py), taken once; None without the C child or a report."""
    lib = _child_library()
    if lib is None:
        return None
    number = lib.cancho_jit_trap_take(0 if pid is None else int(pid))
    return None if number < 0 else int(number)


def native_child_available() -> bool:
    """Whether runs start through the C child (else the Python one)."""
    return _child_library() is not None


def spawn_program(main_address: int, argv: Sequence[str], fd_map: dict[int, int] | None,
                  memory: int | None = None, *, own_group: bool = False,
                  cpu_seconds: int | None = None, nproc: int | None = None,
                  python_child: bool = False, confine: Sequence[str] | None = None,
                  fsize: int | None = None) -> int:
    """Fork a child that becomes the program (the contract of :func:`become_program`, with
    ``die_with_parent`` always on) and return its pid. Call it from a single-threaded process
    only. Through the C child when it is available and ``python_child`` is false.

    ``confine``: Landlock roots (confine.py's ``w/…``/``r/…``) the child is confined to before
    ``main``; only the C child confines, so a confined run without it is refused.

    Raises ``OSError`` when the fork fails (or a confined run cannot be confined).
    """
    lib = None if python_child else _child_library()
    if lib is None and confine is not None:
        raise OSError(errno.ENOSYS, "a confined run needs the JIT's C child (a C compiler)")
    if lib is None:
        flush_c_stdio()
        pid = os.fork()
        if pid == 0:
            become_program(main_address, argv, fd_map, memory, own_group=own_group,
                           die_with_parent=True, cpu_seconds=cpu_seconds, nproc=nproc,
                           fsize=fsize)
        return pid
    args = [a.encode("utf-8", "surrogateescape") for a in argv]
    c_argv = (ctypes.c_char_p * (len(args) + 1))(*args, None)
    fds = (ctypes.c_int * 3)(*(-1 if fd_map is None else fd_map.get(s, -1) for s in (0, 1, 2)))
    reset = (ctypes.c_int * len(RESET_SIGNALS))(*(int(s) for s in RESET_SIGNALS))

    def num(value: int | None) -> int:
        return -1 if value is None else int(value)

    flush_c_stdio()
    roots = encode_roots(confine or ())
    c_roots = (ctypes.c_char_p * (len(roots) + 1))(*roots, None)
    pid = lib.cancho_jit_spawn(main_address, len(args), c_argv, int(fd_map is not None), fds,
                               int(own_group), os.getpid(), num(memory), num(cpu_seconds),
                               num(nproc), num(fsize), reset, len(RESET_SIGNALS),
                               -1 if confine is None else len(roots), c_roots)
    if pid < 0:
        raise OSError(-pid, os.strerror(-pid))
    return pid
