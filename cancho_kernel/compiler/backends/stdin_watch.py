"""Whether a run is waiting for its standard input: some process of this process's tree is
blocked in ``read`` on the run's stdin pipe.

Why from /proc and not from the program: a program's input box must appear only when it
actually reads (not for every program that could), and nothing in the program has to change
for it. ``/proc/TID/syscall`` names the system call a blocked thread is in and its arguments;
the descriptor of a ``read``/``readv`` is looked up in ``/proc/TID/fd`` and compared with the
pipe's inode. Both need the access a parent has to its own descendants, also inside the
sandbox's namespaces (sandbox.py: the user namespace is ours), so the same check serves the exe
launcher's program, the JIT worker's forked child and anything they started, sandboxed or not.

The tree is walked from this process (``/proc/PID/task/TID/children``), so the pipe's reader
is found wherever it sits: under the launcher, under bwrap, or under the JIT worker's guard.
"""

from __future__ import annotations

import os
import platform

from .proc import children_of

# read(2) and readv(2) by machine (the numbers of the kernel's system call table).
_READ_CALLS: dict[str, frozenset[int]] = {
    "x86_64": frozenset({0, 19}),
    "aarch64": frozenset({63, 65}),
}
_MAX_PROCESSES = 4096  # a bound on the walk: a fork bomb must not make every tick slow


def read_calls() -> frozenset[int]:
    """The system call numbers that read a descriptor on this machine (empty: unknown)."""
    return _READ_CALLS.get(platform.machine(), frozenset())


def pipe_inode(fd: int) -> int:
    """The inode that names the pipe ``fd`` is an end of (both ends share it)."""
    return os.fstat(fd).st_ino


def _blocked_fd(tid_dir: str, calls: frozenset[int]) -> int | None:
    """The descriptor the thread is blocked reading, if it is blocked in a read."""
    try:
        with open(f"{tid_dir}/syscall") as f:
            words = f.read().split()
    except OSError:
        return None
    if len(words) < 2 or not words[0].isdigit() or int(words[0]) not in calls:
        return None
    try:
        return int(words[1], 16)
    except ValueError:
        return None


def _reads_pipe(pid: int, link: str, calls: frozenset[int]) -> bool:
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return False
    for tid in tids:
        fd = _blocked_fd(f"/proc/{pid}/task/{tid}", calls)
        if fd is None:
            continue
        try:
            if os.readlink(f"/proc/{pid}/task/{tid}/fd/{fd}") == link:
                return True
        except OSError:
            continue
    return False


def reader_waiting(inode: int, root: int | None = None) -> bool:
    """True when a descendant of ``root`` (default: this process) is blocked reading the pipe
    whose inode is ``inode``."""
    calls = read_calls()
    if not calls:
        return False
    link = f"pipe:[{inode}]"
    todo = children_of(os.getpid() if root is None else root)
    seen = 0
    while todo and seen < _MAX_PROCESSES:
        pid = todo.pop()
        seen += 1
        if _reads_pipe(pid, link, calls):
            return True
        todo += children_of(pid)
    return False


def unread_bytes(fd: int) -> int:
    """How many bytes sit in the pipe ``fd`` is an end of (FIONREAD works on either end)."""
    import array
    import fcntl
    import termios

    buf = array.array("i", [0])
    try:
        fcntl.ioctl(fd, termios.FIONREAD, buf, True)
    except OSError:
        return 0
    return int(buf[0])
