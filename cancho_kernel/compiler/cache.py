"""The on-disk build cache of `cancho build` / `cancho run` and the kernel's `exe` backend.

Like ccache, it keeps what a build produced under a key made of everything that decides it, so a
second build of an unchanged program links and goes (issue 15):

* **IR** entries are keyed by the program's sources (every file's path and bytes; the edition is
  a line of the source, and the std modules are part of the compiler's fingerprint), safe mode,
  and the compiler's fingerprint;
* **object** and **executable** entries are keyed by the IR text, the compiler's fingerprint,
  llvmlite's and LLVM's versions, the host triple, the optimisation level and, for executables,
  the linker command, its ``--version`` answer and the ``-l``/``-L`` arguments.

The compiler's fingerprint is the package version plus a hash of the compiler's own source
files and the std library, so editing the compiler invalidates every entry.

An entry is one file: a magic line, the SHA-256 of the payload, the payload. It is written to a
temporary file in the cache directory and renamed into place, so a concurrent reader sees the
old entry, the new one, or none, never half of one; an entry whose digest does not match is
deleted and treated as a miss. After every store the directory is trimmed to its size bound
(default 256 MiB, ``CANCHO_CACHE_SIZE``), oldest use first (a hit refreshes an entry's mtime).
Every failure of the cache itself (unwritable directory, full disk) is a miss, never a failed
build.

Location: ``$CANCHO_CACHE_DIR``, else ``$XDG_CACHE_HOME/cancho-kernel/builds``, else
``~/.cache/cancho-kernel/builds`` (a directory of its own: the size bound trims only build
entries, never the launcher and JIT files kept beside it).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from . import cpu

MAGIC = b"cancho-kernel-cache/1\n"
DIGEST_BYTES = 32
DEFAULT_MAX_BYTES = 256 << 20
STALE_TEMP_SECONDS = 3600.0
OPT_LEVEL = "O2"  # native.py's pipeline; part of every object and executable key
_SIZE = re.compile(r"^(\d+)\s*(k|kib|m|mib|g|gib)?$")
_UNITS = {None: 1, "k": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mib": 1 << 20, "g": 1 << 30,
          "gib": 1 << 30}


class Artefact(StrEnum):
    """What an entry holds; part of its key and of its file name."""

    IR = "ir"
    OBJECT = "o"
    EXECUTABLE = "exe"


def default_dir() -> Path:
    """``$CANCHO_CACHE_DIR``, else ``builds`` in ``$XDG_CACHE_HOME/cancho-kernel`` or
    ``~/.cache/cancho-kernel``."""
    explicit = os.environ.get("CANCHO_CACHE_DIR", "").strip()
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache"
    return base / "cancho-kernel" / "builds"


def parse_max_bytes(text: str | None) -> int:
    """``CANCHO_CACHE_SIZE``: bytes, or with k/M/G (binary units); unset or unreadable gives the
    default. ``0`` keeps nothing."""
    if text is None or not text.strip():
        return DEFAULT_MAX_BYTES
    m = _SIZE.match(text.strip().lower())
    if not m:
        return DEFAULT_MAX_BYTES
    return int(m.group(1)) * _UNITS[m.group(2)]


# -- what a key is made of -----------------------------------------------------------------------


@functools.cache
def compiler_fingerprint() -> str:
    """The package version and a hash of the compiler's sources and the std library: an edit of
    either is a new compiler. Computed once per process (the compiler does not change under a
    running one)."""
    from .. import __version__

    package = Path(__file__).resolve().parent.parent
    h = hashlib.sha256(__version__.encode())
    files = sorted([*package.joinpath("compiler").rglob("*.py"), *package.joinpath("std").rglob("*.cho")])
    for path in files:
        h.update(path.relative_to(package).as_posix().encode() + b"\0")
        h.update(path.read_bytes() + b"\0")
    return f"{__version__}+{h.hexdigest()[:32]}"


def llvm_fingerprint() -> str:
    """llvmlite's version (each release bundles one LLVM), the host, the optimisation level and
    the CPU code is generated for (``CANCHO_CPU``: a baseline build never reuses a host object).
    Without loading LLVM: a warm build never needs it."""
    import llvmlite

    return f"llvmlite {llvmlite.__version__}; {platform.machine()}-{sys.platform}; {OPT_LEVEL}; {cpu.identity()}"


def linker_fingerprint(cc: Sequence[str]) -> str:
    """The linker command and what its ``--version`` answers (an unusable linker is a key of its
    own, so a build with it misses and fails the way it would without a cache)."""
    path = shutil.which(cc[0]) if cc else None
    try:
        mtime = os.stat(path).st_mtime_ns if path else 0
    except OSError:
        mtime = 0
    return _linker_version(tuple(cc), path, mtime)


@functools.lru_cache(maxsize=8)
def _linker_version(cc: tuple[str, ...], path: str | None, mtime: int) -> str:
    try:
        proc = subprocess.run([*cc, "--version"], stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=10, check=False)
        answer = proc.stdout.decode("utf-8", "replace").strip() + f" [status {proc.returncode}]"
    except (OSError, subprocess.SubprocessError) as exc:
        answer = f"unusable: {exc}"
    return json.dumps([list(cc), path, mtime, answer])


def make_key(artefact: Artefact, parts: dict[str, object]) -> str:
    """A hex key from the artefact kind and the named parts (JSON, sorted, so equal parts give
    equal keys)."""
    text = json.dumps({"artefact": artefact.value, **parts}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


def sources_key(sources: Sequence[tuple[str, bytes]], safe: bool) -> str:
    """The key of a program's IR: every file's absolute path and bytes, safe mode, the compiler."""
    files = [[os.path.abspath(path), hashlib.sha256(data).hexdigest()] for path, data in sources]
    return make_key(Artefact.IR, {"files": files, "safe": safe, "compiler": compiler_fingerprint()})


def object_key(ir_text: str) -> str:
    """The key of the object file built from ``ir_text``."""
    return make_key(Artefact.OBJECT, {"ir": hashlib.sha256(ir_text.encode()).hexdigest(),
                                      "compiler": compiler_fingerprint(), "llvm": llvm_fingerprint()})


def executable_key(ir_text: str, cc: Sequence[str], libs: Sequence[str],
                   libdirs: Sequence[str]) -> str:
    """The key of the executable linked from ``ir_text`` by ``cc`` with these libraries."""
    return make_key(Artefact.EXECUTABLE, {
        "ir": hashlib.sha256(ir_text.encode()).hexdigest(), "compiler": compiler_fingerprint(),
        "llvm": llvm_fingerprint(), "linker": linker_fingerprint(cc), "libs": list(libs),
        "libdirs": [os.path.abspath(p) for p in libdirs]})


# -- the store -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class BuildCache:
    """A directory of entries bounded to ``max_bytes``. Every method answers a miss (None,
    False) rather than raise when the file system refuses."""

    root: Path
    max_bytes: int = DEFAULT_MAX_BYTES

    @classmethod
    def from_env(cls) -> "BuildCache":
        return cls(default_dir(), parse_max_bytes(os.environ.get("CANCHO_CACHE_SIZE")))

    def path_of(self, key: str, artefact: Artefact) -> Path:
        return self.root / f"{key}.{artefact.value}"

    def get(self, key: str, artefact: Artefact) -> bytes | None:
        """The payload stored under ``key``, or None; a corrupt entry is removed."""
        path = self.path_of(key, artefact)
        try:
            blob = path.read_bytes()
        except OSError:
            return None
        head = len(MAGIC) + DIGEST_BYTES
        payload = blob[head:]
        if (not blob.startswith(MAGIC) or len(blob) < head
                or hashlib.sha256(payload).digest() != blob[len(MAGIC):head]):
            _remove(path)
            return None
        try:
            os.utime(path)  # the last use, for eviction
        except OSError:
            pass
        return payload

    def put(self, key: str, artefact: Artefact, payload: bytes) -> bool:
        """Store ``payload`` atomically (temporary file, then rename), then trim to the bound."""
        if len(MAGIC) + DIGEST_BYTES + len(payload) > self.max_bytes:
            return False
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.root, prefix=".tmp-")
        except OSError:
            return False
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(MAGIC + hashlib.sha256(payload).digest() + payload)
            os.replace(tmp, self.path_of(key, artefact))
        except OSError:
            _remove(Path(tmp))
            return False
        self.trim()
        return True

    def trim(self) -> None:
        """Delete the least recently used entries until the directory fits ``max_bytes``;
        temporary files older than an hour (a writer killed mid-way) go too."""
        entries = []
        now = time.time()
        try:
            with os.scandir(self.root) as it:
                for e in it:
                    try:
                        st = e.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    if e.name.startswith(".tmp-"):
                        if now - st.st_mtime > STALE_TEMP_SECONDS:
                            _remove(Path(e.path))
                        continue
                    entries.append((st.st_mtime, st.st_size, e.path))
        except OSError:
            return
        total = sum(size for _m, size, _p in entries)
        for _mtime, size, path in sorted(entries):
            if total <= self.max_bytes:
                break
            _remove(Path(path))
            total -= size


def _remove(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass
