"""The JIT worker process:
``python -I -c BOOTSTRAP PACKAGE_DIR FD [--cache-programs N] [--cache-bytes B] [--retire-bytes B]
[--child PATH --child-sha256 HEX]`` (jit.py's :func:`~.jit.worker_command`; in safe mode inside
the sandbox, sandbox.py).

Why a separate process: a Jupyter kernel has several threads, and forking it then running LLVM
in the child is unsafe (locks held by other threads at fork time, kernel.md §3.3). This worker
is single-threaded, keeps LLVM initialised, compiles each program with MCJIT and forks **one
child per run**, so a trap or a segfault kills only that child. Compiled programs are kept by
content (:class:`ProgramCache`, bounded by :class:`CacheBounds`), so re-running unchanged IR
skips compilation.

Protocol (Unix stream socket inherited as descriptor FD; each message is a 4-byte big-endian
length and a UTF-8 JSON object; descriptors travel with ``socket.send_fds`` on the length):

    client -> worker   {"op": "run", "ir", "argv", "libs", "libdirs", "slots", "memory",
                        "cpu", "nproc", "fsize", "confine", "split"}
                       (limits of the child only; null: none;
                       "split": true compiles std apart and reuses it, see below)
                       + descriptors: one per entry of "slots" (0/1/2, the child's numbers;
                       a standard descriptor absent from "slots" is closed in the child;
                       "slots": null means the child keeps the worker's own)
                       {"op": "ping"}
                       {"op": "kill"}   (SIGKILL the running program's group; ignored
                       between runs)
    worker -> client   {"ev": "compiled", "seconds", "cached"}  then
                       {"ev": "started", "pid"}                   then
                       {"ev": "exited", "status", "utime", "stime", "maxrss", "wall",
                        "retire"}  (retire: the worker ends now, CacheBounds.retire_bytes)
                       or {"ev": "error", "kind": "invalid-ir"|"link"|"internal", "message"}
                       {"ev": "pong", "pid", "child": "c"|"python",  (how runs start)
                        "cache": {"programs", "bytes", "hits", "misses", "evictions"},
                        "library": {same fields, the split runs' std engines},
                        "split": {"runs", "fallbacks", "pieced", "piece_hits",
                                  "piece_misses"}}

Split runs (a notebook's cells; ``%%bench`` and the CLI never ask for them): the program's IR is
cut into its std library part and the cell's own part (``split.py``), each optimised on its own;
the library, optimised and loaded in an engine of its own, is kept in a second
:class:`ProgramCache` keyed by its text, so an edited cell optimises and compiles only its own
part, whose uses of std resolve to the kept engine's addresses (``mcjit.LibraryEngine``). The
cell's part is cut once more, per function (``split.cell_parts``): each piece's object code is
kept by its text in :class:`ObjectCache`, and the pieces are loaded callees first, each in an
engine of its own (``mcjit.load_pieces``), so an edited function is the only piece optimised
again. Calls from the cell into std, and between the cell's functions, are not inlined, which is
why ``%%bench`` keeps the whole program. Whatever goes wrong while splitting, the run falls back
to the whole program (a cell part the per-function cut does not know is compiled whole).

The client kills a running child itself (SIGKILL to its process group, whose id is the pid it
was told) or, when the worker is sandboxed (its pids are those of its own PID namespace), asks
with ``{"op": "kill"}``. If the client goes away (end of file on the socket) the worker kills its
child and exits; a child dies with the worker (PR_SET_PDEATHSIG).

Nothing a run starts outlives it: the worker is a child subreaper, so a process the program
started is re-parented here when its parent dies — even one that left the run's process group
with ``setsid`` — and after every run (and before exiting) the worker kills and reaps every
child it still has. The worker's only children are runs, so this is exact. And when the worker
itself is SIGKILLed mid-run, its guard (:func:`stand_guard`, the small process it forked from
before loading LLVM) inherits what is left and kills it.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import select
import signal
import socket
import struct
import sys
import time
import traceback
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .cgroups import DelegatedGroups
from .process import become_subreaper, die_with_parent, kill_children

if TYPE_CHECKING:
    from .mcjit import Compiled

_HEADER = struct.Struct("!I")
# Set to "1" in the worker's environment to start runs from Python instead of the C child
# (mcjit.spawn_program); the tests run both.
PYTHON_CHILD_ENV = "CANCHO_JIT_PYTHON_CHILD"
MAX_FDS = 8


def send_msg(sock: socket.socket, obj: dict[str, Any], fds: list[int] | None = None) -> None:
    """One framed message; descriptors ride on the header."""
    body = json.dumps(obj).encode()
    header = _HEADER.pack(len(body))
    if fds:
        socket.send_fds(sock, [header], fds)
        sock.sendall(body)
    else:
        sock.sendall(header + body)


def _recv_exact(sock: socket.socket, n: int, into: bytearray) -> bool:
    while len(into) < n:
        try:
            chunk = sock.recv(n - len(into))
        except ConnectionResetError:
            return False
        if not chunk:
            return False
        into += chunk
    return True


def recv_msg(sock: socket.socket) -> tuple[dict[str, Any], list[int]] | None:
    """The next message and its descriptors (close-on-exec), or None at end of file."""
    try:
        data, fds, _flags, _addr = socket.recv_fds(sock, _HEADER.size, MAX_FDS)
    except ConnectionResetError:  # the peer died with unread data: the same as end of file
        return None
    for fd in fds:
        os.set_inheritable(fd, False)
    head = bytearray(data)
    if not head or not _recv_exact(sock, _HEADER.size, head):
        for fd in fds:
            os.close(fd)
        return None
    (length,) = _HEADER.unpack(head)
    body = bytearray()
    if not _recv_exact(sock, length, body):
        for fd in fds:
            os.close(fd)
        return None
    return json.loads(body), fds


@dataclass(frozen=True)
class CacheBounds:
    """The worker's memory bounds: at most ``programs`` compiled programs in its
    :class:`ProgramCache` and ``max_bytes`` of what their engines hold
    (:attr:`mcjit.Compiled.size_bytes`); ``retire_bytes`` of private memory for the whole worker.

    Why these defaults (16 programs, 64 MiB; retire at 256 MiB): a run forks the worker, and a
    fork costs the page tables of the worker's private memory, so the cache must stay small to
    keep runs cheap; an engine built from object code holds ~40 KiB for a std-importing cell, so
    the count bound is the one a notebook meets, and the byte bound stops a few huge programs."""

    programs: int = 16
    max_bytes: int = 64 * 1024 * 1024
    # The worker retires (ends after the run; the client starts a fresh one) once its private
    # memory exceeds this: LLVM's O2 pipeline keeps ~130 KiB per program compiled (llvmlite
    # 0.50, LLVM 22; measured, not freed by closing the pass builder or using a fresh context),
    # so a worker compiling thousands of distinct programs would otherwise grow without bound.
    retire_bytes: int = 256 * 1024 * 1024


@dataclass
class CacheStats:
    """What the cache holds now and what it did since the worker started."""

    programs: int = 0
    bytes: int = 0
    hits: int = 0
    misses: int = 0
    evictions: int = 0


class ProgramCache:
    """Compiled programs kept by content, least recently used evicted first.

    A program is keyed by the SHA-256 of its IR text, its ``-l`` libraries and directories, and
    :func:`mcjit.code_identity` (what else changes the machine code); so a re-run of an unchanged
    cell skips parsing, O2 and code generation, and two programs differing in any of these never
    share an entry. Sharing machine code is safe because every run is a forked child: what a
    program writes to its globals and static data never reaches the worker, so each run starts
    from the loaded image. A program larger than the byte bound runs but is not kept. Eviction
    frees the engine at once.
    """

    def __init__(self, bounds: CacheBounds = CacheBounds()) -> None:
        if bounds.programs < 0 or bounds.max_bytes < 0 or bounds.retire_bytes < 0:
            raise ValueError(f"cache bounds must not be negative: {bounds}")
        self.bounds = bounds
        self._entries: OrderedDict[str, Compiled] = OrderedDict()
        self._identity: str | None = None
        self.stats = CacheStats()

    def key(self, ir: str, libs: Sequence[str] = (), libdirs: Sequence[str] = (),
            mode: str = "") -> str:
        """The content key of a program as this worker would compile it in ``mode``."""
        if self._identity is None:
            from . import mcjit

            self._identity = mcjit.code_identity()
        return content_key(ir, libs, libdirs, self._identity, mode)

    def get(self, key: str) -> Compiled | None:
        """The program compiled under ``key``, now the most recently used; None on a miss."""
        got = self._entries.get(key)
        if got is None:
            self.stats.misses += 1
            return None
        self._entries.move_to_end(key)
        self.stats.hits += 1
        return got

    def put(self, key: str, compiled: Compiled) -> None:
        """Keep ``compiled`` (unless it alone exceeds a bound), evicting the least recently
        used programs until both bounds hold."""
        if key in self._entries or compiled.size_bytes > self.bounds.max_bytes \
                or self.bounds.programs == 0:
            return
        self._entries[key] = compiled
        self.stats.bytes += compiled.size_bytes
        while (len(self._entries) > self.bounds.programs
               or self.stats.bytes > self.bounds.max_bytes):
            _, old = self._entries.popitem(last=False)
            self.stats.bytes -= old.size_bytes
            self.stats.evictions += 1
            old.free()
        self.stats.programs = len(self._entries)

    def holds(self, key: str) -> bool:
        """Whether an entry is kept under ``key`` (counts neither a hit nor a miss)."""
        return key in self._entries

    def snapshot(self) -> CacheStats:
        """A copy of the counters (safe to send or keep)."""
        return dataclasses.replace(self.stats, programs=len(self._entries))


def private_bytes() -> int:
    """This process's resident anonymous memory (``RssAnon``), bytes; 0 if unknown."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def content_key(ir: str, libs: Sequence[str], libdirs: Sequence[str], identity: str,
                mode: str = "") -> str:
    """SHA-256 over the IR text, the libraries, their directories and the code identity (and
    the compilation ``mode`` when it is not the whole-program one: ``"split"``, ``"library"``)."""
    parts = [ir, list(libs), list(libdirs), identity] + ([mode] if mode else [])
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()


