"""A per-student disk bound: each student's home is an ext4 filesystem image of its own, loop-mounted.

Why a filesystem and not a limit on the run: ``RLIMIT_FSIZE`` bounds one file, so a program (or a
cell's ``--stdout file:``, or an upload) writing many files could still fill the disk every
student shares. Disk quotas would need the host's filesystem mounted with quota support, which a
course's server often is not (this project's own test machine is not). A fixed-size filesystem is
a bound the kernel enforces for every writer in the home, whoever it is, needing only loop devices
and ``mkfs.ext4`` (util-linux and e2fsprogs, in every Debian). The image is a sparse file in the
hub's private ``state/disks/`` (root's, 0700): it takes on the host only what the student wrote,
never more than its size. Mounted ``nosuid,nodev``; ``lost+found`` is removed so the student sees
only their own files. docs/teaching.md says what stays outside the bound (the private build
cache, bounded by the kernel's own cache bound, and the runtime directory).
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from system_users import StudentAccount

MOUNT_OPTIONS = "loop,nosuid,nodev"
_TIMEOUT = 120


class DiskError(RuntimeError):
    """The student's disk could not be made or mounted (no loop device, not root, no mkfs.ext4)."""


def parse_size(text: str | int) -> int:
    """``2G``, ``512M``, ``65536`` (bytes) as bytes; 0 or empty: no bound."""
    if isinstance(text, int):
        return text
    text = text.strip().upper().removesuffix("B").removesuffix("I")
    if not text:
        return 0
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    scale = units.get(text[-1], 1)
    return int(float(text[:-1] if text[-1] in units else text) * scale)


def _run(cmd: list[str]) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=_TIMEOUT, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        raise DiskError(f"{' '.join(cmd)}: {done.stderr.strip() or done.returncode}")


def mount_source(mount_point: Path) -> str | None:
    """What is mounted exactly at ``mount_point`` in this mount namespace (None: nothing)."""
    target = os.path.realpath(mount_point)
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return None
    found = None
    for line in lines:  # the last mount on a point is the one in view
        fields = line.split()
        if len(fields) > 4 and _unescape(fields[4]) == target:
            found = line.split(" - ", 1)[1].split()[1] if " - " in line else "?"
    return found


def _unescape(field: str) -> str:
    """A mountinfo path field as the path (the kernel writes space, tab, newline and backslash as
    octal escapes)."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


@dataclass(frozen=True)
class StudentDisk:
    """One student's home filesystem: its image file, where it is mounted, its size in bytes."""

    image: Path
    mount_point: Path
    size_bytes: int

    def mounted(self) -> bool:
        return mount_source(self.mount_point) is not None

    def attach(self, account: StudentAccount) -> None:
        """The image made if missing (the home's present content copied in), then mounted on the
        home, its root owned by the student. Raises :class:`DiskError`."""
        if self.mounted():
            return
        fresh = not self.image.exists()
        if fresh:
            self._make(account)
        _run(["mount", "-t", "ext4", "-o", MOUNT_OPTIONS, str(self.image), str(self.mount_point)])
        os.chown(self.mount_point, account.uid, account.gid)
        os.chmod(self.mount_point, 0o700)

    def _make(self, account: StudentAccount) -> None:
        """A sparse image of the bound's size with an empty ext4 on it (no blocks reserved for root:
        the student gets the whole size), holding what the home held so far."""
        self.image.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        partial = self.image.with_suffix(".new")
        with open(partial, "wb") as f:
            os.fchmod(f.fileno(), 0o600)
            f.truncate(self.size_bytes)
        try:
            _run(["mkfs.ext4", "-q", "-F", "-m", "0", "-E", f"root_owner={account.uid}:{account.gid}",
                  str(partial)])
            with tempfile.TemporaryDirectory(dir=self.image.parent) as staging:
                _run(["mount", "-t", "ext4", "-o", MOUNT_OPTIONS, str(partial), staging])
                try:
                    os.rmdir(os.path.join(staging, "lost+found"))
                    if any(self.mount_point.iterdir()):  # a home from before the bound: keep it
                        _run(["cp", "-a", "--no-dereference", f"{self.mount_point}/.", staging])
                finally:
                    _run(["umount", staging])
            os.replace(partial, self.image)
        finally:
            partial.unlink(missing_ok=True)

    def detach(self) -> None:
        """Unmount the home (lazily if something still holds it: the mount goes once released)."""
        if not self.mounted():
            return
        try:
            _run(["umount", str(self.mount_point)])
        except DiskError:
            _run(["umount", "--lazy", str(self.mount_point)])
