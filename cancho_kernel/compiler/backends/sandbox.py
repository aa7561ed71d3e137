"""Safe mode's boundary: every safe run starts inside Debian's ``bubblewrap`` (``bwrap``) with a
seccomp filter built by libseccomp (through ``pyseccomp``).

Why a tool and not our own namespace code: bubblewrap is the sandbox Flatpak ships, kept by its
maintainers, and does the delicate parts (user namespace mapping, ``pivot_root``, dropping
capabilities, ``no_new_privs``) in one small audited program. Landlock (confine.py) stays as a
second layer inside: the launcher still calls ``cancho_confine`` before the program starts.

What one sandbox is (docs/teaching.md, "What the sandbox isolates, and what it does not"):

* its own user, PID, network, IPC, UTS, mount and cgroup namespaces (``--unshare-all``,
  ``--unshare-user``); the network namespace has only its own loopback, so a program's server
  and client still talk and nothing outside is reachable (unless ``share_net``);
* ``--die-with-parent`` and a PID namespace: when the supervisor dies or the program's first
  process ends, every process in the sandbox is killed by the kernel, ``setsid`` or not;
* ``--new-session`` (no terminal injection), ``--cap-drop ALL``;
* a mount view where the system (``/usr``, ``/lib*``, ``/bin``, ``/sbin``, ``/etc``) is read-only,
  ``/tmp`` a fresh tmpfs of at most :data:`TMP_BYTES`, ``/proc`` the sandbox's own, ``/dev``
  minimal, and only the spec's writable directories writable (never ``/``); every dot-entry of
  a writable directory (``.cache``, ``.local``, ``.jupyter``, …, and :data:`HIDDEN_NAMES` even
  when missing) hidden by a tmpfs (a directory) or bound read-only (a file), so nothing written
  there runs later outside; a dot-entry that is a symbolic link is never followed out;
* a seccomp filter (:func:`seccomp_filter`) denying with EPERM what a student needs only to
  escape or to spy: sockets but Unix, IPv4 and IPv6 ones, raw and packet sockets, io_uring, new
  namespaces, mounts, tracing, BPF, keys, modules, ``kexec``, ``reboot``, …; a call of another
  architecture kills the process;
* a cleared environment but for :data:`KEEP_ENV`, and :data:`MASKED_SYSTEM` hidden;
* ``RLIMIT_FSIZE`` when the spec asks (util-linux ``prlimit`` inside, before the program).
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from functools import lru_cache

# System directories bound read-only (a symbolic link on the host stays a link inside).
SYSTEM_DIRS: tuple[str, ...] = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
                                "/etc")
# Hidden in every writable directory even when missing: what a later unconfined process runs or
# trusts (helpers and caches, user site-packages, configuration, the Jupyter runtime directory).
# Directories only: a missing one becomes an empty directory on the host (bwrap's mount point),
# harmless where a missing file would not be (an empty ``.bash_profile`` shadows ``.profile``).
# A new dot-entry of another name can still be created (docs/teaching.md).
HIDDEN_NAMES: tuple[str, ...] = (".cache", ".local", ".config", ".jupyter", ".ipython",
                                 ".matplotlib", ".ssh")
# System files no program needs and a student must not read (password hashes, host keys,
# the hub's configuration with its secrets): hidden where they exist.
MASKED_SYSTEM: tuple[str, ...] = (
    "/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/sudoers",
    "/etc/sudoers.d", "/etc/ssh", "/etc/ssl/private", "/etc/jupyterhub", "/etc/jupyter",
    "/etc/ipython", "/usr/local/etc/jupyter", "/usr/local/etc/jupyterhub", "/usr/etc/jupyter")
# The only variables a sandboxed program inherits (the rest of a kernel's environment carries
# the hub's API token, the server's paths and session names): ``--clearenv`` first.
KEEP_ENV: tuple[str, ...] = ("PATH", "HOME", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE",
                             "LC_NUMERIC", "LC_MESSAGES", "LC_COLLATE", "LC_TIME", "TZ", "TERM",
                             "USER", "LOGNAME", "SHELL")
_PROBE_TIMEOUT = 10.0
# The fresh /tmp and the tmpfs over each hidden dot-directory are memory: bounded (``--size``),
# so neither can fill the machine's memory.
TMP_BYTES = 256 << 20
HIDDEN_BYTES = 16 << 20


@dataclass(frozen=True)
class SandboxSpec:
    """What one sandboxed run may reach. ``writable``: bound read-write (the notebook's
    directory); ``readable``: extra read-only binds (the executable, the launcher); ``cwd``:
    where the program starts (default: the first writable directory, else ``/``);
    ``fsize_bytes``: RLIMIT_FSIZE of the program (SIGXFSZ past it); ``share_net``: keep the
    host's network (never in safe mode); ``python``: also bind this Python's prefixes and
    import path read-only (a Python program inside, such as the JIT worker); ``env``: extra
    variables set inside (``--setenv``), after the environment is cleared but for the
    ``keep_env`` names (:data:`KEEP_ENV`); ``cgroup_procs``: a ``cgroup.procs`` file the
    sandbox joins before bwrap starts (cgroups.py), so every process of the run is in it."""

    writable: tuple[str, ...]
    readable: tuple[str, ...] = ()
    cwd: str | None = None
    fsize_bytes: int | None = None
    share_net: bool = False
    python: bool = False
    env: tuple[tuple[str, str], ...] = ()
    keep_env: tuple[str, ...] = KEEP_ENV
    cgroup_procs: str | None = None


@dataclass(frozen=True)
class SandboxProbe:
    """Whether sandboxed runs work on this machine, and if not why (for a warning)."""

    ok: bool
    reason: str = ""


@dataclass
class SandboxLaunch:
    """A sandbox's full command line (``bwrap … -- argv``, after a shell joining the run's cgroup
    when the spec names one) and the descriptors it names, which the caller must pass to the
    child (``subprocess.Popen(pass_fds=…)``, or a ``posix_spawn`` dup2 of each onto itself)
    and :meth:`close` once it is started."""

    argv: list[str]
    pass_fds: tuple[int, ...] = ()
    _closed: bool = field(default=False, repr=False)

    def close(self) -> None:
        """Close the descriptors (idempotent)."""
        if self._closed:
            return
        self._closed = True
        for fd in self.pass_fds:
            try:
                os.close(fd)
            except OSError:
                pass


def bwrap_path() -> str | None:
    """The ``bwrap`` binary, from the system's directories only (never a user's PATH entry)."""
    return shutil.which("bwrap", path="/usr/bin:/bin:/usr/local/bin")


@lru_cache(maxsize=1)
def probe() -> SandboxProbe:
    """Can a sandbox start here? Cached: tried once per process with the real options."""
    bwrap = bwrap_path()
    if bwrap is None:
        return SandboxProbe(False, "bubblewrap (bwrap) is not installed (Debian: apt install "
                                   "bubblewrap)")
    try:
        seccomp_filter()
    except (ImportError, OSError, RuntimeError) as e:
        return SandboxProbe(False, f"no seccomp filter: pyseccomp/libseccomp unavailable ({e})")
    try:
        launch = command(SandboxSpec(writable=()), ["/bin/true"])
    except OSError as e:
        return SandboxProbe(False, f"cannot build the seccomp filter: {e}")
    try:
        done = subprocess.run(launch.argv, pass_fds=launch.pass_fds, capture_output=True,
                              timeout=_PROBE_TIMEOUT, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        return SandboxProbe(False, f"bwrap did not start: {e}")
    finally:
        launch.close()
    if done.returncode != 0:
        why = done.stderr.decode(errors="replace").strip().splitlines()
        return SandboxProbe(False, "bwrap cannot create its namespaces here (user namespaces "
                                   f"disabled?): {why[-1] if why else done.returncode}")
    return SandboxProbe(True, "")


def available() -> bool:
    """Whether safe runs go through the sandbox on this machine."""
    return probe().ok


def command(spec: SandboxSpec, argv: list[str]) -> SandboxLaunch:
    """The bwrap command line running ``argv`` under ``spec``, with the seccomp filter's
    descriptor (raises ``OSError`` when bwrap is missing or the filter cannot be built)."""
    bwrap = bwrap_path()
    if bwrap is None:
        raise OSError(errno.ENOENT, "bubblewrap (bwrap) is not installed")
    mounts = _mount_args(spec)  # before the descriptor: a refused spec leaks nothing
    fd = _filter_fd()
    args = _join_cgroup(spec.cgroup_procs)
    args += [bwrap, "--unshare-all", "--unshare-user", "--die-with-parent", "--new-session",
             "--cap-drop", "ALL"]
    if spec.share_net:
        args.append("--share-net")
    args += mounts
    args.append("--clearenv")
    kept = [(n, os.environ[n]) for n in spec.keep_env if n in os.environ]
    for name, value in (*kept, *spec.env):
        args += ["--setenv", name, value]
    cwd = spec.cwd or (spec.writable[0] if spec.writable else "/")
    args += ["--chdir", cwd, "--seccomp", str(fd), "--"]
    if spec.fsize_bytes is not None:
        n = str(int(spec.fsize_bytes))
        args += ["/usr/bin/prlimit", f"--fsize={n}:{n}", "--"]
    return SandboxLaunch(args + list(argv), (fd,))


def _join_cgroup(procs: str | None) -> list[str]:
    """A shell that moves itself into the run's cgroup, then becomes bwrap (no fork: nothing of
    the run starts outside the group). If it cannot join, the run still starts: its PID
    namespace holds it together without the group."""
    if procs is None:
        return []
    return ["/bin/sh", "-c", '{ echo $$ > "$0"; } 2>/dev/null; exec "$@"', procs]


def _mount_args(spec: SandboxSpec) -> list[str]:
    """The mount view, in bwrap's order: system read-only, fresh /tmp, /proc, /dev, the
    writable directories with their dot-entries hidden, then the read-only extras (last, so a
    helper inside a hidden cache stays reachable, read-only)."""
    args: list[str] = []
    for d in SYSTEM_DIRS:
        if os.path.islink(d):
            args += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            args += ["--ro-bind", d, d]
    for path in MASKED_SYSTEM:
        if os.path.isdir(path) and not os.path.islink(path):
            args += ["--size", str(4096), "--tmpfs", path, "--remount-ro", path]
        elif os.path.lexists(path):
            args += ["--ro-bind", "/dev/null", path]
    args += ["--size", str(TMP_BYTES), "--tmpfs", "/tmp", "--proc", "/proc", "--dev", "/dev"]
    writable = tuple(os.path.realpath(w) for w in spec.writable)
    for real in writable:
        if any(_beneath(d, real) for d in SYSTEM_DIRS):  # `/`: the system would be writable
            raise OSError(errno.EINVAL, f"the sandbox cannot make `{real}` writable: it holds "
                                        "the system's directories")
        args += ["--bind", real, real]
    for real in writable:
        args += _hide_args(real, writable)
    readable = list(spec.readable) + (_python_paths() if spec.python else [])
    for r in readable:
        real = os.path.realpath(r)
        if os.path.exists(real) and not any(_visible_in(real, w) for w in writable):
            args += ["--ro-bind", real, real]
    return args


def _visible_in(path: str, root: str) -> bool:
    """Whether ``path`` is already in view beneath the writable ``root`` (not under a hidden
    dot-entry): binding it read-only would make the notebook's own files read-only."""
    if not _beneath(path, root):
        return False
    rel = os.path.relpath(path, root)
    return not any(part.startswith(".") for part in rel.split(os.sep) if part != ".")