@dataclass
class SplitStats:
    """Programs compiled split since the worker started, and how many split attempts failed
    and fell back to the whole program (a program without std is neither); of the split ones,
    how many had their cell part cut per function (``split.cell_parts``), and how many of those
    pieces' objects were kept from an earlier run (``piece_hits``) or compiled (``piece_misses``)."""

    runs: int = 0
    fallbacks: int = 0
    pieced: int = 0
    piece_hits: int = 0
    piece_misses: int = 0


class ObjectCache:
    """Optimised object code of cell pieces by content key, least recently used dropped first
    (at most ``programs`` x 16 objects and ``max_bytes`` of them: the worker's bounds)."""

    def __init__(self, bounds: CacheBounds) -> None:
        self.limit = bounds.programs * 16
        self.max_bytes = bounds.max_bytes
        self._entries: OrderedDict[str, bytes] = OrderedDict()
        self._bytes = 0

    def get(self, key: str) -> bytes | None:
        got = self._entries.get(key)
        if got is not None:
            self._entries.move_to_end(key)
        return got

    def put(self, key: str, obj: bytes) -> None:
        if key in self._entries or len(obj) > self.max_bytes or self.limit == 0:
            return
        self._entries[key] = obj
        self._bytes += len(obj)
        while len(self._entries) > self.limit or self._bytes > self.max_bytes:
            _, old = self._entries.popitem(last=False)
            self._bytes -= len(old)


