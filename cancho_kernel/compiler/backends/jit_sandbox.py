"""How the JIT worker is started: its command line, inside the sandbox in safe mode.

Why the whole worker goes in the sandbox (issue 22, docs/teaching.md): the worker forks one child
per run, so a sandbox around the worker is a sandbox around every run — the same namespaces,
seccomp filter and mount view — and costs one ``bwrap`` start per worker, not per run. Inside,
only the notebook's directory is writable (sandbox.py hides its dot-entries, ``~/.cache`` and
``~/.local`` among them); the Python prefix, this package and the verified C child
(chelper.py) are bound read-only, so nothing a run writes is what the worker imports or loads
later. Python runs isolated (``-I``): neither ``PYTHONPATH``, nor the user's site-packages and
their ``.pth`` files, nor the working directory reach its module path.

Why the worker gets a cgroup of its own, bound into its sandbox (cgroups.py): each run is then
born in a group of its own, killed whole when the run ends, as an exe run's is; the worker's
whole group is removed when it ends (:func:`release`).

Why one thread starts every sandboxed worker (:class:`_Starter`): ``bwrap --die-with-parent``
dies with the *thread* that started it (PR_SET_PDEATHSIG), and a worker is restarted from
whichever thread needs it (a cell's run thread, which ends with the cell).
"""

from __future__ import annotations

import queue
import subprocess
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from . import cgroups, sandbox
from .sandbox import SandboxSpec

# The worker's first statement: the package that launched it goes first on the module path, by
# its directory (argv[1]), so an editable install, a worktree and a wheel all import themselves.
_BOOTSTRAP = ("import sys; sys.path.insert(0, sys.argv.pop(1)); "
              "from cancho_kernel.compiler.backends.jit_worker import main; sys.exit(main())")


def package_root() -> str:
    """The directory holding the ``cancho_kernel`` package this module belongs to."""
    return str(Path(__file__).resolve().parents[3])


def worker_command(python: str, args: Sequence[str], unbuffered: bool = False) -> list[str]:
    """The worker's command line: Python isolated (``-I``), the package found by
    :data:`_BOOTSTRAP`. ``unbuffered``: ``-u``, what PYTHONUNBUFFERED would have asked (``-I``
    ignores the variable)."""
    return [python, "-I", *(["-u"] if unbuffered else []), "-c", _BOOTSTRAP, package_root(),
            *args]


@dataclass(frozen=True)
class ChildPin:
    """The C child as this side verified it (chelper.py): the worker loads these bytes or none."""

    path: str
    sha256: str

    def args(self) -> list[str]:
        return ["--child", self.path, "--child-sha256", self.sha256]


def verified_child() -> ChildPin | None:
    """The JIT's C child, verified (built if needed) here, outside any sandbox; None without a
    C compiler (the worker then uses its Python child)."""
    from .chelper import verified_helper
    from .jit_child import CHILD_SPEC

    got = verified_helper(CHILD_SPEC)
    return ChildPin(str(got.path), got.sha256) if got is not None else None


def sandboxed(spec: SandboxSpec, python: str, child: ChildPin | None,
              env: dict[str, str] | None = None) -> SandboxSpec:
    """``spec`` for the worker: Python's prefixes, this package, the interpreter and the C
    child added read-only (bound after the writable directories, so they stay read-only even
    inside the notebook's directory); ``env``: variables the worker's caller asked for (the
    sandbox clears the rest but for a short list)."""
    extra = [package_root(), python] + ([child.path] if child is not None else [])
    return replace(spec, readable=(*spec.readable, *extra), python=True,
                   env=(*spec.env, *sorted((env or {}).items())))


class _Starter:
    """One long-lived thread that runs every sandboxed worker's ``Popen`` (see the module's
    docstring); callers wait for it."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def run(self, job: Callable[[], Any]) -> Any:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, name="cancho-jit-starter",
                                                daemon=True)
                self._thread.start()
        done: queue.SimpleQueue = queue.SimpleQueue()
        self._jobs.put((job, done))
        ok, value = done.get()
        if not ok:
            raise value
        return value

    def _serve(self) -> None:
        while True:
            job, done = self._jobs.get()
            try:
                done.put((True, job()))
            except BaseException as e:  # noqa: BLE001 - handed to the waiting caller
                done.put((False, e))


_STARTER = _Starter()


def with_cgroup(spec: SandboxSpec) -> tuple[SandboxSpec, cgroups.RunCgroup | None]:
    """``spec`` joining a new worker group's leaf, the group bound writable inside and named
    to the worker (:data:`cgroups.DELEGATED_ENV`); unchanged where no group can be made."""
    made = cgroups.create_delegated()
    if made is None:
        return spec, None
    group, leaf = made
    return replace(spec, writable=(*spec.writable, group.path), cgroup_procs=leaf.procs,
                   env=(*spec.env, (cgroups.DELEGATED_ENV, f"{group.kind.value}:{group.path}"))), group


def start_sandboxed(spec: SandboxSpec, argv: list[str], pass_fds: Sequence[int],
                    env: dict[str, str]) -> subprocess.Popen:
    """``bwrap … -- argv`` under ``spec`` in a worker group of its own (:func:`with_cgroup`),
    started from the long-lived starter thread, with ``pass_fds`` (the worker's socket) and the
    sandbox's own descriptors passed along. The group is the process's ``cancho_cgroup``."""
    spec, group = with_cgroup(spec)

    def job() -> subprocess.Popen:
        launch = sandbox.command(spec, argv)
        try:
            return subprocess.Popen(launch.argv, pass_fds=[*pass_fds, *launch.pass_fds],
                                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    env=env, start_new_session=True, close_fds=True)
        finally:
            launch.close()

    try:
        proc = _STARTER.run(job)
    except BaseException:
        if group is not None:
            group.remove()
        raise
    proc.cancho_cgroup = group  # type: ignore[attr-defined]
    return proc


def release(proc: subprocess.Popen) -> None:
    """After the worker started by :func:`start_sandboxed` has ended: kill what is left in its
    group and remove the group (nothing for a worker started otherwise)."""
    group = getattr(proc, "cancho_cgroup", None)
    if group is not None:
        group.remove()
        proc.cancho_cgroup = None  # type: ignore[attr-defined]
