"""A cgroup per safe run, killed whole when the run ends, where this process may make one.

Why, on top of the sandbox's PID namespace: the namespace already guarantees that nothing in the
sandbox outlives its first process or its supervisor; a cgroup is what the kernel itself counts,
so the run's processes can be listed and killed from outside in one step (``cgroup.kill`` on
cgroup v2) whatever they did (``setsid``, double forks), and it is the hook for a per-run memory
or process bound later.

Where: beneath this process's own cgroup, in the hierarchy whose groups bound their tasks
(``pids.max``, which holds for root, unlike RLIMIT_NPROC), the unified (v2) one on a tie: v2
needs ``cgroup.kill``; a v1 ``pids`` group is killed task by task until empty. When
neither is writable (an unprivileged user under systemd without delegation, a read-only
``/sys/fs/cgroup``) :func:`create` returns None and the run relies on the namespace alone.
A group left by a supervisor killed with SIGKILL is removed by the next :func:`create` once
empty (its name carries the owner's pid).

The JIT worker runs many programs in one long-lived sandbox, so its runs get their groups another
way (:func:`create_delegated`, :class:`DelegatedGroups`): the kernel makes one group for the
worker's sandbox with a ``worker`` leaf the sandbox joins, and binds the group into the sandbox;
for each run the worker moves itself into a fresh ``run-N`` beside the leaf, forks the program
there (so it is born in the run's group: nothing it forks can be missed) and moves back; when
the run ends the worker kills the run's group whole and removes it. The kernel removes the
worker's whole group when the worker ends.
"""

from __future__ import annotations

import itertools
import os
import re
import signal
import time
from dataclasses import dataclass
from enum import Enum
from functools import lru_cache

