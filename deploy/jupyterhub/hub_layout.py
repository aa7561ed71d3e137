"""The hub's directories and who may do what in them: root owns all but each student's own.

::

    ROOT/                 0711 root   (students pass through, cannot list)
      state/              0700 root   the database, cookie secret, pid files, course markers
      share/              0755 root   read-only for students:
        jupyter-config/               the servers' Jupyter configuration (JUPYTER_CONFIG_DIR)
        jupyter-data/                 the safe kernelspec (JUPYTER_DATA_DIR)
        ipython/, matplotlib/         IPYTHONDIR, MPLCONFIGDIR: nothing a student can plant
        helpers/                      the kernel's C helpers, prebuilt by root (CANCHO_HELPER_DIR)
      users/              0711 root
        NAME/             0700 NAME   the student's home: the notebooks, the only view they edit
      private/            0711 root
        NAME/             0700 NAME   outside the notebook view: runtime/ (server and kernel
                                      connection files), cache/ (XDG_CACHE_HOME: the build cache),
                                      lab/ (JupyterLab workspaces and settings)

Every start re-applies the modes, so a hub root made by an older version (every user root, one
shared state directory) is tightened in place.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from system_users import StudentAccount

PRIVATE_PARTS = ("runtime", "cache", "lab")


class LayoutError(RuntimeError):
    """The hub's root cannot hold students' homes (a parent they cannot pass through)."""


def safe_name(name: str) -> str:
    """A user name as one path component (JupyterHub names may hold characters a path must not)."""
    cleaned = re.sub(r"[^A-Za-z0-9_.-]", "_", name)
    return cleaned if cleaned not in ("", ".", "..") else "_"


def _root_dir(path: Path, mode: int) -> Path:
    """``path`` made if missing, owned by root (when we are root) with exactly ``mode``."""
    path.mkdir(parents=True, exist_ok=True, mode=mode)
    if path.is_symlink() or not path.is_dir():
        raise LayoutError(f"{path} is not a directory")
    if os.geteuid() == 0:
        os.chown(path, 0, 0)
    os.chmod(path, mode)
    return path


def _own_dir(path: Path, account: StudentAccount | None) -> Path:
    """``path`` made if missing, 0700 and owned by the student (refusing a symbolic link)."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    if path.is_symlink() or not path.is_dir():
        raise LayoutError(f"{path} is not a directory")
    if account is not None:
        os.chown(path, account.uid, account.gid, follow_symlinks=False)
    os.chmod(path, 0o700)
    return path


@dataclass(frozen=True)
class HubLayout:
    """Where everything of one hub lives under its root."""

    root: Path

    @property
    def state(self) -> Path:
        return self.root / "state"

    @property
    def share(self) -> Path:
        return self.root / "share"

    @property
    def helpers(self) -> Path:
        return self.share / "helpers"

    def home(self, hub_name: str) -> Path:
        return self.root / "users" / safe_name(hub_name)

    def private(self, hub_name: str) -> Path:
        return self.root / "private" / safe_name(hub_name)

    def marker(self, hub_name: str) -> Path:
        """Remembers that the course was copied into a home once (root's: a student cannot reset it)."""
        return self.state / "users" / safe_name(hub_name) / "course-copied"

    def prepare(self) -> None:
        """The shared directories with their owners and modes; refuses a root students cannot reach."""
        for parent in self.root.resolve().parents:
            if not parent.stat().st_mode & stat.S_IXOTH:
                raise LayoutError(f"students cannot pass through {parent} (mode "
                                  f"{stat.S_IMODE(parent.stat().st_mode):o}): choose a hub root "
                                  "whose parents are all world-searchable (o+x)")
        _root_dir(self.root, 0o711)
        _root_dir(self.state, 0o700)
        for d in (self.share, self.share / "jupyter-config", self.share / "jupyter-data", self.share / "ipython",
                  self.share / "matplotlib", self.helpers):
            _root_dir(d, 0o755)
        # jupyter_core writes this marker into the config directory at a server's first start
        # (after "migrating" ~/.ipython); present, nothing is migrated and nothing written there.
        (self.share / "jupyter-config" / "migrated").touch()
        _root_dir(self.root / "users", 0o711)
        _root_dir(self.root / "private", 0o711)

    def prepare_student(self, account: StudentAccount | None, hub_name: str) -> None:
        """The student's home and private directories, theirs alone (``account`` None: the hub
        is not root and has no accounts to give; the directories stay the hub user's)."""
        name = hub_name
        _own_dir(self.home(name), account)
        _own_dir(self.private(name), account)
        for part in PRIVATE_PARTS:
            _own_dir(self.private(name) / part, account)
