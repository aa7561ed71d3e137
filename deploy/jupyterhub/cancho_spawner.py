"""A local-process spawner for a cancho course: one directory per user, the kernel in safe mode.

It runs each user's single-user server as the hub's own system user (no ``sudo``, no system
accounts: it works as root in a container), in ``users_root/USERNAME``, which gets a copy of the
course notebooks the first time. What keeps students apart and inside their directory is the
cancho kernel's safe mode, which this spawner makes the only kernel a server offers, plus the
server's own settings: no terminals, no other kernels, no per-user Jupyter or IPython
configuration (a student could otherwise write a config file that runs Python at the next start).
Memory and CPU limits are enforced by control groups when the hub may create them
(:mod:`cgroup_limits`); the kernel's safe-mode caps bound every single run in any case.

Limitation: all users share one Unix user, so a cancho program with the ``Fs`` capability can
open another user's files by absolute path (safe mode screens directive paths, not the paths a
program computes at run time). docs/teaching.md says what that means for a course.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

import psutil
from jupyterhub.spawner import SimpleLocalProcessSpawner
from traitlets import Bool, Integer, Unicode, default

from cgroup_limits import UserGroups, find_controllers
from safe_kernelspec import SAFE_KERNEL, hub_kernelspec

HERE = Path(__file__).resolve().parent
# The server's own configuration (JUPYTER_CONFIG_DIR is hub-owned): no language servers (none
# speaks cancho; jupyter-lsp costs start time and memory), no terminals.
SERVER_CONFIG = {"ServerApp": {"jpserver_extensions": {"jupyter_lsp": False, "jupyter_server_terminals": False}}}
# Files of the course directory that are not copied to students (hidden ones: caches, checkpoints).
NOT_COPIED = shutil.ignore_patterns(".*", "__pycache__", "*.pyc")


class CanchoSpawner(SimpleLocalProcessSpawner):
    """One directory per user under ``users_root``; the cancho kernel in safe mode; limits."""

    users_root = Unicode("/srv/cancho/users", config=True,
                         help="Directory holding one home directory per user (made on first start).")
    state_root = Unicode("/srv/cancho/state", config=True,
                         help="Hub-owned directory for the kernelspec and each server's Jupyter "
                              "configuration, data and runtime directories (outside the users' homes).")
    course_dir = Unicode("", config=True,
                         help="Directory whose contents are copied into a user's home the first time "
                              "their server starts (empty: nothing is copied).")
    safe_mode = Bool(True, config=True,
                     help="Start kernels in cancho's safe mode. Turn off only for a trusted class.")
    idle_timeout = Integer(3600, config=True,
                           help="Seconds after which an idle kernel is shut down and a server with no "
                                "activity stops itself (0: never).")

    @default("home_dir")
    def _home(self) -> str:
        return str(Path(self.users_root) / _safe_name(self.user.name))

    @default("env_keep")
    def _env_keep_default(self) -> list[str]:
        # CANCHO_HUB_RUN marks every process of one hub run (the benchmark and the tests find
        # what is left by it).
        return [*super()._env_keep_default(), "CANCHO_HUB_RUN"]

    @default("disable_user_config")
    def _no_user_config(self) -> bool:
        return True

    @default("args")
    def _server_args(self) -> list[str]:
        return [
            "--ServerApp.allow_root=True",
            "--ServerApp.terminals_enabled=False",
            "--ServerApp.kernel_spec_manager_class=cancho_singleuser.CourseKernelSpecManager",
            f"--KernelSpecManager.allowed_kernelspecs={SAFE_KERNEL}",
            "--KernelSpecManager.ensure_native_kernel=False",
            f"--MappingKernelManager.default_kernel_name={SAFE_KERNEL}",
            "--ContentsManager.allow_hidden=False",
        ]

    def get_args(self) -> list[str]:
        args = list(super().get_args())
        if self.idle_timeout:
            args += [f"--MappingKernelManager.cull_idle_timeout={self.idle_timeout}",
                     "--MappingKernelManager.cull_interval=60",
                     f"--ServerApp.shutdown_no_activity_timeout={self.idle_timeout}"]
        return args

    @property
    def cgroup_prefix(self) -> str:
        """Users' control groups are PREFIX-USER, PREFIX one per state directory: two hubs never
        share a user's group."""
        return "cancho-hub-" + hashlib.sha256(str(Path(self.state_root).resolve()).encode()).hexdigest()[:12]

    # -- paths ------------------------------------------------------------------------------------

    @property
    def user_state(self) -> Path:
        return Path(self.state_root) / "users" / _safe_name(self.user.name)

    def _prepare_home(self) -> None:
        """Make the home directory; copy the course into it once (a marker file remembers)."""
        home = Path(self.home_dir)
        home.mkdir(parents=True, exist_ok=True)
        marker = self.user_state / "course-copied"
        if self.course_dir and not marker.exists():
            shutil.copytree(self.course_dir, home, dirs_exist_ok=True, ignore=NOT_COPIED)
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.write_text(self.course_dir + "\n")

    def user_env(self, env: dict) -> dict:
        env = super().user_env(env)
        state = self.user_state
        for key, sub in (("JUPYTER_CONFIG_DIR", "config"), ("JUPYTER_RUNTIME_DIR", "runtime"),
                         ("IPYTHONDIR", "ipython"), ("MPLCONFIGDIR", "matplotlib")):
            env[key] = str(state / sub)
        env["JUPYTER_DATA_DIR"] = str(Path(self.state_root) / "jupyter-data")
        env.pop("JUPYTER_PATH", None)
        env.pop("JUPYTER_CONFIG_PATH", None)
        env["PYTHONPATH"] = str(HERE)  # cancho_singleuser, for the server (the kernel runs with -I)
        env["PYTHONSAFEPATH"] = "1"  # no Python process imports from the student's directory
        if self.safe_mode:
            env["CANCHO_SAFE"] = "1"
        return env

    # -- start and stop ---------------------------------------------------------------------------

    async def start(self):
        self._prepare_home()
        for sub in ("config", "runtime", "ipython", "matplotlib"):
            (self.user_state / sub).mkdir(parents=True, exist_ok=True)
        (self.user_state / "config" / "jupyter_server_config.json").write_text(json.dumps(SERVER_CONFIG, indent=1))
        if self.safe_mode:
            hub_kernelspec(Path(self.state_root) / "jupyter-data")
        group = f"{self.cgroup_prefix}-{_safe_name(self.user.name)}"
        self._groups = UserGroups.create(find_controllers(), group, self.mem_limit, self.cpu_limit)
        if (self.mem_limit or self.cpu_limit) and not self._groups.enforced:
            self.log.warning("mem_limit/cpu_limit for %s are not enforced: no writable cgroup "
                             "hierarchy (the kernel's per-run caps still apply)", self.user.name)
        return await super().start()

    def make_preexec_fn(self, name):
        base = super().make_preexec_fn(name)
        groups = self._groups

        def preexec() -> None:
            groups.join()
            base()

        return preexec

    async def stop(self, now: bool = False) -> None:
        """Stop the server, then anything it left: kernels, JIT workers, their runs."""
        left = self._descendants()
        await super().stop(now=now)
        for p in left:
            try:
                p.kill()
            except psutil.Error:
                pass
        psutil.wait_procs(left, timeout=5)
        groups = getattr(self, "_groups", None)
        if groups is not None:
            groups.kill_and_remove()

    def _descendants(self) -> list[psutil.Process]:
        if not self.pid:
            return []
        try:
            return psutil.Process(self.pid).children(recursive=True)
        except psutil.Error:
            return []


def _safe_name(name: str) -> str:
    """A user name as one path component (JupyterHub names may hold characters a path must not)."""
    cleaned = re.sub(r"[^A-Za-z0-9_.-]", "_", name)
    return cleaned if cleaned not in ("", ".", "..") else "_"