_MOUNTS = {"v2": ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"), "pids": ("/sys/fs/cgroup/pids",)}
_PREFIX = "cancho-run-"
_counter = itertools.count()
_KILL_ROUNDS = 1000
_EMPTY_WAITS, _EMPTY_TICK = 200, 0.01  # at most two seconds for killed tasks to leave


class CgroupKind(str, Enum):
    """Which hierarchy a run's group is in."""

    V2 = "v2"
    V1_PIDS = "v1-pids"


@dataclass(frozen=True)
class RunCgroup:
    """One run's cgroup: its directory and how it is killed."""

    path: str
    kind: CgroupKind

    @property
    def procs(self) -> str:
        """The file a process writes its pid to, to join the group."""
        return os.path.join(self.path, "cgroup.procs")

    def pids(self) -> list[int]:
        """The processes in the group now."""
        try:
            with open(self.procs) as f:
                return [int(w) for w in f.read().split()]
        except (OSError, ValueError):
            return []

    def kill(self) -> None:
        """Kill every process in the group (``cgroup.kill``; on v1, SIGKILL to each task until
        none is left: a killed task cannot fork again)."""
        if self.kind is CgroupKind.V2:
            try:
                with open(os.path.join(self.path, "cgroup.kill"), "w") as f:
                    f.write("1")
                return
            except OSError:
                pass
        for _ in range(_KILL_ROUNDS):
            pids = self.pids()
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass

    def children(self) -> list["RunCgroup"]:
        """The groups beneath this one (a delegated worker group's leaf and runs)."""
        try:
            return [RunCgroup(e.path, self.kind) for e in os.scandir(self.path) if e.is_dir(follow_symlinks=False)]
        except OSError:
            return []

    def remove(self) -> bool:
        """Kill what is left and remove the group's directory, the groups beneath it first
        (False if it stays: a process in it is still being torn down; :func:`create` retries
        later)."""
        self.kill()
        for child in self.children():
            child.remove()
        for _ in range(_EMPTY_WAITS):  # killed tasks leave the group once the kernel reaps them
            try:
                os.rmdir(self.path)
                return True
            except FileNotFoundError:
                return True
            except OSError:
                time.sleep(_EMPTY_TICK)
        return False


def _own_path(kind: CgroupKind) -> str | None:
    """This process's cgroup path in that hierarchy, from /proc/self/cgroup."""
    try:
        with open("/proc/self/cgroup") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        num, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if kind is CgroupKind.V2 and num == "0" and controllers == "":
            return path
        if kind is CgroupKind.V1_PIDS and "pids" in controllers.split(","):
            return path
    return None


def _parent_dir(kind: CgroupKind) -> str | None:
    """The directory new groups go in, or None when that hierarchy is missing or read-only."""
    own = _own_path(kind)
    if own is None:
        return None
    for mount in _MOUNTS["v2" if kind is CgroupKind.V2 else "pids"]:
        if kind is CgroupKind.V2 and not os.path.exists(os.path.join(mount, "cgroup.controllers")):
            continue  # not a unified mount (a v1 tmpfs holding the controllers)
        base = os.path.join(mount, own.lstrip("/"))
        if os.path.exists(os.path.join(base, "cgroup.procs")) and os.access(base, os.W_OK):
            return base
    return None


@dataclass(frozen=True)
class _Candidate:
    """A hierarchy where groups can be made, and what its groups can do."""

    kind: CgroupKind
    base: str
    kills: bool       # cgroup.kill: the whole group in one write
    bounds_pids: bool  # pids.max: a bound on the run's tasks that holds even for root


def _probe(kind: CgroupKind) -> _Candidate | None:
    """Make and remove one group in that hierarchy, to see what a run's group offers."""
    base = _parent_dir(kind)
    if base is None:
        return None
    probe = os.path.join(base, f"{_PREFIX}{os.getpid()}-probe")
    try:
        os.mkdir(probe)
    except FileExistsError:
        pass
    except OSError:
        return None
    found = _Candidate(kind, base, os.path.exists(os.path.join(probe, "cgroup.kill")),
                       os.path.exists(os.path.join(probe, "pids.max")))
    try:
        os.rmdir(probe)
    except OSError:
        pass
    if kind is CgroupKind.V2 and not found.kills:
        return None  # an old unified hierarchy: the v1 pids one, or none
    return found


@lru_cache(maxsize=1)
def hierarchy() -> tuple[CgroupKind, str] | None:
    """Where this process makes run groups (tried once): the one whose groups bound their
    tasks (``pids.max``: RLIMIT_NPROC does not hold for root), the unified one on a tie."""
    found = [c for c in (_probe(CgroupKind.V2), _probe(CgroupKind.V1_PIDS)) if c is not None]
    if not found:
        return None
    best = max(found, key=lambda c: (c.bounds_pids, c.kind is CgroupKind.V2))
    return best.kind, best.base


def create(max_tasks: int | None = None) -> RunCgroup | None:
    """A new, empty group for one run (at most ``max_tasks`` tasks where the hierarchy bounds
    them), or None where none can be made (see the module)."""
    where = hierarchy()
    if where is None:
        return None
    kind, base = where
    _remove_stale(base, kind)
    path = os.path.join(base, f"{_PREFIX}{os.getpid()}-{next(_counter)}")
    try:
        os.mkdir(path)
    except OSError:
        return None
    group = RunCgroup(path, kind)
    if max_tasks is not None:
        try:
            with open(os.path.join(path, "pids.max"), "w") as f:
                f.write(str(int(max_tasks)))
        except OSError:
            pass  # no pids controller here: RLIMIT_NPROC alone
    return group


WORKER_LEAF = "worker"
# The variable naming a delegated group inside the JIT worker's sandbox (jit_sandbox.py).
DELEGATED_ENV = "CANCHO_RUN_CGROUPS"


def create_delegated() -> tuple[RunCgroup, RunCgroup] | None:
    """A group for a sandboxed JIT worker and its ``worker`` leaf (the one the sandbox joins),
    or None where no group can be made."""
    group = create()
    if group is None:
        return None
    leaf = RunCgroup(os.path.join(group.path, WORKER_LEAF), group.kind)
    try:
        os.mkdir(leaf.path)
    except OSError:
        group.remove()
        return None
    return group, leaf


@dataclass(frozen=True)
class DelegatedGroups:
    """Inside the JIT worker's sandbox: the worker's group (bound in by the kernel), where each
    run gets a group of its own (see the module)."""

    root: str
    kind: CgroupKind

    @classmethod
    def from_env(cls) -> "DelegatedGroups | None":
        """The group the kernel delegated (:data:`DELEGATED_ENV`: ``KIND:PATH``), if any."""
        value = os.environ.get(DELEGATED_ENV, "")
        kind, _, path = value.partition(":")
        if not path or not os.path.isdir(path):
            return None
        return cls(path, CgroupKind(kind))

    def enter_run(self) -> RunCgroup | None:
        """A fresh group for one run, with this process moved into it (fork the program now,
        then :meth:`leave`); None if it cannot be made (the run then has the worker's group)."""
        group = RunCgroup(os.path.join(self.root, f"run-{next(_counter)}"), self.kind)
        try:
            os.mkdir(group.path)
            _join(group.procs)
        except OSError:
            group.remove()
            return None
        return group

    def leave(self) -> bool:
        """Move this process back to the worker's leaf; whether it moved (if not, the run's group
        must not be killed: this process is in it)."""
        try:
            _join(os.path.join(self.root, WORKER_LEAF, "cgroup.procs"))
        except OSError:
            return False
        return True


def _join(procs: str) -> None:
    """Move this process (all its threads) into the group of that ``cgroup.procs``."""
    with open(procs, "w") as f:
        f.write(str(os.getpid()))


def _remove_stale(base: str, kind: CgroupKind) -> None:
    """Remove the groups of supervisors that are gone (killed before they could)."""
    pattern = re.compile(rf"^{_PREFIX}(\d+)-")
    try:
        names = os.listdir(base)
    except OSError:
        return
    for name in names:
        m = pattern.match(name)
        if m is None or int(m.group(1)) == os.getpid() or pid_alive(int(m.group(1))):
            continue
        RunCgroup(os.path.join(base, name), kind).remove()


def pid_alive(pid: int) -> bool:
    """Whether a process of that pid exists (one we may not signal counts as alive): the owner
    of a stale run directory or group is gone only when this says so."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