class Worker:
    """The worker's loop and its cache of compiled programs (:class:`ProgramCache`)."""

    def __init__(self, sock: socket.socket, python_child: bool = False,
                 bounds: CacheBounds = CacheBounds()) -> None:
        self.sock = sock
        self.python_child = python_child  # fork in Python even when the C child is available
        self.cache = ProgramCache(bounds)
        self.library = ProgramCache(bounds)  # split runs' std parts (mcjit.LibraryEngine)
        self.pieces = ObjectCache(bounds)  # split runs' cell pieces, as object code
        self.refs_memo: dict = {}  # what each IR entity's text uses (split.parse_entities)
        self.split = SplitStats()
        self.groups = DelegatedGroups.from_env()  # each run's own cgroup, in a sandbox (cgroups.py)

    def serve(self) -> None:
        while True:
            got = recv_msg(self.sock)
            if got is None:
                return
            msg, fds = got
            try:
                if msg.get("op") == "run":
                    if not self.run(msg, fds):
                        return
                elif msg.get("op") == "kill":
                    pass  # for a run that has ended since it was sent
                elif msg.get("op") == "ping":
                    from . import mcjit

                    child = ("python" if self.python_child or not mcjit.native_child_available()
                             else "c")
                    send_msg(self.sock, {"ev": "pong", "pid": os.getpid(), "child": child,
                                         "cache": dataclasses.asdict(self.cache.snapshot()),
                                         "library": dataclasses.asdict(self.library.snapshot()),
                                         "split": dataclasses.asdict(self.split)})
                else:
                    send_msg(self.sock, {"ev": "error", "kind": "internal",
                                         "message": f"unknown request {msg.get('op')!r}"})
            finally:
                for fd in fds:
                    try:
                        os.close(fd)
                    except OSError:
                        pass

    def _compile(self, msg: dict[str, Any]) -> tuple[Compiled, bool]:
        """The program of a run request from the cache, or compiled and kept; and whether it
        came from the cache."""
        from . import mcjit

        libs, libdirs = msg.get("libs", []), msg.get("libdirs", [])
        split = bool(msg.get("split"))
        key = self.cache.key(msg["ir"], libs, libdirs, "split" if split else "")
        got = self.cache.get(key)
        if got is not None:
            return got, True
        compiled = None
        if split:
            from .split import NothingToSplit

            try:
                compiled = self._compile_split(msg["ir"], libs, libdirs)
                self.split.runs += 1
            except NothingToSplit:
                pass  # a program without std: the whole program is the cell's own part
            except Exception:  # noqa: BLE001 - any failure: the whole program decides
                self.split.fallbacks += 1
        if compiled is None:
            compiled = mcjit.compile_ir(msg["ir"], libs, libdirs)
        self.cache.put(key, compiled)
        mcjit.release_free_memory()  # what compiling (and evicting) freed: cheaper forks
        return compiled, False

    def _compile_split(self, ir: str, libs: Sequence[str], libdirs: Sequence[str]) -> Compiled:
        """The program compiled as a library and a cell part, the library's object from the
        library cache when its text was compiled before. Raises on any failure (the caller
        falls back to the whole program)."""
        from . import mcjit
        from .split import SplitError, split_ir

        start = time.perf_counter()
        parts = split_ir(ir, self.refs_memo)
        lib_key = self.library.key(parts.library, libs, libdirs, "library")
        if parts.cell_exports:
            raise SplitError("the library part uses the cell's symbols")
        lib = self.library.get(lib_key)
        if lib is None:
            lib = mcjit.load_library(parts.library, parts.library_exports, libs, libdirs)
            self.library.put(lib_key, lib)
        if not self.library.holds(lib_key):
            lib.evicted = True  # not kept (a bound): freed with the program, or now on failure
        try:
            try:
                compiled = self._compile_pieces(parts.cell, lib, libs, libdirs)
            except SplitError:  # a shape the per-function cut does not know: the cell part whole
                compiled = mcjit.compile_against(parts.cell, lib, libs, libdirs)
        except Exception:
            if lib.evicted:
                lib.free()
            raise
        compiled.seconds = time.perf_counter() - start
        return compiled

    def _compile_pieces(self, cell: str, lib: Any, libs: Sequence[str], libdirs: Sequence[str]) -> Compiled:
        """The cell part cut per function (``split.cell_parts``), each piece's object from
        :attr:`pieces` when its text was compiled before, then all loaded against ``lib``."""
        from . import mcjit
        from .split import cell_parts

        pieces = cell_parts(cell, self.refs_memo)
        objects = []
        hits = 0
        for piece in pieces:
            key = self.library.key(piece.text, libs, libdirs, "piece")
            obj = self.pieces.get(key)
            if obj is None:
                obj = mcjit.compile_piece(piece.text, [*piece.imports, *lib.addresses], libs, libdirs)
                self.pieces.put(key, obj)
            else:
                hits += 1
            objects.append((obj, piece.imports, piece.exports))
        compiled = mcjit.load_pieces(objects, lib)
        self.split.pieced += 1
        self.split.piece_hits += hits
        self.split.piece_misses += len(pieces) - hits
        return compiled

    def run(self, msg: dict[str, Any], fds: list[int]) -> bool:
        """One run; False when the client has gone away."""
        from . import mcjit, native
        from .exe import LinkError

        try:
            compiled, cached = self._compile(msg)
        except native.InvalidIR as exc:
            send_msg(self.sock, {"ev": "error", "kind": "invalid-ir", "message": str(exc)})
            return True
        except LinkError as exc:
            send_msg(self.sock, {"ev": "error", "kind": "link", "message": str(exc)})
            return True
        except Exception:  # noqa: BLE001 - reported to the client as an internal failure
            send_msg(self.sock, {"ev": "error", "kind": "internal",
                                 "message": traceback.format_exc()})
            return True
        send_msg(self.sock, {"ev": "compiled", "seconds": compiled.seconds, "cached": cached})

        slots = msg.get("slots")
        fd_map = None if slots is None else dict(zip(slots, fds))
        start = time.monotonic()
        group = self.groups.enter_run() if self.groups is not None else None  # the child is born in it
        try:
            pid = mcjit.spawn_program(compiled.main_address, msg["argv"], fd_map,
                                      msg.get("memory"), own_group=slots is not None,
                                      cpu_seconds=msg.get("cpu"), nproc=msg.get("nproc"),
                                      python_child=self.python_child, confine=msg.get("confine"),
                                      fsize=msg.get("fsize"))
        except OSError as exc:  # EAGAIN: the user's process limit, or no memory
            pid, failed = -1, exc
        finally:
            if group is not None and not self.groups.leave():  # before any kill of the group
                group = None  # the worker is still in it: never killed with the run
        if pid < 0:
            if group is not None:
                group.remove()
            send_msg(self.sock, {"ev": "error", "kind": "internal",
                                 "message": f"cannot start the program: {failed}"})
            return True
        if slots is not None:
            try:
                os.setpgid(pid, pid)  # also here, so the client can kill the group at once
            except OSError:
                pass
        for fd in fds:
            os.close(fd)
        fds.clear()
        send_msg(self.sock, {"ev": "started", "pid": pid})
        status, rusage, client_gone = self._wait(pid, own_group=slots is not None)
        wall = time.monotonic() - start
        trap = mcjit.take_trap(pid) if os.WIFSIGNALED(status) else None
        if group is not None:
            group.remove()  # the run's group killed whole, whatever it became
        kill_children()  # what the program left behind, setsid'd or not
        if client_gone:
            return False
        retire = not cached and private_bytes() > self.cache.bounds.retire_bytes
        send_msg(self.sock, {"ev": "exited", "status": status, "utime": rusage.ru_utime,
                             "stime": rusage.ru_stime, "maxrss": rusage.ru_maxrss,
                             "wall": wall, "retire": retire, "trap": trap})
        return not retire

    def _wait(self, pid: int, own_group: bool):
        """Wait for the child, watching the socket: ``{"op": "kill"}`` kills it (the client
        cannot, when the worker is in a PID namespace of its own: the sandbox); end of file (the
        client has gone) kills it too. Other requests are not part of the protocol during a run
        and are dropped."""
        pidfd = os.pidfd_open(pid)
        try:
            client_gone = False
            while True:
                watched = [pidfd] if client_gone else [pidfd, self.sock]
                ready, _, _ = select.select(watched, [], [])
                if pidfd in ready:
                    break
                got = recv_msg(self.sock)
                if got is not None:
                    for fd in got[1]:
                        os.close(fd)
                if got is None or got[0].get("op") == "kill":
                    client_gone = client_gone or got is None
                    _kill_run(pid, own_group)
            _, status, rusage = os.wait4(pid, 0)
            return status, rusage, client_gone
        finally:
            os.close(pidfd)


