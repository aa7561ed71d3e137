"""A local-process spawner for a cancho course: each student's server runs as their own Unix user.

The standard JupyterHub way (``LocalProcessSpawner``: setgid, setgroups and setuid in the child
before exec), with the accounts made by the hub itself on a student's first start
(:mod:`system_users`: ``useradd --system``, a prefixed name, never an account the hub did not
make) and every capability gone (an empty bounding set and ``no_new_privs`` before the uid
changes). Root stays in the hub alone. The student's home ``users/NAME`` is theirs, ``0700``,
and gets a copy of the course the first time (copied *as the student*, so a link planted there
cannot make root write elsewhere); their runtime directory and build cache are private too, and
outside the notebook view; Jupyter's, IPython's and matplotlib's configuration and the kernel's C
helpers are hub-owned and read-only (:mod:`hub_layout`). The kernel runs in cancho's safe mode,
the only kernel a server offers; the server runs Python without user site-packages (``-s``,
``PYTHONNOUSERSITE=1``), so nothing a student writes runs at the next start. Memory and CPU
limits are enforced by control groups when the hub may create them (:mod:`cgroup_limits`), and the
home is a filesystem of its own, ``disk_limit`` in size (:mod:`student_disk`), so no student can
fill the disk the others share. On loopback, the server's port answers only the student and root
(:mod:`loopback_guard`, an nftables rule per server), and kernels use Jupyter's ``ipc`` transport
(Unix sockets in the student's 0700 runtime directory), so no other student's process reaches them.

A hub that is not root cannot change users: it runs every server as itself, as before, and logs
that students are then separated only by the kernel's confinement (docs/teaching.md).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import psutil
from jupyterhub.spawner import LocalProcessSpawner
from jupyterhub.utils import random_port
from traitlets import Bool, Integer, Unicode, default

from cgroup_limits import UserGroups, find_controllers
from hub_layout import HubLayout, safe_name
from loopback_guard import GuardError, LoopbackGuard
from safe_kernelspec import SAFE_KERNEL, hub_kernelspec
from student_disk import DiskError, StudentDisk, parse_size
from system_users import StudentAccount, drop_to, ensure_account

HERE = Path(__file__).resolve().parent
# ZeroMQ's longest ipc path (sun_path less its NUL); a kernel's socket is
# RUNTIME/kernel-<uuid>-ipc-<n>.
IPC_PATH_MAX = 107
IPC_NAME = len("/kernel-") + 36 + len("-ipc-") + 5
# The server's own configuration (JUPYTER_CONFIG_DIR is hub-owned): no language servers (none
# speaks cancho; jupyter-lsp costs start time and memory), no terminals.
SERVER_CONFIG = {"ServerApp": {"jpserver_extensions": {"jupyter_lsp": False, "jupyter_server_terminals": False}}}
# Copies the course into the home, run as the student (files that are not copied: hidden ones,
# caches, checkpoints).
COPY_COURSE = ("import shutil, sys; shutil.copytree(sys.argv[1], '.', dirs_exist_ok=True, symlinks=True, "
               "ignore=shutil.ignore_patterns('.*', '__pycache__', '*.pyc'))")


class CanchoSpawner(LocalProcessSpawner):
    """Each student's server as their own Unix user; the cancho kernel in safe mode; limits."""

    users_root = Unicode("/srv/cancho/users", config=True,
                         help="Directory holding one home directory per user (made on first start).")
    state_root = Unicode("/srv/cancho/state", config=True,
                         help="The hub's private directory (root only). Its parent is the hub root "
                              "(users/, share/, private/: hub_layout.py).")
    course_dir = Unicode("", config=True,
                         help="Directory whose contents are copied into a user's home the first time "
                              "their server starts (empty: nothing is copied).")
    account_prefix = Unicode("cancho-", config=True,
                             help="Students' Unix accounts are PREFIX + their hub name (made by the hub).")
    helper_dir = Unicode("", config=True,
                         help="Prebuilt, root-owned C helpers given to every kernel as CANCHO_HELPER_DIR "
                              "(empty: each student's kernel builds its own into its private cache).")
    safe_mode = Bool(True, config=True,
                     help="Start kernels in cancho's safe mode. Turn off only for a trusted class.")
    disk_limit = Unicode("2G", config=True,
                         help="Size of each student's home, a filesystem image of its own loop-mounted "
                              "there (bytes, or K/M/G/T; 0: no bound). Needs a root hub with loop devices.")
    guard_loopback = Bool(True, config=True,
                          help="Let only the student (and root: the hub, its proxy) connect to their "
                               "server's port on loopback (an nftables rule), and start kernels with the "
                               "ipc transport in the private runtime directory.")
    idle_timeout = Integer(3600, config=True,
                           help="Seconds after which an idle kernel is shut down and a server with no "
                                "activity stops itself (0: never).")

    @property
    def layout(self) -> HubLayout:
        return HubLayout(Path(self.state_root).parent)

    @property
    def home_dir(self) -> str:
        return str(Path(self.users_root) / safe_name(self.user.name))

    @property
    def as_root(self) -> bool:
        """Only a root hub can give each student their own Unix user."""
        return os.geteuid() == 0

    @default("env_keep")
    def _env_keep_default(self) -> list[str]:
        # CANCHO_HUB_RUN marks every process of one hub run (the benchmark and the tests find
        # what is left by it).
        return [*super()._env_keep_default(), "CANCHO_HUB_RUN"]

    @default("disable_user_config")
    def _no_user_config(self) -> bool:
        return True

    @default("cmd")
    def _server_cmd(self) -> list[str]:
        # -s: no user site-packages (a .pth in ~/.local would run in the server).
        return [sys.executable, "-s", "-m", "jupyterhub.singleuser"]

    @default("args")
    def _server_args(self) -> list[str]:
        return [
            "--ServerApp.terminals_enabled=False",
            "--ServerApp.kernel_spec_manager_class=cancho_singleuser.CourseKernelSpecManager",
            f"--KernelSpecManager.allowed_kernelspecs={SAFE_KERNEL}",
            "--KernelSpecManager.ensure_native_kernel=False",
            f"--MappingKernelManager.default_kernel_name={SAFE_KERNEL}",
            "--ContentsManager.allow_hidden=False",
            *([] if self.as_root else ["--ServerApp.allow_root=True"]),
        ]

    def get_args(self) -> list[str]:
        args = list(super().get_args())
        if self.guard_loopback:
            runtime = self.layout.private(self.user.name) / "runtime"
            if len(str(runtime)) + IPC_NAME <= IPC_PATH_MAX:
                args.append("--KernelManager.transport=ipc")  # Unix sockets in the 0700 runtime dir
            else:
                self.log.warning("%s's kernels listen on loopback TCP: the runtime directory %s is too "
                                 "long for Unix sockets", self.user.name, runtime)
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

    # -- the student's account and directories ----------------------------------------------------

    def _account(self) -> StudentAccount | None:
        if not self.as_root:
            return None
        return ensure_account(self.account_prefix, self.user.name, Path(self.home_dir))

    @property
    def disk(self) -> StudentDisk | None:
        """The student's home filesystem, when homes are bounded."""
        size = parse_size(self.disk_limit)
        if not size:
            return None
        return StudentDisk(Path(self.state_root) / "disks" / f"{safe_name(self.user.name)}.ext4",
                           Path(self.home_dir), size)

    def _attach_disk(self, account: StudentAccount | None) -> None:
        """Mount the student's bounded home (a warning where it cannot be: the bound is then off)."""
        disk = self.disk
        if disk is None:
            return
        if account is None:
            self.log.warning("disk_limit for %s is not enforced: the hub is not root", self.user.name)
            return
        try:
            disk.attach(account)
        except (DiskError, OSError, subprocess.SubprocessError) as e:
            self.log.warning("disk_limit for %s is not enforced: %s", self.user.name, e)

    def _prepare_home(self, account: StudentAccount | None) -> None:
        """The student's directories, the home on its own bounded filesystem; the course copied
        into the home once, as the student."""
        layout = self.layout
        layout.prepare_student(account, self.user.name)
        self._attach_disk(account)
        layout.prepare_student(account, self.user.name)
        marker = layout.marker(self.user.name)
        if self.course_dir and not marker.exists():
            home = Path(self.home_dir)
            subprocess.run([sys.executable, "-I", "-c", COPY_COURSE, self.course_dir], cwd=home, check=True,
                           timeout=300, stdin=subprocess.DEVNULL, env={"PATH": os.defpath},
                           preexec_fn=drop_to(account, home) if account else None)
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.write_text(self.course_dir + "\n")
            layout.prepare_student(account, self.user.name)  # copytree gave the home the course's mode

    def user_env(self, env: dict) -> dict:
        """HOME and USER of the student's account; Jupyter's directories from the hub's layout."""
        layout, name = self.layout, self.user.name
        account = getattr(self, "_student", None)
        env["USER"] = env["LOGNAME"] = account.unix_name if account else name
        env["HOME"] = self.home_dir
        env["SHELL"] = "/usr/sbin/nologin"
        private = layout.private(name)
        env.update({
            "JUPYTER_CONFIG_DIR": str(layout.share / "jupyter-config"),
            "JUPYTER_DATA_DIR": str(layout.share / "jupyter-data"),
            "IPYTHONDIR": str(layout.share / "ipython"),
            "MPLCONFIGDIR": str(layout.share / "matplotlib"),
            "JUPYTER_RUNTIME_DIR": str(private / "runtime"),
            "XDG_CACHE_HOME": str(private / "cache"),
            "JUPYTERLAB_WORKSPACES_DIR": str(private / "lab" / "workspaces"),
            "JUPYTERLAB_SETTINGS_DIR": str(private / "lab" / "settings"),
        })
        env.pop("JUPYTER_PATH", None)
        env.pop("JUPYTER_CONFIG_PATH", None)
        env["PYTHONPATH"] = str(HERE)  # cancho_singleuser, for the server (the kernel runs with -I)
        env["PYTHONSAFEPATH"] = "1"  # no Python process imports from the student's directory
        env["PYTHONNOUSERSITE"] = "1"  # nor from ~/.local (the JIT worker, any Python the kernel starts)
        if self.helper_dir:
            env["CANCHO_HELPER_DIR"] = self.helper_dir
        if self.safe_mode:
            env["CANCHO_SAFE"] = "1"
        return env

    # -- loopback ---------------------------------------------------------------------------------

    @property
    def guard(self) -> LoopbackGuard:
        return LoopbackGuard(self.cgroup_prefix.replace("-", "_"))

    def _guard_port(self, account: StudentAccount | None) -> None:
        """The server's port chosen now and closed to every other uid before the server binds it."""
        if not self.guard_loopback:
            return
        if self.port == 0:
            self.port = random_port()
        if account is None:
            self.log.warning("%s's server port is open to every local user: the hub is not root", self.user.name)
            return
        try:
            self.guard.allow_only(self.port, account.uid, self.user.name)
        except (GuardError, OSError, subprocess.SubprocessError) as e:
            self.log.warning("%s's server port is open to every local user: %s", self.user.name, e)

    # -- start and stop ---------------------------------------------------------------------------

    async def start(self):
        self._student = self._account()
        if self._student is None:
            self.log.warning("the hub is not root: %s's server runs as the hub's own user, students are "
                             "separated only by the kernel's confinement", self.user.name)
        self.layout.prepare()
        self._prepare_home(self._student)
        self._guard_port(self._student)
        (self.layout.share / "jupyter-config" / "jupyter_server_config.json").write_text(
            json.dumps(SERVER_CONFIG, indent=1))
        if self.safe_mode:
            hub_kernelspec(self.layout.share / "jupyter-data")
        group = f"{self.cgroup_prefix}-{safe_name(self.user.name)}"
        self._groups = UserGroups.create(find_controllers(), group, self.mem_limit, self.cpu_limit)
        if (self.mem_limit or self.cpu_limit) and not self._groups.enforced:
            self.log.warning("mem_limit/cpu_limit for %s are not enforced: no writable cgroup "
                             "hierarchy (the kernel's per-run caps still apply)", self.user.name)
        return await super().start()

    def make_preexec_fn(self, name):
        """Join the student's control groups (as root), then become the student."""
        groups, home = self._groups, Path(self.home_dir)
        account = getattr(self, "_student", None)
        drop = drop_to(account, home) if account else (lambda: os.chdir(home))

        def preexec() -> None:
            groups.join()
            drop()

        return preexec

    async def move_certs(self, paths):
        """Internal SSL is not used by this hub (its certificates would go into the home)."""
        return paths

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
        if self.guard_loopback and self.as_root:
            try:
                self.guard.release(self.user.name)
            except GuardError as e:
                self.log.warning("%s's loopback rule stays: %s", self.user.name, e)
        disk = self.disk
        if disk is not None and self.as_root:
            try:
                disk.detach()
            except DiskError as e:
                self.log.warning("%s's home stays mounted: %s", self.user.name, e)

    def _descendants(self) -> list[psutil.Process]:
        if not self.pid:
            return []
        try:
            return psutil.Process(self.pid).children(recursive=True)
        except psutil.Error:
            return []
