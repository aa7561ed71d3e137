"""Small C helpers of our own (the exe launcher ``measure-*``, the JIT's child ``jit-child-*``),
compiled once with the machine's C compiler and reused by every later process — and used only
when their content is the one recorded when they were built.

Why the check (issue 22, docs/teaching.md): the user's cache is under ``$HOME``, which on a hub
is also the notebook's directory, so a run could once replace a helper that the next kernel
executes or loads unconfined. Each helper directory keeps a manifest (:data:`MANIFEST`: file
name -> SHA-256 of the binary) written by whoever built the helper; a helper whose bytes do not
hash to its entry (or has none, or is not a regular file owned by root or this user and writable
by them alone) is never run: it is rebuilt where the directory is writable, else the next
directory is tried. The file name carries a hash of the C source and flags, so an edited helper
is a new file; a build goes to a temporary directory first and is renamed into place, and the
manifest is updated under a lock, so concurrent builders agree.

Where helpers are looked up: ``$CANCHO_HELPER_DIR`` first when it is set (a hub prebuilds them as
root into a root-owned directory with ``python -m cancho_kernel.compiler.backends.chelper
--build DIR`` and sets the variable for students), then the user's cache (:func:`cache_dir`).
A caller that loads a helper should load the verified bytes (:attr:`Helper.content`), not the
path again, so a file swapped after the check is never the one used.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import shutil
import stat
import subprocess
from functools import lru_cache
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

HELPER_DIR_ENV = "CANCHO_HELPER_DIR"
MANIFEST = "manifest.json"


@dataclass(frozen=True)
class HelperSpec:
    """One helper: its C source, the stem of its file name and the compiler flags (a ``.so``
    when ``-shared`` is among them)."""

    source: str
    stem: str
    flags: tuple[str, ...] = ("-O2",)

    @property
    def name(self) -> str:
        """``stem-HASH[.so]``: HASH of the source and the flags."""
        digest = hashlib.sha256(self.source.encode() + "\0".join(self.flags).encode()).hexdigest()
        return f"{self.stem}-{digest[:16]}{'.so' if '-shared' in self.flags else ''}"


@dataclass(frozen=True)
class Helper:
    """A helper that verified: where it is, its bytes as hashed, and their SHA-256."""

    path: Path
    content: bytes
    sha256: str


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/cancho-kernel``, else ``~/.cache/cancho-kernel``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "cancho-kernel"


def helper_dirs() -> list[Path]:
    """Where helpers are looked up, in order: ``$CANCHO_HELPER_DIR`` (when set), the cache."""
    prebuilt = os.environ.get(HELPER_DIR_ENV)
    dirs = [Path(prebuilt)] if prebuilt else []
    return dirs + [d for d in [cache_dir()] if d not in dirs]


def c_compiler() -> list[str] | None:
    """``$CC`` (split into words), else ``cc`` or ``gcc`` on PATH; None without one."""
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    return cc.split() if cc else None


def _trusted(st: os.stat_result) -> bool:
    """Owned by root or this user, and writable by nobody else. Inside a user namespace (the
    safe-mode sandbox) a root-owned helper shows as the overflow uid: an owner no process in the
    namespace can act as, so it is as unwritable there as root's file is outside."""
    owners = (0, os.geteuid(), *_unmapped_owner())
    return st.st_uid in owners and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


@lru_cache(maxsize=1)
def _unmapped_owner() -> tuple[int, ...]:
    """The overflow uid when this process is in a user namespace that does not map every uid
    (the sandbox's); empty in the initial namespace, where that uid is an ordinary user."""
    try:
        mapping = Path("/proc/self/uid_map").read_text().split()
        overflow = int(Path("/proc/sys/kernel/overflowuid").read_text())
    except (OSError, ValueError):
        return ()
    if mapping[:3] == ["0", "0", "4294967295"]:
        return ()
    return (overflow,)