def _kill_run(pid: int, own_group: bool) -> None:
    """SIGKILL the run's process group (or the program alone when it has none)."""
    try:
        os.killpg(pid, signal.SIGKILL) if own_group else os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


def parse_args(argv: list[str]) -> argparse.Namespace:
    """``FD [--cache-programs N] [--cache-bytes B] [--retire-bytes B] [--child PATH
    --child-sha256 HEX]`` (defaults: :class:`CacheBounds`; the C child looked up by itself)."""
    p = argparse.ArgumentParser(prog="python -m cancho_kernel.compiler.backends.jit_worker")
    p.add_argument("fd", type=int, help="the inherited Unix stream socket")
    p.add_argument("--cache-programs", type=int, default=CacheBounds.programs)
    p.add_argument("--cache-bytes", type=int, default=CacheBounds.max_bytes)
    p.add_argument("--retire-bytes", type=int, default=CacheBounds.retire_bytes)
    p.add_argument("--child", default=None, help="the C child, as the client verified it")
    p.add_argument("--child-sha256", default=None, help="its SHA-256 (chelper.py)")
    return p.parse_args(argv)


def stand_guard(sock_fd: int) -> None:
    """Fork before LLVM is loaded: the child returns and becomes the worker; this small process
    stays behind as its guard and never returns. Why: the worker is a subreaper, but when it is
    SIGKILLed (the OOM killer picks the largest process, and LLVM makes it so) what its runs
    left would be re-parented to init; the guard, a subreaper above it, inherits them instead
    and kills them. SIGTERM or SIGHUP to the guard kills the worker, then everything. The
    worker dies with the guard (PR_SET_PDEATHSIG), so the client never SIGKILLs the guard
    unless it does not end (jit.py)."""
    become_subreaper()
    guard = os.getpid()
    pid = os.fork()
    if pid == 0:
        die_with_parent(signal.SIGKILL)
        if os.getppid() != guard:  # the guard died before the line above
            os._exit(1)
        return
    os.close(sock_fd)  # end of file reaches the worker when the client goes, whatever the guard does

    def stop(signum: int, frame: object) -> None:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, stop)
    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:
        status = 0
    kill_children()
    code = os.waitstatus_to_exitcode(status)
    os._exit(code if code >= 0 else 128 - code)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    # Interrupts are the client's business (it kills the child); a terminal's Ctrl-C must not
    # take the worker down with the kernel's process group.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    stand_guard(args.fd)
    sock = socket.socket(fileno=args.fd)
    os.set_inheritable(sock.fileno(), False)
    from . import mcjit, native

    if args.child is not None:
        mcjit.pin_child(args.child, args.child_sha256 or "")
    native.ensure_initialised()
    mcjit.native_child_available()  # load the C child now, not during the first run
    become_subreaper()
    try:
        Worker(sock, python_child=os.environ.get(PYTHON_CHILD_ENV) == "1",
               bounds=CacheBounds(args.cache_programs, args.cache_bytes,
                                  args.retire_bytes)).serve()
    except (BrokenPipeError, ConnectionResetError):
        pass
    finally:
        kill_children()
    return 0


if __name__ == "__main__":
    sys.exit(main())
