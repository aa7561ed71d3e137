"""One unprivileged Unix account per student, made by the hub, and the drop to it before exec.

JupyterHub's ``LocalProcessSpawner`` runs each server as the Unix user of the same name
(``set_user_setuid``: setgid, setgroups, setuid in the child before exec). A hub name is chosen
by whoever logs in, so it is never used as a Unix name directly (``root`` or ``postgres`` would
run as that account): a student's account is ``PREFIX + name`` (hashed when too long), made
with ``useradd --system`` the first time, and marked in its comment field so that the hub only
ever runs a server as an account it made itself. Before the uid changes the child also empties
its capability bounding set and sets ``no_new_privs`` (no setuid program, no file capability
gives anything back), so the server and all it starts hold no capability at all.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import pwd
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from jupyterhub.spawner import set_user_setuid

MARKER = "cancho-hub student"  # the comment (GECOS) field of every account the hub made
MAX_UNIX_NAME = 32  # useradd's limit
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38


class AccountError(RuntimeError):
    """A student's account could not be made, or the name belongs to an account the hub did not make."""


@dataclass(frozen=True)
class StudentAccount:
    """The Unix account one hub user's server runs as."""

    hub_name: str
    unix_name: str
    uid: int
    gid: int


def unix_name(prefix: str, hub_name: str) -> str:
    """``prefix + hub_name`` as a valid Unix name: lower-case letters, digits, ``_`` and ``-``;
    a hash of the hub name replaces its tail when the whole would exceed 32 characters."""
    clean = re.sub(r"[^a-z0-9_-]", "_", hub_name.lower())
    name = prefix + clean
    if len(name) > MAX_UNIX_NAME or clean != hub_name:
        digest = hashlib.sha256(hub_name.encode()).hexdigest()[:8]
        name = (prefix + clean)[: MAX_UNIX_NAME - 9] + "-" + digest
    return name


def _lookup(name: str) -> pwd.struct_passwd | None:
    try:
        return pwd.getpwnam(name)
    except KeyError:
        return None


def ensure_account(prefix: str, hub_name: str, home: Path) -> StudentAccount:
    """The student's account, made on first use (a system account: no login shell, no password,
    its own group). An existing account of that name that the hub did not make is refused."""
    name = unix_name(prefix, hub_name)
    entry = _lookup(name)
    if entry is None:
        cmd = ["useradd", "--system", "--user-group", "--no-create-home", "--home-dir", str(home),
               "--shell", "/usr/sbin/nologin", "--comment", f"{MARKER} {hub_name}", name]
        for attempt in range(20):  # another hub may hold /etc/passwd's lock for a moment
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
            entry = _lookup(name)
            if entry is not None:
                break
            if "lock" not in done.stderr:  # another useradd holds the lock: try again
                raise AccountError(f"useradd {name}: {done.stderr.strip() or done.returncode}")
            time.sleep(0.1 * (attempt + 1))
        else:
            raise AccountError(f"useradd {name}: /etc/passwd stayed locked")
    if not entry.pw_gecos.startswith(MARKER) or entry.pw_uid == 0 or entry.pw_gid == 0:
        raise AccountError(f"the Unix account {name!r} exists and was not made by the hub: "
                           "refusing to run a server as it")
    return StudentAccount(hub_name, name, entry.pw_uid, entry.pw_gid)


def remove_accounts(prefix: str) -> list[str]:
    """Delete every account with this prefix that the hub made (a test hub's, when it stops)."""
    gone = []
    for entry in pwd.getpwall():
        if entry.pw_name.startswith(prefix) and entry.pw_gecos.startswith(MARKER):
            subprocess.run(["userdel", entry.pw_name], capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
            gone.append(entry.pw_name)
    return gone


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def last_capability() -> int:
    """The highest capability number this kernel knows."""
    try:
        return int(Path("/proc/sys/kernel/cap_last_cap").read_text())
    except (OSError, ValueError):
        return 40


def drop_to(account: StudentAccount, home: Path):
    """A preexec function: empty the bounding set and set ``no_new_privs`` (while still root),
    then JupyterHub's own setgid/setgroups/setuid to the account, then ``chdir`` to ``home``."""
    setuid = set_user_setuid(account.unix_name, chdir=False)
    top = last_capability()

    def preexec() -> None:
        libc = _libc()
        for cap in range(top + 1):
            if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() != 22:  # EINVAL: unknown cap
                raise OSError(ctypes.get_errno(), f"PR_CAPBSET_DROP {cap}")
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "PR_SET_NO_NEW_PRIVS")
        setuid()
        if os.getuid() != account.uid or os.geteuid() != account.uid:
            raise OSError("the server's process did not become its student")
        os.chdir(home)

    return preexec