def _read_manifest(directory: Path) -> dict[str, str]:
    """The manifest's entries; empty when it is missing, malformed or not trusted."""
    try:
        fd = os.open(directory / MANIFEST, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return {}
    try:
        if not _trusted(os.fstat(fd)):
            return {}
        with os.fdopen(fd, "rb", closefd=False) as f:
            entries = json.loads(f.read()).get("helpers", {})
    except (OSError, ValueError, AttributeError):
        return {}
    finally:
        os.close(fd)
    return {k: v for k, v in entries.items() if isinstance(k, str) and isinstance(v, str)}


def _read_trusted(path: Path) -> bytes | None:
    """The bytes of ``path`` if it is a regular file (not a symbolic link) owned by root or this
    user and writable by them alone; read through one descriptor."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or not _trusted(st):
            return None
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read()
    except OSError:
        return None
    finally:
        os.close(fd)


def verify_digest(path: Path, sha256: str) -> Helper | None:
    """The helper at ``path`` if it is trusted (:func:`_read_trusted`) and its bytes hash to
    ``sha256`` (a digest verified earlier, e.g. passed to the JIT worker by the kernel)."""
    content = _read_trusted(path)
    if content is None or hashlib.sha256(content).hexdigest() != sha256:
        return None
    return Helper(path, content, sha256)


def verify(path: Path) -> Helper | None:
    """The helper at ``path`` if it is trusted and its bytes hash to its entry in its
    directory's manifest; None otherwise."""
    recorded = _read_manifest(path.parent).get(path.name)
    return verify_digest(path, recorded) if recorded is not None else None


def _record(directory: Path, name: str, digest: str) -> None:
    """Add ``name -> digest`` to the manifest, under a lock on the directory, atomically."""
    dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fcntl.flock(dfd, fcntl.LOCK_EX)
        entries = _read_manifest(directory)
        entries[name] = digest
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".manifest-")
        with os.fdopen(fd, "w") as f:
            json.dump({"helpers": entries}, f, indent=1, sort_keys=True)
        os.chmod(tmp, 0o644)
        os.replace(tmp, directory / MANIFEST)
    finally:
        os.close(dfd)  # releases the lock


def build(spec: HelperSpec, directory: Path) -> Helper | None:
    """Compile ``spec`` into ``directory`` (replacing what is there) and record it; None
    without a C compiler, when it does not compile, or when the directory is not writable."""
    cc = c_compiler()
    if cc is None:
        return None
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory() as tmp:
            src = Path(tmp) / f"{spec.stem}.c"
            src.write_text(spec.source)
            out = Path(tmp) / spec.name
            r = subprocess.run([*cc, *spec.flags, "-o", str(out), str(src)], capture_output=True,
                               stdin=subprocess.DEVNULL)
            if r.returncode != 0:
                return None
            os.chmod(out, 0o755)
            content = out.read_bytes()
            digest = hashlib.sha256(content).hexdigest()
            os.replace(out, directory / spec.name)  # atomic: concurrent builders agree on one file
        _record(directory, spec.name, digest)
    except OSError:
        return None
    return Helper(directory / spec.name, content, digest)


def _writable(directory: Path) -> bool:
    """Whether a helper can be built in ``directory`` (created if missing)."""
    probe = directory
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return os.access(probe, os.W_OK | os.X_OK)


def verified_helper(spec: HelperSpec) -> Helper | None:
    """The helper for ``spec``, verified: from the first directory of :func:`helper_dirs` where
    it verifies, else built into the first writable one on the way; None when none works."""
    for directory in helper_dirs():
        got = verify(directory / spec.name)
        if got is not None:
            return got
        if _writable(directory):
            built = build(spec, directory)
            if built is not None:
                return built
    return None


def built_helper(source: str, stem: str, flags: Sequence[str] = ("-O2",)) -> Path | None:
    """The path of the verified helper compiled from ``source`` with ``flags`` (see
    :func:`verified_helper`); None without one."""
    got = verified_helper(HelperSpec(source, stem, tuple(flags)))
    return got.path if got is not None else None


def known_helpers() -> list[HelperSpec]:
    """Every helper the backends use (for ``--build``)."""
    from .jit_child import CHILD_SPEC
    from .measure import SOURCE
    from .trapreport import OBJECT_SPEC

    return [HelperSpec(SOURCE, "measure"), CHILD_SPEC, OBJECT_SPEC]


def main(argv: list[str] | None = None) -> int:
    """``--build DIR``: compile every helper into DIR with its manifest (a hub does it as root
    into a root-owned directory, then sets ``CANCHO_HELPER_DIR=DIR`` for students)."""
    p = argparse.ArgumentParser(prog="python -m cancho_kernel.compiler.backends.chelper")
    p.add_argument("--build", metavar="DIR", required=True, type=Path)
    args = p.parse_args(argv)
    failed = [s.stem for s in known_helpers() if build(s, args.build) is None]
    for stem in failed:
        print(f"chelper: cannot build {stem} into {args.build} (a C compiler? writable?)",
              file=sys.stderr)
    if not failed:
        os.chmod(args.build, 0o755)
        print(f"chelper: helpers built into {args.build}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
