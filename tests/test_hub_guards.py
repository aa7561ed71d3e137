"""Issue 22, without a hub: the per-student disk bound and the loopback guard of deploy/jupyterhub.

Each is tried as a hostile student would: a process of the student's own Unix user (unconfined)
writes into its home until refused, and connects to another student's server port. Both need
root (mounts, nftables), as the hub does; tests/test_hub.py tries the same through a real hub.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "deploy" / "jupyterhub"))
pytest.importorskip("jupyterhub", reason="the hub extra: pip install -e '.[hub]'")
from loopback_guard import LoopbackGuard, nft_path  # noqa: E402
from student_disk import StudentDisk, mount_source, parse_size  # noqa: E402
from system_users import StudentAccount  # noqa: E402

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="mounts and nftables need root, as the hub")


def as_user(name: str, code: str, cwd: str = "/") -> subprocess.CompletedProcess[str]:
    """Python CODE as the Unix user NAME, unconfined but for its uid."""
    return subprocess.run(["setpriv", f"--reuid={name}", "--regid=nogroup", "--clear-groups", "--",
                           sys.executable, "-I", "-c", code], capture_output=True, text=True, timeout=120,
                          cwd=cwd)


def test_sizes_parse_as_the_config_writes_them():
    assert [parse_size(t) for t in ("2G", "512M", "64KiB", "1048576", "0", "")] == \
        [2 << 30, 512 << 20, 64 << 10, 1 << 20, 0, 0]


@root_only
@pytest.mark.skipif(shutil.which("mkfs.ext4", path="/usr/sbin:/sbin") is None, reason="no e2fsprogs")
def test_a_student_writing_until_refused_stops_at_their_home_size(tmp_path):
    """nobody writes 1 MiB files into its bounded home until ENOSPC: it stops at the image's
    size, the image takes no more than that on the host, the files outside are untouched, a
    second student's home still takes a write, and the home survives a detach and attach."""
    size = 24 << 20
    entry = pwd.getpwnam("nobody")
    account = StudentAccount("nobody", "nobody", entry.pw_uid, entry.pw_gid)
    tmp_path.chmod(0o755)
    home, other = tmp_path / "home", tmp_path / "other"
    home.mkdir()
    other.mkdir()
    (home / "before.txt").write_text("kept\n")  # a home from before the bound is carried in
    disk = StudentDisk(tmp_path / "disks" / "nobody.ext4", home, size)
    outside = tmp_path / "outside.txt"
    outside.write_text("untouched\n")
    disk.attach(account)
    try:
        assert mount_source(home) is not None and home.stat().st_dev != tmp_path.stat().st_dev
        assert (home / "before.txt").read_text() == "kept\n"
        assert (home.stat().st_uid, home.stat().st_mode & 0o777) == (entry.pw_uid, 0o700)
        done = as_user("nobody", "import os\nn = 0\ntry:\n    while n < 200:\n"
                       "        with open(f'fill-{n}', 'wb') as f:\n            f.write(b'x' * (1 << 20))\n"
                       "        n += 1\nexcept OSError as e:\n    print('refused', e.errno, n)\n", cwd=str(home))
        assert done.stdout.startswith("refused 28"), done  # ENOSPC, long before 200 MiB
        written = sum(f.stat().st_size for f in home.glob("fill-*"))
        assert size // 2 < written <= size
        assert disk.image.stat().st_blocks * 512 <= size
        assert outside.read_text() == "untouched\n"
        (other / "still.txt").write_text("room\n")  # the shared disk is not full
    finally:
        disk.detach()
    assert mount_source(home) is None and not list(home.glob("fill-*"))
    disk.attach(account)
    try:
        assert len(list(home.glob("fill-*"))) > 0  # the same image again
    finally:
        disk.detach()


@root_only
@pytest.mark.skipif(nft_path() is None, reason="nftables is not installed")
def test_only_the_student_and_root_reach_the_students_server_port():
    """A listener stands for nobody's server: after the guard nobody (its student) and root (the
    proxy) connect, daemon (another student) is reset; released, the table is gone and daemon
    connects again (so the refusal was the rule's)."""
    guard = LoopbackGuard(f"cancho_test_{uuid.uuid4().hex[:8]}")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    port = listener.getsockname()[1]
    dial = f"import socket\ntry:\n    socket.create_connection(('127.0.0.1', {port}), timeout=10).close()\n" \
           "    print('CONNECTED')\nexcept OSError as e:\n    print('refused', e.errno)\n"
    try:
        guard.allow_only(port, pwd.getpwnam("nobody").pw_uid, "nobody")
        assert as_user("nobody", dial).stdout.strip() == "CONNECTED"
        assert as_user("daemon", dial).stdout.strip() == "refused 111"
        socket.create_connection(("127.0.0.1", port), timeout=10).close()
        guard.allow_only(port, pwd.getpwnam("nobody").pw_uid, "nobody")  # a restart: one rule, not two
        assert len(guard.rules()) == 1
    finally:
        guard.release("nobody")
    try:
        assert guard.rules() == {}
        assert as_user("daemon", dial).stdout.strip() == "CONNECTED"
    finally:
        listener.close()