def _hide_args(directory: str, writable: tuple[str, ...]) -> list[str]:
    """Hide every dot-entry of ``directory`` (a tmpfs over a directory, a file bound read-only
    onto itself), and the :data:`HIDDEN_NAMES` even where missing. A dot-entry that is a
    symbolic link is never followed out (a run may have planted ``.x -> another home``): when
    it points into a writable directory its target is hidden instead, else it is left dangling
    (nothing outside the mount view is bound)."""
    args: list[str] = []
    try:
        names = {n for n in os.listdir(directory) if n.startswith(".")}
    except OSError:
        names = set()
    for name in sorted(names | set(HIDDEN_NAMES)):
        path = os.path.join(directory, name)
        if os.path.islink(path):
            target = os.path.realpath(path)
            if not any(_beneath(target, w) for w in writable) or not os.path.exists(target):
                continue
            path = target
        if os.path.exists(path) and not os.path.isdir(path):
            args += ["--ro-bind", path, path]
        else:
            args += ["--size", str(HIDDEN_BYTES), "--tmpfs", path]
    return args


def _beneath(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _python_paths() -> list[str]:
    """This Python's prefixes and import path, without the user's own site-packages."""
    import site

    user = os.path.realpath(site.getusersitepackages())
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    paths |= {p for p in sys.path if p and os.path.isdir(p)}
    keep = [p for p in paths if not os.path.realpath(p).startswith(user)]
    return sorted(keep)


# -- seccomp ------------------------------------------------------------------------------------

# Denied outright (EPERM). Names are libseccomp's, resolved per architecture; a name this
# architecture lacks (``ioperm`` on AArch64) is skipped.
DENIED_SYSCALLS: tuple[str, ...] = (
    "unshare", "setns", "mount", "umount", "umount2", "pivot_root", "chroot", "move_mount",
    "open_tree", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
    "ptrace", "process_vm_readv", "process_vm_writev", "bpf", "perf_event_open",
    "keyctl", "add_key", "request_key", "kexec_load", "kexec_file_load",
    "init_module", "finit_module", "delete_module", "swapon", "swapoff", "reboot",
    "userfaultfd", "open_by_handle_at", "name_to_handle_at", "ioperm", "iopl", "acct",
    "quotactl", "lookup_dcookie", "vhangup", "personality", "syslog", "uselib",
    # io_uring runs socket, open and other operations without their system calls, so past the
    # filter's argument checks.
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    "pidfd_getfd", "kcmp", "settimeofday", "clock_settime", "fanotify_init",
)
# Socket families allowed: AF_UNIX (1), AF_INET (2), AF_INET6 (10). Every other (netlink,
# packet, vsock to a hypervisor's host, AF_ALG, …) is refused.
_AF_ALLOWED = (1, 2, 10)
_AF_LAST_CHECKED = 10
_SOCK_RAW, _SOCK_PACKET, _SOCK_TYPE_MASK = 3, 10, 0xF
# clone(2) flags that create a namespace.
_CLONE_NS_FLAGS = (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000,
                   0x40000000, 0x00000080)  # NEWNS CGROUP UTS IPC USER PID NET TIME


def seccomp_filter(extra_arches: tuple[int, ...] = ()):
    """The sandbox's filter (a ``pyseccomp.SyscallFilter``, allow by default, every rule
    EPERM): see :data:`DENIED_SYSCALLS`, plus sockets of a family other than Unix, IPv4 and
    IPv6 (netlink, packet, vsock, …) or of a raw or packet type, ``clone`` with a namespace flag, and ``clone3`` (ENOSYS: its flags are
    behind a pointer a filter cannot read, and libc falls back to ``clone``). A system call of
    another architecture than the filter's (``extra_arches``: for a test) kills the process."""
    import pyseccomp as sc

    f = sc.SyscallFilter(defaction=sc.ALLOW)
    f.set_attr(sc.Attr.ACT_BADARCH, sc.KILL_PROCESS)  # 32-bit calls on x86-64: no way around
    for arch in extra_arches:
        if not f.exist_arch(arch):
            f.add_arch(arch)
    deny = sc.ERRNO(errno.EPERM)
    for name in DENIED_SYSCALLS:
        try:
            f.add_rule(deny, name)
        except (ValueError, OSError, RuntimeError):
            continue  # not a system call of this architecture
    for call in ("socket", "socketpair"):
        f.add_rule(deny, call, sc.Arg(0, sc.GT, _AF_LAST_CHECKED))
        for family in range(_AF_LAST_CHECKED):
            if family not in _AF_ALLOWED:
                f.add_rule(deny, call, sc.Arg(0, sc.EQ, family))
        for kind in (_SOCK_RAW, _SOCK_PACKET):
            f.add_rule(deny, call, sc.Arg(1, sc.MASKED_EQ, _SOCK_TYPE_MASK, kind))
    for flag in _CLONE_NS_FLAGS:
        f.add_rule(deny, "clone", sc.Arg(_clone_flags_arg(), sc.MASKED_EQ, flag, flag))
    try:
        f.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    except (ValueError, OSError, RuntimeError):
        pass
    return f


def _clone_flags_arg() -> int:
    """Which argument of ``clone`` holds the flags (the second on s390, the first elsewhere)."""
    return 1 if os.uname().machine.startswith("s390") else 0


@lru_cache(maxsize=1)
def _filter_bytes() -> bytes:
    """The compiled BPF program, built once per process."""
    import tempfile

    with tempfile.TemporaryFile() as tmp:
        seccomp_filter().export_bpf(tmp)
        tmp.seek(0)
        return tmp.read()


def _filter_fd() -> int:
    """A fresh close-on-exec memfd holding the filter, positioned at its start (bwrap reads it
    to the end), numbered above 9 so it never lands on a descriptor a launcher uses."""
    data = _filter_bytes()
    fd = os.memfd_create("cancho-seccomp", os.MFD_CLOEXEC)
    try:
        os.write(fd, data)
        os.lseek(fd, 0, os.SEEK_SET)
        import fcntl

        high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    finally:
        os.close(fd)
    return high
