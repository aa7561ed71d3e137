"""Per-user memory and CPU limits through Linux control groups, when the hub may create them.

JupyterHub's local-process spawners only *advertise* ``mem_limit``/``cpu_limit`` (as ``MEM_LIMIT``
and ``CPU_LIMIT`` in the server's environment); nothing enforces them. A hub running as root can:
one group per user beside the hub (``PREFIX-USER`` in the hub's own group), joined before the
server's ``exec`` (so the server, its kernels, their JIT workers and every program they run are
charged to it). The groups are flat on purpose: under CFS group scheduling a common parent group
would weigh all students together as one process against everything else on the machine; flat,
each student weighs one process. The group also
answers "which processes did this user's server leave?" when it stops.

Both layouts are handled: cgroup v2 (``memory.max``, ``cpu.max``) and v1 (``memory`` and ``cpu``
hierarchies, ``memory.limit_in_bytes``, ``cpu.cfs_quota_us``). Without a writable hierarchy the
limits are not enforced (the spawner logs it).
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
CPU_PERIOD_US = 100_000


@dataclass(frozen=True)
class Controller:
    """One place a limit is written: the hierarchy's directory for the hub and its file names."""

    parent: Path  # the hub's own group in this hierarchy (users' groups are made in it)
    memory_file: str | None
    cpu_file: str | None
    v2: bool


def _own_group(hierarchy: str) -> str | None:
    """This process's group path in ``hierarchy`` (``""`` for v2's unified one) from /proc."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, names, path = line.split(":", 2)
        if names.split(",").count(hierarchy) or (hierarchy == "" and names == ""):
            return path
    return None


def _writable(d: Path) -> bool:
    return d.is_dir() and os.access(d, os.W_OK)


def find_controllers() -> list[Controller]:
    """The hierarchies where this process may make users' groups (maybe none)."""
    found: list[Controller] = []
    if (CGROUP_ROOT / "cgroup.controllers").exists():  # a pure v2 host
        own = _own_group("")
        if own is not None:
            parent = CGROUP_ROOT / own.lstrip("/")
            enabled = (parent / "cgroup.subtree_control").read_text().split() if _writable(parent) else []
            if _writable(parent) and "memory" in enabled:
                found.append(Controller(parent, "memory.max",
                                        "cpu.max" if "cpu" in enabled else None, v2=True))
        return found
    for hierarchy, mem, cpu in (("memory", "memory.limit_in_bytes", None), ("cpu", None, "cpu.cfs_quota_us")):
        own = _own_group(hierarchy)
        parent = CGROUP_ROOT / hierarchy / (own or "/").lstrip("/")
        if own is not None and _writable(parent):
            found.append(Controller(parent, mem, cpu, v2=False))
    return found


@dataclass
class UserGroups:
    """The groups of one user's server: made with the limits, joined by the server, emptied at stop."""

    dirs: list[Path]
    enforced: list[str]

    @classmethod
    def create(cls, controllers: list[Controller], name: str, mem_bytes: int | None,
               cpu_cores: float | None) -> "UserGroups":
        """Groups named ``name`` (unique to the hub and the user) with the limits written."""
        dirs: list[Path] = []
        enforced: list[str] = []
        for c in controllers:
            d = c.parent / name
            try:
                d.mkdir(exist_ok=True)
                if c.memory_file and mem_bytes:
                    (d / c.memory_file).write_text(str(mem_bytes))
                    enforced.append(f"memory {mem_bytes >> 20} MiB")
                if c.cpu_file and cpu_cores:
                    quota = max(1000, int(cpu_cores * CPU_PERIOD_US))
                    if c.v2:
                        (d / c.cpu_file).write_text(f"{quota} {CPU_PERIOD_US}")
                    else:
                        (d / "cpu.cfs_period_us").write_text(str(CPU_PERIOD_US))
                        (d / c.cpu_file).write_text(str(quota))
                    enforced.append(f"cpu {cpu_cores:g} cores")
            except OSError:
                continue
            dirs.append(d)
        return cls(dirs, enforced)

    def join(self) -> None:
        """Move the calling process into every group: run in the server's child before exec."""
        for d in self.dirs:
            try:
                (d / "cgroup.procs").write_text(str(os.getpid()))
            except OSError:
                pass

    def pids(self) -> set[int]:
        """Every process still in the user's groups."""
        found: set[int] = set()
        for d in self.dirs:
            try:
                found |= {int(p) for p in (d / "cgroup.procs").read_text().split()}
            except (OSError, ValueError):
                pass
        return found

    def kill_and_remove(self) -> None:
        """SIGKILL whatever is left (a kernel whose server died first), then remove the groups."""
        for pid in self.pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        for d in self.dirs:
            for _ in range(50):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:  # still has members that are dying
                    time.sleep(0.05)


def sweep_stale(prefix: str = "cancho-hub-", older_than: float = 600.0) -> int:
    """Remove empty groups a hub left (killed, or stopped while a server was still starting):
    a user's group with no process that has not changed for ``older_than`` seconds. Answers how
    many were removed."""
    removed = 0
    now = time.time()
    for c in find_controllers():
        for d in c.parent.glob(prefix + "*"):
            try:
                if not d.is_dir() or (d / "cgroup.procs").read_text().strip():
                    continue
                if now - d.stat().st_mtime < older_than:
                    continue
                d.rmdir()
                removed += 1
            except OSError:
                continue
    return removed
