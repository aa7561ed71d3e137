"""The JIT worker process: ``python -m cancho_kernel.compiler.backends.jit_worker FD``.

Why a separate process: a Jupyter kernel has several threads, and forking it then running LLVM
in the child is unsafe (locks held by other threads at fork time, kernel.md §3.3). This worker
is single-threaded, keeps LLVM initialised, compiles each program with MCJIT and forks **one
child per run**, so a trap or a segfault kills only that child.

Protocol (Unix stream socket inherited as descriptor FD; each message is a 4-byte big-endian
length and a UTF-8 JSON object; descriptors travel with ``socket.send_fds`` on the length):

    client -> worker   {"op": "run", "ir", "argv", "libs", "libdirs", "slots", "memory",
                        "cpu", "nproc"}   (limits of the child only; null: none)
                       + descriptors: one per entry of "slots" (0/1/2, the child's numbers;
                       a standard descriptor absent from "slots" is closed in the child;
                       "slots": null means the child keeps the worker's own)
                       {"op": "ping"}
    worker -> client   {"ev": "compiled", "seconds", "cached"}  then
                       {"ev": "started", "pid"}                   then
                       {"ev": "exited", "status", "utime", "stime", "maxrss", "wall"}
                       or {"ev": "error", "kind": "invalid-ir"|"link"|"internal", "message"}
                       {"ev": "pong", "pid", "child": "c"|"python"}  (how runs start)

The client kills a running child itself (SIGKILL to its process group, whose id is the pid it
was told), so the worker never needs to listen while it waits. If the client goes away (end of
file on the socket) the worker kills its child and exits; a child dies with the worker
(PR_SET_PDEATHSIG).

Nothing a run starts outlives it: the worker is a child subreaper, so a process the program
started is re-parented here when its parent dies — even one that left the run's process group
with ``setsid`` — and after every run (and before exiting) the worker kills and reaps every
child it still has. The worker's only children are runs, so this is exact.
"""

from __future__ import annotations

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
from typing import Any

from .process import become_subreaper, kill_children

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


CACHE_SIZE = 8


class Worker:
    """The worker's loop and its few most recently compiled programs (a re-run of the same IR,
    as a benchmark interleaving several programs does, skips compilation)."""

    def __init__(self, sock: socket.socket, python_child: bool = False) -> None:
        from collections import OrderedDict

        self.sock = sock
        self.python_child = python_child  # fork in Python even when the C child is available
        self._cache: "OrderedDict[str, object]" = OrderedDict()

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
                elif msg.get("op") == "ping":
                    from . import mcjit

                    child = ("python" if self.python_child or not mcjit.native_child_available()
                             else "c")
                    send_msg(self.sock, {"ev": "pong", "pid": os.getpid(), "child": child})
                else:
                    send_msg(self.sock, {"ev": "error", "kind": "internal",
                                         "message": f"unknown request {msg.get('op')!r}"})
            finally:
                for fd in fds:
                    try:
                        os.close(fd)
                    except OSError:
                        pass

    def _compile(self, msg: dict[str, Any]):
        from . import mcjit

        key = hashlib.sha256(json.dumps([msg["ir"], msg.get("libs", []),
                                         msg.get("libdirs", [])]).encode()).hexdigest()
        got = self._cache.get(key)
        if got is not None:
            self._cache.move_to_end(key)
            return got, True
        while len(self._cache) >= CACHE_SIZE:
            self._cache.popitem(last=False)  # drop the least recently used engine first
        compiled = mcjit.compile_ir(msg["ir"], msg.get("libs", []), msg.get("libdirs", []))
        self._cache[key] = compiled
        return compiled, False

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
        try:
            pid = mcjit.spawn_program(compiled.main_address, msg["argv"], fd_map,
                                      msg.get("memory"), own_group=slots is not None,
                                      cpu_seconds=msg.get("cpu"), nproc=msg.get("nproc"),
                                      python_child=self.python_child)
        except OSError as exc:  # EAGAIN: the user's process limit, or no memory
            send_msg(self.sock, {"ev": "error", "kind": "internal",
                                 "message": f"cannot start the program: {exc}"})
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
        kill_children()  # what the program left behind, setsid'd or not
        if client_gone:
            return False
        send_msg(self.sock, {"ev": "exited", "status": status, "utime": rusage.ru_utime,
                             "stime": rusage.ru_stime, "maxrss": rusage.ru_maxrss,
                             "wall": wall})
        return True

    def _wait(self, pid: int, own_group: bool):
        """Wait for the child, watching the socket: if the client disappears, kill the child."""
        pidfd = os.pidfd_open(pid)
        try:
            client_gone = False
            while True:
                ready, _, _ = select.select([pidfd, self.sock], [], [])
                if pidfd in ready:
                    break
                if self.sock in ready and not client_gone:
                    try:
                        peek = self.sock.recv(1, socket.MSG_PEEK)
                    except OSError:
                        peek = b""
                    if not peek:
                        client_gone = True
                        try:
                            os.killpg(pid, signal.SIGKILL) if own_group else os.kill(
                                pid, signal.SIGKILL)
                        except OSError:
                            pass
                    else:
                        # A request while a child runs is not part of the protocol; wait on
                        # the child alone rather than spin on the readable socket.
                        select.select([pidfd], [], [])
                        break
            _, status, rusage = os.wait4(pid, 0)
            return status, rusage, client_gone
        finally:
            os.close(pidfd)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    sock = socket.socket(fileno=int(argv[0]))
    os.set_inheritable(sock.fileno(), False)
    # Interrupts are the client's business (it kills the child); a terminal's Ctrl-C must not
    # take the worker down with the kernel's process group.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from . import mcjit, native

    native.ensure_initialised()
    mcjit.native_child_available()  # build or load the C child now, not during the first run
    become_subreaper()
    try:
        Worker(sock, python_child=os.environ.get(PYTHON_CHILD_ENV) == "1").serve()
    except (BrokenPipeError, ConnectionResetError):
        pass
    finally:
        kill_children()
    return 0


if __name__ == "__main__":
    sys.exit(main())
